// What both marker strategies share: capture queries, a private stream, and where a captured
// device-timestamp marker sits in the graph (Note [Exact marker placement]).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_capture_helpers.hpp"
#include "cuda_kernels.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

void throw_too_many_markers(uint32_t marker) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("record: marker {} is beyond the {} markers a cuda sequence can hold: "
                          "time fewer regions per graph",
                          marker, kMarkerCapacity),
              kBackendName);
}

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ACCGRAPH_CUDA_CHECK(cudaStreamIsCapturing(stream, &status), "markers: reading the capture state");
  return status == cudaStreamCaptureStatusActive;
}

PrivateStream::PrivateStream() {
  ACCGRAPH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                      "markers: creating a private stream");
}

PrivateStream::PrivateStream(cudaError_t* err) {
  *err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (*err != cudaSuccess) stream_ = nullptr;
}

PrivateStream::~PrivateStream() {
  if (stream_ == nullptr) return;
  // Note [Teardown during a capture]
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream_), "markers: destroying a private stream");
}

CaptureState capture_state(cudaStream_t stream, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CaptureState state;
  const cudaGraphNode_t* nodes = nullptr;
  // Asked for although unused: without it, non-default edge data on a dependency (a
  // programmatic edge) makes the query fail with cudaErrorLossyQuery.
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
  ACCGRAPH_CUDA_CHECK(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, &state.graph, &nodes, &edges, &count),
      what);
  state.active = status == cudaStreamCaptureStatusActive;
  if (state.active && nodes != nullptr) state.dependencies.assign(nodes, nodes + count);
  return state;
}

cudaGraphNode_t last_captured_node(cudaStream_t stream) {
  const CaptureState state = capture_state(stream, "record: reading the marker node just captured");
  if (!state.active || state.dependencies.size() != 1)
    throw Error(ErrorCode::BackendError,
                fmt::format("record: after a marker launch the capturing stream depends on {} "
                            "nodes, not on the marker alone: report this as a bug",
                            state.dependencies.size()),
                kBackendName);
  return state.dependencies[0];
}

// Note [Exact marker placement]: where a captured device-timestamp marker sits in the graph.
// During the capture each marker is a link of its stream's chain (K -> M -> N, the edges CUDA
// makes), so the capture tail, boundary sharing and fork/join work as for any kernel. When the
// sequence ends (end_sequence, before the capture does: accgraph's capture_end, a foreign
// graph's, PyTorch's through accgraph.torch), the graph being captured is reachable
// (cudaStreamGetCaptureInfo; CUDA permits everything on it but destroying it and removing
// nodes), every node after each marker is known, and each marker is taken out of the chain:
// - The user's edges come back: M's predecessors K get M's edges to its successors N, with the
//   edge data CUDA gave M -> N where K is a kernel (N launched with programmatic stream
//   serialization, PDL, gets back its programmatic edge from K), an ordinary edge otherwise
//   (as CUDA would have captured N after a copy or a fill). Predecessors are resolved through
//   markers, so two markers in a row restore K -> N too.
// - K -> M becomes a launch-completion edge where K is a kernel with no programmatic edge of its
//   own: M is launched once K's blocks have all started, so it is resident while K runs, and
//   waits on the device in griddepcontrol.wait, which returns when K has completed and its
//   memory is visible. M then reads %globaltimer (after K ended: exact) and fires its
//   programmatic port (griddepcontrol.launch_dependents, marker_record_placed_kernel).
// - M -> N becomes an edge from that programmatic port where N is a kernel: N waits for K in
//   full, as before, and for M's timestamp, not for M's completion. So N starts after M read
//   the clock (exact), and a boundary costs the time from K's completion to M's trigger instead
//   of a whole launch and completion of M. Where N is not a kernel (a copy, a fill, an event:
//   ports exist only on kernel nodes) the edge stays ordinary: that boundary keeps the chained
//   cost.
//   Measured on an H200 (bench_modules, GPT-2-small-like stack, decode shape, 122 regions):
//   1.140x the untimed replay, against 1.321x chained; the CUPTI referee (bench_accuracy.py) saw
//   a region begin 0.13 us before its first kernel (median; p95 0.06 us after) and end 0.20 us
//   after its last. A launch-completion edge M -> N instead (N waits only for M to have begun, the
//   marker placement probe's cheapest row: bench/README.md, 'Targets and figures the code cites')
//   cost 1.086x but was not exact on real kernels: N, launched while M waited, began 0.42 us
//   (median) before M read the clock. ACCGRAPH_CUDA_MARKER_PLACEMENT=launch_completion keeps it for
//   comparison.
// - PDL (an edge K -prog-> N of the user's): any edge into N, or a second programmatic edge out
//   of K, turns the overlap into a full dependency (1.27-1.60x on the probe). Then M hangs off
//   K by an ordinary edge and has no edge to N: the overlap stays, and the boundary is K's end
//   (M reads after K completed; N's prologue, and the part after its griddepcontrol.wait that
//   runs while M is launched, are counted in the region that ends at the boundary). README
//   "Marker placement" states it; tests/cuda measured 9 ns per such boundary.
// - Markers stay in order: each marker gets an ordinary edge from the previous marker of its
//   stream (off the critical path: that marker completed right after its own K), and the
//   sequence's tail kernel joins the last marker of every stream (end_sequence), so every stamp
//   is written before the tail copies them.
// - An edge CUDA refuses as a port edge stays ordinary: correct, only slower (counted).
namespace {

struct Edge {
  cudaGraphNode_t node;
  cudaGraphEdgeData data;
};

bool is_default(const cudaGraphEdgeData& data) {
  return data.from_port == 0 && data.to_port == 0 && data.type == cudaGraphDependencyTypeDefault;
}

bool is_programmatic(const cudaGraphEdgeData& data) {
  return data.type == cudaGraphDependencyTypeProgrammatic;
}

cudaGraphEdgeData launch_completion_edge() {
  cudaGraphEdgeData data{};
  data.from_port = cudaGraphKernelNodePortLaunchCompletion;
  data.type = cudaGraphDependencyTypeProgrammatic;
  return data;
}

cudaGraphEdgeData programmatic_edge() {
  cudaGraphEdgeData data{};
  data.from_port = cudaGraphKernelNodePortProgrammatic;
  data.type = cudaGraphDependencyTypeProgrammatic;
  return data;
}

// A node's edges in one direction: cudaGraphNodeGetDependencies (into it) or
// cudaGraphNodeGetDependentNodes (out of it), which take the same arguments.
using EdgeQuery = cudaError_t (*)(cudaGraphNode_t, cudaGraphNode_t*, cudaGraphEdgeData*, size_t*);

std::vector<Edge> edges_of(cudaGraphNode_t node, EdgeQuery query, const char* what) {
  size_t count = 0;
  ACCGRAPH_CUDA_CHECK(query(node, nullptr, nullptr, &count), what);
  std::vector<cudaGraphNode_t> nodes(count);
  std::vector<cudaGraphEdgeData> data(count);
  ACCGRAPH_CUDA_CHECK(query(node, nodes.data(), data.data(), &count), what);
  std::vector<Edge> edges;
  edges.reserve(count);
  for (size_t i = 0; i < count; ++i) edges.push_back(Edge{nodes[i], data[i]});
  return edges;
}

std::vector<Edge> in_edges(cudaGraphNode_t node) {
  return edges_of(node, &cudaGraphNodeGetDependencies, "end_sequence: reading a node's edges in");
}

std::vector<Edge> out_edges(cudaGraphNode_t node) {
  return edges_of(node, &cudaGraphNodeGetDependentNodes,
                  "end_sequence: reading a node's edges out");
}

bool has_edge(cudaGraphNode_t from, cudaGraphNode_t to) {
  for (const Edge& e : in_edges(to))
    if (e.node == from) return true;
  return false;
}

class Placement {
 public:
  Placement(cudaGraph_t graph, const std::vector<CapturedMarker>& markers,
            bool launch_completion_after, PlacementCounts& counts)
      : graph_(graph),
        markers_(markers),
        after_(launch_completion_after ? launch_completion_edge() : programmatic_edge()),
        counts_(counts) {
    for (const CapturedMarker& m : markers) marker_nodes_.insert(m.node);
  }

  std::vector<cudaGraphNode_t> run() {
    for (const CapturedMarker& m : markers_) restore_user_edges(m.node);
    for (const CapturedMarker& m : markers_) hang_off_predecessors(m.node);
    return order_markers();
  }

 private:
  bool is_marker(cudaGraphNode_t node) const { return marker_nodes_.count(node) != 0; }

  bool is_kernel(cudaGraphNode_t node) {
    auto known = kernel_.find(node);
    if (known != kernel_.end()) return known->second;
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    ACCGRAPH_CUDA_CHECK(cudaGraphNodeGetType(node, &type), "end_sequence: reading a node's type");
    return kernel_[node] = type == cudaGraphNodeTypeKernel;
  }

  void remove(cudaGraphNode_t from, cudaGraphNode_t to, const cudaGraphEdgeData& data) {
    ACCGRAPH_CUDA_CHECK(cudaGraphRemoveDependencies(graph_, &from, &to, &data, 1),
                        "end_sequence: moving a marker's edge");
  }
  void add(cudaGraphNode_t from, cudaGraphNode_t to, const cudaGraphEdgeData& data) {
    ACCGRAPH_CUDA_CHECK(cudaGraphAddDependencies(graph_, &from, &to, &data, 1),
                        "end_sequence: adding a marker's edge");
  }
  // Replaces the ordinary edge from -> to by `data`; keeps the ordinary edge where CUDA refuses
  // the new one (Note [Exact marker placement]: correct, only slower).
  bool retype(cudaGraphNode_t from, cudaGraphNode_t to, const cudaGraphEdgeData& data) {
    const cudaGraphEdgeData ordinary{};
    remove(from, to, ordinary);
    if (cudaGraphAddDependencies(graph_, &from, &to, &data, 1) == cudaSuccess) return true;
    (void)cudaGetLastError();
    add(from, to, ordinary);
    ++counts_.refused;
    return false;
  }

  // The user's nodes M's timestamp follows: its predecessors, through markers.
  const std::vector<Edge>& user_predecessors(cudaGraphNode_t marker) {
    auto known = user_preds_.find(marker);
    if (known != user_preds_.end()) return known->second;
    std::vector<Edge> preds;
    for (const Edge& e : in_edges(marker)) {
      if (!is_marker(e.node)) {
        preds.push_back(e);
        continue;
      }
      for (const Edge& p : user_predecessors(e.node))
        if (std::none_of(preds.begin(), preds.end(),
                         [&](const Edge& q) { return q.node == p.node; }))
          preds.push_back(p);
    }
    return user_preds_[marker] = std::move(preds);
  }

  // M -> N becomes K -> N (the user's edge) plus M -lc-> N, or nothing from M under PDL.
  void restore_user_edges(cudaGraphNode_t marker) {
    const std::vector<Edge> preds = user_predecessors(marker);
    for (const Edge& succ : out_edges(marker)) {
      if (is_marker(succ.node)) continue;  // the markers' own order stays
      remove(marker, succ.node, succ.data);
      bool overlapped = false;  // a programmatic edge of the user's now reaches N
      for (const Edge& pred : preds) {
        cudaGraphEdgeData data{};
        if (is_programmatic(succ.data) && is_kernel(pred.node)) {
          data = succ.data;
          overlapped = true;
          programmatic_sources_.insert(pred.node);
        }
        if (!has_edge(pred.node, succ.node)) add(pred.node, succ.node, data);
      }
      for (const Edge& in : in_edges(succ.node))
        if (in.node != marker && is_programmatic(in.data)) overlapped = true;
      if (overlapped) {  // PDL: no edge into N, the overlap stays
        ++counts_.before_programmatic;
        continue;
      }
      const cudaGraphEdgeData ordinary{};
      if (is_kernel(succ.node)) {
        if (cudaGraphAddDependencies(graph_, &marker, &succ.node, &after_, 1) == cudaSuccess) {
          ++counts_.before_kernel;
          continue;
        }
        (void)cudaGetLastError();
        ++counts_.refused;
      } else {
        ++counts_.before_other;
      }
      add(marker, succ.node, ordinary);
    }
  }

  // K -> M becomes K -lc-> M where K is a kernel without a programmatic edge of its own.
  void hang_off_predecessors(cudaGraphNode_t marker) {
    for (const Edge& pred : in_edges(marker)) {
      if (is_marker(pred.node) || !is_default(pred.data)) continue;
      if (!is_kernel(pred.node)) {
        ++counts_.after_other;
      } else if (has_programmatic_out_edge(pred.node)) {
        ++counts_.after_programmatic;
      } else if (retype(pred.node, marker, launch_completion_edge())) {
        ++counts_.after_kernel;
      }
    }
  }

  bool has_programmatic_out_edge(cudaGraphNode_t node) {
    if (programmatic_sources_.count(node) != 0) return true;
    for (const Edge& e : out_edges(node))
      if (!is_marker(e.node) && is_programmatic(e.data)) return true;
    return false;
  }

  // Each marker after the previous one of its stream; returns the last of every stream.
  std::vector<cudaGraphNode_t> order_markers() {
    std::vector<std::pair<cudaStream_t, cudaGraphNode_t>> last;
    for (const CapturedMarker& m : markers_) {
      auto own = std::find_if(last.begin(), last.end(),
                              [&](const auto& l) { return l.first == m.stream; });
      if (own == last.end()) {
        last.emplace_back(m.stream, m.node);
        continue;
      }
      if (!has_edge(own->second, m.node)) add(own->second, m.node, cudaGraphEdgeData{});
      own->second = m.node;
    }
    std::vector<cudaGraphNode_t> nodes;
    nodes.reserve(last.size());
    for (const auto& l : last) nodes.push_back(l.second);
    return nodes;
  }

  cudaGraph_t graph_;
  const std::vector<CapturedMarker>& markers_;
  const cudaGraphEdgeData after_;  // M -> N where N is a kernel
  PlacementCounts& counts_;
  std::unordered_set<cudaGraphNode_t> marker_nodes_;
  std::unordered_map<cudaGraphNode_t, bool> kernel_;
  std::unordered_map<cudaGraphNode_t, std::vector<Edge>> user_preds_;
  std::unordered_set<cudaGraphNode_t> programmatic_sources_;
};

}  // namespace

std::vector<cudaGraphNode_t> place_markers_exactly(cudaGraph_t graph,
                                                   const std::vector<CapturedMarker>& markers,
                                                   bool launch_completion_after,
                                                   PlacementCounts& counts) {
  // CUDA removes no dependency in a graph that holds memory allocation or free nodes
  // (cudaGraphRemoveDependencies: cudaErrorNotSupported, seen on an H100, CUDA 13.0): there the
  // markers stay links of their streams' chains, as captured (the chained placement: exact,
  // each boundary at the cost of a launch), and the tail follows them in stream order.
  for (cudaGraphNode_t node : graph_nodes(graph, "end_sequence")) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    ACCGRAPH_CUDA_CHECK(cudaGraphNodeGetType(node, &type), "end_sequence: reading a node's type");
    if (type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree) {
      counts.refused += markers.size();
      return {};
    }
  }
  return Placement(graph, markers, launch_completion_after, counts).run();
}

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph, const char* operation) {
  size_t count = 0;
  ACCGRAPH_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count),
                      fmt::format("{}: counting a graph's nodes", operation));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0)
    ACCGRAPH_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count),
                        fmt::format("{}: reading a graph's nodes", operation));
  nodes.resize(count);
  return nodes;
}

bool is_marker_kernel_node(cudaGraphNode_t node) {
  cudaKernelNodeParams params{};
  const cudaError_t err = cudaGraphKernelNodeGetParams(node, &params);
  // A kernel of another module (PyTorch's, a library's, another runtime's) has no host function
  // this runtime knows: CUDA says cudaErrorInvalidDeviceFunction. The markers are this module's.
  if (err == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();
    return false;
  }
  ACCGRAPH_CUDA_CHECK(err, "reading a kernel node's parameters");
  return is_marker_kernel(params.func);
}

namespace {

using NodeSet = std::unordered_set<cudaGraphNode_t>;
using Successors = std::unordered_map<cudaGraphNode_t, std::vector<cudaGraphNode_t>>;

NodeSet marker_kernel_nodes(const std::vector<cudaGraphNode_t>& nodes) {
  NodeSet markers;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    ACCGRAPH_CUDA_CHECK(cudaGraphNodeGetType(node, &type), "untimed: reading a node's type");
    if (type == cudaGraphNodeTypeKernel && is_marker_kernel_node(node)) markers.insert(node);
  }
  return markers;
}

// Whether `to` follows `from` through the user's nodes' edges in `user_succ`.
bool reaches(const Successors& user_succ, cudaGraphNode_t from, cudaGraphNode_t to) {
  std::vector<cudaGraphNode_t> stack{from};
  NodeSet seen{from};
  while (!stack.empty()) {
    cudaGraphNode_t n = stack.back();
    stack.pop_back();
    if (n == to) return true;
    auto found = user_succ.find(n);
    if (found == user_succ.end()) continue;
    for (cudaGraphNode_t s : found->second)
      if (seen.insert(s).second) stack.push_back(s);
  }
  return false;
}

// The user nodes before the user node `node` through markers only (none when no marker is
// right before it).
std::vector<cudaGraphNode_t> sources_through_markers(cudaGraphNode_t node, const NodeSet& markers) {
  std::vector<cudaGraphNode_t> through;  // markers right before `node`
  for (const Edge& e : in_edges(node))
    if (markers.count(e.node) != 0) through.push_back(e.node);
  NodeSet seen(through.begin(), through.end());
  std::vector<cudaGraphNode_t> sources;
  while (!through.empty()) {
    cudaGraphNode_t m = through.back();
    through.pop_back();
    for (const Edge& e : in_edges(m)) {
      if (!seen.insert(e.node).second) continue;
      if (markers.count(e.node) != 0)
        through.push_back(e.node);
      else
        sources.push_back(e.node);
    }
  }
  return sources;
}

}  // namespace

size_t strip_marker_kernels(cudaGraph_t graph) {
  const std::vector<cudaGraphNode_t> nodes = graph_nodes(graph, "untimed");
  const NodeSet markers = marker_kernel_nodes(nodes);
  if (markers.empty()) return 0;
  // Successors among the user's nodes, read once (edges between user nodes do not change below
  // except by the ones added, which only join what was already ordered through a marker).
  Successors user_succ;
  for (cudaGraphNode_t node : nodes) {
    if (markers.count(node) != 0) continue;
    for (const Edge& e : out_edges(node))
      if (markers.count(e.node) == 0) user_succ[node].push_back(e.node);
  }
  // For each user node S after a marker: the user nodes P before it through markers only.
  for (cudaGraphNode_t node : nodes) {
    if (markers.count(node) != 0) continue;
    for (cudaGraphNode_t p : sources_through_markers(node, markers)) {
      if (reaches(user_succ, p, node)) continue;
      ACCGRAPH_CUDA_CHECK(cudaGraphAddDependencies(graph, &p, &node, nullptr, 1),
                          "untimed: keeping an order a marker carried");
      user_succ[p].push_back(node);
    }
  }
  for (cudaGraphNode_t m : markers)
    ACCGRAPH_CUDA_CHECK(cudaGraphDestroyNode(m), "untimed: removing a marker kernel");
  return markers.size();
}

}  // namespace accgraph::detail::cuda
