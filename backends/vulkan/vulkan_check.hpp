// Internal: VkResult in words and the backend's native-call checks (VkCall, ACCGRAPH_VK_CHECK);
// pure, tested without a driver (tests/vulkan).
#pragma once

#include <string>

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/native_call.hpp"

namespace accgraph::detail::vulkan {

inline constexpr const char* kBackendName = "vulkan";

/// "VK_ERROR_DEVICE_LOST" for a VkResult ("VkResult(-12345)" for one this list lacks).
std::string result_name(VkResult result);
/// What a VkResult means, in words (empty when nothing useful can be said).
std::string result_meaning(VkResult result);

/// VkResult for accgraph's native-call checks. VK_SUCCESS only: the calls the backend checks
/// with it never legitimately return VK_TIMEOUT, VK_NOT_READY or VK_INCOMPLETE (where one may,
/// the call site handles that code itself).
struct VkCall {
  using Result = VkResult;
  static constexpr const char* kBackend = kBackendName;
  static bool succeeded(VkResult result) noexcept { return result == VK_SUCCESS; }
  static std::string name(VkResult result) { return result_name(result); }
  static std::string meaning(VkResult result) { return result_meaning(result); }
  static std::string hint(VkResult result);
  static ErrorCode error_code(VkResult) noexcept { return ErrorCode::BackendError; }
  static void on_failure(VkResult) noexcept {}
};

/// ACCGRAPH_VK_CHECK(vk().vkQueueSubmit(...), "replay") throws, naming the call and the result;
/// ACCGRAPH_VK_LOG(...) logs instead, for destructors.
#define ACCGRAPH_VK_CHECK(expr, what) \
  ACCGRAPH_NATIVE_CHECK(::accgraph::detail::vulkan::VkCall, expr, what)
#define ACCGRAPH_VK_LOG(expr, what) \
  ACCGRAPH_NATIVE_LOG(::accgraph::detail::vulkan::VkCall, expr, what)

}  // namespace accgraph::detail::vulkan
