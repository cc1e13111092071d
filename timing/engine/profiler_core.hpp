// ProfilerCore: what one Profiler's graphs, regions and collection share (timing-internal):
// its options, the units (recorder, collector, report store), which graphs it times, the one
// place its marker rings are made and the one place a finished sequence is handed on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "accgraph/timing.hpp"
#include "collector.hpp"
#include "timing_seam.hpp"
#include "marker_ring.hpp"
#include "region_recorder.hpp"
#include "report_store.hpp"

namespace accgraph::timing {

class GraphTiming;
struct ReplayCounter;

/// Shared with the GraphTimings it makes (they hold it weakly: Note [Graph instruments]).
/// Locks: `attach_mutex_` is a leaf; the units keep their own (see each unit's header).
class ProfilerCore : public detail::InstrumentOwner,
                     public std::enable_shared_from_this<ProfilerCore> {
 public:
  explicit ProfilerCore(ProfilerOptions options);
  ProfilerCore(const ProfilerCore&) = delete;
  ProfilerCore& operator=(const ProfilerCore&) = delete;

  const ProfilerOptions options;
  ReportStore store;
  Collector collector;
  RegionRecorder recorder;

  // --- which graphs are timed ---
  void attach(uint64_t graph_id);
  void attach_all();
  void detach();
  void forget(uint64_t graph_id) noexcept;  // the graph is destroyed (logs a failure)
  bool times(const AcceleratorGraph& graph) const;
  /// This profiler's timing of `graph`'s current capture, or null.
  GraphTiming* timing_of(const AcceleratorGraph& graph) const;

  // --- graph lifecycle (the facade's GraphObserver) ---
  /// `graph` begins capturing on `stream`: a timed graph gets a GraphTiming for the capture.
  void begin_capture(AcceleratorGraph& graph, Stream& stream);
  /// Collects the reports of `graph`'s timing (if any) before its `event` ("reset",
  /// "destruction"); a failure is logged as a warning, not thrown.
  void retire_timing(AcceleratorGraph& graph, const char* event);

  // --- marker rings ---
  /// The one place rings are made: the backend's markers for `device`, registered with the
  /// collector (retire it when done). `graph_id` 0: an eager ring.
  std::shared_ptr<MarkerRing> create_ring(Backend& backend, const std::string& backend_name,
                                          int device, uint64_t graph_id, bool fenced);
  /// The marker costs reports of `device` carry (0 when the options subtract none): measured
  /// now if `may_measure` (no capture records on this thread) and not known yet.
  MarkerCosts marker_overhead(Backend& backend, const std::string& backend_name, int device,
                              bool may_measure) const;
  /// The one place a launched graph replay or a closed eager tree is handed on (Note [Recording
  /// never delivers]): Delivery::Immediate collects it now; an eager ring gets room for its
  /// next tree (a graph's ring makes room before each launch instead).
  enum class Sequence { GraphReplay, EagerTree };
  void sequence_done(MarkerRing& ring, Sequence kind);
  /// Before a launch on `ring` (and after an eager tree closed): while the ring is full,
  /// collects its oldest replays, counting the wait (Profiler::ring_waits).
  void make_room(MarkerRing& ring);
  uint64_t ring_waits() const { return ring_waits_.load(std::memory_order_relaxed); }
  std::chrono::nanoseconds ring_wait_time() const {
    return std::chrono::nanoseconds(ring_wait_ns_.load(std::memory_order_relaxed));
  }
  /// The stats table's line on ring waits and what to do about them ("" when none waited).
  std::string ring_wait_lines() const;

  // --- sampled replays (Note [Sampled replays] in spi/untimed_replay.hpp) ---
  /// The counter of `graph_id`'s replays, made on first use; GraphTimings hold it.
  std::shared_ptr<ReplayCounter> replay_counter(uint64_t graph_id);
  std::vector<GraphReplays> replay_counts() const;
  /// The stats table's lines on sampled graphs ("" when every replay of every graph was timed).
  std::string sampling_lines() const;

  // --- regions (Profiler::region/begin/end) ---
  /// InvalidArgument naming `operation` unless `stream` is live and `name` is not empty.
  static void check_region(const Stream& stream, const std::string& name, const char* operation);
  /// Opens a region on `stream`: into the capture the stream records into now, or eagerly.
  uint64_t begin_region(Stream& stream, std::string name, Metadata metadata, std::string lane);
  /// Ends the innermost region on `stream` (with a serial: that region, as Region::end does).
  void end_region(Stream& stream, uint64_t serial, const char* operation);

 private:
  // The timing of the capture a region on `stream` records into now, or null (eager):
  // InvalidState when the stream captures into a graph this profiler does not time (yet), or
  // natively.
  GraphTiming* capture_of(Stream& stream, const char* operation, const std::string& name) const;
  void give_eager_ring(Stream& stream);
  void count_wait(std::chrono::steady_clock::time_point start);
  // ProfilerOptions::overhead: after a graph's first timed replays, its N from what its
  // markers cost in `report` (a sink of this profiler's).
  void note_replay_cost(const ReplayReport& report);

  mutable std::mutex attach_mutex_;  // below
  bool attach_all_ = false;
  std::set<uint64_t> attached_;            // graph ids
  std::atomic<uint64_t> ring_waits_{0};    // launches that found their ring full
  std::atomic<uint64_t> ring_wait_ns_{0};  // and the time they spent making room
  mutable std::mutex counters_mutex_;      // a leaf, below
  std::map<uint64_t, std::shared_ptr<ReplayCounter>> counters_;  // by graph id
};

}  // namespace accgraph::timing
