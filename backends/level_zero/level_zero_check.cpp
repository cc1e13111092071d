// Level Zero result names and meanings, and the accgraph error code of a failed call.
#include "level_zero_check.hpp"

#include <fmt/format.h>

#include "level_zero_graph_ext.hpp"

namespace accgraph::detail::level_zero {

namespace {

struct ResultInfo {
  ze_result_t value;
  const char* name;
  const char* meaning;
};

#define ACCGRAPH_ZE_RESULT(NAME, MEANING) \
  { NAME, #NAME, MEANING }
constexpr ResultInfo kResults[] = {
    ACCGRAPH_ZE_RESULT(ZE_RESULT_SUCCESS, "success"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_NOT_READY, "not ready yet"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_LOST,
                       "the device hung, was reset or removed, or the driver was updated"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, "out of device memory"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "the module failed to build"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_MODULE_LINK_FAILURE, "the module failed to link"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET, "the device requires a reset"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE,
                       "the device is in a low power state"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS, "permission denied"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_NOT_AVAILABLE, "the resource is in use"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, "a required dependency is missing"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNINITIALIZED, "the driver is not initialized"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_VERSION, "unsupported version"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
                       "the driver does not support this feature"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_ARGUMENT, "invalid argument"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NULL_HANDLE, "invalid (null) handle"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                       "the object is still in use by the device"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NULL_POINTER, "a pointer argument is null"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_SIZE, "invalid size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_SIZE, "the device does not support this size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT,
                       "the device does not support this alignment"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT,
                       "a synchronization object is in an invalid state"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_ENUMERATION, "invalid enumerator"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION,
                       "the device does not support this enumerator"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT, "unsupported image format"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY,
                       "the device does not support this native binary"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GLOBAL_NAME,
                       "no such global variable in the module"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_NAME, "no such kernel in the module"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_FUNCTION_NAME, "no such function in the module"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION, "invalid group size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION, "invalid global width"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX,
                       "invalid kernel argument index"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE,
                       "invalid kernel argument size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE, "invalid kernel attribute"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED, "the module must be linked first"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE,
                       "the command list type does not match the queue"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_OVERLAPPING_REGIONS, "the copy regions overlap"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_WARNING_ACTION_REQUIRED, "an action is required"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNKNOWN, "unknown or internal driver error"),
};
#undef ACCGRAPH_ZE_RESULT

// The graph extension's codes (level_zero_graph_ext.hpp; not in the 1.4 enum).
const ResultInfo kGraphResults[] = {
    {kResultQueryTrue, "ZE_RESULT_QUERY_TRUE", "query answered true"},
    {kResultQueryFalse, "ZE_RESULT_QUERY_FALSE", "query answered false"},
    {kResultErrorInvalidGraph, "ZE_RESULT_ERROR_INVALID_GRAPH", "invalid graph"},
    {kResultErrorGraphCaptureUnsupported, "ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED",
     "the operation cannot be captured into a graph"},
    {kResultErrorCommandListNotCapturing, "ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING",
     "the command list is not capturing"},
    {kResultErrorGraphUnjoinedForks, "ZE_RESULT_ERROR_GRAPH_UNJOINED_FORKS",
     "the capture has forks that were not joined"},
    {kResultQueryTrueExp, "ZE_RESULT_QUERY_TRUE_EXP", "query answered true"},
    {kResultQueryFalseExp, "ZE_RESULT_QUERY_FALSE_EXP", "query answered false"},
    {kResultErrorInvalidGraphExp, "ZE_RESULT_ERROR_INVALID_GRAPH_EXP", "invalid graph"},
};

const ResultInfo* find_result(ze_result_t result) noexcept {
  for (const ResultInfo& info : kResults)
    if (info.value == result) return &info;
  for (const ResultInfo& info : kGraphResults)
    if (info.value == result) return &info;
  return nullptr;
}

}  // namespace

std::string result_name(ze_result_t result) {
  if (const ResultInfo* info = find_result(result)) return info->name;
  return fmt::format("ze_result_t {:#010x}", static_cast<uint32_t>(result));
}

std::string_view result_meaning(ze_result_t result) noexcept {
  const ResultInfo* info = find_result(result);
  return info ? std::string_view(info->meaning) : std::string_view();
}

ErrorCode error_code_for(ze_result_t result) noexcept {
  switch (result) {
    case ZE_RESULT_ERROR_UNSUPPORTED_VERSION:
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE:
    case ZE_RESULT_ERROR_UNSUPPORTED_SIZE:
    case ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT:
    case ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION:
    case ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT:
      return ErrorCode::Unsupported;
    case ZE_RESULT_ERROR_UNINITIALIZED:
      return ErrorCode::Unavailable;
    default:
      if (result == kResultErrorGraphCaptureUnsupported) return ErrorCode::Unsupported;
      return ErrorCode::BackendError;
  }
}

}  // namespace accgraph::detail::level_zero
