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

/// The overhead measured for (backend, device, strategy) so far, if any: never touches the
/// device, so it may be called inside a capture.
std::optional<uint64_t> known_marker_overhead(const std::string& backend_name, int device,
                                              const std::string& strategy);

/// The overhead of (backend, device, strategy): measured on first use with a capture of its own
/// on a stream of its own, then remembered. Call it only where no capture on this thread
/// records (a replay launch, an eager region). 0 when it cannot be measured (logged once).
uint64_t marker_overhead(Backend& backend, const std::string& backend_name, int device,
                         const std::string& strategy);

}  // namespace accgraph::timing
