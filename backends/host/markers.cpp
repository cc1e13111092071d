// Host timestamp markers: steady_clock nanoseconds written by the stream's worker into a ring of
// per-sequence slots (accgraph/steady_clock_markers.hpp; Note [Marker ring] in backend.hpp).
#include "accgraph/spi/steady_clock_markers.hpp"
#include "host_backend.hpp"

namespace accgraph::detail::host {

std::unique_ptr<TimestampMarkers> make_markers(size_t ring_depth) {
  return std::make_unique<SteadyClockMarkers>(
      kBackendName, kStrategySteadyClock, ring_depth,
      [](StreamImpl& stream, const char* name, std::function<void()> op) {
        as_host_stream(stream, name).queue()->enqueue({name, 0, std::move(op)});
      });
}

}  // namespace accgraph::detail::host
