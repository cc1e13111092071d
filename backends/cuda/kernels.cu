// The CUDA backend's own kernels: the delay spin, the device-timestamp markers and the timer
// resolution probe. All are one thread: they mark time, they do no work.
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_backend.hpp"
#include "cuda_kernels.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

namespace {

// %globaltimer: the GPU's nanosecond wall clock (Hopper: 32 ns steps); the same clock CUDA
// event timestamps come from, so both marker strategies report on one clock.
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start = globaltimer();
  while (globaltimer() - start < ns) {
  }
}

__global__ void write_globaltimer_kernel(uint64_t* out) {
  *reinterpret_cast<volatile uint64_t*>(out) = globaltimer();
  __threadfence_system();
}

// Note [Device timestamp ring]: a marker kernel is one store, `stamps[marker] = %globaltimer`,
// into a device-memory staging chunk chosen on the host when the marker is recorded; it reads
// nothing first, so no dependent load sits between the kernel's start and its timestamp or
// between the timestamp and its completion. The single tail kernel of a sequence picks the ring
// slot: for a captured sequence it advances a device-side replay counter (value = ++*counter,
// slot (value - 1) % ring), so every replay of the same graph lands in its own slot with no host
// work per replay; for an eager sequence the host already knows the number (`fixed`). It then
// gathers the staged stamps into the slot in pinned host memory and, after a system-wide fence,
// publishes `value` in done[slot], which makes is_complete() a plain memory read on the host.
// There is no head node.
//
// Storage grows with the markers a set's sequences record, never with a fixed capacity
// (a graph without regions holds no marker memory). A marker kernel bakes its address when it is
// captured, so staging never moves: it grows in chunks of kStagingChunk stamps, allocated by
// record() as the markers reach them, and the tail kernel receives the chunk pointers by value
// (StagingChunks, kernel parameters). The pinned ring is sized when a sequence ends (end_sequence):
// ring x the markers in it; a sequence with more markers than the current ring's stride gets a
// larger ring, and the older rings stay (a sequence in flight may still write one: the host notes
// per ring slot which ring its sequence writes). Nothing is allocated when the set is created; the
// replay counter comes with the first captured tail, the done flags with the first sequence.
// kMarkerCapacity only bounds one sequence.
//
// Why staging may be reused: the launches of one cudaGraphExec_t are serialised by CUDA (each
// is ordered behind the previous launch of the same executable, whatever the streams), so
// replay n+1's markers run after replay n's tail has copied the stamps out; every capture gets
// chunks of its own. Eager sequences may run concurrently on different streams, so each writes
// the part of the eager chunks that belongs to its own ring slot (an eager chunk holds
// kStagingChunk stamps per slot), which the caller does not reuse before the sequence was read
// (Note [Marker ring]).
//
// Marker kernels write device memory: a write to host memory would hold each marker kernel's
// completion on a PCIe round trip (measured ~0.25 us more per marker on H100).
__global__ void marker_record_kernel(uint64_t* stamp) { *stamp = globaltimer(); }

// Note [Programmatic markers]: a marker kernel launched after a kernel K normally starts only
// once K has completed, so each marker adds a whole launch latency to the critical path. With
// programmatic stream serialization (sm_90+) the marker may be scheduled while K still runs; it
// then waits in griddepcontrol.wait, which returns when K (every prerequisite grid) has
// completed and its memory is visible: the same point in time the plain launch would start
// at, minus the launch latency. So the timestamp keeps its meaning ("everything before the
// marker has finished") and the region boundary costs less device time. Only a kernel can be
// the upstream end of a programmatic edge (cudaGraphEdgeData: "Only kernel nodes define
// non-zero ports"; port 0 is full completion with memory visibility), so a marker after a copy,
// a fill or an event node keeps the ordinary dependency. Measured on H100 (bench/cuda/README.md):
// ~0.04 us less device time per marker, same accuracy, more host launch time for graphs with
// many such edges. Off with ACCGRAPH_CUDA_PROGRAMMATIC_MARKERS=0. A captured marker placed
// exactly (Note [Exact marker placement] in capture_helpers.cpp) is this kernel too: its edge
// from the kernel before it is a launch-completion edge, so it is resident while that kernel
// runs and griddepcontrol.wait is what holds its timestamp until that kernel has completed.
__global__ void marker_record_programmatic_kernel(uint64_t* stamp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  *stamp = globaltimer();
}

// Note [Exact marker placement] in capture_helpers.cpp: the placed marker also lets the kernel
// after it launch as soon as it has read the clock (griddepcontrol.launch_dependents fires its
// programmatic port; the kernel after it needs nothing it writes), so that kernel starts after
// the timestamp, without waiting for this kernel's completion.
__global__ void marker_record_placed_kernel(uint64_t* stamp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  *stamp = globaltimer();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__global__ void marker_end_kernel(uint64_t* counter, uint64_t fixed, StagingChunks staging,
                                  uint64_t* host_stamps, uint64_t* done, uint32_t ring,
                                  uint32_t stride, uint32_t count) {
  __shared__ uint64_t shared_value;
  if (threadIdx.x == 0) {
    uint64_t v = fixed;
    if (v == 0) {
      v = *counter + 1;
      *counter = v;
    }
    shared_value = v;
  }
  __syncthreads();
  const uint64_t value = shared_value;
  const uint64_t slot = (value - 1) % ring;
  uint64_t* out = host_stamps + slot * stride;
  // Unrolled over the chunks so that each chunk pointer is read from the kernel parameters at a
  // constant offset (a dynamic index would copy the whole table to local memory first).
#pragma unroll
  for (uint32_t c = 0; c < kMaxStagingChunks; ++c) {
    const uint32_t first = c * static_cast<uint32_t>(kStagingChunk);
    if (first >= count) break;
    const uint64_t* chunk = staging.chunk[c];
    const uint32_t n = min(count - first, static_cast<uint32_t>(kStagingChunk));
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) out[first + i] = chunk[i];
  }
  __syncthreads();
  // One system-scope fence, by the thread that publishes: the barrier orders every thread's
  // stamp writes before it and fences are cumulative (the pattern of cooperative groups' grid
  // sync), so the host sees all the stamps before the flag. No fence after the flag: the
  // kernel's completion flushes it, and a fence there would only hold the tail (and the next
  // replay behind it) on a PCIe round trip.
  if (threadIdx.x == 0) {
    __threadfence_system();
    reinterpret_cast<volatile uint64_t*>(done)[slot] = value;
  }
}

__global__ void set_counter_kernel(uint64_t* counter, uint64_t value) { *counter = value; }

__global__ void resolution_kernel(uint64_t* out, int samples) {
  uint64_t best = ~0ull;
  uint64_t previous = globaltimer();
  for (int i = 0; i < samples; ++i) {
    uint64_t now = globaltimer();
    if (now != previous && now - previous < best) best = now - previous;
    previous = now;
  }
  *out = best;
}

// Note [Clock sampling kernel]: sample i is taken when the host raises *flag to i + 1: the kernel
// then writes %globaltimer to out[i] (host-mapped, so the host sees it without a copy). It
// gives up after timeout_ns without the flag (out[i] stays 0), so a host that failed or
// stopped never leaves a kernel spinning on the GPU.
__global__ void globaltimer_on_flag_kernel(const volatile unsigned* flag,
                                           volatile unsigned long long* out, unsigned count,
                                           uint64_t timeout_ns) {
  for (unsigned i = 0; i < count; ++i) {
    const uint64_t waiting_since = globaltimer();
    while (*flag != i + 1)
      if (globaltimer() - waiting_since > timeout_ns) return;
    out[i] = globaltimer();
    __threadfence_system();
  }
}

}  // namespace

cudaError_t launch_globaltimer_on_flag(cudaStream_t stream, const unsigned* flag,
                                       unsigned long long* out, unsigned count,
                                       uint64_t timeout_ns) {
  globaltimer_on_flag_kernel<<<1, 1, 0, stream>>>(flag, out, count, timeout_ns);
  return cudaGetLastError();
}

cudaError_t launch_spin(cudaStream_t stream, uint64_t ns) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t launch_write_globaltimer(cudaStream_t stream, uint64_t* out) {
  write_globaltimer_kernel<<<1, 1, 0, stream>>>(out);
  return cudaGetLastError();
}

cudaError_t launch_marker_record(cudaStream_t stream, uint64_t* stamp, MarkerLaunch how) {
  switch (how) {
    case MarkerLaunch::Plain:
      marker_record_kernel<<<1, 1, 0, stream>>>(stamp);
      return cudaGetLastError();
    case MarkerLaunch::Placed:  // Note [Exact marker placement] in capture_helpers.cpp
      marker_record_placed_kernel<<<1, 1, 0, stream>>>(stamp);
      return cudaGetLastError();
    case MarkerLaunch::Programmatic:
      break;
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(1);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, marker_record_programmatic_kernel, stamp);
}

cudaError_t launch_marker_end(cudaStream_t stream, uint64_t* counter, uint64_t fixed,
                              const StagingChunks& staging, uint64_t* host_stamps, uint64_t* done,
                              uint32_t ring, uint32_t stride, uint32_t count) {
  unsigned threads = count <= 32 ? 32 : 256;
  marker_end_kernel<<<1, threads, 0, stream>>>(counter, fixed, staging, host_stamps, done, ring,
                                               stride, count);
  return cudaGetLastError();
}

bool is_marker_kernel(const void* function) noexcept {
  return function == reinterpret_cast<const void*>(&marker_record_kernel) ||
         function == reinterpret_cast<const void*>(&marker_record_programmatic_kernel) ||
         function == reinterpret_cast<const void*>(&marker_record_placed_kernel) ||
         function == reinterpret_cast<const void*>(&marker_end_kernel);
}

cudaError_t launch_set_counter(cudaStream_t stream, uint64_t* counter, uint64_t value) {
  set_counter_kernel<<<1, 1, 0, stream>>>(counter, value);
  return cudaGetLastError();
}

namespace {

// The kernel's own name, which a kernel trace shows inside the name it gives the kernel ("void
// accgraph::detail::cuda::(anonymous namespace)::marker_end_kernel(unsigned long*, ...)").
// Taking the kernel's address keeps the text and the symbol one: a renamed kernel fails to
// compile here instead of leaving a stale name in the reports.
template <class Kernel>
std::string kernel_name(Kernel*, const char* name) {
  return name;
}
#define ACCGRAPH_KERNEL_NAME(kernel) kernel_name(&kernel, #kernel)

}  // namespace

timing::MarkerKernels device_timestamp_marker_kernels() {
  timing::MarkerKernels names;
  names.record_at_start = {ACCGRAPH_KERNEL_NAME(marker_record_kernel)};
  // Both wait in griddepcontrol.wait for the kernel before them, then store (Note
  // [Programmatic markers], Note [Exact marker placement]).
  names.record_at_end = {ACCGRAPH_KERNEL_NAME(marker_record_programmatic_kernel),
                         ACCGRAPH_KERNEL_NAME(marker_record_placed_kernel)};
  names.end = {ACCGRAPH_KERNEL_NAME(marker_end_kernel)};
  return names;
}

#undef ACCGRAPH_KERNEL_NAME

uint64_t measure_globaltimer_resolution_ns() {
  // Note [Capture-mode rules]: the backend may be created while another thread captures in
  // Global mode: the probe's memory, stream and wait are relaxed, and its kernel runs on a
  // private non-blocking stream (the legacy stream would involve a blocking capturing stream).
  RelaxedCaptureModeGuard relaxed;
  uint64_t* out = nullptr;
  ACCGRAPH_CUDA_CHECK(cudaMallocHost(&out, sizeof(uint64_t)), "timer resolution probe");
  *out = 0;
  cudaStream_t stream = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err == cudaSuccess) {
    resolution_kernel<<<1, 1, 0, stream>>>(out, 20000);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream), "timer resolution probe");
  }
  uint64_t result = *out;
  ACCGRAPH_CUDA_LOG(cudaFreeHost(out), "timer resolution probe");
  if (err != cudaSuccess) throw_cuda_error(err, "resolution_kernel", "timer resolution probe");
  return result == ~0ull ? 0 : result;
}

}  // namespace accgraph::detail::cuda
