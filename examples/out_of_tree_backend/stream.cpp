// Toy streams: each operation runs on the calling thread when it is enqueued, or is recorded
// while a capture is attached (Note [Synchronous streams] in toy.hpp).
#include <chrono>
#include <cstring>
#include <exception>

#include <accgraph/spi/host_delay.hpp>

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
  try {
    std::lock_guard<std::recursive_mutex> running(run_mutex_);
    op.run();
  } catch (...) {
    // An asynchronous device would report this at the next synchronize(); so does the toy.
    failures_.record_current_exception(op.name);
  }
}

void ToyQueue::synchronize() {
  // Nothing to wait for: every operation has run already. Only failures remain to report.
  failures_.throw_if_any(kBackendName, accgraph::describe_queue(kBackendName, this));
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

// Runs on the calling thread (the "device"): a sleep, then a spin to the exact deadline.
void ToyStream::delay(std::chrono::nanoseconds duration) {
  queue_->submit({"delay " + std::to_string(duration.count()) + " ns",
                  [duration] { accgraph::delay_on_this_thread(duration); }});
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
