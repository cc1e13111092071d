// Toy timestamp markers (strategy "steady_clock_sync"): marker operations read steady_clock on
// the stream's (calling) thread and write into a ring of per-sequence slots. The ring and the
// TimestampMarkers around it are accgraph's SteadyClockMarkers
// (accgraph/spi/steady_clock_markers.hpp, following Note [Marker ring] in
// accgraph/spi/backend.hpp); the toy only says how an operation reaches its stream. The ring slot
// is picked when the sequence *runs*, not when it is enqueued: a replay runs the recorded
// begin_sequence operation, which takes the next number, so K replays need no host work per region,
// as a device-side counter would give.
#include <accgraph/spi/steady_clock_markers.hpp>

#include "toy.hpp"

namespace toy {

std::unique_ptr<accgraph::TimestampMarkers> make_markers(size_t ring_depth) {
  return std::make_unique<accgraph::SteadyClockMarkers>(
      kBackendName, kMarkerStrategy, ring_depth,
      [](accgraph::StreamImpl& stream, const char* name, std::function<void()> op) {
        as_toy_stream(stream, name).queue().submit({name, std::move(op)});
      });
}

}  // namespace toy
