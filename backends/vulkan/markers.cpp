// Vulkan timestamp markers (strategy "timestamp_queries"): vkCmdWriteTimestamp into query pools
// inside the recorded work, copied into a host ring slot after each replay (Note [Marker ring]
// in backend.hpp, Note [Slot ring markers] in accgraph/spi/slot_ring_markers.hpp and Note
// [Query staging] below).
#include <algorithm>

#include <fmt/format.h>

#include "accgraph/spi/slot_ring_markers.hpp"
#include "vulkan_backend.hpp"

namespace accgraph::detail::vulkan {

namespace {

// Note [Query staging]: a recorded vkCmdWriteTimestamp names its query, and the command buffer
// of a graph is recorded once, so marker m of a marker set always writes query m % 256 of its
// query pool m / 256 (pools of kQueriesPerChunk queries, created and reset on the host by the
// first record() that needs them). After each replay (after_launch) or eager sequence
// (after_eager_sequence) one submission on the same stream, so after the sequence's work in
// queue order, fills the host-visible buffer of ring slot sequence % ring_depth with all-ones,
// copies the used queries into it (vkCmdCopyQueryPoolResults, 64-bit, neither WAIT nor
// WITH_AVAILABILITY: Vulkan then writes nothing for a query that is unavailable, so a marker the
// sequence did not write stays all-ones and reads as kUnmeasurable, never a stale time), then
// resets them for the next sequence (vkCmdResetQueryPool); barriers separate the three. (Mesa
// 22.3's lavapipe ignores the stride of a WITH_AVAILABILITY copy of timestamp queries and packs
// the times, which is why availability is not copied.) The next
// replay writes the queries only after that, since launches of one graph and the eager
// sequences of one stream run in order (graph.serial, stream.order). So K sequences can be in
// flight with no host work between them; the slot's completion is the timeline value of the
// publishing submission (is_complete polls vkGetSemaphoreCounterValue, wait blocks in
// vkWaitSemaphores), and the barrier to the host at the end of every submission makes the
// copied times visible to the CPU.
//
// Note [Counter period]: with fewer than 64 valid timestamp bits the counter wraps. Times are
// placed by masked differences (TickConverter::to_ns), exact only when no two markers of a
// sequence are a whole counter period apart; when a sequence's host window (Note [Slot ring
// markers]) is not shorter than a period (TickConverter::window_is_unambiguous), read() gives
// kUnmeasurable for every marker (a warning is logged once per marker set). lavapipe and NVIDIA
// have 64 valid bits at 1 ns.

constexpr uint64_t kDestroyWaitNs = 10'000'000'000ull;
constexpr uint64_t kStride = sizeof(uint64_t);
constexpr uint64_t kNotWritten = UINT64_MAX;  // what the publishing fill leaves

/// One ring slot's host-visible memory and the submission that publishes into it.
struct SlotMemory {
  RawBuffer stamps;     // a time per marker, all-ones when not written
  size_t capacity = 0;  // markers
  QueueState* queue = nullptr;
  uint64_t value = 0;  // timeline value of the publishing submission
};

/// The ring's bookkeeping is SlotRingMarkers' (Note [Slot ring markers] in
/// accgraph/spi/slot_ring_markers.hpp); a slot's completion is its submission's timeline value.
class QueryMarkers final : public SlotRingMarkers {
 public:
  QueryMarkers(std::shared_ptr<Runtime> runtime, DeviceState& device, size_t ring)
      : SlotRingMarkers(kBackendName, ring, kMarkerCapacity),
        runtime_(std::move(runtime)),
        device_(device),
        memory_(ring_depth()) {}

  ~QueryMarkers() override {
    bool finished = true;
    for (const auto& [queue, value] : touched_) {
      try {
        if (!queue->wait(device_.device, value, kDestroyWaitNs, "destroying timestamp markers"))
          finished = false;
      } catch (const std::exception& e) {
        log(LogLevel::Warning, fmt::format("vulkan: {}", e.what()));
        finished = false;
      }
    }
    if (!finished) {
      log(LogLevel::Warning,
          fmt::format("vulkan: destroying timestamp markers of device {}: work that writes them "
                      "did not finish within {} s; leaking their query pools and ring buffers",
                      device_.index, kDestroyWaitNs / 1'000'000'000ull));
      for (SlotMemory& slot : memory_) slot.stamps.leak();
      return;
    }
    for (VkQueryPool pool : pools_) vk().vkDestroyQueryPool(device_.device, pool, nullptr);
  }

  std::string strategy() const override { return kStrategyTimestampQueries; }
  uint64_t resolution_ns() const override { return device_.timer.resolution_ns(); }

 private:
  void check_stream(StreamImpl& stream, const char* operation) override {
    as_vk_stream(stream, operation);
  }

  void record_marker(StreamImpl& stream_impl, uint32_t marker) override {
    StreamCore& core = *as_vk_stream(stream_impl, "record").core();
    Command command;
    command.kind = Command::Kind::Timestamp;
    command.pool = pool_for(marker);
    command.query = marker % kQueriesPerChunk;
    Operation operation;
    operation.commands.push_back(command);
    const uint64_t value = core.enqueue(std::move(operation),
                                        [&] { return fmt::format("timestamp marker {}", marker); });
    if (value != 0) touch(core.queue, value);
  }

  bool poll_slot(size_t index) override {
    const SlotMemory& slot = memory_[index];
    return slot.queue->completed(device_.device) >= slot.value;
  }

  void block_on_slot(size_t index, const std::string& what) override {
    const SlotMemory& slot = memory_[index];
    slot.queue->wait(device_.device, slot.value, UINT64_MAX, what.c_str());
  }

  bool window_is_unambiguous(uint64_t window_ns) const override {
    return device_.timer.window_is_unambiguous(window_ns);
  }

  void read_slot(size_t index, uint64_t* times, size_t count) override {
    const auto* stamps = static_cast<const uint64_t*>(memory_[index].stamps.mapped());
    bool all_written = true;
    for (size_t i = 0; i < count; ++i) {
      times[i] = stamps[i];
      all_written = all_written && stamps[i] != kNotWritten;
    }
    if (all_written) {
      device_.timer.to_ns(times, count, times);
      return;
    }
    for (size_t i = 0; i < count; ++i)
      times[i] = stamps[i] != kNotWritten
                     ? device_.timer.ticks_to_ns(stamps[i] & device_.timer.mask())
                     : kUnmeasurable;
  }

  VkQueryPool pool_for(uint32_t marker) {
    const size_t chunk = marker / kQueriesPerChunk;
    while (pools_.size() <= chunk) {
      VkQueryPoolCreateInfo info =
          info_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
      info.queryType = VK_QUERY_TYPE_TIMESTAMP;
      info.queryCount = static_cast<uint32_t>(kQueriesPerChunk);
      VkQueryPool pool = VK_NULL_HANDLE;
      ACCGRAPH_VK_CHECK(
          vk().vkCreateQueryPool(device_.device, &info, nullptr, &pool),
          fmt::format("record: creating a query pool for timestamp marker {}", marker));
      vk().vkResetQueryPool(device_.device, pool, 0, info.queryCount);
      pools_.push_back(pool);
    }
    return pools_[chunk];
  }

  void touch(QueueState& queue, uint64_t value) {
    for (auto& [known, latest] : touched_)
      if (known == &queue) {
        latest = std::max(latest, value);
        return;
      }
    touched_.emplace_back(&queue, value);
  }

  // Note [Query staging]; the slot is free (SlotRingMarkers waited for it).
  void publish_slot(StreamImpl& stream_impl, uint64_t /*sequence*/, size_t index) override {
    StreamCore& core = *as_vk_stream(stream_impl, "after_launch").core();
    SlotMemory& slot = memory_[index];
    const size_t used = this->used();
    if (slot.capacity < used) {
      const size_t capacity = (used + kQueriesPerChunk - 1) / kQueriesPerChunk * kQueriesPerChunk;
      slot.stamps =
          device_.allocate(capacity * kStride, MemoryKind::Host, "markers: allocating a ring slot");
      slot.capacity = capacity;
    }
    Operation fill;
    Operation copy;
    Operation reset;
    Command sentinel;
    sentinel.kind = Command::Kind::Fill;
    sentinel.dst = slot.stamps.get();
    sentinel.bytes = used * kStride;
    sentinel.word = UINT32_MAX;
    fill.commands.push_back(sentinel);
    for (size_t chunk = 0; chunk * kQueriesPerChunk < used; ++chunk) {
      const auto count =
          static_cast<uint32_t>(std::min(kQueriesPerChunk, used - chunk * kQueriesPerChunk));
      Command command;
      command.kind = Command::Kind::CopyQueries;
      command.pool = pools_[chunk];
      command.query = 0;
      command.count = count;
      command.dst = slot.stamps.get();
      command.dst_offset = chunk * kQueriesPerChunk * kStride;
      copy.commands.push_back(command);
      command.kind = Command::Kind::ResetQueries;
      reset.commands.push_back(command);
    }
    const Operation operations[3] = {std::move(fill), std::move(copy), std::move(reset)};
    uint64_t value = 0;
    {
      std::lock_guard<std::mutex> lock(core.mutex);
      value = core.submit_locked(operations, used == 0 ? 0 : 3, nullptr, 0,
                                 "markers: publishing a sequence");
    }
    touch(core.queue, value);
    slot.queue = &core.queue;
    slot.value = value;
  }

  void warn_unmeasurable(uint64_t sequence, uint64_t window_ns) override {
    log(LogLevel::Warning,
        fmt::format("vulkan: device {} ('{}'): the timestamp markers of sequence {} cannot be "
                    "placed: {:.3f} ms passed between its launch and its observed completion, "
                    "and the timestamp counter ({} valid bits) wraps every {:.3f} ms; such "
                    "sequences' regions are reported as unmeasurable (logged once per marker "
                    "set)",
                    device_.index, device_.name, sequence, window_ns / 1e6,
                    device_.timer.valid_bits(), device_.timer.counter_period_ns() / 1e6));
  }

  std::shared_ptr<Runtime> runtime_;
  DeviceState& device_;
  std::vector<SlotMemory> memory_;  // [slot]
  std::vector<VkQueryPool> pools_;  // kQueriesPerChunk queries each, Note [Query staging]
  std::vector<std::pair<QueueState*, uint64_t>> touched_;  // latest submission per queue
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_markers(std::shared_ptr<Runtime> runtime,
                                               DeviceState& device, size_t ring_depth) {
  return std::make_unique<QueryMarkers>(std::move(runtime), device, ring_depth);
}

}  // namespace accgraph::detail::vulkan
