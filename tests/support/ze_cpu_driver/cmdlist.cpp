// Execution in the CPU Level Zero driver: worker threads, command queues and lists, appends,
// events, fences.
#include "driver.h"

#include <cstring>

namespace zecpu {

// -- worker
// -------------------------------------------------------------------------------------------------------

Worker::Worker() : thread_([this] { run(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void Worker::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

bool Worker::wait_idle(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto idle = [this] { return tasks_.empty() && !busy_; };
  if (timeout_ns == UINT64_MAX) {
    idle_cv_.wait(lock, idle);
    return true;
  }
  return idle_cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), idle);
}

void Worker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and everything enqueued has run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    task();
    lock.lock();
    busy_ = false;
    if (tasks_.empty()) idle_cv_.notify_all();
  }
}

// -- events and fences
// ----------------------------------------------------------------------------------------------

std::mutex& sync_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::condition_variable& sync_cv() {
  static std::condition_variable cv;
  return cv;
}

// Note [Event memory order]
// A command's work (a copy, a timestamp write) runs on a worker thread before it signals its event,
// and the application reads that memory once zeEventHostSynchronize / zeEventQueryStatus report the
// event signalled. Level Zero promises that data written before a signal is visible after it is
// observed; here the promise is kept by sync_mutex(): signal_event sets `signaled` under it (the
// unlock is a release), and every query reads `signaled` under it (the lock is an acquire), so the
// work happens-before the query that sees the signal, for the compiler, the CPU and ThreadSanitizer
// alike. Reading the written memory without such a query (polling it) would be a data race with the
// worker's plain writes.
void signal_event(Event* event) {
  {
    std::lock_guard<std::mutex> lock(sync_mutex());
    event->signaled = true;
  }
  sync_cv().notify_all();
}

void wait_event(Event* event) {
  std::unique_lock<std::mutex> lock(sync_mutex());
  sync_cv().wait(lock, [event] { return event->signaled; });
}

bool wait_for(uint64_t timeout_ns, const std::function<bool()>& done) {
  std::unique_lock<std::mutex> lock(sync_mutex());
  if (timeout_ns == UINT64_MAX) {
    sync_cv().wait(lock, done);
    return true;
  }
  return sync_cv().wait_for(lock, std::chrono::nanoseconds(timeout_ns), done);
}

ze_result_t resolve_events(ze_event_handle_t signal, uint32_t num_waits,
                           const ze_event_handle_t* waits, Event** signal_out,
                           std::vector<Event*>* waits_out) {
  *signal_out = nullptr;
  if (signal != nullptr) {
    *signal_out = resolve<Event>(signal);
    if (*signal_out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  }
  if (num_waits > 0 && waits == nullptr) return ZE_RESULT_ERROR_INVALID_SIZE;
  waits_out->clear();
  for (uint32_t i = 0; i < num_waits; ++i) {
    Event* event = resolve<Event>(waits[i]);
    if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    waits_out->push_back(event);
  }
  return ZE_RESULT_SUCCESS;
}

Command make_command(std::string name, std::function<void()> work, Event* signal,
                     std::vector<Event*> waits) {
  auto run = [work = std::move(work), signal, waits = std::move(waits)] {
    for (Event* event : waits) wait_event(event);
    const bool timestamps = signal != nullptr && signal->pool->kernel_timestamps;
    const uint64_t start = timestamps ? device_ticks() : 0;
    if (work) work();
    if (timestamps) {
      std::lock_guard<std::mutex> lock(sync_mutex());
      signal->start_ticks = start;
      signal->end_ticks = device_ticks();
    }
    if (signal != nullptr) signal_event(signal);
  };
  return Command{std::move(name), std::move(run)};
}

ze_result_t submit(CommandList* list, Command command) {
  std::lock_guard<std::mutex> lock(list->mutex);
  if (list->capture_target != nullptr) {
    list->capture_target->commands.push_back(std::move(command));
  } else if (list->immediate) {
    list->worker->enqueue(std::move(command.run));
  } else {
    if (list->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // appending to a closed list
    list->commands.push_back(std::move(command));
  }
  return ZE_RESULT_SUCCESS;
}

namespace {

// -- event pools and events
// -------------------------------------------------------------------------------------------

ze_result_t event_pool_create(ze_context_handle_t context, const ze_event_pool_desc_t* desc,
                              uint32_t, ze_device_handle_t*, ze_event_pool_handle_t* out) {
  if (resolve<Context>(context) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->count == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  auto* pool = new EventPool();
  pool->count = desc->count;
  pool->kernel_timestamps = (desc->flags & ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP) != 0;
  *out = reinterpret_cast<ze_event_pool_handle_t>(pool);
  return ZE_RESULT_SUCCESS;
}

ze_result_t event_pool_destroy(ze_event_pool_handle_t handle) {
  EventPool* pool = resolve<EventPool>(handle);
  if (pool == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete pool;
  return ZE_RESULT_SUCCESS;
}

ze_result_t event_create(ze_event_pool_handle_t pool_handle, const ze_event_desc_t* desc,
                         ze_event_handle_t* out) {
  EventPool* pool = resolve<EventPool>(pool_handle);
  if (pool == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->index >= pool->count) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  auto* event = new Event();
  event->pool = pool;
  *out = reinterpret_cast<ze_event_handle_t>(event);
  return ZE_RESULT_SUCCESS;
}

ze_result_t event_destroy(ze_event_handle_t handle) {
  Event* event = resolve<Event>(handle);
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete event;
  return ZE_RESULT_SUCCESS;
}

ze_result_t event_host_signal(ze_event_handle_t handle) {
  Event* event = resolve<Event>(handle);
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  signal_event(event);
  return ZE_RESULT_SUCCESS;
}

ze_result_t event_host_synchronize(ze_event_handle_t handle, uint64_t timeout_ns) {
  Event* event = resolve<Event>(handle);
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return wait_for(timeout_ns, [event] { return event->signaled; }) ? ZE_RESULT_SUCCESS
                                                                   : ZE_RESULT_NOT_READY;
}

ze_result_t event_query_status(ze_event_handle_t handle) {
  return event_host_synchronize(handle, 0);
}

ze_result_t event_host_reset(ze_event_handle_t handle) {
  Event* event = resolve<Event>(handle);
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  std::lock_guard<std::mutex> lock(sync_mutex());
  event->signaled = false;
  event->start_ticks = event->end_ticks = 0;
  return ZE_RESULT_SUCCESS;
}

ze_result_t event_query_kernel_timestamp(ze_event_handle_t handle,
                                         ze_kernel_timestamp_result_t* result) {
  Event* event = resolve<Event>(handle);
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (result == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  std::lock_guard<std::mutex> lock(sync_mutex());
  if (!event->signaled) return ZE_RESULT_NOT_READY;
  if (!event->pool->kernel_timestamps) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  // The CPU device is never switched out, so wall-clock (global) and context-active times are the
  // same.
  result->global.kernelStart = result->context.kernelStart = event->start_ticks;
  result->global.kernelEnd = result->context.kernelEnd = event->end_ticks;
  return ZE_RESULT_SUCCESS;
}

// -- fences
// ---------------------------------------------------------------------------------------------------------

ze_result_t fence_create(ze_command_queue_handle_t queue, const ze_fence_desc_t* desc,
                         ze_fence_handle_t* out) {
  if (resolve<CommandQueue>(queue) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  auto* fence = new Fence();
  fence->signaled = (desc->flags & ZE_FENCE_FLAG_SIGNALED) != 0;
  *out = reinterpret_cast<ze_fence_handle_t>(fence);
  return ZE_RESULT_SUCCESS;
}

ze_result_t fence_destroy(ze_fence_handle_t handle) {
  Fence* fence = resolve<Fence>(handle);
  if (fence == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete fence;
  return ZE_RESULT_SUCCESS;
}

ze_result_t fence_host_synchronize(ze_fence_handle_t handle, uint64_t timeout_ns) {
  Fence* fence = resolve<Fence>(handle);
  if (fence == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return wait_for(timeout_ns, [fence] { return fence->signaled; }) ? ZE_RESULT_SUCCESS
                                                                   : ZE_RESULT_NOT_READY;
}

ze_result_t fence_query_status(ze_fence_handle_t handle) {
  return fence_host_synchronize(handle, 0);
}

ze_result_t fence_reset(ze_fence_handle_t handle) {
  Fence* fence = resolve<Fence>(handle);
  if (fence == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  std::lock_guard<std::mutex> lock(sync_mutex());
  fence->signaled = false;
  return ZE_RESULT_SUCCESS;
}

// -- command queues
// ---------------------------------------------------------------------------------------------------

ze_result_t command_queue_create(ze_context_handle_t context, ze_device_handle_t device,
                                 const ze_command_queue_desc_t* desc,
                                 ze_command_queue_handle_t* out) {
  if (resolve<Context>(context) == nullptr || resolve<Device>(device) == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->ordinal != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // one queue group
  *out = reinterpret_cast<ze_command_queue_handle_t>(new CommandQueue());
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_queue_destroy(ze_command_queue_handle_t handle) {
  CommandQueue* queue = resolve<CommandQueue>(handle);
  if (queue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete queue;  // the worker finishes what was submitted first
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_queue_execute_command_lists(ze_command_queue_handle_t handle, uint32_t count,
                                                ze_command_list_handle_t* handles,
                                                ze_fence_handle_t fence_handle) {
  CommandQueue* queue = resolve<CommandQueue>(handle);
  if (queue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (handles == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (count == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  Fence* fence = nullptr;
  if (fence_handle != nullptr && (fence = resolve<Fence>(fence_handle)) == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  // Validate everything before running anything, so a bad call has no partial effect.
  std::vector<CommandList*> lists;
  for (uint32_t i = 0; i < count; ++i) {
    CommandList* list = resolve<CommandList>(handles[i]);
    if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    std::lock_guard<std::mutex> lock(list->mutex);
    if (list->immediate) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!list->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    lists.push_back(list);
  }
  for (CommandList* list : lists) {
    std::lock_guard<std::mutex> lock(list->mutex);
    // The commands are copied, so resetting the list later cannot disturb work already submitted.
    for (const Command& command : list->commands) queue->worker.enqueue(command.run);
  }
  if (fence != nullptr) {
    queue->worker.enqueue([fence] {
      {
        std::lock_guard<std::mutex> lock(sync_mutex());
        fence->signaled = true;
      }
      sync_cv().notify_all();
    });
  }
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_queue_synchronize(ze_command_queue_handle_t handle, uint64_t timeout_ns) {
  CommandQueue* queue = resolve<CommandQueue>(handle);
  if (queue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return queue->worker.wait_idle(timeout_ns) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

// -- command lists
// ----------------------------------------------------------------------------------------------------

ze_result_t command_list_create(ze_context_handle_t context, ze_device_handle_t device,
                                const ze_command_list_desc_t* desc, ze_command_list_handle_t* out) {
  if (resolve<Context>(context) == nullptr || resolve<Device>(device) == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *out = reinterpret_cast<ze_command_list_handle_t>(new CommandList());
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_list_create_immediate(ze_context_handle_t context, ze_device_handle_t device,
                                          const ze_command_queue_desc_t* desc,
                                          ze_command_list_handle_t* out) {
  if (resolve<Context>(context) == nullptr || resolve<Device>(device) == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->ordinal != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  auto* list = new CommandList();
  list->immediate = true;
  // Always asynchronous, even for ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS: the client must synchronise
  // itself.
  list->worker = std::make_unique<Worker>();
  *out = reinterpret_cast<ze_command_list_handle_t>(list);
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_list_destroy(ze_command_list_handle_t handle) {
  CommandList* list = resolve<CommandList>(handle);
  if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  {
    std::lock_guard<std::mutex> lock(list->mutex);
    if (list->capture_target != nullptr) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  }
  delete list;  // an immediate list's worker finishes what was appended first
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_list_close(ze_command_list_handle_t handle) {
  CommandList* list = resolve<CommandList>(handle);
  if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  std::lock_guard<std::mutex> lock(list->mutex);
  if (!list->immediate) list->closed = true;
  return ZE_RESULT_SUCCESS;
}

ze_result_t command_list_reset(ze_command_list_handle_t handle) {
  CommandList* list = resolve<CommandList>(handle);
  if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (list->immediate) list->worker->wait_idle(UINT64_MAX);
  std::lock_guard<std::mutex> lock(list->mutex);
  list->commands.clear();
  list->closed = false;
  return ZE_RESULT_SUCCESS;
}

// Shared front half of every append: resolve the list and the events, then submit.
ze_result_t append(ze_command_list_handle_t handle, const char* name, std::function<void()> work,
                   ze_event_handle_t signal, uint32_t num_waits, const ze_event_handle_t* waits) {
  CommandList* list = resolve<CommandList>(handle);
  if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  Event* signal_event_ptr = nullptr;
  std::vector<Event*> wait_events;
  const ze_result_t result =
      resolve_events(signal, num_waits, waits, &signal_event_ptr, &wait_events);
  if (result != ZE_RESULT_SUCCESS) return result;
  return submit(list,
                make_command(name, std::move(work), signal_event_ptr, std::move(wait_events)));
}

ze_result_t append_write_global_timestamp(ze_command_list_handle_t list, uint64_t* destination,
                                          ze_event_handle_t signal, uint32_t num_waits,
                                          ze_event_handle_t* waits) {
  if (destination == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return append(
      list, "WriteGlobalTimestamp", [destination] { *destination = device_ticks(); }, signal,
      num_waits, waits);
}

ze_result_t append_barrier(ze_command_list_handle_t list, ze_event_handle_t signal,
                           uint32_t num_waits, ze_event_handle_t* waits) {
  // Lists execute in order, so a barrier only has to honour its events.
  return append(list, "Barrier", nullptr, signal, num_waits, waits);
}

ze_result_t append_memory_ranges_barrier(ze_command_list_handle_t list, uint32_t, const size_t*,
                                         const void**, ze_event_handle_t signal, uint32_t num_waits,
                                         ze_event_handle_t* waits) {
  return append(list, "MemoryRangesBarrier", nullptr, signal, num_waits, waits);
}

ze_result_t append_memory_copy(ze_command_list_handle_t list, void* destination, const void* source,
                               size_t size, ze_event_handle_t signal, uint32_t num_waits,
                               ze_event_handle_t* waits) {
  if (destination == nullptr || source == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return append(
      list, "MemoryCopy", [=] { std::memmove(destination, source, size); }, signal, num_waits,
      waits);
}

ze_result_t append_memory_fill(ze_command_list_handle_t list, void* destination,
                               const void* pattern, size_t pattern_size, size_t size,
                               ze_event_handle_t signal, uint32_t num_waits,
                               ze_event_handle_t* waits) {
  if (destination == nullptr || pattern == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (pattern_size == 0 || pattern_size > 256) return ZE_RESULT_ERROR_INVALID_SIZE;
  // The pattern is copied now: the application may reuse its buffer as soon as the append returns.
  std::vector<uint8_t> bytes(static_cast<const uint8_t*>(pattern),
                             static_cast<const uint8_t*>(pattern) + pattern_size);
  auto work = [destination, size, bytes = std::move(bytes)] {
    auto* out = static_cast<uint8_t*>(destination);
    for (size_t i = 0; i < size; ++i) out[i] = bytes[i % bytes.size()];
  };
  return append(list, "MemoryFill", std::move(work), signal, num_waits, waits);
}

ze_result_t append_signal_event(ze_command_list_handle_t list, ze_event_handle_t event) {
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return append(list, "SignalEvent", nullptr, event, 0, nullptr);
}

ze_result_t append_wait_on_events(ze_command_list_handle_t list, uint32_t num_events,
                                  ze_event_handle_t* events) {
  if (events == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return append(list, "WaitOnEvents", nullptr, nullptr, num_events, events);
}

ze_result_t append_event_reset(ze_command_list_handle_t list, ze_event_handle_t handle) {
  Event* event = resolve<Event>(handle);
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  auto work = [event] {
    std::lock_guard<std::mutex> lock(sync_mutex());
    event->signaled = false;
  };
  return append(list, "EventReset", std::move(work), nullptr, 0, nullptr);
}

ze_result_t append_launch_kernel(ze_command_list_handle_t list, ze_kernel_handle_t kernel_handle,
                                 const ze_group_count_t* group_count, ze_event_handle_t signal,
                                 uint32_t num_waits, ze_event_handle_t* waits) {
  Kernel* kernel = resolve<Kernel>(kernel_handle);
  if (kernel == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (group_count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  for (const auto& arg : kernel->state.args) {
    if (arg.empty()) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // an argument was never set
  }
  KernelLaunch launch = kernel->state;  // arguments as they are now, not at execution time
  launch.group_count = *group_count;
  BuiltinKernel body = kernel->body;
  return append(
      list, ("LaunchKernel " + kernel->name).c_str(), [body, launch] { body(launch); }, signal,
      num_waits, waits);
}

}  // namespace

void fill_command_queue_table(ze_command_queue_dditable_t* table) {
  table->pfnCreate = command_queue_create;
  table->pfnDestroy = command_queue_destroy;
  table->pfnExecuteCommandLists = command_queue_execute_command_lists;
  table->pfnSynchronize = command_queue_synchronize;
}

void fill_command_list_table(ze_command_list_dditable_t* table) {
  table->pfnCreate = command_list_create;
  table->pfnCreateImmediate = command_list_create_immediate;
  table->pfnDestroy = command_list_destroy;
  table->pfnClose = command_list_close;
  table->pfnReset = command_list_reset;
  table->pfnAppendWriteGlobalTimestamp = append_write_global_timestamp;
  table->pfnAppendBarrier = append_barrier;
  table->pfnAppendMemoryRangesBarrier = append_memory_ranges_barrier;
  table->pfnAppendMemoryCopy = append_memory_copy;
  table->pfnAppendMemoryFill = append_memory_fill;
  table->pfnAppendSignalEvent = append_signal_event;
  table->pfnAppendWaitOnEvents = append_wait_on_events;
  table->pfnAppendEventReset = append_event_reset;
  table->pfnAppendLaunchKernel = append_launch_kernel;
}

void fill_fence_table(ze_fence_dditable_t* table) {
  table->pfnCreate = fence_create;
  table->pfnDestroy = fence_destroy;
  table->pfnHostSynchronize = fence_host_synchronize;
  table->pfnQueryStatus = fence_query_status;
  table->pfnReset = fence_reset;
}

void fill_event_pool_table(ze_event_pool_dditable_t* table) {
  table->pfnCreate = event_pool_create;
  table->pfnDestroy = event_pool_destroy;
}

void fill_event_table(ze_event_dditable_t* table) {
  table->pfnCreate = event_create;
  table->pfnDestroy = event_destroy;
  table->pfnHostSignal = event_host_signal;
  table->pfnHostSynchronize = event_host_synchronize;
  table->pfnQueryStatus = event_query_status;
  table->pfnHostReset = event_host_reset;
  table->pfnQueryKernelTimestamp = event_query_kernel_timestamp;
}

}  // namespace zecpu
