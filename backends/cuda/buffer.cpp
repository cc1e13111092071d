// CUDA buffers: cudaMalloc device memory, cudaMallocHost pinned host memory, and graph
// allocations made during a capture (owned by the graph, see Note [Graph pools]).
#include <exception>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_buffer.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

CudaBuffer::CudaBuffer(int device, void* data, size_t bytes, MemoryKind kind, Origin origin,
                       std::shared_ptr<GraphAllocations> owner)
    : device_(device),
      data_(data),
      bytes_(bytes),
      kind_(kind),
      origin_(origin),
      owner_(std::move(owner)) {}

CudaBuffer::~CudaBuffer() {
  // Note [Teardown during a capture]
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  switch (origin_) {
    case Origin::Malloc: {
      // cudaFree waits for the device: a buffer still used by queued work stays valid.
      try {
        DeviceGuard guard(device_);
        ACCGRAPH_CUDA_LOG(cudaFree(data_), "freeing device memory");
      } catch (const std::exception& e) {
        log(LogLevel::Warning, std::string("cuda: freeing device memory: ") + e.what());
      }
      break;
    }
    case Origin::MallocHost:
      ACCGRAPH_CUDA_LOG(cudaFreeHost(data_), "freeing pinned host memory");
      break;
    case Origin::GraphAllocation:
      // The graph owns the allocation and frees it on reset or destruction (or on its next
      // launch, cudaGraphInstantiateFlagAutoFreeOnLaunch): nothing to do here.
      break;
  }
}

}  // namespace accgraph::detail::cuda
