// Samples of the CUDA device clock against CLOCK_REALTIME (clock_sample.hpp).
#include "clock_sample.hpp"

#include <time.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace nccl_example {

namespace {

__device__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// For each sample i: waits until *flag == i + 1, then writes %globaltimer to out[i]. Gives up
// (leaving out[i] 0) after timeout_ns without the flag, so a failed host never hangs the GPU.
__global__ void globaltimer_on_flag(const volatile unsigned* flag, volatile unsigned long long* out,
                                    int count, unsigned long long timeout_ns) {
  for (int i = 0; i < count; ++i) {
    const unsigned long long waiting_since = globaltimer();
    while (*flag != static_cast<unsigned>(i + 1))
      if (globaltimer() - waiting_since > timeout_ns) return;
    out[i] = globaltimer();
    __threadfence_system();
  }
}

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void check(cudaError_t error, const char* call) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("clock sampling: ") + call +
                             " failed: " + cudaGetErrorString(error));
}

}  // namespace

std::vector<accgraph::timing::ClockSample> sample_device_clock(cudaStream_t stream, int count) {
  unsigned* flag = nullptr;
  unsigned long long* out = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(unsigned), cudaHostAllocMapped),
        "cudaHostAlloc(flag)");
  std::vector<accgraph::timing::ClockSample> samples;
  std::string failure;
  try {
    check(cudaHostAlloc(reinterpret_cast<void**>(&out), sizeof(unsigned long long) * count,
                        cudaHostAllocMapped),
          "cudaHostAlloc(samples)");
    *flag = 0;
    for (int i = 0; i < count; ++i) out[i] = 0;
    unsigned* device_flag = nullptr;
    unsigned long long* device_out = nullptr;
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0),
          "cudaHostGetDevicePointer(flag)");
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_out), out, 0),
          "cudaHostGetDevicePointer(samples)");
    constexpr unsigned long long kTimeoutNs = 2000000000ull;  // 2 s per sample
    globaltimer_on_flag<<<1, 1, 0, stream>>>(device_flag, device_out, count, kTimeoutNs);
    check(cudaGetLastError(), "launching the sampling kernel");
    volatile unsigned* host_flag = flag;
    volatile unsigned long long* host_out = out;
    for (int i = 0; i < count && failure.empty(); ++i) {
      const uint64_t before = realtime_ns();
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *host_flag = static_cast<unsigned>(i + 1);
      uint64_t device = 0;
      while ((device = host_out[i]) == 0)
        if (realtime_ns() - before > kTimeoutNs) {
          failure = "the sampling kernel did not answer within 2 s (is the GPU busy?)";
          break;
        }
      const uint64_t after = realtime_ns();
      if (failure.empty()) samples.push_back({before, device, after});
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize after sampling");
  } catch (...) {
    cudaFreeHost(out);
    cudaFreeHost(flag);
    throw;
  }
  check(cudaFreeHost(out), "cudaFreeHost(samples)");
  check(cudaFreeHost(flag), "cudaFreeHost(flag)");
  if (!failure.empty()) throw std::runtime_error("clock sampling: " + failure);
  return samples;
}

}  // namespace nccl_example
