// Smoke test of the CPU Level Zero driver through the real loader: memory, lists, queues, timing,
// graphs.
//
// Run with ZE_ENABLE_ALT_DRIVERS=/abs/path/libze_accgraph_cpu.so (ctest sets it). With
// ZE_ACCGRAPH_CPU_NO_GRAPH=1 the driver hides the graph extension and the graph part is skipped.
#include <level_zero/ze_api.h>

#include "ze_graph_ext.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_failures = 0;

#define CHECK(condition)                                                                 \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      ++g_failures;                                                                      \
    }                                                                                    \
  } while (0)

// Aborts the test: later steps depend on this call.
#define REQUIRE_ZE(call)                                                           \
  do {                                                                             \
    const ze_result_t result_ = (call);                                            \
    if (result_ != ZE_RESULT_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d: %s returned 0x%x\n", __FILE__, __LINE__, #call, \
                   unsigned(result_));                                             \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

struct Setup {
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ze_context_handle_t context = nullptr;
  ze_event_pool_handle_t pool = nullptr;  // plain events, indices 0..15
  ze_event_pool_handle_t timestamp_pool = nullptr;
  uint64_t timer_hz = 0;
  uint32_t valid_bits = 0;
};

ze_event_handle_t make_event(ze_event_pool_handle_t pool, uint32_t index) {
  ze_event_desc_t desc{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, index, ZE_EVENT_SCOPE_FLAG_HOST,
                       ZE_EVENT_SCOPE_FLAG_HOST};
  ze_event_handle_t event = nullptr;
  REQUIRE_ZE(zeEventCreate(pool, &desc, &event));
  return event;
}

ze_command_list_handle_t make_immediate_list(const Setup& s) {
  ze_command_queue_desc_t desc{
      ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
      ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_list_handle_t list = nullptr;
  REQUIRE_ZE(zeCommandListCreateImmediate(s.context, s.device, &desc, &list));
  return list;
}

// Waits for everything appended so far to an immediate list (the 1.4 API has no
// zeCommandListHostSynchronize).
void drain(ze_command_list_handle_t list, ze_event_handle_t event) {
  REQUIRE_ZE(zeEventHostReset(event));
  REQUIRE_ZE(zeCommandListAppendBarrier(list, event, 0, nullptr));
  REQUIRE_ZE(zeEventHostSynchronize(event, UINT64_MAX));
}

Setup find_gpu() {
  Setup s;
  REQUIRE_ZE(zeInit(0));
  uint32_t driver_count = 0;
  REQUIRE_ZE(zeDriverGet(&driver_count, nullptr));
  std::vector<ze_driver_handle_t> drivers(driver_count);
  REQUIRE_ZE(zeDriverGet(&driver_count, drivers.data()));
  for (ze_driver_handle_t driver : drivers) {
    uint32_t device_count = 0;
    REQUIRE_ZE(zeDeviceGet(driver, &device_count, nullptr));
    std::vector<ze_device_handle_t> devices(device_count);
    REQUIRE_ZE(zeDeviceGet(driver, &device_count, devices.data()));
    for (ze_device_handle_t device : devices) {
      ze_device_properties_t properties{};
      properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2;
      REQUIRE_ZE(zeDeviceGetProperties(device, &properties));
      if (properties.type != ZE_DEVICE_TYPE_GPU) continue;
      std::printf("device: %s, timer %" PRIu64 " Hz, %u valid timestamp bits\n", properties.name,
                  properties.timerResolution, properties.timestampValidBits);
      s.driver = driver;
      s.device = device;
      s.timer_hz = properties.timerResolution;
      s.valid_bits = properties.timestampValidBits;
      // The 1.0 structure reports ns per tick instead.
      ze_device_properties_t old_properties{};
      old_properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
      REQUIRE_ZE(zeDeviceGetProperties(device, &old_properties));
      CHECK(old_properties.timerResolution == 1);
      CHECK(properties.timerResolution == 1000000000ull);
      break;
    }
    if (s.device != nullptr) break;
  }
  if (s.device == nullptr) {
    std::fprintf(stderr,
                 "no GPU device found: is ZE_ENABLE_ALT_DRIVERS set to libze_accgraph_cpu.so?\n");
    std::exit(1);
  }
  ze_context_desc_t context_desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  REQUIRE_ZE(zeContextCreate(s.driver, &context_desc, &s.context));
  ze_event_pool_desc_t pool_desc{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                                 ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 16};
  REQUIRE_ZE(zeEventPoolCreate(s.context, &pool_desc, 1, &s.device, &s.pool));
  pool_desc.flags |= ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP;
  REQUIRE_ZE(zeEventPoolCreate(s.context, &pool_desc, 1, &s.device, &s.timestamp_pool));
  return s;
}

void test_fill_and_copy(const Setup& s) {
  constexpr size_t kSize = 4096;
  ze_device_mem_alloc_desc_t device_desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
  ze_host_mem_alloc_desc_t host_desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  void* device_buffer = nullptr;
  void* host_buffer = nullptr;
  REQUIRE_ZE(zeMemAllocDevice(s.context, &device_desc, kSize, 64, s.device, &device_buffer));
  REQUIRE_ZE(zeMemAllocHost(s.context, &host_desc, kSize, 64, &host_buffer));
  ze_memory_allocation_properties_t alloc_properties{};
  alloc_properties.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
  REQUIRE_ZE(zeMemGetAllocProperties(s.context, static_cast<char*>(device_buffer) + 100,
                                     &alloc_properties, nullptr));
  CHECK(alloc_properties.type == ZE_MEMORY_TYPE_DEVICE);

  ze_command_list_handle_t list = make_immediate_list(s);
  ze_event_handle_t done = make_event(s.pool, 0);
  // Pattern sizes 1, 3 (not a power of two) and 4 into three regions, then one copy back to the
  // host.
  const uint8_t one = 0xab;
  const uint8_t three[3] = {1, 2, 3};
  const uint32_t four = 0xdeadbeef;
  auto* bytes = static_cast<uint8_t*>(device_buffer);
  REQUIRE_ZE(zeCommandListAppendMemoryFill(list, bytes, &one, 1, 1024, nullptr, 0, nullptr));
  REQUIRE_ZE(
      zeCommandListAppendMemoryFill(list, bytes + 1024, three, 3, 1023, nullptr, 0, nullptr));
  REQUIRE_ZE(
      zeCommandListAppendMemoryFill(list, bytes + 2048, &four, 4, 2048, nullptr, 0, nullptr));
  REQUIRE_ZE(
      zeCommandListAppendMemoryCopy(list, host_buffer, device_buffer, kSize, done, 0, nullptr));
  REQUIRE_ZE(zeEventHostSynchronize(done, UINT64_MAX));
  const auto* out = static_cast<const uint8_t*>(host_buffer);
  bool ok = true;
  for (size_t i = 0; i < 1024; ++i) ok = ok && out[i] == 0xab;
  for (size_t i = 0; i < 1023; ++i) ok = ok && out[1024 + i] == three[i % 3];
  for (size_t i = 0; i < 2048; i += 4) ok = ok && std::memcmp(out + 2048 + i, &four, 4) == 0;
  CHECK(ok);
  std::printf("fill+copy on an immediate list: %s\n", ok ? "ok" : "WRONG BYTES");

  REQUIRE_ZE(zeEventDestroy(done));
  REQUIRE_ZE(zeCommandListDestroy(list));
  REQUIRE_ZE(zeMemFree(s.context, device_buffer));
  REQUIRE_ZE(zeMemFree(s.context, host_buffer));
}

void test_queue_and_fence(const Setup& s) {
  ze_host_mem_alloc_desc_t host_desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  void* buffer = nullptr;
  REQUIRE_ZE(zeMemAllocHost(s.context, &host_desc, 256, 0, &buffer));
  ze_command_queue_desc_t queue_desc{
      ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
      ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_queue_handle_t queue = nullptr;
  REQUIRE_ZE(zeCommandQueueCreate(s.context, s.device, &queue_desc, &queue));
  ze_command_list_desc_t list_desc{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
  ze_command_list_handle_t list = nullptr;
  REQUIRE_ZE(zeCommandListCreate(s.context, s.device, &list_desc, &list));
  const uint8_t value = 0x5a;
  REQUIRE_ZE(zeCommandListAppendMemoryFill(list, buffer, &value, 1, 256, nullptr, 0, nullptr));
  REQUIRE_ZE(zeCommandListClose(list));
  ze_fence_desc_t fence_desc{ZE_STRUCTURE_TYPE_FENCE_DESC, nullptr, 0};
  ze_fence_handle_t fence = nullptr;
  REQUIRE_ZE(zeFenceCreate(queue, &fence_desc, &fence));
  CHECK(zeFenceQueryStatus(fence) == ZE_RESULT_NOT_READY);
  for (int run = 0; run < 2; ++run) {
    std::memset(buffer, 0, 256);
    REQUIRE_ZE(zeCommandQueueExecuteCommandLists(queue, 1, &list, fence));
    REQUIRE_ZE(zeFenceHostSynchronize(fence, UINT64_MAX));
    CHECK(static_cast<uint8_t*>(buffer)[0] == 0x5a && static_cast<uint8_t*>(buffer)[255] == 0x5a);
    REQUIRE_ZE(zeFenceReset(fence));
  }
  REQUIRE_ZE(zeCommandQueueSynchronize(queue, UINT64_MAX));
  std::printf("regular list through a queue and fence, twice: done\n");
  REQUIRE_ZE(zeFenceDestroy(fence));
  REQUIRE_ZE(zeCommandListDestroy(list));
  REQUIRE_ZE(zeCommandQueueDestroy(queue));
  REQUIRE_ZE(zeMemFree(s.context, buffer));
}

void test_kernel_timing(const Setup& s, ze_module_handle_t module) {
  ze_kernel_desc_t bad_desc{ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, "no_such_kernel"};
  ze_kernel_handle_t bad = nullptr;
  CHECK(zeKernelCreate(module, &bad_desc, &bad) == ZE_RESULT_ERROR_INVALID_KERNEL_NAME);

  ze_kernel_desc_t desc{ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, "accgraph_spin_ns"};
  ze_kernel_handle_t spin = nullptr;
  REQUIRE_ZE(zeKernelCreate(module, &desc, &spin));
  REQUIRE_ZE(zeKernelSetGroupSize(spin, 1, 1, 1));
  const ze_group_count_t one_group{1, 1, 1};

  ze_host_mem_alloc_desc_t host_desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  void* stamps_memory = nullptr;
  REQUIRE_ZE(zeMemAllocHost(s.context, &host_desc, 2 * sizeof(uint64_t), 8, &stamps_memory));
  auto* stamps = static_cast<uint64_t*>(stamps_memory);

  ze_command_list_handle_t list = make_immediate_list(s);
  ze_event_handle_t done = make_event(s.pool, 1);
  ze_event_handle_t kernel_event = make_event(s.timestamp_pool, 0);

  const uint64_t spin_ns = 50000;
  REQUIRE_ZE(zeKernelSetArgumentValue(spin, 0, sizeof(spin_ns), &spin_ns));
  REQUIRE_ZE(zeCommandListAppendWriteGlobalTimestamp(list, &stamps[0], nullptr, 0, nullptr));
  REQUIRE_ZE(zeCommandListAppendLaunchKernel(list, spin, &one_group, kernel_event, 0, nullptr));
  REQUIRE_ZE(zeCommandListAppendWriteGlobalTimestamp(list, &stamps[1], done, 0, nullptr));
  REQUIRE_ZE(zeEventHostSynchronize(done, UINT64_MAX));
  const uint64_t mask = s.valid_bits >= 64 ? ~0ull : (1ull << s.valid_bits) - 1;
  const double elapsed_ns = double((stamps[1] - stamps[0]) & mask) * 1e9 / double(s.timer_hz);
  std::printf("spin 50 us between two global timestamps: %.1f us\n", elapsed_ns / 1000.0);
  CHECK(elapsed_ns >= 50000.0);

  ze_kernel_timestamp_result_t kernel_time{};
  REQUIRE_ZE(zeEventQueryKernelTimestamp(kernel_event, &kernel_time));
  const double kernel_ns =
      double((kernel_time.global.kernelEnd - kernel_time.global.kernelStart) & mask) * 1e9 /
      double(s.timer_hz);
  std::printf("kernel timestamp event: %.1f us\n", kernel_ns / 1000.0);
  CHECK(kernel_ns >= 50000.0);

  // Appends return before the work runs: a 20 ms kernel is still running right after the append.
  const uint64_t long_spin = 20000000;
  REQUIRE_ZE(zeEventHostReset(done));
  REQUIRE_ZE(zeKernelSetArgumentValue(spin, 0, sizeof(long_spin), &long_spin));
  REQUIRE_ZE(zeCommandListAppendLaunchKernel(list, spin, &one_group, done, 0, nullptr));
  CHECK(zeEventQueryStatus(done) == ZE_RESULT_NOT_READY);
  REQUIRE_ZE(zeEventHostSynchronize(done, UINT64_MAX));

  REQUIRE_ZE(zeEventDestroy(kernel_event));
  REQUIRE_ZE(zeEventDestroy(done));
  REQUIRE_ZE(zeCommandListDestroy(list));
  REQUIRE_ZE(zeKernelDestroy(spin));
  REQUIRE_ZE(zeMemFree(s.context, stamps_memory));
}

bool graph_extension_advertised(const Setup& s) {
  uint32_t count = 0;
  REQUIRE_ZE(zeDriverGetExtensionProperties(s.driver, &count, nullptr));
  std::vector<ze_driver_extension_properties_t> extensions(count);
  REQUIRE_ZE(zeDriverGetExtensionProperties(s.driver, &count, extensions.data()));
  bool found = false;
  for (const auto& extension : extensions) {
    found = found || std::strcmp(extension.name, ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_EXT_NAME) == 0;
  }
  return found;
}

uint32_t graph_capability_flags(const Setup& s) {
  ze_record_replay_graph_ext_properties_t graph_properties{
      ACCGRAPH_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES, nullptr, 0};
  ze_device_properties_t properties{};
  properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  properties.pNext = &graph_properties;
  REQUIRE_ZE(zeDeviceGetProperties(s.device, &properties));
  return graph_properties.graphFlags;
}

template <class Function>
Function lookup(const Setup& s, const char* name) {
  void* address = nullptr;
  if (zeDriverGetExtensionFunctionAddress(s.driver, name, &address) != ZE_RESULT_SUCCESS ||
      address == nullptr) {
    std::fprintf(stderr, "extension function %s missing\n", name);
    std::exit(1);
  }
  return reinterpret_cast<Function>(address);
}

// Records fill_u32(data, value) on an immediate list, checks that capture did not run it and that
// each replay does. Uses the stable Ext entry points.
void test_graph_ext(const Setup& s, ze_module_handle_t module) {
  auto begin =
      lookup<ze_pfnCommandListBeginGraphCaptureExt_t>(s, "zeCommandListBeginGraphCaptureExt");
  auto capturing = lookup<ze_pfnCommandListIsGraphCaptureEnabledExt_t>(
      s, "zeCommandListIsGraphCaptureEnabledExt");
  auto end = lookup<ze_pfnCommandListEndGraphCaptureExt_t>(s, "zeCommandListEndGraphCaptureExt");
  auto is_empty = lookup<ze_pfnGraphIsEmptyExt_t>(s, "zeGraphIsEmptyExt");
  auto instantiate = lookup<ze_pfnGraphInstantiateExt_t>(s, "zeGraphInstantiateExt");
  auto append = lookup<ze_pfnCommandListAppendGraphExt_t>(s, "zeCommandListAppendGraphExt");
  auto destroy_executable =
      lookup<ze_pfnExecutableGraphDestroyExt_t>(s, "zeExecutableGraphDestroyExt");
  auto destroy_graph = lookup<ze_pfnGraphDestroyExt_t>(s, "zeGraphDestroyExt");

  ze_host_mem_alloc_desc_t host_desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  void* memory = nullptr;
  REQUIRE_ZE(zeMemAllocHost(s.context, &host_desc, 64 * sizeof(uint32_t), 0, &memory));
  auto* data = static_cast<uint32_t*>(memory);
  std::memset(data, 0, 64 * sizeof(uint32_t));

  ze_kernel_desc_t desc{ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, "accgraph_fill_u32"};
  ze_kernel_handle_t fill = nullptr;
  REQUIRE_ZE(zeKernelCreate(module, &desc, &fill));
  REQUIRE_ZE(zeKernelSetGroupSize(fill, 32, 1, 1));
  const uint32_t value = 7;
  REQUIRE_ZE(zeKernelSetArgumentValue(fill, 0, sizeof(data), &data));
  REQUIRE_ZE(zeKernelSetArgumentValue(fill, 1, sizeof(value), &value));
  const ze_group_count_t two_groups{2, 1, 1};

  ze_command_list_handle_t list = make_immediate_list(s);
  ze_event_handle_t done = make_event(s.pool, 2);
  CHECK(capturing(list) == ACCGRAPH_ZE_RESULT_QUERY_FALSE);
  REQUIRE_ZE(begin(list, nullptr));
  CHECK(capturing(list) == ACCGRAPH_ZE_RESULT_QUERY_TRUE);
  REQUIRE_ZE(zeCommandListAppendLaunchKernel(list, fill, &two_groups, nullptr, 0, nullptr));
  ze_graph_handle_t graph = nullptr;
  REQUIRE_ZE(end(list, nullptr, &graph));
  CHECK(is_empty(graph) == ACCGRAPH_ZE_RESULT_QUERY_FALSE);
  drain(list, done);
  CHECK(data[0] == 0 && data[63] == 0);  // capture records, it does not run

  ze_executable_graph_handle_t executable = nullptr;
  REQUIRE_ZE(instantiate(graph, nullptr, &executable));
  for (int replay = 0; replay < 2; ++replay) {
    std::memset(data, 0, 64 * sizeof(uint32_t));
    REQUIRE_ZE(zeEventHostReset(done));
    REQUIRE_ZE(append(list, executable, nullptr, done, 0, nullptr));
    REQUIRE_ZE(zeEventHostSynchronize(done, UINT64_MAX));
    CHECK(data[0] == 7 && data[63] == 7);
  }
  std::printf("graph (Ext): capture left data untouched, two replays filled it: %s\n",
              data[0] == 7 && data[63] == 7 ? "ok" : "WRONG");

  REQUIRE_ZE(destroy_executable(executable));
  REQUIRE_ZE(destroy_graph(graph));
  REQUIRE_ZE(zeEventDestroy(done));
  REQUIRE_ZE(zeCommandListDestroy(list));
  REQUIRE_ZE(zeKernelDestroy(fill));
  REQUIRE_ZE(zeMemFree(s.context, memory));
}

// The same with the experimental entry points: other argument order, other query codes.
void test_graph_exp(const Setup& s) {
  auto begin =
      lookup<ze_pfnCommandListBeginGraphCaptureExp_t>(s, "zeCommandListBeginGraphCaptureExp");
  auto capturing = lookup<ze_pfnCommandListIsGraphCaptureEnabledExp_t>(
      s, "zeCommandListIsGraphCaptureEnabledExp");
  auto end = lookup<ze_pfnCommandListEndGraphCaptureExp_t>(s, "zeCommandListEndGraphCaptureExp");
  auto instantiate =
      lookup<ze_pfnCommandListInstantiateGraphExp_t>(s, "zeCommandListInstantiateGraphExp");
  auto append = lookup<ze_pfnCommandListAppendGraphExp_t>(s, "zeCommandListAppendGraphExp");
  auto destroy_executable =
      lookup<ze_pfnExecutableGraphDestroyExp_t>(s, "zeExecutableGraphDestroyExp");
  auto destroy_graph = lookup<ze_pfnGraphDestroyExp_t>(s, "zeGraphDestroyExp");

  ze_host_mem_alloc_desc_t host_desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  void* source = nullptr;
  void* destination = nullptr;
  REQUIRE_ZE(zeMemAllocHost(s.context, &host_desc, 128, 0, &source));
  REQUIRE_ZE(zeMemAllocHost(s.context, &host_desc, 128, 0, &destination));
  std::memset(destination, 0, 128);

  ze_command_list_handle_t list = make_immediate_list(s);
  ze_event_handle_t done = make_event(s.pool, 3);
  REQUIRE_ZE(begin(list, nullptr));
  CHECK(capturing(list) == ACCGRAPH_ZE_RESULT_QUERY_TRUE_EXP);
  const uint16_t pattern = 0x1234;
  REQUIRE_ZE(zeCommandListAppendMemoryFill(list, source, &pattern, 2, 128, nullptr, 0, nullptr));
  REQUIRE_ZE(zeCommandListAppendMemoryCopy(list, destination, source, 128, nullptr, 0, nullptr));
  ze_graph_handle_t graph = nullptr;
  REQUIRE_ZE(end(list, &graph, nullptr));
  CHECK(capturing(list) == ACCGRAPH_ZE_RESULT_QUERY_FALSE_EXP);
  drain(list, done);
  CHECK(static_cast<uint16_t*>(destination)[0] == 0);
  ze_executable_graph_handle_t executable = nullptr;
  REQUIRE_ZE(instantiate(graph, &executable, nullptr));
  REQUIRE_ZE(zeEventHostReset(done));
  REQUIRE_ZE(append(list, executable, nullptr, done, 0, nullptr));
  REQUIRE_ZE(zeEventHostSynchronize(done, UINT64_MAX));
  const bool ok = static_cast<uint16_t*>(destination)[63] == 0x1234;
  CHECK(ok);
  std::printf("graph (Exp): replay copied the recorded fill: %s\n", ok ? "ok" : "WRONG");

  REQUIRE_ZE(destroy_executable(executable));
  REQUIRE_ZE(destroy_graph(graph));
  REQUIRE_ZE(zeEventDestroy(done));
  REQUIRE_ZE(zeCommandListDestroy(list));
  REQUIRE_ZE(zeMemFree(s.context, source));
  REQUIRE_ZE(zeMemFree(s.context, destination));
}

}  // namespace

int main() {
  Setup s = find_gpu();
  test_fill_and_copy(s);
  test_queue_and_fence(s);

  ze_module_desc_t module_desc{ZE_STRUCTURE_TYPE_MODULE_DESC,
                               nullptr,
                               ZE_MODULE_FORMAT_IL_SPIRV,
                               4,
                               reinterpret_cast<const uint8_t*>("\x03\x02\x23\x07"),
                               nullptr,
                               nullptr};
  ze_module_handle_t module = nullptr;
  REQUIRE_ZE(zeModuleCreate(s.context, s.device, &module_desc, &module, nullptr));
  test_kernel_timing(s, module);

  const bool advertised = graph_extension_advertised(s);
  const uint32_t flags = graph_capability_flags(s);
  if (advertised) {
    CHECK((flags & ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_IMMUTABLE_GRAPH) != 0);
    test_graph_ext(s, module);
    test_graph_exp(s);
  } else {
    void* address = nullptr;
    CHECK(zeDriverGetExtensionFunctionAddress(s.driver, "zeGraphCreateExt", &address) !=
          ZE_RESULT_SUCCESS);
    CHECK(flags == 0);
    std::printf("graph extension not advertised: skipped the graph checks\n");
  }

  REQUIRE_ZE(zeModuleDestroy(module));
  REQUIRE_ZE(zeEventPoolDestroy(s.pool));
  REQUIRE_ZE(zeEventPoolDestroy(s.timestamp_pool));
  REQUIRE_ZE(zeContextDestroy(s.context));
  std::printf("%s\n", g_failures == 0 ? "PASSED" : "FAILED");
  return g_failures == 0 ? 0 : 1;
}
