// MarkerRing: one backend TimestampMarkers object, its calls serialised, its sequences numbered
// in launch order and the launched ones queued until their report is collected (timing-internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "accgraph/backend.hpp"
#include "accgraph/report.hpp"

namespace accgraph::timing {

/// Lock: `mutex_`, a leaf (only the backend call runs under it). The SPI does not promise that
/// TimestampMarkers is thread-safe, and a collecting thread reads while a graph's thread
/// launches, so every call into it goes through this class.
class MarkerRing {
 public:
  /// A launched sequence whose report was not collected yet.
  struct Pending {
    uint64_t sequence = 0;
    std::shared_ptr<const ReportLayout> layout;
  };

  /// Creates the backend's markers for `device` (a BackendError when the backend returns none).
  /// `graph_id` is what the reports say (0 for eager region trees).
  static std::shared_ptr<MarkerRing> create(Backend& backend, const std::string& backend_name,
                                            int device, uint64_t graph_id,
                                            const MarkerOptions& options);
  MarkerRing(std::unique_ptr<TimestampMarkers> markers, ReportSource source, uint64_t graph_id);

  const ReportSource& source() const { return source_; }
  uint64_t graph_id() const { return graph_id_; }
  size_t depth() const { return depth_; }

  // Recording, eagerly or into a capture.
  void begin_sequence(StreamImpl& stream);
  void record(StreamImpl& stream, uint32_t marker);
  void end_sequence(StreamImpl& stream);

  /// True when one more launch would reuse the slot of a sequence not collected yet.
  bool full() const;
  /// Around one launch of a graph holding these markers. `layout`: what the launch's report
  /// lays out, or null when it has nothing to report (a capture without regions).
  void before_launch(GraphImplInterface& graph, StreamImpl& stream);
  void after_launch(GraphImplInterface& graph, StreamImpl& stream,
                    std::shared_ptr<const ReportLayout> layout);
  /// Closes an eager sequence (end_sequence, then after_eager_sequence); `layout` as above.
  void close_eager_sequence(StreamImpl& stream, std::shared_ptr<const ReportLayout> layout);

  /// The oldest pending sequence, if any.
  std::optional<Pending> oldest() const;
  /// True when the oldest pending sequence has finished (false when none is pending).
  bool oldest_complete();
  /// Waits for the oldest pending sequence, reads its times and removes it from the queue (also
  /// when the backend fails: the failure is rethrown). nullopt when none is pending.
  std::optional<ReplayReport> collect_oldest();
  /// Waits for the last launched sequence (a capture without regions still writes the storage).
  void wait_last_launch();

 private:
  std::unique_ptr<TimestampMarkers> markers_;
  const ReportSource source_;
  const uint64_t graph_id_;
  const size_t depth_;
  mutable std::mutex mutex_;  // below, and every call into markers_
  uint64_t next_sequence_ = 0;
  std::deque<Pending> pending_;
};

}  // namespace accgraph::timing
