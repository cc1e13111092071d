// Samples of the CUDA device clock (%globaltimer, the clock of accgraph's CUDA markers) against
// the host's CLOCK_REALTIME, for accgraph::timing::estimate_clock_offset.
#pragma once

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "accgraph/perfetto.hpp"

namespace nccl_example {

/// `count` samples (host_before, %globaltimer, host_after) on the current device: one kernel
/// spins on a flag in host-mapped memory; per sample the host reads CLOCK_REALTIME, raises the
/// flag, waits for the kernel's %globaltimer reading and reads CLOCK_REALTIME again (Note [Clock
/// calibration] in timing/perfetto/clock.cpp). Throws std::runtime_error naming the failed call.
std::vector<accgraph::timing::ClockSample> sample_device_clock(cudaStream_t stream, int count);

}  // namespace nccl_example
