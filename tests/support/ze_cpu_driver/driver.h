// Internal objects of the CPU Level Zero driver: handles, the worker thread, commands, events.
#pragma once

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include "ze_graph_ext.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zecpu {

// Note [Handle resolution]
// Every object starts with a type tag. Core entry points reached through the loader receive our own
// handles, but the extension entry points (looked up with zeDriverGetExtensionFunctionAddress) are
// called directly by the application, which may hold the loader's wrapper objects instead. A
// loader 1.8 wrapper keeps the driver handle as its first member, so a handle whose tag does not
// match is unwrapped once.
enum class Tag : uint64_t {
  Driver = 0x7a65637075447276,
  Device,
  Context,
  CommandQueue,
  CommandList,
  Fence,
  EventPool,
  Event,
  Module,
  ModuleBuildLog,
  Kernel,
  Graph,
  ExecutableGraph,
};

struct Object {
  explicit Object(Tag tag) : tag_(tag) {}
  ~Object() { tag_ = Tag{0}; }  // a destroyed handle no longer resolves
  Tag tag_;
};

template <class T>
T* resolve(const void* handle) {
  if (handle == nullptr) return nullptr;
  auto tag_of = [](const void* p) { return *static_cast<const Tag*>(p); };
  if (tag_of(handle) == T::kTag) return static_cast<T*>(const_cast<void*>(handle));
  const void* inner =
      *static_cast<void* const*>(handle);  // loader wrapper, see Note [Handle resolution]
  if (inner != nullptr && tag_of(inner) == T::kTag)
    return static_cast<T*>(const_cast<void*>(inner));
  return nullptr;
}

// -- configuration read from the environment
// ---------------------------------------------------------------
bool graph_extension_enabled();    // false when ZE_ACCGRAPH_CPU_NO_GRAPH=1
uint32_t timestamp_valid_bits();   // ZE_ACCGRAPH_CPU_VALID_BITS, default 64
uint64_t device_ticks();           // 1 tick = 1 ns of steady_clock, masked to the valid bits
uint64_t host_ns();                // unmasked steady_clock ns
uint64_t physical_memory_bytes();  // the "device memory" size: the host's physical memory

// -- objects
// ---------------------------------------------------------------------------------------------------
struct Driver : Object {
  static constexpr Tag kTag = Tag::Driver;
  Driver() : Object(kTag) {}
};

struct Device : Object {
  static constexpr Tag kTag = Tag::Device;
  Device() : Object(kTag) {}
};

Driver* the_driver();
Device* the_device();

struct Context : Object {
  static constexpr Tag kTag = Tag::Context;
  Context() : Object(kTag) {}
};

// Runs tasks one after another on its own thread: the in-order engine behind a command queue or an
// immediate command list. Enqueue returns at once, as on a device.
class Worker {
 public:
  Worker();
  ~Worker();  // drains the queue, then joins
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void enqueue(std::function<void()> task);
  // Waits until every task enqueued so far has run; false on timeout (UINT64_MAX = forever).
  bool wait_idle(uint64_t timeout_ns);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

// One recorded operation. `run` waits on its wait events, does the work, signals its event.
struct Command {
  std::string name;  // for graph dumps
  std::function<void()> run;
};

struct EventPool : Object {
  static constexpr Tag kTag = Tag::EventPool;
  EventPool() : Object(kTag) {}
  bool kernel_timestamps = false;
  uint32_t count = 0;
};

// Event and fence state is guarded by one process-wide mutex (sync_mutex()) and waited on through
// one condition variable: simple and correct, and fast enough for tests.
struct Event : Object {
  static constexpr Tag kTag = Tag::Event;
  Event() : Object(kTag) {}
  EventPool* pool = nullptr;
  bool signaled = false;
  uint64_t start_ticks = 0;
  uint64_t end_ticks = 0;
};

struct Fence : Object {
  static constexpr Tag kTag = Tag::Fence;
  Fence() : Object(kTag) {}
  bool signaled = false;
};

std::mutex& sync_mutex();
std::condition_variable& sync_cv();
void signal_event(Event* event);
void wait_event(Event* event);
// Waits for `done()` under sync_mutex(); false on timeout (UINT64_MAX = forever, 0 = poll).
bool wait_for(uint64_t timeout_ns, const std::function<bool()>& done);

struct Graph;

struct CommandList : Object {
  static constexpr Tag kTag = Tag::CommandList;
  CommandList() : Object(kTag) {}
  bool immediate = false;
  std::unique_ptr<Worker> worker;  // immediate lists only
  std::mutex mutex;                // guards everything below
  std::vector<Command> commands;   // regular lists only
  bool closed = false;
  Graph* capture_target = nullptr;  // set while a graph capture is active
};

struct CommandQueue : Object {
  static constexpr Tag kTag = Tag::CommandQueue;
  CommandQueue() : Object(kTag) {}
  Worker worker;
};

struct Module : Object {
  static constexpr Tag kTag = Tag::Module;
  Module() : Object(kTag) {}
};

struct ModuleBuildLog : Object {
  static constexpr Tag kTag = Tag::ModuleBuildLog;
  ModuleBuildLog() : Object(kTag) {}
};

// What a launch captures: the kernel's arguments and sizes at append time (as Level Zero
// specifies).
struct KernelLaunch {
  std::vector<std::vector<uint8_t>> args;
  uint32_t group_size[3] = {1, 1, 1};
  ze_group_count_t group_count = {1, 1, 1};
};

using BuiltinKernel = void (*)(const KernelLaunch&);

struct Kernel : Object {
  static constexpr Tag kTag = Tag::Kernel;
  Kernel() : Object(kTag) {}
  std::string name;
  BuiltinKernel body = nullptr;
  uint32_t num_args = 0;
  KernelLaunch state;
};

struct Graph : Object {
  static constexpr Tag kTag = Tag::Graph;
  Graph() : Object(kTag) {}
  uint64_t id = 0;
  std::vector<Command> commands;
  CommandList* capturing = nullptr;            // list recording into this graph, if any
  CommandList* paused = nullptr;               // list whose capture is paused
  ze_command_list_handle_t primary = nullptr;  // the handle as the application passed it
  bool captured = false;                       // capture has ended: may be instantiated
  std::vector<std::pair<zex_mem_graph_free_callback_fn_t, void*>> destruction_callbacks;
  std::atomic<int> executables{0};
};

struct ExecutableGraph : Object {
  static constexpr Tag kTag = Tag::ExecutableGraph;
  ExecutableGraph() : Object(kTag) {}
  Graph* source = nullptr;
  std::shared_ptr<const std::vector<Command>> commands;
};

// -- shared helpers used by cmdlist.cpp and graph.cpp
// ----------------------------------------------------------- Validates and resolves an append's
// signal event and wait list.
ze_result_t resolve_events(ze_event_handle_t signal, uint32_t num_waits,
                           const ze_event_handle_t* waits, Event** signal_out,
                           std::vector<Event*>* waits_out);
// Wraps `work` into a command that honours the wait list, kernel timestamps and the signal event.
Command make_command(std::string name, std::function<void()> work, Event* signal,
                     std::vector<Event*> waits);
// Records the command if the list is capturing, runs it asynchronously if the list is immediate,
// otherwise appends it to the regular list.
ze_result_t submit(CommandList* list, Command command);

// -- DDI table fillers, called by the exported getters in driver.cpp
// ------------------------------------------
void fill_mem_table(ze_mem_dditable_t* table);
void fill_module_table(ze_module_dditable_t* table);
void fill_module_build_log_table(ze_module_build_log_dditable_t* table);
void fill_kernel_table(ze_kernel_dditable_t* table);
void fill_command_queue_table(ze_command_queue_dditable_t* table);
void fill_command_list_table(ze_command_list_dditable_t* table);
void fill_fence_table(ze_fence_dditable_t* table);
void fill_event_pool_table(ze_event_pool_dditable_t* table);
void fill_event_table(ze_event_dditable_t* table);
// Returns the address of a graph extension entry point, or nullptr.
void* graph_function_address(const char* name);

}  // namespace zecpu
