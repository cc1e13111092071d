// Conformance cases for timestamp markers (Note [Marker ring]), through timing::Profiler and
// directly through the backend's TimestampMarkers: known durations, nesting, shared boundaries,
// the ring across streams and branches, completion, and MarkerOptions.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "conformance.hpp"

namespace accgraph::conformance {
namespace {

using namespace std::chrono_literals;
using timing::Profiler;
using timing::ProfilerOptions;

const TimedRegion* find_region(const TimedReplay& report, const std::string& path) {
  for (const TimedRegion& region : report.regions)
    if (region.path == path) return &region;
  return nullptr;
}

uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since)
          .count());
}

/// Work for a region to bracket: a short delay where the backend has one (so regions have a
/// length), then a fill.
void stream_fill_known(Stream& stream, Buffer& data) {
  if (capabilities().timed_delay) stream.delay(200us);
  stream.fill(data, 1);
}

/// Captures into `graph`, attached to `profiler`, one region "fill" around stream_fill_known.
void capture_fill_region(Profiler& profiler, AcceleratorGraph& graph, Stream& stream,
                         Buffer& data) {
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto region = profiler.region(stream, "fill");
    stream_fill_known(stream, data);
  }
  graph.capture_end();
}

/// Checks that the regions named `path` of consecutive reports do not overlap and move forward:
/// replay k began after replay k-1 ended (graph.serial), and each read its own slot.
void check_replays_apart(const std::vector<TimedReplay>& replays, const std::string& path) {
  const TimedRegion* previous = nullptr;
  for (const TimedReplay& report : replays) {
    const TimedRegion* region = find_region(report, path);
    REQUIRE(region != nullptr);
    if (!region->measurable) {
      previous = nullptr;
      continue;
    }
    INFO("replay " << report.replay_index << ": region '" << path << "' from " << region->start_ns
                   << " to " << region->end_ns << " ns");
    CHECK(region->end_ns >= region->start_ns);
    if (previous != nullptr) {
      INFO("the previous replay's region: " << previous->start_ns << " to " << previous->end_ns
                                            << " ns");
      CHECK(region->start_ns >= previous->end_ns);
    }
    previous = region;
  }
}

ACCGRAPH_CONFORMANCE_CASE("timing: a region around work of known duration measures it",
                          "marker.read") {
  constexpr auto kWork = std::chrono::milliseconds(5);
  if (!capabilities().timed_delay && !capabilities().host_calls) {
    skip("lacks timed_delay and host_calls: no work of known duration to time");
    return;
  }
  Stream stream = make_stream();
  Profiler profiler;
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto region = profiler.region(stream, "work");
    enqueue_known_duration(stream, kWork);
  }
  graph.capture_end();
  constexpr int kReplays = 5;
  const auto first_replay = std::chrono::steady_clock::now();
  for (int i = 0; i < kReplays; ++i) graph.replay();
  profiler.flush();
  const uint64_t span_ns = elapsed_ns(first_replay);

  const std::vector<TimedReplay>& reports = collected.replays();
  REQUIRE(reports.size() == kReplays);
  const uint64_t work_ns = std::chrono::nanoseconds(kWork).count();
  uint64_t total_ns = 0;
  uint64_t slack_ns = 0;
  int unmeasurable = 0;
  for (const TimedReplay& report : reports) {
    REQUIRE(report.regions.size() == 1);
    const TimedRegion& region = report.regions[0];
    CHECK(report.backend == backend());
    // A backend that cannot place a marker (a timestamp counter that may have wrapped more than
    // once, e.g. Level Zero with few valid bits) reports the region unmeasurable, with zero
    // times; what it must never do is report a short duration.
    if (!region.measurable) {
      CHECK(region.duration_ns == 0);
      ++unmeasurable;
      continue;
    }
    INFO("replay " << report.replay_index << ": " << region.duration_ns << " ns for " << work_ns
                   << " ns of work (resolution " << report.resolution_ns << " ns)");
    CHECK(region.end_ns >= region.start_ns);
    // Lower bound, every replay: the work lasts at least kWork and both markers bracket it;
    // each stamp may be quantised by one clock step.
    CHECK(region.duration_ns + 2 * report.resolution_ns >= work_ns);
    total_ns += region.duration_ns;
    slack_ns += 2 * report.resolution_ns;
  }
  // Upper bound, relative to a baseline taken in the same run: the replays run one after the
  // other on one stream, so their regions do not overlap, and all of them lie between the first
  // replay() call and the return of flush(), a span the host clock measures around them. A
  // region that measured something else (the work twice, another replay's markers, a clock in
  // other units) makes the sum exceed that span; load lengthens the span as much as the regions.
  INFO("the regions sum to " << total_ns << " ns; the replays took " << span_ns << " ns");
  CHECK(total_ns <= span_ns + slack_ns);
  if (unmeasurable > 0)
    MESSAGE(backend() << ": " << unmeasurable << " of " << kReplays << " regions of " << work_ns
                      << " ns were reported unmeasurable");
}

// design.md "What a duration means": a marker is placed exactly: it never reads later than the
// start of the work it precedes, nor earlier than the end of the work it follows (on cuda, Note
// [Exact marker placement] in backends/cuda/capture_helpers.cpp moves markers off the critical
// path and must keep this). Back-to-back regions around work of known duration share their
// markers, so each shared marker is the end of one work and the start of the next: every
// region's markers must still enclose its own work. And the accounting rule: the parent around
// them is the sum of its children plus its self time, exactly.
ACCGRAPH_CONFORMANCE_CASE("timing: shared boundaries are exact and a parent sums its children",
                          "marker.read") {
  constexpr auto kWork = std::chrono::microseconds(300);
  constexpr int kChildren = 6;
  if (!capabilities().timed_delay && !capabilities().host_calls) {
    skip("lacks timed_delay and host_calls: no work of known duration to time");
    return;
  }
  Stream stream = make_stream();
  Profiler profiler;
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto parent = profiler.region(stream, "parent");
    for (int i = 0; i < kChildren; ++i) {
      auto child = profiler.region(stream, "child" + std::to_string(i));
      enqueue_known_duration(stream, kWork);
    }
  }
  graph.capture_end();
  constexpr int kReplays = 4;
  for (int i = 0; i < kReplays; ++i) graph.replay();
  profiler.flush();
  const std::vector<TimedReplay>& reports = collected.replays();
  REQUIRE(reports.size() == kReplays);
  const uint64_t work_ns = std::chrono::nanoseconds(kWork).count();
  for (const TimedReplay& report : reports) {
    REQUIRE(report.regions.size() == kChildren + 1);
    const TimedRegion& parent = report.regions[0];
    if (!parent.measurable) continue;  // see "a region around work of known duration"
    uint64_t children = 0;
    bool all_measured = true;
    for (int i = 1; i <= kChildren; ++i) {
      const TimedRegion& child = report.regions[static_cast<size_t>(i)];
      INFO("replay " << report.replay_index << ", " << child.path << ": markers " << child.start_ns
                     << " to " << child.end_ns << " (resolution " << report.resolution_ns
                     << " ns)");
      if (!child.measurable) {
        all_measured = false;
        continue;
      }
      if (i > 1)  // one shared marker: the end of one work is the start of the next
        CHECK(child.start_ns == report.regions[static_cast<size_t>(i - 1)].end_ns);
      CHECK(child.duration_ns + 2 * report.resolution_ns >= work_ns);
      children += child.work_ns;
    }
    if (!all_measured) continue;
    REQUIRE(parent.self_measurable);
    INFO("parent " << parent.work_ns << " ns, children " << children << " ns, self "
                   << parent.self_ns << " ns");
    CHECK(parent.work_ns == children + parent.self_ns);
  }
}

ACCGRAPH_CONFORMANCE_CASE("timing: nested regions report depth, parent, path and containment",
                          "marker.read") {
  Stream stream = make_stream();
  Buffer data = Buffer::allocate(stream, 4096);
  Profiler profiler;
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto outer = profiler.region(stream, "outer");
    {
      auto inner = profiler.region(stream, "inner");
      stream.fill(data, 1);
      {
        auto innermost = profiler.region(stream, "innermost");
        stream.fill(data, 2);
      }
    }
    stream.fill(data, 3);
  }
  graph.capture_end();
  graph.replay();
  profiler.flush();
  REQUIRE(collected.replays().size() == 1);
  const TimedReplay& report = collected.replays()[0];
  REQUIRE(report.regions.size() == 3);
  const TimedRegion& outer = report.regions[0];
  const TimedRegion& inner = report.regions[1];
  const TimedRegion& innermost = report.regions[2];
  CHECK(outer.path == "outer");
  CHECK(outer.depth == 0);
  CHECK(outer.parent == -1);
  CHECK(inner.path == "outer/inner");
  CHECK(inner.depth == 1);
  CHECK(inner.parent == 0);
  CHECK(innermost.path == "outer/inner/innermost");
  CHECK(innermost.depth == 2);
  CHECK(innermost.parent == 1);
  // Markers that ran in order on one stream have non-decreasing times.
  CHECK(outer.start_ns <= inner.start_ns);
  CHECK(inner.start_ns <= innermost.start_ns);
  CHECK(innermost.end_ns <= inner.end_ns);
  CHECK(inner.end_ns <= outer.end_ns);
  CHECK(report.graph_id == graph.id());
  CHECK(report.replay_index == 0);
}

ACCGRAPH_CONFORMANCE_CASE("timing: metadata reaches the report", "marker.read") {
  Stream stream = make_stream();
  Buffer data = Buffer::allocate(stream, 4096);
  Profiler profiler;
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto region = profiler.region(stream, "fill", {{"bytes", "4096"}, {"value", "7"}});
    stream.fill(data, 7);
  }
  graph.capture_end();
  graph.replay();
  profiler.flush();
  REQUIRE(collected.replays().size() == 1);
  REQUIRE(collected.replays()[0].regions.size() == 1);
  timing::Metadata expected{{"bytes", "4096"}, {"value", "7"}};
  CHECK(collected.replays()[0].regions[0].metadata == expected);
}

ACCGRAPH_CONFORMANCE_CASE("timing: N adjacent regions share boundaries (N+1 markers)",
                          "marker.read") {
  Stream stream = make_stream();
  Buffer data = Buffer::allocate(stream, 4096);
  Profiler profiler;
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  profiler.attach(graph);
  graph.capture_begin(stream);
  for (const char* name : {"a", "b", "c"}) {
    auto region = profiler.region(stream, name);
    stream.fill(data, 1);
  }
  graph.capture_end();
  for (int i = 0; i < 3; ++i) graph.replay();
  profiler.flush();
  REQUIRE(collected.replays().size() == 3);
  for (const TimedReplay& report : collected.replays()) {
    REQUIRE(report.regions.size() == 3);
    // A shared boundary marker gives identical times; a separate end and begin marker would be
    // two clock reads, which differ on a fine clock (the host's 1 ns steady_clock).
    CHECK(report.regions[0].end_ns == report.regions[1].start_ns);
    CHECK(report.regions[1].end_ns == report.regions[2].start_ns);
  }
}

ACCGRAPH_CONFORMANCE_CASE("marker ring: 40 replays on two streams through a ring of 2",
                          "marker.slot") {
  ProfilerOptions options;
  options.ring_depth = 2;
  Profiler profiler(options);
  ReportCollector collected(profiler);
  Stream first = make_stream();
  Stream second = make_stream();
  Buffer data = Buffer::allocate(first, 4096);
  AcceleratorGraph graph(backend());
  capture_fill_region(profiler, graph, first, data);
  // Back to back, alternating streams, never synchronising: up to two sequences in flight.
  constexpr uint64_t kReplays = 40;
  for (uint64_t i = 0; i < kReplays; ++i) graph.replay(i % 2 == 0 ? first : second);
  profiler.flush();
  const std::vector<TimedReplay>& reports = collected.replays();
  REQUIRE(reports.size() == kReplays);
  for (uint64_t i = 0; i < kReplays; ++i) CHECK(reports[i].replay_index == i);
  check_replays_apart(reports, "fill");
  first.synchronize();
  second.synchronize();
}

ACCGRAPH_CONFORMANCE_CASE("marker ring: records on a forked branch land in their own replay",
                          "marker.branches") {
  if (!capabilities().multi_stream_capture) {
    skip("lacks multi_stream_capture: a capture has no parallel branches");
    return;
  }
  ProfilerOptions options;
  options.ring_depth = 2;
  Profiler profiler(options);
  ReportCollector collected(profiler);
  Stream origin = make_stream();
  Stream forked = make_stream();
  Buffer a = Buffer::allocate(origin, 4096);
  Buffer b = Buffer::allocate(origin, 4096);
  AcceleratorGraph graph(backend());
  profiler.attach(graph);
  graph.capture_begin(origin);
  {
    auto outer = profiler.region(origin, "outer");
    origin.fill(a, 1);
    forked.wait(origin);
    {
      auto branch = profiler.region(forked, "branch");
      stream_fill_known(forked, b);
    }
    origin.fill(a, 2);
    origin.wait(forked);
  }
  graph.capture_end();
  constexpr uint64_t kReplays = 8;
  for (uint64_t i = 0; i < kReplays; ++i) graph.replay();
  profiler.flush();
  const std::vector<TimedReplay>& reports = collected.replays();
  REQUIRE(reports.size() == kReplays);
  for (const TimedReplay& report : reports) {
    const TimedRegion* outer = find_region(report, "outer");
    const TimedRegion* branch = find_region(report, "branch");
    REQUIRE(outer != nullptr);
    REQUIRE(branch != nullptr);
    if (!outer->measurable || !branch->measurable) continue;
    INFO("replay " << report.replay_index << ": outer " << outer->start_ns << " to "
                   << outer->end_ns << " ns, branch " << branch->start_ns << " to "
                   << branch->end_ns << " ns");
    CHECK(outer->start_ns <= branch->start_ns);
    CHECK(branch->start_ns <= branch->end_ns);
    CHECK(branch->end_ns <= outer->end_ns);
  }
  check_replays_apart(reports, "outer");
}

ACCGRAPH_CONFORMANCE_CASE("timing: regions outside a capture are timed eagerly", "marker.read") {
  constexpr auto kWork = std::chrono::milliseconds(2);
  Stream stream = make_stream();
  Profiler profiler;
  ReportCollector collected(profiler);
  bool have_work = false;
  {
    auto outer = profiler.region(stream, "eager");
    {
      auto inner = profiler.region(stream, "work", {{"kind", "delay"}});
      have_work = enqueue_known_duration(stream, kWork);
    }
  }
  profiler.flush();
  REQUIRE(collected.replays().size() == 1);
  const TimedReplay& report = collected.replays()[0];
  CHECK(report.graph_id == 0);
  CHECK(report.backend == backend());
  REQUIRE(report.regions.size() == 2);
  const TimedRegion* work = find_region(report, "eager/work");
  REQUIRE(work != nullptr);
  CHECK(work->depth == 1);
  CHECK(work->stream_id == stream.id());
  if (!work->measurable || !report.regions[0].measurable) {
    // Unmeasurable (see the known-duration case): no times, never short ones.
    CHECK(work->duration_ns == 0);
    MESSAGE(backend() << ": the eager regions were reported unmeasurable");
    return;
  }
  if (have_work)
    CHECK(work->duration_ns + 2 * report.resolution_ns >=
          static_cast<uint64_t>(std::chrono::nanoseconds(kWork).count()));
  CHECK(report.regions[0].start_ns <= work->start_ns);
  CHECK(work->end_ns <= report.regions[0].end_ns);
}

// --- the SPI directly: what the timing layer relies on ------------------------------------------

/// Polls is_complete(sequence) for up to 10 s without synchronising anything.
bool becomes_complete(TimestampMarkers& markers, uint64_t sequence) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!markers.is_complete(sequence)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

ACCGRAPH_CONFORMANCE_CASE("markers: is_complete follows end_sequence, without synchronize",
                          "marker.complete") {
  Backend& spi = backend_object();
  std::unique_ptr<StreamImpl> stream = spi.create_stream(0);
  REQUIRE(stream != nullptr);
  std::unique_ptr<TimestampMarkers> markers = spi.create_markers(0, MarkerOptions{});
  REQUIRE(markers != nullptr);
  CHECK_FALSE(markers->is_complete(0));  // nothing launched
  markers->begin_sequence(*stream);
  markers->record(*stream, 0);
  // Let the head and the first marker run (on an asynchronous backend they may not have yet):
  // end_sequence is not even enqueued, so sequence 0 cannot be complete, whatever has run. A
  // backend that reports completion when a sequence begins or at its first marker fails here.
  stream->synchronize();
  CHECK_FALSE(markers->is_complete(0));
  markers->record(*stream, 1);
  markers->end_sequence(*stream);
  markers->after_eager_sequence(*stream, 0);
  CHECK_MESSAGE(becomes_complete(*markers, 0),
                "sequence 0 was not complete 10 s after its end_sequence was enqueued (nobody "
                "called synchronize())");
  CHECK_FALSE(markers->is_complete(1));  // not launched
  markers->wait(0);
  uint64_t times[2] = {0, 0};
  markers->read(0, times, 2);
  if (times[0] != TimestampMarkers::kUnmeasurable && times[1] != TimestampMarkers::kUnmeasurable)
    CHECK(times[0] <= times[1]);

  markers->begin_sequence(*stream);
  markers->record(*stream, 0);
  markers->record(*stream, 1);
  stream->synchronize();  // as above: every marker of sequence 1 has run, its tail has not
  CHECK_FALSE(markers->is_complete(1));
  markers->end_sequence(*stream);
  markers->after_eager_sequence(*stream, 1);
  CHECK(becomes_complete(*markers, 1));
  CHECK(markers->is_complete(0));  // stays complete
  stream->synchronize();
}

ACCGRAPH_CONFORMANCE_CASE("markers: create_markers honours MarkerOptions", "marker.options") {
  Backend& spi = backend_object();
  const Capabilities& caps = capabilities();
  REQUIRE_FALSE(caps.marker_strategies.empty());
  std::unique_ptr<TimestampMarkers> defaults = spi.create_markers(0, MarkerOptions{});
  REQUIRE(defaults != nullptr);
  CHECK(defaults->strategy() == caps.marker_strategies.front());
  CHECK(defaults->ring_depth() == caps.marker_ring_depth);
  CHECK(defaults->resolution_ns() > 0);
  for (const std::string& strategy : caps.marker_strategies) {
    INFO("strategy " << strategy << ", ring depth 3");
    std::unique_ptr<TimestampMarkers> markers = spi.create_markers(0, MarkerOptions{strategy, 3});
    REQUIRE(markers != nullptr);
    CHECK(markers->strategy() == strategy);
    CHECK(markers->ring_depth() == 3);
  }
  CHECK_ACCGRAPH_ERROR(spi.create_markers(0, MarkerOptions{"no-such-strategy", 0}),
                       ErrorCode::Unsupported, "no-such-strategy");
  CHECK_ACCGRAPH_ERROR(spi.create_markers(0, MarkerOptions{"", size_t(1) << 40}),
                       ErrorCode::InvalidArgument, "ring depth");
}

ACCGRAPH_CONFORMANCE_CASE("marker ring: a memory budget never loses a replay; ring_depth wins",
                          "marker.budget") {
  Backend& spi = backend_object();
  const Capabilities& caps = capabilities();
  // A set starts at the depth asked for (the default without one), whatever the budget: it may
  // size itself only once a captured sequence ended.
  for (const std::string& strategy : caps.marker_strategies) {
    INFO("strategy " << strategy);
    CHECK(spi.create_markers(0, MarkerOptions{strategy, 0, size_t{1} << 20})->ring_depth() ==
          caps.marker_ring_depth);
    CHECK(spi.create_markers(0, MarkerOptions{strategy, 3, size_t{1} << 20})->ring_depth() == 3);
  }
  // Replays back to back through a ring sized by a budget (generous, then 1 byte: at least one
  // slot), and through an explicit depth of 2 with a generous budget: every report, in order,
  // each from its own slot. A full ring makes the launch collect the oldest replay first and
  // collection is lazy, so exactly kReplays - depth launches wait on a ring of `depth`.
  const uint64_t kReplays = 2 * caps.marker_ring_depth + 8;
  struct Sizing {
    size_t ring_depth;
    size_t marker_memory;
  };
  for (const Sizing sizing :
       {Sizing{0, size_t{1} << 20}, Sizing{0, 1}, Sizing{2, size_t{1} << 20}}) {
    INFO("ring_depth " << sizing.ring_depth << ", marker_memory " << sizing.marker_memory);
    ProfilerOptions options;
    options.ring_depth = sizing.ring_depth;
    options.marker_memory = sizing.marker_memory;
    Profiler profiler(options);
    ReportCollector collected(profiler);
    Stream stream = make_stream();
    Buffer data = Buffer::allocate(stream, 4096);
    AcceleratorGraph graph(backend());
    capture_fill_region(profiler, graph, stream, data);
    for (uint64_t i = 0; i < kReplays; ++i) graph.replay();
    const uint64_t waits = profiler.ring_waits();
    profiler.flush();
    const std::vector<TimedReplay>& reports = collected.replays();
    REQUIRE(reports.size() == kReplays);
    for (uint64_t i = 0; i < kReplays; ++i) CHECK(reports[i].replay_index == i);
    check_replays_apart(reports, "fill");
    CHECK(waits < kReplays);  // the first launch always finds room
    if (sizing.ring_depth != 0) CHECK(waits == kReplays - sizing.ring_depth);
    stream.synchronize();
  }
}

ACCGRAPH_CONFORMANCE_CASE("clocks: sample_clock reads the marker clock between two host reads",
                          "clock.sample") {
  Backend& spi = backend_object();
  ClockSampling* sampling = clock_sampling(spi);
  if (sampling == nullptr) {
    skip("does not implement ClockSampling (optional: its traces are merged uncalibrated)");
    return;
  }
  constexpr size_t kSamples = 50;
  std::vector<timing::ClockSample> samples(kSamples);
  sampling->sample_clock(0, samples.data(), samples.size());
  for (size_t i = 0; i < kSamples; ++i) {
    INFO("sample " << i);
    CHECK(samples[i].host_before_ns <= samples[i].host_after_ns);
    CHECK(samples[i].device_ns != 0);
    if (i > 0) CHECK(samples[i].device_ns >= samples[i - 1].device_ns);
  }
  // The offset must put the markers' own times on the host clock: an eager region's markers,
  // moved by it, fall between host clock reads taken before and after the region (within the
  // offset's uncertainty and a marker step). A backend that samples another clock than its
  // markers' is off by that clock difference (seconds to years).
  const timing::DeviceClockOffset clock = timing::calibrate_clock(backend(), 0, kSamples);
  CHECK(clock.backend == backend());
  // Bounded from both sides: with the offset's error e (estimated minus true), a marker's time
  // moved by the offset is its true host time minus e, so every try gives e >= before - start
  // and e <= after - end. A wrong offset is caught by whichever side has the shorter gap
  // (before the region began, or after it ended), so several short tries bound e closely from
  // below and from above even on a loaded machine, where one try's gaps may be long.
  Stream stream = make_stream();
  Profiler profiler;
  ReportCollector collected(profiler);
  int64_t lowest_error = INT64_MIN, highest_error = INT64_MAX;
  uint64_t resolution = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint64_t before = timing::realtime_ns();
    {
      auto region = profiler.region(stream, "clocked");
      enqueue_known_duration(stream, 100us);
    }
    profiler.flush();
    const uint64_t after = timing::realtime_ns();
    REQUIRE(collected.replays().size() == static_cast<size_t>(attempt) + 1);
    const TimedReplay& report = collected.replays().back();
    REQUIRE(report.regions.size() == 1);
    const TimedRegion& region = report.regions[0];
    if (!region.measurable) {
      MESSAGE(backend() << ": the eager region was reported unmeasurable; the offset is "
                           "unchecked");
      return;
    }
    resolution = report.resolution_ns;
    const int64_t start_host = static_cast<int64_t>(region.start_ns) - clock.offset_ns;
    const int64_t end_host = static_cast<int64_t>(region.end_ns) - clock.offset_ns;
    lowest_error = std::max(lowest_error, static_cast<int64_t>(before) - start_host);
    highest_error = std::min(highest_error, static_cast<int64_t>(after) - end_host);
  }
  const int64_t slack = static_cast<int64_t>(clock.uncertainty_ns + 2 * resolution);
  INFO("offset " << clock.offset_ns << " ns +- " << clock.uncertainty_ns
                 << " ns; the host reads "
                    "bound its error to ["
                 << lowest_error << ", " << highest_error << "] ns");
  CHECK_MESSAGE(lowest_error <= slack,
                "the offset is too large: markers moved by it begin before the host read taken "
                "before the region");
  CHECK_MESSAGE(highest_error >= -slack,
                "the offset is too small: markers moved by it end after the host read taken "
                "after the region");
}

}  // namespace
}  // namespace accgraph::conformance

// --- sampled replays (Note [Sampled replays] in spi/untimed_replay.hpp) -------------------------

namespace accgraph::conformance {
namespace {

/// Whether the backend's graphs implement UntimedReplay (asked of a new graph of its own).
bool graphs_replay_untimed() {
  std::unique_ptr<GraphImplInterface> graph = backend_object().create_graph(GraphArgs{});
  return graph != nullptr && untimed_replay_of(*graph) != nullptr;
}

ACCGRAPH_CONFORMANCE_CASE("sampled replays: replay_untimed runs none of the markers",
                          "untimed.same-work") {
  Backend& spi = backend_object();
  std::unique_ptr<GraphImplInterface> graph = spi.create_graph(GraphArgs{});
  REQUIRE(graph != nullptr);
  UntimedReplay* untimed = untimed_replay_of(*graph);
  if (untimed == nullptr) {
    skip("its graphs do not implement UntimedReplay: sampled timing times every replay");
    return;
  }
  std::unique_ptr<StreamImpl> stream = spi.create_stream(0);
  std::unique_ptr<TimestampMarkers> markers = spi.create_markers(0, MarkerOptions{});
  std::unique_ptr<BufferImpl> buffer = spi.allocate(0, 64, MemoryKind::Device);
  REQUIRE(stream != nullptr);
  REQUIRE(markers != nullptr);
  REQUIRE(buffer != nullptr);
  graph->capture_begin(*stream, PoolId{}, CaptureMode::Default);
  markers->begin_sequence(*stream);
  markers->record(*stream, 0);
  stream->fill(buffer->data(), 7, 64);
  markers->record(*stream, 1);
  markers->end_sequence(*stream);
  graph->capture_end();
  graph->instantiate();
  REQUIRE(untimed->can_replay_untimed(*stream));
  for (int i = 0; i < 3; ++i) untimed->replay_untimed(*stream);
  stream->synchronize();
  CHECK_MESSAGE(!markers->is_complete(0),
                "three untimed replays completed marker sequence 0: replay_untimed ran the "
                "markers");
  // The next timed replay is sequence 0, in the slot the timing layer reads.
  markers->before_launch(*graph, *stream, 0);
  graph->replay(*stream);
  markers->after_launch(*graph, *stream, 0);
  REQUIRE(becomes_complete(*markers, 0));
  CHECK_FALSE(markers->is_complete(1));
  uint64_t times[2] = {0, 0};
  markers->read(0, times, 2);
  if (times[0] != TimestampMarkers::kUnmeasurable && times[1] != TimestampMarkers::kUnmeasurable)
    CHECK(times[0] <= times[1]);
  untimed->replay_untimed(*stream);  // after a timed one: still no sequence 1
  stream->synchronize();
  CHECK_FALSE(markers->is_complete(1));
}

ACCGRAPH_CONFORMANCE_CASE("sampled replays: exactly the scheduled replays are timed, all run",
                          "untimed.same-work") {
  constexpr uint64_t kEvery = 4;
  constexpr int kReplays = 64;
  Stream stream = make_stream();
  Buffer data = Buffer::allocate(stream, 64);
  ProfilerOptions options;
  options.sample_every = kEvery;
  options.sample_seed = 3;
  Profiler profiler(options);
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  capture_fill_region(profiler, graph, stream, data);
  for (int i = 0; i < kReplays; ++i) graph.replay(stream);
  stream.synchronize();
  profiler.flush();
  const std::vector<timing::GraphReplays> counts = profiler.replay_counts();
  REQUIRE(counts.size() == 1);
  CHECK(counts[0].run == kReplays);
  if (!counts[0].sampled) {
    // untimed.fallback: every replay timed and reported.
    CHECK(counts[0].timed == kReplays);
    CHECK(collected.replays().size() == kReplays);
    skip("its graphs cannot launch without markers: every replay is timed (untimed.fallback)");
    return;
  }
  CHECK(graphs_replay_untimed());
  CHECK(counts[0].timed == kReplays / kEvery);
  REQUIRE(collected.replays().size() == kReplays / kEvery);
  for (const TimedReplay& report : collected.replays())
    CHECK(timing::is_sampled_replay(report.replay_index, kEvery, 3, graph.id()));
  check_replays_apart(collected.replays(), "fill");
  CHECK(read_back(stream, data) == std::vector<uint8_t>(64, 1));
}

ACCGRAPH_CONFORMANCE_CASE("sampled replays: a backend without UntimedReplay times every replay",
                          "untimed.fallback") {
  constexpr int kReplays = 12;
  Stream stream = make_stream();
  Buffer data = Buffer::allocate(stream, 64);
  ProfilerOptions options;
  options.sample_every = 3;
  Profiler profiler(options);
  ReportCollector collected(profiler);
  AcceleratorGraph graph(backend());
  capture_fill_region(profiler, graph, stream, data);
  if (graphs_replay_untimed()) {
    skip("its graphs implement UntimedReplay (untimed.same-work applies)");
    return;
  }
  for (int i = 0; i < kReplays; ++i) graph.replay(stream);
  profiler.flush();
  const std::vector<timing::GraphReplays> counts = profiler.replay_counts();
  REQUIRE(counts.size() == 1);
  CHECK(counts[0].run == kReplays);
  CHECK(counts[0].timed == kReplays);
  CHECK_FALSE(counts[0].sampled);
  CHECK(collected.replays().size() == kReplays);
}

}  // namespace
}  // namespace accgraph::conformance
