// Host streams: an in-order queue run by one worker thread, the recording that captures it, and
// fork/join between queues (eagerly by tickets, during capture by vector clocks).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "host_backend.hpp"

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

HandleTable<HostQueue>& live_queues() {
  // Leaked: queues may shut down during static destruction.
  static auto* live = new HandleTable<HostQueue>(kBackendName);
  return *live;
}

namespace {
std::atomic<uint64_t> next_queue_id{1};
}  // namespace

HostQueue::HostQueue() : id_(next_queue_id.fetch_add(1)), worker_(kBackendName, this) {}

std::shared_ptr<HostQueue> HostQueue::create() {
  std::shared_ptr<HostQueue> queue(new HostQueue());
  live_queues().insert(queue.get(), queue);
  return queue;
}

HostQueue::~HostQueue() { shutdown(); }

void HostQueue::enqueue(Operation op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) {
    capture_->append(id_, std::move(op));
    return;
  }
  worker_.push(std::move(op.name), std::move(op.run));
}

void HostQueue::shutdown() noexcept {
  live_queues().erase(this);
  worker_.stop();
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

uint64_t Recording::tail(uint64_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = clocks_.find(stream);
  if (it == clocks_.end() || it->second.last < 0 || !it->second.pending_after.empty()) return 0;
  return static_cast<uint64_t>(it->second.last) + 1;
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
    // Named by native_handle(), the name users can compare: the queue id is private.
    if (c.recorded > joined)
      text += fmt::format("{}stream {} ({} operation(s))", text.empty() ? "" : ", ",
                          fmt::ptr(c.queue.lock().get()), c.recorded - joined);
  }
  return text;
}

std::vector<Recording::Node> Recording::take_nodes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(nodes_);
}

// --- HostStream --------------------------------------------------------------------------------

HostStream::HostStream(std::shared_ptr<HostQueue> queue, Ownership ownership)
    : queue_(std::move(queue)), ownership_(ownership) {}

HostStream::~HostStream() {
  // Like cudaStreamDestroy: work already enqueued still runs (shutdown drains the queue).
  if (ownership_ == Ownership::Owned) queue_->shutdown();
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
  // Saturating for any duration: a caller of the SPI may not bound it.
  queue_->enqueue({"delay", 0, [duration] { delay_on_this_thread(duration); }});
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

// Note [Capture tail] (accgraph/spi/capture_tail.hpp): a wrapper and the owner share the queue,
// so work enqueued through either moves the tail.
uint64_t HostStream::capture_tail() const noexcept {
  try {
    std::shared_ptr<Recording> capture = queue_->capture();
    return capture ? capture->tail(queue_->id()) : 0;
  } catch (...) {  // a failed lock: "cannot tell"
    return 0;
  }
}

}  // namespace accgraph::detail::host
