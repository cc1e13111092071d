// Internal: the CUDA backend's capture helpers (capture_helpers.cpp): capture queries, the
// markers' private stream, exact marker placement and the stripping of marker kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

namespace accgraph::detail::cuda {

[[noreturn]] void throw_too_many_markers(uint32_t marker);
/// Whether `stream` is actively capturing (throws on a failed query).
bool stream_is_capturing(cudaStream_t stream);

/// A private non-blocking stream for the markers' own set-up work (never a user's stream, so the
/// set-up neither joins nor waits on a capture).
class PrivateStream {
 public:
  PrivateStream();
  /// Without throwing: `*err` is what CUDA returned, and get() is null unless it succeeded.
  explicit PrivateStream(cudaError_t* err);
  ~PrivateStream();
  PrivateStream(const PrivateStream&) = delete;
  PrivateStream& operator=(const PrivateStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// A stream's capture: whether it is active, the graph being captured and the nodes the next
/// captured operation will depend on (copied: CUDA's array lives until the next call).
struct CaptureState {
  bool active = false;
  cudaGraph_t graph = nullptr;
  std::vector<cudaGraphNode_t> dependencies;
};
CaptureState capture_state(cudaStream_t stream, const char* what);
/// The node just captured on `stream` (its dependency set, which is that node alone).
cudaGraphNode_t last_captured_node(cudaStream_t stream);

/// A marker kernel node captured into a graph, and the stream it was recorded on.
struct CapturedMarker {
  cudaGraphNode_t node;
  cudaStream_t stream;
};
/// What exact placement did with a sequence's markers' edges (a diagnostic, logged).
struct PlacementCounts {
  size_t after_kernel = 0;         ///< K -lc-> M: hung off the kernel before it
  size_t after_programmatic = 0;   ///< K -> M kept ordinary: K has a programmatic edge (PDL)
  size_t after_other = 0;          ///< K -> M kept ordinary: K is no kernel (copy, fill, event...)
  size_t before_kernel = 0;        ///< M -lc-> N
  size_t before_programmatic = 0;  ///< no edge M -> N: N has a programmatic edge (PDL overlap kept)
  size_t before_other = 0;         ///< M -> N ordinary: N is no kernel (the chained cost)
  size_t refused = 0;              ///< edges CUDA refused as launch-completion, kept ordinary
};
/// Note [Exact marker placement]: moves the captured `markers` (in record order) of the graph
/// being captured off its critical path. Returns the last marker of every stream, which the
/// sequence's tail must join; `counts` says what it did.
std::vector<cudaGraphNode_t> place_markers_exactly(cudaGraph_t graph,
                                                   const std::vector<CapturedMarker>& markers,
                                                   bool launch_completion_after,
                                                   PlacementCounts& counts);

/// Note [CUDA untimed replays] (graph.cpp): destroys every marker kernel node of `graph` (a
/// clone, not capturing), adding an ordinary edge P -> S wherever a marker was the only path
/// from P to S. Returns how many nodes it destroyed.
size_t strip_marker_kernels(cudaGraph_t graph);
/// Every node of `graph` (`operation` names the caller in an error).
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph, const char* operation);
/// Whether kernel node `node` launches one of the marker kernels (false for a kernel of another
/// module, whose parameters this runtime cannot read).
bool is_marker_kernel_node(cudaGraphNode_t node);

}  // namespace accgraph::detail::cuda
