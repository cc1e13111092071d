// Host timestamp markers: steady_clock nanoseconds written by the stream's worker into a ring of
// per-sequence slots (accgraph/steady_clock_markers.hpp; Note [Marker ring] in backend.hpp).
#include "accgraph/spi/steady_clock_markers.hpp"
#include "host_backend.hpp"

namespace accgraph::detail::host {

// A graph's set sizes its ring by options.memory_budget at its first launch (Note [Marker
// budget] in backend.hpp).
std::unique_ptr<TimestampMarkers> make_markers(const MarkerOptions& options) {
  return std::make_unique<SteadyClockMarkers>(
      kBackendName, kStrategySteadyClock,
      options.resolve_ring_depth(kDefaultRingDepth, kMaxRingDepth, kBackendName),
      [](StreamImpl& stream, const char* name, std::function<void()> op) {
        as_host_stream(stream, name).queue()->enqueue({name, 0, std::move(op), true});
      },
      options, kMaxRingDepth);
}

}  // namespace accgraph::detail::host
