// Marker overhead (marker_overhead.hpp).
#include "marker_overhead.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"

namespace accgraph::timing {

// Note [Marker overhead]: a region is the time between its two markers' timestamps, and that
// includes the markers' own cost: after the start marker took its time, the rest of its work and
// the launch of what follows it; before the end marker takes its time, its own launch. On an
// H100 that was +1.1 to +2 us per region against the span of the kernels the region encloses, as
// CUPTI sees them (issue 21). The part that does not depend on the work is what an empty region
// reads: two markers back to back. So the first time a profiler times work on a device (its
// first eager region there, or a timed graph's first launch: never inside a capture, where a
// CUDA capture forbids allocations and launches on other streams), this unit captures a graph of
// kMarkers markers back to back on a stream of its own, with the backend's own TimestampMarkers
// and the strategy the profiler uses, replays it kReplays times and keeps the *smallest*
// interval between neighbouring markers, once per (backend, device, strategy) per process.
// Every report of that device carries it (ReportSource::marker_overhead_ns) and a region longer
// than it loses it: half after its start marker's time and half before its end marker's
// (RegionTiming::start_ns/end_ns), so the edges move toward the work and regions that share a
// marker stay in order; the raw marker times stay in the report (raw_*_ns, marker_times()).
// A region no longer than the overhead is reported as measured, so nothing is ever negative.
// Why the smallest interval and not the median: a region around work W reads W plus at least
// one full marker interval (its start marker's tail, the gaps, its end marker's head), so
// subtracting the smallest interval seen keeps "a region is at least as long as the work it
// encloses" (marker.read's guarantee, which the tests check) true; it leaves the interval's
// jitter and the gap between the work and the end marker in the duration (the H100 figures are
// in bench/README.md). Detached CUDA markers (ACCGRAPH_CUDA_DETACHED_MARKERS=1, Note [Detached
// markers]) run beside the work rather than before it, so their regions do not contain a
// marker's cost; subtracting it would make them too short: profile them with
// ProfilerOptions::subtract_marker_overhead false. A backend whose graphs cannot hold markers
// (or any failure) leaves the overhead 0 on that device, logged once.
namespace {

constexpr uint32_t kMarkers = 33;  // 32 intervals per replay
constexpr uint64_t kReplays = 4;   // the first is a warm-up (its launch builds caches)

using Key = std::tuple<std::string, int, std::string>;

struct Cache {
  std::mutex mutex;
  std::map<Key, uint64_t> measured;
};

Cache& cache() {
  static Cache instance;
  return instance;
}

uint64_t measure(Backend& backend, int device, const std::string& strategy) {
  MarkerOptions options;
  options.strategy = strategy;
  // Destroyed in this order: the graph (holding the markers' storage), the markers, the stream.
  std::unique_ptr<StreamImpl> stream = backend.create_stream(device);
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(device, options);
  std::unique_ptr<GraphImplInterface> graph = backend.create_graph(GraphArgs{});
  if (!stream || !markers || !graph)
    throw Error(ErrorCode::BackendError, "the backend returned no stream, markers or graph");
  graph->capture_begin(*stream, PoolId{}, CaptureMode::Default);
  try {
    markers->begin_sequence(*stream);
    for (uint32_t m = 0; m < kMarkers; ++m) markers->record(*stream, m);
    markers->end_sequence(*stream);
  } catch (...) {
    graph->reset();
    throw;
  }
  graph->capture_end();
  graph->instantiate();
  std::vector<uint64_t> times(kMarkers);
  uint64_t smallest = UINT64_MAX;
  for (uint64_t s = 0; s < kReplays; ++s) {
    markers->before_launch(*graph, *stream, s);
    graph->replay(*stream);
    markers->after_launch(*graph, *stream, s);
    markers->wait(s);
    markers->read(s, times.data(), times.size());
    if (s == 0) continue;
    for (uint32_t m = 0; m + 1 < kMarkers; ++m) {
      const uint64_t a = times[m], b = times[m + 1];
      if (a != TimestampMarkers::kUnmeasurable && b != TimestampMarkers::kUnmeasurable && b >= a)
        smallest = std::min(smallest, b - a);
    }
  }
  stream->synchronize();
  graph.reset();
  return smallest == UINT64_MAX ? 0 : smallest;
}

}  // namespace

std::optional<uint64_t> known_marker_overhead(const std::string& backend_name, int device,
                                              const std::string& strategy) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.measured.find(Key{backend_name, device, strategy});
  if (it == c.measured.end()) return std::nullopt;
  return it->second;
}

uint64_t marker_overhead(Backend& backend, const std::string& backend_name, int device,
                         const std::string& strategy) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);  // one measurement per key, even when raced
  const Key key{backend_name, device, strategy};
  if (auto it = c.measured.find(key); it != c.measured.end()) return it->second;
  uint64_t overhead = 0;
  try {
    overhead = measure(backend, device, strategy);
  } catch (const std::exception& e) {
    log(LogLevel::Warning,
        fmt::format("timing: measuring the marker overhead of backend '{}' device {} failed: {}; "
                    "its regions include their markers' own time (marker_overhead_ns 0): fix "
                    "the cause, or set ProfilerOptions::subtract_marker_overhead false to skip "
                    "the measurement",
                    backend_name, device, e.what()));
  }
  c.measured.emplace(key, overhead);
  return overhead;
}

}  // namespace accgraph::timing
