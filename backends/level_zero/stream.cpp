// Level Zero streams: an asynchronous immediate command list each (owned, or a wrapped native
// one), copy/fill/delay appended to it (or to a capture's recording list), joins through events,
// and host synchronisation through an event (the 1.4 API has no zeCommandListHostSynchronize).
#include <algorithm>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "level_zero_backend.hpp"

namespace accgraph::detail::level_zero {

namespace {

/// wait_for slots per stream: (join, consumed) event pairs reused round robin.
constexpr uint32_t kJoinSlots = 16;

}  // namespace

// Note [In-order lists]: accgraph streams are in-order queues. Level Zero lists become in-order
// with ZE_COMMAND_QUEUE_FLAG_IN_ORDER / ZE_COMMAND_LIST_FLAG_IN_ORDER (API 1.7+, newer than the
// Debian 1.4 headers, so declared in level_zero_backend.hpp). A driver that refuses the flag gets
// lists without it, and the backend appends a barrier after each operation instead
// (StreamCore::order_after_append).
ze_command_queue_desc_t compute_queue_desc(const DeviceState& device) {
  return {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
          nullptr,
          device.compute_ordinal,
          0,
          device.in_order_flags ? kCommandQueueFlagInOrder : 0u,
          ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
          ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
}

ze_command_list_handle_t create_immediate_list(const Runtime& runtime, DeviceState& device) {
  ze_command_queue_desc_t desc = compute_queue_desc(device);
  ze_command_list_handle_t list = nullptr;
  ze_result_t result = zeCommandListCreateImmediate(runtime.context, device.handle, &desc, &list);
  if (result != ZE_RESULT_SUCCESS && desc.flags != 0) {
    desc.flags = 0;
    if (zeCommandListCreateImmediate(runtime.context, device.handle, &desc, &list) ==
        ZE_RESULT_SUCCESS) {
      device.in_order_flags = false;
      log(LogLevel::Debug, "level_zero: the driver refuses in-order lists; ordering with barriers");
      return list;
    }
  }
  if (result != ZE_RESULT_SUCCESS)
    throw_error(result, "zeCommandListCreateImmediate", "creating a stream's immediate list");
  return list;
}

// --- StreamCore ------------------------------------------------------------------------------

// Note [Wrapped lists]: Stream::wrap("level_zero", device, list) does not own `list`. When
// `list` is the native_handle() of another accgraph stream, destroying that stream destroys the
// list, and a wrapper used afterwards would hand the driver a dangling handle. So the backend
// records every list it creates (Runtime::created_lists, like the host backend's table of live
// queues); wrap_stream looks the handle up and keeps a weak reference to the owning stream's
// core, and every operation of the wrapper first locks that reference (keep_list_alive): a
// destroyed owner is an InvalidState error, and a live one cannot destroy the list while the
// operation runs. A list the application created itself (not in the table) stays the
// application's to keep alive for as long as the wrapper is used, as with any native handle.
StreamCore::StreamCore(std::shared_ptr<Runtime> runtime_in, DeviceState& device_in,
                       ze_command_list_handle_t list_in, Ownership ownership_in,
                       std::shared_ptr<StreamCore> list_owner_in)
    : runtime(std::move(runtime_in)),
      device(device_in),
      list(list_in),
      ownership(ownership_in),
      wraps_accgraph_list(list_owner_in != nullptr),
      list_owner(list_owner_in),
      events(*runtime, 1 + 2 * kJoinSlots, "creating a stream's events"),
      join_used(kJoinSlots, false) {}

StreamCore::~StreamCore() {
  // Work still queued must finish before its list (and the events it signals) go away. A
  // wrapper of a destroyed stream's list has nothing left to wait for: that stream finished
  // its work before destroying the list. A wrapped list the application is capturing natively
  // would record a barrier instead of running it (and the wait for it would never end): only
  // the stream's own events are waited for then; the list's work is the application's.
  if (!list_destroyed()) {
    try {
      if (capture_state() == StreamCapture::Native)
        wait_for_joins();
      else
        synchronize();
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("level_zero: synchronising a stream before destroying "
                                         "it failed: {}",
                                         e.what()));
    }
  }
  if (ownership == Ownership::Owned) {
    runtime->created_lists.erase(list);
    ACCGRAPH_ZE_LOG(zeCommandListDestroy(list), "destroying a stream's immediate list");
  }
}

std::shared_ptr<StreamCore> StreamCore::keep_list_alive(const char* operation) const {
  if (!wraps_accgraph_list) return nullptr;
  std::shared_ptr<StreamCore> owner = list_owner.lock();
  if (!owner)
    throw Error(ErrorCode::InvalidState,
                fmt::format("{}: this stream wraps command list {}, which belonged to a "
                            "level_zero stream that has been destroyed (and its list with it): a "
                            "wrapped stream must not outlive the stream it wraps: destroy the "
                            "wrapper first, or keep the original Stream alive while the wrapper "
                            "is in use",
                            operation, fmt::ptr(list)),
                kBackendName);
  return owner;
}

bool StreamCore::list_destroyed() const noexcept {
  return wraps_accgraph_list && list_owner.expired();
}

// Note [Native captures of wrapped lists]: an application that calls Level Zero itself may
// begin a graph capture on an immediate list (zeCommandListBeginGraphCaptureExt) and wrap the
// list as a Stream, to time the capture with a ForeignGraph (Note [Foreign graphs] in
// accgraph/foreign_graph.hpp). Appends to that list are recorded into the application's graph
// exactly as in a capture accgraph began (StreamCapture::Native), so the stream must say so:
// is_capturing() must be true (ForeignGraph::capture_begin requires it, and the profiler then
// records the markers as captured ones, read after each launch, not as eager ones waited for at
// once), and whatever would append a barrier or event wait meant to run now (synchronize,
// wait_for, a replay, the markers' drain) must refuse instead of recording it. So:
//
//   capture_state() = capture                 when accgraph began a capture (or the stream is
//                                             Owned: its list captures only through accgraph)
//                   = Native                  when the driver's zeCommandListIsGraphCapture-
//                                             EnabledExt (or Exp) answers QUERY_TRUE
//                   = None                    otherwise
//
// The driver is asked only for wrapped (Borrowed) streams with no accgraph capture, on every
// call that decides, because the application begins and ends its capture without telling
// the wrapper; owned streams pay nothing. A driver without the extension (or without the query
// entry point) cannot capture natively, so such a list never is. A result other than the
// flavour's QUERY_TRUE/QUERY_FALSE is an error: guessing would either record markers that never
// run or run them eagerly inside someone's graph. A wrapper of a list whose accgraph owner was
// destroyed is never capturing (Note [Wrapped lists]: the list is gone). The query does not
// depend on the capture path accgraph chose: with ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list the
// application may still capture natively (graph_api_for in backend.cpp).
StreamCapture StreamCore::capture_state() const {
  if (capture != StreamCapture::None || ownership == Ownership::Owned) return capture;
  return natively_capturing() ? StreamCapture::Native : StreamCapture::None;
}

bool StreamCore::natively_capturing() const {
  const GraphApi& api = device.graph_api;
  if (!api.can_query_capture()) return false;
  std::shared_ptr<StreamCore> keep;  // the list's accgraph owner, alive during the query
  if (wraps_accgraph_list && (keep = list_owner.lock()) == nullptr) return false;
  const char* call = "";
  const ze_result_t result = api.is_capture_enabled(list, &call);
  if (std::optional<bool> answer = api.query_answer(result)) return *answer;
  throw_error(
      result, call,
      fmt::format("asking whether wrapped command list {} is capturing natively", fmt::ptr(list)),
      fmt::format("the driver answered neither QUERY_TRUE nor QUERY_FALSE of the {} "
                  "flavour; if it did answer, the result codes in "
                  "backends/level_zero/level_zero_graph_ext.hpp do not match this "
                  "driver's ze_api.h (report it)",
                  to_string(api.flavor())));
}

void StreamCore::wait_for_joins() {
  for (size_t slot = 0; slot < kJoinSlots; ++slot)
    if (join_used[slot])
      ACCGRAPH_ZE_CHECK(zeEventHostSynchronize(events[2 + 2 * slot], UINT64_MAX),
                        "destroying a stream: waiting for its joins");
}

std::shared_ptr<StreamCore> find_list_owner(Runtime& runtime, ze_command_list_handle_t list) {
  HandleTable<StreamCore>::Lookup found = runtime.created_lists.find(list);
  if (!found.registered) return nullptr;  // the application's own list
  std::shared_ptr<StreamCore> owner = std::move(found.object);
  if (!owner)
    throw Error(ErrorCode::InvalidState,
                fmt::format("wrap_stream: command list {} belongs to a level_zero stream that is "
                            "being destroyed: a wrapped stream must not outlive the stream it "
                            "wraps: wrap the list of a stream that stays alive",
                            fmt::ptr(list)),
                kBackendName);
  return owner;
}

void StreamCore::order_after_append(ze_command_list_handle_t on) {
  if (device.in_order_flags) return;
  ACCGRAPH_ZE_CHECK(zeCommandListAppendBarrier(on, nullptr, 0, nullptr),
                    "ordering a stream without in-order lists");
}

void StreamCore::note(std::string operation) {
  if (capture != StreamCapture::None) captured_operations.push_back(std::move(operation));
}

void StreamCore::synchronize() {
  std::shared_ptr<StreamCore> keep = keep_list_alive("synchronize");
  std::lock_guard<std::mutex> lock(mutex);
  // Stream::synchronize refuses every capture first; graphs (reset) reach here directly. A
  // command-list capture (Recording) leaves the immediate list eager: only a native one records.
  if (capture_state() == StreamCapture::Native)
    throw Error(ErrorCode::InvalidState,
                fmt::format("synchronize: command list {} is capturing a graph, so a barrier "
                            "appended to it would be recorded, not run: end the capture first",
                            fmt::ptr(list)),
                kBackendName);
  ze_event_handle_t done = events[0];
  ACCGRAPH_ZE_CHECK(zeEventHostReset(done), "synchronize");
  ACCGRAPH_ZE_CHECK(zeCommandListAppendBarrier(list, done, 0, nullptr), "synchronize");
  ACCGRAPH_ZE_CHECK(zeEventHostSynchronize(done, UINT64_MAX), "synchronize");
}

void StreamCore::wait_for(StreamCore& other) {
  std::shared_ptr<StreamCore> keep = keep_list_alive("wait_for");
  std::shared_ptr<StreamCore> keep_other = other.keep_list_alive("wait_for (the other stream)");
  std::scoped_lock lock(mutex, other.mutex);
  if (capture_state() != StreamCapture::None)
    throw Error(ErrorCode::Unsupported,
                "wait_for: this stream is capturing and level_zero cannot make a capture wait "
                "for work outside it (no multi-stream capture): order the streams before "
                "the capture begins",
                kBackendName);
  // The join event is reset by this list right after its wait, and `consumed` is signalled
  // after that reset: once `consumed` is seen, the slot may be signalled again safely.
  const size_t slot = next_join++ % kJoinSlots;
  ze_event_handle_t join = events[1 + 2 * slot];
  ze_event_handle_t consumed = events[2 + 2 * slot];
  if (join_used[slot]) {
    ACCGRAPH_ZE_CHECK(zeEventHostSynchronize(consumed, UINT64_MAX),
                      "wait_for: reusing a join event");
    ACCGRAPH_ZE_CHECK(zeEventHostReset(consumed), "wait_for: reusing a join event");
  }
  join_used[slot] = true;
  ACCGRAPH_ZE_CHECK(zeCommandListAppendBarrier(other.target(), join, 0, nullptr),
                    "wait_for: marking the other stream's work");
  ACCGRAPH_ZE_CHECK(zeCommandListAppendWaitOnEvents(list, 1, &join), "wait_for");
  ACCGRAPH_ZE_CHECK(zeCommandListAppendEventReset(list, join), "wait_for");
  ACCGRAPH_ZE_CHECK(zeCommandListAppendSignalEvent(list, consumed), "wait_for");
}

// --- ZeStream --------------------------------------------------------------------------------

ZeStream::ZeStream(std::shared_ptr<Runtime> runtime, DeviceState& device,
                   ze_command_list_handle_t list, Ownership ownership,
                   std::shared_ptr<StreamCore> list_owner)
    : core_(std::make_shared<StreamCore>(std::move(runtime), device, list, ownership,
                                         std::move(list_owner))) {
  if (ownership == Ownership::Borrowed) return;
  try {
    core_->runtime->created_lists.insert(list, core_);
  } catch (...) {
    core_->ownership = Ownership::Borrowed;  // the caller destroys the list it created
    throw;
  }
}

// The core may outlive this object while a graph still holds it (a capture in progress).
ZeStream::~ZeStream() = default;

void ZeStream::copy(void* dst, const void* src, size_t bytes) {
  StreamCore& core = *core_;
  std::shared_ptr<StreamCore> keep = core.keep_list_alive("copy");
  std::lock_guard<std::mutex> lock(core.mutex);
  ze_command_list_handle_t list = core.target();
  ACCGRAPH_ZE_CHECK(zeCommandListAppendMemoryCopy(list, dst, src, bytes, nullptr, 0, nullptr),
                    fmt::format("copy of {} bytes", bytes));
  core.order_after_append(list);
  if (core.capture != StreamCapture::None) core.note(fmt::format("copy {} bytes", bytes));
}

void ZeStream::fill(void* dst, uint8_t value, size_t bytes) {
  StreamCore& core = *core_;
  std::shared_ptr<StreamCore> keep = core.keep_list_alive("fill");
  std::lock_guard<std::mutex> lock(core.mutex);
  ze_command_list_handle_t list = core.target();
  ACCGRAPH_ZE_CHECK(
      zeCommandListAppendMemoryFill(list, dst, &value, sizeof(value), bytes, nullptr, 0, nullptr),
      fmt::format("fill of {} bytes", bytes));
  core.order_after_append(list);
  if (core.capture != StreamCapture::None)
    core.note(fmt::format("fill {} bytes with {:#04x}", bytes, value));
}

void ZeStream::delay(std::chrono::nanoseconds duration) {
  StreamCore& core = *core_;
  DeviceState& device = core.device;
  if (device.spin_kernel == nullptr)
    throw Error(ErrorCode::Unsupported,
                fmt::format("delay: device {} has no working '{}' kernel ({}): check "
                            "capabilities().timed_delay first",
                            device.index, kSpinKernelName, device.delay_problem),
                kBackendName);
  const uint64_t ns = static_cast<uint64_t>(duration.count());
  const ze_group_count_t one{1, 1, 1};
  std::shared_ptr<StreamCore> keep = core.keep_list_alive("delay");
  std::lock_guard<std::mutex> lock(core.mutex);
  ze_command_list_handle_t list = core.target();
  {
    // The argument is read at append time, so set + append must not interleave across threads.
    std::lock_guard<std::mutex> kernel_lock(device.kernel_mutex);
    ACCGRAPH_ZE_CHECK(zeKernelSetArgumentValue(device.spin_kernel, 0, sizeof(ns), &ns), "delay");
    ACCGRAPH_ZE_CHECK(
        zeCommandListAppendLaunchKernel(list, device.spin_kernel, &one, nullptr, 0, nullptr),
        fmt::format("delay of {} ns", ns));
  }
  core.order_after_append(list);
  if (core.capture != StreamCapture::None) core.note(fmt::format("delay {} ns", ns));
}

void ZeStream::wait_for(StreamImpl& other) {
  ZeStream& source = as_ze_stream(other, "wait_for");
  if (&source.core()->device != &core_->device)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("wait_for: the other stream is on device {} and this one on device "
                            "{}: level_zero joins streams of one device only",
                            source.core()->device.index, core_->device.index),
                kBackendName);
  core_->wait_for(*source.core());
}

void ZeStream::synchronize() { core_->synchronize(); }

bool ZeStream::is_capturing() const {
  std::lock_guard<std::mutex> lock(core_->mutex);
  return core_->capture_state() != StreamCapture::None;
}

}  // namespace accgraph::detail::level_zero
