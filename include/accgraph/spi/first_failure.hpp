// SPI helper for backends: the first-failure bookkeeping behind synchronize() (Note [First
// failure]): the failure recorded, thrown once, or logged when the queue is destroyed unreported.
#pragma once

#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "accgraph/error.hpp"

namespace accgraph {

/// Note [First failure]: work that fails after it was enqueued (a throwing host call, a failed
/// node of a replay) cannot throw at the caller, who has moved on. A backend records the first
/// such failure of a queue here, keeps running the later work (a device does not stop its queue
/// either), and the next synchronize() throws it, once: afterwards the queue is clean again. A
/// queue destroyed with a failure nobody synchronized for logs it instead, so it is never
/// dropped silently. Thread-safe.
///
///   failures_.record(op.name, e.what());                     // the worker, in a catch block
///   failures_.throw_if_any("mybackend", "mybackend stream"); // the end of synchronize()
///
/// Thrown by an operation that runs others (a replay) to name the inner operation that failed:
/// FirstFailure records `operation` instead of the outer operation's name.
struct OperationFailure : std::runtime_error {
  OperationFailure(std::string operation_name, const std::string& what)
      : std::runtime_error(what), operation(std::move(operation_name)) {}
  std::string operation;
};

class FirstFailure {
 public:
  struct Failure {
    std::string operation;  ///< what failed, as the backend names its operations
    std::string message;    ///< the failure's what()
  };

  /// Keeps the failure unless an earlier one is still unreported.
  void record(std::string operation, std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = Failure{std::move(operation), std::move(message)};
  }

  /// Records the exception being handled (call it in a catch block): an OperationFailure under
  /// the inner operation it names, anything else under `operation`. Never throws.
  void record_current_exception(const std::string& operation) noexcept {
    try {
      try {
        throw;
      } catch (const OperationFailure& failure) {
        record(failure.operation, failure.what());
      } catch (const std::exception& e) {
        record(operation, e.what());
      } catch (...) {
        record(operation, "an exception that is not a std::exception");
      }
    } catch (...) {  // out of memory while recording: nothing better to do
    }
  }

  /// The failure recorded since the last take(), and forgets it.
  std::optional<Failure> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<Failure> taken = std::move(failure_);
    failure_.reset();
    return taken;
  }

  /// Throws the recorded failure as Error(BackendError) attributed to `backend`, naming the
  /// operation and `queue` (e.g. "host stream 0x5581..."); returns when there is none.
  void throw_if_any(std::string_view backend, std::string_view queue) {
    std::optional<Failure> failure = take();
    if (!failure) return;
    throw Error(ErrorCode::BackendError,
                "operation '" + failure->operation + "' on " + std::string(queue) +
                    " failed: " + failure->message +
                    " (synchronize() reports the first failure since the previous "
                    "synchronize(); later work still ran, and the stream can be used again)",
                std::string(backend));
  }

  /// For destructors: logs an unreported failure as a warning. Never throws.
  void log_if_any(std::string_view backend, std::string_view queue) noexcept {
    try {
      if (std::optional<Failure> failure = take())
        log(LogLevel::Warning, std::string(backend) + ": " + std::string(queue) +
                                   " was destroyed with an unreported failure of '" +
                                   failure->operation + "': " + failure->message +
                                   " (synchronize() the stream before destroying it to see "
                                   "such failures as errors)");
    } catch (...) {
    }
  }

 private:
  std::mutex mutex_;
  std::optional<Failure> failure_;
};

/// "host stream 0x55d0c0ffee00": how a FirstFailure names a queue, by the handle users see
/// (Stream::native_handle()) rather than a number private to the backend.
inline std::string describe_queue(std::string_view backend, const void* native_handle) {
  char shown[32];
  std::snprintf(shown, sizeof(shown), "%p", native_handle);
  return std::string(backend) + " stream " + shown;
}

}  // namespace accgraph
