// Toy graphs: capture records the stream's operations as std::functions, instantiate freezes
// them into an executable, replay runs the executable as one operation of the replay stream;
// plus the pools graphs share and the text debug dump.
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>

#include <accgraph/spi/debug_dump.hpp>
#include <accgraph/spi/run_every_node.hpp>

#include "toy.hpp"

namespace toy {

using accgraph::CaptureMode;
using accgraph::ErrorCode;
using accgraph::PoolId;

namespace {

std::string to_text(PoolId id) {
  return "{" + std::to_string(id.first) + ", " + std::to_string(id.second) + "}";
}

}  // namespace

// --- ToyGraph ----------------------------------------------------------------------------------

ToyGraph::ToyGraph(Pools& pools, const accgraph::GraphArgs& args) : pools_(pools), args_(args) {}

// Replays hold the executable themselves (shared_ptr), so nothing here can dangle.
ToyGraph::~ToyGraph() { detach_capture(); }

void ToyGraph::detach_capture() noexcept {
  if (capture_queue_ && capture_queue_->capture() == recording_)
    capture_queue_->set_capture(nullptr);
  capture_queue_.reset();
}

void ToyGraph::capture_begin(accgraph::StreamImpl& stream_impl, PoolId pool, CaptureMode mode) {
  ToyStream& stream = as_toy_stream(stream_impl, "capture_begin");
  // The core refuses modes missing from capabilities() before calling in; checked again here so
  // the backend never silently treats ThreadLocal or Relaxed as Global.
  if (mode != CaptureMode::Default && mode != CaptureMode::Global)
    fail(ErrorCode::Unsupported, std::string("capture_begin: capture mode ") +
                                     accgraph::to_string(mode) +
                                     " is not supported by the toy backend: use Global");
  if (stream.is_capturing())
    fail(ErrorCode::InvalidState,
         "capture_begin: the toy stream is already capturing: end that capture first or capture "
         "on another stream");
  // May throw (an unknown id): nothing has changed yet.
  std::shared_ptr<Pool> acquired = pools_.acquire(pool);
  recording_ = std::make_shared<Recording>();
  capture_queue_ = stream.shared_queue();
  capture_queue_->set_capture(recording_);
  pool_ = std::move(acquired);
  last_pool_id_ = pool_->id;
}

void ToyGraph::capture_end() {
  detach_capture();
  nodes_ = recording_->operations.size();
  if (debug_) {
    dump_names_.clear();
    for (const Operation& op : recording_->operations) dump_names_.push_back(op.name);
  }
}

// The recording becomes the executable. With keep_graph the recording is copied, so it stays
// available (a real backend keeps its template graph for updates and dumps).
void ToyGraph::instantiate() {
  if (args_.keep_graph) {
    executable_ = std::make_shared<const std::vector<Operation>>(recording_->operations);
  } else {
    executable_ = std::make_shared<const std::vector<Operation>>(std::move(recording_->operations));
    recording_.reset();
  }
  ++instantiations_;
}

void ToyGraph::replay(accgraph::StreamImpl& stream_impl) {
  ToyStream& stream = as_toy_stream(stream_impl, "replay");
  if (!executable_)
    fail(ErrorCode::InvalidState, "replay: the graph has no executable: instantiate first");
  // Runs every node even after one fails (Note [Replays run every node] in
  // accgraph/spi/run_every_node.hpp); the first failure is reported by the stream's next
  // synchronize(). On a capturing stream this records the whole replay as one node of that
  // other graph. Errors name graphs by AcceleratorGraph::id(), which only the core knows, so
  // the replay's name is a constant.
  static const std::string name = "replay of toy graph";
  stream.queue().submit({name, [ops = executable_] {
                           accgraph::run_every_node(
                               ops->size(), [&](size_t i) { (*ops)[i].run(); },
                               [&](size_t i) -> const std::string& { return (*ops)[i].name; },
                               name);
                         }});
}

void ToyGraph::reset() {
  detach_capture();  // aborts a capture in progress: the stream records nothing more
  recording_.reset();
  executable_.reset();
  dump_names_.clear();
  pool_.reset();
  nodes_ = 0;
}

PoolId ToyGraph::pool() const { return pool_ ? pool_->id : last_pool_id_; }

void ToyGraph::debug_dump(const std::string& path) {
  if (!debug_ || nodes_ != dump_names_.size())
    fail(ErrorCode::InvalidState,
         "debug_dump: the toy graph kept no operation names: call enable_debug_mode() before "
         "capture_begin");
  accgraph::write_debug_dump(path, kBackendName, [&](std::ostream& out) {
    out << "toy graph: " << dump_names_.size() << " operations, pool " << to_text(pool()) << "\n";
    for (size_t i = 0; i < dump_names_.size(); ++i)
      out << "  " << i << ": " << dump_names_[i] << "\n";
  });
}

accgraph::GraphStats ToyGraph::stats() const {
  accgraph::GraphStats s;
  s.nodes = nodes_;
  s.instantiations = instantiations_;
  return s;
}

}  // namespace toy
