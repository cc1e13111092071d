// Toy timestamp markers (strategy "steady_clock_sync"): marker operations read steady_clock on
// the stream's (calling) thread and write into a ring of per-sequence slots, following the
// contract of Note [Marker ring] in accgraph/backend.hpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>

#include "toy.hpp"

namespace toy {

using accgraph::ErrorCode;

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

/// The "device side" of a marker set, shared with every operation the set enqueued, so a graph
/// replayed after its profiler is gone still writes into live memory.
struct MarkerRing {
  explicit MarkerRing(size_t depth) : depth(depth), slots(depth) {}
  const size_t depth;

  std::mutex mutex;                         // guards everything below
  std::condition_variable finished_cv;
  std::vector<std::vector<uint64_t>> slots; // slots[s][m]: marker m of the sequence in slot s
  uint64_t started = 0;   // sequences whose begin_sequence ran
  uint64_t current = 0;   // the sequence now running (the "device-side counter")
  uint64_t finished = 0;  // sequences 0..finished-1 are complete
};

class SteadyClockSyncMarkers final : public accgraph::TimestampMarkers {
 public:
  explicit SteadyClockSyncMarkers(size_t depth) : ring_(std::make_shared<MarkerRing>(depth)) {}

  std::string strategy() const override { return kMarkerStrategy; }
  size_t ring_depth() const override { return ring_->depth; }
  uint64_t resolution_ns() const override { return 1; }

  // The ring slot is picked when the sequence *runs*, not when it is enqueued: a replay of a
  // graph runs the recorded begin_sequence op, which takes the next number. So K replays need
  // no host work per region, exactly as a device-side counter would give.
  void begin_sequence(accgraph::StreamImpl& stream) override {
    as_toy_stream(stream, "begin_sequence")
        .queue()
        .submit({"marker begin_sequence", [ring = ring_] {
                   std::lock_guard<std::mutex> lock(ring->mutex);
                   ring->current = ring->started++;
                 }});
  }

  void record(accgraph::StreamImpl& stream, uint32_t marker) override {
    ToyStream& toy_stream = as_toy_stream(stream, "record");
    {
      // Grow every slot now, on the recording thread, so the operation only writes.
      std::lock_guard<std::mutex> lock(ring_->mutex);
      for (std::vector<uint64_t>& slot : ring_->slots)
        if (slot.size() <= marker) slot.resize(marker + 1);
    }
    toy_stream.queue().submit({"marker " + std::to_string(marker), [ring = ring_, marker] {
                                 const uint64_t time = now_ns();  // read before the lock
                                 std::lock_guard<std::mutex> lock(ring->mutex);
                                 ring->slots[ring->current % ring->depth][marker] = time;
                               }});
  }

  // Publishes completion, so is_complete() is a cheap poll and wait() wakes up.
  void end_sequence(accgraph::StreamImpl& stream) override {
    as_toy_stream(stream, "end_sequence")
        .queue()
        .submit({"marker end_sequence", [ring = ring_] {
                   {
                     std::lock_guard<std::mutex> lock(ring->mutex);
                     ring->finished = ring->current + 1;
                   }
                   ring->finished_cv.notify_all();
                 }});
  }

  bool is_complete(uint64_t sequence) override {
    std::lock_guard<std::mutex> lock(ring_->mutex);
    return ring_->finished > sequence;
  }

  // With synchronous streams a launched sequence has finished before launch returns; the wait
  // matters only when another thread launches while this one collects.
  void wait(uint64_t sequence) override {
    std::unique_lock<std::mutex> lock(ring_->mutex);
    ring_->finished_cv.wait(lock, [&] { return ring_->finished > sequence; });
  }

  // Writes into the caller's buffer (the timing layer reuses one per marker set): no allocation.
  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    std::lock_guard<std::mutex> lock(ring_->mutex);
    if (ring_->finished <= sequence)
      fail(ErrorCode::InvalidState, "read: marker sequence " + std::to_string(sequence) +
                                        " has not finished: wait() for it first");
    if (ring_->started > sequence + ring_->depth)
      fail(ErrorCode::InvalidState,
           "read: marker sequence " + std::to_string(sequence) +
               " was overwritten by a later one (ring depth " + std::to_string(ring_->depth) +
               "): read each sequence before launching " + std::to_string(ring_->depth) + " more");
    const std::vector<uint64_t>& slot = ring_->slots[sequence % ring_->depth];
    if (count > slot.size())
      fail(ErrorCode::InvalidArgument, "read: " + std::to_string(count) +
                                           " markers asked for but only " +
                                           std::to_string(slot.size()) + " were ever recorded");
    std::copy(slot.begin(), slot.begin() + static_cast<std::ptrdiff_t>(count), times);
  }

 private:
  std::shared_ptr<MarkerRing> ring_;
};

}  // namespace

std::unique_ptr<accgraph::TimestampMarkers> make_markers(size_t ring_depth) {
  return std::make_unique<SteadyClockSyncMarkers>(ring_depth);
}

}  // namespace toy
