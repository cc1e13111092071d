// What one marker adds to a region's duration on a device, measured once per process (Note
// [Marker overhead] in marker_overhead.cpp; timing-internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace accgraph {
class Backend;
}

namespace accgraph::timing {

/// What marker transitions cost on a device (Note [Marker overhead]): ReportSource's
/// marker_overhead_ns and marker_back_to_back_ns. Zero: not measured, nothing subtracted.
struct MarkerCosts {
  uint64_t transition_ns = 0;    ///< a marker between work and work
  uint64_t back_to_back_ns = 0;  ///< a marker right after another, nothing enqueued between
};

/// The overhead measured for (backend, device, strategy) so far, if any: never touches the
/// device, so it may be called inside a capture.
std::optional<MarkerCosts> known_marker_overhead(const std::string& backend_name, int device,
                                                 const std::string& strategy);

/// The overhead of (backend, device, strategy): measured on first use with a capture of its own
/// on a stream of its own, then remembered. Call it only where no capture on this thread
/// records (a replay launch, an eager region). 0 when it cannot be measured (logged once).
MarkerCosts marker_overhead(Backend& backend, const std::string& backend_name, int device,
                            const std::string& strategy);

}  // namespace accgraph::timing
