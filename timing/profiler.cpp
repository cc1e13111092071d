// timing::Profiler, the facade: attachment, the graph-lifecycle glue and the public API. The
// work is done by one unit per concept, each with its own lock (order: facade -> recorder ->
// marker ring; collector delivery -> marker ring; report store is a leaf):
//   RegionRecorder (region_recorder.hpp)  regions per stream, N+1 boundaries, captures/eager
//   MarkerRing     (marker_ring.hpp)      one backend marker set: sequences, pending queue
//   Collector      (collector.hpp)        collection, make-room, flush, background thread
//   ReportStore    (report_store.hpp)     sinks, the last N reports, statistics
#include "accgraph/timing.hpp"

#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/foreign_graph.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/hooks.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/stream.hpp"
#include "../core/hooks_internal.hpp"
#include "../core/stream_state.hpp"
#include "collector.hpp"
#include "marker_ring.hpp"
#include "region_recorder.hpp"
#include "report_store.hpp"

namespace accgraph::timing {

namespace {

// A timed graph's state; its address is what the graph's replays hand back (ReplaySubscriber),
// so replays reach it without a lookup or a lock. Its fields change only in that graph's own
// lifecycle hooks (capture_begin, capture_ending, reset, destruction), which the core calls on
// the thread driving the graph, never during one of its replays.
struct GraphEntry {
  AcceleratorGraph* graph = nullptr;  // subscribed to while the entry exists
  std::shared_ptr<MarkerRing> ring;
  std::shared_ptr<Recording> capture;          // while capturing
  std::shared_ptr<const ReportLayout> layout;  // after capture_ending
};

uint64_t checked_keep(const ProfilerOptions& options) {
  if (options.keep_reports.negative())
    throw Error(ErrorCode::InvalidArgument,
                "Profiler: keep_reports is negative: give how many of the last reports to keep "
                "(0 for none, KeepReports::all() for every one)");
  return options.keep_reports.count();
}

}  // namespace

struct Profiler::Impl final : GraphObserver, detail::ReplaySubscriber {
  explicit Impl(ProfilerOptions opts)
      : options(std::move(opts)),
        store(checked_keep(options), options.stats_mode, options.collect_stats),
        collector(store),
        recorder(collector, MarkerOptions{options.marker_strategy, options.ring_depth},
                 options.delivery) {}

  const ProfilerOptions options;
  ReportStore store;
  Collector collector;
  RegionRecorder recorder;
  ObserverHandle observer;

  mutable std::mutex mutex;  // below
  bool attach_all = false;
  std::set<uint64_t> attached;                      // graph ids
  std::unordered_map<uint64_t, GraphEntry> graphs;  // nodes do not move: subscribers' state

  bool times(const AcceleratorGraph& graph) const {  // caller holds `mutex`
    return attach_all || attached.count(graph.id()) != 0;
  }

  // Removes the graph's timing state and its replay subscription; returns its ring (to retire).
  std::shared_ptr<MarkerRing> drop_graph(AcceleratorGraph& graph) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = graphs.find(graph.id());
    if (it == graphs.end()) return nullptr;
    detail::GraphAccess::unsubscribe(graph, *this);
    if (it->second.capture) recorder.abandon_capture(it->second.capture);
    std::shared_ptr<MarkerRing> ring = std::move(it->second.ring);
    graphs.erase(it);
    return ring;
  }

  // The capture a region on `stream` records into now, or null (eager): InvalidState when the
  // stream captures into a graph this profiler does not time (yet).
  std::shared_ptr<Recording> capture_of(Stream& stream, const char* operation,
                                        const std::string& name) {
    AcceleratorGraph* graph = stream.capturing_graph();
    if (graph == nullptr) {
      // Eager markers recorded into a capture accgraph was not told about would run only when
      // that graph runs, if ever: flush would wait for them forever.
      if (detail::StreamAccess::capturing(stream)) refuse_unknown_capture(stream, operation, name);
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex);
    auto it = graphs.find(graph->id());
    if (it != graphs.end() && it->second.capture) return it->second.capture;
    const std::string what =
        name.empty() ? std::string(operation) : fmt::format("{}('{}')", operation, name);
    if (times(*graph))
      throw Error(ErrorCode::InvalidState,
                  fmt::format("{}: graph {} began capturing before the profiler was attached to "
                              "it: call attach(graph) or attach_all() before capture_begin",
                              what, graph->id()),
                  graph->backend_name());
    throw Error(ErrorCode::InvalidState,
                fmt::format("{}: stream {} is capturing into graph {}, which this profiler is not "
                            "attached to: call attach(graph) or attach_all() before capture_begin",
                            what, stream.id(), graph->id()),
                graph->backend_name());
  }

  [[noreturn]] static void refuse_unknown_capture(Stream& stream, const char* operation,
                                                  const std::string& name) {
    throw Error(ErrorCode::InvalidState,
                fmt::format("{}: stream {} is capturing into a graph accgraph was not told about "
                            "(a native capture): time it through a ForeignGraph (capture_begin "
                            "after the native capture began), or open the region outside the "
                            "capture",
                            name.empty() ? std::string(operation)
                                         : fmt::format("{}('{}')", operation, name),
                            stream.id()),
                stream.backend_name());
  }

  // --- lifecycle hooks ---------------------------------------------------------------------------

  void on_capture_begin(AcceleratorGraph& graph, Stream& stream) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!times(graph)) return;
    }
    // A graph captures again only after on_reset, which dropped its state; this is a guard.
    if (auto old = drop_graph(graph)) collector.retire(old);
    auto ring = MarkerRing::create(graph.backend(), graph.backend_name(), graph.device(),
                                   graph.id(),
                                   MarkerOptions{options.marker_strategy, options.ring_depth},
                                   graph.is_foreign());
    std::shared_ptr<Recording> capture = recorder.begin_capture(ring, stream, graph.id());
    collector.add(ring);
    std::lock_guard<std::mutex> lock(mutex);
    GraphEntry& entry = graphs[graph.id()];
    entry = GraphEntry{&graph, std::move(ring), std::move(capture), nullptr};
    detail::GraphAccess::subscribe(graph, *this, &entry);
  }

  void on_capture_ending(AcceleratorGraph& graph, Stream& stream) override {
    std::shared_ptr<Recording> capture;
    GraphEntry* entry = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = graphs.find(graph.id());
      if (it == graphs.end() || !it->second.capture) return;
      entry = &it->second;
      capture = entry->capture;
    }
    std::shared_ptr<const ReportLayout> layout = recorder.end_capture(capture, stream, graph.id());
    std::lock_guard<std::mutex> lock(mutex);
    entry->layout = std::move(layout);
    entry->capture.reset();
  }

  // Replays reach only the profilers timing their graph (detail::ReplaySubscriber), with the
  // graph's entry: graphs this profiler does not time pay nothing, and timed ones take no
  // profiler-wide lock (GraphEntry says why its fields need none here).
  void before_replay(AcceleratorGraph& graph, Stream& stream, void* state) override {
    const GraphEntry& entry = *static_cast<const GraphEntry*>(state);
    if (!entry.layout) return;
    if (detail::StreamAccess::capturing(stream)) refuse_nested_replay(graph, stream);
    // Never overwrite a slot that was not read: collect the oldest replay first.
    if (!entry.layout->regions().empty()) collector.make_room(*entry.ring);
    entry.ring->before_launch(detail::GraphAccess::impl(graph), detail::StreamAccess::impl(stream));
  }

  // A timed graph replayed into another graph's capture would run its markers whenever, and as
  // often as, the outer graph runs: its sequences could neither be numbered at launch nor be
  // waited for (flush would hang on a replay that never runs), so it is refused before the
  // backend records anything. The outer capture goes on.
  [[noreturn]] static void refuse_nested_replay(AcceleratorGraph& graph, Stream& stream) {
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

  void after_replay(AcceleratorGraph& graph, Stream& stream, void* state) override {
    const GraphEntry& entry = *static_cast<const GraphEntry*>(state);
    if (!entry.layout) return;
    // A capture without regions still launches its begin/end_sequence, but there is nothing to
    // read or report.
    std::shared_ptr<const ReportLayout> layout =
        entry.layout->regions().empty() ? nullptr : entry.layout;
    if (detail::GraphAccess::fenced_launch(graph))
      entry.ring->after_foreign_launch(detail::GraphAccess::impl(graph),
                                       detail::StreamAccess::impl(stream), std::move(layout),
                                       MarkerRing::LaunchOutcome::Returned);
    else
      entry.ring->after_launch(detail::GraphAccess::impl(graph),
                               detail::StreamAccess::impl(stream), std::move(layout));
    if (options.delivery == Delivery::Immediate) collector.collect_all(*entry.ring);
  }

  // The owner's launch of a foreign graph raised: it may have run (Note [Launch fences]).
  void after_failed_replay(AcceleratorGraph& graph, Stream& stream, void* state) noexcept override {
    const GraphEntry& entry = *static_cast<const GraphEntry*>(state);
    // Unfenced (LaunchCheck::Trusted): the number is given to the next launch, as before.
    if (!entry.layout || !detail::GraphAccess::fenced_launch(graph)) return;
    try {
      entry.ring->after_foreign_launch(
          detail::GraphAccess::impl(graph), detail::StreamAccess::impl(stream),
          entry.layout->regions().empty() ? nullptr : entry.layout,
          MarkerRing::LaunchOutcome::Raised);
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          fmt::format("timing: foreign graph {}: checking a launch that raised failed: {}",
                      graph.id(), e.what()));
    } catch (...) {
    }
  }

  void on_reset(AcceleratorGraph& graph) override {
    try {
      if (auto ring = drop_graph(graph)) collector.retire(ring);
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          fmt::format("timing: collecting the reports of graph {} before its reset failed: {}",
                      graph.id(), e.what()));
    }
  }

  void on_destroy(AcceleratorGraph& graph) noexcept override {
    try {
      {
        std::lock_guard<std::mutex> lock(mutex);
        attached.erase(graph.id());
      }
      if (auto ring = drop_graph(graph)) collector.retire(ring);
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          fmt::format("timing: collecting the reports of graph {} before its destruction failed: "
                      "{}",
                      graph.id(), e.what()));
    } catch (...) {
    }
  }

  // The stream is going: deliver its eager reports and drop what is kept for it (its eager
  // marker ring holds backend storage, and flush would walk it forever).
  void on_stream_destroy(Stream& stream) noexcept override {
    if (std::shared_ptr<MarkerRing> eager = recorder.stream_destroyed(stream))
      collector.retire_noexcept(eager, "collecting the eager reports of a destroyed stream");
  }
};

// --- Profiler ----------------------------------------------------------------------------------

Profiler::Profiler(ProfilerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {
  // Lifecycle events only: replays reach the profiler through the graphs it times.
  impl_->observer = add_graph_observer(*impl_, ObserverEvents::Lifecycle);
  if (impl_->options.background_collector) impl_->collector.start(impl_->options.collector_period);
}

Profiler::~Profiler() {
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
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [id, entry] : impl_->graphs) {
    if (entry.graph == nullptr) continue;
    detail::GraphAccess::unsubscribe(*entry.graph, *impl_);
    // Its captured markers still write into the ring's storage on every later replay: the graph
    // keeps the ring until it drops that capture.
    if (entry.ring) detail::GraphAccess::keep_alive(*entry.graph, std::move(entry.ring));
  }
}

void Profiler::attach(AcceleratorGraph& graph) {
  if (graph.state() == GraphState::Capturing)
    throw Error(ErrorCode::InvalidState,
                fmt::format("attach: graph {} is already capturing: attach before capture_begin "
                            "(this capture cannot be timed)",
                            graph.id()),
                graph.backend_name());
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->attached.insert(graph.id());
}

void Profiler::attach(ForeignGraph& graph) { attach(graph.graph()); }

void Profiler::attach_all() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->attach_all = true;
}

void Profiler::detach() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->attach_all = false;
  impl_->attached.clear();
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
  Stream stream = detail::StreamAccess::handle(std::move(state));
  // A failed end (out of order, or the stream captures where the region began eagerly) leaves
  // the region open, to be ended again; one that is no longer open closes this handle.
  try {
    profiler->recorder.end(stream, profiler->capture_of(stream, "Region::end", std::string()),
                           serial_);
  } catch (const Error&) {
    open_ = profiler->recorder.is_open(stream.id(), serial_);
    throw;
  }
  open_ = false;
}

namespace {
void check_region(const Stream& stream, const std::string& name, const char* operation) {
  if (!stream)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the stream is empty (moved from): pass a live Stream", operation));
  if (name.empty())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the region name is empty: give every region a name", operation));
}
}  // namespace

Profiler::Region Profiler::region(Stream& stream, std::string name, Metadata metadata,
                                  std::string lane) {
  check_region(stream, name, "region");
  std::weak_ptr<detail::StreamState> state = detail::StreamAccess::shared(stream, "region");
  std::shared_ptr<Recording> capture = impl_->capture_of(stream, "begin", name);
  const uint64_t serial = impl_->recorder.begin(stream, capture, std::move(name),
                                                std::move(metadata), std::move(lane));
  return Region(impl_, std::move(state), serial);
}

void Profiler::begin(Stream& stream, std::string name, Metadata metadata, std::string lane) {
  check_region(stream, name, "begin");
  std::shared_ptr<Recording> capture = impl_->capture_of(stream, "begin", name);
  impl_->recorder.begin(stream, capture, std::move(name), std::move(metadata), std::move(lane));
}

void Profiler::end(Stream& stream) {
  if (!stream)
    throw Error(ErrorCode::InvalidArgument,
                "end: the stream is empty (moved from): pass the Stream the region began on");
  impl_->recorder.end(stream, impl_->capture_of(stream, "end", std::string()), 0);
}

void Profiler::add_sink(Sink sink) { impl_->store.add_sink(std::move(sink)); }

void Profiler::flush() { impl_->collector.flush(); }

std::vector<ReplayReport> Profiler::reports() const { return impl_->store.reports(); }

std::vector<RegionStats> Profiler::stats() const { return impl_->store.stats(); }

uint64_t Profiler::delivered() const { return impl_->store.delivered(); }

}  // namespace accgraph::timing
