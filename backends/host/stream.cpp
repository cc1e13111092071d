// Host streams: an in-order queue run by one worker thread, the recording that captures it, and
// fork/join between queues (eagerly by tickets, during capture by vector clocks).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "host_internal.hpp"

namespace accgraph::detail::host {

// --- Completion --------------------------------------------------------------------------------

void Completion::signal() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void Completion::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

// --- HostQueue ---------------------------------------------------------------------------------

namespace {

// The live queues, so wrap_stream can refuse a pointer that is not one (a native handle is a
// void*: without this a wrong pointer would be dereferenced).
struct LiveQueues {
  std::mutex mutex;
  std::map<const void*, std::weak_ptr<HostQueue>> queues;
};

LiveQueues& live_queues() {
  static LiveQueues* live = new LiveQueues;  // leaked: queues may shut down during static exit
  return *live;
}

std::atomic<uint64_t> next_queue_id{1};

}  // namespace

HostQueue::HostQueue() : id_(next_queue_id.fetch_add(1)) {}

std::shared_ptr<HostQueue> HostQueue::create() {
  std::shared_ptr<HostQueue> queue(new HostQueue());
  queue->worker_ = std::thread([raw = queue.get()] { raw->run_worker(); });
  LiveQueues& live = live_queues();
  std::lock_guard<std::mutex> lock(live.mutex);
  live.queues[queue.get()] = queue;
  return queue;
}

std::shared_ptr<HostQueue> HostQueue::find_live(void* handle) {
  LiveQueues& live = live_queues();
  std::lock_guard<std::mutex> lock(live.mutex);
  auto it = live.queues.find(handle);
  return it == live.queues.end() ? nullptr : it->second.lock();
}

HostQueue::~HostQueue() { shutdown(); }

void HostQueue::run_worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, and everything enqueued has run
    Operation op = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    std::string failed, message;
    try {
      op.run();
    } catch (const OperationFailure& f) {
      failed = f.operation;
      message = f.what();
    } catch (const std::exception& e) {
      failed = op.name;
      message = e.what();
    } catch (...) {
      failed = op.name;
      message = "a non-standard exception";
    }
    // The closure may hold the last reference to another queue: release it unlocked.
    op = Operation{};
    lock.lock();
    // Later operations still run (a device does not stop its queue either); synchronize()
    // reports the first failure.
    if (!failed.empty() && failed_operation_.empty()) {
      failed_operation_ = std::move(failed);
      failure_message_ = std::move(message);
    }
    ++completed_;
    done_cv_.notify_all();
  }
}

void HostQueue::enqueue(Operation op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) {
    capture_->append(id_, std::move(op));
    return;
  }
  if (stopping_)
    throw Error(ErrorCode::InvalidState,
                fmt::format("{}: host queue {} was destroyed with the stream that owned it: a "
                            "wrapped stream must not outlive the stream it wraps",
                            op.name, id_),
                kBackendName);
  pending_.push_back(std::move(op));
  ++submitted_;
  work_cv_.notify_one();
}

uint64_t HostQueue::submitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return submitted_;
}

void HostQueue::wait_until(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
}

void HostQueue::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = submitted_;
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
  if (failed_operation_.empty()) return;
  std::string operation = std::move(failed_operation_);
  std::string message = std::move(failure_message_);
  failed_operation_.clear();
  failure_message_.clear();
  lock.unlock();
  throw Error(ErrorCode::BackendError,
              fmt::format("operation '{}' on host stream {} failed: {} (synchronize() reports the "
                          "first failure since the previous synchronize(); later work still ran)",
                          operation, id_, message),
              kBackendName);
}

void HostQueue::shutdown() noexcept {
  {
    LiveQueues& live = live_queues();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.queues.erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) {
    // The last reference can be dropped by an operation of this very queue (a wrapper's
    // wait_for on its own queue is a no-op, but be safe): joining would deadlock.
    if (worker_.get_id() == std::this_thread::get_id())
      worker_.detach();
    else
      worker_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failed_operation_.empty()) {
    log(LogLevel::Warning,
        fmt::format("host stream {} destroyed with an unreported failure of '{}': {}", id_,
                    failed_operation_, failure_message_));
    failed_operation_.clear();
  }
}

std::shared_ptr<Recording> HostQueue::capture() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

void HostQueue::set_capture(std::shared_ptr<Recording> recording) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = std::move(recording);
}

// --- Recording ---------------------------------------------------------------------------------

Recording::Recording(const std::shared_ptr<HostQueue>& origin) : origin_(origin->id()) {
  clock(origin);
}

Recording::Clock& Recording::clock(const std::shared_ptr<HostQueue>& queue) {
  Clock& c = clocks_[queue->id()];
  if (c.queue.expired()) c.queue = queue;
  return c;
}

void Recording::append(uint64_t stream, Operation op) {
  std::lock_guard<std::mutex> lock(mutex_);
  Clock& c = clocks_.at(stream);  // a queue is attached only through the constructor or merge()
  Node node{std::move(op), stream, std::move(c.pending_after)};
  c.pending_after.clear();
  if (c.last >= 0) node.after.push_back(static_cast<size_t>(c.last));
  c.last = static_cast<long>(nodes_.size());
  c.seen[stream] = ++c.recorded;
  nodes_.push_back(std::move(node));
}

void Recording::merge(const std::shared_ptr<HostQueue>& waiter, uint64_t waited) {
  std::lock_guard<std::mutex> lock(mutex_);
  Clock& w = clock(waiter);
  const Clock& y = clocks_.at(waited);
  for (const auto& [id, count] : y.seen) w.seen[id] = std::max(w.seen[id], count);
  if (y.last >= 0) w.pending_after.push_back(static_cast<size_t>(y.last));
}

std::vector<std::shared_ptr<HostQueue>> Recording::queues() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<HostQueue>> out;
  for (auto& [id, c] : clocks_)
    if (auto q = c.queue.lock()) out.push_back(std::move(q));
  return out;
}

std::string Recording::unjoined() {
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock& origin = clocks_.at(origin_);
  std::string text;
  for (const auto& [id, c] : clocks_) {
    if (id == origin_) continue;
    auto seen = origin.seen.find(id);
    size_t joined = seen == origin.seen.end() ? 0 : seen->second;
    if (c.recorded > joined)
      text += fmt::format("{}stream {} ({} operation(s))", text.empty() ? "" : ", ", id,
                          c.recorded - joined);
  }
  return text;
}

std::vector<Recording::Node> Recording::take_nodes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(nodes_);
}

// --- HostStream --------------------------------------------------------------------------------

HostStream::HostStream(std::shared_ptr<HostQueue> queue, bool owned)
    : queue_(std::move(queue)), owned_(owned) {}

HostStream::~HostStream() {
  // Like cudaStreamDestroy: work already enqueued still runs (shutdown drains the queue).
  if (owned_) queue_->shutdown();
}

void HostStream::copy(void* dst, const void* src, size_t bytes) {
  // memmove, not memcpy: overlapping copies are the caller's mistake, not undefined behaviour.
  queue_->enqueue({"copy", bytes, [dst, src, bytes] { std::memmove(dst, src, bytes); }});
}

void HostStream::fill(void* dst, uint8_t value, size_t bytes) {
  queue_->enqueue({"fill", bytes, [dst, value, bytes] { std::memset(dst, value, bytes); }});
}

void HostStream::host_call(std::function<void()> fn) {
  queue_->enqueue({"host_call", 0, std::move(fn)});
}

void HostStream::delay(std::chrono::nanoseconds duration) {
  queue_->enqueue({"delay", 0, [duration] {
                     // Sleep through most of a long delay (the machine's cores are shared),
                     // then spin on steady_clock for the precise end: "at least `duration`".
                     using clock = std::chrono::steady_clock;
                     // Saturating: Stream::delay bounds `duration`, but a caller of the SPI
                     // may not have, and now + nanoseconds::max() overflows (audit 2.25).
                     const auto now = clock::now();
                     const auto deadline = duration < clock::time_point::max() - now
                                               ? now + duration
                                               : clock::time_point::max();
                     constexpr auto kSpinTail = std::chrono::microseconds(200);
                     if (duration > 2 * kSpinTail) std::this_thread::sleep_until(deadline - kSpinTail);
                     while (clock::now() < deadline) {
                     }
                   }});
}

void HostStream::wait_for(StreamImpl& other_impl) {
  HostStream& other = as_host_stream(other_impl, "wait_for");
  if (other.queue_ == queue_) return;  // a wrapper of the same queue: already in order
  std::shared_ptr<Recording> other_capture = other.queue_->capture();
  std::shared_ptr<Recording> own_capture = queue_->capture();
  if (other_capture) {
    if (own_capture && own_capture != other_capture)
      throw Error(ErrorCode::InvalidState,
                  "wait_for: this stream is capturing into another graph than the stream it "
                  "waits for: one capture cannot depend on another; end one of them first",
                  kBackendName);
    // Fork (this stream joins the capture) or join (both already in it): only the order is
    // recorded; the recording is replayed serially in an order that respects it.
    if (!own_capture) queue_->set_capture(other_capture);
    other_capture->merge(queue_, other.queue_->id());
    return;
  }
  if (own_capture)
    throw Error(ErrorCode::InvalidState,
                "wait_for: this stream is capturing but the stream it waits for is not: a graph "
                "cannot wait for eager work; synchronize() that stream before capture_begin",
                kBackendName);
  // Eagerly: an operation here that waits until the other queue has run what it holds now.
  const uint64_t ticket = other.queue_->submitted();
  queue_->enqueue({"wait", 0, [waited = other.queue_, ticket] { waited->wait_until(ticket); }});
}

void HostStream::synchronize() {
  if (is_capturing())
    throw Error(ErrorCode::InvalidState,
                "synchronize: the host stream is capturing, so its work has not run: end the "
                "capture first",
                kBackendName);
  queue_->synchronize();
}

bool HostStream::is_capturing() const { return queue_->capture() != nullptr; }

HostStream& as_host_stream(StreamImpl& stream, const char* operation) {
  auto* host = dynamic_cast<HostStream*>(&stream);
  if (host == nullptr)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the stream does not belong to the host backend: pass a stream "
                            "from Stream::create(\"host\")",
                            operation),
                kBackendName);
  return *host;
}

}  // namespace accgraph::detail::host
