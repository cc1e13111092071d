// Async timestamp markers: steady_clock read by the task that runs the marker (accgraph's
// SteadyClockMarkers, Note [Marker ring] in accgraph/spi/backend.hpp). In a capture the marker
// tasks are nodes of their lanes: a region timed on a forked stream measures that branch.
#include <accgraph/spi/steady_clock_markers.hpp>

#include "async.hpp"

namespace async_backend {

std::unique_ptr<accgraph::TimestampMarkers> make_markers(size_t ring_depth) {
  return std::make_unique<accgraph::SteadyClockMarkers>(
      kBackendName, kMarkerStrategy, ring_depth,
      [](accgraph::StreamImpl& stream, const char* name, std::function<void()> op) {
        as_async_stream(stream, name).queue()->enqueue({name, std::move(op)});
      });
}

}  // namespace async_backend
