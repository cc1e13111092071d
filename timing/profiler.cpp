// timing::Profiler: regions recorded as backend timestamp markers into captured graphs (or
// timed eagerly), marker rings per graph, and delivery of one ReplayReport per replay.
#include "accgraph/timing.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "accgraph/backend.hpp"
#include "accgraph/error.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/hooks.hpp"
#include "accgraph/stream.hpp"
#include "../core/hooks_internal.hpp"
#include "../core/stream_state.hpp"
#include "stats_internal.hpp"

namespace accgraph::timing {

namespace {

// One region as recorded: where its two timestamps land in the marker sequence.
struct RegionDef {
  RegionTiming timing;  // name, path, depth, parent, stream_id, metadata; times left at zero
  uint32_t begin_marker = 0;
  uint32_t end_marker = 0;
};

// The regions of one capture (shared by all its replays) or of one eager region tree.
struct Layout {
  std::vector<RegionDef> regions;
  uint32_t marker_count = 0;
  // Where this layout's regions land in the statistics; touched only under delivery_mutex.
  mutable SeriesCache stats_series;
  // The report delivered for every replay of this layout: names, paths and metadata are filled
  // once, each delivery rewrites only the header and the times (copying every RegionTiming per
  // replay was most of the collection cost: ~60% at 1000 regions). Touched only under
  // delivery_mutex; `report_in_use` is set while sinks hold it, so a sink that flushes from
  // inside its call gets a fresh report instead of seeing this one rewritten.
  mutable ReplayReport report;
  mutable bool report_in_use = false;
};

struct PendingSequence {
  uint64_t sequence = 0;
  uint64_t replay_index = 0;
  std::shared_ptr<const Layout> layout;
};

// A delivered report as keep_reports keeps it: the header, the layout (names, paths, metadata:
// shared by every replay of a capture) and the marker times. Keeping a report of 1000 regions
// costs one vector of 1001 timestamps, not a copy of 1000 RegionTimings and their strings
// (which was most of the collection cost at 1000 regions); reports() rebuilds the full ones.
struct KeptReport {
  ReplayReport header;  // every field but regions
  std::shared_ptr<const Layout> layout;
  std::vector<uint64_t> times;
};

// One backend TimestampMarkers object plus what its reports say about where they came from.
// Lock order: Impl::delivery_mutex -> Impl::mutex -> MarkerSet::calls.
struct MarkerSet {
  std::unique_ptr<TimestampMarkers> markers;
  // Serialises calls into `markers`: the SPI does not promise they are thread-safe, and the
  // collector thread reads while the graph's thread launches.
  std::mutex calls;
  size_t ring_depth = 1;
  uint64_t graph_id = 0;
  std::string backend;
  int device = 0;
  std::string device_name;
  std::string strategy;
  uint64_t resolution_ns = 0;
  // Guarded by Impl::mutex.
  uint64_t next_sequence = 0;
  std::deque<PendingSequence> pending;
  // collect_oldest's buffer for read(), reused by every collection of this set and grown when a
  // layout has more markers; only its first marker_count values belong to the sequence being
  // collected. Touched only under delivery_mutex.
  std::vector<uint64_t> times;
};

// Regions being recorded into one marker set: a graph's capture or one eager region tree.
struct Recording {
  std::shared_ptr<MarkerSet> set;
  std::shared_ptr<Layout> layout = std::make_shared<Layout>();
  int open_regions = 0;
  bool eager = false;
};

struct OpenRegion {
  std::shared_ptr<Recording> recording;
  size_t index = 0;    // into recording->layout->regions
  uint64_t serial = 0;  // what the Region handle ends (Impl::next_region_serial)
};

// The last region that ended on a stream: a sibling that begins right after it may reuse its
// end marker as its begin marker (N+1 markers for N adjacent regions).
struct EndedRegion {
  std::shared_ptr<Recording> recording;
  size_t depth = 0;
  uint32_t end_marker = 0;
  uint64_t operation_count = 0;
};

struct StreamEntry {
  std::weak_ptr<detail::StreamState> stream;  // to close an open eager tree at ~Profiler
  std::vector<OpenRegion> stack;
  std::optional<EndedRegion> last_ended;
  std::shared_ptr<MarkerSet> eager_set;     // created on the first eager region
  std::shared_ptr<Recording> eager_tree;    // the eager tree being recorded, if any
};

// A timed graph's state; its address is what the graph's replays hand back (ReplaySubscriber),
// so replays reach it without a lookup. Lives in Impl::graphs (nodes do not move).
struct GraphEntry {
  AcceleratorGraph* graph = nullptr;  // subscribed to while the entry exists
  std::shared_ptr<MarkerSet> set;
  std::shared_ptr<Recording> capture;      // while capturing
  std::shared_ptr<const Layout> layout;    // after capture_ending
};

}  // namespace

struct Profiler::Impl final : GraphObserver, detail::ReplaySubscriber {
  explicit Impl(ProfilerOptions opts) : options(std::move(opts)) {}

  ProfilerOptions options;
  ObserverHandle observer;

  // Held for a whole collection (wait, read, deliver) so that reports of one marker set reach
  // the sinks in sequence order even with the collector thread running. Recursive so a sink may
  // call flush().
  std::recursive_mutex delivery_mutex;
  mutable std::mutex mutex;  // everything below
  bool attach_all = false;
  std::set<uint64_t> attached;  // graph ids
  std::unordered_map<uint64_t, GraphEntry> graphs;
  std::unordered_map<uint64_t, StreamEntry> streams;
  std::vector<std::shared_ptr<MarkerSet>> sets;  // every set that may hold pending sequences
  // Copy-on-write so delivery takes a snapshot without copying every std::function.
  std::shared_ptr<const std::vector<Sink>> sinks = std::make_shared<const std::vector<Sink>>();
  std::vector<KeptReport> kept_reports;
  StatsAccumulator stats{options.stats_mode};
  std::atomic<uint64_t> delivered{0};
  uint64_t next_region_serial = 1;  // guarded by `mutex`

  std::thread collector;
  std::mutex collector_mutex;
  std::condition_variable collector_wake;
  bool collector_stop = false;

  // --- marker sets ---------------------------------------------------------------------------

  std::shared_ptr<MarkerSet> create_set(Backend& backend, const std::string& backend_name,
                                        int device, uint64_t graph_id) {
    auto set = std::make_shared<MarkerSet>();
    set->markers =
        backend.create_markers(device, MarkerOptions{options.marker_strategy, options.ring_depth});
    if (!set->markers)
      throw Error(ErrorCode::BackendError,
                  fmt::format("create_markers returned no marker set for device {}: the backend "
                              "must return markers or throw",
                              device),
                  backend_name);
    set->ring_depth = std::max<size_t>(1, set->markers->ring_depth());
    set->graph_id = graph_id;
    set->backend = backend_name;
    set->device = device;
    for (const DeviceInfo& info : backend.devices())
      if (info.index == device) set->device_name = info.name;
    set->strategy = set->markers->strategy();
    set->resolution_ns = set->markers->resolution_ns();
    return set;
  }

  // --- collection and delivery -----------------------------------------------------------------

  // Collects the oldest pending sequence of `set` (waiting for it); false when none is pending.
  // Caller holds delivery_mutex and not `mutex`.
  bool collect_oldest(MarkerSet& set) {
    PendingSequence pending;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (set.pending.empty()) return false;
      pending = set.pending.front();
    }
    const size_t count = pending.layout->marker_count;
    std::exception_ptr failure;
    try {
      if (set.times.size() < count) set.times.resize(count);
      std::lock_guard<std::mutex> calls(set.calls);
      set.markers->wait(pending.sequence);
      set.markers->read(pending.sequence, set.times.data(), count);
    } catch (...) {
      failure = std::current_exception();
    }
    // Popped only once read: until then its ring slot must not be reused by a new launch.
    {
      std::lock_guard<std::mutex> lock(mutex);
      set.pending.pop_front();
    }
    if (failure) std::rethrow_exception(failure);
    const Layout& layout = *pending.layout;
    // The layout's own report, unless a sink is still reading it (it flushed from inside its
    // call): then this nested delivery gets a fresh one.
    ReplayReport fresh;
    const bool reuse = !layout.report_in_use;
    ReplayReport& report = reuse ? layout.report : fresh;
    fill_header(report, set, pending);
    fill_regions(report, layout, set.times);
    std::optional<KeptReport> kept;
    if (options.keep_reports) {
      kept.emplace();
      fill_header(kept->header, set, pending);
      kept->layout = pending.layout;
      kept->times.assign(set.times.begin(), set.times.begin() + static_cast<ptrdiff_t>(count));
    }
    struct InUse {
      const Layout* layout;
      ~InUse() {
        if (layout != nullptr) layout->report_in_use = false;
      }
    } in_use{reuse ? &layout : nullptr};
    if (reuse) layout.report_in_use = true;
    deliver(report, layout, std::move(kept));
    return true;
  }

  static void fill_header(ReplayReport& report, const MarkerSet& set,
                          const PendingSequence& pending) {
    report.graph_id = set.graph_id;
    report.replay_index = pending.replay_index;
    report.backend = set.backend;
    report.device = set.device;
    report.device_name = set.device_name;
    report.marker_strategy = set.strategy;
    report.resolution_ns = set.resolution_ns;
  }

  // Fills the regions of `report` from the marker times; the regions' descriptions are copied
  // only when `report` does not hold them yet.
  static void fill_regions(ReplayReport& report, const Layout& layout,
                           const std::vector<uint64_t>& times) {
    const std::vector<RegionDef>& defs = layout.regions;
    if (report.regions.size() != defs.size()) {
      report.regions.clear();
      report.regions.reserve(defs.size());
      for (const RegionDef& def : defs) report.regions.push_back(def.timing);
    }
    constexpr uint64_t kUnmeasurable = TimestampMarkers::kUnmeasurable;
    for (size_t i = 0; i < defs.size(); ++i) {
      RegionTiming& timing = report.regions[i];
      const uint64_t start = times[defs[i].begin_marker];
      const uint64_t end = times[defs[i].end_marker];
      timing.measurable = start != kUnmeasurable && end != kUnmeasurable;
      timing.start_ns = timing.measurable ? start : 0;
      timing.end_ns = timing.measurable ? end : 0;
      timing.duration_ns = end >= start && timing.measurable ? end - start : 0;
    }
  }

  // Caller holds delivery_mutex (sinks see reports in order) and not `mutex` (sinks may call
  // reports(), stats(), ...).
  // `kept`: what keep_reports keeps of this report, if it is on.
  void deliver(const ReplayReport& report, const Layout& layout, std::optional<KeptReport> kept) {
    std::shared_ptr<const std::vector<Sink>> current_sinks;
    {
      std::lock_guard<std::mutex> lock(mutex);
      current_sinks = sinks;
      if (kept) kept_reports.push_back(std::move(*kept));
    }
    StatsAccess::add(stats, layout.stats_series, report);
    delivered.fetch_add(1, std::memory_order_relaxed);
    for (const Sink& sink : *current_sinks) {
      try {
        sink(report);
      } catch (const std::exception& e) {
        log(LogLevel::Warning,
            fmt::format("timing: a report sink threw for graph {} replay {}: {}", report.graph_id,
                        report.replay_index, e.what()));
      } catch (...) {
        log(LogLevel::Warning, "timing: a report sink threw a non-standard exception");
      }
    }
  }

  void collect_all(MarkerSet& set) {
    std::lock_guard<std::recursive_mutex> delivery(delivery_mutex);
    while (collect_oldest(set)) {
    }
  }

  // Waits until `set` has a free ring slot for one more sequence (collecting the oldest).
  void make_room(MarkerSet& set) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (set.pending.size() < set.ring_depth) return;
    }
    std::lock_guard<std::recursive_mutex> delivery(delivery_mutex);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (set.pending.size() < set.ring_depth) return;
      }
      collect_oldest(set);
    }
  }

  std::vector<std::shared_ptr<MarkerSet>> sets_snapshot() const {
    std::lock_guard<std::mutex> lock(mutex);
    return sets;
  }

  void flush() {
    std::lock_guard<std::recursive_mutex> delivery(delivery_mutex);
    std::exception_ptr first_failure;
    for (const auto& set : sets_snapshot()) {
      try {
        collect_all(*set);
      } catch (...) {
        if (!first_failure) first_failure = std::current_exception();
      }
    }
    if (first_failure) std::rethrow_exception(first_failure);
  }

  // The collector's pass: deliver every sequence that has already finished, oldest first.
  void collect_completed() {
    std::lock_guard<std::recursive_mutex> delivery(delivery_mutex);
    for (const auto& set : sets_snapshot()) {
      for (;;) {
        uint64_t sequence = 0;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (set->pending.empty()) break;
          sequence = set->pending.front().sequence;
        }
        bool complete = false;
        {
          std::lock_guard<std::mutex> calls(set->calls);
          complete = set->markers->is_complete(sequence);
        }
        if (!complete) break;
        collect_oldest(*set);
      }
    }
  }

  void run_collector() {
    std::unique_lock<std::mutex> lock(collector_mutex);
    while (!collector_stop) {
      collector_wake.wait_for(lock, options.collector_period, [&] { return collector_stop; });
      if (collector_stop) break;
      lock.unlock();
      try {
        collect_completed();
      } catch (const std::exception& e) {
        log(LogLevel::Warning, fmt::format("timing: the background collector failed: {}", e.what()));
      } catch (...) {
        log(LogLevel::Warning, "timing: the background collector failed");
      }
      lock.lock();
    }
  }

  void stop_collector() noexcept {
    if (!collector.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(collector_mutex);
      collector_stop = true;
    }
    collector_wake.notify_all();
    collector.join();
  }

  // Collects what `set` still holds, waits for its last launch (replays of a capture without
  // regions leave nothing pending but still write its storage), and forgets it. Caller does
  // not hold `mutex`.
  void retire(const std::shared_ptr<MarkerSet>& set) {
    std::exception_ptr failure;
    try {
      collect_all(*set);
      uint64_t launched = 0;
      {
        std::lock_guard<std::mutex> lock(mutex);
        launched = set->next_sequence;
      }
      if (launched > 0) {
        std::lock_guard<std::mutex> calls(set->calls);
        set->markers->wait(launched - 1);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      sets.erase(std::remove(sets.begin(), sets.end(), set), sets.end());
    }
    if (failure) std::rethrow_exception(failure);
  }

  // Drops every reference streams hold to `recording` (its capture was aborted or finished).
  // Caller holds `mutex`.
  void forget_recording(const std::shared_ptr<Recording>& recording) {
    for (auto& [id, entry] : streams) {
      auto& stack = entry.stack;
      stack.erase(std::remove_if(stack.begin(), stack.end(),
                                 [&](const OpenRegion& r) { return r.recording == recording; }),
                  stack.end());
      if (entry.last_ended && entry.last_ended->recording == recording) entry.last_ended.reset();
    }
  }

  // Removes the graph's timing state (and its replay subscription); returns its marker set (to
  // retire) or nullptr.
  std::shared_ptr<MarkerSet> drop_graph(AcceleratorGraph& graph) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = graphs.find(graph.id());
    if (it == graphs.end()) return nullptr;
    detail::GraphAccess::unsubscribe(graph, *this);
    if (it->second.capture) forget_recording(it->second.capture);
    std::shared_ptr<MarkerSet> set = std::move(it->second.set);
    graphs.erase(it);
    return set;
  }

  // --- lifecycle hooks ---------------------------------------------------------------------------

  void on_capture_begin(AcceleratorGraph& graph, Stream& stream) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!attach_all && attached.count(graph.id()) == 0) return;
      auto it = streams.find(stream.id());
      if (it != streams.end() && !it->second.stack.empty()) {
        const OpenRegion& open = it->second.stack.back();
        throw Error(ErrorCode::InvalidState,
                    fmt::format("capture_begin: region '{}' is open eagerly on stream {}: end it "
                                "before graph {} begins capturing on that stream",
                                open.recording->layout->regions[open.index].timing.path,
                                stream.id(), graph.id()),
                    graph.backend_name());
      }
    }
    // A graph captures again only after on_reset, which dropped its state; this is a guard.
    if (auto old = drop_graph(graph)) retire(old);

    auto set = create_set(graph.backend(), graph.backend_name(), graph.device(), graph.id());
    auto capture = std::make_shared<Recording>();
    capture->set = set;
    {
      // First in the graph, so the device picks the ring slot before any marker (Note [Marker
      // ring]), also on streams forked from this one later.
      std::lock_guard<std::mutex> calls(set->calls);
      set->markers->begin_sequence(stream.impl());
    }
    std::lock_guard<std::mutex> lock(mutex);
    GraphEntry& entry = graphs[graph.id()];
    entry = GraphEntry{&graph, set, capture, nullptr};
    sets.push_back(set);
    detail::GraphAccess::subscribe(graph, *this, &entry);
  }

  void on_capture_ending(AcceleratorGraph& graph, Stream& stream) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = graphs.find(graph.id());
    if (it == graphs.end() || !it->second.capture) return;
    GraphEntry& entry = it->second;
    if (entry.capture->open_regions > 0) {
      std::string open;
      for (const auto& [stream_id, s] : streams)
        for (const OpenRegion& r : s.stack)
          if (r.recording == entry.capture)
            open += fmt::format("{}'{}' on stream {}", open.empty() ? "" : ", ",
                                r.recording->layout->regions[r.index].timing.path, stream_id);
      throw Error(ErrorCode::InvalidState,
                  fmt::format("capture_end: region {} of graph {} is still open: end every region "
                              "before capture_end (the capture was aborted and the graph reset)",
                              open, graph.id()),
                  graph.backend_name());
    }
    {
      std::lock_guard<std::mutex> calls(entry.set->calls);
      entry.set->markers->end_sequence(stream.impl());
    }
    entry.layout = entry.capture->layout;
    forget_recording(entry.capture);
    entry.capture.reset();
  }

  // Replays reach only the profilers timing their graph (detail::ReplaySubscriber), with the
  // graph's entry: graphs this profiler does not time pay nothing for it.
  void before_replay(AcceleratorGraph& graph, Stream& stream, void* state) override {
    const GraphEntry& entry = *static_cast<const GraphEntry*>(state);
    std::shared_ptr<MarkerSet> set;
    uint64_t sequence = 0;
    bool has_regions = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!entry.layout) return;
      if (stream.is_capturing()) refuse_nested_replay(graph, stream);
      set = entry.set;
      sequence = set->next_sequence;
      has_regions = !entry.layout->regions.empty();
    }
    // Never overwrite a slot that was not read: collect the oldest replay first.
    if (has_regions) make_room(*set);
    std::lock_guard<std::mutex> calls(set->calls);
    set->markers->before_launch(graph.impl(), stream.impl(), sequence);
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
    std::shared_ptr<MarkerSet> set;
    std::shared_ptr<const Layout> layout;
    uint64_t sequence = 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!entry.layout) return;
      set = entry.set;
      layout = entry.layout;
      sequence = set->next_sequence;
    }
    {
      std::lock_guard<std::mutex> calls(set->calls);
      set->markers->after_launch(graph.impl(), stream.impl(), sequence);
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++set->next_sequence;
      // A capture without regions still launches its begin/end_sequence, but there is nothing
      // to read or report.
      if (!layout->regions.empty()) set->pending.push_back({sequence, sequence, layout});
    }
    if (options.delivery == Delivery::Immediate) collect_all(*set);
  }

  void on_reset(AcceleratorGraph& graph) override {
    try {
      if (auto set = drop_graph(graph)) retire(set);
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
      if (auto set = drop_graph(graph)) retire(set);
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          fmt::format("timing: collecting the reports of graph {} before its destruction failed: "
                      "{}",
                      graph.id(), e.what()));
    } catch (...) {
    }
  }

  // Closes the open eager tree of `entry`, if any, without a report (its regions never ended):
  // its begin_sequence and records are enqueued, so the sequence must still finish before the
  // marker storage goes (retire waits for the last launched sequence). Caller holds `mutex`.
  static void abandon_eager_tree(StreamEntry& entry, Stream& stream) {
    if (!entry.eager_tree) return;
    MarkerSet& set = *entry.eager_tree->set;
    const uint64_t sequence = set.next_sequence++;
    {
      std::lock_guard<std::mutex> calls(set.calls);
      set.markers->end_sequence(stream.impl());
      set.markers->after_eager_sequence(stream.impl(), sequence);
    }
    log(LogLevel::Warning,
        fmt::format("timing: region '{}' on stream {} never ended (its stream or its profiler "
                    "was destroyed first): it is not reported",
                    entry.eager_tree->layout->regions.front().timing.path, stream.id()));
    entry.eager_tree.reset();
    entry.stack.clear();
    entry.last_ended.reset();
  }

  // Retires `set`, logging instead of throwing (destructors and noexcept hooks).
  void retire_noexcept(const std::shared_ptr<MarkerSet>& set, const char* what) noexcept {
    try {
      retire(set);
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("timing: {} failed: {}", what, e.what()));
    } catch (...) {
      log(LogLevel::Warning, fmt::format("timing: {} failed with a non-standard exception", what));
    }
  }

  // The stream is going: deliver its eager reports and drop what is kept for it (its eager
  // marker set holds backend storage, and flush would walk it forever). An open eager tree is
  // closed without a report (its Region then reports the dead stream); regions open in a capture
  // stay counted, so capture_end says they never ended.
  void on_stream_destroy(Stream& stream) noexcept override {
    std::shared_ptr<MarkerSet> eager;
    try {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = streams.find(stream.id());
      if (it == streams.end()) return;
      abandon_eager_tree(it->second, stream);
      eager = std::move(it->second.eager_set);
      streams.erase(it);
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("timing: closing the eager regions of stream {} before "
                                         "it was destroyed failed: {}",
                                         stream.id(), e.what()));
    }
    if (eager) retire_noexcept(eager, "collecting the eager reports of a destroyed stream");
  }

  // For ~Profiler: closes every open eager tree and returns every eager marker set, to retire
  // after the last flush.
  std::vector<std::shared_ptr<MarkerSet>> close_eager_trees() noexcept {
    std::vector<std::shared_ptr<MarkerSet>> eager_sets;
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [id, entry] : streams) {
      if (entry.eager_tree) {
        // Alive: on_stream_destroy erases the entry of a destroyed stream.
        if (std::shared_ptr<detail::StreamState> state = entry.stream.lock()) {
          Stream stream = detail::StreamAccess::handle(std::move(state));
          try {
            abandon_eager_tree(entry, stream);
          } catch (const std::exception& e) {
            log(LogLevel::Warning,
                fmt::format("timing: closing an open eager region failed: {}", e.what()));
          }
        }
      }
      if (entry.eager_set) eager_sets.push_back(entry.eager_set);
    }
    return eager_sets;
  }

  // --- regions -----------------------------------------------------------------------------

  // The recording a region on `stream` goes into now: the capture of the graph capturing on it,
  // or (nullptr) the stream's eager tree. Caller holds `mutex`.
  // `operation` and `name` only make the error message (built on failure only).
  std::shared_ptr<Recording> capture_recording(Stream& stream, const char* operation,
                                               const std::string& name) {
    AcceleratorGraph* graph = stream.capturing_graph();
    if (graph == nullptr) return nullptr;
    auto it = graphs.find(graph->id());
    if (it != graphs.end() && it->second.capture) return it->second.capture;
    const std::string what = describe(operation, name);
    if (attach_all || attached.count(graph->id()) != 0)
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

  static std::string describe(const char* operation, const std::string& name) {
    return name.empty() ? std::string(operation) : fmt::format("{}('{}')", operation, name);
  }

  // Opens a region; returns its serial, which end() checks for a Region handle.
  uint64_t begin(Stream& stream, std::string name, Metadata metadata) {
    if (!stream)
      throw Error(ErrorCode::InvalidArgument, "begin: the stream is empty (moved from)");
    if (name.empty())
      throw Error(ErrorCode::InvalidArgument,
                  "begin: the region name is empty: give every region a name");
    std::unique_lock<std::mutex> lock(mutex);
    std::shared_ptr<Recording> recording = capture_recording(stream, "begin", name);
    StreamEntry& entry = streams[stream.id()];
    if (entry.stream.expired()) entry.stream = detail::StreamAccess::shared(stream, "begin");
    if (!entry.stack.empty() && (recording ? recording : entry.eager_tree) !=
                                    entry.stack.back().recording) {
      const OpenRegion& open = entry.stack.back();
      throw Error(ErrorCode::InvalidState,
                  fmt::format("{}: region '{}' on stream {} was opened {} and is still open: end "
                              "it before regions {} begin on this stream",
                              describe("begin", name),
                              open.recording->layout->regions[open.index].timing.path,
                              stream.id(), open.recording->eager ? "eagerly" : "in a capture",
                              recording ? "of the capture" : "outside the capture"),
                  stream.backend_name());
    }

    if (!recording) {
      if (!entry.eager_tree) {
        // The outermost eager region starts a new marker sequence on the stream's own set.
        if (!entry.eager_set) {
          lock.unlock();
          auto set = create_set(stream.backend(), stream.backend_name(), stream.device(), 0);
          lock.lock();
          StreamEntry& again = streams[stream.id()];
          if (!again.eager_set) {
            again.eager_set = set;
            sets.push_back(set);
          }
        }
        std::shared_ptr<MarkerSet> set = streams[stream.id()].eager_set;
        lock.unlock();
        make_room(*set);
        lock.lock();
        auto tree = std::make_shared<Recording>();
        tree->set = set;
        tree->eager = true;
        {
          std::lock_guard<std::mutex> calls(set->calls);
          set->markers->begin_sequence(stream.impl());
        }
        streams[stream.id()].eager_tree = tree;
      }
      recording = streams[stream.id()].eager_tree;
    }

    StreamEntry& s = streams[stream.id()];
    Layout& layout = *recording->layout;
    RegionDef def;
    def.timing.name = std::move(name);
    def.timing.depth = static_cast<int>(s.stack.size());
    if (!s.stack.empty()) {
      def.timing.parent = static_cast<int>(s.stack.back().index);
      def.timing.path = layout.regions[s.stack.back().index].timing.path + "/" + def.timing.name;
    } else {
      def.timing.path = def.timing.name;
    }
    def.timing.stream_id = stream.id();
    def.timing.metadata = std::move(metadata);

    const std::optional<EndedRegion>& last = s.last_ended;
    if (last && last->recording == recording && last->depth == s.stack.size() &&
        last->operation_count == stream.operation_count()) {
      def.begin_marker = last->end_marker;  // N+1: the sibling's end is this region's begin
    } else {
      def.begin_marker = layout.marker_count++;
      std::lock_guard<std::mutex> calls(recording->set->calls);
      recording->set->markers->record(stream.impl(), def.begin_marker);
    }
    s.last_ended.reset();
    layout.regions.push_back(std::move(def));
    const uint64_t serial = next_region_serial++;
    s.stack.push_back({recording, layout.regions.size() - 1, serial});
    ++recording->open_regions;
    return serial;
  }

  bool is_open(uint64_t stream_id, uint64_t serial) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(stream_id);
    return it != streams.end() && open_region_path(it->second, serial) != nullptr;
  }

  // The path of the open region `serial` on `entry`'s stream, or nullptr.
  static const std::string* open_region_path(const StreamEntry& entry, uint64_t serial) {
    for (const OpenRegion& r : entry.stack)
      if (r.serial == serial) return &r.recording->layout->regions[r.index].timing.path;
    return nullptr;
  }

  // Ends the innermost open region on `stream`; with a `serial` (a Region handle), only if that
  // region is the innermost one.
  void end(Stream& stream, uint64_t serial = 0) {
    if (!stream) throw Error(ErrorCode::InvalidArgument, "end: the stream is empty (moved from)");
    std::unique_lock<std::mutex> lock(mutex);
    auto it = streams.find(stream.id());
    if (serial != 0 && (it == streams.end() || !open_region_path(it->second, serial)))
      throw Error(ErrorCode::InvalidState,
                  fmt::format("Region::end: the region is no longer open on stream {}: the capture "
                              "it was recorded in was aborted or reset (or its stream closed "
                              "it); nothing to end",
                              stream.id()),
                  stream.backend_name());
    if (it == streams.end() || it->second.stack.empty())
      throw Error(ErrorCode::InvalidState,
                  fmt::format("end: no region is open on stream {}: call begin(stream, name) "
                              "first (every end() closes the innermost begin() on its stream)",
                              stream.id()),
                  stream.backend_name());
    StreamEntry& s = it->second;
    OpenRegion open = s.stack.back();
    if (serial != 0 && open.serial != serial)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("Region::end: region '{}' on stream {} is not the innermost open "
                              "region: '{}' began after it and is still open; end '{}' first "
                              "(regions end in the reverse order they began)",
                              *open_region_path(s, serial), stream.id(),
                              open.recording->layout->regions[open.index].timing.path,
                              open.recording->layout->regions[open.index].timing.path),
                  stream.backend_name());
    std::shared_ptr<Recording> recording = capture_recording(stream, "end", std::string());
    if ((recording ? recording : s.eager_tree) != open.recording)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("end: region '{}' on stream {} was opened {} but the stream is {} "
                              "now: end a region where it began (before capture_begin or before "
                              "capture_end)",
                              open.recording->layout->regions[open.index].timing.path,
                              stream.id(), open.recording->eager ? "eagerly" : "in a capture",
                              recording ? "capturing" : "not capturing"),
                  stream.backend_name());

    Layout& layout = *open.recording->layout;
    const uint32_t marker = layout.marker_count++;
    std::shared_ptr<MarkerSet> set = open.recording->set;
    {
      std::lock_guard<std::mutex> calls(set->calls);
      set->markers->record(stream.impl(), marker);
    }
    layout.regions[open.index].end_marker = marker;
    s.stack.pop_back();
    --open.recording->open_regions;
    s.last_ended = EndedRegion{open.recording, s.stack.size(), marker, stream.operation_count()};

    if (open.recording->eager && s.stack.empty()) {
      // The outermost eager region ended: close the sequence and queue it for collection.
      uint64_t sequence = set->next_sequence++;
      {
        std::lock_guard<std::mutex> calls(set->calls);
        set->markers->end_sequence(stream.impl());
        set->markers->after_eager_sequence(stream.impl(), sequence);
      }
      set->pending.push_back({sequence, sequence, open.recording->layout});
      s.eager_tree.reset();
      s.last_ended.reset();
      lock.unlock();
      if (options.delivery == Delivery::Immediate) collect_all(*set);
    }
  }
};

// --- Profiler ----------------------------------------------------------------------------------

Profiler::Profiler(ProfilerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {
  // Lifecycle events only: replays reach the profiler through the graphs it times.
  impl_->observer = add_graph_observer(*impl_, ObserverEvents::Lifecycle);
  if (impl_->options.background_collector)
    impl_->collector = std::thread([impl = impl_.get()] { impl->run_collector(); });
}

Profiler::~Profiler() {
  impl_->stop_collector();
  impl_->observer.remove();
  std::vector<std::shared_ptr<MarkerSet>> eager_sets = impl_->close_eager_trees();
  try {
    impl_->flush();
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("timing: flushing the profiler failed: {}", e.what()));
  } catch (...) {
    log(LogLevel::Warning, "timing: flushing the profiler failed");
  }
  for (const auto& set : eager_sets) impl_->retire_noexcept(set, "collecting eager reports");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [id, entry] : impl_->graphs) {
    if (entry.graph != nullptr) detail::GraphAccess::unsubscribe(*entry.graph, *impl_);
    // Its captured markers still write into the set's storage on every later replay: the graph
    // keeps the set until it drops that capture.
    if (entry.graph != nullptr && entry.set)
      detail::GraphAccess::keep_alive(*entry.graph, std::move(entry.set));
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
    profiler->end(stream, serial_);
  } catch (const Error&) {
    open_ = profiler->is_open(stream.id(), serial_);
    throw;
  }
  open_ = false;
}

Profiler::Region Profiler::region(Stream& stream, std::string name, Metadata metadata) {
  std::weak_ptr<detail::StreamState> state = detail::StreamAccess::shared(stream, "region");
  const uint64_t serial = impl_->begin(stream, std::move(name), std::move(metadata));
  return Region(impl_, std::move(state), serial);
}

void Profiler::begin(Stream& stream, std::string name, Metadata metadata) {
  impl_->begin(stream, std::move(name), std::move(metadata));
}

void Profiler::end(Stream& stream) { impl_->end(stream); }

void Profiler::add_sink(Sink sink) {
  if (!sink) throw Error(ErrorCode::InvalidArgument, "add_sink: the sink is empty");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto next = std::make_shared<std::vector<Sink>>(*impl_->sinks);
  next->push_back(std::move(sink));
  impl_->sinks = std::move(next);
}

void Profiler::flush() { impl_->flush(); }

std::vector<ReplayReport> Profiler::reports() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<ReplayReport> result;
  result.reserve(impl_->kept_reports.size());
  for (const KeptReport& kept : impl_->kept_reports) {
    result.push_back(kept.header);
    Impl::fill_regions(result.back(), *kept.layout, kept.times);
  }
  return result;
}

std::vector<RegionStats> Profiler::stats() const { return impl_->stats.stats(); }

uint64_t Profiler::delivered() const {
  return impl_->delivered.load(std::memory_order_relaxed);
}

}  // namespace accgraph::timing
