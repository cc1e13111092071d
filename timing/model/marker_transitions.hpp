// The work a region encloses, from its stream's marker times (Note [Marker transitions] in
// report.cpp): one loop shared by ReplayReport and the statistics fold (timing-internal).
#pragma once

#include <cstdint>

#include "accgraph/types.hpp"  // kUnmeasurable

namespace accgraph::timing::detail {

/// The sum, over the marker transitions from position `first` to `last` of a stream's markers
/// in record order (`ordered`: marker indices; `back_to_back[k]`: the transition into position k
/// is back to back), of what each transition read beyond its cost, never below 0. A back-to-back
/// transition holds no work (nothing was enqueued between its markers: that is what makes it
/// back to back), so it adds 0. `times` are a report's marker times by index; an unmeasurable
/// time (kUnmeasurable) is skipped, its transition carried to the next measured marker (a back-to-
/// back one then costs `back_to_back_ns`). Only for a source that subtracts marker costs: with
/// none, a duration is what the region's two markers read (the callers' case).
inline uint64_t work_ns(const uint64_t* times, const uint32_t* ordered, const uint8_t* back_to_back,
                        uint32_t first, uint32_t last, uint64_t transition_ns,
                        uint64_t back_to_back_ns) {
  uint64_t previous = times[ordered[first]];
  uint64_t work = 0, cost = 0;
  bool only_back_to_back = true;  // the interval since `previous` holds no work
  for (uint32_t k = first + 1; k <= last; ++k) {
    const bool empty = back_to_back[k] != 0;
    cost += empty ? back_to_back_ns : transition_ns;
    only_back_to_back = only_back_to_back && empty;
    const uint64_t t = times[ordered[k]];
    if (t == kUnmeasurable) continue;
    if (!only_back_to_back && t > previous && t - previous > cost) work += t - previous - cost;
    previous = t;
    cost = 0;
    only_back_to_back = true;
  }
  return work;
}

}  // namespace accgraph::timing::detail
