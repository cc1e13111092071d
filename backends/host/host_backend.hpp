// Internal: the host backend's objects (queue, stream, buffer, pools, graph, markers). Uses only
// the installed kit (accgraph/spi/), like a plugin; the teaching copies for plugin authors are
// the installed examples (out_of_tree_backend, async_backend).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "accgraph/spi/capture_tail.hpp"
#include "accgraph/spi/debug_dump.hpp"
#include "accgraph/spi/handle_table.hpp"
#include "accgraph/spi/host_delay.hpp"
#include "accgraph/spi/host_memory_buffer.hpp"
#include "accgraph/spi/ownership.hpp"
#include "accgraph/spi/pool_table.hpp"
#include "accgraph/spi/run_every_node.hpp"
#include "accgraph/spi/stream_cast.hpp"
#include "accgraph/spi/worker_queue.hpp"
#include "accgraph/types.hpp"

namespace accgraph::detail::host {

inline constexpr const char* kBackendName = "host";
inline constexpr const char* kDeviceName = "host CPU";
inline constexpr const char* kStrategySteadyClock = "steady_clock";
inline constexpr size_t kDefaultRingDepth = 64;
inline constexpr size_t kMaxRingDepth = 65536;

/// One unit of queued work, with what errors and debug dumps call it.
struct Operation {
  std::string name;  // "copy", "fill", "host_call", "delay", "wait", "marker", "replay ..."
  size_t bytes = 0;  // copy/fill size, shown in debug dumps
  std::function<void()> run;
  bool marker = false;  // enqueued by a marker set: left out of untimed replays
};

/// A one-shot signal between operations on different workers (an "event").
class Completion {
 public:
  void signal();
  void wait();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

class Recording;

/// The native queue of the host backend (what native_handle() points to): operations run in
/// order on one worker thread (a WorkerQueue), asynchronously to the thread that enqueues them.
/// While a capture is attached, enqueue() appends to the capture's Recording instead. Shared by the
/// owning stream, wrapping streams and operations of other queues that wait for it.
class HostQueue {
 public:
  /// A new queue with its worker started, registered in live_queues() (Note [Live handles]).
  static std::shared_ptr<HostQueue> create();
  ~HostQueue();

  uint64_t id() const noexcept { return id_; }
  void enqueue(Operation op);
  /// Operations submitted to the worker so far: a ticket wait_until() accepts.
  uint64_t submitted() const { return worker_.ticket(); }
  void wait_until(uint64_t ticket) { worker_.wait_until(ticket); }
  /// Waits for everything enqueued, then throws the first operation failure since the last
  /// call as Error(BackendError) naming the operation (Note [First failure]).
  void synchronize() { worker_.synchronize(); }
  /// Drains the queue, stops the worker and unregisters; later enqueues are InvalidState.
  void shutdown() noexcept;

  std::shared_ptr<Recording> capture() const;
  void set_capture(std::shared_ptr<Recording> recording);

 private:
  HostQueue();

  const uint64_t id_;
  mutable std::mutex mutex_;  // guards capture_
  std::shared_ptr<Recording> capture_;
  WorkerQueue worker_;  // runs what is not captured (accgraph/worker_queue.hpp)
};

/// The operations captured from one or more queues, in the order they were enqueued (a valid
/// serialisation of the fork/join graph, since a stream can only wait for work already
/// enqueued). Each queue that joined the capture keeps a vector clock of how much of every
/// other queue's recorded work it is ordered after; capture_end uses it to find unjoined work.
class Recording {
 public:
  struct Node {
    Operation op;
    uint64_t stream = 0;
    std::vector<size_t> after;  // nodes this one depends on (for the DOT dump only)
  };

  explicit Recording(const std::shared_ptr<HostQueue>& origin);
  uint64_t origin() const noexcept { return origin_; }
  void append(uint64_t stream, Operation op);
  /// `waiter` is now ordered after all work recorded so far on `waited` (fork or join).
  void merge(const std::shared_ptr<HostQueue>& waiter, uint64_t waited);
  /// CaptureTail (capture.tail) of queue `stream`: its last node + 1 while that node is the only
  /// one its next node would depend on; 0 before its first node or after a join.
  uint64_t tail(uint64_t stream);
  /// Every queue that took part (to detach them at capture end).
  std::vector<std::shared_ptr<HostQueue>> queues();
  /// "stream 0x55d0c0ffee00 (2 operation(s))" (the queue's native handle) for each forked queue
  /// the origin never joined back; empty if none.
  std::string unjoined();
  std::vector<Node> take_nodes();

 private:
  struct Clock {
    std::weak_ptr<HostQueue> queue;
    size_t recorded = 0;                // nodes this queue recorded
    std::map<uint64_t, size_t> seen;    // queue id -> how many of its nodes precede this point
    long last = -1;                     // this queue's last node
    std::vector<size_t> pending_after;  // joined nodes the next node of this queue depends on
  };
  Clock& clock(const std::shared_ptr<HostQueue>& queue);

  std::mutex mutex_;
  const uint64_t origin_;
  std::vector<Node> nodes_;
  std::map<uint64_t, Clock> clocks_;
};

// --- streams ---------------------------------------------------------------------------------

/// The live queues by native handle, for wrap_stream (Note [Live handles]).
HandleTable<HostQueue>& live_queues();

class HostStream final : public StreamImpl, public CaptureTail {
 public:
  /// Owned: the queue is shut down with this object; Borrowed: a wrapper of another's queue.
  HostStream(std::shared_ptr<HostQueue> queue, Ownership ownership);
  ~HostStream() override;

  int device() const override { return 0; }
  void* native_handle() const override { return queue_.get(); }
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void host_call(std::function<void()> fn) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(StreamImpl& other) override;
  void synchronize() override;
  bool is_capturing() const override;
  uint64_t capture_tail() const noexcept override;

  const std::shared_ptr<HostQueue>& queue() const noexcept { return queue_; }

 private:
  std::shared_ptr<HostQueue> queue_;
  Ownership ownership_;
};

/// The host stream behind `stream`, or Error(InvalidArgument) naming `operation`.
inline HostStream& as_host_stream(StreamImpl& stream, const char* operation) {
  return stream_cast<HostStream>(stream, kBackendName, operation);
}

// --- pools -----------------------------------------------------------------------------------

/// Host graphs allocate nothing during capture, so a pool is only an identity that graphs
/// share by PoolId (Note [Pool sharing] in accgraph/spi/pool_table.hpp).
struct PoolState {
  PoolId id;
};

using Pools = PoolTable<PoolState>;

// --- graphs ----------------------------------------------------------------------------------

class HostGraph final : public GraphImplInterface, public UntimedReplay {
 public:
  HostGraph(Pools& pools, const GraphArgs& args);
  ~HostGraph() override;

  void capture_begin(StreamImpl& stream, PoolId pool, CaptureMode mode) override;
  void capture_end() override;
  void instantiate() override;
  void replay(StreamImpl& stream) override;
  void reset() override;
  PoolId pool() const override;
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override;
  GraphStats stats() const override;
  bool can_replay_untimed(const StreamImpl&) const noexcept override {
    return untimed_ != nullptr;
  }
  void replay_untimed(StreamImpl& stream) override;

 private:
  void detach_capture() noexcept;
  void launch(StreamImpl& stream, const std::shared_ptr<const std::vector<Operation>>& ops);

  Pools& pools_;
  GraphArgs args_;
  bool debug_ = false;
  std::shared_ptr<Recording> recording_;   // while capturing
  std::vector<Recording::Node> template_;  // after capture_end (kept for keep_graph/debug)
  bool has_template_ = false;
  std::shared_ptr<const std::vector<Operation>> executable_;
  std::shared_ptr<const std::vector<Operation>> untimed_;  // executable_ without marker operations
  std::shared_ptr<Completion> last_launch_;  // orders each launch behind the previous one
  std::shared_ptr<PoolState> pool_;
  PoolId last_pool_id_;
  uint64_t nodes_ = 0;
  uint64_t instantiations_ = 0;
};

// --- markers ---------------------------------------------------------------------------------

/// steady_clock markers (accgraph/steady_clock_markers.hpp) run by the streams' workers.
std::unique_ptr<TimestampMarkers> make_markers(const MarkerOptions& options);

}  // namespace accgraph::detail::host
