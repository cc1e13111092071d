// Async streams: a worker thread (accgraph::WorkerQueue) runs each queue's tasks in order; a
// capture records them into lanes instead (Note [Lanes] in async.hpp); wait_for orders queues
// eagerly by tickets and, in a capture, forks and joins lanes.
#include <algorithm>
#include <cstring>

#include <accgraph/spi/host_delay.hpp>

#include "async.hpp"

namespace async_backend {

using accgraph::Error;
using accgraph::ErrorCode;

// --- WorkQueue -----------------------------------------------------------------------------

void WorkQueue::enqueue(Task task) {
  std::shared_ptr<Capture> capture;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    capture = capture_;
    if (!capture) {
      worker_.push(std::move(task.name), std::move(task.run));
      return;
    }
  }
  capture->record(this, std::move(task));
}

std::shared_ptr<Capture> WorkQueue::capture() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

void WorkQueue::set_capture(std::shared_ptr<Capture> capture) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = std::move(capture);
}

// --- Capture -------------------------------------------------------------------------------

Capture::Capture(const std::shared_ptr<WorkQueue>& origin) {
  Lane& lane = lane_of(origin.get());
  lane.queue = origin;
}

Capture::Lane& Capture::lane_of(const WorkQueue* key) {
  for (Lane& lane : lanes_)
    if (lane.key == key) return lane;
  Lane lane;
  lane.key = key;
  lanes_.push_back(std::move(lane));
  for (Lane& each : lanes_) each.seen.resize(lanes_.size(), 0);
  return lanes_.back();
}

void Capture::record(const WorkQueue* queue, Task task) {
  std::lock_guard<std::mutex> lock(mutex_);
  Lane& lane = lane_of(queue);
  const size_t index = static_cast<size_t>(&lane - lanes_.data());
  Node node{std::move(task), index, std::move(lane.next_waits)};
  lane.next_waits.clear();
  lane.last = static_cast<long>(nodes_.size());
  ++lane.seen[index];
  nodes_.push_back(std::move(node));
}

void Capture::order_after(const std::shared_ptr<WorkQueue>& waiter, const WorkQueue* waited) {
  std::lock_guard<std::mutex> lock(mutex_);
  lane_of(waiter.get()).queue = waiter;
  // Both references are taken after lane_of, which may grow lanes_.
  const Lane& from = lane_of(waited);
  Lane& to = lane_of(waiter.get());
  for (size_t l = 0; l < lanes_.size(); ++l) to.seen[l] = std::max(to.seen[l], from.seen[l]);
  if (from.last >= 0) to.next_waits.push_back(static_cast<size_t>(from.last));
}

std::vector<std::shared_ptr<WorkQueue>> Capture::queues() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<WorkQueue>> out;
  for (const Lane& lane : lanes_)
    if (auto queue = lane.queue.lock()) out.push_back(std::move(queue));
  return out;
}

std::string Capture::unjoined() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  for (size_t l = 1; l < lanes_.size(); ++l) {
    const size_t missing = lanes_[l].seen[l] - lanes_[0].seen[l];
    if (missing > 0)
      text += (text.empty() ? "" : ", ") + std::string("lane ") + std::to_string(l) + " (" +
              std::to_string(missing) + " operation(s))";
  }
  return text;
}

std::vector<Node> Capture::take_nodes(size_t& lanes) {
  std::lock_guard<std::mutex> lock(mutex_);
  lanes = lanes_.size();
  return std::move(nodes_);
}

// --- AsyncStream ---------------------------------------------------------------------------

// The core validated pointers and sizes (non-null, bytes > 0) before calling in.
void AsyncStream::copy(void* dst, const void* src, size_t bytes) {
  queue_->enqueue({"copy", [dst, src, bytes] { std::memmove(dst, src, bytes); }});
}

void AsyncStream::fill(void* dst, uint8_t value, size_t bytes) {
  queue_->enqueue({"fill", [dst, value, bytes] { std::memset(dst, value, bytes); }});
}

void AsyncStream::host_call(std::function<void()> fn) {
  queue_->enqueue({"host_call", std::move(fn)});
}

void AsyncStream::delay(std::chrono::nanoseconds duration) {
  queue_->enqueue({"delay", [duration] { accgraph::delay_on_this_thread(duration); }});
}

void AsyncStream::wait_for(accgraph::StreamImpl& other_impl) {
  AsyncStream& other = as_async_stream(other_impl, "wait_for");
  if (other.queue_ == queue_) return;  // one queue (a wrapper): already in order
  std::shared_ptr<Capture> theirs = other.queue_->capture();
  std::shared_ptr<Capture> mine = queue_->capture();
  if (theirs) {
    if (mine && mine != theirs)
      throw Error(ErrorCode::InvalidState,
                  "wait_for: the two streams capture into different graphs, and one capture "
                  "cannot wait for another: end one capture first",
                  kBackendName);
    if (!mine) queue_->set_capture(theirs);  // a fork: this stream joins the capture
    theirs->order_after(queue_, other.queue_.get());
    return;
  }
  if (mine)
    throw Error(ErrorCode::InvalidState,
                "wait_for: this stream is capturing but the other is not, and a graph cannot "
                "wait for work outside it: synchronize() the other stream before capture_begin",
                kBackendName);
  // Eager: a task here that waits until the other queue has run what it holds now.
  const uint64_t ticket = other.queue_->worker().ticket();
  queue_->enqueue(
      {"wait_for", [waited = other.queue_, ticket] { waited->worker().wait_until(ticket); }});
}

}  // namespace async_backend
