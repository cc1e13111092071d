// Toy streams: each operation runs on the calling thread when it is enqueued, or is recorded
// while a capture is attached (Note [Synchronous streams] in toy.hpp).
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "toy.hpp"

namespace toy {

using accgraph::ErrorCode;

// --- ToyQueue ----------------------------------------------------------------------------------

void ToyQueue::submit(Operation op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_) {
      capture_->operations.push_back(std::move(op));
      return;
    }
  }
  // Run outside mutex_: a host_call may enqueue on this or another toy stream.
  std::string failure;
  try {
    std::lock_guard<std::recursive_mutex> running(run_mutex_);
    op.run();
    return;
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "a non-standard exception";
  }
  // An asynchronous device would report this at the next synchronize(); so does the toy.
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_operation_.empty()) {
    failed_operation_ = op.name;
    failure_message_ = failure;
  }
}

void ToyQueue::synchronize() {
  // Nothing to wait for: every operation has run already. Only failures remain to report.
  std::string operation, message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    operation.swap(failed_operation_);
    message.swap(failure_message_);
  }
  if (!operation.empty())
    fail(ErrorCode::BackendError,
         "synchronize: the operation '" + operation + "' failed: " + message +
             " (the stream has run everything else enqueued and can be used again)");
}

bool ToyQueue::is_capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_ != nullptr;
}

void ToyQueue::set_capture(std::shared_ptr<Recording> recording) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = std::move(recording);
}

std::shared_ptr<Recording> ToyQueue::capture() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

// --- ToyStream ---------------------------------------------------------------------------------

ToyStream& as_toy_stream(accgraph::StreamImpl& stream, const char* operation) {
  auto* toy_stream = dynamic_cast<ToyStream*>(&stream);
  if (toy_stream == nullptr)
    fail(ErrorCode::InvalidArgument,
         std::string(operation) + ": the stream is not a toy stream: create it with "
                                  "Stream::create(\"toy\")");
  return *toy_stream;
}

// The core validated pointers and sizes (non-null, bytes > 0) before calling in.
void ToyStream::copy(void* dst, const void* src, size_t bytes) {
  queue_->submit({"copy " + std::to_string(bytes) + " bytes",
                  [dst, src, bytes] { std::memmove(dst, src, bytes); }});
}

void ToyStream::fill(void* dst, uint8_t value, size_t bytes) {
  queue_->submit({"fill " + std::to_string(bytes) + " bytes",
                  [dst, value, bytes] { std::memset(dst, value, bytes); }});
}

void ToyStream::host_call(std::function<void()> fn) {
  queue_->submit({"host_call", std::move(fn)});
}

// A busy-wait on the calling thread (the "device"), which ends exactly at the deadline: a sleep
// alone may oversleep by a scheduler tick. Long delays sleep first and spin only the last
// kSpinTail: a thread spinning for milliseconds uses up its time slice, and on a machine whose
// cores are shared it is then preempted for a whole slice (measured: a pure spin of 5 ms took a
// median 7.9 ms on 2 loaded cores, failing the conformance suite's timing bound).
void ToyStream::delay(std::chrono::nanoseconds duration) {
  queue_->submit({"delay " + std::to_string(duration.count()) + " ns", [duration] {
                    using clock = std::chrono::steady_clock;
                    constexpr auto kSpinTail = std::chrono::microseconds(200);
                    const auto deadline = clock::now() + duration;
                    if (duration > kSpinTail) std::this_thread::sleep_until(deadline - kSpinTail);
                    while (clock::now() < deadline) {
                    }
                  }});
}

// Everything enqueued on `other` has already run (Note [Synchronous streams]), so an eager wait
// has nothing to do. A capturing `other` would mean forking its capture onto this stream, which
// the toy does not support (capabilities().multi_stream_capture is false and the core refuses
// it first; this check keeps the backend honest if called directly).
void ToyStream::wait_for(accgraph::StreamImpl& other_impl) {
  ToyStream& other = as_toy_stream(other_impl, "wait_for");
  std::shared_ptr<Recording> other_capture = other.queue_->capture();
  if (other_capture && other_capture != queue_->capture())
    fail(ErrorCode::Unsupported,
         "wait_for: the other stream is capturing and the toy backend cannot capture across "
         "streams: enqueue the work on the capturing stream");
}

}  // namespace toy
