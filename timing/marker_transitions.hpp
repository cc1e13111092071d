// The work a region encloses, from its stream's marker times (Note [Marker transitions] in
// report.cpp): one loop shared by ReplayReport and the statistics fold (timing-internal).
#pragma once

#include <cstdint>

namespace accgraph::timing::detail {

/// The sum, over the marker transitions from position `first` to `last` of a stream's markers
/// in record order (`ordered`: marker indices; `back_to_back[k]`: the transition into position k
/// is back to back), of what each transition read beyond its cost, never below 0. `times` are a
/// report's marker times by index; an unmeasurable time (UINT64_MAX) is skipped, its transition's
/// cost carried to the next measured marker. With both costs 0 it is what the markers read.
inline uint64_t work_ns(const uint64_t* times, const uint32_t* ordered, const uint8_t* back_to_back,
                        uint32_t first, uint32_t last, uint64_t transition_ns,
                        uint64_t back_to_back_ns) {
  constexpr uint64_t kUnmeasurable = UINT64_MAX;
  uint64_t previous = times[ordered[first]];
  uint64_t work = 0, cost = 0;
  for (uint32_t k = first + 1; k <= last; ++k) {
    cost += back_to_back[k] != 0 ? back_to_back_ns : transition_ns;
    const uint64_t t = times[ordered[k]];
    if (t == kUnmeasurable) continue;
    if (t > previous && t - previous > cost) work += t - previous - cost;
    previous = t;
    cost = 0;
  }
  return work;
}

}  // namespace accgraph::timing::detail
