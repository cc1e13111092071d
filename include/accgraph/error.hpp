// The one exception family of accgraph: a canonical code plus the backend, native call and code.
#pragma once

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

/// Every error accgraph throws. what() is the full message: "[code] backend: message".
///
///   try { graph.replay(); }
///   catch (const accgraph::Error& e) { if (e.code() == accgraph::ErrorCode::InvalidState) ... }
class ACCGRAPH_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string backend = {}, std::string native_call = {},
        std::string native_code = {});

  ErrorCode code() const noexcept { return code_; }
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
