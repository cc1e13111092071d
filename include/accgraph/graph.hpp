// AcceleratorGraph: capture work on a stream once, replay it many times, on any backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

class Backend;
class ForeignGraph;
class GraphImplInterface;
class LaunchWaits;
class Stream;
class UntimedReplay;
struct GraphStats;

namespace detail {
struct StreamState;
struct StreamAccess;
struct GraphAccess;
class GraphInstrument;
}  // namespace detail

enum class GraphState {
  Empty,         ///< nothing captured (new, or after reset())
  Capturing,     ///< between capture_begin and capture_end
  Captured,      ///< captured, not yet instantiated (keep_graph = true)
  Instantiated,  ///< ready to replay
};

ACCGRAPH_API const char* to_string(GraphState state) noexcept;

/// The user-facing graph. Holds the backend's GraphImplInterface and adds what every backend
/// would otherwise repeat: call-order checks with clear errors, a stable id, current(), and the
/// lifecycle hooks (see hooks.hpp). Not thread-safe: one thread uses a graph at a time.
///
///   accgraph::AcceleratorGraph graph("host");
///   accgraph::Stream stream = accgraph::Stream::create("host");
///   graph.capture_begin(stream);
///   stream.fill(buf.data(), 1, buf.size());   // recorded, not run
///   graph.capture_end();
///   for (int i = 0; i < 10; ++i) graph.replay();
class ACCGRAPH_API AcceleratorGraph {
 public:
  /// A graph on the default backend (ACCGRAPH_BACKEND, else the highest-priority available).
  explicit AcceleratorGraph(GraphArgs args = {});
  explicit AcceleratorGraph(std::string_view backend, GraphArgs args = {});
  AcceleratorGraph(const AcceleratorGraph&) = delete;
  AcceleratorGraph& operator=(const AcceleratorGraph&) = delete;
  /// Never throws: failures are reported through the log handler.
  ~AcceleratorGraph();

  /// Starts capturing the work enqueued on `stream`. The stream must belong to this graph's
  /// backend; replay() without a stream replays on it. Destroying that stream before
  /// capture_end aborts the capture (capture_end then says so); moving the Stream object is fine.
  void capture_begin(Stream& stream, PoolId pool = {}, CaptureMode mode = CaptureMode::Default);
  /// Ends the capture and, unless keep_graph, instantiates. A failure leaves the graph Empty.
  void capture_end();
  void instantiate();
  /// Replays on the capture stream (InvalidState once that stream was destroyed: pass one).
  void replay();
  /// Replays on another stream of the same backend and device.
  void replay(Stream& stream);
  /// replay() and replay(stream) for a caller that holds a lock which code on other threads may
  /// need meanwhile (Python's GIL): the replay gives it up (`waits`) around each wait its hooks
  /// make (Note [Launch waits] in foreign_graph.hpp: a full marker ring, Immediate delivery, the
  /// first timed launch, replay observers, a collection holding the ring's lock) and around the
  /// first replay's instantiation, and holds it for the rest, the backend's launch included,
  /// unless it gave it up earlier in this replay (Note [Replay waits] in core/graph.cpp). The
  /// caller promises that nothing the backend's launch may wait for (queued work, a full launch
  /// queue draining) needs that lock.
  void replay(LaunchWaits& waits);
  void replay(Stream& stream, LaunchWaits& waits);
  /// Drops the capture (aborting one in progress); the graph may capture again.
  void reset();

  PoolId pool() const;
  void enable_debug_mode();
  void debug_dump(const std::string& path);

  uint64_t id() const noexcept { return id_; }
  GraphState state() const noexcept { return state_; }
  const GraphArgs& args() const noexcept { return args_; }
  const std::string& backend_name() const noexcept { return backend_name_; }
  Backend& backend() const noexcept { return *backend_; }
  /// The device of the last capture (-1 before the first).
  int device() const noexcept { return device_; }
  /// Stream::id() of the stream the current or last capture began on (0 before the first).
  uint64_t capture_stream_id() const noexcept { return capture_stream_id_; }
  /// Completed replay() calls since the last capture.
  uint64_t replay_count() const noexcept { return replay_count_; }
  GraphStats stats() const;
  /// The hooks each replay() of this graph calls: observers installed for replays
  /// (ObserverEvents::All) plus the live profilers timing its capture. 0 means a replay costs the
  /// backend's launch and one relaxed atomic load, also while profilers exist.
  size_t replay_hooks() const noexcept;

  /// True for the graph of a ForeignGraph (its owner captures and launches it natively).
  bool is_foreign() const noexcept { return foreign_; }

  /// The graph whose capture began on this thread and has not ended (the most recent one when
  /// captures nest), or nullptr. A capture ended, aborted or destroyed on another thread is no
  /// longer current here.
  static AcceleratorGraph* current() noexcept;

 private:
  friend struct detail::StreamAccess;
  friend struct detail::GraphAccess;
  friend class ForeignGraph;
  struct ForeignTag {};
  // A graph captured and launched by its owner (Note [Foreign graphs] in foreign_graph.hpp):
  // `impl` only runs the owner's launch; capture_begin wants the stream capturing already.
  AcceleratorGraph(ForeignTag, std::string_view backend, std::unique_ptr<GraphImplInterface> impl);
  void check_foreign_capture(Stream& stream) const;
  // replay() and replay(stream) with the caller's LaunchWaits, or null.
  void replay_with(LaunchWaits* waits);
  // replay(stream) without the foreign-graph check (ForeignGraph::launch comes this way, with a
  // null `waits`: its caller's are in launch_waits_ already).
  void replay_on(Stream& stream, LaunchWaits* waits = nullptr);
  // Whether a replay calls hooks: replay observers or this capture's instruments (Note [Replay
  // fast path] in graph.cpp: without them a replay makes no Stream handle).
  bool has_replay_hooks() const noexcept;
  // The launch with its hooks around it, on a stream the replay checked; `waits`: the replay's
  // wrapper of its caller's (Note [Replay waits] in graph.cpp), null for a foreign launch or a
  // plain replay.
  void replay_hooked(Stream& stream, LaunchWaits* waits);
  void abort_capture_noexcept() noexcept;
  void finish_capture_streams() noexcept;
  // A stream is being destroyed (StreamAccess::destroy); aborts the capture that began on it.
  void on_stream_destroyed(uint64_t stream_id) noexcept;

  uint64_t id_;
  bool foreign_ = false;
  bool fenced_launch_ = true;  // the current foreign launch's LaunchCheck (ForeignGraph::launch)
  // The current foreign launch's or replay's (Note [Launch waits], Note [Replay waits]).
  LaunchWaits* launch_waits_ = nullptr;
  GraphArgs args_;
  std::string backend_name_;
  Backend* backend_;
  // What times the current capture (Note [Graph instruments], core/seam/timing_seam.hpp):
  // declared before impl_ so that the marker storage its captured work writes into outlives the
  // backend's graph on destruction; dropped after the backend's reset.
  std::vector<std::shared_ptr<detail::GraphInstrument>> instruments_;
  std::unique_ptr<GraphImplInterface> impl_;
  // impl_'s UntimedReplay (spi/untimed_replay.hpp), or null: looked up once, not per replay.
  UntimedReplay* untimed_replay_ = nullptr;
  GraphState state_ = GraphState::Empty;
  // The queue of the current or last capture, not the Stream object (which the user may move).
  std::weak_ptr<detail::StreamState> capture_stream_;
  uint64_t capture_stream_id_ = 0;
  // Streams that joined the capture by a fork (Stream::wait): each points back at this graph
  // until the capture ends, fails or is reset (finish_capture_streams clears them), so no
  // stream keeps the address of a graph that has moved on or is gone, whatever its backend
  // says about is_capturing() (a plugin may break rule fork-join.leave).
  std::vector<std::weak_ptr<detail::StreamState>> joined_streams_;
  bool capture_stream_destroyed_ = false;  // the capture was aborted because its stream died
  int device_ = -1;
  uint64_t replay_count_ = 0;
};

/// RAII capture: capture_begin in the constructor, capture_end in finish() or the destructor.
/// When the scope is left by an exception the capture is aborted (graph reset) instead. The
/// destructor never throws: call finish() to see a failing capture_end as an exception (the
/// destructor only logs it and leaves the graph Empty).
///
///   { accgraph::CaptureGuard capture(graph, stream);  enqueue work...  }
class ACCGRAPH_API CaptureGuard {
 public:
  CaptureGuard(AcceleratorGraph& graph, Stream& stream, PoolId pool = {},
               CaptureMode mode = CaptureMode::Default);
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
  ~CaptureGuard();
  /// Ends the capture now (throws on failure); the destructor then does nothing.
  void finish();

 private:
  AcceleratorGraph* graph_;
  int uncaught_ = 0;
  bool done_ = false;
};

}  // namespace accgraph
