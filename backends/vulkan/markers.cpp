// Vulkan timestamp markers (strategy "timestamp_queries"): vkCmdWriteTimestamp into query pools
// inside the recorded work, copied into a host ring slot after each replay (Note [Marker ring]
// in backend.hpp and Note [Query staging] below).
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

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
// sequence are a whole counter period apart; each sequence keeps the host time of its launch
// and of the first observation of its completion, and when that window is not shorter than a
// period (TickConverter::window_is_unambiguous) read() gives kUnmeasurable for every marker
// (a warning is logged once per marker set). lavapipe and NVIDIA have 64 valid bits at 1 ns.

constexpr uint64_t kDestroyWaitNs = 10'000'000'000ull;
constexpr uint64_t kStride = sizeof(uint64_t);
constexpr uint64_t kNotWritten = UINT64_MAX;  // what the publishing fill leaves

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct Slot {
  RawBuffer stamps;     // host-visible: a time per marker, all-ones when not written
  size_t capacity = 0;  // markers
  bool published = false;
  uint64_t sequence = 0;
  size_t used = 0;
  QueueState* queue = nullptr;
  uint64_t value = 0;     // timeline value of the publishing submission
  bool observed = false;  // the host saw `value` reached
  uint64_t launch_ns = 0;
  uint64_t observed_ns = 0;
};

class QueryMarkers final : public TimestampMarkers {
 public:
  QueryMarkers(std::shared_ptr<Runtime> runtime, DeviceState& device, size_t ring)
      : runtime_(std::move(runtime)), device_(device), slots_(ring) {}

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
      for (Slot& slot : slots_) slot.stamps.leak();
      return;
    }
    for (VkQueryPool pool : pools_) vk().vkDestroyQueryPool(device_.device, pool, nullptr);
  }

  std::string strategy() const override { return kStrategyTimestampQueries; }
  size_t ring_depth() const override { return slots_.size(); }
  uint64_t resolution_ns() const override { return device_.timer.resolution_ns(); }

  void begin_sequence(StreamImpl& stream) override {
    as_vk_stream(stream, "begin_sequence");
    used_ = 0;  // nothing to enqueue: the slot is chosen by the copy after the launch
    launch_ns_ = steady_ns();  // an eager sequence starts here (a replay in before_launch)
  }

  void record(StreamImpl& stream_impl, uint32_t marker) override {
    if (marker >= kMarkerCapacity)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("record: marker {} is beyond the {} markers a vulkan sequence can "
                              "hold: time fewer regions per graph",
                              marker, kMarkerCapacity),
                  kBackendName);
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
    used_ = std::max<size_t>(used_, size_t{marker} + 1);
  }

  void end_sequence(StreamImpl& stream) override { as_vk_stream(stream, "end_sequence"); }

  void before_launch(GraphImplInterface&, StreamImpl&, uint64_t) override {
    launch_ns_ = steady_ns();
  }
  void after_launch(GraphImplInterface&, StreamImpl& stream, uint64_t sequence) override {
    publish(stream, sequence);
  }
  void after_eager_sequence(StreamImpl& stream, uint64_t sequence) override {
    publish(stream, sequence);
  }

  bool is_complete(uint64_t sequence) override {
    Slot& slot = slots_[sequence % slots_.size()];
    if (!slot.published || slot.sequence < sequence) return false;  // not launched yet
    if (slot.sequence > sequence || slot.observed) return true;
    if (slot.queue->completed(device_.device) < slot.value) return false;
    observe(slot);
    return true;
  }

  void wait(uint64_t sequence) override {
    const size_t index = sequence % slots_.size();
    Slot& slot = slots_[index];
    if (!slot.published || slot.sequence < sequence)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("markers: sequence {} was never launched (ring slot {} holds {}): "
                              "wait only for sequences after their launch",
                              sequence, index,
                              slot.published ? fmt::format("sequence {}", slot.sequence)
                                             : std::string("none")),
                  kBackendName);
    if (slot.sequence > sequence || slot.observed) return;
    slot.queue->wait(device_.device, slot.value, UINT64_MAX, "markers: waiting for a sequence");
    observe(slot);
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    wait(sequence);
    const Slot& slot = slots_[sequence % slots_.size()];
    if (slot.sequence != sequence)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("read: sequence {} was overwritten by sequence {} in ring slot {}: "
                              "read a sequence before launching ring_depth() ({}) more",
                              sequence, slot.sequence, sequence % slots_.size(), slots_.size()),
                  kBackendName);
    if (count > slot.used)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("read: {} markers asked for, sequence {} recorded {}", count,
                              sequence, slot.used),
                  kBackendName);
    const uint64_t window_ns = slot.observed_ns - slot.launch_ns;
    if (!device_.timer.window_is_unambiguous(window_ns)) {
      warn_unmeasurable(sequence, window_ns);
      std::fill(times, times + count, kUnmeasurable);
      return;
    }
    const auto* stamps = static_cast<const uint64_t*>(slot.stamps.mapped());
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

 private:
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

  void observe(Slot& slot) {
    slot.observed = true;
    slot.observed_ns = steady_ns();
  }

  void publish(StreamImpl& stream_impl, uint64_t sequence) {
    StreamCore& core = *as_vk_stream(stream_impl, "after_launch").core();
    const size_t index = sequence % slots_.size();
    Slot& slot = slots_[index];
    // The caller read the slot's previous sequence before launching this one, except for
    // replays of a graph without regions: then wait for it.
    if (slot.published && !slot.observed) {
      slot.queue->wait(device_.device, slot.value, UINT64_MAX,
                       "markers: waiting for a ring slot to be free");
      observe(slot);
    }
    if (slot.capacity < used_) {  // free: nothing writes the slot now
      const size_t capacity = (used_ + kQueriesPerChunk - 1) / kQueriesPerChunk * kQueriesPerChunk;
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
    sentinel.bytes = used_ * kStride;
    sentinel.word = UINT32_MAX;
    fill.commands.push_back(sentinel);
    for (size_t chunk = 0; chunk * kQueriesPerChunk < used_; ++chunk) {
      const auto count =
          static_cast<uint32_t>(std::min(kQueriesPerChunk, used_ - chunk * kQueriesPerChunk));
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
      value = core.submit_locked(operations, used_ == 0 ? 0 : 3, nullptr, 0,
                                 "markers: publishing a sequence");
    }
    touch(core.queue, value);
    slot.published = true;
    slot.sequence = sequence;
    slot.used = used_;
    slot.queue = &core.queue;
    slot.value = value;
    slot.observed = false;
    slot.launch_ns = launch_ns_;
  }

  void warn_unmeasurable(uint64_t sequence, uint64_t window_ns) {
    if (warned_unmeasurable_) return;
    warned_unmeasurable_ = true;
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
  std::vector<Slot> slots_;
  std::vector<VkQueryPool> pools_;  // kQueriesPerChunk queries each, Note [Query staging]
  size_t used_ = 0;                 // markers recorded in the current sequence
  uint64_t launch_ns_ = 0;          // of the sequence being launched
  std::vector<std::pair<QueueState*, uint64_t>> touched_;  // latest submission per queue
  bool warned_unmeasurable_ = false;
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_markers(std::shared_ptr<Runtime> runtime,
                                               DeviceState& device, size_t ring_depth) {
  return std::make_unique<QueryMarkers>(std::move(runtime), device, ring_depth);
}

}  // namespace accgraph::detail::vulkan
