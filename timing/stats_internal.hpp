// Timing-internal access to StatsAccumulator: the Profiler feeds every report of one captured
// layout through the same regions, so it caches their series indices instead of hashing each
// region's path on every replay (the hash lookups dominated report collection at 1000 regions).
#pragma once

#include <cstdint>
#include <vector>

#include "accgraph/report.hpp"

namespace accgraph::timing {

/// Series indices of one layout's regions, valid while `generation` matches the accumulator's.
struct SeriesCache {
  uint64_t generation = 0;
  std::vector<size_t> series;
};

struct StatsAccess {
  /// Same result as stats.add(report) for a report whose regions match the cache's layout.
  static void add(StatsAccumulator& stats, SeriesCache& cache, const ReplayReport& report);
};

}  // namespace accgraph::timing
