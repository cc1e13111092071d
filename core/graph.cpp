// AcceleratorGraph: the call-order checks, ids, current() and lifecycle hooks every backend
// would otherwise repeat, in front of the backend's GraphImplInterface.
#include "accgraph/graph.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "accgraph/stream.hpp"
#include "internal/backend_lookup.hpp"
#include "internal/observers.hpp"
#include "timing_seam.hpp"

namespace accgraph {

namespace {

std::atomic<uint64_t> next_graph_id{1};

// Captures in progress and the thread each began on, oldest first: current() is the newest
// entry of the calling thread. A process-wide list rather than a thread_local pointer, so that a
// capture ended (or a graph destroyed) on another thread stops being current everywhere.
struct CapturingGraphs {
  std::mutex mutex;
  std::vector<std::pair<std::thread::id, const AcceleratorGraph*>> entries;
};

CapturingGraphs& capturing_graphs() {
  // Leaked on purpose: graphs destroyed during static destruction still remove themselves.
  static auto* graphs = new CapturingGraphs();
  return *graphs;
}

void add_capturing(const AcceleratorGraph* graph) {
  CapturingGraphs& graphs = capturing_graphs();
  std::lock_guard<std::mutex> lock(graphs.mutex);
  graphs.entries.emplace_back(std::this_thread::get_id(), graph);
}

void remove_capturing(const AcceleratorGraph* graph) noexcept {
  CapturingGraphs& graphs = capturing_graphs();
  std::lock_guard<std::mutex> lock(graphs.mutex);
  auto& entries = graphs.entries;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const auto& entry) { return entry.second == graph; }),
                entries.end());
}

// Error(InvalidState) for a call graph `id` cannot take now: "<operation>: graph <id> <problem>:
// <advice>", attributed to `backend`.
Error order_error(const char* operation, uint64_t id, std::string_view problem, const char* advice,
                  const std::string& backend) {
  return Error(ErrorCode::InvalidState,
               fmt::format("{}: graph {} {}: {}", operation, id, problem, advice), backend);
}

// The same with the graph's state after the problem: "... <problem> (<state>): <advice>".
Error state_error(const char* operation, uint64_t id, GraphState state, const char* problem,
                  const char* advice, const std::string& backend) {
  return order_error(operation, id, fmt::format("{} ({})", problem, to_string(state)), advice,
                     backend);
}

Error foreign_replay_error(uint64_t id, const std::string& backend) {
  return order_error("replay", id, "is a foreign graph, which its owner launches",
                     "call ForeignGraph::launch(stream, fn) with the owner's launch", backend);
}

Error still_capturing_error(uint64_t id, const std::string& backend) {
  return order_error("replay", id, "is still capturing", "call capture_end() first", backend);
}

std::string supported_modes(const Capabilities& caps) {
  std::string text = "Default";
  for (CaptureMode mode : caps.capture_modes) text += fmt::format(", {}", to_string(mode));
  return text;
}

}  // namespace

AcceleratorGraph::AcceleratorGraph(GraphArgs args) : AcceleratorGraph(std::string_view{}, args) {}

AcceleratorGraph::AcceleratorGraph(std::string_view backend_name, GraphArgs args)
    : id_(next_graph_id.fetch_add(1)), args_(args) {
  detail::ResolvedBackend resolved = detail::resolve_backend(backend_name);
  backend_name_ = std::move(resolved.name);
  backend_ = resolved.backend;
  impl_ = backend_->create_graph(args_);
  if (!impl_)
    throw Error(ErrorCode::BackendError, "create_graph returned no graph implementation",
                backend_name_);
  untimed_replay_ = untimed_replay_of(*impl_);
}

AcceleratorGraph::AcceleratorGraph(ForeignTag, std::string_view backend_name,
                                   std::unique_ptr<GraphImplInterface> impl)
    : id_(next_graph_id.fetch_add(1)), foreign_(true) {
  detail::ResolvedBackend resolved = detail::resolve_backend(backend_name);
  backend_name_ = std::move(resolved.name);
  backend_ = resolved.backend;
  impl_ = std::move(impl);
  untimed_replay_ = untimed_replay_of(*impl_);  // Note [Untimed foreign replays]
}

AcceleratorGraph::~AcceleratorGraph() {
  detail::notify_observers([&](GraphObserver& o) { o.on_destroy(*this); });
  if (state_ == GraphState::Capturing) abort_capture_noexcept();
}

void AcceleratorGraph::capture_begin(Stream& stream, PoolId pool, CaptureMode mode) {
  if (state_ == GraphState::Capturing)
    throw order_error("capture_begin", id_, "is already capturing",
                      "call capture_end() before capturing again", backend_name_);
  if (state_ != GraphState::Empty)
    throw state_error("capture_begin", id_, state_, "already holds a capture",
                      "call reset() before capturing again", backend_name_);
  const std::shared_ptr<detail::StreamState>& state =
      detail::StreamAccess::shared(stream, "capture_begin");
  if (stream.backend_name() != backend_name_)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("capture_begin: the stream belongs to backend '{}' but graph {} is a "
                            "'{}' graph: create the stream with Stream::create(\"{}\")",
                            stream.backend_name(), id_, backend_name_, backend_name_),
                backend_name_);
  if (foreign_) {
    check_foreign_capture(stream);
  } else if (stream.is_capturing()) {
    AcceleratorGraph* other = stream.capturing_graph();
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_begin: the stream is already capturing{}: end that capture "
                            "first or capture on another stream",
                            other ? fmt::format(" into graph {}", other->id()) : std::string()),
                backend_name_);
  }
  const Capabilities& caps = state->capabilities;
  if (!foreign_ && !caps.supports(mode))
    throw Error(ErrorCode::Unsupported,
                fmt::format("capture_begin: capture mode {} is not supported by backend '{}' "
                            "(supported: {}): choose one of those",
                            to_string(mode), backend_name_, supported_modes(caps)),
                backend_name_);

  // Pool sharing is a capability like the others: the backend never sees a pool id it did not
  // promise to share (backend.hpp, Note [Capability gates]).
  if (!foreign_ && !pool.is_new_private() && !caps.pool_sharing)
    throw Error(ErrorCode::Unsupported,
                fmt::format("capture_begin: graph pool {{{}, {}}} cannot be shared: backend '{}' "
                            "does not share pools between graphs (capabilities().pool_sharing is "
                            "false); pass {{}} for a new private pool",
                            pool.first, pool.second, backend_name_),
                backend_name_);

  impl_->capture_begin(*state->impl, pool, mode);
  add_capturing(this);
  state_ = GraphState::Capturing;
  capture_stream_ = state;
  capture_stream_id_ = state->id;
  capture_stream_destroyed_ = false;
  device_ = stream.device();
  replay_count_ = 0;
  state->capturing_graph = this;
  try {
    detail::notify_observers([&](GraphObserver& o) { o.on_capture_begin(*this, stream); });
  } catch (...) {
    abort_capture_noexcept();
    throw;
  }
}

// Note [Foreign graphs]: the owner began the native capture; accgraph only joins it.
void AcceleratorGraph::check_foreign_capture(Stream& stream) const {
  if (AcceleratorGraph* other = stream.capturing_graph())
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_begin: foreign graph {}: stream {} is already capturing into "
                            "graph {}: a stream captures into one graph at a time",
                            id_, stream.id(), other->id()),
                backend_name_);
  if (!stream.is_capturing())
    throw Error(
        ErrorCode::InvalidState,
        fmt::format("capture_begin: foreign graph {}: stream {} is not capturing: begin "
                    "the native capture on the queue it wraps first (cudaStreamBeginCapture, "
                    "torch.cuda.graph, zeCommandListBeginGraphCaptureExt), then call "
                    "capture_begin",
                    id_, stream.id()),
        backend_name_);
}

void AcceleratorGraph::capture_end() {
  if (state_ != GraphState::Capturing) {
    if (capture_stream_destroyed_)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("capture_end: graph {} has no capture to end: stream {}, on which "
                              "the capture began, was destroyed before capture_end, which "
                              "aborted the capture; keep the stream alive until capture_end",
                              id_, capture_stream_id_),
                  backend_name_);
    throw state_error("capture_end", id_, state_, "is not capturing",
                      "call capture_begin(stream) first", backend_name_);
  }
  try {
    // The capture stream is alive: its destruction would have aborted this capture.
    Stream stream = detail::StreamAccess::handle(capture_stream_.lock());
    detail::notify_observers([&](GraphObserver& o) { o.on_capture_ending(*this, stream); });
  } catch (...) {
    abort_capture_noexcept();
    throw;
  }
  try {
    impl_->capture_end();
  } catch (...) {
    // The backend left itself reset and the stream out of capture mode (SPI contract).
    finish_capture_streams();
    state_ = GraphState::Empty;
    detail::notify_observers([&](GraphObserver& o) { o.on_reset(*this); });
    instruments_.clear();
    throw;
  }
  finish_capture_streams();
  state_ = GraphState::Captured;
  detail::notify_observers([&](GraphObserver& o) { o.on_capture_end(*this); });
  if (!args_.keep_graph) instantiate();
}

void AcceleratorGraph::instantiate() {
  if (state_ == GraphState::Instantiated)
    throw order_error("instantiate", id_, "is already instantiated",
                      "replay() it, or reset() and capture again", backend_name_);
  if (state_ != GraphState::Captured)
    throw state_error("instantiate", id_, state_, "has no finished capture",
                      "capture_begin and capture_end first", backend_name_);
  impl_->instantiate();
  state_ = GraphState::Instantiated;
  detail::notify_observers([&](GraphObserver& o) { o.on_instantiate(*this); });
}

namespace {

// Note [Replay waits]: replay(waits) holds the caller's lock (Python's GIL) through the backend's
// launch, which the caller promised needs nothing that waits for that lock (Python's binding:
// no Python host call is alive, Note [Replay keeps the GIL] in bindings/python/src/graph.cpp).
// That promise is about the moment of the call: once the replay gave the lock up (instantiating,
// the first timed launch, a full marker ring, an observer), another thread may have run with it
// (and enqueued a Python host call ahead of this launch), so the rest of that replay gives it up
// around the backend's launch too, as a replay without `waits` always did. Wraps the caller's
// LaunchWaits for the hooks (launch_waits_) and remembers whether they gave it up.
class ReplayWaits final : public LaunchWaits {
 public:
  explicit ReplayWaits(LaunchWaits& caller) noexcept : caller_(caller) {}
  void release() noexcept override {
    released_ = true;
    caller_.release();
  }
  void reacquire() noexcept override { caller_.reacquire(); }
  // What the backend's launch gives up: nothing while the caller held its lock throughout.
  LaunchWaits* around_launch() noexcept { return released_ ? &caller_ : nullptr; }

 private:
  LaunchWaits& caller_;
  bool released_ = false;
};

// What the backend's launch of a replay gives up (null: nothing).
LaunchWaits* around_launch(ReplayWaits* waits) noexcept {
  return waits != nullptr ? waits->around_launch() : nullptr;
}

// Points the graph's launch_waits_ at a replay's waits for its length, also when it throws.
class ReplayWaitsSlot {
 public:
  ReplayWaitsSlot(LaunchWaits*& slot, LaunchWaits* waits) noexcept : slot_(slot) { slot_ = waits; }
  ~ReplayWaitsSlot() { slot_ = nullptr; }
  ReplayWaitsSlot(const ReplayWaitsSlot&) = delete;
  ReplayWaitsSlot& operator=(const ReplayWaitsSlot&) = delete;

 private:
  LaunchWaits*& slot_;
};

}  // namespace

void AcceleratorGraph::replay() { replay_with(nullptr); }

void AcceleratorGraph::replay(LaunchWaits& waits) { replay_with(&waits); }

void AcceleratorGraph::replay_with(LaunchWaits* waits) {
  if (capture_stream_id_ == 0 || state_ == GraphState::Empty)
    throw order_error("replay", id_, "has nothing captured",
                      "capture work with capture_begin/capture_end before replaying",
                      backend_name_);
  std::shared_ptr<detail::StreamState> state = capture_stream_.lock();
  if (!state)
    throw Error(ErrorCode::InvalidState,
                fmt::format("replay: stream {}, on which graph {} was captured, has been "
                            "destroyed: pass a stream of the capture device to replay(stream)",
                            capture_stream_id_, id_),
                backend_name_);
  if (foreign_) throw foreign_replay_error(id_, backend_name_);
  if (state_ == GraphState::Capturing) throw still_capturing_error(id_, backend_name_);
  // Note [Replay fast path]: Python's Graph.replay() comes this way on every call (its target:
  // under 0.5x torch's replay, bench/README.md, "Targets and figures the code cites"), so it does
  // only what a replay needs. capture_begin checked this stream's backend and read device_ from it,
  // so replay(stream)'s checks of the stream hold without asking again (no exported Stream call, no
  // string compare). Whether hooks run is decided once per replay (instruments of this capture,
  // replay observers: one relaxed load); without them no Stream handle is made and the replay is
  // the backend's launch plus a few loads; with them the hooked path is the one it always was
  // (replay_hooked). An observer installed during a replay sees the next one, both begin and end.
  std::optional<ReplayWaits> tracked;  // Note [Replay waits]
  if (waits != nullptr) tracked.emplace(*waits);
  ReplayWaits* replay_waits = tracked ? &*tracked : nullptr;
  if (state_ == GraphState::Captured) {
    detail::LaunchWaitScope wait(replay_waits);  // a backend's instantiation, observers
    instantiate();
  }
  if (!has_replay_hooks()) {
    detail::LaunchWaitScope wait(around_launch(replay_waits));
    impl_->replay(*state->impl);
    ++replay_count_;
    return;
  }
  Stream stream = detail::StreamAccess::handle(std::move(state));
  replay_hooked(stream, replay_waits);
}

void AcceleratorGraph::replay(Stream& stream) {
  if (foreign_) throw foreign_replay_error(id_, backend_name_);
  replay_on(stream);
}

void AcceleratorGraph::replay(Stream& stream, LaunchWaits& waits) {
  if (foreign_) throw foreign_replay_error(id_, backend_name_);
  replay_on(stream, &waits);
}

void AcceleratorGraph::replay_on(Stream& stream, LaunchWaits* waits) {
  if (state_ == GraphState::Empty)
    throw order_error("replay", id_, "has nothing captured",
                      "capture work with capture_begin/capture_end before replaying",
                      backend_name_);
  if (state_ == GraphState::Capturing) throw still_capturing_error(id_, backend_name_);
  const detail::StreamState& target = *detail::StreamAccess::shared(stream, "replay");
  if (target.backend_name != backend_name_ || target.impl->device() != device_)
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("replay: graph {} was captured on {} device {} but the stream is on "
                    "{} device {}: replay on a stream of the capture device",
                    id_, backend_name_, device_, target.backend_name, target.impl->device()),
        backend_name_);
  std::optional<ReplayWaits> tracked;  // Note [Replay waits]
  if (waits != nullptr) tracked.emplace(*waits);
  ReplayWaits* replay_waits = tracked ? &*tracked : nullptr;
  if (state_ == GraphState::Captured) {
    detail::LaunchWaitScope wait(replay_waits);
    instantiate();
  }
  if (!has_replay_hooks()) {  // Note [Replay fast path]
    detail::LaunchWaitScope wait(around_launch(replay_waits));
    impl_->replay(*target.impl);
    ++replay_count_;
    return;
  }
  replay_hooked(stream, replay_waits);
}

bool AcceleratorGraph::has_replay_hooks() const noexcept {
  return !instruments_.empty() ||
         detail::replay_observer_count.load(std::memory_order_relaxed) != 0;
}

void AcceleratorGraph::replay_hooked(Stream& stream, LaunchWaits* waits) {
  // `waits`: the replay's ReplayWaits (replay_with, replay_on: Note [Replay waits]), given to
  // the hooks; a foreign launch passes null, its caller's are in launch_waits_ already.
  auto* tracked = static_cast<ReplayWaits*>(waits);
  std::optional<ReplayWaitsSlot> slot;
  if (tracked != nullptr) slot.emplace(launch_waits_, tracked);
  // Observers are user code, which may wait for other threads (Note [Launch waits]).
  const bool observed = detail::replay_observer_count.load(std::memory_order_relaxed) != 0;
  if (observed) {
    detail::LaunchWaitScope wait(launch_waits_);
    detail::notify_replay_observers([&](GraphObserver& o) { o.on_replay_begin(*this, stream); });
  }
  // Note [Sampled replays] (spi/untimed_replay.hpp): a replay that the graph's one instrument
  // does not time runs without its markers, where the backend can leave them out.
  if (untimed_replay_ != nullptr && instruments_.size() == 1 &&
      instruments_.front()->skips_replay() &&
      untimed_replay_->can_replay_untimed(detail::StreamAccess::impl(stream))) {
    {
      detail::LaunchWaitScope wait(around_launch(tracked));
      untimed_replay_->replay_untimed(detail::StreamAccess::impl(stream));
    }
    ++replay_count_;
    instruments_.front()->after_untimed_replay();
    if (observed) {
      detail::LaunchWaitScope wait(launch_waits_);
      detail::notify_replay_observers([&](GraphObserver& o) { o.on_replay_end(*this, stream); });
    }
    return;
  }
  for (const auto& instrument : instruments_) instrument->before_replay(*this, stream);
  try {
    detail::LaunchWaitScope wait(around_launch(tracked));
    impl_->replay(detail::StreamAccess::impl(stream));
  } catch (...) {
    // The profilers are told, then the exception goes on. Only a foreign graph's owner launch
    // can have run work and still thrown (Note [Launch fences] in timing/engine/marker_ring.cpp).
    for (const auto& instrument : instruments_) instrument->after_failed_replay(*this, stream);
    throw;
  }
  ++replay_count_;
  if (observed) {
    detail::LaunchWaitScope wait(launch_waits_);
    detail::notify_replay_observers([&](GraphObserver& o) { o.on_replay_end(*this, stream); });
  }
  for (const auto& instrument : instruments_) instrument->after_replay(*this, stream);
}

size_t AcceleratorGraph::replay_hooks() const noexcept {
  size_t active = 0;
  for (const auto& instrument : instruments_) active += instrument->active() ? 1 : 0;
  return static_cast<size_t>(detail::replay_observer_count.load(std::memory_order_relaxed)) +
         active;
}

void AcceleratorGraph::reset() {
  capture_stream_destroyed_ = false;
  if (state_ == GraphState::Capturing) {
    detail::notify_observers([&](GraphObserver& o) { o.on_reset(*this); });
    impl_->reset();
    finish_capture_streams();
  } else {
    if (state_ != GraphState::Empty)
      detail::notify_observers([&](GraphObserver& o) { o.on_reset(*this); });
    impl_->reset();
  }
  instruments_.clear();  // the backend dropped the captured work that wrote into them
  state_ = GraphState::Empty;
  replay_count_ = 0;
}

PoolId AcceleratorGraph::pool() const { return impl_->pool(); }

void AcceleratorGraph::enable_debug_mode() { impl_->enable_debug_mode(); }

void AcceleratorGraph::debug_dump(const std::string& path) {
  if (state_ == GraphState::Empty || state_ == GraphState::Capturing)
    throw state_error("debug_dump", id_, state_, "has no finished capture",
                      "call enable_debug_mode(), capture, then debug_dump(path)", backend_name_);
  if (path.empty())
    throw Error(ErrorCode::InvalidArgument, "debug_dump: the path is empty", backend_name_);
  impl_->debug_dump(path);
}

GraphStats AcceleratorGraph::stats() const { return impl_->stats(); }

AcceleratorGraph* AcceleratorGraph::current() noexcept {
  CapturingGraphs& graphs = capturing_graphs();
  const std::thread::id self = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(graphs.mutex);
  for (auto it = graphs.entries.rbegin(); it != graphs.entries.rend(); ++it)
    if (it->first == self) return const_cast<AcceleratorGraph*>(it->second);
  return nullptr;
}

void AcceleratorGraph::finish_capture_streams() noexcept {
  remove_capturing(this);
  // Neither the capture stream nor a stream that joined the capture by a fork keeps pointing
  // here: a backend that leaves a forked queue capturing after the capture ended (breaking
  // fork-join.leave) must not make Stream::capturing_graph() return a graph that moved on or
  // was destroyed.
  if (std::shared_ptr<detail::StreamState> state = capture_stream_.lock())
    if (state->capturing_graph == this) state->capturing_graph = nullptr;
  for (const std::weak_ptr<detail::StreamState>& joined : joined_streams_)
    if (std::shared_ptr<detail::StreamState> state = joined.lock())
      if (state->capturing_graph == this) state->capturing_graph = nullptr;
  joined_streams_.clear();
}

void AcceleratorGraph::on_stream_destroyed(uint64_t stream_id) noexcept {
  if (state_ != GraphState::Capturing || stream_id != capture_stream_id_) return;
  log(LogLevel::Warning,
      fmt::format("graph {}: stream {} was destroyed during the capture that began on it; the "
                  "capture was aborted and the graph reset",
                  id_, stream_id));
  abort_capture_noexcept();
  capture_stream_destroyed_ = true;
}

void AcceleratorGraph::abort_capture_noexcept() noexcept {
  try {
    detail::notify_observers([&](GraphObserver& o) { o.on_reset(*this); });
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("graph {}: an observer failed in on_reset while aborting "
                                       "a capture: {}",
                                       id_, e.what()));
  } catch (...) {
  }
  try {
    impl_->reset();
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("graph {}: aborting the capture failed: {}", id_, e.what()));
  }
  finish_capture_streams();
  instruments_.clear();
  state_ = GraphState::Empty;
}

// --- CaptureGuard ---------------------------------------------------------------------------

CaptureGuard::CaptureGuard(AcceleratorGraph& graph, Stream& stream, PoolId pool, CaptureMode mode)
    : graph_(&graph), uncaught_(std::uncaught_exceptions()) {
  graph.capture_begin(stream, pool, mode);
}

void CaptureGuard::finish() {
  if (done_) return;
  done_ = true;
  graph_->capture_end();
}

CaptureGuard::~CaptureGuard() {
  if (done_) return;
  done_ = true;
  if (std::uncaught_exceptions() > uncaught_) {
    try {
      graph_->reset();
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          fmt::format("CaptureGuard: resetting graph {} after an exception failed: {}",
                      graph_->id(), e.what()));
    }
    return;
  }
  try {
    graph_->capture_end();
  } catch (const std::exception& e) {
    log(LogLevel::Error,
        fmt::format("CaptureGuard: capture_end of graph {} failed and the graph was reset: {} "
                    "(call finish() to receive this as an exception)",
                    graph_->id(), e.what()));
  }
}

}  // namespace accgraph
