// SPI helper for backends whose device is the CPU: an in-order queue of operations run by one
// worker thread, asynchronously to the threads that enqueue them, with tickets for eager
// wait_for and the first-failure report of synchronize(). Header-only, like PoolTable; the host
// backend and examples/async_backend build their streams on it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "accgraph/error.hpp"
#include "accgraph/spi/first_failure.hpp"

namespace accgraph {

/// Operations run in the order they were pushed, one at a time, on the queue's own thread. A
/// failing operation does not stop the queue: the next synchronize() reports the first failure
/// (Note [First failure]). stop() (or the destructor) runs what was pushed, then ends the
/// thread; like cudaStreamDestroy, destroying a queue does not drop its work.
///
///   accgraph::WorkerQueue queue{"mybackend"};
///   queue.push("fill", [=] { std::memset(dst, value, bytes); });
///   const uint64_t ticket = queue.ticket();  // what another queue's wait_for waits until
///   queue.synchronize();
class WorkerQueue {
 public:
  /// `native_handle`: what errors call the queue by (its stream's native_handle()); this
  /// object when null.
  explicit WorkerQueue(std::string backend, const void* native_handle = nullptr)
      : backend_(std::move(backend)),
        handle_(native_handle ? native_handle : this),
        worker_([this] { work(); }) {}
  ~WorkerQueue() { stop(); }
  WorkerQueue(const WorkerQueue&) = delete;
  WorkerQueue& operator=(const WorkerQueue&) = delete;

  /// Hands `run` to the worker. Error(InvalidState) naming `name` once the queue was stopped.
  void push(std::string name, std::function<void()> run) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_)
      throw Error(ErrorCode::InvalidState,
                  name + ": the " + describe_queue(backend_, handle_) +
                      " was destroyed with the stream that owned it: a wrapped stream must not "
                      "outlive the stream it wraps; destroy the wrapper first, or keep the "
                      "original Stream alive while it is used",
                  backend_);
    pending_.push_back(Pending{std::move(name), std::move(run)});
    ++pushed_;
    work_cv_.notify_one();
  }

  /// Operations pushed so far: wait_until(ticket()) waits for all of them.
  uint64_t ticket() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pushed_;
  }

  /// Blocks until the first `ticket` operations have run.
  void wait_until(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_ >= ticket; });
  }

  /// Waits for everything pushed so far, then throws the first failure since the last call.
  void synchronize() {
    wait_until(ticket());
    failures_.throw_if_any(backend_, describe_queue(backend_, handle_));
  }

  /// Runs what was pushed, ends the worker, and logs a failure nobody synchronized for; later
  /// pushes are InvalidState. Safe to call twice, and from one of the queue's own operations.
  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    if (worker_.joinable()) {
      // The last reference may be dropped by an operation of this very queue: never join the
      // thread that is running.
      if (worker_.get_id() == std::this_thread::get_id())
        worker_.detach();
      else
        worker_.join();
    }
    failures_.log_if_any(backend_, describe_queue(backend_, handle_));
  }

 private:
  struct Pending {
    std::string name;
    std::function<void()> run;
  };

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and everything pushed has run
      Pending op = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      try {
        op.run();
      } catch (...) {
        // Recorded before the completion that lets synchronize() return.
        failures_.record_current_exception(op.name);
      }
      op = Pending{};  // may hold the last reference to another queue: released unlocked
      lock.lock();
      ++done_;
      done_cv_.notify_all();
    }
  }

  const std::string backend_;
  const void* const handle_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // the worker waits for operations
  std::condition_variable done_cv_;  // wait_until waits for completions
  std::deque<Pending> pending_;
  uint64_t pushed_ = 0;
  uint64_t done_ = 0;
  bool stopping_ = false;
  FirstFailure failures_;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace accgraph
