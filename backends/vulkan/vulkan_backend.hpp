// Internal: the vulkan backend's objects (runtime, devices and queues, the operations streams run
// or record, stream, buffer, graph, markers). Nothing here is visible outside the module.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/debug_dump.hpp"
#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/ownership.hpp"
#include "accgraph/spi/stream_cast.hpp"
#include "accgraph/types.hpp"
#include "vulkan_addresses.hpp"
#include "vulkan_api.hpp"
#include "vulkan_check.hpp"
#include "vulkan_fill.hpp"
#include "vulkan_ticks.hpp"

namespace accgraph::detail::vulkan {

inline constexpr const char* kStrategyTimestampQueries = "timestamp_queries";
inline constexpr size_t kDefaultRingDepth = 16;
inline constexpr size_t kMaxRingDepth = 1024;
/// Markers per sequence a marker set can hold (query pools of kQueriesPerChunk, allocated as
/// record() first needs them; Note [Query staging] in markers.cpp).
inline constexpr size_t kQueriesPerChunk = 256;
inline constexpr size_t kMarkerCapacity = 16384;

/// A Vulkan info structure of type `type`, every other member zero: `auto info =
/// info_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);` (brace-initialising only sType
/// leaves -Wmissing-field-initializers unhappy).
template <class Info>
Info info_struct(VkStructureType type) noexcept {
  Info info{};
  info.sType = type;
  return info;
}

/// A VkBuffer with its own memory, mapped when host-visible (RAII, move-only).
class RawBuffer {
 public:
  RawBuffer() = default;
  RawBuffer(VkDevice device, VkBuffer buffer, VkDeviceMemory memory, void* mapped, uint64_t size)
      : device_(device), buffer_(buffer), memory_(memory), mapped_(mapped), size_(size) {}
  ~RawBuffer() { release(); }
  RawBuffer(RawBuffer&& other) noexcept { *this = std::move(other); }
  RawBuffer& operator=(RawBuffer&& other) noexcept;
  RawBuffer(const RawBuffer&) = delete;
  RawBuffer& operator=(const RawBuffer&) = delete;

  VkBuffer get() const noexcept { return buffer_; }
  void* mapped() const noexcept { return mapped_; }
  uint64_t size() const noexcept { return size_; }
  /// Forgets the handles without destroying them (for memory a device may still write).
  void leak() noexcept {
    device_ = VK_NULL_HANDLE;
    buffer_ = VK_NULL_HANDLE;
    memory_ = VK_NULL_HANDLE;
  }

 private:
  void release() noexcept;
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  uint64_t size_ = 0;
};

/// One VkQueue of a device and the timeline semaphore that orders everything submitted to it
/// (Note [Queues and timelines] in stream.cpp). Lives as long as the runtime.
struct QueueState {
  VkQueue queue = VK_NULL_HANDLE;
  VkSemaphore timeline = VK_NULL_HANDLE;
  uint32_t index = 0;  ///< within the device's queue family
  std::mutex mutex;    ///< vkQueueSubmit needs external synchronisation; guards last_value
  uint64_t last_value = 0;

  /// A semaphore value to wait for besides the queue's own previous submission.
  struct Wait {
    VkSemaphore semaphore;
    uint64_t value;
  };
  /// Submits `count` command buffers (0: only the waits) after everything submitted to this
  /// queue before; returns the timeline value that signals their completion.
  uint64_t submit(const VkCommandBuffer* buffers, uint32_t count, const Wait* waits,
                  size_t wait_count, const char* what);
  /// The value of the latest submission (0: none).
  uint64_t latest();
  /// The value the device has reached.
  uint64_t completed(VkDevice device) const;
  /// Blocks until the timeline reaches `value`; false on timeout (`timeout_ns`), throws on error.
  bool wait(VkDevice device, uint64_t value, uint64_t timeout_ns, const char* what) const;
};

/// One physical device with a compute queue family, its logical device and what the backend
/// learned about it at start-up.
struct DeviceState {
  int index = 0;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  std::string name;
  uint32_t family = 0;  ///< the compute queue family streams use
  std::vector<std::unique_ptr<QueueState>> queues;
  std::atomic<size_t> next_queue{0};  ///< round robin over `queues` for new streams
  VkPhysicalDeviceMemoryProperties memory{};
  TickConverter timer{1.0, 64};
  bool timestamps = false;  ///< the family writes timestamps (timestampValidBits > 0)
  std::string timestamp_problem;
  /// Calibrated timestamps (device domain), null when the device has none.
  PFN_vkGetCalibratedTimestampsEXT get_calibrated = nullptr;
  /// kPatternBytes copies of each byte value, Note [Unaligned fills].
  RawBuffer pattern;
  // Stream::delay: the spin shader (Note [Spin shader] in backend.cpp); null pipeline: no delay.
  VkShaderModule spin_module = VK_NULL_HANDLE;
  VkPipelineLayout spin_layout = VK_NULL_HANDLE;
  VkPipeline spin_pipeline = VK_NULL_HANDLE;
  VkDescriptorSetLayout spin_set_layout = VK_NULL_HANDLE;
  VkDescriptorPool spin_descriptor_pool = VK_NULL_HANDLE;
  VkDescriptorSet spin_set = VK_NULL_HANDLE;
  RawBuffer spin_sink;           ///< what the shader's work mode may write
  uint32_t spin_mode = 0;        ///< 0: shader clock ticks, 1: loop iterations (spin.comp)
  double spin_units_per_ns = 0;  ///< ticks or iterations per ns, with the safety margin
  std::string delay_problem;

  /// The queue for a new stream.
  QueueState& pick_queue() { return *queues[next_queue.fetch_add(1) % queues.size()]; }
  /// The queue whose VkQueue is `queue`, or null.
  QueueState* find_queue(VkQueue queue) const;
  /// Memory for a buffer of `bytes` (usage: transfer source and destination, storage).
  RawBuffer allocate(uint64_t bytes, MemoryKind kind, const char* what) const;
};

/// The instance and devices; shared by every object made from them.
struct Runtime {
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<DeviceState>> devices;
  AddressTable addresses;
  ~Runtime();
};

// --- operations ------------------------------------------------------------------------------

/// One device command of an operation (a tagged union: the fields a kind uses).
struct Command {
  enum class Kind { Copy, Fill, Timestamp, Spin, CopyQueries, ResetQueries };
  Kind kind = Kind::Copy;
  VkBuffer src = VK_NULL_HANDLE;
  VkBuffer dst = VK_NULL_HANDLE;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
  uint32_t word = 0;  ///< Fill
  VkQueryPool pool = VK_NULL_HANDLE;
  uint32_t query = 0;           ///< Timestamp, CopyQueries, ResetQueries: the first query
  uint32_t count = 0;           ///< CopyQueries, ResetQueries
  uint64_t ticks = 0;           ///< Spin: shader clock ticks or loop iterations
  bool barrier_before = false;  ///< Spin: after the previous spin of the same operation
};

/// What one stream operation (copy, fill, marker, delay) does on the device: its commands run
/// after everything before the operation finished (a full barrier separates operations).
struct Operation {
  std::string description;  ///< for debug_dump; set only when recorded into a capture
  std::vector<Command> commands;
};

/// Work-mode iterations one spin dispatch may do (Mesa's lavapipe stops a shader's loops after
/// 65,535 iterations: spin.comp).
inline constexpr uint64_t kMaxIterationsPerDispatch = 32768;
/// Dispatches a delay may be split into (about 400 s of spinning on lavapipe).
inline constexpr uint64_t kMaxSpinDispatches = 1'000'000;

/// The spin dispatches for `amount` of device.spin_mode's units (Note [Spin shader] in
/// backend.cpp); Error(Unsupported) when a work-mode spin would need more than
/// kMaxSpinDispatches dispatches.
std::vector<Command> spin_commands(const DeviceState& device, uint64_t amount);

/// A command pool of `device`'s queue family; `what` says what for, in an error message.
VkCommandPool create_command_pool(const DeviceState& device, VkCommandPoolCreateFlags flags,
                                  const char* what);
/// One primary command buffer from `pool`; `what` says what for, in an error message.
VkCommandBuffer allocate_command_buffer(const DeviceState& device, VkCommandPool pool,
                                        const char* what);

/// Records `operations` into `buffer` (begun by the caller): a full memory barrier between two
/// operations, and at the end one that makes the writes visible to the host.
void record_operations(const DeviceState& device, VkCommandBuffer buffer,
                       const Operation* operations, size_t count);

// --- streams ---------------------------------------------------------------------------------

/// The state behind a VkStream (shared with the graphs and markers that use it).
struct StreamCore {
  StreamCore(std::shared_ptr<Runtime> runtime, DeviceState& device, QueueState& queue,
             Ownership ownership);
  ~StreamCore();
  StreamCore(const StreamCore&) = delete;
  StreamCore& operator=(const StreamCore&) = delete;

  /// Records `operation` into the capture when one runs (`describe()` names it), else submits
  /// it at once. Returns the timeline value of the submission (0 when recorded).
  template <class Describe>
  uint64_t enqueue(Operation operation, Describe&& describe) {
    std::lock_guard<std::mutex> lock(mutex);
    if (capture != nullptr) {
      operation.description = describe();
      capture->push_back(std::move(operation));
      return 0;
    }
    return submit_locked(&operation, 1, nullptr, 0, "enqueue");
  }
  /// Submits operations at once (never recorded); the caller holds `mutex`.
  uint64_t submit_locked(const Operation* operations, size_t count, const QueueState::Wait* waits,
                         size_t wait_count, const char* what);
  /// Submits recorded command buffers (a graph's) after this stream's earlier work; the caller
  /// holds `mutex`.
  uint64_t submit_buffers_locked(const VkCommandBuffer* buffers, uint32_t count,
                                 const QueueState::Wait* waits, size_t wait_count,
                                 const char* what);
  void synchronize();

  std::shared_ptr<Runtime> runtime;
  DeviceState& device;
  QueueState& queue;
  Ownership ownership;
  std::mutex mutex;
  uint64_t last_value = 0;  ///< the queue timeline value of this stream's latest submission
  std::vector<Operation>* capture = nullptr;  ///< the capturing graph's operations

 private:
  VkCommandBuffer take_command_buffer();
  VkCommandPool pool_ = VK_NULL_HANDLE;
  struct InFlight {
    VkCommandBuffer buffer;
    uint64_t value;
  };
  std::deque<InFlight> in_flight_;
  std::vector<VkCommandBuffer> free_;
};

class VkStream final : public StreamImpl {
 public:
  explicit VkStream(std::shared_ptr<StreamCore> core) : core_(std::move(core)) {}
  ~VkStream() override = default;

  int device() const override { return core_->device.index; }
  void* native_handle() const override { return core_->queue.queue; }
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(StreamImpl& other) override;
  void synchronize() override { core_->synchronize(); }
  bool is_capturing() const override;

  const std::shared_ptr<StreamCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<StreamCore> core_;
};

/// The vulkan stream behind `stream`, or Error(InvalidArgument) naming `operation`.
inline VkStream& as_vk_stream(StreamImpl& stream, const char* operation) {
  return stream_cast<VkStream>(stream, kBackendName, operation);
}

// --- buffers ---------------------------------------------------------------------------------

std::unique_ptr<BufferImpl> allocate_buffer(const std::shared_ptr<Runtime>& runtime,
                                            DeviceState& device, size_t bytes, MemoryKind kind);

// --- graphs ----------------------------------------------------------------------------------

std::unique_ptr<GraphImplInterface> make_graph(std::shared_ptr<Runtime> runtime,
                                               const GraphArgs& args);

// --- markers ---------------------------------------------------------------------------------

std::unique_ptr<TimestampMarkers> make_markers(std::shared_ptr<Runtime> runtime,
                                               DeviceState& device, size_t ring_depth);

// --- clock -----------------------------------------------------------------------------------

/// ClockSampling through calibrated timestamps (clock.cpp).
void sample_calibrated(const DeviceState& device, timing::ClockSample* samples, size_t count);

}  // namespace accgraph::detail::vulkan
