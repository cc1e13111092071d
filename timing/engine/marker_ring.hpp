// MarkerRing: one backend TimestampMarkers object, its calls serialised, its sequences numbered
// in launch order and the launched ones queued until their report is collected (timing-internal).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "accgraph/foreign_graph.hpp"
#include "accgraph/report.hpp"
#include "accgraph/spi/backend.hpp"
#include "marker_overhead.hpp"

namespace accgraph::timing {

/// Note [Ring lock]: the lock of a MarkerRing. A timed launch takes it twice (Note [Launch path]
/// in graph_timing.cpp), and a std::mutex costs each time an atomic read-modify-write to lock
/// and another to unlock (glibc's unlock exchanges the word to learn whether to wake a waiter).
/// This lock takes it with one exchange and gives it up with a plain store, because nobody
/// sleeps on it to be woken: a thread that finds it held (a collecting thread, which may hold it
/// while it waits for the device; a launch behind such a thread) spins briefly, then yields,
/// then sleeps in short steps that grow to 50 us and looks again. Waits for it are rare (a
/// launching thread meets a collecting one) and already long (the holder waits for the device),
/// so their latency grows by at most one step; the uncontended launch pays one exchange. A timed
/// launch's before_replay + after_replay went from 458 to 312 instructions (callgrind, host
/// backend: bench/README.md, 'Targets and figures the code cites'). BasicLockable, for
/// std::lock_guard.
class RingLock {
 public:
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void lock() noexcept {
    if (!try_lock()) lock_slow();
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  void lock_slow() noexcept;
  std::atomic<bool> held_{false};
};

/// Lock: `mutex_` (a RingLock), a leaf (only the backend call runs under it). The SPI does not
/// promise that TimestampMarkers is thread-safe, and a collecting thread reads while a graph's
/// thread launches, so every call into it goes through this class.
class MarkerRing {
 public:
  /// A launched sequence whose report was not collected yet.
  struct Pending {
    uint64_t sequence = 0;
    uint64_t replay_index = 0;  // what the report says (sequences may skip: Note [Launch fences])
    // What its report lays out, kept alive by the ring's `layouts_` (Note [Kept layouts]).
    const ReportLayout* layout = nullptr;
    // Foreign launches only (Note [Launch fences]): the fence enqueued after the owner's launch,
    // and whether the owner's launch raised (then it is checked, never reported).
    TimestampMarkers* fence = nullptr;
    uint64_t fence_sequence = 0;
    bool raised = false;
  };

  /// Creates the backend's markers for `device` (a BackendError when the backend returns none).
  /// `graph_id` is what the reports say (0 for eager region trees).
  /// `fenced`: the graph is a ForeignGraph, whose owner's launches are checked (Note [Launch
  /// fences]). `costs` go into the reports' source (Note [Marker overhead]).
  static std::shared_ptr<MarkerRing> create(Backend& backend, const std::string& backend_name,
                                            int device, uint64_t graph_id,
                                            const MarkerOptions& options, bool fenced = false,
                                            MarkerCosts costs = {});
  MarkerRing(std::unique_ptr<TimestampMarkers> markers, ReportSource source, uint64_t graph_id);
  ~MarkerRing();

  const ReportSource& source() const { return source_; }
  uint64_t graph_id() const { return graph_id_; }

  // Recording, eagerly or into a capture.
  void begin_sequence(StreamImpl& stream);
  void record(StreamImpl& stream, uint32_t marker);
  void end_sequence(StreamImpl& stream);

  /// True when one more launch would reuse the slot of a sequence not collected yet.
  bool full() const;
  /// Around one launch of a graph holding these markers. before_launch does nothing and returns
  /// false when `needs_room` and the ring is full() (collect its oldest sequence, then call it
  /// again): the check and the backend call take one lock, on every timed launch.
  /// after_launch's `layout`: what the launch's report lays out, or null when it has nothing to
  /// report (a capture without regions).
  /// `waits` (all three launch calls): the launch caller's LaunchWaits, given up while the ring's
  /// lock is held by a collecting thread (Note [Launch waits] in foreign_graph.hpp), or null.
  bool before_launch(GraphImplInterface& graph, StreamImpl& stream, bool needs_room,
                     LaunchWaits* waits = nullptr);
  /// `replay_index`: what the launch's report says (Note [Sampled replays]: replays launched
  /// without markers are counted too); kNextReplay: the one after the last launch's.
  static constexpr uint64_t kNextReplay = UINT64_MAX;
  void after_launch(GraphImplInterface& graph, StreamImpl& stream,
                    const std::shared_ptr<const ReportLayout>& layout,
                    uint64_t replay_index = kNextReplay, LaunchWaits* waits = nullptr);
  /// A ForeignGraph's launch (fenced rings): after_launch when the owner's launch returned,
  /// then a fence on `stream` so that collection can check what the launch did without ever
  /// waiting for a sequence that may not run (Note [Launch fences]). `raised`: the owner's
  /// launch threw (it may or may not have launched); nothing is reported for it.
  enum class LaunchOutcome { Returned, Raised };
  /// `replay_index` as after_launch's: the graph's replays counted untimed ones too (Note
  /// [Sampled replays]).
  void after_foreign_launch(GraphImplInterface& graph, StreamImpl& stream,
                            const std::shared_ptr<const ReportLayout>& layout,
                            LaunchOutcome outcome, uint64_t replay_index = kNextReplay,
                            LaunchWaits* waits = nullptr);
  /// Closes an eager sequence (end_sequence, then after_eager_sequence); `layout` as above.
  void close_eager_sequence(StreamImpl& stream, const std::shared_ptr<const ReportLayout>& layout);

  /// The oldest pending sequence, if any.
  std::optional<Pending> oldest() const;
  /// True when the oldest pending sequence has finished (false when none is pending).
  bool oldest_complete();
  /// Waits for the oldest pending sequence, reads its times and removes it from the queue (also
  /// when the backend fails: the failure is rethrown). nullopt when none is pending; for a
  /// fenced ring also when the oldest was a raised launch (nothing to report: collect_next()
  /// tells the two apart).
  std::optional<ReplayReport> collect_oldest() { return collect_next().report; }
  /// The same, saying also whether a sequence was collected at all (a raised foreign launch is
  /// collected without a report): one lock for both, on the collection path.
  struct Collected {
    bool collected = false;
    std::optional<ReplayReport> report;
  };
  /// `before`: collects only a sequence that was among the first `before` ever queued
  /// (queued()), so that a caller collecting "what is pending now" ends (Note [Bounded
  /// collection] in collector.cpp); nothing collected past it.
  Collected collect_next(uint64_t before = UINT64_MAX);
  /// Note [Recycled times]: hands a collected report's marker times back once nobody keeps the
  /// report (delivered, not kept), so that the next collection reads into that storage instead
  /// of a vector it first fills with zeros.
  void recycle_times(std::vector<uint64_t> times);
  /// How many sequences were ever queued for collection (launches and eager sequences with a
  /// report, raised foreign launches): collect_next(queued()) stops after those.
  uint64_t queued() const;
  /// Waits for the last launched sequence (a capture without regions still writes the storage).
  /// On a fenced ring the wait is bounded (Note [Launch fences]).
  void wait_last_launch();

 private:
  bool full_locked() const;  // full(); caller holds mutex_
  // Locks mutex_ for a launch's half that found it taken (try_lock failed: a collecting thread
  // holds it, and may be waiting for the device), with `waits` given up while it waits (Note
  // [Launch waits]). Out of line: a launch that finds the lock free pays only its try_lock.
  void lock_contended(LaunchWaits* waits);
  // The fence markers for eager fences on `stream`'s queue (one set per native queue: the SPI
  // gives a marker set's eager sequences to one stream). Caller holds mutex_.
  TimestampMarkers& fence_for(StreamImpl& stream);
  // Collection of a fenced entry: the report, or nullopt for a raised launch. Caller holds
  // mutex_ and has popped `pending`.
  std::optional<ReplayReport> collect_fenced(Pending& pending);
  // Note [Kept layouts]. Caller holds mutex_.
  const ReportLayout* keep_layout(const std::shared_ptr<const ReportLayout>& layout,
                                  uint64_t sequence);
  std::shared_ptr<const ReportLayout> kept_layout(const Pending& pending) const;
  void release_layouts();
  // Whether every measurable time lies in [low, high] (a launch's own execution).
  static bool within(const std::vector<uint64_t>& times, uint64_t low, uint64_t high);
  // Reads `sequence` of the graph's markers if it completed, else nullopt; a failing read
  // (an overwritten slot) is nullopt too. Caller holds mutex_.
  std::optional<std::vector<uint64_t>> read_if_complete(uint64_t sequence, size_t count);

  // The launched sequences not collected yet, oldest first: a circular buffer whose capacity
  // (a power of two) doubles when it is full and never shrinks, so a launch allocates nothing
  // once the ring has held its most (Note [Launch path] in graph_timing.cpp; a std::deque
  // allocated a block every 9 launches).
  class PendingQueue {
   public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    Pending& front() { return slots_[head_]; }
    const Pending& front() const { return slots_[head_]; }
    void push_back(Pending pending) {
      if (size_ == slots_.size()) grow(slots_.empty() ? 16 : 2 * slots_.size());
      slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(pending);
      ++size_;
    }
    // Room for `count` entries without growing (at most 1024 entries, about 56 KiB, reserved
    // ahead).
    void reserve(size_t count) {
      size_t capacity = 16;
      while (capacity < std::min<size_t>(count, 1024)) capacity *= 2;
      if (capacity > slots_.size()) grow(capacity);
    }
    void pop_front() {
      slots_[head_] = Pending{};  // drops its layout now, not when the slot is reused
      head_ = (head_ + 1) & (slots_.size() - 1);
      --size_;
      ++popped_;
    }
    // Entries ever removed, and ever added (popped() + size()).
    uint64_t popped() const { return popped_; }
    uint64_t pushed() const { return popped_ + size_; }

   private:
    void grow(size_t capacity) {  // a power of two, >= size_
      std::vector<Pending> grown(capacity);
      for (size_t i = 0; i < size_; ++i)
        grown[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
      slots_.swap(grown);
      head_ = 0;
    }
    std::vector<Pending> slots_;
    size_t head_ = 0, size_ = 0;
    uint64_t popped_ = 0;
  };

  std::unique_ptr<TimestampMarkers> markers_;
  const ReportSource source_;
  const uint64_t graph_id_;
  mutable RingLock mutex_;    // below, and every call into markers_ (Note [Ring lock])
  size_t depth_;              // markers_->ring_depth(), read again until it is final
  bool depth_final_ = false;  // the first launch began: the depth no longer changes
  uint64_t next_sequence_ = 0;
  uint64_t launches_ = 0;  // counted launches: the next report's replay_index
  PendingQueue pending_;
  std::vector<uint64_t> recycled_times_;  // Note [Recycled times]
  // The layouts pending entries point at, in the order they were first launched with, each with
  // the last sequence launched with it: usually one (Note [Kept layouts]).
  struct KeptLayout {
    std::shared_ptr<const ReportLayout> layout;
    uint64_t last_sequence = 0;
  };
  std::vector<KeptLayout> layouts_;

  // Fenced rings only (Note [Launch fences]).
  Backend* backend_ = nullptr;
  std::string fence_strategy_;  // the fences' markers: this strategy, the ring's final depth
  struct Fence {
    void* queue = nullptr;  // the native queue its eager sequences run on
    std::unique_ptr<TimestampMarkers> markers;
    uint64_t next = 0;  // its next eager sequence
  };
  std::vector<Fence> fences_;
  const TimestampMarkers* previous_fence_ = nullptr;  // the fence of the last checked launch
  uint64_t previous_fence_ns_ = 0;                    // and its time (0: unknown)
  bool out_of_step_ = false;         // the device's numbering may differ: skip a number to realign
  bool last_launch_fenced_ = false;  // the last counted launch has a fence behind it
  bool warned_ = false;
};

}  // namespace accgraph::timing
