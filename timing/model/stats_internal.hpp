// Timing-internal constants of the statistics sketch (Note [Stats sketch] in stats.cpp) and the
// seams of the statistics thread (Note [Stats thread]); the functions marked ACCGRAPH_API are
// exported for the tests, the fuzzers and the benches only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "accgraph/export.hpp"

namespace accgraph::timing {

/// The most buckets one region's sketch can hold: every uint64 duration, 0 .. 2^64-1.
inline constexpr size_t kSketchMaxBuckets = 3776;

}  // namespace accgraph::timing

// In accgraph::detail, not accgraph::timing::detail: the public headers name detail:: from
// inside accgraph::timing and mean accgraph::detail.
namespace accgraph::detail {

/// What the statistics threads (StatsFold::Background) of this process did since it started,
/// summed over every accumulator: only ever grows.
struct StatsThreadCounters {
  uint64_t cpu_ns = 0;          ///< their CPU time (CLOCK_THREAD_CPUTIME_ID) while folding
  uint64_t thread_batches = 0;  ///< batches the threads folded
  uint64_t add_batches = 0;     ///< batches of Background accumulators folded off their thread:
                                ///< by add() (queue full, thread out) or by stats() (still queued)
  uint64_t inline_batches = 0;  ///< batches folded by StatsFold::Inline accumulators
};
ACCGRAPH_API StatsThreadCounters stats_thread_counters();

/// Test seam: every statistics thread calls `hook` (null: none) when woken with batches to
/// fold, before it takes the first one and outside every lock, so a test can hold it up.
ACCGRAPH_API void set_stats_thread_hook(void (*hook)());

}  // namespace accgraph::detail
