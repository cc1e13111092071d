// The timing layer: named, nestable regions recorded into captured graphs as backend timestamp
// markers (or timed eagerly outside a capture), and a ReplayReport after every replay.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"

namespace accgraph {
class AcceleratorGraph;
class ForeignGraph;
class Stream;
namespace detail {
struct StreamState;
}
}  // namespace accgraph

namespace accgraph::timing {

struct StatsRun;  // accgraph/exporters.hpp

/// When reports reach the sinks.
enum class Delivery {
  Lazy,       ///< when the ring is full, on flush(), in the destructor, or by the collector
  Immediate,  ///< right after each replay (waits for it: the blog's behaviour, serialises)
};

/// How many delivered reports Profiler::reports() keeps: the last `count` (0: none). Made from
/// an integer only: `keep_reports = true` does not compile (it would silently mean "1").
///
///   options.keep_reports = 0;                    // sinks and stats() only
///   options.keep_reports = 100;                  // the last 100
///   options.keep_reports = KeepReports::all();   // every report (memory grows without bound)
class KeepReports {
 public:
  template <typename Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>,
                                           int> = 0>
  constexpr KeepReports(Int count)  // NOLINT(google-explicit-constructor): an option's value
      : count_(is_negative(count) ? 0 : static_cast<uint64_t>(count)),
        negative_(is_negative(count)) {}
  template <typename Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
  KeepReports(Bool) = delete;  // a count, not a switch: 0 for none, all() for every report

  static constexpr KeepReports all() { return KeepReports(UINT64_MAX); }
  constexpr uint64_t count() const { return count_; }
  /// Made from a negative number (the Profiler refuses it: InvalidArgument).
  constexpr bool negative() const { return negative_; }

 private:
  template <typename Int>
  static constexpr bool is_negative(Int count) {
    if constexpr (std::is_signed_v<Int>)
      return count < 0;
    else
      return false;
  }
  uint64_t count_;
  bool negative_;
};

struct ProfilerOptions {
  Delivery delivery = Delivery::Lazy;
  /// Marker strategy (Capabilities::marker_strategies); empty = the backend's default.
  std::string marker_strategy;
  /// Replays in flight per graph with distinct marker storage; 0 = sized by marker_memory (or
  /// the backend's default depth when that is 0). Not 0: exactly this many, whatever the memory.
  size_t ring_depth = 0;
  /// Bytes of marker storage per timed graph. Once its capture ended, the graph's marker ring
  /// holds as many replays as fit (markers per replay x bytes per stamp: 8 on every in-tree
  /// backend; at least 1, at most the backend's maximum), so a replay loop that runs ahead of
  /// the device waits for it only when that many replays are unread (ring_waits() counts it).
  /// 1 MiB: 1,024 replays of a 100-region graph on cuda (its maximum), 2,048 of a graph of up
  /// to 64 markers on host. Backends that do not size their ring by it (the optional rule
  /// marker.budget: slot rings, cuda's external events, older plugins) keep their default
  /// depth. Note [Marker budget] in spi/backend.hpp. Each stream's eager ring holds what it
  /// holds at 2 KiB per eager tree (512 trees at 1 MiB; Note [Eager ring depth] in
  /// timing/engine/profiler_core.cpp); 0 gives eager rings the backend's default depth.
  size_t marker_memory = size_t{1} << 20;
  /// Start a background thread that delivers completed replays as they finish.
  bool background_collector = false;
  std::chrono::microseconds collector_period{200};
  /// How many of the last reports reports() returns (for the exporters); memory grows with it
  /// (one marker time per region boundary per report; the layouts are shared).
  KeepReports keep_reports = 1024;
  StatsMode stats_mode = StatsMode::Sketch;  ///< stats(): bounded sketch, or every sample
  /// Feed stats() from every report; false leaves stats() empty and saves its cost per report
  /// (sinks and reports() are unaffected).
  bool collect_stats = true;
  /// stats(): the first eager call of each region path in a row of its own
  /// (FirstEagerCall::Apart, RegionStats::first_call), not pooled with the calls after it.
  FirstEagerCall first_eager_call = FirstEagerCall::Pooled;
  /// Fold the statistics on a thread of their own (StatsFold::Background, one per profiler,
  /// started at the first full stage of replays): the collecting thread (the launching thread
  /// in flush() and when a ring is full) then only copies each report's marker times, a fifth
  /// or less of the statistics' cost per report at 1000 regions, and the fold runs beside it
  /// on another core. The results are the same either way. Costs a thread and a few batches
  /// of staged replays in flight (each at most 256 KiB); stats() waits for them. Turn it off
  /// on a single-core host (the thread would only take turns with the launching one) or where
  /// no thread may be started.
  bool stats_thread = true;
  /// Take what one marker costs off every region's duration (ReportSource::marker_overhead_ns,
  /// measured once per device and marker strategy when this profiler first times work there;
  /// RegionTiming::raw_duration_ns keeps what the markers read). Note [Marker overhead] in
  /// timing/engine/marker_overhead.cpp says how, and when to turn it off.
  bool subtract_marker_overhead = true;
  /// Sampled timing (Note [Sampled replays] in spi/untimed_replay.hpp): time 1 replay in
  /// `sample_every` of each graph; the others launch without markers and cost what an untimed
  /// graph costs. Which replays are timed is deterministic given `sample_seed`: one in each
  /// window of N consecutive replays, at an offset drawn from (seed, graph, window), so a
  /// workload with a period of N is not always caught at one phase. A report's replay_index
  /// counts every replay, timed or not; replay_counts() and the stats say how many were timed
  /// of how many run. A graph whose backend cannot launch it without markers (Level Zero,
  /// Vulkan, foreign graphs such as PyTorch's, older plugins), or that another profiler times
  /// too, has every replay timed (replay_counts(): sampled false). 1 (the default): every
  /// replay is timed and reported. 0 is InvalidArgument.
  uint64_t sample_every = 1;
  /// Or a budget: the share of each graph's device time its markers may cost on average (e.g.
  /// 0.005). A graph's first replays are all timed; from the marker cost its first 8 reports
  /// show (what they take off their outermost regions) the profiler picks the graph's N, the
  /// smallest that keeps the average within the budget. Until those reports are collected
  /// (Delivery::Lazy: a full ring, flush(), a background collector) every replay is timed.
  /// 0: off. Not with sample_every != 1 (InvalidArgument); outside [0, 1): InvalidArgument.
  double overhead = 0;
  uint64_t sample_seed = 0;
};

/// Whether replay `replay` (0, 1, ... of a capture) of graph `graph_id` is one that a profiler
/// with sample_every = `every` and sample_seed = `seed` times (Note [Sampled replays]): in each
/// window of `every` consecutive replays exactly one, at an offset drawn from (seed, graph,
/// window), so a workload whose period divides `every` is not caught at one phase. Always true
/// for `every` <= 1.
ACCGRAPH_API bool is_sampled_replay(uint64_t replay, uint64_t every, uint64_t seed,
                                    uint64_t graph_id) noexcept;

/// Calls a caller chose not to time, counted by reason (Profiler::note_untimed).
struct UntimedCalls {
  std::string reason;
  uint64_t count = 0;
  std::string first_name;  ///< the name given with the first such call
};

/// Receives each report. The reference is valid only during the call (the profiler reuses the
/// report's storage for the next replay of the same graph): copy what you keep.
using Sink = std::function<void(const ReplayReport&)>;

/// Times regions of captured graphs and of eager work.
///
///   accgraph::timing::Profiler prof;
///   prof.attach(graph);                       // or attach_all() for every graph
///   graph.capture_begin(stream);
///   { auto r = prof.region(stream, "layer0", {{"bytes", "4096"}});  enqueue work... }
///   graph.capture_end();
///   graph.replay();
///   prof.flush();                             // reports -> sinks, stats()
///
/// Inside a capture each region boundary records a timestamp marker into the graph. Outside a
/// capture the same region is timed eagerly on the stream (one report, graph_id 0, per
/// outermost region). No host synchronisation per region; at most one wait per replay, and
/// only when the graph's marker ring is full (the oldest replay is collected first, so no
/// report is lost; ring_waits() counts these waits). The ring holds as many replays as
/// ProfilerOptions::marker_memory allows.
///
/// Shared markers: a region boundary (begin or end) reuses the last marker recorded on its
/// stream when nothing was enqueued there since (siblings share end and begin, a parent and its
/// first child their begin, its last child and it their end; an empty region keeps two). On a
/// stream that may also take native work (wrapped, or native_handle() handed out) "nothing"
/// is proved by the backend's capture tail while capturing, else the boundary gets its own
/// marker: native work between two regions is never counted in either (Note [Boundary sharing]
/// in timing/engine/region_recorder.cpp).
///
/// Regions nest per stream (depth, parent, path "outer/inner"); a forked stream's regions
/// start at depth 0. The regions open on a stream belong to one thread: a region begun while
/// the stream's innermost open region was begun by another thread is an InvalidState error
/// (RegionOrder; give each thread a stream of its own), since threads sharing a stream cannot
/// keep their regions nested (Note [Regions out of order] in timing/engine/region_recorder.cpp). A region must end where it began: inside the same capture, or eagerly
/// before a capture begins on its stream; capture_end with a region still open is an
/// InvalidState error (the capture is aborted, the graph reset and reusable).
///
/// Lifecycle: a graph's pending reports are collected when it is reset, re-captured or
/// destroyed; a stream's eager reports, and everything kept for that stream, when the Stream is
/// destroyed. A timed graph cannot be replayed into another graph's capture (InvalidState:
/// its reports could not be attributed to executions); replay it outside the capture. A graph
/// that still holds a timed capture when the profiler is destroyed keeps that capture's marker
/// storage (a later replay still writes into it) until it is reset or destroyed; its later
/// replays are not reported. Sinks run on the thread that collects (replay, flush, the collector
/// thread), one report at a time, in replay order per graph; an exception from a sink is logged and
/// does not stop delivery. Thread-safe; destroy the profiler while no other thread is driving a
/// graph.
class ACCGRAPH_API Profiler {
  struct Impl;  // private: the units behind the facade (timing/facade/profiler.cpp)

 public:
  explicit Profiler(ProfilerOptions options = {});
  /// Flushes and detaches; never throws.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Times `graph` from its next capture_begin on (InvalidState while it is capturing).
  void attach(AcceleratorGraph& graph);
  /// Times a graph its owner captures and launches (foreign_graph.hpp), from its next
  /// capture_begin on.
  void attach(ForeignGraph& graph);
  /// Times every graph whose capture begins from now on.
  void attach_all();
  /// Stops timing new captures; pending reports are still delivered by flush().
  void detach();

  /// RAII region: end() in the destructor (never throws; logs). end() ends this region, which
  /// must be the innermost open one on its stream: ending an outer region while an inner one is
  /// open is an InvalidState error (RegionOrder) naming both, and the outer region is dropped:
  /// not reported, while the regions inside it still are (under its parent). It may be ended
  /// on another thread than the one that began it. It refers to the profiler and to the stream's queue, not to the Profiler or Stream
  /// objects: ending it after either was destroyed is an InvalidState error that says which.
  class ACCGRAPH_API Region {
   public:
    Region(Region&& other) noexcept;
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    Region& operator=(Region&&) = delete;
    ~Region();
    void end();
    /// Whether end() still has a region to end: false once it ended, was dropped for ending out
    /// of order, or after an end() that found it can never end (its profiler or stream
    /// destroyed, its capture aborted); true after an end() refused because the stream now
    /// captures where the region began eagerly (it can be ended later).
    bool is_open() const noexcept { return open_; }

   private:
    friend class Profiler;
    Region(std::weak_ptr<Impl> profiler, std::weak_ptr<detail::StreamState> stream, uint64_t serial)
        : profiler_(std::move(profiler)),
          stream_(std::move(stream)),
          serial_(serial),
          open_(true) {}
    std::weak_ptr<Impl> profiler_;
    std::weak_ptr<detail::StreamState> stream_;
    uint64_t serial_ = 0;  // identifies this region among the open ones of its stream
    bool open_ = false;
  };

  /// Opens a region on `stream` (see begin()) that ends with the returned handle.
  [[nodiscard]] Region region(Stream& stream, std::string name, Metadata metadata = {},
                              std::string lane = {});
  /// Opens a region on `stream`. While the stream captures into a graph the profiler is not
  /// attached to, an InvalidState error says to attach before capture_begin. `lane` names a
  /// trace track of its own for the region (e.g. "attention", "comm"), within its stream's
  /// process in the trace exporters; empty: the stream's own track. Statistics ignore it.
  void begin(Stream& stream, std::string name, Metadata metadata = {}, std::string lane = {});
  /// Ends the innermost open region on `stream`.
  void end(Stream& stream);

  void add_sink(Sink sink);
  /// Waits for every pending replay and eager region and delivers its report (all graphs):
  /// those pending when it is called; what a sink launches meanwhile (a replay, an eager
  /// region) is delivered by the next flush.
  void flush();

  /// Copies of the last ProfilerOptions::keep_reports reports delivered, oldest first.
  std::vector<ReplayReport> reports() const;
  std::vector<RegionStats> stats() const;
  /// Reports delivered so far (counted even when not kept).
  uint64_t delivered() const;

  /// Counts a call that a caller (e.g. a framework integration) saw but did not time, under
  /// `reason` ("called outside a capture", ...); `name` names it (kept for the first call of
  /// each reason). Thread-safe and cheap: a lock and a lookup by reason; no report is made.
  void note_untimed(std::string name, std::string reason);
  /// The untimed calls noted so far, one entry per reason in first-seen order.
  std::vector<UntimedCalls> untimed() const;
  /// stats() as write_stats_table writes it, followed by one line per untimed reason:
  /// "untimed: <count> call(s) not timed: <reason> (first: <first_name>)", and, when a launch
  /// waited for a full marker ring, "ring waits: <count> launch(es) waited ...", and with
  /// sampling, per graph "sampled: graph <id>: <timed> of <run> replay(s) timed (1 in <N>)".
  std::string stats_table() const;

  /// Launches that waited because their marker ring was full (all of its replays unread: the
  /// oldest was collected first), and how long they waited in all: the host time timing took
  /// from a loop that runs ahead of the device. A graph replay counts as a launch, and so does an
  /// eager region tree (its ring makes room for the next one as it closes). 0 while the rings
  /// fit the loop (ProfilerOptions::marker_memory, ring_depth).
  uint64_t ring_waits() const;
  std::chrono::nanoseconds ring_wait_time() const;

  /// Every timed graph's replays, run and timed (Note [Sampled replays]), by graph id.
  std::vector<GraphReplays> replay_counts() const;
  /// The options it was made with.
  const ProfilerOptions& options() const noexcept;

  /// What a statistics file says about this profiler's run (accgraph/exporters.hpp): its
  /// graphs' replays (replay_counts()), the devices of its kept reports (one ReportSource per
  /// backend, device and marker strategy; none with keep_reports 0) and its sampling options.
  /// The caller adds the graph labels and the metadata only it knows.
  StatsRun stats_run() const;

 private:
  // Shared so that a Region that outlives its Profiler can tell (it holds a weak reference).
  std::shared_ptr<Impl> impl_;
};

}  // namespace accgraph::timing
