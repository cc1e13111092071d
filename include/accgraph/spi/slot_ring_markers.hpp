// SPI helper for backends: the host side of TimestampMarkers whose sequences are published into
// host-visible ring slots by device work appended after each launch (Note [Slot ring markers]).
// Header-only; the level_zero and vulkan backends use it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"  // steady_clock_ns

namespace accgraph {

// Note [Slot ring markers]: a device backend's recorded marker writes a fixed place (a command
// recorded once cannot pick its destination per replay), so the times of a sequence are moved
// into ring slot sequence % ring_depth by publishing work the backend appends on the launch's
// stream after the launch (after_launch) or after an eager sequence (after_eager_sequence): a
// copy into host-visible memory that signals a native completion object (an event, a timeline
// value) when its data has landed. The host learns that a sequence finished only through that
// object, never by polling the memory the device writes. What is the same for every such backend
// lives here:
// - which sequence each slot holds, how many markers it recorded, whether its completion is
//   still unobserved (in flight), and the standard errors of wait() and read() for a sequence
//   never launched, overwritten by a later one, or read for more markers than it recorded;
// - publishing into a slot only when it is free: the caller reads a slot's sequence before
//   launching ring_depth() more, except for replays of a graph without regions, whose earlier
//   sequence is waited for first (blocking), so a slot's completion object always belongs to
//   its latest sequence;
// - the host window of each sequence, from its launch (begin_sequence of an eager sequence,
//   before_launch of a replay) to the first observation of its completion: every marker was
//   written inside it, so a device counter that wraps places the markers exactly when the window
//   is shorter than one counter period. Otherwise read() gives kUnmeasurable for every marker of
//   the sequence, and warns once per marker set: never a silently short duration.
// The backend says how to poll, block on and append a slot's publishing work, how its counter
// judges a window, and how a slot's times become nanoseconds.

/// What the host knows about the sequence last published into one ring slot.
struct MarkerSlot {
  bool published = false;  // `sequence` below is meaningful
  uint64_t sequence = 0;
  size_t used = 0;           // markers the sequence recorded
  bool in_flight = false;    // published and its completion not yet observed
  uint64_t launch_ns = 0;    // steady_clock_ns() at its launch
  uint64_t observed_ns = 0;  // steady_clock_ns() when its completion was first observed
};

/// TimestampMarkers on ring slots published after each launch (Note [Slot ring markers]). The
/// backend derives from it and implements strategy(), resolution_ns() and the hooks below; the
/// rest is here. begin_sequence() and end_sequence() enqueue nothing: the slot of a sequence is
/// chosen by the publishing work after its launch.
class SlotRingMarkers : public TimestampMarkers {
 public:
  size_t ring_depth() const override { return slots_.size(); }

  void begin_sequence(StreamImpl& stream) override {
    check_stream(stream, "begin_sequence");
    used_ = 0;
    launch_ns_ = steady_clock_ns();  // an eager sequence starts here (a replay in before_launch)
  }
  void record(StreamImpl& stream, uint32_t marker) override {
    if (marker >= capacity_)
      throw Error(ErrorCode::InvalidArgument,
                  "record: marker " + std::to_string(marker) + " is beyond the " +
                      std::to_string(capacity_) + " markers a " + backend_ +
                      " sequence can hold: time fewer regions per graph",
                  backend_);
    record_marker(stream, marker);
    used_ = std::max<size_t>(used_, size_t{marker} + 1);
  }
  void end_sequence(StreamImpl& stream) override { check_stream(stream, "end_sequence"); }

  void before_launch(GraphImplInterface&, StreamImpl&, uint64_t) override {
    launch_ns_ = steady_clock_ns();
  }
  void after_launch(GraphImplInterface&, StreamImpl& stream, uint64_t sequence) override {
    publish_sequence(stream, sequence);
  }
  void after_eager_sequence(StreamImpl& stream, uint64_t sequence) override {
    publish_sequence(stream, sequence);
  }

  bool is_complete(uint64_t sequence) override {
    const size_t index = slot_index(sequence);
    MarkerSlot& slot = slots_[index];
    if (!slot.published || slot.sequence < sequence) return false;  // not launched yet
    if (slot.sequence > sequence || !slot.in_flight) return true;
    if (!poll_slot(index)) return false;
    observed(index);
    return true;
  }

  void wait(uint64_t sequence) override {
    const size_t index = slot_index(sequence);
    const MarkerSlot& slot = slots_[index];
    if (!slot.published || slot.sequence < sequence)
      throw Error(ErrorCode::InvalidState,
                  "markers: sequence " + std::to_string(sequence) + " was never launched (ring " +
                      "slot " + std::to_string(index) + " holds " +
                      (slot.published ? "sequence " + std::to_string(slot.sequence) : "none") +
                      "): wait only for sequences after their launch",
                  backend_);
    if (slot.sequence > sequence || !slot.in_flight) return;
    block_on_slot(index, "markers: waiting for sequence " + std::to_string(sequence));
    observed(index);
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    if (count > capacity_)
      throw Error(ErrorCode::InvalidArgument,
                  "read: " + std::to_string(count) + " markers asked for, a " + backend_ +
                      " sequence holds at most " + std::to_string(capacity_) +
                      ": ask for at most as many as the sequence recorded",
                  backend_);
    wait(sequence);
    const size_t index = slot_index(sequence);
    const MarkerSlot& slot = slots_[index];
    if (slot.sequence != sequence)
      throw Error(ErrorCode::InvalidState,
                  "read: sequence " + std::to_string(sequence) + " was overwritten by sequence " +
                      std::to_string(slot.sequence) + " in ring slot " + std::to_string(index) +
                      ": read a sequence before launching ring_depth() (" +
                      std::to_string(slots_.size()) + ") more",
                  backend_);
    if (count > slot.used)
      throw Error(ErrorCode::InvalidArgument,
                  "read: " + std::to_string(count) + " markers asked for, sequence " +
                      std::to_string(sequence) + " recorded " + std::to_string(slot.used) +
                      ": ask for at most as many as it recorded",
                  backend_);
    const uint64_t window_ns = slot.observed_ns - slot.launch_ns;
    if (!window_is_unambiguous(window_ns)) {
      if (!warned_unmeasurable_) warn_unmeasurable(sequence, window_ns);
      warned_unmeasurable_ = true;
      std::fill(times, times + count, kUnmeasurable);
      return;
    }
    read_slot(index, times, count);
  }

 protected:
  /// `backend` names the backend in errors; a sequence holds at most `capacity` markers.
  SlotRingMarkers(std::string backend, size_t ring_depth, size_t capacity)
      : backend_(std::move(backend)),
        capacity_(capacity),
        slots_(std::max<size_t>(1, ring_depth)) {}

  /// Markers recorded in the sequence being recorded or launched.
  size_t used() const noexcept { return used_; }

  size_t slot_index(uint64_t sequence) const noexcept { return sequence % slots_.size(); }
  const MarkerSlot& slot(size_t index) const noexcept { return slots_[index]; }
  /// The host saw slot `index`'s publishing work complete (first sighting: the window's end).
  void observed(size_t index) noexcept {
    slots_[index].in_flight = false;
    slots_[index].observed_ns = steady_clock_ns();
  }

  /// Error(InvalidArgument) when `stream` is not one of this backend's, naming `operation`.
  virtual void check_stream(StreamImpl& stream, const char* operation) = 0;
  /// Enqueues on `stream` (or records into its capture) the write of marker `marker` (below
  /// the capacity) into its fixed place.
  virtual void record_marker(StreamImpl& stream, uint32_t marker) = 0;
  /// True when the publishing work of slot `index` (in flight) has completed; does not block.
  virtual bool poll_slot(size_t index) = 0;
  /// Blocks until the publishing work of slot `index` (in flight) has completed; `what` says
  /// what the wait is for, for an error message.
  virtual void block_on_slot(size_t index, const std::string& what) = 0;
  /// Appends on `stream` the work that moves the times of the sequence just ended or launched
  /// (used() markers) into slot `index`, nothing in flight there, and signals its completion.
  virtual void publish_slot(StreamImpl& stream, uint64_t sequence, size_t index) = 0;
  /// True when markers written within `window_ns` of host time can be placed exactly.
  virtual bool window_is_unambiguous(uint64_t window_ns) const = 0;
  /// Logs that `sequence`'s markers cannot be placed; called once per marker set.
  virtual void warn_unmeasurable(uint64_t sequence, uint64_t window_ns) = 0;
  /// Writes the first `count` times of slot `index` (complete), in ns, into `times`.
  virtual void read_slot(size_t index, uint64_t* times, size_t count) = 0;

 private:
  void publish_sequence(StreamImpl& stream, uint64_t sequence) {
    const size_t index = slot_index(sequence);
    MarkerSlot& slot = slots_[index];
    if (slot.in_flight) {  // only after replays without regions: the caller did not read it
      block_on_slot(index, "markers: waiting for sequence " + std::to_string(slot.sequence) +
                               " to free ring slot " + std::to_string(index));
      observed(index);
    }
    publish_slot(stream, sequence, index);
    slot.published = true;
    slot.sequence = sequence;
    slot.used = used_;
    slot.launch_ns = launch_ns_;
    slot.in_flight = true;
  }

  const std::string backend_;
  const size_t capacity_;
  std::vector<MarkerSlot> slots_;
  size_t used_ = 0;         // markers recorded in the current sequence
  uint64_t launch_ns_ = 0;  // of the sequence being launched
  bool warned_unmeasurable_ = false;
};

}  // namespace accgraph
