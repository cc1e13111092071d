// Kernels the CUDA tests use as known work (see cuda_test_kernels.hpp).
#include "cuda_test_kernels.hpp"

namespace accgraph_test {

namespace {

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void timed_spin_kernel(uint64_t ns, uint64_t* out) {
  uint64_t start = globaltimer();
  uint64_t now = start;
  while (now - start < ns) now = globaltimer();
  out[0] = start;
  out[1] = now;
}

__global__ void increment_kernel(int* value) { *value += 1; }

// A kernel as serving stacks write them for programmatic dependent launch: a prologue that does
// not read the previous kernel's output, griddepcontrol.wait, the main part, and the trigger for
// the next kernel three quarters into it (the late trigger). Block 0's thread 0 records its
// start, the moment its wait returned and its end; every block spins.
__global__ void pdl_spin_kernel(uint64_t prologue_ns, uint64_t main_ns, uint64_t* out) {
  const uint64_t start = globaltimer();
  while (globaltimer() - start < prologue_ns) {
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const uint64_t waited = globaltimer();
  uint64_t now = waited;
  while (now - waited < main_ns * 3 / 4) now = globaltimer();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  while (now - waited < main_ns) now = globaltimer();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = start;
    out[1] = waited;
    out[2] = now;
  }
}

__global__ void empty_kernel() {}

__global__ void illegal_write_kernel() { *reinterpret_cast<volatile int*>(uintptr_t{8}) = 1; }

}  // namespace

cudaError_t launch_timed_spin(cudaStream_t stream, uint64_t ns, uint64_t* out) {
  timed_spin_kernel<<<1, 1, 0, stream>>>(ns, out);
  return cudaGetLastError();
}

cudaError_t launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_pdl_spin(cudaStream_t stream, uint64_t prologue_ns, uint64_t main_ns,
                            unsigned blocks, bool programmatic, uint64_t* out) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(32);
  config.stream = stream;
  config.attrs = programmatic ? &attribute : nullptr;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, pdl_spin_kernel, prologue_ns, main_ns, out);
}

cudaError_t launch_increment(cudaStream_t stream, int* value) {
  increment_kernel<<<1, 1, 0, stream>>>(value);
  return cudaGetLastError();
}

cudaError_t launch_illegal_write(cudaStream_t stream) {
  illegal_write_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace accgraph_test
