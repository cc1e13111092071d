// The one exception family of accgraph: a canonical code plus the backend, native call and code.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "accgraph/export.hpp"

namespace accgraph {

/// A small canonical set of error codes (mirrored by the plugin C ABI's AccgraphStatus).
enum class ErrorCode {
  InvalidArgument = 1,  ///< a bad value from the caller (unknown backend, wrong stream, bad size)
  InvalidState = 2,     ///< a call in the wrong order (replay before capture, sync while capturing)
  Unavailable = 3,      ///< a backend or device that exists but cannot be used here (no driver)
  Unsupported = 4,      ///< a request the backend does not implement (capture mode, host calls)
  BackendError = 5,     ///< a native call failed (carries the call and the native code)
  PluginError = 6,      ///< a plugin library was rejected (names the file and the reason)
};

ACCGRAPH_API const char* to_string(ErrorCode code) noexcept;

/// Why a call failed, for the failures a caller handles apart from the rest, as data (Note
/// [Error reasons] in core/error.cpp): module timing in Python skips a module call that cannot be
/// timed and counts it by this reason, never by the message's wording. The values are stable and
/// never reused; a message may be reworded, a reason keeps its meaning. Every other error is
/// Unspecified.
///
///   try { prof.begin(stream, "step"); }
///   catch (const accgraph::Error& e) { if (e.reason() == accgraph::ErrorReason::NativeCapture) ...
///   }
enum class ErrorReason : uint8_t {
  Unspecified = 0,
  /// The stream captures into a graph accgraph was not told about (a native capture): time it
  /// through a ForeignGraph.
  NativeCapture = 1,
  /// The stream captures into an accgraph graph this profiler does not time: not attached, or
  /// attached after its capture began.
  UnattachedCapture = 2,
  /// The capture a region belongs to ended, or was aborted or reset, while the region began or
  /// was open.
  CaptureEnded = 3,
  /// Regions would not nest: a region is open across capture_begin or capture_end, the region
  /// ended is not the innermost open one, or none is open on the stream.
  RegionOrder = 4,
};

/// "native capture", "unattached capture", ... ("unspecified" for Unspecified).
ACCGRAPH_API const char* to_string(ErrorReason reason) noexcept;

/// Every error accgraph throws. what() is the full message: "[code] backend: message".
///
///   try { graph.replay(); }
///   catch (const accgraph::Error& e) { if (e.code() == accgraph::ErrorCode::InvalidState) ... }
class ACCGRAPH_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string backend = {}, std::string native_call = {},
        std::string native_code = {});
  /// An error with a reason a caller tells apart (ErrorReason); what() as above.
  Error(ErrorCode code, ErrorReason reason, std::string message, std::string backend = {});

  ErrorCode code() const noexcept { return code_; }
  /// Why it failed, where callers tell the case apart (ErrorReason); Unspecified otherwise.
  ErrorReason reason() const noexcept;
  /// The message without the code and backend prefix.
  const std::string& message() const noexcept { return message_; }
  /// The backend that raised it ("host", "cuda", ...), empty for core errors.
  const std::string& backend() const noexcept { return backend_; }
  /// The native call that failed ("cudaStreamEndCapture"), empty when none.
  const std::string& native_call() const noexcept { return native_call_; }
  /// The native result's name ("cudaErrorStreamCaptureInvalidated"), empty when none.
  const std::string& native_code() const noexcept { return native_code_; }

 private:
  ErrorCode code_;
  // In the padding after code_: Error keeps its size and member offsets (Note [Error reasons]).
  ErrorReason reason_ = ErrorReason::Unspecified;
  std::string message_;
  std::string backend_;
  std::string native_call_;
  std::string native_code_;
};

/// Where destructors and background threads report what they cannot throw.
enum class LogLevel { Debug, Info, Warning, Error };
using LogHandler = void (*)(LogLevel level, const char* message, void* user_data);

/// Replaces the log handler (nullptr restores the default, which prints warnings and errors to
/// stderr). Thread-safe.
ACCGRAPH_API void set_log_handler(LogHandler handler, void* user_data = nullptr);
ACCGRAPH_API void log(LogLevel level, const std::string& message) noexcept;

}  // namespace accgraph
