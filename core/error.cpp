// accgraph::Error and the log handler that destructors and background threads report through.
#include "accgraph/error.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

#include <fmt/format.h>

namespace accgraph {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "invalid argument";
    case ErrorCode::InvalidState:
      return "invalid state";
    case ErrorCode::Unavailable:
      return "unavailable";
    case ErrorCode::Unsupported:
      return "unsupported";
    case ErrorCode::BackendError:
      return "backend error";
    case ErrorCode::PluginError:
      return "plugin error";
  }
  return "unknown error";
}

// Note [Error reasons]: a caller that must tell one failure from another (Python's module
// timing: a call on a stream that captures natively is skipped and counted under its reason)
// reads Error::reason(), a stable value, and never parses the message: messages are for people
// and get reworded. A reason names a situation, not a throw site, so several sites share one;
// an error no caller needs to tell apart stays Unspecified. The reason lives in the padding
// after code_, so Error keeps the size and member offsets it had: a plugin built against the
// headers before it (plugin ABI 2.3, which allocates and copies Errors with its own inline
// code) still throws and catches the same object. A copy made by such code may carry a value
// it never set; reason() reads anything it does not know as Unspecified.
const char* to_string(ErrorReason reason) noexcept {
  switch (reason) {
    case ErrorReason::Unspecified:
      return "unspecified";
    case ErrorReason::NativeCapture:
      return "native capture";
    case ErrorReason::UnattachedCapture:
      return "unattached capture";
    case ErrorReason::CaptureEnded:
      return "capture ended";
    case ErrorReason::RegionOrder:
      return "region order";
  }
  return "unspecified";
}

namespace {

// What Error looked like before it carried a reason (Note [Error reasons]).
struct ErrorLayoutBeforeReasons : std::runtime_error {
  ErrorCode code;
  std::string message, backend, native_call, native_code;
};
static_assert(sizeof(Error) == sizeof(ErrorLayoutBeforeReasons),
              "Error::reason_ must fit in the padding after code_ (Note [Error reasons])");

std::string full_message(ErrorCode code, const std::string& message, const std::string& backend,
                         const std::string& native_call, const std::string& native_code) {
  std::string text = fmt::format("[{}] ", to_string(code));
  if (!backend.empty()) text += fmt::format("{}: ", backend);
  text += message;
  if (!native_call.empty()) {
    text += fmt::format(" ({}", native_call);
    if (!native_code.empty()) text += fmt::format(" returned {}", native_code);
    text += ")";
  }
  return text;
}

}  // namespace

Error::Error(ErrorCode code, std::string message, std::string backend, std::string native_call,
             std::string native_code)
    : std::runtime_error(full_message(code, message, backend, native_call, native_code)),
      code_(code),
      message_(std::move(message)),
      backend_(std::move(backend)),
      native_call_(std::move(native_call)),
      native_code_(std::move(native_code)) {}

Error::Error(ErrorCode code, ErrorReason reason, std::string message, std::string backend)
    : Error(code, std::move(message), std::move(backend)) {
  reason_ = reason;
}

ErrorReason Error::reason() const noexcept {
  switch (reason_) {
    case ErrorReason::NativeCapture:
    case ErrorReason::UnattachedCapture:
    case ErrorReason::CaptureEnded:
    case ErrorReason::RegionOrder:
      return reason_;
    case ErrorReason::Unspecified:
      break;
  }
  return ErrorReason::Unspecified;
}

namespace {

struct LogSink {
  std::mutex mutex;
  LogHandler handler = nullptr;
  void* user_data = nullptr;
};

LogSink& log_sink() {
  static LogSink sink;
  return sink;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "debug";
    case LogLevel::Info:
      return "info";
    case LogLevel::Warning:
      return "warning";
    case LogLevel::Error:
      return "error";
  }
  return "log";
}

}  // namespace

void set_log_handler(LogHandler handler, void* user_data) {
  LogSink& sink = log_sink();
  std::lock_guard<std::mutex> lock(sink.mutex);
  sink.handler = handler;
  sink.user_data = user_data;
}

void log(LogLevel level, const std::string& message) noexcept {
  LogSink& sink = log_sink();
  std::lock_guard<std::mutex> lock(sink.mutex);
  if (sink.handler != nullptr) {
    sink.handler(level, message.c_str(), sink.user_data);
    return;
  }
  if (level == LogLevel::Warning || level == LogLevel::Error)
    std::fprintf(stderr, "accgraph %s: %s\n", level_name(level), message.c_str());
}

}  // namespace accgraph
