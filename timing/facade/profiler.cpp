// timing::Profiler, the facade: the public API and the graph-lifecycle glue. The work is done by
// one unit per concept, each with its own lock (order: recorder -> marker ring; collector
// delivery -> marker ring; report store is a leaf):
//   ProfilerCore   (profiler_core.hpp)    what the units share: attachment, ring creation,
//                                          what happens to a finished sequence, regions
//   GraphTiming    (graph_timing.hpp)     one capture's timing, owned by the graph
//   RegionRecorder (region_recorder.hpp)  regions per stream, shared boundaries, captures/eager
//   MarkerRing     (marker_ring.hpp)      one backend marker set: sequences, pending queue
//   Collector      (collector.hpp)        collection, make-room, flush, background thread
//   ReportStore    (report_store.hpp)     sinks, the last N reports, statistics
#include "accgraph/timing.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/exporters.hpp"
#include "accgraph/foreign_graph.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/hooks.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/stream.hpp"
#include "graph_timing.hpp"
#include "profiler_core.hpp"

namespace accgraph::timing {

// The core plus the graph lifecycle hooks (lifecycle events only: replays reach the graphs'
// own GraphTimings, so graphs this profiler does not time pay nothing).
//
// Note [Profiler after fork]: fork() copies the memory of the process but only the thread that
// called it: a lock that another thread (the collector, a stream's worker, a thread timing a
// region) held at that instant stays locked in the child forever, and the collector thread is
// gone. An inherited Profiler would deadlock at its first lock (RegionRecorder's mutex: 2 to 29
// children in 30 did; tests/python/test_threads.py). So each Profiler remembers the process that
// made it: in another process every call raises InvalidState saying to make a new Profiler there
// (or start children with multiprocessing's "spawn" or "forkserver"), its graph hooks do nothing,
// and its destructor leaves it as it is (neither its locks nor its thread can be waited for).
namespace {

// Counts the fork()s this process descends through: pthread_atfork's child handler adds one, so
// a Profiler tells it is in a child by a relaxed load, not a getpid() system call per region.
std::atomic<uint64_t> forks{0};

uint64_t fork_generation() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  return forks.load(std::memory_order_relaxed);
}

}  // namespace

struct Profiler::Impl final : ProfilerCore, GraphObserver {
  using ProfilerCore::ProfilerCore;
  ObserverHandle observer;
  const uint64_t generation = fork_generation();
  const pid_t process = ::getpid();

  bool forked() const noexcept { return forks.load(std::memory_order_relaxed) != generation; }

  void check_process(const char* what) const {
    if (forked())
      throw Error(ErrorCode::InvalidState,
                  fmt::format("{}: this Profiler was made in process {}, and this is process {}, "
                              "a child fork() made from it: its locks and threads stayed in the "
                              "parent, so it cannot be used here; make a new Profiler in the "
                              "child (or start children with multiprocessing's 'spawn' or "
                              "'forkserver' method)",
                              what, process, ::getpid()));
  }

  void on_capture_begin(AcceleratorGraph& graph, Stream& stream) override {
    if (forked()) return;
    begin_capture(graph, stream);
  }

  void on_capture_ending(AcceleratorGraph& graph, Stream& stream) override {
    if (forked()) return;
    if (GraphTiming* timing = timing_of(graph)) timing->end_capture(*this, stream, graph.id());
  }

  void on_reset(AcceleratorGraph& graph) override {
    if (forked()) return;
    retire_timing(graph, "reset");
  }

  void on_destroy(AcceleratorGraph& graph) noexcept override {
    if (forked()) return;
    forget(graph.id());
    try {
      retire_timing(graph, "destruction");  // logs what it throws
    } catch (...) {
    }
  }

  // The stream is going: deliver its eager reports and drop what is kept for it (its eager
  // marker ring holds backend storage, and flush would walk it forever).
  void on_stream_destroy(Stream& stream) noexcept override {
    if (forked()) return;
    if (std::shared_ptr<MarkerRing> eager = recorder.stream_destroyed(stream))
      collector.retire_noexcept(eager, "collecting the eager reports of a destroyed stream");
  }
};

// --- Profiler ----------------------------------------------------------------------------------

Profiler::Profiler(ProfilerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {
  impl_->observer = add_graph_observer(*impl_, ObserverEvents::Lifecycle);
  if (impl_->options.background_collector) impl_->collector.start(impl_->options.collector_period);
}

// The graphs it timed keep their GraphTimings (and so the marker storage their captured work
// writes into) until they drop those captures; the timings go inactive with the profiler.
Profiler::~Profiler() {
  if (impl_->forked()) {  // Note [Profiler after fork]: left as it is, deliberately
    new std::shared_ptr<Impl>(std::move(impl_));
    return;
  }
  impl_->collector.stop();
  impl_->observer.remove();
  std::vector<std::shared_ptr<MarkerRing>> eager_rings = impl_->recorder.close_eager_trees();
  try {
    impl_->collector.flush();
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("timing: flushing the profiler failed: {}", e.what()));
  } catch (...) {
    log(LogLevel::Warning, "timing: flushing the profiler failed");
  }
  for (const auto& ring : eager_rings)
    impl_->collector.retire_noexcept(ring, "collecting eager reports");
}

void Profiler::attach(AcceleratorGraph& graph) {
  impl_->check_process("attach");
  if (graph.state() == GraphState::Capturing)
    throw Error(ErrorCode::InvalidState,
                fmt::format("attach: graph {} is already capturing: attach before capture_begin "
                            "(this capture cannot be timed)",
                            graph.id()),
                graph.backend_name());
  impl_->attach(graph.id());
}

void Profiler::attach(ForeignGraph& graph) { attach(graph.graph()); }

void Profiler::attach_all() {
  impl_->check_process("attach_all");
  impl_->attach_all();
}

void Profiler::detach() {
  impl_->check_process("detach");
  impl_->detach();
}

Profiler::Region::Region(Region&& other) noexcept
    : profiler_(std::move(other.profiler_)),
      stream_(std::move(other.stream_)),
      serial_(other.serial_),
      open_(other.open_) {
  other.open_ = false;
}

Profiler::Region::~Region() {
  if (!open_) return;
  try {
    end();
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("timing: ending a region failed: {}", e.what()));
  } catch (...) {
    log(LogLevel::Warning, "timing: ending a region failed");
  }
}

void Profiler::Region::end() {
  if (!open_) return;
  std::shared_ptr<Impl> profiler = profiler_.lock();
  if (!profiler) open_ = false;
  if (!profiler)
    throw Error(ErrorCode::InvalidState,
                "Region::end: the Profiler this region was opened with was destroyed before the "
                "region ended: end regions (leave their scope) before destroying their profiler");
  std::shared_ptr<detail::StreamState> state = stream_.lock();
  if (!state) open_ = false;
  if (!state)
    throw Error(ErrorCode::InvalidState,
                "Region::end: the stream this region was opened on was destroyed before the "
                "region ended (its eager reports were delivered without it): end regions "
                "before destroying their stream");
  profiler->check_process("Region::end");
  Stream stream = detail::StreamAccess::handle(std::move(state));
  // A failed end (out of order, or the stream captures where the region began eagerly) leaves
  // the region open, to be ended again; one that is no longer open closes this handle.
  try {
    profiler->end_region(stream, serial_, "Region::end");
  } catch (const Error&) {
    open_ = profiler->recorder.is_open(stream.id(), serial_);
    throw;
  }
  open_ = false;
}

Profiler::Region Profiler::region(Stream& stream, std::string name, Metadata metadata,
                                  std::string lane) {
  impl_->check_process("region");
  ProfilerCore::check_region(stream, name, "region");
  std::weak_ptr<detail::StreamState> state = detail::StreamAccess::shared(stream, "region");
  const uint64_t serial =
      impl_->begin_region(stream, std::move(name), std::move(metadata), std::move(lane));
  return Region(impl_, std::move(state), serial);
}

void Profiler::begin(Stream& stream, std::string name, Metadata metadata, std::string lane) {
  impl_->check_process("begin");
  ProfilerCore::check_region(stream, name, "begin");
  impl_->begin_region(stream, std::move(name), std::move(metadata), std::move(lane));
}

void Profiler::end(Stream& stream) {
  impl_->check_process("end");
  if (!stream)
    throw Error(ErrorCode::InvalidArgument,
                "end: the stream is empty (moved from): pass the Stream the region began on");
  impl_->end_region(stream, 0, "end");
}

void Profiler::add_sink(Sink sink) {
  impl_->check_process("add_sink");
  impl_->store.add_sink(std::move(sink));
}

void Profiler::flush() {
  impl_->check_process("flush");
  impl_->collector.flush();
}

std::vector<ReplayReport> Profiler::reports() const {
  impl_->check_process("reports");
  return impl_->store.reports();
}

std::vector<RegionStats> Profiler::stats() const {
  impl_->check_process("stats");
  std::vector<RegionStats> stats = impl_->store.stats();
  const std::vector<GraphReplays> counts = impl_->replay_counts();
  for (RegionStats& row : stats) {
    if (row.graph_id == 0) continue;
    auto found = std::lower_bound(
        counts.begin(), counts.end(), row.graph_id,
        [](const GraphReplays& g, uint64_t id) { return g.graph_id < id; });  // by id: a map's
    if (found == counts.end() || found->graph_id != row.graph_id) continue;
    row.replays_run = found->run;
    row.replays_timed = found->timed;
  }
  return stats;
}

uint64_t Profiler::delivered() const {
  impl_->check_process("delivered");
  return impl_->store.delivered();
}

void Profiler::note_untimed(std::string name, std::string reason) {
  impl_->check_process("note_untimed");
  impl_->store.note_untimed(std::move(name), std::move(reason));
}

std::vector<UntimedCalls> Profiler::untimed() const {
  impl_->check_process("untimed");
  return impl_->store.untimed();
}

std::string Profiler::stats_table() const {
  std::ostringstream out;
  write_stats_table(out, stats());
  out << impl_->store.untimed_lines() << impl_->ring_wait_lines() << impl_->sampling_lines();
  return out.str();
}

uint64_t Profiler::ring_waits() const {
  impl_->check_process("ring_waits");
  return impl_->ring_waits();
}

std::chrono::nanoseconds Profiler::ring_wait_time() const {
  impl_->check_process("ring_wait_time");
  return impl_->ring_wait_time();
}

const ProfilerOptions& Profiler::options() const noexcept { return impl_->options; }

std::vector<GraphReplays> Profiler::replay_counts() const {
  impl_->check_process("replay_counts");
  return impl_->replay_counts();
}

StatsRun Profiler::stats_run() const {
  impl_->check_process("stats_run");
  StatsRun run;
  run.replays = impl_->replay_counts();
  for (const ReplayReport& report : impl_->store.reports()) {
    const ReportSource& source = report.source();
    const bool known = std::any_of(run.sources.begin(), run.sources.end(), [&](const auto& s) {
      return s.backend == source.backend && s.device == source.device &&
             s.marker_strategy == source.marker_strategy;
    });
    if (!known) run.sources.push_back(source);
  }
  run.sample_every = impl_->options.sample_every;
  run.overhead = impl_->options.overhead;
  run.sample_seed = impl_->options.sample_seed;
  return run;
}

}  // namespace accgraph::timing
