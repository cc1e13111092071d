// Internal: the launchers of the CUDA backend's own kernels (kernels.cu), the clock sampling
// built on them (clock.cpp) and the staging layout the marker kernels share with markers.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/marker_kernels.hpp"
#include "cuda_backend.hpp"

namespace accgraph::detail::cuda {

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

}  // namespace accgraph::detail::cuda
