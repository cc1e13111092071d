// VkResult names, meanings and what to do next after a failed call.
#include "vulkan_check.hpp"

#include <fmt/format.h>

namespace accgraph::detail::vulkan {

std::string result_name(VkResult result) {
  switch (result) {
#define ACCGRAPH_VK_RESULT(name) \
  case name:                     \
    return #name;
    ACCGRAPH_VK_RESULT(VK_SUCCESS)
    ACCGRAPH_VK_RESULT(VK_NOT_READY)
    ACCGRAPH_VK_RESULT(VK_TIMEOUT)
    ACCGRAPH_VK_RESULT(VK_EVENT_SET)
    ACCGRAPH_VK_RESULT(VK_EVENT_RESET)
    ACCGRAPH_VK_RESULT(VK_INCOMPLETE)
    ACCGRAPH_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    ACCGRAPH_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    ACCGRAPH_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    ACCGRAPH_VK_RESULT(VK_ERROR_DEVICE_LOST)
    ACCGRAPH_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    ACCGRAPH_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    ACCGRAPH_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    ACCGRAPH_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    ACCGRAPH_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    ACCGRAPH_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    ACCGRAPH_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    ACCGRAPH_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    ACCGRAPH_VK_RESULT(VK_ERROR_UNKNOWN)
    ACCGRAPH_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    ACCGRAPH_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    ACCGRAPH_VK_RESULT(VK_ERROR_FRAGMENTATION)
    ACCGRAPH_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef ACCGRAPH_VK_RESULT
    default:
      return fmt::format("VkResult({})", static_cast<int>(result));
  }
}

std::string result_meaning(VkResult result) {
  switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "the driver ran out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "the device is out of memory";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "the driver could not initialise an object";
    case VK_ERROR_DEVICE_LOST:
      return "the device was lost (a hang, a reset or a driver fault)";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "no compatible Vulkan driver (ICD) was found";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "a requested extension is not supported";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "a requested feature is not supported";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "the driver's limit on objects of this type is reached";
    case VK_TIMEOUT:
      return "the wait timed out";
    default:
      return "";
  }
}

std::string VkCall::hint(VkResult result) {
  switch (result) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "free buffers or allocate less";
    case VK_ERROR_DEVICE_LOST:
      return "the device cannot be used any more by this process: restart it";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "install a Vulkan driver, or point the loader at one with VK_DRIVER_FILES";
    default:
      return "";
  }
}

}  // namespace accgraph::detail::vulkan
