// Timing-internal access to StatsAccumulator: the Profiler feeds every report of one captured
// layout through the same regions, so it caches their series indices instead of hashing each
// region's path on every replay (the hash lookups dominated report collection at 1000 regions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/report.hpp"

namespace accgraph::timing {

/// Series indices of one layout's regions, valid while `generation` matches the accumulator's.
struct SeriesCache {
  uint64_t generation = 0;
  std::vector<size_t> series;
};

/// The most buckets one region's sketch can hold: every uint64 duration, 0 .. 2^64-1
/// (Note [Stats sketch] in stats.cpp).
inline constexpr size_t kSketchMaxBuckets = 3776;

struct StatsAccess {
  /// Same result as stats.add(report) for a report whose regions match the cache's layout.
  static void add(StatsAccumulator& stats, SeriesCache& cache, const ReplayReport& report);
  /// For the tests: the buckets each series' sketch holds now, in first-seen order (all 0 in
  /// StatsMode::Exact).
  ACCGRAPH_API static std::vector<size_t> sketch_buckets(const StatsAccumulator& stats);
};

}  // namespace accgraph::timing
