// ReportStore: where collected reports go: the sinks, the last N kept reports, the statistics
// and the delivered count (timing-internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "accgraph/timing.hpp"

namespace accgraph::timing {

/// Lock: `mutex_`, a leaf; sinks run outside it (they may call reports(), stats(), flush()).
/// deliver() is called by one collecting thread at a time (Collector), so sinks see the reports
/// of each marker ring in order.
class ReportStore {
 public:
  /// Keeps the last `keep` reports; `collect_stats` false: stats() stays empty; `fold`: where
  /// the statistics are folded (ProfilerOptions::stats_thread).
  ReportStore(uint64_t keep, StatsMode mode, bool collect_stats = true,
              StatsFold fold = StatsFold::Inline,
              FirstEagerCall first_eager_call = FirstEagerCall::Pooled)
      : keep_(keep), collect_stats_(collect_stats), stats_(mode, fold, first_eager_call) {}

  void add_sink(Sink sink);
  /// Feeds the statistics, calls every sink (logging what they throw) and keeps the report if
  /// the last `keep` are kept: the report is moved, not copied, into that store.
  void deliver(ReplayReport&& report);

  /// Copies of the kept reports, oldest first (copied outside the lock).
  std::vector<ReplayReport> reports() const;
  std::vector<RegionStats> stats() const { return stats_.stats(); }
  uint64_t delivered() const { return delivered_.load(std::memory_order_relaxed); }

  /// Profiler::note_untimed and untimed(): under their own leaf lock, so noting a call never
  /// waits for a delivery.
  void note_untimed(std::string name, std::string reason);
  std::vector<UntimedCalls> untimed() const;
  /// One line per reason, as Profiler::stats_table ends: "untimed: <count> call(s) not timed:
  /// <reason> (first: <first_name>)\n" (the text made valid UTF-8, Note [Exported text]).
  std::string untimed_lines() const;

 private:
  const uint64_t keep_;
  const bool collect_stats_;
  StatsAccumulator stats_;  // thread-safe on its own
  std::atomic<uint64_t> delivered_{0};
  mutable std::mutex mutex_;
  // Copy-on-write so a delivery takes a snapshot without copying every std::function.
  std::shared_ptr<const std::vector<Sink>> sinks_ = std::make_shared<const std::vector<Sink>>();
  std::deque<std::shared_ptr<const ReplayReport>> kept_;
  // A few reasons at most (one per kind of call an integration skips): a vector searched in
  // order is the small map, and keeps first-seen order.
  mutable std::mutex untimed_mutex_;
  std::vector<UntimedCalls> untimed_;
};

}  // namespace accgraph::timing
