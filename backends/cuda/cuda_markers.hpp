// Internal: the CUDA backend's two marker strategies, device timestamps (markers.cpp) and
// external events (external_events.cpp), and how the first is launched and placed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "accgraph/spi/backend.hpp"

namespace accgraph::detail::cuda {

/// How device-timestamp markers are launched and placed (each switchable from the environment).
struct DeviceMarkerModes {
  bool programmatic = false;  ///< Note [Programmatic markers] in kernels.cu (sm_90+)
  /// Captured markers moved off the critical path when the sequence ends (Note [Exact marker
  /// placement] in capture_helpers.cpp; sm_90+, the default there); false: chained.
  bool exact = false;
  /// With `exact`: the edge from a marker to the kernel after it. Programmatic (the default):
  /// that kernel launches once the marker has read the clock (exact). Launch completion: once
  /// the marker has begun (cheaper, but a short kernel may start before the marker reads).
  bool launch_completion_after = false;
};

std::unique_ptr<TimestampMarkers> make_device_timestamp_markers(int device, size_t ring_depth,
                                                                uint64_t resolution_ns,
                                                                DeviceMarkerModes modes,
                                                                const MarkerOptions& sizing);
std::unique_ptr<TimestampMarkers> make_external_event_markers(int device, size_t ring_depth,
                                                              uint64_t resolution_ns);

}  // namespace accgraph::detail::cuda
