// Async graphs: capture records lanes (Note [Lanes] in async.hpp), instantiate freezes them,
// and a replay is one task of the replay stream that runs every lane on a thread of its own,
// so independent branches of the graph run in parallel.
#include <atomic>
#include <condition_variable>
#include <future>
#include <optional>
#include <thread>

#include <accgraph/spi/debug_dump.hpp>
#include <accgraph/spi/first_failure.hpp>

#include "async.hpp"

namespace async_backend {

using accgraph::Error;
using accgraph::ErrorCode;
using accgraph::PoolId;

namespace {

// Runs every node of `executable`, each lane on its own thread (lane 0 on this one), a node
// after its lane's previous node and the nodes it waits for. Every node runs even after one
// failed (Note [Replays run every node] in accgraph/spi/run_every_node.hpp); the first failure is
// thrown as an OperationFailure naming the node.
void run_lanes(const Executable& executable) {
  const std::vector<Node>& nodes = executable.nodes;
  std::mutex mutex;
  std::condition_variable finished_cv;
  std::vector<char> finished(nodes.size(), 0);  // guarded by mutex
  accgraph::FirstFailure failures;

  auto run_lane = [&](size_t lane) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& node = nodes[i];
      if (node.lane != lane) continue;
      {
        std::unique_lock<std::mutex> lock(mutex);
        finished_cv.wait(lock, [&] {
          for (size_t before : node.waits_for)
            if (!finished[before]) return false;
          return true;
        });
      }
      try {
        node.task.run();
      } catch (...) {
        failures.record_current_exception(node.task.name + " (node " + std::to_string(i) +
                                          ", lane " + std::to_string(lane) +
                                          ", of a replay of async graph)");
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        finished[i] = 1;
      }
      finished_cv.notify_all();
    }
  };

  std::vector<std::thread> branches;
  for (size_t lane = 1; lane < executable.lanes; ++lane) branches.emplace_back(run_lane, lane);
  run_lane(0);
  for (std::thread& branch : branches) branch.join();
  if (std::optional<accgraph::FirstFailure::Failure> failure = failures.take())
    throw accgraph::OperationFailure(failure->operation, failure->message);
}

}  // namespace

void AsyncGraph::detach() noexcept {
  if (!capture_) return;
  for (const std::shared_ptr<WorkQueue>& queue : capture_->queues())
    if (queue->capture() == capture_) queue->set_capture(nullptr);
  capture_.reset();
}

void AsyncGraph::capture_begin(accgraph::StreamImpl& stream_impl, PoolId pool,
                               accgraph::CaptureMode) {
  // Only CaptureMode::Global is offered (capabilities()); the core refuses the others.
  AsyncStream& stream = as_async_stream(stream_impl, "capture_begin");
  std::shared_ptr<Pool> acquired = pools_.acquire(pool);
  capture_ = std::make_shared<Capture>(stream.queue());
  stream.queue()->set_capture(capture_);
  pool_ = std::move(acquired);
  last_pool_ = pool_->id;
}

void AsyncGraph::capture_end() {
  std::shared_ptr<Capture> capture = capture_;
  detach();  // every lane leaves capture mode, also when the capture is refused below
  const std::string unjoined = capture->unjoined();
  if (!unjoined.empty()) {
    reset();
    throw Error(ErrorCode::InvalidState,
                "capture_end: unjoined work on " + unjoined +
                    ": every stream forked into the capture must be joined back; call "
                    "origin.wait(forked) before capture_end (the graph was reset)",
                kBackendName);
  }
  auto captured = std::make_shared<Executable>();
  captured->nodes = capture->take_nodes(captured->lanes);
  nodes_ = captured->nodes.size();
  captured_ = std::move(captured);
}

void AsyncGraph::instantiate() {
  // Kept only when needed later (keep_graph, debug_dump); otherwise moved into the executable.
  if (args_.keep_graph || debug_)
    executable_ = std::make_shared<const Executable>(*captured_);
  else
    executable_ = std::move(captured_);
  ++instantiations_;
}

void AsyncGraph::replay(accgraph::StreamImpl& stream_impl) {
  AsyncStream& stream = as_async_stream(stream_impl, "replay");
  static const std::string name = "replay of async graph";
  if (stream.is_capturing()) {
    // Recorded into the other capture as one node; it runs whenever that graph does.
    stream.queue()->enqueue({name, [executable = executable_] { run_lanes(*executable); }});
    return;
  }
  // Launches of one graph run one after another, wherever they run (as cudaGraphLaunch
  // does), so marker sequences complete in launch order (Note [Marker ring]).
  auto launched = std::make_shared<std::promise<void>>();
  std::shared_future<void> done = launched->get_future().share();
  stream.queue()->enqueue({name, [executable = executable_, previous = last_launch_, launched] {
                             struct Signal {
                               std::promise<void>& promise;
                               ~Signal() { promise.set_value(); }
                             } signal{*launched};
                             if (previous.valid()) previous.wait();
                             run_lanes(*executable);
                           }});
  last_launch_ = std::move(done);  // only once enqueued: a refused launch never signals
}

void AsyncGraph::reset() {
  detach();
  captured_.reset();
  executable_.reset();
  pool_.reset();
  nodes_ = 0;
}

void AsyncGraph::debug_dump(const std::string& path) {
  const Executable* graph = captured_ ? captured_.get() : executable_.get();
  if (!debug_ || graph == nullptr)
    throw Error(ErrorCode::InvalidState,
                "debug_dump: the async graph kept no nodes: call enable_debug_mode() before "
                "capture_begin",
                kBackendName);
  accgraph::write_debug_dump(path, kBackendName, [&](std::ostream& out) {
    out << "async graph: " << graph->nodes.size() << " nodes in " << graph->lanes << " lanes\n";
    for (size_t i = 0; i < graph->nodes.size(); ++i) {
      const Node& node = graph->nodes[i];
      out << "  " << i << ": lane " << node.lane << ", " << node.task.name;
      for (size_t before : node.waits_for) out << ", after " << before;
      out << "\n";
    }
  });
}

accgraph::GraphStats AsyncGraph::stats() const {
  accgraph::GraphStats s;
  s.nodes = nodes_;
  s.instantiations = instantiations_;
  return s;
}

}  // namespace async_backend
