// Marker overhead (marker_overhead.hpp).
#include "marker_overhead.hpp"

#include <algorithm>
#include <chrono>
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
// H100 that was +1.1 us per region (median) against the span of the kernels the region encloses,
// as CUPTI sees them (bench/README.md, 'Targets and figures the code cites'). So the first time a
// profiler times work on a device (its first eager region there, or a timed graph's first launch:
// never inside a capture, where a CUDA capture forbids allocations and launches on other streams),
// this unit captures, on a stream of its own and with the backend's own TimestampMarkers and the
// profiler's strategy, kAroundWork regions each around a delay of kWork (Stream::delay, where the
// backend has timed_delay) and kBackToBack empty ones (two markers back to back), replays it
// kReplays times, and keeps, once per (backend, device, strategy) per process:
// - the smallest (region - kWork) around a delay: what a region adds to the work it encloses,
//   the transitions between markers and work included (with CUDA's programmatic markers the
//   marker after a kernel is already resident, so two markers back to back read 0.48 us on the
//   H100 while a region around a kernel reads ~1.1 us more than the kernel; with exact
//   placement, Note [Exact marker placement] in backends/cuda/capture_helpers.cpp, what is left
//   is the launch gap between two kernels, which the marker sits in);
// - unless that exceeds kTrustedFactor times the back-to-back interval, or the backend has no
//   timed delay: a delay lasts *at least* its duration (the rule), and one that overshoots by
//   much (a sleeping host thread) cannot tell the markers' cost from its own; then the smallest
//   back-to-back interval, the cost of the markers alone;
// - and the smallest back-to-back interval itself: what a transition between two markers with
//   nothing enqueued between them costs (an empty region's two markers), kept apart because it
//   is not the same cost (with exact placement, Note [Exact marker placement], such a pair is
//   two markers in a row, with no launch gap of work between them).
// Every report of that device carries it (ReportSource::marker_overhead_ns). It is the cost of one
// marker transition, and a region loses it once for every transition it spans (Note [Marker
// transitions] in report.cpp): a region around work with no region inside it loses it from its
// edges, half after its start marker's time and half before its end marker's
// (RegionTiming::start_ns/end_ns), so the edges move toward the work and regions that share a
// marker stay in order; a parent also loses the transitions between its children, so parent =
// sum(children) + self. The raw marker times stay in the report (raw_*_ns, marker_times()).
// A region no longer than the overhead is reported as measured, so nothing is ever negative.
// Why the smallest and not the median: a region around work W reads W plus what this
// calibration's regions read above their delay, so with the smallest a reported duration falls
// short of the work it encloses only by the jitter of that cost below its smallest measure (a
// nanosecond or two was seen on a loaded host; marker.read's guarantee, that the markers are at
// least W apart, is about raw_duration_ns, which is what the tests of that rule check); the
// jitter above the smallest stays in the durations (the H100 figures are in bench/README.md).
// A backend whose graphs cannot hold markers (or any failure) leaves the overhead 0 on that device,
// logged once; ProfilerOptions::subtract_marker_overhead false skips all of this.
namespace {

constexpr uint32_t kAroundWork = 16;  // intervals around a delay of kWork each
constexpr uint32_t kBackToBack = 16;  // intervals between markers back to back
constexpr uint32_t kMarkers = 1 + kAroundWork + kBackToBack;
constexpr std::chrono::nanoseconds kWork{2000};  // short: the cost stays a few us
constexpr uint64_t kTrustedFactor = 4;           // see the Note: overshooting delays
constexpr uint64_t kReplays = 4;                 // the first is a warm-up (caches)

using Key = std::tuple<std::string, int, std::string>;

struct Cache {
  std::mutex mutex;
  std::map<Key, MarkerCosts> measured;
};

Cache& cache() {
  static Cache instance;
  return instance;
}

// The smallest interval of each kind over the replays after the first (UINT64_MAX: none
// measured): around a delay, minus the delay; between two markers back to back.
struct Smallest {
  uint64_t around_work = UINT64_MAX;
  uint64_t back_to_back = UINT64_MAX;
};

void capture_markers(StreamImpl& stream, TimestampMarkers& markers, bool timed_delay) {
  markers.begin_sequence(stream);
  markers.record(stream, 0);
  for (uint32_t m = 1; m < kMarkers; ++m) {
    if (timed_delay && m <= kAroundWork) stream.delay(kWork);
    markers.record(stream, m);
  }
  markers.end_sequence(stream);
}

Smallest replay_and_read(GraphImplInterface& graph, StreamImpl& stream, TimestampMarkers& markers,
                         bool timed_delay) {
  std::vector<uint64_t> times(kMarkers);
  Smallest smallest;
  for (uint64_t s = 0; s < kReplays; ++s) {
    markers.before_launch(graph, stream, s);
    graph.replay(stream);
    markers.after_launch(graph, stream, s);
    markers.wait(s);
    markers.read(s, times.data(), times.size());
    for (uint32_t m = 0; s > 0 && m + 1 < kMarkers; ++m) {
      const uint64_t a = times[m], b = times[m + 1];
      if (a == TimestampMarkers::kUnmeasurable || b == TimestampMarkers::kUnmeasurable || b < a)
        continue;
      const bool around = timed_delay && m < kAroundWork;
      uint64_t& into = around ? smallest.around_work : smallest.back_to_back;
      const uint64_t work = around ? static_cast<uint64_t>(kWork.count()) : 0;
      into = std::min(into, b - a > work ? b - a - work : 0);
    }
  }
  return smallest;
}

MarkerCosts measure(Backend& backend, int device, const std::string& strategy) {
  MarkerOptions options;
  options.strategy = strategy;
  const bool timed_delay = backend.capabilities(device).timed_delay;
  // Destroyed in this order: the graph (holding the markers' storage), the markers, the stream.
  std::unique_ptr<StreamImpl> stream = backend.create_stream(device);
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(device, options);
  std::unique_ptr<GraphImplInterface> graph = backend.create_graph(GraphArgs{});
  if (!stream || !markers || !graph)
    throw Error(ErrorCode::BackendError, "the backend returned no stream, markers or graph");
  // Note [Capture-mode rules] (backends/cuda/cuda_backend.hpp): in Global mode this capture
  // would refuse every other thread's allocations, queries and waits while it runs (and be
  // invalidated by them): it captures only its own stream, so Relaxed where the backend has it.
  const std::vector<CaptureMode> modes = backend.capabilities(device).capture_modes;
  const CaptureMode mode =
      std::find(modes.begin(), modes.end(), CaptureMode::Relaxed) != modes.end()
          ? CaptureMode::Relaxed
          : CaptureMode::Default;
  graph->capture_begin(*stream, PoolId{}, mode);
  try {
    capture_markers(*stream, *markers, timed_delay);
  } catch (...) {
    graph->reset();
    throw;
  }
  graph->capture_end();
  graph->instantiate();
  const Smallest smallest = replay_and_read(*graph, *stream, *markers, timed_delay);
  stream->synchronize();
  graph.reset();
  if (smallest.back_to_back == UINT64_MAX) return MarkerCosts{};
  MarkerCosts costs{smallest.back_to_back, smallest.back_to_back};
  if (smallest.around_work != UINT64_MAX &&
      smallest.around_work <= kTrustedFactor * std::max<uint64_t>(smallest.back_to_back, 1))
    costs.transition_ns = smallest.around_work;
  return costs;
}

}  // namespace

std::optional<MarkerCosts> known_marker_overhead(const std::string& backend_name, int device,
                                                 const std::string& strategy) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.measured.find(Key{backend_name, device, strategy});
  if (it == c.measured.end()) return std::nullopt;
  return it->second;
}

MarkerCosts marker_overhead(Backend& backend, const std::string& backend_name, int device,
                            const std::string& strategy) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);  // one measurement per key, even when raced
  const Key key{backend_name, device, strategy};
  if (auto it = c.measured.find(key); it != c.measured.end()) return it->second;
  MarkerCosts overhead;
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
