// The Level Zero backend's pure helpers: result names and errors, tick conversion, capture-path
// choice, and the graph extension's entry points behind one interface (see ze_support.hpp).
#include "ze_support.hpp"

#include <fmt/format.h>

namespace accgraph::detail::level_zero {

// --- results and errors ----------------------------------------------------------------------

namespace {

struct ResultInfo {
  ze_result_t value;
  const char* name;
  const char* meaning;
};

#define ACCGRAPH_ZE_RESULT(NAME, MEANING) {NAME, #NAME, MEANING}
constexpr ResultInfo kResults[] = {
    ACCGRAPH_ZE_RESULT(ZE_RESULT_SUCCESS, "success"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_NOT_READY, "not ready yet"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_LOST, "the device hung, was reset or removed, or the driver was updated"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, "out of device memory"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "the module failed to build"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_MODULE_LINK_FAILURE, "the module failed to link"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET, "the device requires a reset"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE, "the device is in a low power state"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS, "permission denied"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_NOT_AVAILABLE, "the resource is in use"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, "a required dependency is missing"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNINITIALIZED, "the driver is not initialized"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_VERSION, "unsupported version"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, "the driver does not support this feature"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_ARGUMENT, "invalid argument"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NULL_HANDLE, "invalid (null) handle"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE, "the object is still in use by the device"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NULL_POINTER, "a pointer argument is null"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_SIZE, "invalid size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_SIZE, "the device does not support this size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT, "the device does not support this alignment"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT, "a synchronization object is in an invalid state"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_ENUMERATION, "invalid enumerator"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION, "the device does not support this enumerator"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT, "unsupported image format"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY, "the device does not support this native binary"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GLOBAL_NAME, "no such global variable in the module"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_NAME, "no such kernel in the module"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_FUNCTION_NAME, "no such function in the module"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION, "invalid group size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION, "invalid global width"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX, "invalid kernel argument index"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE, "invalid kernel argument size"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE, "invalid kernel attribute"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED, "the module must be linked first"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE, "the command list type does not match the queue"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_OVERLAPPING_REGIONS, "the copy regions overlap"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_WARNING_ACTION_REQUIRED, "an action is required"),
    ACCGRAPH_ZE_RESULT(ZE_RESULT_ERROR_UNKNOWN, "unknown or internal driver error"),
};
#undef ACCGRAPH_ZE_RESULT

// The graph extension's codes (ze_graph_ext.hpp; not in the 1.4 enum).
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

// --- timer -----------------------------------------------------------------------------------

namespace {
// 128-bit intermediates keep tick conversions exact; __extension__ marks the GCC/Clang type as
// intended under -Wpedantic.
__extension__ typedef unsigned __int128 Wide;
}  // namespace

TickConverter::TickConverter(uint64_t numerator, uint64_t denominator, uint32_t valid_bits) noexcept
    : ns_numerator_(numerator),
      ns_denominator_(denominator == 0 ? 1 : denominator),
      valid_bits_(valid_bits == 0 || valid_bits > 64 ? 64 : valid_bits) {}

TickConverter TickConverter::from_frequency_hz(uint64_t hz, uint32_t valid_bits) {
  return TickConverter(1000000000ull, hz == 0 ? 1000000000ull : hz, valid_bits);
}

TickConverter TickConverter::from_ns_per_tick(uint64_t ns_per_tick, uint32_t valid_bits) {
  return TickConverter(ns_per_tick == 0 ? 1 : ns_per_tick, 1, valid_bits);
}

uint64_t TickConverter::mask() const noexcept {
  return valid_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << valid_bits_) - 1;
}

uint64_t TickConverter::ticks_to_ns(uint64_t ticks) const noexcept {
  Wide ns = static_cast<Wide>(ticks) * ns_numerator_ / ns_denominator_;
  return ns > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(ns);
}

uint64_t TickConverter::elapsed_ns(uint64_t from, uint64_t to) const noexcept {
  return ticks_to_ns((to - from) & mask());
}

uint64_t TickConverter::resolution_ns() const noexcept {
  uint64_t ns = (ns_numerator_ + ns_denominator_ - 1) / ns_denominator_;
  return ns == 0 ? 1 : ns;
}

uint64_t TickConverter::period_ns() const noexcept {
  if (valid_bits_ >= 64) return ~uint64_t{0};
  return ticks_to_ns(uint64_t{1} << valid_bits_);
}

bool TickConverter::window_is_unambiguous(uint64_t window_ns) const noexcept {
  constexpr uint64_t kFixedMarginNs = 50'000;
  const Wide needed =
      static_cast<Wide>(window_ns) + window_ns / 64 + kFixedMarginNs;
  return needed < period_ns();
}

void TickConverter::to_ns(const uint64_t* ticks, size_t count, uint64_t* ns) const {
  if (count == 0) return;
  uint64_t previous = ticks[0];  // ticks[i - 1] may already be overwritten when ns == ticks
  ns[0] = ticks_to_ns(previous & mask());
  for (size_t i = 1; i < count; ++i) {
    const uint64_t current = ticks[i];
    ns[i] = ns[i - 1] + elapsed_ns(previous, current);
    previous = current;
  }
}

// --- capture path ----------------------------------------------------------------------------

const char* to_string(CapturePath path) noexcept {
  return path == CapturePath::NativeGraph ? "native graphs" : "regular command lists";
}

const char* to_string(GraphFlavor flavor) noexcept {
  switch (flavor) {
    case GraphFlavor::Ext: return kGraphExtName;
    case GraphFlavor::Exp: return kGraphExpName;
    default: return "none";
  }
}

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// Why `flavor` cannot be used, or empty when it can.
std::string flavor_problem(const char* name, bool advertised, uint32_t flags,
                           const std::vector<std::string>& missing) {
  if (!advertised) return fmt::format("{} is not advertised", name);
  if ((flags & kGraphFlagImmutable) == 0)
    return fmt::format("{} is advertised but the device does not report the immutable-graph "
                       "capability (graphFlags {:#x})",
                       name, flags);
  if (!missing.empty())
    return fmt::format("{} is advertised but the driver resolved no address for {}", name,
                       join(missing));
  return {};
}

}  // namespace

PathChoice choose_capture_path(const GraphSupport& support) {
  PathChoice choice;
  if (support.forced_command_list) {
    choice.reason = "ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list";
    return choice;
  }
  std::string ext = flavor_problem(kGraphExtName, support.ext_advertised, support.ext_flags,
                                   support.ext_missing);
  if (ext.empty()) {
    choice.path = CapturePath::NativeGraph;
    choice.flavor = GraphFlavor::Ext;
    choice.reason = kGraphExtName;
    return choice;
  }
  std::string exp = flavor_problem(kGraphExpName, support.exp_advertised, support.exp_flags,
                                   support.exp_missing);
  if (exp.empty()) {
    choice.path = CapturePath::NativeGraph;
    choice.flavor = GraphFlavor::Exp;
    choice.reason = kGraphExpName;
    return choice;
  }
  if (!support.ext_advertised && !support.exp_advertised)
    choice.reason = "the driver advertises no record-and-replay graph extension";
  else
    choice.reason = fmt::format("{}; {}", ext, exp);
  return choice;
}

// --- GraphApi --------------------------------------------------------------------------------

namespace {

template <class Pfn>
void lookup(ze_driver_handle_t driver, const char* name, Pfn& out,
            std::vector<std::string>* missing) {
  void* address = nullptr;
  ze_result_t result = zeDriverGetExtensionFunctionAddress(driver, name, &address);
  if (result != ZE_RESULT_SUCCESS || address == nullptr) {
    out = nullptr;
    if (missing != nullptr) missing->emplace_back(name);
    return;
  }
  out = reinterpret_cast<Pfn>(address);
}

}  // namespace

GraphApi GraphApi::resolve(ze_driver_handle_t driver, GraphFlavor flavor,
                           std::vector<std::string>& missing) {
  GraphApi api;
  api.flavor_ = flavor;
  if (flavor == GraphFlavor::Ext) {
    lookup(driver, "zeCommandListBeginGraphCaptureExt", api.begin_ext_, &missing);
    lookup(driver, "zeCommandListEndGraphCaptureExt", api.end_ext_, &missing);
    lookup(driver, "zeGraphInstantiateExt", api.instantiate_ext_, &missing);
    lookup(driver, "zeCommandListAppendGraphExt", api.append_ext_, &missing);
    lookup(driver, "zeGraphDestroyExt", api.destroy_graph_ext_, &missing);
    lookup(driver, "zeExecutableGraphDestroyExt", api.destroy_executable_ext_, &missing);
    lookup(driver, "zeGraphDumpContentsExt", api.dump_ext_, nullptr);
    lookup(driver, "zeCommandListIsGraphCaptureEnabledExt", api.is_capturing_ext_, nullptr);
  } else if (flavor == GraphFlavor::Exp) {
    lookup(driver, "zeCommandListBeginGraphCaptureExp", api.begin_exp_, &missing);
    lookup(driver, "zeCommandListEndGraphCaptureExp", api.end_exp_, &missing);
    lookup(driver, "zeCommandListInstantiateGraphExp", api.instantiate_exp_, &missing);
    lookup(driver, "zeCommandListAppendGraphExp", api.append_exp_, &missing);
    lookup(driver, "zeGraphDestroyExp", api.destroy_graph_exp_, &missing);
    lookup(driver, "zeExecutableGraphDestroyExp", api.destroy_executable_exp_, &missing);
    lookup(driver, "zeGraphDumpContentsExp", api.dump_exp_, nullptr);
    lookup(driver, "zeCommandListIsGraphCaptureEnabledExp", api.is_capturing_exp_, nullptr);
  }
  return api;
}

bool GraphApi::can_dump() const noexcept {
  return flavor_ == GraphFlavor::Ext ? dump_ext_ != nullptr : dump_exp_ != nullptr;
}

bool GraphApi::can_query_capture() const noexcept {
  return flavor_ == GraphFlavor::Ext ? is_capturing_ext_ != nullptr : is_capturing_exp_ != nullptr;
}

std::optional<bool> GraphApi::query_answer(ze_result_t result) const noexcept {
  // Only this flavour's codes: an Exp driver's 0x7fff0000 is no answer to an Ext query.
  const bool ext = flavor_ == GraphFlavor::Ext;
  if (result == (ext ? kResultQueryTrue : kResultQueryTrueExp)) return true;
  if (result == (ext ? kResultQueryFalse : kResultQueryFalseExp)) return false;
  return std::nullopt;
}

// A flavour that was not resolved answers UNSUPPORTED_FEATURE instead of calling a null pointer.
#define ACCGRAPH_ZE_GRAPH_CALL(EXT_PTR, EXT_NAME, EXT_ARGS, EXP_PTR, EXP_NAME, EXP_ARGS)       \
  if (flavor_ == GraphFlavor::Ext) {                                                          \
    *call = EXT_NAME;                                                                         \
    return EXT_PTR ? EXT_PTR EXT_ARGS : ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;                  \
  }                                                                                           \
  *call = EXP_NAME;                                                                           \
  return EXP_PTR ? EXP_PTR EXP_ARGS : ZE_RESULT_ERROR_UNSUPPORTED_FEATURE

ze_result_t GraphApi::begin_capture(ze_command_list_handle_t list, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(begin_ext_, "zeCommandListBeginGraphCaptureExt", (list, nullptr),
                         begin_exp_, "zeCommandListBeginGraphCaptureExp", (list, nullptr));
}

ze_result_t GraphApi::end_capture(ze_command_list_handle_t list, ze_graph_handle* graph,
                                  const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(end_ext_, "zeCommandListEndGraphCaptureExt", (list, nullptr, graph),
                         end_exp_, "zeCommandListEndGraphCaptureExp", (list, graph, nullptr));
}

ze_result_t GraphApi::instantiate(ze_graph_handle graph, ze_executable_graph_handle* executable,
                                  const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(instantiate_ext_, "zeGraphInstantiateExt", (graph, nullptr, executable),
                         instantiate_exp_, "zeCommandListInstantiateGraphExp",
                         (graph, executable, nullptr));
}

ze_result_t GraphApi::append(ze_command_list_handle_t list, ze_executable_graph_handle executable,
                             ze_event_handle_t signal, uint32_t wait_count,
                             ze_event_handle_t* waits, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(append_ext_, "zeCommandListAppendGraphExt",
                         (list, executable, nullptr, signal, wait_count, waits), append_exp_,
                         "zeCommandListAppendGraphExp",
                         (list, executable, nullptr, signal, wait_count, waits));
}

ze_result_t GraphApi::destroy_graph(ze_graph_handle graph, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(destroy_graph_ext_, "zeGraphDestroyExt", (graph), destroy_graph_exp_,
                         "zeGraphDestroyExp", (graph));
}

ze_result_t GraphApi::destroy_executable(ze_executable_graph_handle executable,
                                         const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(destroy_executable_ext_, "zeExecutableGraphDestroyExt", (executable),
                         destroy_executable_exp_, "zeExecutableGraphDestroyExp", (executable));
}

ze_result_t GraphApi::dump(ze_graph_handle graph, const char* path, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(dump_ext_, "zeGraphDumpContentsExt", (graph, path, nullptr), dump_exp_,
                         "zeGraphDumpContentsExp", (graph, path, nullptr));
}

ze_result_t GraphApi::is_capture_enabled(ze_command_list_handle_t list, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(is_capturing_ext_, "zeCommandListIsGraphCaptureEnabledExt", (list),
                         is_capturing_exp_, "zeCommandListIsGraphCaptureEnabledExp", (list));
}

#undef ACCGRAPH_ZE_GRAPH_CALL

}  // namespace accgraph::detail::level_zero
