// Internal: the CUDA backend's graphs (graph.cpp) and their executables without markers
// (untimed.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include <cuda_runtime_api.h>

#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "cuda_pools.hpp"
#include "cuda_stream.hpp"

namespace accgraph::detail::cuda {

/// Note [CUDA untimed replays] (graph.cpp): the executable of a template's clone without its
/// marker kernels, and the order of its launches against those of the timed executable, which
/// CUDA does not order (two executables): each untimed launch records an event, which a timed
/// launch on another stream waits for. In untimed.cpp.
class UntimedExecutable {
 public:
  explicit UntimedExecutable(int device) noexcept : device_(device) {}
  ~UntimedExecutable();
  UntimedExecutable(const UntimedExecutable&) = delete;
  UntimedExecutable& operator=(const UntimedExecutable&) = delete;

  void set_device(int device) noexcept { device_ = device; }
  cudaGraphExec_t exec() const noexcept { return exec_; }
  /// (Re)builds the executable from a clone of `templ` (left as it was) without its markers.
  void build(cudaGraph_t templ);
  /// Destroys the executable (an in-flight launch finishes first, CUDA frees it then).
  void destroy() noexcept;
  /// After launching exec() on `stream`: records the event a timed launch elsewhere waits for.
  void after_launch(cudaStream_t stream);
  /// Before a timed launch on `stream`: waits for the last untimed launch if it ran elsewhere.
  void order_before(cudaStream_t stream);

 private:
  int device_;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t done_ = nullptr;  // recorded after each untimed launch
  bool recorded_ = false;
  cudaStream_t last_stream_ = nullptr;  // compared, never used after its launch
};

class CudaGraph final : public GraphImplInterface, public UntimedReplay {
 public:
  CudaGraph(Pools& pools, const GraphArgs& args);
  ~CudaGraph() override;

  void capture_begin(StreamImpl& stream, PoolId pool, CaptureMode mode) override;
  void capture_end() override;
  void instantiate() override;
  void replay(StreamImpl& stream) override;
  void reset() override;
  PoolId pool() const override;
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override;
  GraphStats stats() const override;
  bool can_replay_untimed(const StreamImpl& stream) const noexcept override;
  void replay_untimed(StreamImpl& stream) override;

  cudaGraphExec_t exec() const noexcept { return exec_; }
  /// Changes each time a new executable is built (markers re-resolve their nodes then).
  uint64_t generation() const noexcept { return generation_; }
  /// The event record node that recorded `event` in the template graph, or nullptr.
  cudaGraphNode_t event_record_node(cudaEvent_t event) const;

 private:
  void end_capture_noexcept() noexcept;
  void end_orphaned_capture_noexcept() noexcept;
  void finish_capture_state() noexcept;
  void release_allocations() noexcept;
  void destroy_executable(cudaGraphExec_t& exec) noexcept;
  void drop_template() noexcept;
  void scan_template();
  void forward_failures(CudaStream& stream);
  void launch(CudaStream& stream, cudaGraphExec_t exec);

  Pools& pools_;
  GraphArgs args_;
  bool debug_ = false;
  CudaStream* capture_stream_ = nullptr;
  int device_ = -1;
  bool capturing_ = false;
  std::thread::id capture_thread_;
  CaptureMode mode_ = CaptureMode::Global;
  std::shared_ptr<CaptureContext> context_;
  // Note [CUDA failures]: the host nodes of the current capture record here; registered under
  // capture_graph_ while the capture runs.
  std::shared_ptr<FailureSink> node_failures_;
  cudaGraph_t capture_graph_ = nullptr;
  cudaEvent_t forwarded_ = nullptr;  // recorded after each replay's forwarding host function
  bool forwarded_recorded_ = false;
  cudaStream_t upload_stream_ = nullptr;  // the capture stream, valid right after capture_end
  // A capture whose end was refused because it came from the wrong thread: still active on
  // that stream until reset() (or the destructor) runs on the thread that began it.
  cudaStream_t orphaned_capture_ = nullptr;
  std::thread::id orphaned_thread_;

  std::shared_ptr<PoolState> pool_;
  PoolId last_pool_id_;
  cudaGraph_t graph_ = nullptr;     // the captured template
  cudaGraphExec_t exec_ = nullptr;  // the executable
  // Note [CUDA untimed replays]: the executable without the marker kernels, built at the first
  // untimed replay of each generation from the template kept for it.
  bool has_marker_kernels_ = false;
  UntimedExecutable untimed_{-1};
  uint64_t untimed_generation_ = 0;
  cudaStream_t last_launch_stream_ = nullptr;  // compared, never used after its launch
  bool launched_any_ = false;
  // After reset(), the executable is kept so the next capture can update it in place.
  cudaGraphExec_t reusable_exec_ = nullptr;
  bool has_allocations_ = false;
  bool has_event_records_ = false;
  std::shared_ptr<GraphAllocations> allocations_;
  bool launched_ = false;
  std::unordered_map<cudaEvent_t, cudaGraphNode_t> event_nodes_;
  uint64_t nodes_ = 0;
  uint64_t instantiations_ = 0;
  uint64_t updates_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace accgraph::detail::cuda
