// AcceleratorGraph: the call-order checks, ids, current() and lifecycle hooks every backend
// would otherwise repeat, in front of the backend's GraphImplInterface.
#include "accgraph/graph.hpp"

#include <atomic>
#include <exception>

#include <fmt/format.h>

#include "accgraph/backend.hpp"
#include "accgraph/error.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/stream.hpp"
#include "hooks_internal.hpp"
#include "stream_state.hpp"

namespace accgraph {

namespace {

std::atomic<uint64_t> next_graph_id{1};
thread_local AcceleratorGraph* current_graph = nullptr;

std::string supported_modes(const Capabilities& caps) {
  std::string text = "Default";
  for (CaptureMode mode : caps.capture_modes) text += fmt::format(", {}", to_string(mode));
  return text;
}

}  // namespace

AcceleratorGraph::AcceleratorGraph(GraphArgs args) : AcceleratorGraph(std::string_view{}, args) {}

AcceleratorGraph::AcceleratorGraph(std::string_view backend_name, GraphArgs args)
    : id_(next_graph_id.fetch_add(1)), args_(args) {
  Registry& registry = Registry::instance();
  backend_name_ =
      backend_name.empty() ? registry.default_backend_name() : std::string(backend_name);
  backend_ = &registry.backend(backend_name_);
  impl_ = backend_->create_graph(args_);
  if (!impl_)
    throw Error(ErrorCode::BackendError, "create_graph returned no graph implementation",
                backend_name_);
}

AcceleratorGraph::~AcceleratorGraph() {
  detail::notify_observers([&](GraphObserver& o) { o.on_destroy(*this); });
  if (state_ == GraphState::Capturing) abort_capture_noexcept();
}

void AcceleratorGraph::capture_begin(Stream& stream, PoolId pool, CaptureMode mode) {
  if (state_ == GraphState::Capturing)
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_begin: graph {} is already capturing: call capture_end() "
                            "before capturing again",
                            id_),
                backend_name_);
  if (state_ != GraphState::Empty)
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_begin: graph {} already holds a capture ({}): call reset() "
                            "before capturing again",
                            id_, to_string(state_)),
                backend_name_);
  if (!stream)
    throw Error(ErrorCode::InvalidArgument,
                "capture_begin: the stream is empty (moved from)", backend_name_);
  if (stream.backend_name() != backend_name_)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("capture_begin: the stream belongs to backend '{}' but graph {} is a "
                            "'{}' graph: create the stream with Stream::create(\"{}\")",
                            stream.backend_name(), id_, backend_name_, backend_name_),
                backend_name_);
  if (stream.is_capturing()) {
    AcceleratorGraph* other = stream.capturing_graph();
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_begin: the stream is already capturing{}: end that capture "
                            "first or capture on another stream",
                            other ? fmt::format(" into graph {}", other->id()) : std::string()),
                backend_name_);
  }
  const Capabilities& caps = stream.state().capabilities;
  if (!caps.supports(mode))
    throw Error(ErrorCode::Unsupported,
                fmt::format("capture_begin: capture mode {} is not supported by backend '{}' "
                            "(supported: {}): choose one of those",
                            to_string(mode), backend_name_, supported_modes(caps)),
                backend_name_);

  impl_->capture_begin(stream.impl(), pool, mode);
  state_ = GraphState::Capturing;
  capture_stream_ = &stream;
  device_ = stream.device();
  replay_count_ = 0;
  stream.state().capturing_graph = this;
  previous_current_ = current_graph;
  current_graph = this;
  try {
    detail::notify_observers([&](GraphObserver& o) { o.on_capture_begin(*this, stream); });
  } catch (...) {
    abort_capture_noexcept();
    throw;
  }
}

void AcceleratorGraph::capture_end() {
  if (state_ != GraphState::Capturing)
    throw Error(ErrorCode::InvalidState,
                fmt::format("capture_end: graph {} is not capturing ({}): call "
                            "capture_begin(stream) first",
                            id_, to_string(state_)),
                backend_name_);
  try {
    detail::notify_observers(
        [&](GraphObserver& o) { o.on_capture_ending(*this, *capture_stream_); });
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
    throw;
  }
  finish_capture_streams();
  state_ = GraphState::Captured;
  detail::notify_observers([&](GraphObserver& o) { o.on_capture_end(*this); });
  if (!args_.keep_graph) instantiate();
}

void AcceleratorGraph::instantiate() {
  if (state_ == GraphState::Instantiated)
    throw Error(ErrorCode::InvalidState,
                fmt::format("instantiate: graph {} is already instantiated: replay() it, or "
                            "reset() and capture again",
                            id_),
                backend_name_);
  if (state_ != GraphState::Captured)
    throw Error(ErrorCode::InvalidState,
                fmt::format("instantiate: graph {} has no finished capture ({}): capture_begin "
                            "and capture_end first",
                            id_, to_string(state_)),
                backend_name_);
  impl_->instantiate();
  state_ = GraphState::Instantiated;
  detail::notify_observers([&](GraphObserver& o) { o.on_instantiate(*this); });
}

void AcceleratorGraph::replay() {
  if (capture_stream_ == nullptr || state_ == GraphState::Empty)
    throw Error(ErrorCode::InvalidState,
                fmt::format("replay: graph {} has nothing captured: capture work with "
                            "capture_begin/capture_end before replaying",
                            id_),
                backend_name_);
  replay(*capture_stream_);
}

void AcceleratorGraph::replay(Stream& stream) {
  if (state_ == GraphState::Empty)
    throw Error(ErrorCode::InvalidState,
                fmt::format("replay: graph {} has nothing captured: capture work with "
                            "capture_begin/capture_end before replaying",
                            id_),
                backend_name_);
  if (state_ == GraphState::Capturing)
    throw Error(ErrorCode::InvalidState,
                fmt::format("replay: graph {} is still capturing: call capture_end() first", id_),
                backend_name_);
  if (!stream)
    throw Error(ErrorCode::InvalidArgument, "replay: the stream is empty (moved from)",
                backend_name_);
  if (stream.backend_name() != backend_name_ || stream.device() != device_)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("replay: graph {} was captured on {} device {} but the stream is on "
                            "{} device {}: replay on a stream of the capture device",
                            id_, backend_name_, device_, stream.backend_name(), stream.device()),
                backend_name_);
  if (state_ == GraphState::Captured) instantiate();

  detail::notify_observers([&](GraphObserver& o) { o.on_replay_begin(*this, stream); });
  impl_->replay(stream.impl());
  ++replay_count_;
  detail::notify_observers([&](GraphObserver& o) { o.on_replay_end(*this, stream); });
}

void AcceleratorGraph::reset() {
  if (state_ == GraphState::Capturing) {
    detail::notify_observers([&](GraphObserver& o) { o.on_reset(*this); });
    impl_->reset();
    finish_capture_streams();
  } else {
    if (state_ != GraphState::Empty)
      detail::notify_observers([&](GraphObserver& o) { o.on_reset(*this); });
    impl_->reset();
  }
  state_ = GraphState::Empty;
  replay_count_ = 0;
}

PoolId AcceleratorGraph::pool() const { return impl_->pool(); }

void AcceleratorGraph::enable_debug_mode() { impl_->enable_debug_mode(); }

void AcceleratorGraph::debug_dump(const std::string& path) {
  if (state_ == GraphState::Empty || state_ == GraphState::Capturing)
    throw Error(ErrorCode::InvalidState,
                fmt::format("debug_dump: graph {} has no finished capture ({}): call "
                            "enable_debug_mode(), capture, then debug_dump(path)",
                            id_, to_string(state_)),
                backend_name_);
  if (path.empty())
    throw Error(ErrorCode::InvalidArgument, "debug_dump: the path is empty", backend_name_);
  impl_->debug_dump(path);
}

GraphStats AcceleratorGraph::stats() const { return impl_->stats(); }

AcceleratorGraph* AcceleratorGraph::current() noexcept { return current_graph; }

void AcceleratorGraph::finish_capture_streams() noexcept {
  if (current_graph == this) current_graph = previous_current_;
  previous_current_ = nullptr;
  // Streams that joined the capture keep a stale pointer; Stream::capturing_graph() ignores it
  // once the stream is no longer capturing.
  if (capture_stream_ != nullptr && capture_stream_->state().capturing_graph == this)
    capture_stream_->state().capturing_graph = nullptr;
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
    log(LogLevel::Warning,
        fmt::format("graph {}: aborting the capture failed: {}", id_, e.what()));
  }
  finish_capture_streams();
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
