// Internal: the CUDA backend's buffers (buffer.cpp) and the graph allocations they may point
// into.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "accgraph/spi/backend.hpp"
#include "accgraph/types.hpp"

namespace accgraph::detail::cuda {

/// Allocations a graph made during its capture (graph allocation nodes, owned by the graph).
/// Shared by the graph and the Buffers that point into it.
struct GraphAllocations {
  std::mutex mutex;
  std::vector<void*> pointers;
  bool freed = false;  // the graph freed them (reset/destroy): Buffers must not touch them
};

class CudaBuffer final : public BufferImpl {
 public:
  enum class Origin { Malloc, MallocHost, GraphAllocation };
  CudaBuffer(int device, void* data, size_t bytes, MemoryKind kind, Origin origin,
             std::shared_ptr<GraphAllocations> owner = nullptr);
  ~CudaBuffer() override;
  void* data() const override { return data_; }
  size_t size() const override { return bytes_; }
  MemoryKind kind() const override { return kind_; }

 private:
  int device_;
  void* data_;
  size_t bytes_;
  MemoryKind kind_;
  Origin origin_;
  std::shared_ptr<GraphAllocations> owner_;
};

}  // namespace accgraph::detail::cuda
