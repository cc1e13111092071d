// Timing-internal constants of the statistics sketch (Note [Stats sketch] in stats.cpp).
#pragma once

#include <cstddef>

namespace accgraph::timing {

/// The most buckets one region's sketch can hold: every uint64 duration, 0 .. 2^64-1.
inline constexpr size_t kSketchMaxBuckets = 3776;

}  // namespace accgraph::timing
