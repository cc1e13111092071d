// Internal: the CUDA backend's objects (backend, stream, buffer, graph, pools, markers) and the
// launchers of its own kernels (kernels.cu). Nothing here is visible outside the module.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/capture_tail.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/first_failure.hpp"
#include "accgraph/spi/marker_kernels.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "accgraph/spi/ownership.hpp"
#include "accgraph/spi/pool_table.hpp"
#include "accgraph/spi/stream_cast.hpp"
#include "accgraph/types.hpp"

namespace accgraph::detail::cuda {

inline constexpr const char* kBackendName = "cuda";
inline constexpr const char* kStrategyDeviceTimestamps = "device_timestamps";
inline constexpr const char* kStrategyExternalEvents = "external_events";
inline constexpr size_t kDefaultRingDepth = 16;
inline constexpr size_t kMaxRingDepth = 1024;
/// The most markers one sequence (one replay) may record; storage grows with the markers a
/// sequence does record (Note [Device timestamp ring] in kernels.cu).
inline constexpr size_t kMarkerCapacity = 8192;

// --- kernels.cu ----------------------------------------------------------------------------
// Each launcher enqueues one 1-thread kernel and returns the launch's error.

/// Spins until %globaltimer has advanced by at least `ns` (Stream::delay).
cudaError_t launch_spin(cudaStream_t stream, uint64_t ns);
/// *out = %globaltimer (used for the event clock's reference pair).
cudaError_t launch_write_globaltimer(cudaStream_t stream, uint64_t* out);
/// How a marker kernel is launched.
enum class MarkerLaunch {
  Plain,         ///< an ordinary kernel launch
  Programmatic,  ///< a programmatic dependent (Note [Programmatic markers]; sm_90+)
  Placed,        ///< a plain launch of the kernel that waits in griddepcontrol.wait: its edges
                 ///< are placed when the sequence ends (Note [Exact marker placement]; sm_90+)
};
/// Note [Device timestamp ring]: *stamp = %globaltimer (one store, nothing read first).
cudaError_t launch_marker_record(cudaStream_t stream, uint64_t* stamp, MarkerLaunch how);
/// The names of the device-timestamp marker kernels (Note [Marker kernel names] in
/// spi/marker_kernels.hpp): what the device_timestamps set reports for trace readers.
timing::MarkerKernels device_timestamp_marker_kernels();
/// Stamps per staging chunk (Note [Device timestamp ring]): a sequence's marker i is written to
/// chunk[i / kStagingChunk][i % kStagingChunk].
inline constexpr size_t kStagingChunk = 128;
inline constexpr size_t kMaxStagingChunks = kMarkerCapacity / kStagingChunk;
static_assert(kMarkerCapacity % kStagingChunk == 0, "whole chunks");
/// The staging chunks of one sequence, passed by value to its tail kernel (512 bytes of kernel
/// parameters, baked into the node at capture): no table in device memory to build or free.
struct StagingChunks {
  const uint64_t* chunk[kMaxStagingChunks] = {};
};
/// The tail of a sequence: value = fixed, or (fixed == 0, a captured sequence) ++*counter;
/// copies the `count` staged stamps to host_stamps[((value - 1) % ring) * stride], fences
/// system-wide, then done[(value - 1) % ring] = value (publishes sequence value - 1).
cudaError_t launch_marker_end(cudaStream_t stream, uint64_t* counter, uint64_t fixed,
                              const StagingChunks& staging, uint64_t* host_stamps, uint64_t* done,
                              uint32_t ring, uint32_t stride, uint32_t count);
/// Whether `function` (a kernel node's cudaKernelNodeParams::func) is one of the
/// device-timestamp marker kernels above: what an untimed executable leaves out (Note [CUDA
/// untimed replays] in graph.cpp).
bool is_marker_kernel(const void* function) noexcept;
/// *counter = value (re-aligns the device counter with the caller's sequence numbers).
cudaError_t launch_set_counter(cudaStream_t stream, uint64_t* counter, uint64_t value);
/// Note [Clock sampling kernel] (kernels.cu): for i in [0, count), waits until *flag == i + 1,
/// then out[i] = %globaltimer; gives up after timeout_ns per sample. flag and out: device
/// pointers of host-mapped memory.
cudaError_t launch_globaltimer_on_flag(cudaStream_t stream, const unsigned* flag,
                                       unsigned long long* out, unsigned count,
                                       uint64_t timeout_ns);
/// `count` clock samples of `device` (ClockSampling, clock.cpp): host CLOCK_REALTIME around a
/// %globaltimer read by a kernel polling host-mapped memory.
void sample_globaltimer(int device, timing::ClockSample* samples, size_t count);
/// The smallest non-zero step of %globaltimer seen by one thread reading it back to back
/// (synchronous; the current device).
uint64_t measure_globaltimer_resolution_ns();

// --- helpers ---------------------------------------------------------------------------------

/// Makes `device` current for the scope, restoring the previous device (only when different).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

/// Lets this thread make calls that a capture in progress would otherwise refuse (allocations,
/// event creation, synchronous set-up on a private stream) for the scope: the backend's own
/// set-up may run inside a capture, e.g. when a profiler creates markers from a capture hook.
/// cudaThreadExchangeStreamCaptureMode(Relaxed) and back.
class RelaxedCaptureModeGuard {
 public:
  struct Teardown {};
  RelaxedCaptureModeGuard();
  /// For freeing and destroying (Note [Teardown during a capture]): never throws; when the
  /// mode cannot be changed (logged), the calls go on in the thread's own mode.
  explicit RelaxedCaptureModeGuard(Teardown) noexcept;
  ~RelaxedCaptureModeGuard();
  RelaxedCaptureModeGuard(const RelaxedCaptureModeGuard&) = delete;
  RelaxedCaptureModeGuard& operator=(const RelaxedCaptureModeGuard&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
  bool exchanged_ = true;
};

// Note [Teardown during a capture]: CUDA counts cudaFree, cudaFreeHost, cudaMemPoolDestroy,
// cudaEventSynchronize and the other calls that may synchronize as "potentially unsafe" during a
// capture: while any thread captures in Global mode (PyTorch's default), such a call fails with
// cudaErrorStreamCaptureUnsupported and invalidates that capture, which is not ours, and what it
// was to free leaks. Objects are freed at moments nobody chooses (Python frees one when its last
// reference goes, the cycle collector at any allocation): in a bench on the H200 (2026-11-27) a
// timed graph freed in the middle of the next torch.cuda.graph capture freed its markers there,
// and the capture failed with cudaErrorStreamCaptureInvalidated. So the backend frees and
// destroys (markers, buffers, streams, graphs and their pools, the clock sampler's memory), and
// waits for an external_events marker while a dropped graph collects its last replays, under
// RelaxedCaptureModeGuard: in relaxed mode the same calls succeed and the capture goes on (seen
// on the H200, CUDA 13.0, driver 580.159: cudaFree and cudaFreeHost from the capturing thread and
// from another thread, during Global, ThreadLocal and Relaxed captures, and the captured graph
// replayed correctly). Not covered: a dropped graph whose own graph allocations are still live
// after a launch waits for the device (cudaDeviceSynchronize in CudaGraph::release_allocations),
// which a capture may still refuse; and a torch graph freed during a capture breaks it by itself
// (PyTorch's CUDAGraph reset is refused the same way and warns). Checked by tests/cuda
// ("dropping timed graphs, buffers and streams during another capture", both marker strategies,
// on the capturing thread and another) and tests/python/test_torch.py (timed accgraph objects
// freed during a torch capture).

// Note [Capture-mode rules]: while any thread of the process captures in Global mode (PyTorch's
// default), every other thread in the default (Global) mode is refused the "potentially unsafe"
// calls (allocation and freeing, stream and event creation, queries and waits, synchronous
// copies), and each refused call invalidates that capture, which is not ours. A thread in
// Relaxed mode (cudaThreadExchangeStreamCaptureMode, RelaxedCaptureModeGuard) may make them,
// and they leave the other capture alone as long as they touch no stream of it: accgraph's own
// private streams and events, host and device memory, executables of its own. So every call
// below that a Global capture elsewhere refuses is made under RelaxedCaptureModeGuard, and no
// call touches a stream that may be capturing except to record into that capture. Per thread:
// - Collector (Profiler's background thread; also flush(), a full ring's make_room and a graph's
//   retirement, on the calling thread): device_timestamps reads pinned memory only (is_complete,
//   read, wait's polling); every ~80 ms of waiting, check_context: cudaPeekAtLastError, then a
//   private stream's creation (once) and cudaStreamQuery (relaxed). external_events:
//   cudaEventQuery (is_complete), cudaEventElapsedTime (read), cudaEventSynchronize (wait,
//   relaxed), anchor (relaxed): all relaxed (external_events.cpp). Delivery to sinks and
//   statistics: no CUDA call.
// - Statistics thread (ProfilerOptions::stats_thread): no CUDA call.
// - Clock calibration (calibrate_clock, on the caller's thread): cudaHostAlloc,
//   cudaHostGetDevicePointer, a private stream, one kernel on it, cudaStreamSynchronize of it,
//   cudaStreamDestroy, cudaFreeHost: all relaxed (sample_globaltimer, clock.cpp).
// - Eager regions (the caller's thread: Profiler.region/begin/end, accgraph.torch's module
//   hooks): the stream's capture state (cudaStreamIsCapturing, cuStreamIsCapturing: allowed in
//   every mode); the marker set's first pinned flags and ring (cudaHostAlloc) and staging
//   (cudaMalloc), relaxed (markers.cpp); 1-thread marker kernels on the caller's stream, which
//   is not capturing (a launch is not refused; on the legacy stream beside a blocking capturing
//   stream it is refused exactly as the caller's own kernels there are); cudaGetDevice and
//   cudaSetDevice (allowed). The first eager region of a device also measures the marker
//   overhead (below).
// - Marker overhead (timing/engine/marker_overhead.cpp: a device's first eager region or first
//   timed launch, on that thread): Backend::create_stream (relaxed: backend.cpp), a capture of its own
//   on that stream, begun in Relaxed mode (in Global mode it would refuse every other thread's
//   unsafe calls while it runs), the
//   markers' allocations (relaxed), instantiation (relaxed: CudaGraph::instantiate), launches on
//   its own stream, polling, CudaStream::synchronize of its owned stream (relaxed: stream.cpp)
//   and the teardown (relaxed, Note [Teardown during a capture]).
// - Timed replays and foreign launches (the caller's thread): cudaGraphLaunch (accgraph's own
//   graphs) or the owner's launch, a counter-realigning kernel or a fence's marker sequence on
//   the launch stream (whose first use allocates like an eager region: relaxed), external_events'
//   cudaGraphExecEventRecordNodeSetEvent (allowed).
// - Teardown of markers, graphs, pools, buffers and streams (whichever thread drops the last
//   reference, e.g. Python's cycle collector): relaxed, Note [Teardown during a capture].
// - Backend creation (the first use of the registry's cuda backend): cudaMallocHost, a private
//   stream, the timer resolution probe's kernel on it, its wait, cudaFreeHost: relaxed
//   (measure_globaltimer_resolution_ns, kernels.cu).
// - Wrapping a framework's stream (Stream::wrap; accgraph.torch does it where PyTorch's stream
//   is first used): cudaStreamGetDevice, relaxed (backend.cpp).
// - User calls (Buffer allocation, an accgraph graph's capture): the user's
//   own, in the thread's own mode, as PyTorch's allocator does on the user's behalf.
// The Python side adds two rules (accgraph/torch/__init__.py): accgraph.torch allocates no
// memory through PyTorch's allocator, and Python's cycle collector is paused while a capture
// begun under instrument() is in progress (Note [No collection inside captures]). Checked on
// the GPU by tests/cuda ("a Global capture on one thread while others time eager regions and
// replays", 100 rounds) and tests/python/test_torch_graphs_threeway.py.

cudaStreamCaptureMode to_cuda(CaptureMode mode) noexcept;

class CudaGraph;

// --- failures of enqueued work ---------------------------------------------------------------

/// Note [CUDA failures]: Note [Failures] in accgraph/backend.hpp on CUDA. A host function
/// (cudaLaunchHostFunc) cannot throw into CUDA, so each one catches what its callable throws and
/// records it in a sink:
/// - an eager host_call records in its stream's sink, which synchronize() throws from and the
///   stream's destructor logs (after waiting for the host calls still pending on it);
/// - a host_call captured into a graph records in the sink of the capture, found through the
///   cudaGraph_t being built (capture_sink); each replay of a graph with such nodes then
///   enqueues one more host function on the replay stream that moves the replay's failure to
///   that stream's sink. The next launch of the graph waits for that move (an event), so a failure
///   of replay k is never reported on the stream of replay k+1.
/// A host_call on a stream captured by someone else (not through accgraph) has no sink: its
/// failure is logged as an Error when it happens.
struct FailureSink {
  FirstFailure failures;
  std::atomic<uint64_t> pending{0};         ///< a stream's eager host functions not yet run
  std::atomic<bool> has_host_nodes{false};  ///< a capture's: a host node records here
};

/// The sink of the accgraph capture building `graph`, or nullptr.
std::shared_ptr<FailureSink> capture_sink(cudaGraph_t graph);
void register_capture_sink(cudaGraph_t graph, std::shared_ptr<FailureSink> sink);
void unregister_capture_sink(cudaGraph_t graph) noexcept;

// --- streams ---------------------------------------------------------------------------------

/// Also a CaptureTail (Note [CUDA capture tail] in stream.cpp), owned and wrapped streams alike.
class CudaStream final : public StreamImpl, public CaptureTail, public CapturedWork {
 public:
  /// Owned: destroyed with this object; Borrowed: a wrapped handle, its creator's to destroy.
  CudaStream(int device, cudaStream_t stream, Ownership ownership);
  ~CudaStream() override;

  int device() const override { return device_; }
  void* native_handle() const override { return static_cast<void*>(stream_); }
  cudaStream_t handle() const noexcept { return stream_; }
  /// The legacy default stream (a wrapped nullptr or cudaStreamLegacy) cannot be captured.
  bool is_legacy_default() const noexcept;

  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void host_call(std::function<void()> fn) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(StreamImpl& other) override;
  void synchronize() override;
  bool is_capturing() const override;
  uint64_t capture_tail() const noexcept override;
  /// Note [Untimed foreign replays] (spi/untimed_replay.hpp), in untimed.cpp.
  std::unique_ptr<CaptureCopy> copy_capture() override;

  /// Note [Capture check on replay]: a snapshot whose bit 0 is clear only when the stream
  /// cannot be capturing now (the rest counts note_capture() calls).
  uint64_t capture_hint() const noexcept { return capture_hint_.load(std::memory_order_acquire); }
  /// A capture may now include this stream (capture_begin on it, or a fork into it).
  void note_capture() noexcept {
    uint64_t seen = capture_hint_.load(std::memory_order_relaxed);
    while (
        !capture_hint_.compare_exchange_weak(seen, ((seen | 1) + 2), std::memory_order_acq_rel)) {
    }
  }
  /// is_capturing() said no after capture_hint() returned `seen`: an owned stream needs no
  /// check until note_capture() again (unless one came in between, which keeps the bit).
  void note_not_capturing(uint64_t seen) noexcept {
    if (ownership_ == Ownership::Owned)
      capture_hint_.compare_exchange_strong(seen, seen & ~uint64_t{1}, std::memory_order_acq_rel);
  }

 private:
  cudaEvent_t order_event();

  int device_;
  cudaStream_t stream_;
  Ownership ownership_;
  cudaEvent_t order_event_ = nullptr;  // recorded here when another stream waits for this one
  // Note [Capture check on replay]: an owned stream enters a capture only through accgraph
  // (capture_begin, or a wait on a stream that may capture); a wrapped one also through its
  // owner, so it is always checked.
  std::atomic<uint64_t> capture_hint_;
  // Note [CUDA failures]; shared with the host functions enqueued here, which may outlive us.
  std::shared_ptr<FailureSink> failures_ = std::make_shared<FailureSink>();
};

/// Resolves the driver function CudaStream::is_capturing() calls (Note [Driver capture query] in
/// stream.cpp); called when the backend starts, so that no capture is under way.
void resolve_driver_capture_query() noexcept;

/// The cuda stream behind `stream`, or Error(InvalidArgument) naming `operation`.
inline CudaStream& as_cuda_stream(StreamImpl& stream, const char* operation) {
  return stream_cast<CudaStream>(stream, kBackendName, operation);
}

// --- buffers ---------------------------------------------------------------------------------

/// Allocations a graph made during its capture (graph allocation nodes, owned by the graph).
/// Shared by the graph and the Buffers that point into it.
struct GraphAllocations {
  std::mutex mutex;
  std::vector<void*> pointers;
  bool freed = false;  // the graph freed them (reset/destroy): Buffers must not touch them
};

class CudaBuffer final : public BufferImpl {
 public:
  enum class Origin { Malloc, MallocHost, GraphAllocation };
  CudaBuffer(int device, void* data, size_t bytes, MemoryKind kind, Origin origin,
             std::shared_ptr<GraphAllocations> owner = nullptr);
  ~CudaBuffer() override;
  void* data() const override { return data_; }
  size_t size() const override { return bytes_; }
  MemoryKind kind() const override { return kind_; }

 private:
  int device_;
  void* data_;
  size_t bytes_;
  MemoryKind kind_;
  Origin origin_;
  std::shared_ptr<GraphAllocations> owner_;
};

// --- pools -----------------------------------------------------------------------------------

/// Note [Graph pools]: on CUDA, stream-ordered allocations made during a capture
/// (cudaMallocAsync, cudaMallocFromPoolAsync) become graph allocation nodes whose memory the
/// graph owns (CUDA's graph allocator reuses physical pages between graphs launched in stream
/// order). A PoolId names a cudaMemPool_t whose properties those nodes are created with; the
/// backend routes Buffer::allocate made on the capturing thread during a capture to it, and
/// graphs that pass the same PoolId share it. The pool lives while any graph holds it.
struct PoolState {
  PoolId id;
  int device = 0;
  cudaMemPool_t pool = nullptr;
  ~PoolState();
};

/// Note [Pool sharing] in accgraph/pool_table.hpp; CudaGraph::capture_begin adds the device
/// check (a pool belongs to one device).
using Pools = PoolTable<PoolState>;

/// What the capturing thread's Buffer::allocate routes to (set by capture_begin).
struct CaptureContext {
  int device = -1;
  cudaStream_t stream = nullptr;
  std::shared_ptr<PoolState> pool;
  std::shared_ptr<GraphAllocations> allocations;
};
/// The innermost capture begun on this thread, or nullptr.
std::shared_ptr<CaptureContext> current_capture_context();
void push_capture_context(std::thread::id thread, std::shared_ptr<CaptureContext> context);
void pop_capture_context(std::thread::id thread, const CaptureContext* context) noexcept;

// --- graphs ----------------------------------------------------------------------------------

/// Note [CUDA untimed replays] (graph.cpp): the executable of a template's clone without its
/// marker kernels, and the order of its launches against those of the timed executable, which
/// CUDA does not order (two executables): each untimed launch records an event, which a timed
/// launch on another stream waits for. In untimed.cpp.
class UntimedExecutable {
 public:
  explicit UntimedExecutable(int device) noexcept : device_(device) {}
  ~UntimedExecutable();
  UntimedExecutable(const UntimedExecutable&) = delete;
  UntimedExecutable& operator=(const UntimedExecutable&) = delete;

  void set_device(int device) noexcept { device_ = device; }
  cudaGraphExec_t exec() const noexcept { return exec_; }
  /// (Re)builds the executable from a clone of `templ` (left as it was) without its markers.
  void build(cudaGraph_t templ);
  /// Destroys the executable (an in-flight launch finishes first, CUDA frees it then).
  void destroy() noexcept;
  /// After launching exec() on `stream`: records the event a timed launch elsewhere waits for.
  void after_launch(cudaStream_t stream);
  /// Before a timed launch on `stream`: waits for the last untimed launch if it ran elsewhere.
  void order_before(cudaStream_t stream);

 private:
  int device_;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t done_ = nullptr;  // recorded after each untimed launch
  bool recorded_ = false;
  cudaStream_t last_stream_ = nullptr;  // compared, never used after its launch
};

class CudaGraph final : public GraphImplInterface, public UntimedReplay {
 public:
  CudaGraph(Pools& pools, const GraphArgs& args);
  ~CudaGraph() override;

  void capture_begin(StreamImpl& stream, PoolId pool, CaptureMode mode) override;
  void capture_end() override;
  void instantiate() override;
  void replay(StreamImpl& stream) override;
  void reset() override;
  PoolId pool() const override;
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override;
  GraphStats stats() const override;
  bool can_replay_untimed(const StreamImpl& stream) const noexcept override;
  void replay_untimed(StreamImpl& stream) override;

  cudaGraphExec_t exec() const noexcept { return exec_; }
  /// Changes each time a new executable is built (markers re-resolve their nodes then).
  uint64_t generation() const noexcept { return generation_; }
  /// The event record node that recorded `event` in the template graph, or nullptr.
  cudaGraphNode_t event_record_node(cudaEvent_t event) const;

 private:
  void end_capture_noexcept() noexcept;
  void end_orphaned_capture_noexcept() noexcept;
  void finish_capture_state() noexcept;
  void release_allocations() noexcept;
  void destroy_executable(cudaGraphExec_t& exec) noexcept;
  void drop_template() noexcept;
  void scan_template();
  void forward_failures(CudaStream& stream);
  void launch(CudaStream& stream, cudaGraphExec_t exec);

  Pools& pools_;
  GraphArgs args_;
  bool debug_ = false;
  CudaStream* capture_stream_ = nullptr;
  int device_ = -1;
  bool capturing_ = false;
  std::thread::id capture_thread_;
  CaptureMode mode_ = CaptureMode::Global;
  std::shared_ptr<CaptureContext> context_;
  // Note [CUDA failures]: the host nodes of the current capture record here; registered under
  // capture_graph_ while the capture runs.
  std::shared_ptr<FailureSink> node_failures_;
  cudaGraph_t capture_graph_ = nullptr;
  cudaEvent_t forwarded_ = nullptr;  // recorded after each replay's forwarding host function
  bool forwarded_recorded_ = false;
  cudaStream_t upload_stream_ = nullptr;  // the capture stream, valid right after capture_end
  // A capture whose end was refused because it came from the wrong thread: still active on
  // that stream until reset() (or the destructor) runs on the thread that began it.
  cudaStream_t orphaned_capture_ = nullptr;
  std::thread::id orphaned_thread_;

  std::shared_ptr<PoolState> pool_;
  PoolId last_pool_id_;
  cudaGraph_t graph_ = nullptr;     // the captured template
  cudaGraphExec_t exec_ = nullptr;  // the executable
  // Note [CUDA untimed replays]: the executable without the marker kernels, built at the first
  // untimed replay of each generation from the template kept for it.
  bool has_marker_kernels_ = false;
  UntimedExecutable untimed_{-1};
  uint64_t untimed_generation_ = 0;
  cudaStream_t last_launch_stream_ = nullptr;  // compared, never used after its launch
  bool launched_any_ = false;
  // After reset(), the executable is kept so the next capture can update it in place.
  cudaGraphExec_t reusable_exec_ = nullptr;
  bool has_allocations_ = false;
  bool has_event_records_ = false;
  std::shared_ptr<GraphAllocations> allocations_;
  bool launched_ = false;
  std::unordered_map<cudaEvent_t, cudaGraphNode_t> event_nodes_;
  uint64_t nodes_ = 0;
  uint64_t instantiations_ = 0;
  uint64_t updates_ = 0;
  uint64_t generation_ = 0;
};

// --- markers ---------------------------------------------------------------------------------

/// How device-timestamp markers are launched and placed (each switchable from the environment).
struct DeviceMarkerModes {
  bool programmatic = false;  ///< Note [Programmatic markers] in kernels.cu (sm_90+)
  /// Captured markers moved off the critical path when the sequence ends (Note [Exact marker
  /// placement] in capture_helpers.cpp; sm_90+, the default there); false: chained.
  bool exact = false;
  /// With `exact`: the edge from a marker to the kernel after it. Programmatic (the default):
  /// that kernel launches once the marker has read the clock (exact). Launch completion: once
  /// the marker has begun (cheaper, but a short kernel may start before the marker reads).
  bool launch_completion_after = false;
};

// --- capture_helpers.cpp -----------------------------------------------------------------------

[[noreturn]] void throw_too_many_markers(uint32_t marker);
/// Whether `stream` is actively capturing (throws on a failed query).
bool stream_is_capturing(cudaStream_t stream);

/// A private non-blocking stream for the markers' own set-up work (never a user's stream, so the
/// set-up neither joins nor waits on a capture).
class PrivateStream {
 public:
  PrivateStream();
  /// Without throwing: `*err` is what CUDA returned, and get() is null unless it succeeded.
  explicit PrivateStream(cudaError_t* err);
  ~PrivateStream();
  PrivateStream(const PrivateStream&) = delete;
  PrivateStream& operator=(const PrivateStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// A stream's capture: whether it is active, the graph being captured and the nodes the next
/// captured operation will depend on (copied: CUDA's array lives until the next call).
struct CaptureState {
  bool active = false;
  cudaGraph_t graph = nullptr;
  std::vector<cudaGraphNode_t> dependencies;
};
CaptureState capture_state(cudaStream_t stream, const char* what);
/// The node just captured on `stream` (its dependency set, which is that node alone).
cudaGraphNode_t last_captured_node(cudaStream_t stream);

/// A marker kernel node captured into a graph, and the stream it was recorded on.
struct CapturedMarker {
  cudaGraphNode_t node;
  cudaStream_t stream;
};
/// What exact placement did with a sequence's markers' edges (a diagnostic, logged).
struct PlacementCounts {
  size_t after_kernel = 0;         ///< K -lc-> M: hung off the kernel before it
  size_t after_programmatic = 0;   ///< K -> M kept ordinary: K has a programmatic edge (PDL)
  size_t after_other = 0;          ///< K -> M kept ordinary: K is no kernel (copy, fill, event...)
  size_t before_kernel = 0;        ///< M -lc-> N
  size_t before_programmatic = 0;  ///< no edge M -> N: N has a programmatic edge (PDL overlap kept)
  size_t before_other = 0;         ///< M -> N ordinary: N is no kernel (the chained cost)
  size_t refused = 0;              ///< edges CUDA refused as launch-completion, kept ordinary
};
/// Note [Exact marker placement]: moves the captured `markers` (in record order) of the graph
/// being captured off its critical path. Returns the last marker of every stream, which the
/// sequence's tail must join; `counts` says what it did.
std::vector<cudaGraphNode_t> place_markers_exactly(cudaGraph_t graph,
                                                   const std::vector<CapturedMarker>& markers,
                                                   bool launch_completion_after,
                                                   PlacementCounts& counts);

/// Note [CUDA untimed replays] (graph.cpp): destroys every marker kernel node of `graph` (a
/// clone, not capturing), adding an ordinary edge P -> S wherever a marker was the only path
/// from P to S. Returns how many nodes it destroyed.
size_t strip_marker_kernels(cudaGraph_t graph);
/// Every node of `graph` (`operation` names the caller in an error).
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph, const char* operation);
/// Whether kernel node `node` launches one of the marker kernels (false for a kernel of another
/// module, whose parameters this runtime cannot read).
bool is_marker_kernel_node(cudaGraphNode_t node);

std::unique_ptr<TimestampMarkers> make_device_timestamp_markers(int device, size_t ring_depth,
                                                                uint64_t resolution_ns,
                                                                DeviceMarkerModes modes,
                                                                const MarkerOptions& sizing);
std::unique_ptr<TimestampMarkers> make_external_event_markers(int device, size_t ring_depth,
                                                              uint64_t resolution_ns);

}  // namespace accgraph::detail::cuda
