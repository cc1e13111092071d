// GraphTiming: one profiler's timing of one capture of one graph — its marker ring, the
// capture's recording and then its layout — owned by the graph (timing-internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "timing_seam.hpp"
#include "marker_ring.hpp"
#include "region_recorder.hpp"

namespace accgraph::timing {

class ProfilerCore;

/// Note [Sampled replays] (spi/untimed_replay.hpp): one graph's replays as one profiler saw
/// them, over every capture it timed (Profiler::replay_counts()). Written by the graph's
/// launching thread, read by any.
struct ReplayCounter {
  std::atomic<uint64_t> run{0};    // launched, timed or not
  std::atomic<uint64_t> timed{0};  // launched with markers
  std::atomic<uint64_t> every{1};  // the N in effect (overhead: 1 until chosen)
  std::atomic<bool> untimed_capable{true};  // false once a replay could not skip its markers
  // ProfilerOptions::overhead: what the markers cost and the work took in the first reports
  // (ProfilerCore::note_replay_cost; delivery is one thread at a time).
  uint64_t costed_reports = 0;
  double marker_ns = 0, work_ns = 0;
};


/// Note [Graph instruments] (core/seam/timing_seam.hpp): the graph holds it, so the ring's
/// storage lives as long as the captured work that writes into it; it holds its profiler
/// weakly, so replays after the profiler is gone only run the graph. Its capture and layout
/// change only in the graph's lifecycle hooks, on the thread driving the graph, never during
/// one of its replays: replays read them without a lock.
///
/// Note [Deferred ring]: a timed capture gets its marker ring (the backend's marker storage)
/// and the ring's begin_sequence only when it first needs them: at its first region, on that
/// region's stream before the region's first marker, or, when the capture forks a stream
/// through accgraph before any region, right before that first fork on the stream it forks from
/// (the head must precede every marker of every branch: Note [Marker ring]). A capture with
/// neither gets nothing: no node in the graph, no storage, and its replays do no marker work
/// and produce no report. The ring is made under `ring_mutex_` (regions may begin on several
/// threads), before the capture ends; replays only read it.
class GraphTiming final : public detail::GraphInstrument {
 public:
  GraphTiming(const std::shared_ptr<ProfilerCore>& core, std::shared_ptr<Recording> capture,
              const AcceleratorGraph& graph);

  bool active() const noexcept override;
  void before_replay(AcceleratorGraph& graph, Stream& stream) override;
  void after_replay(AcceleratorGraph& graph, Stream& stream) override;
  void after_failed_replay(AcceleratorGraph& graph, Stream& stream) noexcept override;
  bool skips_replay() const noexcept override;
  void after_untimed_replay() noexcept override;
  void before_fork(AcceleratorGraph& graph, Stream& forking) override;

  /// The capture being recorded (null once it ended).
  const std::shared_ptr<Recording>& capture() const { return capture_; }
  /// Before a region begins on `stream` in this capture: creates the ring and begins its
  /// sequence on `stream` unless that was done (Note [Deferred ring]). An error leaves the
  /// capture as it was, without a ring: the next region or fork tries again.
  void begin_sequence(ProfilerCore& core, Stream& stream, const char* operation);
  /// capture_end: closes the recording (InvalidState naming regions still open) and keeps its
  /// layout for the replays' reports.
  void end_capture(ProfilerCore& core, Stream& stream, uint64_t graph_id);
  /// The graph drops this capture (reset, abort, destruction): collects its reports and waits
  /// for its last launch; from then on it is inactive (the graph releases it after the backend).
  void retire(ProfilerCore& core);

 private:
  // Whether the replays of this capture are reported: the capture ended with a marker sequence
  // and the profiler lives (a look, no reference taken: Note [Launch path]).
  bool reporting() const noexcept;
  // At the first launch: the layout with the device's marker overhead, measured if unknown.
  void measure_overhead(ProfilerCore& core);
  // The ring, made on first use (caller holds ring_mutex_).
  const std::shared_ptr<MarkerRing>& ring_for(ProfilerCore& core, const char* operation);

  std::weak_ptr<ProfilerCore> core_;
  // What the ring is made for: the graph's backend and device, whose reports it numbers.
  Backend* backend_;
  std::string backend_name_;
  int device_;
  uint64_t graph_id_;
  bool fenced_;
  bool immediate_;         // the profiler delivers each report at its launch (Delivery::Immediate)
  std::mutex ring_mutex_;  // below, until the capture ends
  std::shared_ptr<MarkerRing> ring_;    // null until the capture needs it (Note [Deferred ring])
  std::atomic<bool> sequenced_{false};  // ring_'s begin_sequence is in the capture
  std::shared_ptr<Recording> capture_;  // while capturing
  std::shared_ptr<const ReportLayout> layout_;  // after end_capture; null: no region recorded
  bool overhead_known_ = false;  // measure_overhead ran (on the first launch's thread)
  // From before_replay to after_replay (or after_failed_replay) of one launch: it was numbered
  // (Note [Launch path] in graph_timing.cpp).
  bool launch_timed_ = false;
  // Note [Sampled replays]: replays of this capture so far (timed or not: the next report's
  // replay_index), the sampling period asked for (1: every replay; 0: chosen by the overhead
  // budget), and the graph's counter, shared with the profiler.
  uint64_t replays_ = 0;
  uint64_t sample_every_;
  uint64_t seed_;
  bool untimed_capable_;  // the graph's backend can launch it without markers (UntimedReplay)
  std::shared_ptr<ReplayCounter> counter_;  // from end_capture, when the capture has regions
  std::atomic<bool> ended_{false};
  std::atomic<bool> retired_{false};
};

}  // namespace accgraph::timing
