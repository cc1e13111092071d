// ClockSampling for CUDA (backend.hpp, clock.sample): CLOCK_REALTIME on the host around a
// %globaltimer read by the device when it sees a flag the host raised (Note [Clock sampling
// kernel] in kernels.cu). %globaltimer is the clock of both marker strategies (markers.cpp).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_capture_helpers.hpp"
#include "cuda_kernels.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

namespace {

// Pinned, host-mapped memory freed with the scope (logged, not thrown, on failure).
class MappedHostMemory {
 public:
  explicit MappedHostMemory(size_t bytes) {
    ACCGRAPH_CUDA_CHECK(
        cudaHostAlloc(&host_, bytes, cudaHostAllocMapped),
        fmt::format("sample_clock: allocating {} bytes of mapped host memory", bytes));
    ACCGRAPH_CUDA_CHECK(cudaHostGetDevicePointer(&device_, host_, 0),
                        "sample_clock: mapping host memory into the device");
  }
  ~MappedHostMemory() {
    if (host_ == nullptr) return;
    // Note [Teardown during a capture]
    RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
    ACCGRAPH_CUDA_LOG(cudaFreeHost(host_), "sample_clock: freeing");
  }
  MappedHostMemory(const MappedHostMemory&) = delete;
  MappedHostMemory& operator=(const MappedHostMemory&) = delete;
  void* host() const { return host_; }
  void* device() const { return device_; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

class PrivateSamplingStream {
 public:
  PrivateSamplingStream() {
    ACCGRAPH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                        "sample_clock: creating a stream");
  }
  ~PrivateSamplingStream() {
    // Note [Teardown during a capture]
    RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
    ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream_), "sample_clock: destroying its stream");
  }
  PrivateSamplingStream(const PrivateSamplingStream&) = delete;
  PrivateSamplingStream& operator=(const PrivateSamplingStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

void sample_globaltimer(int device, timing::ClockSample* samples, size_t count) {
  constexpr uint64_t kTimeoutNs = 2000000000;  // per sample, on the device and on the host
  DeviceGuard guard(device);
  // Note [Capture-mode rules]: the pinned memory, the private stream, its wait and their release
  // are no part of any capture, and a capture in Global mode on another thread would refuse
  // each of them and be invalidated by it.
  RelaxedCaptureModeGuard relaxed;
  MappedHostMemory flag(sizeof(unsigned));
  MappedHostMemory out(sizeof(unsigned long long) * count);
  volatile auto* host_flag = static_cast<volatile unsigned*>(flag.host());
  volatile auto* host_out = static_cast<volatile unsigned long long*>(out.host());
  *host_flag = 0;
  for (size_t i = 0; i < count; ++i) host_out[i] = 0;
  PrivateSamplingStream stream;
  ACCGRAPH_CUDA_CHECK(
      launch_globaltimer_on_flag(stream.get(), static_cast<const unsigned*>(flag.device()),
                                 static_cast<unsigned long long*>(out.device()),
                                 static_cast<unsigned>(count), kTimeoutNs),
      "sample_clock: launching the sampling kernel");
  std::string failure;
  for (size_t i = 0; i < count && failure.empty(); ++i) {
    const uint64_t before = timing::realtime_ns();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *host_flag = static_cast<unsigned>(i + 1);
    uint64_t device_ns = 0;
    while ((device_ns = host_out[i]) == 0) {
      if (timing::realtime_ns() - before > kTimeoutNs) {
        failure = fmt::format(
            "sample_clock: device {} did not answer clock sample {} of {} within 2 s: the GPU "
            "is busy with other work that does not let a one-thread kernel run (try again when "
            "it is idle)",
            device, i + 1, count);
        break;
      }
    }
    const uint64_t after = timing::realtime_ns();
    samples[i] = {before, device_ns, after};
  }
  // On failure the kernel gives up by itself within its timeout; wait for it either way so the
  // mapped memory is not freed under it.
  ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(stream.get()),
                      "sample_clock: waiting for the sampling kernel");
  if (!failure.empty()) throw Error(ErrorCode::BackendError, failure, kBackendName);
}

}  // namespace accgraph::detail::cuda
