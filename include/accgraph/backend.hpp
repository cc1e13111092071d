// The backend SPI: what a backend (built-in or plugin) implements. Backends reach the core only
// through this header, types.hpp, error.hpp and plugin.h/plugin.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/export.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

class GraphImplInterface;

/// A backend's in-order queue (a cudaStream_t, an immediate command list, a host worker queue).
/// Every operation is enqueued and returns before the work runs; while the stream is capturing,
/// operations are recorded into the graph instead of run.
class ACCGRAPH_API StreamImpl {
 public:
  virtual ~StreamImpl();

  virtual int device() const = 0;
  /// The native queue (cudaStream_t, ze_command_list_handle_t, ...). Not owned by the caller.
  virtual void* native_handle() const = 0;

  /// Portable operations, legal eagerly and inside a capture.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(void* dst, uint8_t value, size_t bytes) = 0;

  /// Enqueues a C++ callable (Capabilities::host_calls). Default: Unsupported.
  virtual void host_call(std::function<void()> fn);
  /// Enqueues device work that lasts at least `duration` (Capabilities::timed_delay). Default:
  /// Unsupported.
  virtual void delay(std::chrono::nanoseconds duration);

  /// Makes this stream wait for all work enqueued on `other` so far (an event record + wait).
  /// During a capture on `other`, this stream joins that capture (fork); the origin stream
  /// waiting on a forked stream joins it back.
  virtual void wait_for(StreamImpl& other) = 0;

  /// Blocks until all enqueued work is done. The core refuses this while capturing.
  virtual void synchronize() = 0;
  virtual bool is_capturing() const = 0;
};

/// A device or host allocation owned by a backend (freed by the destructor).
class ACCGRAPH_API BufferImpl {
 public:
  virtual ~BufferImpl();
  virtual void* data() const = 0;
  virtual size_t size() const = 0;
  virtual MemoryKind kind() const = 0;
};

/// Counters a graph implementation may expose (shown in stats and debug output).
struct GraphStats {
  uint64_t nodes = 0;             ///< operations in the captured graph, when known
  uint64_t instantiations = 0;    ///< executables built from scratch
  uint64_t updates = 0;           ///< executables updated in place after a re-capture
};

/// One captured graph, mirroring PyTorch's at::GraphImplInterface with an explicit stream.
/// The core (AcceleratorGraph) checks call order before it calls these, so an implementation
/// may assume: capture_begin only when empty, capture_end only while capturing, instantiate
/// only after capture_end, replay only after instantiate. reset() may come at any time,
/// including during a capture (then it aborts the capture and leaves the stream not capturing).
class ACCGRAPH_API GraphImplInterface {
 public:
  virtual ~GraphImplInterface();
  virtual void capture_begin(StreamImpl& stream, PoolId pool, CaptureMode mode) = 0;
  /// Ends the capture. On failure the implementation leaves itself reset and the stream out of
  /// capture mode, then throws.
  virtual void capture_end() = 0;
  virtual void instantiate() = 0;
  virtual void replay(StreamImpl& stream) = 0;
  virtual void reset() = 0;
  virtual PoolId pool() const = 0;
  virtual void enable_debug_mode() = 0;
  virtual void debug_dump(const std::string& path) = 0;
  virtual GraphStats stats() const { return {}; }
};

/// Options for a marker set, chosen per profiler.
struct MarkerOptions {
  std::string strategy;   ///< one of Capabilities::marker_strategies; empty = the backend default
  size_t ring_depth = 0;  ///< requested replays in flight; 0 = the backend default

  /// For Backend::create_markers: the strategy to build, `strategy` or `offered[0]` (the
  /// backend's default) when it is empty. Throws Error(Unsupported), attributed to `backend`
  /// and listing what it offers, for a name not in `offered`.
  std::string resolve_strategy(const std::vector<std::string>& offered,
                               const std::string& backend) const {
    if (strategy.empty() && !offered.empty()) return offered.front();
    for (const std::string& name : offered)
      if (name == strategy) return name;
    std::string list;
    for (size_t i = 0; i < offered.size(); ++i)
      list += (i == 0 ? "'" : i + 1 == offered.size() ? " and '" : ", '") + offered[i] + "'" +
              (i == 0 && offered.size() > 1 ? " (default)" : "");
    throw Error(ErrorCode::Unsupported,
                "create_markers: unknown marker strategy '" + strategy + "': the " + backend +
                    " backend offers " + (list.empty() ? std::string("none") : list),
                backend);
  }

  /// For Backend::create_markers: the ring depth to build, `ring_depth` or `default_depth`
  /// when it is 0. Throws Error(InvalidArgument), attributed to `backend`, above `max_depth`.
  size_t resolve_ring_depth(size_t default_depth, size_t max_depth,
                            const std::string& backend) const {
    const size_t depth = ring_depth == 0 ? default_depth : ring_depth;
    if (depth > max_depth)
      throw Error(ErrorCode::InvalidArgument,
                  "create_markers: ring depth " + std::to_string(depth) +
                      " is larger than the " + backend + " backend's maximum of " +
                      std::to_string(max_depth) + ": ask for fewer replays in flight",
                  backend);
    return depth;
  }
};

/// Timestamp markers: "write a timestamp into marker i" enqueued on a stream, eagerly or inside
/// a capture, and read back as nanoseconds on one clock once the work has run.
///
/// See Note [Marker ring]. A *sequence* is one execution of the recorded markers: one replay of
/// a graph, or one eager begin_sequence..end_sequence run. Sequences are numbered 0, 1, 2, ... in
/// launch order; sequence s uses ring slot s % ring_depth(). The caller never has more than
/// ring_depth() sequences launched and not yet read, so a slot is never overwritten unread.
///
/// Note [Marker ring]: the head of each sequence (begin_sequence) picks the ring slot on the
/// device (a device-side counter, a rotated event set, a staging copy), so launching K replays
/// back to back needs no host work per region and no host wait. The tail (end_sequence)
/// publishes completion, so is_complete() is a cheap poll. The timing layer collects the oldest
/// pending sequence first when the ring is full: reports are never overwritten or lost.
class ACCGRAPH_API TimestampMarkers {
 public:
  /// read() returns this for a marker whose time cannot be determined, e.g. when the device
  /// counter may have wrapped more than once since the sequence began; the profiler reports
  /// regions that use it as unmeasurable.
  static constexpr uint64_t kUnmeasurable = UINT64_MAX;

  virtual ~TimestampMarkers();

  virtual std::string strategy() const = 0;
  virtual size_t ring_depth() const = 0;
  virtual uint64_t resolution_ns() const = 0;

  /// Enqueued once at the start of a sequence (at capture begin for graphs), before any record().
  virtual void begin_sequence(StreamImpl& stream) = 0;
  /// Enqueues "write the time into marker `marker`" (markers are numbered 0.. per sequence).
  virtual void record(StreamImpl& stream, uint32_t marker) = 0;
  /// Enqueued once at the end (after every stream has joined back), after the last record().
  virtual void end_sequence(StreamImpl& stream) = 0;

  /// Around each launch of a graph holding these markers (host side, same thread as replay).
  virtual void before_launch(GraphImplInterface& graph, StreamImpl& stream, uint64_t sequence);
  virtual void after_launch(GraphImplInterface& graph, StreamImpl& stream, uint64_t sequence);
  /// Called for an eager sequence right after its end_sequence was enqueued.
  virtual void after_eager_sequence(StreamImpl& stream, uint64_t sequence);

  /// True when sequence `sequence` has finished and read() will not block.
  virtual bool is_complete(uint64_t sequence) = 0;
  /// Blocks until sequence `sequence` has finished.
  virtual void wait(uint64_t sequence) = 0;
  /// Writes the `count` marker times of a finished sequence into `times[0..count)`, in
  /// nanoseconds on the backend's clock (kUnmeasurable for a marker whose time is unknown).
  /// `times` points to `count` writable values owned by the caller (it may be null when `count`
  /// is 0); read() allocates nothing for them, so the timing layer reuses one buffer.
  virtual void read(uint64_t sequence, uint64_t* times, size_t count) = 0;
};

/// A backend: the factory for its streams, buffers, graphs and markers. One instance per process
/// (created by the Registry on first use). All methods are thread-safe.
class ACCGRAPH_API Backend {
 public:
  virtual ~Backend();

  virtual std::string name() const = 0;
  /// Usable devices; a backend without devices is reported unavailable by its factory instead.
  virtual std::vector<DeviceInfo> devices() const = 0;
  virtual Capabilities capabilities(int device) const = 0;

  virtual std::unique_ptr<StreamImpl> create_stream(int device) = 0;
  /// Wraps a native queue handle without taking ownership (interop with a framework's stream).
  virtual std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) = 0;
  virtual std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) = 0;
  virtual std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) = 0;
  virtual std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                          const MarkerOptions& options) = 0;
};

/// Creates a backend. Throws Error(Unavailable, reason) when it cannot run here (no driver, no
/// device), which the Registry records and reports.
using BackendFactory = std::function<std::unique_ptr<Backend>()>;

}  // namespace accgraph
