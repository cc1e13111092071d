// Internal: what every file of the CUDA backend shares: its names and limits, the device and
// capture-mode guards, and the rules of its calls during captures (Note [Teardown during a
// capture], Note [Capture-mode rules]). The backend's objects have a header each, beside the
// file that implements them (cuda_stream.hpp, cuda_graph.hpp, ...). Nothing here is visible
// outside the module.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

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
// reference goes, the cycle collector at any allocation): in a bench on the H200 (bench/README.md,
// 'Targets and figures the code cites') a timed graph freed in the middle of the next
// torch.cuda.graph capture freed its markers there, and the capture failed with
// cudaErrorStreamCaptureInvalidated. So the backend frees and destroys (markers, buffers, streams,
// graphs and their pools, the clock sampler's memory), and waits for an external_events marker
// while a dropped graph collects its last replays, under RelaxedCaptureModeGuard: in relaxed mode
// the same calls succeed and the capture goes on (seen on the H200, CUDA 13.0, driver 580.159:
// cudaFree and cudaFreeHost from the capturing thread and from another thread, during Global,
// ThreadLocal and Relaxed captures, and the captured graph replayed correctly). Not covered: a
// dropped graph whose own graph allocations are still live after a launch waits for the device
// (cudaDeviceSynchronize in CudaGraph::release_allocations), which a capture may still refuse; and
// a torch graph freed during a capture breaks it by itself (PyTorch's CUDAGraph reset is refused
// the same way and warns). Checked by tests/cuda ("dropping timed graphs, buffers and streams
// during another capture", both marker strategies, on the capturing thread and another) and
// tests/python/test_torch.py (timed accgraph objects freed during a torch capture).

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

}  // namespace accgraph::detail::cuda
