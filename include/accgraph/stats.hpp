// Per-region statistics over replay reports: RegionStats, GraphReplays, the StatsMode and
// StatsFold of an accumulator, and StatsAccumulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "accgraph/export.hpp"

namespace accgraph::timing {

// Declared, not included: only add() names it, and report.hpp keeps including this header for
// one minor version (see the end of report.hpp), so this one must not need it first.
class ReplayReport;

/// Statistics of one region path over all reports seen. count, unmeasurable, min_ns and max_ns
/// are exact in both modes. In StatsMode::Exact, mean_ns is the sum of the samples (as doubles,
/// in ascending order) over count, and p50_ns/p95_ns are exact nearest-rank percentiles (the
/// smallest sample with at least p% of the samples <= it). In StatsMode::Sketch, mean_ns is the
/// exact 128-bit integer sum over count, rounded to double; p50_ns/p95_ns are within 1/128
/// (0.79%) relative error of the exact nearest-rank values, exact below 128 ns, and always
/// inside [min_ns, max_ns].
///
/// The self_ fields are the same statistics, with the same exactness and error bound, over
/// the region's self times (RegionTiming::self_ns: its duration minus what its direct children
/// cover), from the reports in which it was self_measurable() (self_count <= count).
struct RegionStats {
  std::string path;
  int depth = 0;
  /// The context of the samples (Note [Stats contexts] in timing/model/stats.cpp): the graph whose
  /// replays they are (ReplayReport::graph_id), 0 for eager region trees.
  uint64_t graph_id = 0;
  /// Eager only, with FirstEagerCall::Apart: the first eager call of this path (warm-up,
  /// compilation, library start-up), kept out of the row of the calls after it.
  bool first_call = false;
  uint64_t count = 0;         ///< measured samples (the other fields are over these)
  /// Graph contexts, from Profiler::stats(): the graph's replays run and, of them, timed
  /// (Profiler::replay_counts(); with sampling timed < run: the samples are the timed replays'
  /// regions). 0 for eager rows and where the statistics come from elsewhere.
  uint64_t replays_run = 0;
  uint64_t replays_timed = 0;
  uint64_t unmeasurable = 0;  ///< reports in which the region was not measurable
  double min_ns = 0, mean_ns = 0, p50_ns = 0, p95_ns = 0, max_ns = 0;
  double p05_ns = 0;        ///< 5th percentile duration (as p50_ns): with p95_ns, the spread
  uint64_t self_count = 0;  ///< measured self times (the self_ fields below are over these)
  double self_min_ns = 0, self_mean_ns = 0, self_p50_ns = 0, self_p95_ns = 0, self_max_ns = 0;
};

/// Note [Sampled replays]: one graph's replays as one profiler counted them (over every capture
/// of it the profiler timed).
struct GraphReplays {
  uint64_t graph_id = 0;
  uint64_t run = 0;           ///< replays launched, timed or not
  uint64_t timed = 0;         ///< of them, launched with markers (each gives one report)
  uint64_t sample_every = 1;  ///< the N in effect (ProfilerOptions::sample_every, or chosen)
  /// False when the last replay the schedule left untimed was timed all the same (the backend
  /// cannot launch the graph without markers, or another profiler times it too, or a foreign
  /// graph's owner has not allowed untimed launches yet: Note [Untimed foreign replays]).
  bool sampled = true;
};

/// How StatsAccumulator keeps the durations of each region.
enum class StatsMode {
  /// Bounded memory: exact count/min/max/sum and a log-bucketed histogram for p50/p95 (at most
  /// 3776 bucket counts, 30 KiB, per region and as many for its self times, whatever the number
  /// of reports; a region whose durations stay within a factor of 2^k of each other uses about
  /// 64k+1 of them).
  Sketch,
  /// Every sample (16 bytes per region per report with its self time, without bound): exact
  /// percentiles.
  Exact,
};

/// Whether StatsAccumulator keeps the first eager call of each region path apart (Note [Stats
/// contexts] in timing/model/stats.cpp).
enum class FirstEagerCall {
  /// With the eager calls after it (one eager row per path).
  Pooled,
  /// In a row of its own (RegionStats::first_call): the calls after it are not mixed with the
  /// warm-up, compilation or library start-up the first one pays.
  Apart,
};

/// Where StatsAccumulator folds the replays it staged into its statistics (Note [Stats thread]
/// in timing/model/stats.cpp). The results are the same, bit for bit, either way.
enum class StatsFold {
  /// On the thread that calls add(), when a layout's stage is full (every 16th replay of it).
  Inline,
  /// On a thread the accumulator owns (started at the first full stage, joined by the
  /// destructor): add() only stages and hands full stages over. At most a few wait for the
  /// thread; past that, add() folds them itself. If the thread cannot start or fails (out of
  /// memory), a Warning is logged and the accumulator folds inline from then on.
  Background,
};

/// Accumulates per-region statistics from reports (keyed by context and region path, in
/// first-seen order: the replays of each graph and the eager region trees apart, Note [Stats
/// contexts] in timing/model/stats.cpp).
/// See RegionStats for which fields are exact in which StatsMode. Thread-safe; stats() copies
/// the state under the lock and computes outside it. The replays of a layout seen before are
/// staged (their marker times: at most 16 replays, within 256 KiB per layout or one replay's
/// times if more, in both modes) and folded region by region in batches (Note [Stats fold] in
/// timing/model/stats.cpp), inline or on a thread of its own (StatsFold); stats(), sketch_buckets()
/// and clear() first wait for the batch being folded and fold what is handed over or staged,
/// so they always cover every report added.
///
///   StatsAccumulator sketch;                    // bounded memory, p50/p95 within 0.79%
///   StatsAccumulator exact(StatsMode::Exact);   // keeps every sample
///   StatsAccumulator background(StatsMode::Sketch, StatsFold::Background);  // add() stages only
class ACCGRAPH_API StatsAccumulator {
 public:
  explicit StatsAccumulator(StatsMode mode = StatsMode::Sketch);
  StatsAccumulator(StatsMode mode, StatsFold fold);
  StatsAccumulator(StatsMode mode, StatsFold fold, FirstEagerCall first_eager_call);
  ~StatsAccumulator();
  StatsAccumulator(const StatsAccumulator&) = delete;
  StatsAccumulator& operator=(const StatsAccumulator&) = delete;

  StatsMode mode() const;
  /// Adds the measurable regions of `report`. Reports that share a layout (the replays of one
  /// capture) find their regions' series by that layout, without hashing every path each time.
  void add(const ReplayReport& report);
  std::vector<RegionStats> stats() const;
  void clear();
  /// Memory diagnostics: the buckets each region's duration sketch holds now, in first-seen
  /// order (all 0 in StatsMode::Exact; at most 3776 each; its self-time sketch holds as many
  /// again at most).
  std::vector<size_t> sketch_buckets() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace accgraph::timing
