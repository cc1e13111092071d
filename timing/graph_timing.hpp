// GraphTiming: one profiler's timing of one capture of one graph — its marker ring, the
// capture's recording and then its layout — owned by the graph (timing-internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/internal/timing_seam.hpp"
#include "marker_ring.hpp"
#include "region_recorder.hpp"

namespace accgraph::timing {

class ProfilerCore;

/// Note [Graph instruments] (core/internal/timing_seam.hpp): the graph holds it, so the ring's
/// storage lives as long as the captured work that writes into it; it holds its profiler
/// weakly, so replays after the profiler is gone only run the graph. Its capture and layout
/// change only in the graph's lifecycle hooks, on the thread driving the graph, never during
/// one of its replays: replays read them without a lock.
class GraphTiming final : public detail::GraphInstrument {
 public:
  GraphTiming(const std::shared_ptr<ProfilerCore>& core, std::shared_ptr<MarkerRing> ring,
              std::shared_ptr<Recording> capture);

  bool active() const noexcept override;
  void before_replay(AcceleratorGraph& graph, Stream& stream) override;
  void after_replay(AcceleratorGraph& graph, Stream& stream) override;
  void after_failed_replay(AcceleratorGraph& graph, Stream& stream) noexcept override;

  /// The capture being recorded (null once it ended).
  const std::shared_ptr<Recording>& capture() const { return capture_; }
  /// capture_end: closes the recording (InvalidState naming regions still open) and keeps its
  /// layout for the replays' reports.
  void end_capture(ProfilerCore& core, Stream& stream, uint64_t graph_id);
  /// The graph drops this capture (reset, abort, destruction): collects its reports and waits
  /// for its last launch; from then on it is inactive (the graph releases it after the backend).
  void retire(ProfilerCore& core);

 private:
  // Whether the replays of this capture are reported: the capture ended and the profiler lives.
  std::shared_ptr<ProfilerCore> reporting_core() const;

  std::weak_ptr<ProfilerCore> core_;
  std::shared_ptr<MarkerRing> ring_;
  std::shared_ptr<Recording> capture_;          // while capturing
  std::shared_ptr<const ReportLayout> layout_;  // after end_capture; null: no region recorded
  bool ended_ = false;
  std::atomic<bool> retired_{false};
};

}  // namespace accgraph::timing
