// Internal: Level Zero result codes in words and the backend's native-call checks (ZeCall,
// ACCGRAPH_ZE_CHECK), built into the support library that tests/level_zero tests without a driver.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <level_zero/ze_api.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/native_call.hpp"

namespace accgraph::detail::level_zero {

inline constexpr const char* kBackendName = "level_zero";

/// "ZE_RESULT_ERROR_DEVICE_LOST", the graph extension's codes included; for a value this backend
/// does not know, "ze_result_t 0x12345678".
std::string result_name(ze_result_t result);
/// A short meaning ("the device hung, was reset or removed"); empty for unknown values.
std::string_view result_meaning(ze_result_t result) noexcept;
/// The accgraph code a failed call maps to: UNSUPPORTED_* -> Unsupported, UNINITIALIZED ->
/// Unavailable, everything else BackendError.
ErrorCode error_code_for(ze_result_t result) noexcept;

/// ze_result_t for accgraph's native-call checks (Note [Native calls] in
/// accgraph/spi/native_call.hpp): "<what>: <call> failed with <NAME> (<meaning>)[: <advice>]".
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
