// Vulkan graphs: a capture records the stream's operations; instantiate records them into one
// primary command buffer; replay submits it (Note [Recorded graphs]).
#include <fmt/format.h>

#include "common/private_pool_graph.hpp"
#include "vulkan_backend.hpp"

namespace accgraph::detail::vulkan {

namespace {

// Note [Recorded graphs]: while a stream captures, its operations (copies, fills, markers,
// delays) are appended to the graph's list of operations instead of being submitted: that list
// is the captured graph (debug_dump prints it). instantiate() records it into one primary
// command buffer, with a full memory barrier between two operations so that they run in the
// stream's order, and a barrier to the host at the end (StreamCore::submit_locked records eager
// operations the same way). A replay submits that command buffer on the replay stream's queue
// after the stream's earlier work (Note [Queues and timelines] in stream.cpp); it is recorded
// with SIMULTANEOUS_USE, so replays can be submitted back to back while earlier ones are
// pending. Launches of one graph run one after another (graph.serial): on one queue by the
// queue's timeline, and a replay on another queue than the previous one first waits for the
// previous queue's latest submission (which includes that replay and anything the markers
// submitted after it). A replay on a capturing stream appends the graph's operations to that
// capture (replay.nested), so they run each time the outer graph is replayed.
class VkGraph final : public PrivatePoolGraph<Runtime> {
 public:
  using PrivatePoolGraph::PrivatePoolGraph;

  ~VkGraph() override {
    reset_for_destructor(kBackendName);
    if (pool_ != VK_NULL_HANDLE && !leaked_)
      vk().vkDestroyCommandPool(device_->device, pool_, nullptr);
  }

  // pool_sharing is false: the core passes only new private pools (Note [Capability gates] in
  // accgraph/spi/backend.hpp), so every capture gets a new pool id.
  void capture_begin(StreamImpl& stream_impl, PoolId /*pool*/, CaptureMode /*mode*/) override {
    std::shared_ptr<StreamCore> core = as_vk_stream(stream_impl, "capture_begin").core();
    if (device_ != nullptr && device_ != &core->device)
      discard_executable_pool();  // a new device: the old pool belongs to the old one
    {
      std::lock_guard<std::mutex> lock(core->mutex);
      operations_.clear();
      core->capture = &operations_;
    }
    capture_core_ = std::move(core);
    device_ = &capture_core_->device;
    take_new_pool_id();
  }

  void capture_end() override {
    std::shared_ptr<StreamCore> core = std::move(capture_core_);
    std::lock_guard<std::mutex> lock(core->mutex);
    core->capture = nullptr;
  }

  void instantiate() override {
    const Api& api = vk();
    if (pool_ == VK_NULL_HANDLE)
      pool_ = create_command_pool(*device_, 0, "instantiate: creating a command pool");
    VkCommandBuffer buffer =
        allocate_command_buffer(*device_, pool_, "instantiate: allocating the command buffer");
    try {
      VkCommandBufferBeginInfo begin =
          info_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
      begin.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;
      ACCGRAPH_VK_CHECK(api.vkBeginCommandBuffer(buffer, &begin), "instantiate");
      record_operations(*device_, buffer, operations_.data(), operations_.size());
      ACCGRAPH_VK_CHECK(api.vkEndCommandBuffer(buffer),
                        fmt::format("instantiate ({} operations)", operations_.size()));
    } catch (...) {
      api.vkFreeCommandBuffers(device_->device, pool_, 1, &buffer);
      throw;
    }
    executable_ = buffer;
    count_instantiation();
  }

  void replay(StreamImpl& stream_impl) override {
    std::shared_ptr<StreamCore> core = as_vk_stream(stream_impl, "replay").core();
    if (&core->device != device_)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("replay: the graph was captured on vulkan device {}, the stream is "
                              "on device {}",
                              device_->index, core->device.index),
                  kBackendName);
    QueueState::Wait previous{VK_NULL_HANDLE, 0};
    size_t waits = 0;
    if (last_queue_ != nullptr && last_queue_ != &core->queue) {
      previous = {last_queue_->timeline, last_queue_->latest()};
      waits = 1;
    }
    std::lock_guard<std::mutex> lock(core->mutex);
    if (core->capture != nullptr) {  // replay.nested
      core->capture->insert(core->capture->end(), operations_.begin(), operations_.end());
      return;
    }
    last_value_ = core->submit_buffers_locked(&executable_, 1, &previous, waits, "replay");
    last_queue_ = &core->queue;
  }

  void reset() override {
    if (capture_core_) {
      std::shared_ptr<StreamCore> core = std::move(capture_core_);
      std::lock_guard<std::mutex> lock(core->mutex);
      core->capture = nullptr;
    }
    operations_.clear();
    if (executable_ == VK_NULL_HANDLE) return;
    // (life.enqueued): replays already submitted still run; the command buffer must outlive
    // them. Launches run in order, so the latest one finishing means all did.
    if (last_queue_ != nullptr &&
        !last_queue_->wait(device_->device, last_value_, 30'000'000'000ull,
                           "reset: waiting for the graph's replays")) {
      log(LogLevel::Warning,
          "vulkan: resetting a graph: its replays did not finish within 30 s; leaking its "
          "command buffer");
      leaked_ = true;
      pool_ = VK_NULL_HANDLE;
    } else {
      vk().vkFreeCommandBuffers(device_->device, pool_, 1, &executable_);
    }
    executable_ = VK_NULL_HANDLE;
    last_queue_ = nullptr;
    last_value_ = 0;
  }

  void enable_debug_mode() override {}  // the operations are always kept: nothing to switch on

  void debug_dump(const std::string& path) override {
    write_debug_dump(path, kBackendName, [&](std::ostream& out) {
      out << fmt::format(
          "# vulkan graph on device {} ('{}'): {} operations, recorded into one "
          "primary command buffer with a full memory barrier between operations\n",
          device_->index, device_->name, operations_.size());
      for (size_t i = 0; i < operations_.size(); ++i) {
        out << fmt::format("{}: {}\n", i, operations_[i].description);
        for (const Command& command : operations_[i].commands)
          out << "    " << describe(command) << "\n";
      }
    });
  }

 private:
  size_t captured_operations() const noexcept override { return operations_.size(); }

  static std::string describe(const Command& command) {
    switch (command.kind) {
      case Command::Kind::Copy:
        return fmt::format("vkCmdCopyBuffer src {}+{} dst {}+{} {} bytes",
                           static_cast<const void*>(command.src), command.src_offset,
                           static_cast<const void*>(command.dst), command.dst_offset,
                           command.bytes);
      case Command::Kind::Fill:
        return fmt::format("vkCmdFillBuffer dst {}+{} {} bytes data 0x{:08x}",
                           static_cast<const void*>(command.dst), command.dst_offset, command.bytes,
                           command.word);
      case Command::Kind::Timestamp:
        return fmt::format("vkCmdWriteTimestamp query pool {} query {}",
                           static_cast<const void*>(command.pool), command.query);
      case Command::Kind::Spin:
        return fmt::format("vkCmdDispatch spin shader, amount {}", command.ticks);
      case Command::Kind::CopyQueries:
        return fmt::format("vkCmdCopyQueryPoolResults {} queries", command.count);
      case Command::Kind::ResetQueries:
        return fmt::format("vkCmdResetQueryPool {} queries", command.count);
    }
    return "?";
  }

  void discard_executable_pool() {
    if (pool_ != VK_NULL_HANDLE && !leaked_)
      vk().vkDestroyCommandPool(device_->device, pool_, nullptr);
    pool_ = VK_NULL_HANDLE;
    leaked_ = false;
  }

  DeviceState* device_ = nullptr;
  std::shared_ptr<StreamCore> capture_core_;  // while capturing
  std::vector<Operation> operations_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  bool leaked_ = false;
  VkCommandBuffer executable_ = VK_NULL_HANDLE;
  QueueState* last_queue_ = nullptr;  // of the latest replay
  uint64_t last_value_ = 0;           // its timeline value
};

}  // namespace

// GraphArgs holds nothing a vulkan graph reads: the core honours keep_graph (it calls instantiate).
std::unique_ptr<GraphImplInterface> make_graph(std::shared_ptr<Runtime> runtime,
                                               const GraphArgs& /*args*/) {
  return std::make_unique<VkGraph>(std::move(runtime));
}

}  // namespace accgraph::detail::vulkan
