// Level Zero timestamp markers (strategy "global_timestamps"):
// zeCommandListAppendWriteGlobalTimestamp into device staging memory inside the recorded work,
// copied into a host ring slot after each replay (see Note [Marker ring] in backend.hpp, Note
// [Slot ring markers] in accgraph/spi/slot_ring_markers.hpp and Note [Staging ring] below).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "accgraph/spi/slot_ring_markers.hpp"
#include "level_zero_backend.hpp"

namespace accgraph::detail::level_zero {

namespace {

// Note [Staging ring]: the markers of a graph write fixed addresses (a recorded command cannot
// pick its destination per replay), so marker m writes its place in the staging memory, device
// memory in chunks: chunk c holds the markers from 64 * (2^c - 1) on, 64 << c of them, and is
// allocated by the first record() that needs it, so a set costs memory in proportion to the
// markers it records (a whole 8192-marker ring used to be allocated up front: 1 MiB of host
// memory per eager marker set). after_launch appends, on the replay's stream and therefore
// after the replay's work, one copy per used chunk into the slot's host buffer (grown, when
// needed, while the slot is free), with slot = sequence % ring_depth; the last copy signals the
// slot's event. The next replay may overwrite the staging memory only after those copies ran,
// which the in-order stream (and the serialised replays of one graph, Note [Command-list
// capture]) guarantees, so K replays can be in flight with no host work between them.
//
// Note [Completion through events]: completion is observed only through the slot's event,
// which the driver signals after the copies' data has landed: zeEventQueryStatus /
// zeEventHostSynchronize returning ZE_RESULT_SUCCESS makes that data visible to the host
// (Level Zero's event semantics; the CPU test driver pairs the signal and the query with one
// mutex, Note [Event memory order] in its cmdlist.cpp). Polling the host memory the copies write
// would be a data race with the device's writes. The host resets a slot's event only when no signal
// of it is still pending: SlotRingMarkers publishes into a slot only after an unobserved earlier
// use of it completed (only replays of a graph without regions are launched without being read), so
// a signalled event always belongs to the slot's latest sequence.
//
// Note [Counting executions]: a ForeignGraph's owner whose launch runs the graph twice leaves, on
// this backend, one publication of the second execution's markers: the ring's fence check (Note
// [Launch fences] in timing/engine/marker_ring.cpp) finds them inside the launch's window and the
// next sequence's slot unwritten, so the launch was reported measured, where the host and cuda
// backends, whose executions pick their own slots, report it unmeasurable. So a captured sequence
// first copies marker 0's staging place (what the last execution wrote) into a device cell,
// `prior`, and each publication copies `prior` and the `expected` cell into the slot, then marker
// 0's place into `expected`. One execution since the last publication read exactly what that
// publication saw; a second one read what the first wrote. read() gives kUnmeasurable for a
// sequence whose two cells differ (its first publication, with nothing before it to compare, is not
// checked; a launch of nothing also differs, and is unmeasurable anyway). Three copies of 8-16
// bytes per launch, one per execution.
//
// Note [Counter period]: the device counter keeps timestampValidBits bits and wraps every
// period. Markers are converted by masked differences (TickConverter::to_ns), exact only when
// no two markers of a sequence are a whole period or more apart, which a recorded timestamp
// cannot show. So SlotRingMarkers keeps each sequence's host window, from its launch to the
// first observation of its completion (Note [Slot ring markers]): when the window (plus margin)
// is shorter than one period (TickConverter::window_is_unambiguous), the differences are exact;
// otherwise read() gives kUnmeasurable for the sequence and warns once per marker set, never a
// silently short duration.

constexpr size_t kFirstChunkMarkers = 64;
constexpr size_t kChunkCount = 8;  // 64 * (2^8 - 1) = 16320 >= kMarkerCapacity
static_assert(kFirstChunkMarkers * ((size_t{1} << kChunkCount) - 1) >= kMarkerCapacity);

/// How long a marker set being destroyed waits for device work that still writes it.
constexpr std::chrono::seconds kDestroyWait{10};

size_t chunk_first(size_t chunk) { return kFirstChunkMarkers * ((size_t{1} << chunk) - 1); }
size_t chunk_size(size_t chunk) {
  return std::min(kFirstChunkMarkers << chunk, kMarkerCapacity - chunk_first(chunk));
}
size_t chunk_of(size_t marker) {
  size_t chunk = 0;
  while (chunk_first(chunk + 1) <= marker) ++chunk;
  return chunk;
}

/// The host memory of one ring slot, which the publishing copies fill.
struct SlotMemory {
  uint64_t* stamps = nullptr;  // `capacity` markers
  size_t capacity = 0;
  uint64_t* executions = nullptr;  // the two cells of Note [Counting executions], copied
  bool checked = false;            // whether they say something for this slot's sequence
};

/// The ring's bookkeeping is SlotRingMarkers' (Note [Slot ring markers] in
/// accgraph/spi/slot_ring_markers.hpp); a slot's completion object is its event.
class GlobalTimestampMarkers final : public SlotRingMarkers {
 public:
  GlobalTimestampMarkers(std::shared_ptr<Runtime> runtime, DeviceState& device, size_t ring)
      : SlotRingMarkers(kBackendName, ring, kMarkerCapacity),
        runtime_(std::move(runtime)),
        device_(device),
        memory_(ring_depth()),
        // One event per slot, and one for draining unpublished eager markers at destruction.
        events_(std::make_unique<EventSet>(*runtime_, static_cast<uint32_t>(ring_depth() + 1),
                                           "creating the markers' events")) {}

  ~GlobalTimestampMarkers() override {
    if (drain()) {
      release();
      return;
    }
    // Never free memory (or events) a device command may still write.
    size_t bytes = 0;
    for (size_t c = 0; c < kChunkCount; ++c)
      if (staging_[c] != nullptr) bytes += chunk_size(c) * sizeof(uint64_t);
    for (const SlotMemory& slot : memory_)
      bytes += (slot.capacity + (slot.executions != nullptr ? 2 : 0)) * sizeof(uint64_t);
    if (execution_cells_ != nullptr) bytes += 2 * sizeof(uint64_t);
    events_->leak();
    log(LogLevel::Warning,
        fmt::format("level_zero: destroying timestamp markers of device {}: leaking {} bytes of "
                    "marker memory and {} events, which device work that did not finish within "
                    "{} s may still write",
                    device_.index, bytes, ring_depth() + 1, kDestroyWait.count()));
  }

  std::string strategy() const override { return kStrategyGlobalTimestamps; }
  uint64_t resolution_ns() const override { return device_.timer.resolution_ns(); }

 private:
  void check_stream(StreamImpl& stream, const char* operation) override {
    as_ze_stream(stream, operation);
  }

  void record_marker(StreamImpl& stream_impl, uint32_t marker) override {
    const std::shared_ptr<StreamCore>& shared = as_ze_stream(stream_impl, "record").core();
    StreamCore& core = *shared;
    uint64_t* destination = staging_for(marker);
    std::shared_ptr<StreamCore> keep = core.keep_list_alive("record");
    std::lock_guard<std::mutex> lock(core.mutex);
    // Captured or eager: a wrapped list may be in the application's native capture (Note
    // [Native captures of wrapped lists] in stream.cpp), whose markers run at each launch.
    const bool captured = core.capture_state() != StreamCapture::None;
    ze_command_list_handle_t list = core.target();
    if (captured && marker == 0) {  // Note [Counting executions]
      if (execution_cells_ == nullptr) {
        ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
        ACCGRAPH_ZE_CHECK(
            zeMemAllocDevice(runtime_->context, &desc, 2 * sizeof(uint64_t), 64, device_.handle,
                             reinterpret_cast<void**>(&execution_cells_)),
            "record: allocating the cells that count executions");
      }
      ACCGRAPH_ZE_CHECK(zeCommandListAppendMemoryCopy(list, execution_cells_, destination,
                                                      sizeof(uint64_t), nullptr, 0, nullptr),
                        "record: copying the previous execution's first marker");
      core.order_after_append(list);
      counts_executions_ = true;
    }
    ACCGRAPH_ZE_CHECK(
        zeCommandListAppendWriteGlobalTimestamp(list, destination, nullptr, 0, nullptr),
        fmt::format("record: timestamp marker {}", marker));
    core.order_after_append(list);
    // Named only in accgraph's captures (for debug_dump): no formatting on the eager path.
    if (core.capture != StreamCapture::None) core.note(fmt::format("timestamp marker {}", marker));
    if (!captured) note_unpublished(shared);
  }

  // Note [Completion through events].
  bool poll_slot(size_t index) override {
    const ze_result_t result = zeEventQueryStatus((*events_)[index]);
    if (result == ZE_RESULT_NOT_READY) return false;
    if (result != ZE_RESULT_SUCCESS)
      throw_error(result, "zeEventQueryStatus",
                  fmt::format("markers: polling sequence {}", slot(index).sequence));
    return true;
  }

  void block_on_slot(size_t index, const std::string& what) override {
    ACCGRAPH_ZE_CHECK(zeEventHostSynchronize((*events_)[index], UINT64_MAX), what);
  }

  bool window_is_unambiguous(uint64_t window_ns) const override {
    return device_.timer.window_is_unambiguous(window_ns);
  }

  void read_slot(size_t index, uint64_t* times, size_t count) override {
    const SlotMemory& memory = memory_[index];
    if (memory.checked && memory.executions[0] != memory.executions[1]) {
      // Note [Counting executions]: more than one execution (or none) since the last launch.
      std::fill(times, times + count, kUnmeasurable);
      return;
    }
    device_.timer.to_ns(memory.stamps, count, times);
  }

  /// The staging place of `marker`, allocating its chunk on first use.
  uint64_t* staging_for(uint32_t marker) {
    const size_t chunk = chunk_of(marker);
    if (staging_[chunk] == nullptr) {
      ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
      ACCGRAPH_ZE_CHECK(
          zeMemAllocDevice(runtime_->context, &desc, chunk_size(chunk) * sizeof(uint64_t), 64,
                           device_.handle, reinterpret_cast<void**>(&staging_[chunk])),
          fmt::format("record: allocating staging memory for timestamp marker {}", marker));
    }
    return staging_[chunk] + (marker - chunk_first(chunk));
  }

  /// Eager markers appended to `core`'s list that no publishing copy (and event) follows yet.
  void note_unpublished(const std::shared_ptr<StreamCore>& core) {
    for (const auto& stream : unpublished_)
      if (!stream.owner_before(core) && !core.owner_before(stream)) return;
    unpublished_.push_back(core);
  }

  /// Grows the slot's stamps to hold `used` markers, and gives it execution cells when
  /// `counting` (Note [Counting executions]).
  void allocate_slot(SlotMemory& slot, size_t index, size_t used, bool counting) {
    if (slot.capacity < used) {
      const size_t capacity = chunk_first(chunk_of(used - 1) + 1);
      uint64_t* stamps = nullptr;
      ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
      ACCGRAPH_ZE_CHECK(
          zeMemAllocHost(runtime_->context, &desc, capacity * sizeof(uint64_t), 64,
                         reinterpret_cast<void**>(&stamps)),
          fmt::format("markers: allocating ring slot {} for {} markers", index, used));
      if (slot.stamps != nullptr)
        ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, slot.stamps), "markers: growing a ring slot");
      slot.stamps = stamps;
      slot.capacity = capacity;
    }
    if (counting && slot.executions == nullptr) {
      ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
      ACCGRAPH_ZE_CHECK(zeMemAllocHost(runtime_->context, &desc, 2 * sizeof(uint64_t), 64,
                                       reinterpret_cast<void**>(&slot.executions)),
                        fmt::format("markers: allocating ring slot {}'s execution cells", index));
    }
  }

  /// Appends to `core`'s list (caller holds its mutex) the copies of the `used` staged markers
  /// into the slot, the last one signalling `event` (a barrier signals it when none is staged).
  void append_slot_copies(StreamCore& core, SlotMemory& slot, ze_event_handle_t event,
                          uint64_t sequence, size_t index, size_t used) {
    ze_command_list_handle_t list = core.list;
    if (used == 0) {
      ACCGRAPH_ZE_CHECK(zeCommandListAppendBarrier(list, event, 0, nullptr),
                        fmt::format("markers: publishing sequence {}", sequence));
    } else {
      const size_t last = chunk_of(used - 1);
      for (size_t c = 0; c <= last; ++c) {
        const size_t markers = std::min(chunk_size(c), used - chunk_first(c));
        ACCGRAPH_ZE_CHECK(
            zeCommandListAppendMemoryCopy(list, slot.stamps + chunk_first(c), staging_[c],
                                          markers * sizeof(uint64_t), c == last ? event : nullptr,
                                          0, nullptr),
            fmt::format("markers: copying sequence {} into ring slot {}", sequence, index));
        core.order_after_append(list);
      }
    }
  }

  // Note [Staging ring]; the slot is free (SlotRingMarkers waited for it).
  void publish_slot(StreamImpl& stream_impl, uint64_t sequence, size_t index) override {
    const std::shared_ptr<StreamCore>& shared = as_ze_stream(stream_impl, "after_launch").core();
    StreamCore& core = *shared;
    SlotMemory& slot = memory_[index];
    ze_event_handle_t event = (*events_)[index];
    const size_t used = this->used();
    const bool counting = counts_executions_ && used > 0;  // Note [Counting executions]
    allocate_slot(slot, index, used, counting);
    slot.checked = counting && published_counting_;
    ACCGRAPH_ZE_CHECK(zeEventHostReset(event), "markers: reusing a ring slot");
    std::shared_ptr<StreamCore> keep = core.keep_list_alive("after_launch");
    std::lock_guard<std::mutex> lock(core.mutex);
    ze_command_list_handle_t list = core.list;
    // Until the signalling command is appended, what was appended is drained at destruction.
    note_unpublished(shared);
    if (counting) {
      // prior and expected into the slot, then what this publication saw as the next expected.
      ACCGRAPH_ZE_CHECK(zeCommandListAppendMemoryCopy(list, slot.executions, execution_cells_,
                                                      2 * sizeof(uint64_t), nullptr, 0, nullptr),
                        fmt::format("markers: copying sequence {}'s execution cells", sequence));
      core.order_after_append(list);
      ACCGRAPH_ZE_CHECK(zeCommandListAppendMemoryCopy(list, execution_cells_ + 1, staging_[0],
                                                      sizeof(uint64_t), nullptr, 0, nullptr),
                        fmt::format("markers: noting sequence {}'s first marker", sequence));
      core.order_after_append(list);
      published_counting_ = true;
    }
    append_slot_copies(core, slot, event, sequence, index, used);
    // The slot's event now follows everything this stream's list holds of this marker set.
    unpublished_.erase(std::remove_if(unpublished_.begin(), unpublished_.end(),
                                      [&](const std::weak_ptr<StreamCore>& stream) {
                                        return !stream.owner_before(shared) &&
                                               !shared.owner_before(stream);
                                      }),
                       unpublished_.end());
  }

  void warn_unmeasurable(uint64_t sequence, uint64_t window_ns) override {
    const char* bits_variable = std::getenv("ZE_ACCGRAPH_CPU_VALID_BITS");
    log(LogLevel::Warning,
        fmt::format("level_zero: device {} ('{}'): the timestamp markers of sequence {} cannot "
                    "be placed: {:.3f} ms passed between its launch and its observed "
                    "completion, and the device's timestamp counter ({} valid bits, {} ns per "
                    "tick) wraps every {:.3f} ms, so it may have wrapped more than once between "
                    "two markers; such sequences' regions are reported as unmeasurable (this "
                    "warning is logged once per marker set). Keep timed work shorter than the "
                    "period and collect reports soon after it ends{}",
                    device_.index, device_.name, sequence, window_ns / 1e6,
                    device_.timer.valid_bits(), device_.timer.resolution_ns(),
                    device_.timer.period_ns() / 1e6,
                    bits_variable == nullptr
                        ? std::string()
                        : fmt::format(", or raise ZE_ACCGRAPH_CPU_VALID_BITS (now {}) for the "
                                      "CPU test driver",
                                      bits_variable)));
  }

  /// Waits, bounded, for everything appended that still writes this set's memory or signals its
  /// events; false when something did not finish.
  bool drain() noexcept {
    const auto deadline = std::chrono::steady_clock::now() + kDestroyWait;
    auto remaining_ns = [&]() -> uint64_t {
      auto left = deadline - std::chrono::steady_clock::now();
      return left.count() <= 0
                 ? 0
                 : static_cast<uint64_t>(
                       std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
    };
    bool finished = true;
    for (size_t i = 0; i < ring_depth(); ++i) {
      if (!slot(i).in_flight) continue;
      const ze_result_t result = zeEventHostSynchronize((*events_)[i], remaining_ns());
      if (result == ZE_RESULT_SUCCESS) {
        observed(i);
        continue;
      }
      log_failure(
          result, "zeEventHostSynchronize",
          fmt::format("destroying timestamp markers: waiting for sequence {}", slot(i).sequence));
      finished = false;
    }
    // Eager markers that no publishing copy follows (a region still open, or a failed
    // publish): wait for their stream through the spare event.
    ze_event_handle_t drain_event = (*events_)[ring_depth()];
    for (const auto& weak : unpublished_) {
      std::shared_ptr<StreamCore> core = weak.lock();
      if (core == nullptr || core->list_destroyed()) continue;  // it finished its work
      try {
        std::lock_guard<std::mutex> lock(core->mutex);
        if (core->capture_state() == StreamCapture::Native) {
          // Its list is recording (for accgraph or natively): nothing can be appended that
          // would run now.
          log(LogLevel::Warning,
              "level_zero: destroying timestamp markers: a stream with unpublished markers "
              "is capturing, so they cannot be waited for");
          finished = false;
          continue;
        }
        ACCGRAPH_ZE_CHECK(zeEventHostReset(drain_event), "destroying timestamp markers");
        ACCGRAPH_ZE_CHECK(zeCommandListAppendBarrier(core->list, drain_event, 0, nullptr),
                          "destroying timestamp markers: waiting for a stream");
        const ze_result_t result = zeEventHostSynchronize(drain_event, remaining_ns());
        if (result != ZE_RESULT_SUCCESS) {
          log_failure(result, "zeEventHostSynchronize",
                      "destroying timestamp markers: waiting for a stream");
          finished = false;
          break;  // the drain event may still be signalled: do not reuse it
        }
      } catch (const std::exception& e) {
        log(LogLevel::Warning, fmt::format("level_zero: {}", e.what()));
        finished = false;
      }
    }
    return finished;
  }

  void release() noexcept {
    for (uint64_t*& chunk : staging_) {
      if (chunk != nullptr) ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, chunk), "freeing markers");
      chunk = nullptr;
    }
    for (SlotMemory& slot : memory_) {
      if (slot.stamps != nullptr)
        ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, slot.stamps), "freeing markers");
      if (slot.executions != nullptr)
        ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, slot.executions), "freeing markers");
      slot.stamps = slot.executions = nullptr;
      slot.capacity = 0;
    }
    if (execution_cells_ != nullptr)
      ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, execution_cells_), "freeing markers");
    execution_cells_ = nullptr;
  }

  std::shared_ptr<Runtime> runtime_;
  DeviceState& device_;
  std::vector<SlotMemory> memory_;       // [slot]
  std::unique_ptr<EventSet> events_;     // [slot] per ring slot, [ring] for drain()
  uint64_t* staging_[kChunkCount] = {};  // device memory, Note [Staging ring]
  // Note [Counting executions]: device cells {prior, expected}; whether a captured sequence
  // copies into them; whether a publication has set `expected`.
  uint64_t* execution_cells_ = nullptr;
  bool counts_executions_ = false;
  bool published_counting_ = false;
  std::vector<std::weak_ptr<StreamCore>> unpublished_;
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_markers(std::shared_ptr<Runtime> runtime,
                                               DeviceState& device, size_t ring_depth) {
  return std::make_unique<GlobalTimestampMarkers>(std::move(runtime), device, ring_depth);
}

}  // namespace accgraph::detail::level_zero
