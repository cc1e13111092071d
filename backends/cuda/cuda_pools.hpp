// Internal: the CUDA backend's graph pools and the capture context that routes a capturing
// thread's allocations to them (Note [Graph pools]; in graph.cpp).
#pragma once

#include <memory>
#include <thread>

#include <cuda_runtime_api.h>

#include "accgraph/spi/pool_table.hpp"
#include "accgraph/types.hpp"
#include "cuda_buffer.hpp"

namespace accgraph::detail::cuda {

/// Note [Graph pools]: on CUDA, stream-ordered allocations made during a capture
/// (cudaMallocAsync, cudaMallocFromPoolAsync) become graph allocation nodes whose memory the
/// graph owns (CUDA's graph allocator reuses physical pages between graphs launched in stream
/// order). A PoolId names a cudaMemPool_t whose properties those nodes are created with; the
/// backend routes Buffer::allocate made on the capturing thread during a capture to it, and
/// graphs that pass the same PoolId share it. The pool lives while any graph holds it.
struct PoolState {
  PoolId id;
  int device = 0;
  cudaMemPool_t pool = nullptr;
  ~PoolState();
};

/// Note [Pool sharing] in accgraph/spi/pool_table.hpp; CudaGraph::capture_begin adds the device
/// check (a pool belongs to one device).
using Pools = PoolTable<PoolState>;

/// What the capturing thread's Buffer::allocate routes to (set by capture_begin).
struct CaptureContext {
  int device = -1;
  cudaStream_t stream = nullptr;
  std::shared_ptr<PoolState> pool;
  std::shared_ptr<GraphAllocations> allocations;
};
/// The innermost capture begun on this thread, or nullptr.
std::shared_ptr<CaptureContext> current_capture_context();
void push_capture_context(std::thread::id thread, std::shared_ptr<CaptureContext> context);
void pop_capture_context(std::thread::id thread, const CaptureContext* context) noexcept;

}  // namespace accgraph::detail::cuda
