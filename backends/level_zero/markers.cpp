// Level Zero timestamp markers (strategy "global_timestamps"): zeCommandListAppendWriteGlobalTimestamp
// into a device staging buffer inside the recorded work, copied into a host ring slot after each
// replay (see Note [Marker ring] in backend.hpp and Note [Staging ring] below).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "level_zero_backend.hpp"

namespace accgraph::detail::level_zero {

namespace {

// Note [Staging ring]: the markers of a graph write fixed addresses (a recorded command cannot
// pick its destination per replay), so each marker writes staging[marker] in device memory.
// after_launch appends, on the replay's stream and therefore after the replay's work,
//   copy staging[0..used) -> ring[slot], then copy published[slot] -> done[slot]
// with slot = sequence % ring_depth, the second copy signalling the slot's event. The next replay
// may overwrite the staging buffer only after that copy ran, which the in-order stream (and the
// serialised replays of one graph, Note [Command-list capture]) guarantees, so K replays can be
// in flight with no host work between them. done[slot] == sequence + 1 tells is_complete() that
// the slot holds that sequence; wait() blocks on the slot's event instead of spinning.
class GlobalTimestampMarkers final : public TimestampMarkers {
 public:
  GlobalTimestampMarkers(std::shared_ptr<Runtime> runtime, DeviceState& device, size_t ring)
      : runtime_(std::move(runtime)),
        device_(device),
        ring_(ring),
        slot_events_(*runtime_, static_cast<uint32_t>(ring), "creating the markers' events") {
    try {
      ze_device_mem_alloc_desc_t device_desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
      ACCGRAPH_ZE_CHECK(zeMemAllocDevice(runtime_->context, &device_desc,
                                         kMarkerCapacity * sizeof(uint64_t), 64, device_.handle,
                                         reinterpret_cast<void**>(&staging_)),
                        "global_timestamps markers: allocating the staging buffer");
      ze_host_mem_alloc_desc_t host_desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
      const size_t host_bytes = (ring_ * kMarkerCapacity + 2 * ring_) * sizeof(uint64_t);
      ACCGRAPH_ZE_CHECK(zeMemAllocHost(runtime_->context, &host_desc, host_bytes, 64,
                                       reinterpret_cast<void**>(&ring_stamps_)),
                        "global_timestamps markers: allocating the ring");
      std::memset(ring_stamps_, 0, host_bytes);
      done_ = ring_stamps_ + ring_ * kMarkerCapacity;
      published_ = done_ + ring_;
    } catch (...) {
      release();
      throw;
    }
  }

  ~GlobalTimestampMarkers() override { release(); }

  std::string strategy() const override { return kStrategyGlobalTimestamps; }
  size_t ring_depth() const override { return ring_; }
  uint64_t resolution_ns() const override { return device_.timer.resolution_ns(); }

  void begin_sequence(StreamImpl& stream) override {
    as_ze_stream(stream, "begin_sequence");
    used_ = 0;  // nothing to enqueue: the slot is chosen by the copy after the launch
  }

  void record(StreamImpl& stream_impl, uint32_t marker) override {
    if (marker >= kMarkerCapacity)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("record: marker {} is beyond the {} markers a level_zero sequence "
                              "can hold: time fewer regions per graph",
                              marker, kMarkerCapacity),
                  kBackendName);
    StreamCore& core = *as_ze_stream(stream_impl, "record").core();
    std::lock_guard<std::mutex> lock(core.mutex);
    ze_command_list_handle_t list = core.target();
    ACCGRAPH_ZE_CHECK(
        zeCommandListAppendWriteGlobalTimestamp(list, staging_ + marker, nullptr, 0, nullptr),
        fmt::format("record: timestamp marker {}", marker));
    core.order_after_append(list);
    core.note(fmt::format("timestamp marker {}", marker));
    used_ = std::max<size_t>(used_, size_t{marker} + 1);
  }

  void end_sequence(StreamImpl& stream) override { as_ze_stream(stream, "end_sequence"); }

  void after_launch(GraphImplInterface&, StreamImpl& stream, uint64_t sequence) override {
    publish(stream, sequence);
  }

  void after_eager_sequence(StreamImpl& stream, uint64_t sequence) override {
    publish(stream, sequence);
  }

  bool is_complete(uint64_t sequence) override {
    return __atomic_load_n(&done_[sequence % ring_], __ATOMIC_ACQUIRE) == sequence + 1;
  }

  void wait(uint64_t sequence) override {
    if (is_complete(sequence)) return;
    ACCGRAPH_ZE_CHECK(zeEventHostSynchronize(slot_events_[sequence % ring_], UINT64_MAX),
                      fmt::format("markers: waiting for sequence {}", sequence));
    // The event may also have been set by the slot's previous use (a replay without regions is
    // never collected); the published value is the authority.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!is_complete(sequence)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw Error(ErrorCode::BackendError,
                    fmt::format("markers: sequence {} was not published within 60 s (ring slot "
                                "{} holds sequence {}): was it launched?",
                                sequence, sequence % ring_,
                                static_cast<int64_t>(done_[sequence % ring_]) - 1),
                    kBackendName);
      std::this_thread::yield();
    }
  }

  std::vector<uint64_t> read(uint64_t sequence, size_t count) override {
    if (count > kMarkerCapacity)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("read: {} markers asked for, a level_zero sequence holds at most {}",
                              count, kMarkerCapacity),
                  kBackendName);
    wait(sequence);
    return device_.timer.to_ns(ring_stamps_ + (sequence % ring_) * kMarkerCapacity, count);
  }

 private:
  void publish(StreamImpl& stream_impl, uint64_t sequence) {
    StreamCore& core = *as_ze_stream(stream_impl, "after_launch").core();
    const size_t slot = sequence % ring_;
    // The slot is free: the caller read its previous sequence before launching this one.
    ACCGRAPH_ZE_CHECK(zeEventHostReset(slot_events_[slot]), "markers: reusing a ring slot");
    __atomic_store_n(&done_[slot], 0, __ATOMIC_RELEASE);
    published_[slot] = sequence + 1;
    std::lock_guard<std::mutex> lock(core.mutex);
    ze_command_list_handle_t list = core.list;
    if (used_ > 0) {
      ACCGRAPH_ZE_CHECK(zeCommandListAppendMemoryCopy(list, ring_stamps_ + slot * kMarkerCapacity,
                                                      staging_, used_ * sizeof(uint64_t), nullptr,
                                                      0, nullptr),
                        fmt::format("markers: copying sequence {} into its ring slot", sequence));
      core.order_after_append(list);
    }
    ACCGRAPH_ZE_CHECK(zeCommandListAppendMemoryCopy(list, &done_[slot], &published_[slot],
                                                    sizeof(uint64_t), slot_events_[slot], 0,
                                                    nullptr),
                      fmt::format("markers: publishing sequence {}", sequence));
  }

  void release() noexcept {
    if (staging_ != nullptr) ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, staging_), "freeing markers");
    if (ring_stamps_ != nullptr)
      ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, ring_stamps_), "freeing markers");
    staging_ = nullptr;
    ring_stamps_ = nullptr;
  }

  std::shared_ptr<Runtime> runtime_;
  DeviceState& device_;
  size_t ring_;
  EventSet slot_events_;
  uint64_t* staging_ = nullptr;      // device: kMarkerCapacity stamps of the running sequence
  uint64_t* ring_stamps_ = nullptr;  // host: ring_ slots of kMarkerCapacity stamps, then:
  uint64_t* done_ = nullptr;         //   ring_ published sequence numbers (+1)
  uint64_t* published_ = nullptr;    //   ring_ values the publishing copies read
  size_t used_ = 0;                  // markers recorded in the current sequence
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_markers(std::shared_ptr<Runtime> runtime,
                                               DeviceState& device, size_t ring_depth) {
  return std::make_unique<GlobalTimestampMarkers>(std::move(runtime), device, ring_depth);
}

}  // namespace accgraph::detail::level_zero
