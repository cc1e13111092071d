// ProfilerCore (profiler_core.hpp).
#include "profiler_core.hpp"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <exception>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/graph.hpp"
#include "graph_timing.hpp"
#include "marker_overhead.hpp"

namespace accgraph::timing {

namespace {

uint64_t checked_keep(const ProfilerOptions& options) {
  if (options.keep_reports.negative())
    throw Error(ErrorCode::InvalidArgument,
                "Profiler: keep_reports is negative: give how many of the last reports to keep "
                "(0 for none, KeepReports::all() for every one)");
  return options.keep_reports.count();
}

std::string describe(const char* operation, const std::string& name) {
  return name.empty() ? std::string(operation) : fmt::format("{}('{}')", operation, name);
}

}  // namespace

namespace {

uint64_t checked_sampling(const ProfilerOptions& options) {
  if (options.sample_every == 0)
    throw Error(ErrorCode::InvalidArgument,
                "Profiler: sample_every is 0: give N >= 1 to time 1 replay in N (1: every "
                "replay), or an overhead budget instead");
  if (!(options.overhead >= 0 && options.overhead < 1))  // NaN too
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("Profiler: overhead {} is not a fraction in [0, 1): give the share of "
                            "a graph's device time its markers may cost on average, e.g. 0.005 "
                            "for 0.5% (0: off)",
                            options.overhead));
  if (options.overhead > 0 && options.sample_every != 1)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("Profiler: both sample_every ({}) and overhead ({}) are set: give "
                            "one (overhead chooses each graph's N itself)",
                            options.sample_every, options.overhead));
  return options.sample_every;
}

}  // namespace

ProfilerCore::ProfilerCore(ProfilerOptions opts)
    : options(std::move(opts)),
      store(checked_keep(options), options.stats_mode, options.collect_stats,
            options.stats_thread ? StatsFold::Background : StatsFold::Inline,
            options.first_eager_call),
      collector(store) {
  checked_sampling(options);
  if (options.overhead > 0)
    store.add_sink([this](const ReplayReport& report) { note_replay_cost(report); });
}


// --- which graphs are timed --------------------------------------------------------------------

void ProfilerCore::attach(uint64_t graph_id) {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  attached_.insert(graph_id);
}

void ProfilerCore::attach_all() {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  attach_all_ = true;
}

void ProfilerCore::detach() {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  attach_all_ = false;
  attached_.clear();
}

void ProfilerCore::forget(uint64_t graph_id) noexcept {
  try {
    std::lock_guard<std::mutex> lock(attach_mutex_);
    attached_.erase(graph_id);
  } catch (const std::exception& e) {  // a failed lock: the id stays, never reused
    log(LogLevel::Warning,
        fmt::format("timing: forgetting destroyed graph {} failed: {}", graph_id, e.what()));
  }
}

bool ProfilerCore::times(const AcceleratorGraph& graph) const {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  return attach_all_ || attached_.count(graph.id()) != 0;
}

GraphTiming* ProfilerCore::timing_of(const AcceleratorGraph& graph) const {
  // Only this profiler makes instruments it owns, and they are all GraphTimings.
  return static_cast<GraphTiming*>(detail::GraphAccess::instrument(graph, *this));
}

// --- graph lifecycle ---------------------------------------------------------------------------

// The capture gets its marker ring at its first region or fork, not here (Note [Deferred ring]
// in graph_timing.hpp): a capture without either gets no node and no marker storage.
void ProfilerCore::begin_capture(AcceleratorGraph& graph, Stream& stream) {
  if (!times(graph)) return;
  std::shared_ptr<Recording> capture = recorder.begin_capture(stream, graph.id());
  detail::GraphAccess::add_instrument(
      graph, std::make_shared<GraphTiming>(shared_from_this(), std::move(capture), graph));
}

void ProfilerCore::retire_timing(AcceleratorGraph& graph, const char* event) {
  try {
    if (GraphTiming* timing = timing_of(graph)) timing->retire(*this);
  } catch (const std::exception& e) {
    log(LogLevel::Warning,
        fmt::format("timing: collecting the reports of graph {} before its {} failed: {}",
                    graph.id(), event, e.what()));
  }
}

// --- marker rings ------------------------------------------------------------------------------

// Note [Eager ring depth]: an eager ring closes one sequence per outermost eager region, and
// after each one ProfilerCore::sequence_done makes room for the next, so a loop of eager calls
// that runs ahead of the device (or simply runs without flush(), with no background collector)
// counts a ring wait at every call once the ring is full. At the backend's default depth (16 on
// cuda) a torch.compile(mode="reduce-overhead") model under instrument(prof, modules=True) did
// so at calls 16 to 30 of 30 (15 ring waits: bench/README.md, 'Targets and figures the code
// cites'), since the compiled module's own call is an eager region around each CUDA-graph replay.
// Eager sets cannot size themselves by the budget (marker.budget applies to a captured sequence,
// and an eager set's storage is laid out per slot at its first record), so an eager ring is made
// with an explicit depth: what marker_memory holds at kEagerSlotBytes per slot (a tree of up to 128
// markers: staged on the device and read back, 8 bytes each), at most kMaxEagerDepth (every in-tree
// backend's maximum or less); 512 with the default 1 MiB. A backend whose maximum is smaller
// refuses that depth (InvalidArgument): its default depth is used then. An explicit
// ProfilerOptions::ring_depth wins, as for graphs; marker_memory 0 keeps the backend's default.
namespace {
constexpr size_t kEagerSlotBytes = 2 * 128 * sizeof(uint64_t);
constexpr size_t kMaxEagerDepth = 1024;
}  // namespace

std::shared_ptr<MarkerRing> ProfilerCore::create_ring(Backend& backend,
                                                      const std::string& backend_name, int device,
                                                      uint64_t graph_id, bool fenced) {
  const bool eager = graph_id == 0;
  // Eager sets never resize (marker.budget): they get no budget, and a depth from it instead.
  const size_t budget = eager ? 0 : options.marker_memory;
  MarkerOptions markers{options.marker_strategy, options.ring_depth, budget};
  const MarkerCosts overhead = marker_overhead(backend, backend_name, device, eager);
  std::shared_ptr<MarkerRing> ring;
  if (eager && options.ring_depth == 0 && options.marker_memory != 0) {
    MarkerOptions sized = markers;
    sized.memory_budget = options.marker_memory;  // only to compute the depth
    sized.ring_depth = std::max<size_t>(1, sized.budget_depth(kEagerSlotBytes, 0, kMaxEagerDepth));
    sized.memory_budget = 0;
    try {
      ring = MarkerRing::create(backend, backend_name, device, graph_id, sized, fenced, overhead);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument) throw;  // above this backend's maximum depth
    }
  }
  if (!ring)
    ring = MarkerRing::create(backend, backend_name, device, graph_id, markers, fenced, overhead);
  collector.add(ring);
  return ring;
}

// Note [Marker overhead]: an eager ring is made outside any capture, so it may measure; a
// graph's is made inside its capture, so it takes what is known, and GraphTiming measures at
// the graph's first launch.
MarkerCosts ProfilerCore::marker_overhead(Backend& backend, const std::string& backend_name,
                                          int device, bool may_measure) const {
  if (!options.subtract_marker_overhead) return MarkerCosts{};
  if (may_measure)
    return timing::marker_overhead(backend, backend_name, device, options.marker_strategy);
  return known_marker_overhead(backend_name, device, options.marker_strategy)
      .value_or(MarkerCosts{});
}

void ProfilerCore::sequence_done(MarkerRing& ring, Sequence kind) {
  if (options.delivery == Delivery::Immediate)
    collector.collect_all(ring);
  else if (kind == Sequence::EagerTree)
    make_room(ring);
}

void ProfilerCore::make_room(MarkerRing& ring) {
  if (!ring.full()) return;
  const auto start = std::chrono::steady_clock::now();
  try {
    collector.make_room(ring);
  } catch (...) {
    count_wait(start);
    throw;
  }
  count_wait(start);
}

void ProfilerCore::count_wait(std::chrono::steady_clock::time_point start) {
  const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - start);
  ring_waits_.fetch_add(1, std::memory_order_relaxed);
  ring_wait_ns_.fetch_add(static_cast<uint64_t>(waited.count()), std::memory_order_relaxed);
}

std::string ProfilerCore::ring_wait_lines() const {
  const uint64_t waits = ring_waits();
  if (waits == 0) return std::string();
  return fmt::format(
      "ring waits: {} launch(es) waited {:.3f} ms in all for a full marker ring (every replay "
      "in it unread): raise ProfilerOptions::marker_memory (or ring_depth), or flush() "
      "between bursts of replays\n",
      waits, static_cast<double>(ring_wait_time().count()) / 1e6);
}

// --- sampled replays ----------------------------------------------------------------------------

std::shared_ptr<ReplayCounter> ProfilerCore::replay_counter(uint64_t graph_id) {
  std::lock_guard<std::mutex> lock(counters_mutex_);
  std::shared_ptr<ReplayCounter>& counter = counters_[graph_id];
  if (!counter) counter = std::make_shared<ReplayCounter>();
  return counter;
}

std::vector<GraphReplays> ProfilerCore::replay_counts() const {
  std::vector<GraphReplays> counts;
  std::lock_guard<std::mutex> lock(counters_mutex_);
  counts.reserve(counters_.size());
  for (const auto& [graph_id, counter] : counters_) {
    GraphReplays replays;
    replays.graph_id = graph_id;
    replays.run = counter->run.load(std::memory_order_relaxed);
    replays.timed = counter->timed.load(std::memory_order_relaxed);
    replays.sample_every = counter->every.load(std::memory_order_relaxed);
    replays.sampled = counter->untimed_capable.load(std::memory_order_relaxed);
    counts.push_back(replays);
  }
  return counts;
}

std::string ProfilerCore::sampling_lines() const {
  if (options.sample_every == 1 && options.overhead == 0) return std::string();
  std::string lines;
  for (const GraphReplays& g : replay_counts()) {
    lines += fmt::format("sampled: graph {}: {} of {} replay(s) timed", g.graph_id, g.timed, g.run);
    if (!g.sampled)
      lines += " (every replay timed: its backend cannot launch it without markers, a "
               "foreign graph's owner did not allow it, or another profiler times it too)\n";
    else if (options.overhead > 0 && g.sample_every == 1)
      lines += " (1 in 1 until its first reports are collected: flush() or a background "
               "collector)\n";
    else
      lines += fmt::format(" (1 in {})\n", g.sample_every);
  }
  return lines;
}

// Note [Sampled replays]: the budget is kept on average over a graph's replays: a timed replay
// costs its markers (every transition's cost, what the report takes off its regions), an untimed
// one nothing, so 1 in N costs marker / (N * work) of the work. The first kCostedReports reports
// of a graph give marker and work time (summed over its outermost regions); N is the smallest
// that keeps marker / (N * work) within the budget.
void ProfilerCore::note_replay_cost(const ReplayReport& report) {
  constexpr uint64_t kCostedReports = 8;
  constexpr uint64_t kMaxEvery = uint64_t{1} << 20;
  if (report.graph_id() == 0) return;  // an eager tree
  std::shared_ptr<ReplayCounter> counter;
  {
    std::lock_guard<std::mutex> lock(counters_mutex_);
    auto found = counters_.find(report.graph_id());
    if (found == counters_.end()) return;
    counter = found->second;
  }
  if (counter->costed_reports >= kCostedReports) return;
  for (const RegionTiming& region : report.regions()) {
    if (region.depth() != 0 || !region.measurable()) continue;
    counter->work_ns += static_cast<double>(region.duration_ns());
    if (region.raw_duration_ns() > region.duration_ns())
      counter->marker_ns += static_cast<double>(region.raw_duration_ns() - region.duration_ns());
  }
  if (++counter->costed_reports < kCostedReports) return;
  double every = 1;
  if (counter->work_ns > 0)
    every = std::ceil(counter->marker_ns / (options.overhead * counter->work_ns));
  every = std::clamp(every, 1.0, static_cast<double>(kMaxEvery));
  counter->every.store(static_cast<uint64_t>(every), std::memory_order_relaxed);
}

// --- regions -----------------------------------------------------------------------------------

void ProfilerCore::check_region(const Stream& stream, const std::string& name,
                                const char* operation) {
  if (!stream)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the stream is empty (moved from): pass a live Stream", operation));
  if (name.empty())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the region name is empty: give every region a name", operation));
}

GraphTiming* ProfilerCore::capture_of(Stream& stream, const char* operation,
                                      const std::string& name) const {
  AcceleratorGraph* graph = stream.capturing_graph();
  if (graph == nullptr) {
    // Eager markers recorded into a capture accgraph was not told about would run only when
    // that graph runs, if ever: flush would wait for them forever.
    if (detail::StreamAccess::capturing(stream))
      throw Error(ErrorCode::InvalidState, ErrorReason::NativeCapture,
                  fmt::format("{}: stream {} is capturing into a graph accgraph was not told "
                              "about (a native capture): time it through a ForeignGraph "
                              "(capture_begin after the native capture began), or open the "
                              "region outside the capture",
                              describe(operation, name), stream.id()),
                  stream.backend_name());
    return nullptr;
  }
  if (GraphTiming* timing = timing_of(*graph); timing && timing->capture()) return timing;
  if (times(*graph))
    throw Error(ErrorCode::InvalidState, ErrorReason::UnattachedCapture,
                fmt::format("{}: graph {} began capturing before the profiler was attached to "
                            "it: call attach(graph) or attach_all() before capture_begin",
                            describe(operation, name), graph->id()),
                graph->backend_name());
  throw Error(ErrorCode::InvalidState, ErrorReason::UnattachedCapture,
              fmt::format("{}: stream {} is capturing into graph {}, which this profiler is not "
                          "attached to: call attach(graph) or attach_all() before capture_begin",
                          describe(operation, name), stream.id(), graph->id()),
              graph->backend_name());
}

void ProfilerCore::give_eager_ring(Stream& stream) {
  if (recorder.eager_ring(stream.id())) return;
  std::shared_ptr<MarkerRing> ring =
      create_ring(stream.backend(), stream.backend_name(), stream.device(), 0, false);
  // Another thread gave the stream its ring first: this one recorded nothing.
  if (!recorder.adopt_eager_ring(stream, ring))
    collector.retire_noexcept(ring, "dropping an unused eager marker ring");
}

uint64_t ProfilerCore::begin_region(Stream& stream, std::string name, Metadata metadata,
                                    std::string lane) {
  GraphTiming* timing = capture_of(stream, "begin", name);
  std::shared_ptr<Recording> capture = timing ? timing->capture() : nullptr;
  if (timing)
    timing->begin_sequence(*this, stream, "begin");  // Note [Deferred ring] in graph_timing.hpp
  else
    give_eager_ring(stream);
  for (;;) {
    try {
      return recorder.begin(stream, capture, std::move(name), std::move(metadata),
                            std::move(lane));  // moved from only when it succeeds
    } catch (const EagerRingFull& full) {
      make_room(*full.ring);  // waits for the oldest tree (or raises why it cannot be collected)
    }
  }
}

void ProfilerCore::end_region(Stream& stream, uint64_t serial, const char* operation) {
  GraphTiming* timing = capture_of(stream, operation, std::string());
  std::shared_ptr<MarkerRing> closed =
      recorder.end(stream, timing ? timing->capture() : std::shared_ptr<Recording>(), serial);
  if (closed) sequence_done(*closed, Sequence::EagerTree);
}

}  // namespace accgraph::timing
