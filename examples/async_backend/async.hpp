// The async backend's objects: a worker-thread queue per stream, the capture that records the
// work of several streams as lanes of one graph, the graph that replays its lanes in parallel,
// and the buffers and pools. Built only on the SPI headers and their helpers.
//
// Note [Lanes]: a capture begins on one stream (lane 0). A stream that waits for a capturing
// stream (wait_for) joins the capture as a new lane: a fork. Each captured operation is a node of
// its lane, after the lane's previous node; a wait_for between two capturing streams adds an
// edge from the waited lane's last node to the waiting lane's next node (a fork or a join). A
// replay runs every lane on a thread of its own, each waiting at its cross-lane edges only, so
// independent branches overlap. capture_end requires that lane 0 has (transitively) waited for
// the last node of every other lane: work nobody joined back would have no place in the order.
//
// The per-lane vector clock: `seen[l]` of a lane is how many nodes of lane l it is ordered
// after (its own included); a wait_for merges the waited lane's clock into the waiter's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <accgraph/error.hpp>
#include <accgraph/spi/backend.hpp>
#include <accgraph/spi/pool_table.hpp>
#include <accgraph/spi/stream_cast.hpp>
#include <accgraph/spi/worker_queue.hpp>
#include <accgraph/types.hpp>

namespace async_backend {

inline constexpr const char* kBackendName = "async";
inline constexpr const char* kDeviceName = "async device (a worker thread per stream)";
inline constexpr const char* kMarkerStrategy = "steady_clock";
inline constexpr size_t kDefaultRingDepth = 8;
inline constexpr size_t kMaxRingDepth = 4096;

/// One unit of work, named for errors and dumps ("copy", "host_call", "marker", ...).
struct Task {
  std::string name;
  std::function<void()> run;
};

class Capture;

/// The native queue behind a stream (what native_handle() points to): tasks run in order on
/// one worker thread (accgraph::WorkerQueue), asynchronously to the threads that enqueue them;
/// while a capture is attached they are recorded instead.
class WorkQueue {
 public:
  WorkQueue() : worker_(kBackendName, this) {}

  void enqueue(Task task);
  accgraph::WorkerQueue& worker() noexcept { return worker_; }

  std::shared_ptr<Capture> capture() const;
  void set_capture(std::shared_ptr<Capture> capture);

 private:
  mutable std::mutex mutex_;  // guards capture_
  std::shared_ptr<Capture> capture_;
  accgraph::WorkerQueue worker_;
};

/// A captured node (Note [Lanes]).
struct Node {
  Task task;
  size_t lane = 0;
  std::vector<size_t> waits_for;  // nodes of other lanes that must finish first
};

/// The work one capture recorded, lane by lane (Note [Lanes]). Thread-safe.
class Capture {
 public:
  explicit Capture(const std::shared_ptr<WorkQueue>& origin);

  void record(const WorkQueue* queue, Task task);
  /// `waiter` (joining the capture if new) is ordered after everything `waited` recorded.
  void order_after(const std::shared_ptr<WorkQueue>& waiter, const WorkQueue* waited);
  /// The queues that took part, to detach them at capture end.
  std::vector<std::shared_ptr<WorkQueue>> queues() const;
  /// "lane 2 (3 operation(s))" for every lane not joined back into lane 0; empty when none.
  std::string unjoined() const;
  /// The nodes, and how many lanes they use.
  std::vector<Node> take_nodes(size_t& lanes);

 private:
  struct Lane {
    std::weak_ptr<WorkQueue> queue;
    const WorkQueue* key = nullptr;
    std::vector<size_t> seen;        // the lane's vector clock
    long last = -1;                  // its last node
    std::vector<size_t> next_waits;  // edges into its next node
  };
  Lane& lane_of(const WorkQueue* key);

  mutable std::mutex mutex_;
  std::vector<Lane> lanes_;  // lanes_[0] is the origin
  std::vector<Node> nodes_;
};

/// A stream: a handle to a WorkQueue. Streams made by create_stream and wrap_stream share the
/// queue, which lives until the last of them (and the last task waiting for it) is gone.
class AsyncStream final : public accgraph::StreamImpl {
 public:
  explicit AsyncStream(std::shared_ptr<WorkQueue> queue) : queue_(std::move(queue)) {}

  int device() const override { return 0; }
  void* native_handle() const override { return queue_.get(); }
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void host_call(std::function<void()> fn) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(accgraph::StreamImpl& other) override;
  void synchronize() override { queue_->worker().synchronize(); }
  bool is_capturing() const override { return queue_->capture() != nullptr; }

  const std::shared_ptr<WorkQueue>& queue() const noexcept { return queue_; }

 private:
  std::shared_ptr<WorkQueue> queue_;
};

inline AsyncStream& as_async_stream(accgraph::StreamImpl& stream, const char* operation) {
  return accgraph::stream_cast<AsyncStream>(stream, kBackendName, operation);
}

/// Graphs allocate nothing during capture: a pool is an identity shared by PoolId.
struct Pool {
  accgraph::PoolId id;
};
using Pools = accgraph::PoolTable<Pool>;

/// The executable: nodes by lane, run in parallel (Note [Lanes]).
struct Executable {
  std::vector<Node> nodes;
  size_t lanes = 1;
};

class AsyncGraph final : public accgraph::GraphImplInterface {
 public:
  AsyncGraph(Pools& pools, const accgraph::GraphArgs& args) : pools_(pools), args_(args) {}
  ~AsyncGraph() override { detach(); }

  void capture_begin(accgraph::StreamImpl& stream, accgraph::PoolId pool,
                     accgraph::CaptureMode mode) override;
  void capture_end() override;
  void instantiate() override;
  void replay(accgraph::StreamImpl& stream) override;
  void reset() override;
  accgraph::PoolId pool() const override { return pool_ ? pool_->id : last_pool_; }
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override;
  accgraph::GraphStats stats() const override;

 private:
  void detach() noexcept;

  Pools& pools_;
  accgraph::GraphArgs args_;
  bool debug_ = false;
  std::shared_ptr<Capture> capture_;              // while capturing
  std::shared_ptr<Executable> captured_;          // after capture_end
  std::shared_ptr<const Executable> executable_;  // after instantiate
  std::shared_future<void> last_launch_;          // orders launches of this graph
  std::shared_ptr<Pool> pool_;
  accgraph::PoolId last_pool_;
  uint64_t nodes_ = 0;
  uint64_t instantiations_ = 0;
};

std::unique_ptr<accgraph::TimestampMarkers> make_markers(size_t ring_depth);
std::unique_ptr<accgraph::Backend> make_backend();

}  // namespace async_backend
