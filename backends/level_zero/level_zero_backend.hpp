// Internal: the Level Zero backend's objects (runtime, stream, buffer, graph, markers). Nothing
// here is visible outside the module.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <level_zero/ze_api.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/debug_dump.hpp"
#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/handle_table.hpp"
#include "accgraph/spi/ownership.hpp"
#include "accgraph/spi/stream_cast.hpp"
#include "accgraph/types.hpp"
#include "level_zero_capture_path.hpp"
#include "level_zero_check.hpp"
#include "level_zero_graph_api.hpp"
#include "level_zero_ticks.hpp"

namespace accgraph::detail::level_zero {

// Flags newer than the Debian 1.4 headers (ze_api.h 1.7+). Drivers that predate them may refuse
// them; the backend then retries without (see Note [In-order lists] in stream.cpp).
inline constexpr uint32_t kCommandQueueFlagInOrder = 1u << 1;  // ZE_COMMAND_QUEUE_FLAG_IN_ORDER
inline constexpr uint32_t kCommandListFlagInOrder = 1u << 3;   // ZE_COMMAND_LIST_FLAG_IN_ORDER

inline constexpr const char* kStrategyGlobalTimestamps = "global_timestamps";
inline constexpr size_t kDefaultRingDepth = 16;
inline constexpr size_t kMaxRingDepth = 1024;
/// Markers per sequence (per replay) a marker set can hold; its memory grows with the markers
/// actually recorded (Note [Staging ring] in markers.cpp).
inline constexpr size_t kMarkerCapacity = 8192;
/// Name of the driver kernel behind Stream::delay (argument 0: uint64 nanoseconds).
inline constexpr const char* kSpinKernelName = "accgraph_spin_ns";

/// One GPU device of the chosen driver, with what the backend learned about it at start-up.
struct DeviceState {
  int index = 0;
  ze_device_handle_t handle = nullptr;
  std::string name;              ///< driver's name plus the capture path, see Backend::devices()
  uint32_t compute_ordinal = 0;  ///< command queue group with the compute flag
  TickConverter timer = TickConverter::from_frequency_hz(0, 64);
  PathChoice capture;
  /// The chosen flavour's entry points when capture.path is NativeGraph; on the command-list
  /// path, an advertised flavour's for the capture query only (flavor() None: no extension).
  GraphApi graph_api;
  ze_module_handle_t module = nullptr;
  ze_kernel_handle_t spin_kernel = nullptr;  ///< null: no timed delay on this device
  std::string delay_problem;                 ///< why spin_kernel is null
  std::mutex kernel_mutex;     ///< set-argument + append must not interleave between threads
  bool in_order_flags = true;  ///< the driver accepted kCommand*FlagInOrder
};

struct StreamCore;

/// The driver, context and devices; shared by every object made from them, so the context is
/// destroyed only after the last stream, buffer, graph and marker set.
struct Runtime {
  ze_driver_handle_t driver = nullptr;
  ze_context_handle_t context = nullptr;
  std::vector<std::unique_ptr<DeviceState>> devices;

  /// The immediate lists accgraph created (Stream::create), each with the stream that owns it;
  /// an entry is removed before its list is destroyed. See Note [Wrapped lists] in stream.cpp.
  HandleTable<StreamCore> created_lists{kBackendName};

  ~Runtime();
};

/// A pool of `count` host-visible events (RAII).
class EventSet {
 public:
  EventSet(const Runtime& runtime, uint32_t count, const char* purpose);
  ~EventSet();
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  ze_event_handle_t operator[](size_t i) const { return events_[i]; }
  size_t size() const { return events_.size(); }
  /// Forgets the pool and its events without destroying them: for a device that may still
  /// signal them after a bounded wait gave up (destroying them then would be a use after free).
  void leak() noexcept;

 private:
  ze_event_pool_handle_t pool_ = nullptr;
  std::vector<ze_event_handle_t> events_;
};

// --- streams ---------------------------------------------------------------------------------

/// What a capture does to a stream: nothing, a native capture on its immediate list, or
/// recording into a regular command list (Note [Command-list capture] in graph.cpp).
enum class StreamCapture { None, Native, Recording };

/// The state behind a ZeStream, shared with graphs that remember which stream replayed them
/// last (a weak reference: a destroyed stream has finished its work).
struct StreamCore {
  /// `list_owner`: for a stream that wraps a list another accgraph stream created, that
  /// stream's core (Note [Wrapped lists] in stream.cpp); null otherwise.
  StreamCore(std::shared_ptr<Runtime> runtime, DeviceState& device, ze_command_list_handle_t list,
             Ownership ownership, std::shared_ptr<StreamCore> list_owner = nullptr);
  ~StreamCore();

  /// Call before an operation touches `list`: for a stream that wraps another accgraph
  /// stream's list, returns that stream's core, which keeps the list alive while the result is
  /// held, or throws Error(InvalidState) naming `operation` when that stream has been
  /// destroyed. Returns null for other streams (their list lives as long as they do, or is the
  /// user's to keep alive).
  std::shared_ptr<StreamCore> keep_list_alive(const char* operation) const;
  /// True for a wrapper whose list's owner has been destroyed: nothing can run on it any more.
  bool list_destroyed() const noexcept;
  /// The capture `list` is in; the caller holds `mutex`. `capture` when accgraph began one;
  /// otherwise, for a wrapped list, Native while the application captures it natively (Note
  /// [Native captures of wrapped lists] in stream.cpp). Owned streams never ask the driver.
  StreamCapture capture_state() const;

  /// Where operations go now: the recording list during a command-list capture, else the
  /// immediate list (which records by itself during a native capture).
  ze_command_list_handle_t target() const noexcept { return recording ? recording : list; }
  /// After each operation on a driver without in-order lists: keeps the next one behind it.
  void order_after_append(ze_command_list_handle_t on);
  /// Blocks until everything appended to the immediate list so far has run; InvalidState while
  /// the list captures natively (a barrier appended to it would be recorded, not run).
  void synchronize();
  /// Makes this stream's immediate list wait for all work appended to `other` so far.
  void wait_for(StreamCore& other);
  /// Notes one captured operation (node count and debug dumps).
  void note(std::string operation);

  std::shared_ptr<Runtime> runtime;
  DeviceState& device;
  ze_command_list_handle_t list;  ///< the immediate list (owned or wrapped)
  Ownership ownership;
  bool wraps_accgraph_list;              ///< list_owner was given
  std::weak_ptr<StreamCore> list_owner;  ///< see keep_list_alive
  std::mutex mutex;
  StreamCapture capture = StreamCapture::None;   ///< accgraph's captures only: see capture_state
  ze_command_list_handle_t recording = nullptr;  ///< StreamCapture::Recording only
  std::vector<std::string> captured_operations;
  EventSet events;  ///< [0] synchronize; then pairs (signal, consumed) for wait_for
  size_t next_join = 0;
  std::vector<bool> join_used;

 private:
  /// A wrapped list's native capture, asked of the driver (capture_state).
  bool natively_capturing() const;
  /// Waits for the join events wait_for appended: the stream's own events that queued work may
  /// still signal (the destructor, when no barrier can be appended).
  void wait_for_joins();
};

class ZeStream final : public StreamImpl {
 public:
  /// An owned stream (its list is recorded in Runtime::created_lists), or a wrapper of `list`
  /// (Backend::wrap_stream finds the list's owner, if accgraph created it).
  ZeStream(std::shared_ptr<Runtime> runtime, DeviceState& device, ze_command_list_handle_t list,
           Ownership ownership, std::shared_ptr<StreamCore> list_owner = nullptr);
  ~ZeStream() override;

  int device() const override { return core_->device.index; }
  void* native_handle() const override { return core_->list; }
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(StreamImpl& other) override;
  void synchronize() override;
  bool is_capturing() const override;

  const std::shared_ptr<StreamCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<StreamCore> core_;
};

/// The level_zero stream behind `stream`, or Error(InvalidArgument) naming `operation`.
inline ZeStream& as_ze_stream(StreamImpl& stream, const char* operation) {
  return stream_cast<ZeStream>(stream, kBackendName, operation);
}

/// For Backend::wrap_stream: the core of the live accgraph stream that created `list`, null
/// for a list accgraph did not create; Error(InvalidState) when that stream is being destroyed.
std::shared_ptr<StreamCore> find_list_owner(Runtime& runtime, ze_command_list_handle_t list);

/// An asynchronous queue on `device`'s compute group, in-order where the driver allows.
ze_command_queue_desc_t compute_queue_desc(const DeviceState& device);

/// Creates an immediate list on `device` (in-order where the driver allows).
ze_command_list_handle_t create_immediate_list(const Runtime& runtime, DeviceState& device);

// --- buffers ---------------------------------------------------------------------------------

class ZeBuffer final : public BufferImpl {
 public:
  ZeBuffer(std::shared_ptr<Runtime> runtime, void* data, size_t bytes, MemoryKind kind);
  ~ZeBuffer() override;
  void* data() const override { return data_; }
  size_t size() const override { return bytes_; }
  MemoryKind kind() const override { return kind_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  void* data_;
  size_t bytes_;
  MemoryKind kind_;
};

std::unique_ptr<BufferImpl> allocate_buffer(const std::shared_ptr<Runtime>& runtime,
                                            DeviceState& device, size_t bytes, MemoryKind kind);

// --- graphs ----------------------------------------------------------------------------------

std::unique_ptr<GraphImplInterface> make_graph(std::shared_ptr<Runtime> runtime,
                                               const GraphArgs& args);

// --- markers ---------------------------------------------------------------------------------

std::unique_ptr<TimestampMarkers> make_markers(std::shared_ptr<Runtime> runtime,
                                               DeviceState& device, size_t ring_depth);

}  // namespace accgraph::detail::level_zero
