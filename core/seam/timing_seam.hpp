// The seam between the core and the timing layer (not installed): what a graph runs around its
// replays for whoever times it, and the internal access to graphs and streams that timing needs.
// The timing layer includes this header and no other core-internal one.
#pragma once

#include <memory>

#include "accgraph/foreign_graph.hpp"
#include "accgraph/graph.hpp"
#include "stream_state.hpp"

namespace accgraph::detail {

/// Who made a GraphInstrument (a profiler): how it finds its own instrument on a graph.
class InstrumentOwner {
 protected:
  ~InstrumentOwner() = default;
};

/// Note [Graph instruments]: what times one capture of one graph. The graph owns it from the
/// capture's capture_begin until it drops that capture (reset, an aborted capture, destruction),
/// and releases it after the backend's graph (AcceleratorGraph declares it before impl_): the
/// captured work writes into the instrument's marker storage on every replay, also after the
/// profiler that made it is gone. The graph calls it around each replay; its owner reaches it
/// through GraphAccess::instrument. The core never looks inside: the timing layer implements it
/// (timing::GraphTiming).
class GraphInstrument {
 public:
  explicit GraphInstrument(const InstrumentOwner& owner) : owner_(&owner) {}
  GraphInstrument(const GraphInstrument&) = delete;
  GraphInstrument& operator=(const GraphInstrument&) = delete;
  virtual ~GraphInstrument() = default;

  const InstrumentOwner* owner() const noexcept { return owner_; }
  /// False once its owner is gone: it then only keeps its storage alive (its replay calls
  /// return at once, and AcceleratorGraph::replay_hooks() does not count it). The replay calls
  /// check this themselves, once, so the graph calls them without asking first.
  virtual bool active() const noexcept = 0;
  virtual void before_replay(AcceleratorGraph& graph, Stream& stream) = 0;
  virtual void after_replay(AcceleratorGraph& graph, Stream& stream) = 0;
  /// The launch threw after before_replay (for a foreign graph: the owner's launch raised, and
  /// it may or may not have launched); no after_replay follows. Never throws.
  virtual void after_failed_replay(AcceleratorGraph& graph, Stream& stream) noexcept = 0;
  /// Note [Sampled replays] (spi/untimed_replay.hpp): asked before a replay when the graph can
  /// replay without markers and this is its only instrument. True: the graph launches without
  /// the markers, and after_untimed_replay follows instead of before/after_replay (nothing
  /// follows when that launch throws). Never throws.
  virtual bool skips_replay() const noexcept { return false; }
  virtual void after_untimed_replay() noexcept {}
  /// During the capture, right before a stream forks from (waits for) `forking`, a stream of
  /// `graph`'s capture (Stream::wait): what must precede every branch of the capture is
  /// enqueued on `forking` now (timing: the marker sequence's head, Note [Marker ring]). An
  /// error leaves the capture as it was and the fork not made (Stream::wait rethrows it).
  virtual void before_fork(AcceleratorGraph& graph, Stream& forking) = 0;

 private:
  const InstrumentOwner* owner_;  // compared, never dereferenced
};

/// Note [Launch waits] (foreign_graph.hpp): gives the launch caller's lock up for a wait and
/// takes it back afterwards, also when the wait throws. Nothing with a null LaunchWaits.
class LaunchWaitScope {
 public:
  explicit LaunchWaitScope(LaunchWaits* waits) noexcept : waits_(waits) {
    if (waits_ != nullptr) waits_->release();
  }
  ~LaunchWaitScope() {
    if (waits_ != nullptr) waits_->reacquire();
  }
  LaunchWaitScope(const LaunchWaitScope&) = delete;
  LaunchWaitScope& operator=(const LaunchWaitScope&) = delete;

 private:
  LaunchWaits* waits_;
};

/// The core's and the timing layer's access to a graph.
struct GraphAccess {
  /// The backend's graph behind `graph`.
  static GraphImplInterface& impl(const AcceleratorGraph& graph) { return *graph.impl_; }
  /// During a foreign graph's launch: whether it is checked with a fence (LaunchCheck::Fenced).
  static bool fenced_launch(const AcceleratorGraph& graph) {
    return graph.is_foreign() && graph.fenced_launch_;
  }
  /// During a foreign graph's launch: the caller's LaunchWaits, or null (Note [Launch waits] in
  /// foreign_graph.hpp).
  static LaunchWaits* launch_waits(const AcceleratorGraph& graph) { return graph.launch_waits_; }
  /// `graph` owns `instrument` until it drops its current capture (Note [Graph instruments]).
  /// Called during capture_begin's hooks.
  static void add_instrument(AcceleratorGraph& graph, std::shared_ptr<GraphInstrument> instrument) {
    graph.instruments_.push_back(std::move(instrument));
  }
  /// Stream::wait: a stream is about to fork from `forking`, which captures into `graph`.
  static void before_fork(AcceleratorGraph& graph, Stream& forking) {
    for (const auto& instrument : graph.instruments_)
      if (instrument->active()) instrument->before_fork(graph, forking);
  }
  /// The active instrument `owner` added to `graph`'s current capture, or null.
  static GraphInstrument* instrument(const AcceleratorGraph& graph, const InstrumentOwner& owner) {
    for (const auto& instrument : graph.instruments_)
      if (instrument->owner() == &owner && instrument->active()) return instrument.get();
    return nullptr;
  }
};

}  // namespace accgraph::detail
