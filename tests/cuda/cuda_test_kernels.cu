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

cudaError_t launch_increment(cudaStream_t stream, int* value) {
  increment_kernel<<<1, 1, 0, stream>>>(value);
  return cudaGetLastError();
}

cudaError_t launch_illegal_write(cudaStream_t stream) {
  illegal_write_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace accgraph_test
