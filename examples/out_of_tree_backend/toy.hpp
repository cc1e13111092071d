// The toy backend's objects (queue, stream, buffer, pools, graph, markers): a complete accgraph
// backend in a few hundred lines, built only on the SPI headers, for plugin authors to copy.
//
// Note [Synchronous streams]: a toy stream runs each operation on the calling thread, at the
// moment it is enqueued, unless the stream is capturing (then the operation is recorded into
// the graph). The SPI says "every operation is enqueued and returns before the work runs", but
// what callers may rely on is only the order: work runs in enqueue order, and is done after
// synchronize(). Finishing early keeps both promises, so a synchronous stream is legal — it is
// the degenerate in-order queue (a device that is infinitely fast to start work). What it
// cannot do is overlap work with the host, which is why the toy is a template and not a
// product. Failures are remembered and thrown by the next synchronize(), as an asynchronous
// device would report them, so callers see the same error flow on every backend.
//
// Shape on purpose unlike the host backend (which runs a worker thread and supports every
// capture mode and fork/join): the toy honours only CaptureMode::Global, cannot capture across
// streams, and issues its own pool ids. Capabilities() says so; the core turns every request
// beyond them into an Unsupported error before the toy is called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <accgraph/error.hpp>
#include <accgraph/spi/backend.hpp>
#include <accgraph/spi/first_failure.hpp>
#include <accgraph/spi/pool_table.hpp>
#include <accgraph/spi/stream_cast.hpp>
#include <accgraph/types.hpp>

namespace toy {

inline constexpr const char* kBackendName = "toy";
inline constexpr const char* kDeviceName = "toy device (synchronous, runs on the calling thread)";
inline constexpr const char* kMarkerStrategy = "steady_clock_sync";
inline constexpr size_t kDefaultRingDepth = 4;
inline constexpr size_t kMaxRingDepth = 1024;

/// Throws accgraph::Error(code, message) attributed to the toy backend.
[[noreturn]] void fail(accgraph::ErrorCode code, const std::string& message);

/// One unit of work with the name errors and debug dumps call it by.
struct Operation {
  std::string name;  // "fill 4096 bytes", "host_call", "marker", "replay of toy graph", ...
  std::function<void()> run;
};

/// The operations a capture recorded, in order (one stream only: no fork/join on the toy).
struct Recording {
  std::vector<Operation> operations;
};

/// The toy's native queue (what native_handle() points to), shared by the stream that owns it
/// and any stream that wraps it, so both see the same capture and the same failures.
class ToyQueue {
 public:
  ToyQueue() = default;
  ToyQueue(const ToyQueue&) = delete;
  ToyQueue& operator=(const ToyQueue&) = delete;
  /// A failure nobody synchronized on is logged, never dropped (rule failure.destroyed).
  ~ToyQueue() { failures_.log_if_any(kBackendName, accgraph::describe_queue(kBackendName, this)); }

  /// Runs `op` now, or appends it to the capture (Note [Synchronous streams]).
  void submit(Operation op);
  /// Throws the first failure since the last call as Error(BackendError), naming the operation
  /// (Note [First failure] in accgraph/spi/first_failure.hpp).
  void synchronize();

  bool is_capturing() const;
  void set_capture(std::shared_ptr<Recording> recording);
  std::shared_ptr<Recording> capture() const;

 private:
  // Held while an operation runs, so two threads enqueueing on one queue never overlap their
  // work (in-order means one at a time). Recursive: a host_call may enqueue on its own stream.
  std::recursive_mutex run_mutex_;
  mutable std::mutex mutex_;  // guards the members below (never held while an operation runs)
  std::shared_ptr<Recording> capture_;
  accgraph::FirstFailure failures_;
};

class ToyStream final : public accgraph::StreamImpl {
 public:
  explicit ToyStream(std::shared_ptr<ToyQueue> queue) : queue_(std::move(queue)) {}

  int device() const override { return 0; }
  void* native_handle() const override { return queue_.get(); }
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void host_call(std::function<void()> fn) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(accgraph::StreamImpl& other) override;
  void synchronize() override { queue_->synchronize(); }
  bool is_capturing() const override { return queue_->is_capturing(); }

  ToyQueue& queue() const noexcept { return *queue_; }
  const std::shared_ptr<ToyQueue>& shared_queue() const noexcept { return queue_; }

 private:
  std::shared_ptr<ToyQueue> queue_;
};

/// The toy stream behind `stream`, or Error(InvalidArgument) naming `operation`.
inline ToyStream& as_toy_stream(accgraph::StreamImpl& stream, const char* operation) {
  return accgraph::stream_cast<ToyStream>(stream, kBackendName, operation);
}

/// A pool is an identity that graphs share by PoolId (the toy allocates nothing during capture);
/// accgraph's PoolTable keeps them (Note [Pool sharing] in accgraph/spi/pool_table.hpp). Toy ids
/// are {n, kPoolTag}, so they are told apart from other backends' at a glance.
struct Pool {
  accgraph::PoolId id;
};

inline constexpr uint64_t kPoolTag = 0x746f79;  // "toy"
using Pools = accgraph::PoolTable<Pool>;

class ToyGraph final : public accgraph::GraphImplInterface {
 public:
  ToyGraph(Pools& pools, const accgraph::GraphArgs& args);
  ~ToyGraph() override;

  void capture_begin(accgraph::StreamImpl& stream, accgraph::PoolId pool,
                     accgraph::CaptureMode mode) override;
  void capture_end() override;
  void instantiate() override;
  void replay(accgraph::StreamImpl& stream) override;
  void reset() override;
  accgraph::PoolId pool() const override;
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override;
  accgraph::GraphStats stats() const override;

 private:
  void detach_capture() noexcept;

  Pools& pools_;
  accgraph::GraphArgs args_;
  bool debug_ = false;
  std::shared_ptr<ToyQueue> capture_queue_;  // while capturing
  std::shared_ptr<Recording> recording_;     // while capturing, then until instantiate()
  std::shared_ptr<const std::vector<Operation>> executable_;
  std::vector<std::string> dump_names_;  // kept only in debug mode
  std::shared_ptr<Pool> pool_;
  accgraph::PoolId last_pool_id_;
  uint64_t nodes_ = 0;
  uint64_t instantiations_ = 0;
};

std::unique_ptr<accgraph::TimestampMarkers> make_markers(size_t ring_depth);

/// The backend object the plugin entry point creates.
std::unique_ptr<accgraph::Backend> make_backend();

}  // namespace toy
