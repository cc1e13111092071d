// SPI helper for backends: TimestampMarkers on std::chrono::steady_clock, for backends whose
// streams run host code (a worker thread, the calling thread) and can therefore read the host
// clock when a marker operation runs. Header-only, like PoolTable; the host backend and both
// examples use it. Their ClockSampling is sample_steady_clock (accgraph/spi/clock_sampling.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"  // steady_clock_ns

namespace accgraph {

/// The "device side" of a steady_clock marker set (Note [Marker ring] in backend.hpp): ring
/// slots of marker times, the sequence counter the begin_sequence operation advances when it
/// runs, and the completion the end_sequence operation publishes. Shared (shared_ptr) by the
/// markers object and every operation it enqueued, so a graph replayed after its profiler is
/// gone still writes into live memory.
///
/// Storage grows a chunk of kChunkMarkers markers (times ring depth) at a time and chunks never
/// move, so record() during a capture or between eager records never reallocates memory a
/// running operation may be writing: record() resolves the chunk on the recording thread and
/// the operation only stores into it. Only resize() replaces a chunk's stamps, before any
/// operation of the ring has run (marker.budget).
class SteadyClockMarkerRing {
 public:
  static constexpr size_t kChunkMarkers = 64;

  /// kChunkMarkers markers of every ring slot: marker m of slot s is
  /// stamps[s * kChunkMarkers + m % kChunkMarkers]. Operations hold the Chunk, which never moves.
  struct Chunk {
    std::unique_ptr<uint64_t[]> stamps;
  };

  explicit SteadyClockMarkerRing(size_t depth) : depth_(depth == 0 ? 1 : depth) {}

  size_t depth() const noexcept { return depth_.load(std::memory_order_relaxed); }

  /// Where marker `marker` of every slot lives: pass the result to write(). Grows the storage;
  /// called on the recording thread, before the operation that writes is enqueued.
  Chunk* chunk_for(uint32_t marker) {
    std::lock_guard<std::mutex> lock(chunks_mutex_);
    const size_t index = marker / kChunkMarkers;
    while (chunks_.size() <= index)
      chunks_.push_back(
          std::make_unique<Chunk>(Chunk{std::make_unique<uint64_t[]>(depth() * kChunkMarkers)}));
    recorded_ = std::max<size_t>(recorded_, size_t{marker} + 1);
    return chunks_[index].get();
  }

  /// The bytes one ring slot stores (what a sequence of the markers recorded so far needs).
  size_t bytes_per_slot() {
    std::lock_guard<std::mutex> lock(chunks_mutex_);
    return chunks_.size() * kChunkMarkers * sizeof(uint64_t);
  }

  /// Gives the ring `depth` slots (at least 1), dropping what they held (marker.budget). Only
  /// while no operation of the ring has run or runs: before the first launch of its graph, whose
  /// enqueue orders the new storage before the operations that write it.
  void resize(size_t depth) {
    depth = std::max<size_t>(1, depth);
    std::lock_guard<std::mutex> lock(chunks_mutex_);
    if (depth == this->depth()) return;
    for (const std::unique_ptr<Chunk>& chunk : chunks_)
      chunk->stamps = std::make_unique<uint64_t[]>(depth * kChunkMarkers);
    depth_.store(depth, std::memory_order_relaxed);
  }

  /// Run by the begin_sequence operation: the sequence now running takes the next number (the
  /// device-side counter), so K replays of one graph need no host work per region. Launches of
  /// one graph run one after another, so one "current" sequence suffices.
  void begin() noexcept {
    const uint64_t sequence = started_.fetch_add(1, std::memory_order_relaxed);
    slot_base_.store(static_cast<size_t>(sequence % depth()) * kChunkMarkers,
                     std::memory_order_release);
    current_.store(sequence, std::memory_order_release);
  }

  /// Run by an operation enqueued before a launch whose number is not the next one: the next
  /// begin() takes `sequence` (SteadyClockMarkers::before_launch).
  void restart_at(uint64_t sequence) noexcept {
    started_.store(sequence, std::memory_order_relaxed);
  }

  /// Where marker `marker` sits in its chunk's slot row: pass it to write() with its chunk.
  static constexpr uint32_t offset_in_chunk(uint32_t marker) noexcept {
    return marker % kChunkMarkers;
  }

  /// Run by a marker operation: the time, into the running sequence's slot (begin() computed
  /// where that slot's row starts, so a marker does no division).
  void write(Chunk* chunk, uint32_t offset) noexcept { store(chunk, offset, steady_clock_ns()); }

  /// write() with the time already read: `time` into the running sequence's slot.
  void store(Chunk* chunk, uint32_t offset, uint64_t time) noexcept {
    chunk->stamps[slot_base_.load(std::memory_order_acquire) + offset] = time;
  }

  /// Run by the end_sequence operation: publishes completion of the running sequence.
  void end() {
    {
      std::lock_guard<std::mutex> lock(done_mutex_);
      finished_.store(current_.load(std::memory_order_acquire) + 1, std::memory_order_release);
    }
    done_cv_.notify_all();
  }

  bool is_complete(uint64_t sequence) const noexcept {
    return finished_.load(std::memory_order_acquire) > sequence;
  }

  void wait(uint64_t sequence) {
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_cv_.wait(lock, [&] { return is_complete(sequence); });
  }

  /// TimestampMarkers::read with the standard errors, attributed to `backend`.
  void read(uint64_t sequence, uint64_t* times, size_t count, const std::string& backend) {
    const size_t depth = this->depth();
    if (!is_complete(sequence))
      throw Error(ErrorCode::InvalidState,
                  "read: marker sequence " + std::to_string(sequence) +
                      " has not finished: wait() for it (or poll is_complete()) first",
                  backend);
    if (started_.load(std::memory_order_acquire) > sequence + depth)
      throw Error(ErrorCode::InvalidState,
                  "read: marker sequence " + std::to_string(sequence) +
                      " was overwritten by a later one (ring depth " + std::to_string(depth) +
                      "): read each sequence before launching " + std::to_string(depth) + " more",
                  backend);
    const uint64_t slot = sequence % depth;
    std::lock_guard<std::mutex> lock(chunks_mutex_);
    if (count > recorded_)
      throw Error(ErrorCode::InvalidArgument,
                  "read: " + std::to_string(count) + " markers asked for but this marker set " +
                      "recorded only " + std::to_string(recorded_) +
                      ": ask for at most as many as were recorded (record() numbers them from 0)",
                  backend);
    for (size_t first = 0; first < count; first += kChunkMarkers)  // a chunk's slot row at once
      std::copy_n(chunks_[first / kChunkMarkers]->stamps.get() + slot * kChunkMarkers,
                  std::min(kChunkMarkers, count - first), times + first);
  }

 private:
  std::atomic<size_t> depth_;  // changed only by resize(), before any operation ran

  // chunks_[c] holds markers c * kChunkMarkers .. of every ring slot.
  std::mutex chunks_mutex_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  size_t recorded_ = 0;  // 1 + the highest marker recorded

  std::atomic<uint64_t> started_{0};  // sequences whose begin_sequence ran
  std::atomic<uint64_t> current_{0};  // the sequence now running
  std::atomic<size_t> slot_base_{0};  // (current_ % depth) * kChunkMarkers, set with current_

  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> finished_{0};  // sequences 0..finished-1 are complete
};

/// TimestampMarkers on a SteadyClockMarkerRing. The backend says only how an operation reaches
/// one of its streams (`enqueue`: run it in stream order, or record it while the stream
/// captures); everything else is here.
///
///   return std::make_unique<accgraph::SteadyClockMarkers>(
///       "mybackend", "steady_clock", ring_depth,
///       [](accgraph::StreamImpl& stream, const char* name, std::function<void()> op) {
///         accgraph::stream_cast<MyStream>(stream, "mybackend", name).enqueue(name, std::move(op));
///       },
///       options, kMaxRingDepth);  // optional: size the ring by options.memory_budget
///
/// With `sizing` (create_markers' options) and `max_depth`, a graph's set sizes its ring by
/// sizing.memory_budget at its first launch (marker.budget, Note [Marker budget] in
/// backend.hpp): its capture's operations have not run yet, and it knows their markers.
class SteadyClockMarkers final : public TimestampMarkers {
 public:
  /// Enqueues `op`, named `name` ("marker", "marker begin_sequence", ...), on `stream`.
  using Enqueue =
      std::function<void(StreamImpl& stream, const char* name, std::function<void()> op)>;

  SteadyClockMarkers(std::string backend, std::string strategy, size_t ring_depth, Enqueue enqueue,
                     const MarkerOptions& sizing = {}, size_t max_depth = 0)
      : backend_(std::move(backend)),
        strategy_(std::move(strategy)),
        enqueue_(std::move(enqueue)),
        ring_(std::make_shared<SteadyClockMarkerRing>(ring_depth)),
        ring_depth_option_(sizing.ring_depth),
        memory_budget_(max_depth == 0 ? 0 : sizing.memory_budget),
        max_depth_(max_depth) {}

  std::string strategy() const override { return strategy_; }
  size_t ring_depth() const override { return ring_->depth(); }
  // steady_clock is CLOCK_MONOTONIC on Linux (libstdc++ and libc++), read through the vDSO
  // with nanosecond units.
  uint64_t resolution_ns() const override {
    using period = std::chrono::steady_clock::period;
    return std::max<uint64_t>(1, 1'000'000'000ull * period::num / period::den);
  }

  void begin_sequence(StreamImpl& stream) override {
    enqueue_(stream, "marker begin_sequence", [ring = ring_] { ring->begin(); });
  }

  void record(StreamImpl& stream, uint32_t marker) override {
    SteadyClockMarkerRing::Chunk* chunk = ring_->chunk_for(marker);  // resolved now
    // A constant name: recording a marker formats no string.
    const uint32_t offset = SteadyClockMarkerRing::offset_in_chunk(marker);
    enqueue_(stream, "marker", [ring = ring_, chunk, offset] {
      // The clock first, then the captures: loaded before the clock's call, they had to be kept
      // in callee-saved registers across it (4 more instructions a marker: pushes and pops).
      const uint64_t now = steady_clock_ns();
      ring->store(chunk, offset, now);
    });
  }

  void end_sequence(StreamImpl& stream) override {
    enqueue_(stream, "marker end_sequence", [ring = ring_] { ring->end(); });
  }

  /// Launches are numbered by the device-side counter (begin()). When the caller's number is not
  /// the one after the previous launch (the timing layer skipped one to re-align after a foreign
  /// owner's launch that ran no execution, or two), the counter is set first, in stream order.
  void before_launch(GraphImplInterface&, StreamImpl& stream, uint64_t sequence) override {
    if (!launched_) {  // marker.budget: nothing of this graph's set has run yet
      launched_ = true;
      MarkerOptions sizing;
      sizing.ring_depth = ring_depth_option_;
      sizing.memory_budget = memory_budget_;
      ring_->resize(sizing.budget_depth(ring_->bytes_per_slot(), ring_->depth(), max_depth_));
    }
    if (sequence != expected_launch_)
      enqueue_(stream, "marker before_launch",
               [ring = ring_, sequence] { ring->restart_at(sequence); });
    expected_launch_ = sequence + 1;
  }

  bool is_complete(uint64_t sequence) override { return ring_->is_complete(sequence); }
  void wait(uint64_t sequence) override { ring_->wait(sequence); }
  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    ring_->read(sequence, times, count, backend_);
  }

 private:
  const std::string backend_;
  const std::string strategy_;
  const Enqueue enqueue_;
  std::shared_ptr<SteadyClockMarkerRing> ring_;
  uint64_t expected_launch_ = 0;  // the number the next launch should have
  // marker.budget: the sizing asked for, and whether the graph launched (the depth is final).
  const size_t ring_depth_option_;
  const size_t memory_budget_;
  const size_t max_depth_;
  bool launched_ = false;
};

}  // namespace accgraph
