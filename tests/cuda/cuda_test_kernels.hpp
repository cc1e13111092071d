// Kernels the CUDA tests use as known work: a spin of known length that records its own true
// start and end on %globaltimer, and a counter increment.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace accgraph_test {

/// Spins `ns` nanoseconds; writes its own %globaltimer start and end to out[0], out[1].
cudaError_t launch_timed_spin(cudaStream_t stream, uint64_t ns, uint64_t* out);
/// A kernel written for programmatic dependent launch: spins `prologue_ns`, waits for the
/// kernel before it (griddepcontrol.wait), spins `main_ns` and triggers its dependents three
/// quarters into that; `blocks` blocks of 32 threads. programmatic: launched with programmatic
/// stream serialization (PDL). out[0..2]: block 0's start, the end of its wait, its end.
cudaError_t launch_pdl_spin(cudaStream_t stream, uint64_t prologue_ns, uint64_t main_ns,
                            unsigned blocks, bool programmatic, uint64_t* out);
/// An empty 1-thread kernel (the cheapest graph node).
cudaError_t launch_empty(cudaStream_t stream);
/// *value += 1 (one thread).
cudaError_t launch_increment(cudaStream_t stream, int* value);
/// Writes to an address no allocation holds: an illegal address, a sticky error that breaks the
/// device for the rest of the process (only the `--broken-context` test uses it).
cudaError_t launch_illegal_write(cudaStream_t stream);

}  // namespace accgraph_test
