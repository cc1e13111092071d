// Vulkan streams: a queue shared through its timeline semaphore, a command pool per stream, eager
// operations submitted one command buffer each (Note [Queues and timelines]).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "vulkan_backend.hpp"

namespace accgraph::detail::vulkan {

// Note [Queues and timelines]: a device offers few queues per family (lavapipe one, NVIDIA 8 to
// 16), so accgraph streams share them: each stream takes the next queue of its device's compute
// family, round robin, and keeps its own command pool. Every submission to a queue, whichever
// stream makes it, waits for the queue's timeline semaphore to reach the value of the previous
// submission and signals the next value (under the queue's mutex, since vkQueueSubmit needs
// external synchronisation). So a queue runs its submissions strictly one after another, with
// the memory dependency of the semaphore between them, and every stream on it is an in-order
// queue (stream.order); a stream remembers the value of its latest submission, which
// synchronize() waits for. Two streams on one queue are serialised with each other: that is the
// price of sharing, paid only when there are more streams than queues. Waits between queues
// (wait_for, a graph replayed on another queue than before) are an extra wait on the other
// queue's timeline. Timelines and queues live as long as the backend (never destroyed), so a
// submission never waits on a semaphore that is gone.
//
// wrap_stream takes a VkQueue of this backend's device (the native_handle() of a vulkan stream):
// the wrapper is a new stream on that queue, ordered with every other stream on it. The caller
// keeps nothing alive: accgraph owns the VkDevice and its queues. An application submitting to
// the queue itself must not do so concurrently with accgraph (Vulkan's external synchronisation
// of vkQueueSubmit) and must not expect its submissions to be ordered with accgraph's.

namespace {

/// How long destructors wait for work that uses what they free.
constexpr uint64_t kDestroyWaitNs = 30'000'000'000ull;

VkMemoryBarrier full_barrier() {
  VkMemoryBarrier barrier = info_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  barrier.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  return barrier;
}

void record_command(const DeviceState& device, VkCommandBuffer buffer, const Command& command) {
  const Api& api = vk();
  switch (command.kind) {
    case Command::Kind::Copy: {
      const VkBufferCopy region{command.src_offset, command.dst_offset, command.bytes};
      api.vkCmdCopyBuffer(buffer, command.src, command.dst, 1, &region);
      break;
    }
    case Command::Kind::Fill:
      api.vkCmdFillBuffer(buffer, command.dst, command.dst_offset, command.bytes, command.word);
      break;
    case Command::Kind::Timestamp:
      api.vkCmdWriteTimestamp(buffer, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, command.pool,
                              command.query);
      break;
    case Command::Kind::Spin: {
      if (command.barrier_before) {
        const VkMemoryBarrier between = full_barrier();
        api.vkCmdPipelineBarrier(buffer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, nullptr,
                                 0, nullptr);
      }
      api.vkCmdBindPipeline(buffer, VK_PIPELINE_BIND_POINT_COMPUTE, device.spin_pipeline);
      api.vkCmdBindDescriptorSets(buffer, VK_PIPELINE_BIND_POINT_COMPUTE, device.spin_layout, 0, 1,
                                  &device.spin_set, 0, nullptr);
      // spin.comp's push constants: uint64_t amount, uint mode.
      const uint32_t words[4] = {static_cast<uint32_t>(command.ticks),
                                 static_cast<uint32_t>(command.ticks >> 32), device.spin_mode, 0};
      api.vkCmdPushConstants(buffer, device.spin_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             sizeof(words), words);
      api.vkCmdDispatch(buffer, 1, 1, 1);
      break;
    }
    case Command::Kind::CopyQueries:
      api.vkCmdCopyQueryPoolResults(buffer, command.pool, command.query, command.count, command.dst,
                                    command.dst_offset, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
      break;
    case Command::Kind::ResetQueries:
      api.vkCmdResetQueryPool(buffer, command.pool, command.query, command.count);
      break;
  }
}

}  // namespace

std::vector<Command> spin_commands(const DeviceState& device, uint64_t amount) {
  const uint64_t per_dispatch = device.spin_mode == 0 ? amount : kMaxIterationsPerDispatch;
  const uint64_t dispatches = amount == 0 ? 1 : (amount - 1) / per_dispatch + 1;
  if (dispatches > kMaxSpinDispatches)
    throw Error(ErrorCode::Unsupported,
                fmt::format("delay: {} spin iterations would take {} dispatches on vulkan device "
                            "{}, more than the {} the backend records for one delay (its shader "
                            "clock cannot time a spin, Note [Spin shader]): delay less, in "
                            "several calls",
                            amount, dispatches, device.index, kMaxSpinDispatches),
                kBackendName);
  std::vector<Command> commands;
  commands.reserve(dispatches);
  uint64_t left = amount;
  for (uint64_t i = 0; i < dispatches; ++i) {
    Command command;
    command.kind = Command::Kind::Spin;
    command.ticks = std::min(left, per_dispatch);
    command.barrier_before = i > 0;
    left -= command.ticks;
    commands.push_back(command);
  }
  return commands;
}

VkCommandPool create_command_pool(const DeviceState& device, VkCommandPoolCreateFlags flags,
                                  const char* what) {
  VkCommandPoolCreateInfo info =
      info_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  info.flags = flags;
  info.queueFamilyIndex = device.family;
  VkCommandPool pool = VK_NULL_HANDLE;
  ACCGRAPH_VK_CHECK(vk().vkCreateCommandPool(device.device, &info, nullptr, &pool), what);
  return pool;
}

VkCommandBuffer allocate_command_buffer(const DeviceState& device, VkCommandPool pool,
                                        const char* what) {
  VkCommandBufferAllocateInfo info =
      info_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  info.commandPool = pool;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  VkCommandBuffer buffer = VK_NULL_HANDLE;
  ACCGRAPH_VK_CHECK(vk().vkAllocateCommandBuffers(device.device, &info, &buffer), what);
  return buffer;
}

void record_operations(const DeviceState& device, VkCommandBuffer buffer,
                       const Operation* operations, size_t count) {
  const Api& api = vk();
  const VkMemoryBarrier between = full_barrier();
  for (size_t i = 0; i < count; ++i) {
    if (i > 0)
      api.vkCmdPipelineBarrier(buffer, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                               VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &between, 0, nullptr, 0,
                               nullptr);
    for (const Command& command : operations[i].commands) record_command(device, buffer, command);
  }
  // Host buffers are read by the CPU after a wait on the timeline: make the writes visible.
  VkMemoryBarrier to_host = info_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  to_host.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  api.vkCmdPipelineBarrier(buffer, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                           0, 1, &to_host, 0, nullptr, 0, nullptr);
}

// --- queues ----------------------------------------------------------------------------------

uint64_t QueueState::submit(const VkCommandBuffer* buffers, uint32_t count, const Wait* waits,
                            size_t wait_count, const char* what) {
  std::lock_guard<std::mutex> lock(mutex);
  const uint64_t value = last_value + 1;
  VkSemaphore wait_semaphores[4];
  uint64_t wait_values[4];
  VkPipelineStageFlags wait_stages[4];
  if (wait_count > 3)
    throw Error(ErrorCode::BackendError, "submit: too many waits (a bug in the vulkan backend)",
                kBackendName);
  wait_semaphores[0] = timeline;
  wait_values[0] = last_value;
  for (size_t i = 0; i < wait_count; ++i) {
    wait_semaphores[i + 1] = waits[i].semaphore;
    wait_values[i + 1] = waits[i].value;
  }
  const uint32_t waits_total = static_cast<uint32_t>(wait_count + 1);
  std::fill(wait_stages, wait_stages + waits_total, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  VkTimelineSemaphoreSubmitInfo timeline_info =
      info_struct<VkTimelineSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);
  timeline_info.waitSemaphoreValueCount = waits_total;
  timeline_info.pWaitSemaphoreValues = wait_values;
  timeline_info.signalSemaphoreValueCount = 1;
  timeline_info.pSignalSemaphoreValues = &value;
  VkSubmitInfo submit_info = info_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  submit_info.pNext = &timeline_info;
  submit_info.waitSemaphoreCount = waits_total;
  submit_info.pWaitSemaphores = wait_semaphores;
  submit_info.pWaitDstStageMask = wait_stages;
  submit_info.commandBufferCount = count;
  submit_info.pCommandBuffers = buffers;
  submit_info.signalSemaphoreCount = 1;
  submit_info.pSignalSemaphores = &timeline;
  ACCGRAPH_VK_CHECK(vk().vkQueueSubmit(queue, 1, &submit_info, VK_NULL_HANDLE), what);
  last_value = value;
  return value;
}

uint64_t QueueState::latest() {
  std::lock_guard<std::mutex> lock(mutex);
  return last_value;
}

uint64_t QueueState::completed(VkDevice device) const {
  uint64_t value = 0;
  ACCGRAPH_VK_CHECK(vk().vkGetSemaphoreCounterValue(device, timeline, &value),
                    "reading a queue's progress");
  return value;
}

bool QueueState::wait(VkDevice device, uint64_t value, uint64_t timeout_ns,
                      const char* what) const {
  VkSemaphoreWaitInfo info =
      info_struct<VkSemaphoreWaitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
  info.semaphoreCount = 1;
  info.pSemaphores = &timeline;
  info.pValues = &value;
  const VkResult result = vk().vkWaitSemaphores(device, &info, timeout_ns);
  if (result == VK_TIMEOUT) return false;
  ACCGRAPH_VK_CHECK(result, what);
  return true;
}

// --- stream core -----------------------------------------------------------------------------

StreamCore::StreamCore(std::shared_ptr<Runtime> runtime_in, DeviceState& device_in,
                       QueueState& queue_in, Ownership ownership_in)
    : runtime(std::move(runtime_in)), device(device_in), queue(queue_in), ownership(ownership_in) {
  pool_ = create_command_pool(
      device,
      VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
      "create_stream: creating a command pool");
}

StreamCore::~StreamCore() {
  // (life.enqueued): the work already submitted runs to its end; its command buffers come from
  // this pool, so wait for it before destroying the pool.
  try {
    if (last_value != 0 && !queue.wait(device.device, last_value, kDestroyWaitNs,
                                       "destroying a stream: waiting for its work")) {
      log(LogLevel::Warning,
          fmt::format("vulkan: destroying a stream on device {}: its work did not finish "
                      "within {} s; leaking its command pool",
                      device.index, kDestroyWaitNs / 1'000'000'000ull));
      return;
    }
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("vulkan: destroying a stream: {}", e.what()));
    return;
  }
  vk().vkDestroyCommandPool(device.device, pool_, nullptr);
}

VkCommandBuffer StreamCore::take_command_buffer() {
  if (!in_flight_.empty() && in_flight_.front().value <= queue.completed(device.device)) {
    const uint64_t done = queue.completed(device.device);
    while (!in_flight_.empty() && in_flight_.front().value <= done) {
      free_.push_back(in_flight_.front().buffer);
      in_flight_.pop_front();
    }
  }
  if (!free_.empty()) {
    VkCommandBuffer buffer = free_.back();
    free_.pop_back();
    ACCGRAPH_VK_CHECK(vk().vkResetCommandBuffer(buffer, 0), "reusing a command buffer");
    return buffer;
  }
  return allocate_command_buffer(device, pool_, "allocating a command buffer");
}

uint64_t StreamCore::submit_locked(const Operation* operations, size_t count,
                                   const QueueState::Wait* waits, size_t wait_count,
                                   const char* what) {
  VkCommandBuffer buffer = take_command_buffer();
  try {
    VkCommandBufferBeginInfo begin =
        info_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    ACCGRAPH_VK_CHECK(vk().vkBeginCommandBuffer(buffer, &begin), what);
    record_operations(device, buffer, operations, count);
    ACCGRAPH_VK_CHECK(vk().vkEndCommandBuffer(buffer), what);
    const uint64_t value = queue.submit(&buffer, 1, waits, wait_count, what);
    in_flight_.push_back({buffer, value});
    last_value = value;
    return value;
  } catch (...) {
    free_.push_back(buffer);
    throw;
  }
}

uint64_t StreamCore::submit_buffers_locked(const VkCommandBuffer* buffers, uint32_t count,
                                           const QueueState::Wait* waits, size_t wait_count,
                                           const char* what) {
  const uint64_t value = queue.submit(buffers, count, waits, wait_count, what);
  last_value = value;
  return value;
}

void StreamCore::synchronize() {
  uint64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    value = last_value;
  }
  if (value != 0) queue.wait(device.device, value, UINT64_MAX, "synchronize");
}

// --- the stream ------------------------------------------------------------------------------

namespace {

AddressTable::Resolved resolve(const StreamCore& core, const void* address, uint64_t bytes,
                               const char* operation, const char* role) {
  std::optional<AddressTable::Resolved> found = core.runtime->addresses.find(address, bytes);
  if (!found)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the {} range [{}, +{} bytes) is not inside one vulkan buffer: "
                            "the vulkan backend copies and fills only memory of its own Buffers "
                            "(Buffer::allocate on a vulkan stream), from data() to data() + "
                            "size()",
                            operation, role, address, bytes),
                kBackendName);
  if (found->entry.device != core.device.index)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the {} buffer belongs to vulkan device {}, the stream to device "
                            "{}: copy through a host buffer",
                            operation, role, found->entry.device, core.device.index),
                kBackendName);
  return *found;
}

}  // namespace

void VkStream::copy(void* dst, const void* src, size_t bytes) {
  const AddressTable::Resolved to = resolve(*core_, dst, bytes, "copy", "destination");
  const AddressTable::Resolved from = resolve(*core_, src, bytes, "copy", "source");
  Command command;
  command.kind = Command::Kind::Copy;
  command.src = from.entry.buffer;
  command.src_offset = from.offset;
  command.dst = to.entry.buffer;
  command.dst_offset = to.offset;
  command.bytes = bytes;
  Operation operation;
  operation.commands.push_back(command);
  core_->enqueue(std::move(operation),
                 [&] { return fmt::format("copy {} bytes {} -> {}", bytes, src, dst); });
}

void VkStream::fill(void* dst, uint8_t value, size_t bytes) {
  const AddressTable::Resolved to = resolve(*core_, dst, bytes, "fill", "destination");
  Operation operation;
  for (const FillPiece& piece : plan_fill(to.offset, bytes)) {
    Command command;
    command.dst = to.entry.buffer;
    command.dst_offset = piece.offset;
    command.bytes = piece.bytes;
    if (piece.kind == FillPiece::Kind::Fill) {
      command.kind = Command::Kind::Fill;
      command.word = fill_word(value);
    } else {  // Note [Unaligned fills]
      command.kind = Command::Kind::Copy;
      command.src = core_->device.pattern.get();
      command.src_offset = uint64_t{value} * kPatternBytes;
    }
    operation.commands.push_back(command);
  }
  core_->enqueue(std::move(operation), [&] {
    return fmt::format("fill {} bytes at {} with {}", bytes, dst, static_cast<unsigned>(value));
  });
}

void VkStream::delay(std::chrono::nanoseconds duration) {
  const DeviceState& device = core_->device;
  if (device.spin_pipeline == VK_NULL_HANDLE)
    throw Error(ErrorCode::Unsupported,
                fmt::format("delay: device {} has no spin shader ({}); capabilities().timed_delay "
                            "is false",
                            device.index, device.delay_problem),
                kBackendName);
  // Note [Spin shader] in backend.cpp: the calibrated rate already has its safety margin.
  const long double ticks =
      static_cast<long double>(duration.count()) * device.spin_units_per_ns + 1.0L;
  const uint64_t amount = ticks >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(ticks);
  Operation operation;
  operation.commands = spin_commands(device, amount);
  const size_t dispatches = operation.commands.size();
  core_->enqueue(std::move(operation), [&] {
    return fmt::format("delay {} ns (spin shader, {} {} in {} dispatch(es))", duration.count(),
                       amount, device.spin_mode == 0 ? "clock ticks" : "loop iterations",
                       dispatches);
  });
}

void VkStream::wait_for(StreamImpl& other_impl) {
  StreamCore& other = *as_vk_stream(other_impl, "wait_for").core();
  uint64_t other_value = 0;
  {
    std::lock_guard<std::mutex> lock(other.mutex);
    other_value = other.last_value;
  }
  std::lock_guard<std::mutex> lock(core_->mutex);
  if (core_->capture != nullptr)
    throw Error(ErrorCode::Unsupported,
                "wait_for: the stream is capturing, and vulkan captures record one stream only "
                "(capabilities().multi_stream_capture is false)",
                kBackendName);
  // One queue runs in order (Note [Queues and timelines]); a finished value needs no wait.
  if (&other.queue == &core_->queue || other_value == 0 ||
      other.queue.completed(other.device.device) >= other_value)
    return;
  const QueueState::Wait wait{other.queue.timeline, other_value};
  core_->submit_buffers_locked(nullptr, 0, &wait, 1, "wait_for");
}

bool VkStream::is_capturing() const {
  std::lock_guard<std::mutex> lock(core_->mutex);
  return core_->capture != nullptr;
}

}  // namespace accgraph::detail::vulkan
