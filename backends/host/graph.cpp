// Host graphs: capture records the streams' operations, instantiate freezes them into an
// executable, replay enqueues that executable as one operation; plus pools and DOT dumps.
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "host_backend.hpp"

namespace accgraph::detail::host {

// --- HostGraph ---------------------------------------------------------------------------------

HostGraph::HostGraph(Pools& pools, const GraphArgs& args) : pools_(pools), args_(args) {}

// Replays already enqueued hold the executable themselves, so they still run after this.
HostGraph::~HostGraph() { detach_capture(); }

void HostGraph::detach_capture() noexcept {
  if (!recording_) return;
  for (const std::shared_ptr<HostQueue>& queue : recording_->queues())
    if (queue->capture() == recording_) queue->set_capture(nullptr);
  recording_.reset();
}

void HostGraph::capture_begin(StreamImpl& stream_impl, PoolId pool, CaptureMode mode) {
  HostStream& stream = as_host_stream(stream_impl, "capture_begin");
  // Every mode holds: capture modes govern what *other* threads may do while a capture runs
  // (CUDA forbids e.g. cudaMalloc under Global), and nothing in the host backend is illegal
  // during a capture. So Global, ThreadLocal and Relaxed are all honoured, not ignored.
  (void)mode;
  if (stream.is_capturing())
    throw Error(ErrorCode::InvalidState,
                "capture_begin: the host stream is already capturing: end that capture first or "
                "capture on another stream",
                kBackendName);
  std::shared_ptr<PoolState> pool_state = pools_.acquire(pool);
  recording_ = std::make_shared<Recording>(stream.queue());
  stream.queue()->set_capture(recording_);
  pool_ = std::move(pool_state);
  last_pool_id_ = pool_->id;
}

void HostGraph::capture_end() {
  std::shared_ptr<Recording> recording = recording_;
  detach_capture();
  std::string unjoined = recording->unjoined();
  if (!unjoined.empty()) {
    reset();
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_end: unjoined work on {}: every stream forked into the "
                            "capture must be joined back; call origin.wait(forked) before "
                            "capture_end (the graph was reset)",
                            unjoined),
                kBackendName);
  }
  template_ = recording->take_nodes();
  has_template_ = true;
  nodes_ = template_.size();
}

void HostGraph::instantiate() {
  // The template is kept only where it is needed later (keep_graph, debug_dump); otherwise the
  // operations move into the executable, as CUDA drops the cudaGraph_t after instantiation.
  const bool keep = args_.keep_graph || debug_;
  auto ops = std::make_shared<std::vector<Operation>>();
  ops->reserve(template_.size());
  auto untimed = std::make_shared<std::vector<Operation>>();  // Note [Sampled replays]
  for (const Recording::Node& node : template_)
    if (!node.op.marker) untimed->push_back(node.op);
  for (Recording::Node& node : template_) ops->push_back(keep ? node.op : std::move(node.op));
  if (!keep) {
    template_.clear();
    has_template_ = false;
  }
  untimed_ = untimed->size() == ops->size() ? ops : std::move(untimed);
  executable_ = std::move(ops);
  ++instantiations_;
}

void HostGraph::replay(StreamImpl& stream_impl) { launch(stream_impl, executable_); }

void HostGraph::replay_untimed(StreamImpl& stream_impl) { launch(stream_impl, untimed_); }

void HostGraph::launch(StreamImpl& stream_impl,
                       const std::shared_ptr<const std::vector<Operation>>& executable) {
  HostStream& stream = as_host_stream(stream_impl, "replay");
  if (!executable)
    throw Error(ErrorCode::InvalidState, "replay: the graph has no executable: instantiate first",
                kBackendName);
  // A constant name (errors name graphs by AcceleratorGraph::id(), which only the core knows):
  // a replay formats no string. Note [Replays run every node] in accgraph/spi/run_every_node.hpp.
  static const std::string name = "replay of host graph";
  auto run_all = [ops = executable] {
    // The nodes' address in a local: through `ops` every node reloaded the shared_ptr and the
    // vector after the previous node's call (2 more instructions a node).
    const Operation* const nodes = ops->data();
    run_every_node(
        ops->size(), [nodes](size_t i) { nodes[i].run(); },
        [nodes](size_t i) -> const std::string& { return nodes[i].name; }, name);
  };
  if (stream.is_capturing()) {
    // Replayed into another capture: it becomes one node of that graph and runs whenever that
    // graph does, so it must not take part in this graph's launch order.
    stream.queue()->enqueue({name, 0, std::move(run_all)});
    return;
  }
  // Each launch waits for the previous launch of this graph, wherever that runs (as
  // cudaGraphLaunch does): marker sequences therefore complete in launch order.
  auto previous = last_launch_;
  auto launch = std::make_shared<Completion>();
  stream.queue()->enqueue({name, 0, [run_all = std::move(run_all), previous, launch] {
                             if (previous) previous->wait();
                             struct SignalOnExit {
                               Completion& done;
                               ~SignalOnExit() { done.signal(); }
                             } signal{*launch};
                             run_all();
                           }});
  last_launch_ = std::move(launch);  // only once enqueued: a refused launch never signals
}

void HostGraph::reset() {
  detach_capture();
  template_.clear();
  has_template_ = false;
  executable_.reset();
  untimed_.reset();
  pool_.reset();
  nodes_ = 0;
}

PoolId HostGraph::pool() const { return pool_ ? pool_->id : last_pool_id_; }

void HostGraph::debug_dump(const std::string& path) {
  if (!has_template_)
    throw Error(ErrorCode::InvalidState,
                "debug_dump: the recorded operations were dropped after instantiation: call "
                "enable_debug_mode() (or create the graph with GraphArgs::keep_graph) before "
                "capture_begin",
                kBackendName);
  write_debug_dump(path, kBackendName, [&](std::ostream& out) {
    out << "digraph host_graph {\n  node [shape=box];\n";
    for (size_t i = 0; i < template_.size(); ++i) {
      const Recording::Node& node = template_[i];
      std::string label = fmt::format("{}: {}", i, node.op.name);
      if (node.op.bytes > 0) label += fmt::format("\\n{} bytes", node.op.bytes);
      label += fmt::format("\\nstream {}", node.stream);
      out << fmt::format("  n{} [label=\"{}\"];\n", i, label);
      for (size_t before : node.after) out << fmt::format("  n{} -> n{};\n", before, i);
    }
    out << "}\n";
  });
}

GraphStats HostGraph::stats() const {
  GraphStats s;
  s.nodes = nodes_;
  s.instantiations = instantiations_;
  return s;
}

}  // namespace accgraph::detail::host
