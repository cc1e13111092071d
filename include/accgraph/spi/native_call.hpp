// SPI helper for backends: checking native (vendor runtime) calls. One pattern for every vendor
// API that returns a result code (cudaError_t, ze_result_t, hipError_t, ...): a failed call
// becomes accgraph::Error naming the operation, the call, the result's name and meaning and what
// to do next; destructors log the same message instead of throwing. Header-only, like PoolTable.
#pragma once

#include <string>
#include <string_view>

#include "accgraph/error.hpp"

namespace accgraph {

/// The called function's name from a call's source text, as the check macros stringise it:
/// "cudaStreamEndCapture(stream_, &graph)" -> "cudaStreamEndCapture",
/// "device.graph_api.begin_capture(list, &call)" -> "begin_capture", "::zeInit (0)" -> "zeInit".
inline std::string native_call_name(std::string_view expression) {
  std::string_view name = expression.substr(0, expression.find('('));
  while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
  const size_t start = name.find_last_of(".:>");
  if (start != std::string_view::npos) name.remove_prefix(start + 1);
  return std::string(name);
}

/// Note [Native calls]: a backend describes its vendor API's result type once, in a traits
/// type, and checks every call with ACCGRAPH_NATIVE_CHECK (throws) or ACCGRAPH_NATIVE_LOG (for
/// destructors and other places that must not throw). The message is built only on failure:
///
///   "<what>: <call> failed with <name> (<meaning>)[: <hint>]"
///
/// and the Error carries the backend, the call and the result's name. The traits type:
///
///   struct MyCall {
///     using Result = my_result_t;
///     static constexpr const char* kBackend = "mybackend";
///     static bool succeeded(Result r) noexcept { return r == MY_SUCCESS; }
///     static std::string name(Result r);              // "MY_ERROR_OUT_OF_MEMORY"
///     static std::string meaning(Result r);           // "out of device memory"; may be empty
///     static std::string hint(Result r);              // what to do next; may be empty
///     static ErrorCode error_code(Result r) noexcept; // usually ErrorCode::BackendError
///     static void on_failure(Result r) noexcept {}    // e.g. clear a sticky last-error state
///   };
///   #define MY_CHECK(expr, what) ACCGRAPH_NATIVE_CHECK(MyCall, expr, what)
///   #define MY_LOG(expr, what) ACCGRAPH_NATIVE_LOG(MyCall, expr, what)
template <class Traits>
struct NativeCall {
  using Result = typename Traits::Result;

  /// The message of a failed call; `advice`, when given, replaces the traits' hint.
  static std::string message(Result result, std::string_view call, std::string_view what,
                             std::string_view advice = {}) {
    const std::string meaning = Traits::meaning(result);
    const std::string hint = advice.empty() ? Traits::hint(result) : std::string(advice);
    std::string text =
        std::string(what) + ": " + std::string(call) + " failed with " + Traits::name(result);
    if (!meaning.empty()) text += " (" + meaning + ")";
    if (!hint.empty()) text += ": " + hint;
    return text;
  }

  static Error error(Result result, std::string_view call, std::string_view what,
                     std::string_view advice = {}) {
    return Error(Traits::error_code(result), message(result, call, what, advice), Traits::kBackend,
                 std::string(call), Traits::name(result));
  }

  [[noreturn]] static void fail(Result result, std::string_view call, std::string_view what,
                                std::string_view advice = {}) {
    Traits::on_failure(result);
    throw error(result, call, what, advice);
  }

  /// Logs a failed call as a warning; never throws.
  static void log_failure(Result result, std::string_view call, std::string_view what) noexcept {
    Traits::on_failure(result);
    try {
      log(LogLevel::Warning, std::string(Traits::kBackend) + ": " + message(result, call, what));
    } catch (...) {
    }
  }

  /// The function form of the macros, for a call whose name is known: throws on failure.
  static void check(Result result, std::string_view call, std::string_view what) {
    if (!Traits::succeeded(result)) fail(result, call, what);
  }
};

}  // namespace accgraph

/// The body of the two macros below: evaluates EXPR once and hands a failed result to
/// NativeCall<TRAITS>::ON_FAILURE (fail or log_failure) with the name of the function EXPR calls
/// (CALL_TEXT: EXPR as written, stringified by the public macro before any expansion).
#define ACCGRAPH_DETAIL_NATIVE_CALL(TRAITS, EXPR, CALL_TEXT, WHAT, ON_FAILURE)                     \
  do {                                                                                             \
    const auto accgraph_native_result_ = (EXPR);                                                   \
    if (!TRAITS::succeeded(accgraph_native_result_))                                               \
      ::accgraph::NativeCall<TRAITS>::ON_FAILURE(accgraph_native_result_,                          \
                                                 ::accgraph::native_call_name(CALL_TEXT), (WHAT)); \
  } while (0)

/// ACCGRAPH_NATIVE_CHECK(MyCall, my_sync(queue), "synchronize"): throws the Error of Note
/// [Native calls] when the call fails, naming the function the expression calls.
#define ACCGRAPH_NATIVE_CHECK(TRAITS, EXPR, WHAT) \
  ACCGRAPH_DETAIL_NATIVE_CALL(TRAITS, EXPR, #EXPR, WHAT, fail)

/// The same for destructors and other places that must not throw: logs instead.
#define ACCGRAPH_NATIVE_LOG(TRAITS, EXPR, WHAT) \
  ACCGRAPH_DETAIL_NATIVE_CALL(TRAITS, EXPR, #EXPR, WHAT, log_failure)
