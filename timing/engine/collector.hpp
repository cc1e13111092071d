// Collector: collects the launched sequences of a profiler's marker rings, oldest first per
// ring, and hands their reports to the ReportStore; optionally from a background thread
// (timing-internal).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "marker_ring.hpp"
#include "report_store.hpp"

namespace accgraph::timing {

/// Locks, in order: `delivery_` (held for a whole collection: wait, read, deliver, so that the
/// reports of one ring reach the sinks in sequence order even with the collector thread
/// running; recursive, so a sink may call flush()) -> `rings_mutex_` or MarkerRing's own (both
/// leaves). Callers never hold the recorder's or the profiler facade's lock when they call in:
/// collecting may wait for the device.
class Collector {
 public:
  explicit Collector(ReportStore& store) : store_(store) {}
  ~Collector() { stop(); }
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  /// Starts the background thread: every `period` it delivers the sequences that have finished.
  void start(std::chrono::microseconds period);
  /// Stops and joins it (no-op when not started); never throws.
  void stop() noexcept;

  /// `ring` may hold pending sequences from now on (flush() collects it).
  void add(std::shared_ptr<MarkerRing> ring);
  /// Waits until `ring` has a free slot for one more launch, collecting its oldest sequences.
  void make_room(MarkerRing& ring);
  /// Collects every sequence pending in `ring` when it is called (Note [Bounded collection]).
  void collect_all(MarkerRing& ring);
  /// Collects every sequence pending when it is called, in every ring; rethrows the first
  /// failure after trying all.
  void flush();
  /// Delivers, per ring, the pending sequences that have finished (the background pass).
  void collect_completed();
  /// Collects `ring`, waits for its last launch and forgets it (its storage may then go).
  void retire(const std::shared_ptr<MarkerRing>& ring);
  /// The same, logging failures as "timing: <what> failed: ..." instead of throwing.
  void retire_noexcept(const std::shared_ptr<MarkerRing>& ring, const char* what) noexcept;

 private:
  // Collects the oldest pending sequence (delivering its report, if it has one) if it is one of
  // the first `before` queued (MarkerRing::collect_next); false when none was. Caller holds
  // delivery_.
  bool collect_oldest(MarkerRing& ring, uint64_t before = UINT64_MAX);
  std::vector<std::shared_ptr<MarkerRing>> rings_snapshot() const;
  void run(std::chrono::microseconds period);

  ReportStore& store_;
  std::recursive_mutex delivery_;
  mutable std::mutex rings_mutex_;
  std::vector<std::shared_ptr<MarkerRing>> rings_;

  std::thread thread_;
  std::mutex thread_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace accgraph::timing
