// GraphTiming (graph_timing.hpp).
#include "graph_timing.hpp"

#include <exception>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "profiler_core.hpp"

namespace accgraph::timing {

namespace {

// A timed graph replayed into another graph's capture would run its markers whenever, and as
// often as, the outer graph runs: its sequences could neither be numbered at launch nor be
// waited for (flush would hang on a replay that never runs), so it is refused before the
// backend records anything. The outer capture goes on.
[[noreturn]] void refuse_nested_replay(AcceleratorGraph& graph, Stream& stream) {
  AcceleratorGraph* outer = stream.capturing_graph();
  throw Error(ErrorCode::InvalidState,
              fmt::format("replay: graph {} is timed by a profiler and stream {} is capturing "
                          "into {}: a timed graph cannot be replayed into another capture, "
                          "because its reports could not be attributed to executions; replay "
                          "it outside the capture, or enqueue its work directly in the capture",
                          graph.id(), stream.id(),
                          outer ? fmt::format("graph {}", outer->id()) : "another graph"),
              graph.backend_name());
}

}  // namespace

GraphTiming::GraphTiming(const std::shared_ptr<ProfilerCore>& core,
                         std::shared_ptr<Recording> capture, const AcceleratorGraph& graph)
    : GraphInstrument(*core),
      core_(core),
      backend_(&graph.backend()),
      backend_name_(graph.backend_name()),
      device_(graph.device()),
      graph_id_(graph.id()),
      fenced_(graph.is_foreign()),
      immediate_(core->options.delivery == Delivery::Immediate),
      capture_(std::move(capture)),
      sample_every_(core->options.overhead > 0 ? 0 : core->options.sample_every),
      seed_(core->options.sample_seed),
      untimed_capable_(untimed_replay_of(detail::GraphAccess::impl(graph)) != nullptr) {}

// --- sampled replays ---------------------------------------------------------------------------

namespace {

uint64_t mix(uint64_t x) noexcept {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The counter's writer is the graph's launching thread, one launch at a time (graph.serial), so
// a load and a store count a launch: no read-modify-write on the launch path (Note [Launch
// path]); readers only load.
void count_launch(std::atomic<uint64_t>& count) noexcept {
  count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

bool is_sampled_replay(uint64_t replay, uint64_t every, uint64_t seed,
                       uint64_t graph_id) noexcept {
  if (every <= 1) return true;
  const uint64_t window = replay / every;
  return replay % every == mix(seed ^ mix(graph_id ^ mix(window))) % every;
}

// Note [Sampled replays] (spi/untimed_replay.hpp): the core asks this only where the graph can
// launch without markers and this is its only instrument. A replay that is not scheduled runs
// untimed; so does every replay while the profiler is gone or the capture recorded no region
// (as before: those were never reported). The overhead budget's N is chosen by the profiler
// from the first reports (ProfilerCore::note_replay_cost); until then every replay is timed.
bool GraphTiming::skips_replay() const noexcept {
  if (!reporting() || !counter_) return false;
  const uint64_t every =
      sample_every_ != 0 ? sample_every_ : counter_->every.load(std::memory_order_relaxed);
  return !is_sampled_replay(replays_, every, seed_, graph_id_);
}

void GraphTiming::after_untimed_replay() noexcept {
  ++replays_;
  count_launch(counter_->run);
  // A foreign graph's first replays may have been timed before its owner allowed untimed ones.
  counter_->untimed_capable.store(true, std::memory_order_relaxed);
}

// An ended capture that never began a marker sequence has nothing to do on its replays: it is
// not counted as a replay hook (Note [Deferred ring]).
bool GraphTiming::active() const noexcept {
  if (retired_.load(std::memory_order_relaxed) || core_.expired()) return false;
  return sequenced_.load(std::memory_order_relaxed) || !ended_.load(std::memory_order_relaxed);
}

bool GraphTiming::reporting() const noexcept {
  return ended_.load(std::memory_order_relaxed) && !retired_.load(std::memory_order_relaxed) &&
         sequenced_.load(std::memory_order_relaxed) && !core_.expired();
}

// --- the deferred ring -------------------------------------------------------------------------

const std::shared_ptr<MarkerRing>& GraphTiming::ring_for(ProfilerCore& core,
                                                         const char* operation) {
  if (ring_) return ring_;
  try {
    ring_ = core.create_ring(*backend_, backend_name_, device_, graph_id_, fenced_);
  } catch (const Error& e) {
    throw Error(e.code(),
                fmt::format("{}: making the marker ring of graph {} failed: {}; the capture goes "
                            "on untimed so far: fix the cause, then {} again, or end the capture "
                            "without regions",
                            operation, graph_id_, e.message(),
                            std::string(operation) == "fork" ? "fork" : "begin the region"),
                e.backend(), e.native_call(), e.native_code());
  }
  return ring_;
}

void GraphTiming::begin_sequence(ProfilerCore& core, Stream& stream, const char* operation) {
  if (sequenced_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(ring_mutex_);
  if (sequenced_.load(std::memory_order_relaxed) || !capture_) return;
  // A ring whose begin_sequence failed stays (the failed call may have enqueued part of it, and
  // the captured work keeps the storage alive): the next attempt begins on it again.
  const std::shared_ptr<MarkerRing>& ring = ring_for(core, operation);
  core.recorder.begin_sequence(capture_, ring, stream);
  sequenced_.store(true, std::memory_order_release);
}

void GraphTiming::before_fork(AcceleratorGraph&, Stream& forking) {
  if (sequenced_.load(std::memory_order_acquire)) return;
  std::shared_ptr<ProfilerCore> core = core_.lock();
  if (core) begin_sequence(*core, forking, "fork");
}

void GraphTiming::end_capture(ProfilerCore& core, Stream& stream, uint64_t graph_id) {
  if (!capture_) return;
  std::shared_ptr<const ReportLayout> layout =
      core.recorder.end_capture(capture_, stream, graph_id);
  // A capture whose sequence began at a fork but holds no region still launches its
  // begin/end_sequence, but there is nothing to read or report.
  if (layout && !layout->regions().empty()) {
    layout_ = std::move(layout);
    counter_ = core.replay_counter(graph_id_);
    const uint64_t every = sample_every_ != 0 ? sample_every_ : 1;
    counter_->every.store(every, std::memory_order_relaxed);
    if (!untimed_capable_ && (every != 1 || sample_every_ == 0))
      counter_->untimed_capable.store(false, std::memory_order_relaxed);
  }
  std::shared_ptr<MarkerRing> unused;
  {
    std::lock_guard<std::mutex> lock(ring_mutex_);
    capture_.reset();
    if (!sequenced_.load(std::memory_order_relaxed)) unused = ring_;
  }
  ended_.store(true, std::memory_order_relaxed);  // inactive from now on when not sequenced
  // A ring whose begin_sequence failed is never launched: the collector forgets it now (the
  // graph keeps its storage, which the failed call may have pointed captured work at).
  if (unused) core.collector.retire_noexcept(unused, "dropping the marker ring of a capture");
}

void GraphTiming::retire(ProfilerCore& core) {
  if (retired_.exchange(true)) return;
  std::shared_ptr<MarkerRing> ring;
  {
    std::lock_guard<std::mutex> lock(ring_mutex_);
    if (capture_) core.recorder.abandon_capture(capture_);
    ring = ring_;
  }
  if (ring) core.collector.retire(ring);
}

// Note [Trusted launches and captures]: a replay into another capture is refused below by asking
// the stream (refuse_nested_replay), except for a foreign graph's LaunchCheck::Trusted launch: its
// owner launches exactly one execution or raises before launching, so it refuses a capturing stream
// itself (PyTorch's CUDAGraph.replay raises "Cannot prepare for replay during capturing stage"
// and leaves the outer capture valid: seen on the H200, torch 2.11), and the owner's launch
// raising is the after_failed_replay path. Asking again cost a wrapped CUDA stream a
// cudaStreamIsCapturing on every replay (about 0.13 us on the H100, 2% of bench_torch part 5's
// untimed replay() call: bench/README.md, 'Targets and figures the code cites'), which
// accgraph.torch's replay no longer pays.
void GraphTiming::before_replay(AcceleratorGraph& graph, Stream& stream) {
  launch_timed_ = false;
  if (!reporting()) return;
  // fenced_: a foreign graph; its launch is trusted unless ForeignGraph::launch asked a fence.
  const bool trusted = fenced_ && !detail::GraphAccess::fenced_launch(graph);
  if (!trusted && detail::StreamAccess::capturing(stream)) refuse_nested_replay(graph, stream);
  if (!overhead_known_) {
    std::shared_ptr<ProfilerCore> core = core_.lock();
    if (!core) return;  // the profiler is gone: the launch runs untimed
    detail::LaunchWaitScope wait(detail::GraphAccess::launch_waits(graph));
    measure_overhead(*core);
  }
  // Never overwrite a slot that was not read: while the ring is full, collect its oldest replay
  // first (counted). One ring lock per launch when it is not (Note [Launch path]).
  GraphImplInterface& impl = detail::GraphAccess::impl(graph);
  StreamImpl& stream_impl = detail::StreamAccess::impl(stream);
  LaunchWaits* waits = detail::GraphAccess::launch_waits(graph);
  while (!ring_->before_launch(impl, stream_impl, layout_ != nullptr, waits)) {
    std::shared_ptr<ProfilerCore> core = core_.lock();
    if (!core) return;
    detail::LaunchWaitScope wait(waits);
    core->make_room(*ring_);
  }
  launch_timed_ = true;
  // A replay the schedule leaves untimed that comes here all the same (the backend cannot
  // launch without markers now, or another profiler times the graph too) is timed: say so.
  if (counter_ && sample_every_ != 1 && skips_replay())
    counter_->untimed_capable.store(false, std::memory_order_relaxed);
}

// Note [Marker overhead] in marker_overhead.cpp: the capture could not measure it; the first
// launch can (no report of the layout exists yet, so it is replaced, not changed under one).
void GraphTiming::measure_overhead(ProfilerCore& core) {
  overhead_known_ = true;
  if (!layout_ || layout_->source().marker_overhead_ns != 0) return;
  const MarkerCosts costs = core.marker_overhead(*backend_, backend_name_, device_, true);
  if (costs.transition_ns == 0 && costs.back_to_back_ns == 0) return;
  ReportSource source = layout_->source();
  source.marker_overhead_ns = costs.transition_ns;
  source.marker_back_to_back_ns = costs.back_to_back_ns;
  layout_ = std::make_shared<const ReportLayout>(std::move(source), layout_->regions(),
                                                 layout_->back_to_back_markers());
}

// Note [Launch path]: every timed launch pays before_replay and after_replay on the launching
// thread (the target: <= 100 ns beyond the backend's own marker calls, bench/README.md, 'Targets
// and figures the code cites'). Each atomic read-modify-write there costs about 20 cycles
// uncontended and far more when another thread touched its cache line, so a launch takes the fewest
// it can:
// - the ring's lock twice (before: the room check and the backend call together; after: the
//   backend call and the pending entry): the SPI does not promise thread-safe markers, and a
//   collecting thread reads them. A RingLock: one exchange to take, a store to give up (Note
//   [Ring lock] in marker_ring.hpp);
// - no reference to the profiler: the launch only looks whether it still lives (weak_ptr
//   expired(), a load) and uses what the graph owns (the ring, the layout). A reference is
//   taken only where the profiler itself is called: the first launch (the marker overhead), a
//   full ring (collection), Immediate delivery. A profiler destroyed during a launch leaves that
//   launch's entry in the ring, which the graph owns: nobody reads it, nothing dangles;
// - no reference count on the layout (Note [Kept layouts] in marker_ring.cpp).
// `launch_timed_` carries from before_replay to after_replay (or after_failed_replay) whether
// the launch was numbered: a launch's two halves run on one thread, one launch of a graph at a
// time.
void GraphTiming::after_replay(AcceleratorGraph& graph, Stream& stream) {
  if (!std::exchange(launch_timed_, false) || retired_.load(std::memory_order_relaxed)) return;
  LaunchWaits* waits = detail::GraphAccess::launch_waits(graph);
  if (detail::GraphAccess::fenced_launch(graph))
    ring_->after_foreign_launch(detail::GraphAccess::impl(graph),
                                detail::StreamAccess::impl(stream), layout_,
                                MarkerRing::LaunchOutcome::Returned, replays_, waits);
  else
    ring_->after_launch(detail::GraphAccess::impl(graph), detail::StreamAccess::impl(stream),
                        layout_, replays_, waits);
  ++replays_;
  if (counter_) {
    count_launch(counter_->run);
    count_launch(counter_->timed);
  }
  if (!immediate_) return;  // sequence_done does nothing else for a graph's replay
  if (std::shared_ptr<ProfilerCore> core = core_.lock()) {
    detail::LaunchWaitScope wait(waits);
    core->sequence_done(*ring_, ProfilerCore::Sequence::GraphReplay);
  }
}

// The launch raised; a foreign graph's owner launch may have run (Note [Launch fences]).
void GraphTiming::after_failed_replay(AcceleratorGraph& graph, Stream& stream) noexcept {
  // No after_replay comes for this launch.
  if (!std::exchange(launch_timed_, false)) return;
  try {
    // Not fenced (an accgraph graph's launch ran nothing; a foreign one with
    // LaunchCheck::Trusted): the number is given to the next launch, as before.
    if (!detail::GraphAccess::fenced_launch(graph) || !reporting()) return;
    ring_->after_foreign_launch(
        detail::GraphAccess::impl(graph), detail::StreamAccess::impl(stream), layout_,
        MarkerRing::LaunchOutcome::Raised, replays_, detail::GraphAccess::launch_waits(graph));
  } catch (const std::exception& e) {
    log(LogLevel::Warning,
        fmt::format("timing: foreign graph {}: checking a launch that raised failed: {}",
                    graph.id(), e.what()));
  } catch (...) {
  }
}

}  // namespace accgraph::timing
