// Host timestamp markers: steady_clock nanoseconds written by the stream's worker into a ring of
// per-sequence slots (Note [Marker ring] in backend.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "host_internal.hpp"

namespace accgraph::detail::host {

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

/// Markers per chunk. Storage grows a chunk at a time and chunks never move, so record() during
/// a capture (or between eager records) never reallocates memory a worker may be writing.
constexpr size_t kChunkMarkers = 64;

/// The "device side" of a marker set: shared by the markers object and every operation it
/// enqueued, so a graph replayed after its profiler is gone still writes into live memory.
struct MarkerRing {
  explicit MarkerRing(size_t depth) : ring(depth) {}
  const size_t ring;

  // chunks[c][slot * kChunkMarkers + m] is marker c * kChunkMarkers + m of ring slot `slot`.
  std::mutex chunks_mutex;
  std::vector<std::unique_ptr<uint64_t[]>> chunks;

  // Written by begin_sequence operations only (the device-side counter of Note [Marker ring]):
  // launches of one graph run one after another, so one "current" sequence suffices.
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> current{0};

  std::mutex done_mutex;
  std::condition_variable done_cv;
  std::atomic<uint64_t> finished{0};  // sequences 0..finished-1 are complete

  uint64_t* chunk_for(uint32_t marker) {
    std::lock_guard<std::mutex> lock(chunks_mutex);
    size_t index = marker / kChunkMarkers;
    while (chunks.size() <= index)
      chunks.push_back(std::make_unique<uint64_t[]>(ring * kChunkMarkers));
    return chunks[index].get();
  }
};

class SteadyClockMarkers final : public TimestampMarkers {
 public:
  explicit SteadyClockMarkers(size_t ring_depth)
      : ring_(std::make_shared<MarkerRing>(ring_depth)) {}

  std::string strategy() const override { return kStrategySteadyClock; }
  size_t ring_depth() const override { return ring_->ring; }
  // steady_clock is CLOCK_MONOTONIC on Linux (libstdc++ and libc++), read through the vDSO
  // with nanosecond units; the period of std::chrono::steady_clock is 1 ns.
  uint64_t resolution_ns() const override {
    using period = std::chrono::steady_clock::period;
    return std::max<uint64_t>(1, 1'000'000'000ull * period::num / period::den);
  }

  void begin_sequence(StreamImpl& stream) override {
    as_host_stream(stream, "begin_sequence")
        .queue()
        ->enqueue({"marker begin_sequence", 0, [ring = ring_] {
                     ring->current.store(ring->started.fetch_add(1, std::memory_order_relaxed),
                                         std::memory_order_release);
                   }});
  }

  void record(StreamImpl& stream, uint32_t marker) override {
    HostStream& host = as_host_stream(stream, "record");
    uint64_t* chunk = ring_->chunk_for(marker);  // resolved now, on the host thread
    const size_t column = marker % kChunkMarkers;
    // A constant name (short enough for std::string's inline buffer): recording a marker
    // formats and allocates no string.
    host.queue()->enqueue({"marker", 0, [ring = ring_, chunk, column] {
                             uint64_t slot =
                                 ring->current.load(std::memory_order_acquire) % ring->ring;
                             chunk[slot * kChunkMarkers + column] = now_ns();
                           }});
  }

  void end_sequence(StreamImpl& stream) override {
    as_host_stream(stream, "end_sequence")
        .queue()
        ->enqueue({"marker end_sequence", 0, [ring = ring_] {
                     {
                       std::lock_guard<std::mutex> lock(ring->done_mutex);
                       ring->finished.store(ring->current.load(std::memory_order_acquire) + 1,
                                            std::memory_order_release);
                     }
                     ring->done_cv.notify_all();
                   }});
  }

  bool is_complete(uint64_t sequence) override {
    return ring_->finished.load(std::memory_order_acquire) > sequence;
  }

  void wait(uint64_t sequence) override {
    std::unique_lock<std::mutex> lock(ring_->done_mutex);
    ring_->done_cv.wait(lock, [&] {
      return ring_->finished.load(std::memory_order_acquire) > sequence;
    });
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    if (!is_complete(sequence))
      throw Error(ErrorCode::InvalidState,
                  fmt::format("read: marker sequence {} has not finished: wait() for it first",
                              sequence),
                  kBackendName);
    if (ring_->started.load(std::memory_order_acquire) > sequence + ring_->ring)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("read: marker sequence {} was overwritten by a later one (ring depth "
                              "{}): read each sequence before launching {} more",
                              sequence, ring_->ring, ring_->ring),
                  kBackendName);
    const uint64_t slot = sequence % ring_->ring;
    std::lock_guard<std::mutex> lock(ring_->chunks_mutex);
    if (count > ring_->chunks.size() * kChunkMarkers)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("read: {} markers asked for but only {} were ever recorded", count,
                              ring_->chunks.size() * kChunkMarkers),
                  kBackendName);
    for (size_t m = 0; m < count; ++m)
      times[m] = ring_->chunks[m / kChunkMarkers][slot * kChunkMarkers + m % kChunkMarkers];
  }

 private:
  std::shared_ptr<MarkerRing> ring_;
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_steady_clock_markers(size_t ring_depth) {
  return std::make_unique<SteadyClockMarkers>(ring_depth);
}

}  // namespace accgraph::detail::host
