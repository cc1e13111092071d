// Internal: the Level Zero backend's pure helpers (result names and errors, timer conversion,
// capture-path choice) and the run-time-resolved graph extension (GraphApi). Built into a small
// static library so that tests/level_zero can test them without a driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <level_zero/ze_api.h>

#include "accgraph/error.hpp"
#include "accgraph/native_call.hpp"
#include "ze_graph_ext.hpp"

namespace accgraph::detail::level_zero {

inline constexpr const char* kBackendName = "level_zero";

// Flags newer than the Debian 1.4 headers (ze_api.h 1.7+). Drivers that predate them may refuse
// them; the backend then retries without (see Note [In-order lists] in stream.cpp).
inline constexpr uint32_t kCommandQueueFlagInOrder = 1u << 1;  // ZE_COMMAND_QUEUE_FLAG_IN_ORDER
inline constexpr uint32_t kCommandListFlagInOrder = 1u << 3;   // ZE_COMMAND_LIST_FLAG_IN_ORDER

// --- results and errors ----------------------------------------------------------------------

/// "ZE_RESULT_ERROR_DEVICE_LOST", the graph extension's codes included; for a value this backend
/// does not know, "ze_result_t 0x12345678".
std::string result_name(ze_result_t result);
/// A short meaning ("the device hung, was reset or removed"); empty for unknown values.
std::string_view result_meaning(ze_result_t result) noexcept;
/// The accgraph code a failed call maps to: UNSUPPORTED_* -> Unsupported, UNINITIALIZED ->
/// Unavailable, everything else BackendError.
ErrorCode error_code_for(ze_result_t result) noexcept;

/// ze_result_t for accgraph's native-call checks (Note [Native calls] in
/// accgraph/native_call.hpp): "<what>: <call> failed with <NAME> (<meaning>)[: <advice>]".
struct ZeCall {
  using Result = ze_result_t;
  static constexpr const char* kBackend = kBackendName;
  static bool succeeded(ze_result_t result) noexcept { return result == ZE_RESULT_SUCCESS; }
  static std::string name(ze_result_t result) { return result_name(result); }
  static std::string meaning(ze_result_t result) { return std::string(result_meaning(result)); }
  static std::string hint(ze_result_t) { return {}; }
  static ErrorCode error_code(ze_result_t result) noexcept { return error_code_for(result); }
  static void on_failure(ze_result_t) noexcept {}
};

/// "zeFoo(a, b(c))" -> "zeFoo": the call's name from the stringised expression.
inline std::string call_name(std::string_view expression) { return native_call_name(expression); }
/// The Error of a failed call, with backend, call and result name.
inline Error make_error(ze_result_t result, std::string_view call, std::string_view what,
                        std::string_view advice = {}) {
  return NativeCall<ZeCall>::error(result, call, what, advice);
}
[[noreturn]] inline void throw_error(ze_result_t result, std::string_view call,
                                     std::string_view what, std::string_view advice = {}) {
  NativeCall<ZeCall>::fail(result, call, what, advice);
}
/// For destructors: reports a failure through accgraph::log(Warning).
inline void log_failure(ze_result_t result, std::string_view call, std::string_view what) noexcept {
  NativeCall<ZeCall>::log_failure(result, call, what);
}

}  // namespace accgraph::detail::level_zero

/// Checks a Level Zero call; the message is built only on failure.
#define ACCGRAPH_ZE_CHECK(expr, what) \
  ACCGRAPH_NATIVE_CHECK(::accgraph::detail::level_zero::ZeCall, expr, what)
/// The same for destructors and other places that must not throw.
#define ACCGRAPH_ZE_LOG(expr, what) \
  ACCGRAPH_NATIVE_LOG(::accgraph::detail::level_zero::ZeCall, expr, what)

namespace accgraph::detail::level_zero {

// --- timer -----------------------------------------------------------------------------------

/// Device timestamp ticks -> nanoseconds. ze_device_properties_t::timerResolution is in Hz when
/// queried with ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 and in ns per tick (truncated to an
/// integer, so a 19.2 MHz timer reads 52 instead of 52.083) with the 1.0 structure; only the
/// low timestampValidBits bits of a timestamp count, so differences are taken modulo 2^bits.
class TickConverter {
 public:
  /// From the 1_2 properties (exact). hz == 0 is treated as 1 GHz; valid_bits outside 1..64 as 64.
  static TickConverter from_frequency_hz(uint64_t hz, uint32_t valid_bits);
  /// From the 1.0 properties (ns per tick, truncated by the driver).
  static TickConverter from_ns_per_tick(uint64_t ns_per_tick, uint32_t valid_bits);

  uint32_t valid_bits() const noexcept { return valid_bits_; }
  uint64_t mask() const noexcept;
  /// ns of `ticks` ticks (rounded down; 128-bit intermediate, never overflows).
  uint64_t ticks_to_ns(uint64_t ticks) const noexcept;
  /// ns from timestamp `from` to the later timestamp `to`, across one wraparound of the counter.
  uint64_t elapsed_ns(uint64_t from, uint64_t to) const noexcept;
  /// The duration of one tick, rounded up, at least 1 ns.
  uint64_t resolution_ns() const noexcept;
  /// ns of one period of the counter (2^valid_bits ticks); UINT64_MAX when that does not fit.
  uint64_t period_ns() const noexcept;
  /// True when timestamps all taken within `window_ns` of host time can be placed exactly: the
  /// window plus a margin for clock drift and sampling (1/64 of it, plus 50 us) is shorter
  /// than one period, so no two of them are a whole period or more apart (Note [Counter
  /// period] in markers.cpp).
  bool window_is_unambiguous(uint64_t window_ns) const noexcept;
  /// Timestamps taken in this order -> ns on one clock: the first is its masked value in ns,
  /// each later one the previous plus elapsed_ns(previous, this), so a sequence stays monotonic
  /// across a wraparound as long as consecutive stamps are less than one period apart. Writes
  /// ns[0..count); `ticks` and `ns` may be the same array.
  void to_ns(const uint64_t* ticks, size_t count, uint64_t* ns) const;

 private:
  TickConverter(uint64_t numerator, uint64_t denominator, uint32_t valid_bits) noexcept;
  uint64_t ns_numerator_;    // ns = ticks * ns_numerator_ / ns_denominator_
  uint64_t ns_denominator_;
  uint32_t valid_bits_;
};

// --- capture path ----------------------------------------------------------------------------

enum class CapturePath { NativeGraph, CommandList };
enum class GraphFlavor { None, Ext, Exp };

const char* to_string(CapturePath path) noexcept;
const char* to_string(GraphFlavor flavor) noexcept;

/// What the driver and device say about the record-and-replay graph extension.
struct GraphSupport {
  bool ext_advertised = false;  ///< ZE_extension_record_replay_graph in the driver's extensions
  bool exp_advertised = false;  ///< ZE_experimental_record_replay_graph
  uint32_t ext_flags = 0;       ///< graphFlags answered for the Ext properties stype
  uint32_t exp_flags = 0;       ///< graphFlags answered for the Exp properties stype
  std::vector<std::string> ext_missing;  ///< Ext entry points the driver did not resolve
  std::vector<std::string> exp_missing;  ///< Exp entry points the driver did not resolve
  bool forced_command_list = false;      ///< ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list
};

struct PathChoice {
  CapturePath path = CapturePath::CommandList;
  GraphFlavor flavor = GraphFlavor::None;
  std::string reason;  ///< why, in words (shown in the device name and debug log)
};

/// Native graphs when a flavour is advertised, reports at least the immutable-graph capability
/// and resolved every entry point the backend uses (stable Ext preferred); else command lists.
PathChoice choose_capture_path(const GraphSupport& support);

/// The graph extension's entry points for one flavour, resolved with
/// zeDriverGetExtensionFunctionAddress, behind one Ext-shaped interface (Note [Graph Ext vs Exp]).
class GraphApi {
 public:
  GraphApi() = default;
  /// Resolves the entry points of `flavor`; the names it could not resolve go to `missing`
  /// (the dump and capture-query entry points are optional and never listed).
  static GraphApi resolve(ze_driver_handle_t driver, GraphFlavor flavor,
                          std::vector<std::string>& missing);

  GraphFlavor flavor() const noexcept { return flavor_; }
  bool can_dump() const noexcept;
  /// zeCommandListIsGraphCaptureEnabled{Ext,Exp} was resolved (Note [Native captures of wrapped
  /// lists] in stream.cpp).
  bool can_query_capture() const noexcept;

  /// Each returns the driver's result; `call` names the entry point used, for errors.
  ze_result_t begin_capture(ze_command_list_handle_t list, const char** call) const;
  ze_result_t end_capture(ze_command_list_handle_t list, ze_graph_handle* graph,
                          const char** call) const;
  ze_result_t instantiate(ze_graph_handle graph, ze_executable_graph_handle* executable,
                          const char** call) const;
  ze_result_t append(ze_command_list_handle_t list, ze_executable_graph_handle executable,
                     ze_event_handle_t signal, uint32_t wait_count, ze_event_handle_t* waits,
                     const char** call) const;
  ze_result_t destroy_graph(ze_graph_handle graph, const char** call) const;
  ze_result_t destroy_executable(ze_executable_graph_handle executable, const char** call) const;
  ze_result_t dump(ze_graph_handle graph, const char* path, const char** call) const;
  /// Whether `list` records into a graph: the driver's result, QUERY_TRUE/QUERY_FALSE of this
  /// flavour when it answers (read it with query_answer).
  ze_result_t is_capture_enabled(ze_command_list_handle_t list, const char** call) const;
  /// A query's answer in this flavour's codes: true for QUERY_TRUE, false for QUERY_FALSE,
  /// nothing for any other result (an error, or a code this backend does not know).
  std::optional<bool> query_answer(ze_result_t result) const noexcept;

 private:
  GraphFlavor flavor_ = GraphFlavor::None;
  // Ext
  PfnBeginGraphCaptureExt begin_ext_ = nullptr;
  PfnEndGraphCaptureExt end_ext_ = nullptr;
  PfnGraphInstantiateExt instantiate_ext_ = nullptr;
  PfnAppendGraphExt append_ext_ = nullptr;
  PfnGraphDestroyExt destroy_graph_ext_ = nullptr;
  PfnExecutableGraphDestroyExt destroy_executable_ext_ = nullptr;
  PfnGraphDumpContentsExt dump_ext_ = nullptr;
  PfnIsGraphCaptureEnabledExt is_capturing_ext_ = nullptr;
  // Exp
  PfnBeginGraphCaptureExp begin_exp_ = nullptr;
  PfnEndGraphCaptureExp end_exp_ = nullptr;
  PfnInstantiateGraphExp instantiate_exp_ = nullptr;
  PfnAppendGraphExp append_exp_ = nullptr;
  PfnGraphDestroyExp destroy_graph_exp_ = nullptr;
  PfnExecutableGraphDestroyExp destroy_executable_exp_ = nullptr;
  PfnGraphDumpContentsExp dump_exp_ = nullptr;
  PfnIsGraphCaptureEnabledExp is_capturing_exp_ = nullptr;
};

}  // namespace accgraph::detail::level_zero
