// Driver, device and context of the CPU Level Zero driver, and the DDI table getters the loader
// calls.
#include "driver.h"

#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace zecpu {

// -- configuration
// -----------------------------------------------------------------------------------------------

bool graph_extension_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("ZE_ACCGRAPH_CPU_NO_GRAPH");
    return value == nullptr || std::strcmp(value, "1") != 0;
  }();
  return enabled;
}

uint32_t timestamp_valid_bits() {
  static const uint32_t bits = [] {
    const char* value = std::getenv("ZE_ACCGRAPH_CPU_VALID_BITS");
    if (value == nullptr) return 64u;
    const long parsed = std::strtol(value, nullptr, 10);
    return (parsed >= 8 && parsed <= 64) ? static_cast<uint32_t>(parsed) : 64u;
  }();
  return bits;
}

uint64_t host_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t device_ticks() {
  // A real device counter wraps at timestampValidBits; masking lets tests exercise a client's
  // wraparound handling with ZE_ACCGRAPH_CPU_VALID_BITS=32 (wraps every ~4.3 s).
  const uint32_t bits = timestamp_valid_bits();
  const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
  return host_ns() & mask;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return (pages > 0 && page_size > 0)
             ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
             : (8ull << 30);
}

Driver* the_driver() {
  static Driver driver;
  return &driver;
}

Device* the_device() {
  static Device device;
  return &device;
}

namespace {

constexpr const char* kDeviceName = "accgraph CPU Level Zero device";
constexpr size_t kMaxFillPatternSize = 256;

template <class T>
ze_result_t write_count(uint32_t* count, T* out, const T& value) {
  if (count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || out == nullptr) {
    *count = 1;
    return ZE_RESULT_SUCCESS;
  }
  *count = 1;
  *out = value;
  return ZE_RESULT_SUCCESS;
}

// -- global and driver
// ------------------------------------------------------------------------------------------

ze_result_t ze_init(ze_init_flags_t) {
  // The 1.8 loader calls this twice (once while probing drivers, once for the application):
  // idempotent.
  return ZE_RESULT_SUCCESS;
}

ze_result_t driver_get(uint32_t* count, ze_driver_handle_t* drivers) {
  return write_count(count, drivers, reinterpret_cast<ze_driver_handle_t>(the_driver()));
}

ze_result_t driver_get_api_version(ze_driver_handle_t driver, ze_api_version_t* version) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (version == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *version = ZE_API_VERSION_CURRENT;
  return ZE_RESULT_SUCCESS;
}

ze_result_t driver_get_properties(ze_driver_handle_t driver, ze_driver_properties_t* properties) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  std::memset(properties->uuid.id, 0, sizeof(properties->uuid.id));
  std::memcpy(properties->uuid.id, "accgraph-cpu-drv", 16);
  properties->driverVersion = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t driver_get_ipc_properties(ze_driver_handle_t driver,
                                      ze_driver_ipc_properties_t* properties) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  properties->flags = 0;
  return ZE_RESULT_SUCCESS;
}

ze_result_t driver_get_extension_properties(ze_driver_handle_t driver, uint32_t* count,
                                            ze_driver_extension_properties_t* extensions) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  static const char* const kGraphExtensions[] = {ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_EXT_NAME,
                                                 ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_EXP_NAME};
  const uint32_t available = graph_extension_enabled() ? 2u : 0u;
  if (*count == 0 || extensions == nullptr) {
    *count = available;
    return ZE_RESULT_SUCCESS;
  }
  const uint32_t written = *count < available ? *count : available;
  for (uint32_t i = 0; i < written; ++i) {
    std::memset(extensions[i].name, 0, sizeof(extensions[i].name));
    std::strncpy(extensions[i].name, kGraphExtensions[i], sizeof(extensions[i].name) - 1);
    extensions[i].version = ZE_MAKE_VERSION(1, 0);
  }
  *count = written;
  return ZE_RESULT_SUCCESS;
}

ze_result_t driver_get_extension_function_address(ze_driver_handle_t driver, const char* name,
                                                  void** address) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (name == nullptr || address == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *address = graph_extension_enabled() ? graph_function_address(name) : nullptr;
  return *address != nullptr ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

// -- device
// -------------------------------------------------------------------------------------------------------

ze_result_t device_get(ze_driver_handle_t driver, uint32_t* count, ze_device_handle_t* devices) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return write_count(count, devices, reinterpret_cast<ze_device_handle_t>(the_device()));
}

ze_result_t device_get_sub_devices(ze_device_handle_t device, uint32_t* count,
                                   ze_device_handle_t*) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *count = 0;
  return ZE_RESULT_SUCCESS;
}

// Answers the graph capability query: a ze_record_replay_graph_ext_properties_t in the pNext chain.
void fill_device_extension_properties(void* next) {
  for (auto* base = static_cast<ze_base_properties_t*>(next); base != nullptr;
       base = static_cast<ze_base_properties_t*>(base->pNext)) {
    if (base->stype == ACCGRAPH_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES ||
        base->stype == ACCGRAPH_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXP_PROPERTIES) {
      auto* graph = reinterpret_cast<ze_record_replay_graph_ext_properties_t*>(base);
      // Replay of a recorded, unchangeable graph only: no mutable graphs, subgraphs or forks.
      graph->graphFlags = graph_extension_enabled()
                              ? uint32_t{ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_IMMUTABLE_GRAPH}
                              : 0u;
    }
  }
}

ze_result_t device_get_properties(ze_device_handle_t device, ze_device_properties_t* properties) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  // GPU, not CPU, so that a backend which looks for GPUs (as accgraph's does) picks this device.
  properties->type = ZE_DEVICE_TYPE_GPU;
  properties->vendorId = 0x8086;
  properties->deviceId = 0xacc0;
  properties->flags = ZE_DEVICE_PROPERTY_FLAG_INTEGRATED;
  properties->subdeviceId = 0;
  properties->coreClockRate = 1000;
  properties->maxMemAllocSize = physical_memory_bytes() / 2;
  properties->maxHardwareContexts = 64;
  properties->maxCommandQueuePriority = 0;
  properties->numThreadsPerEU = 1;
  properties->physicalEUSimdWidth = 1;
  properties->numEUsPerSubslice = 1;
  properties->numSubslicesPerSlice = 1;
  properties->numSlices = 1;
  // The timer ticks once per ns. The 1.0 structure reports ns per tick, the 1.2 one ticks per
  // second.
  properties->timerResolution =
      properties->stype == ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 ? 1000000000ull : 1ull;
  properties->timestampValidBits = timestamp_valid_bits();
  properties->kernelTimestampValidBits = timestamp_valid_bits();
  std::memset(properties->uuid.id, 0, sizeof(properties->uuid.id));
  std::memcpy(properties->uuid.id, "accgraph-cpu-dev", 16);
  std::memset(properties->name, 0, sizeof(properties->name));
  std::strncpy(properties->name, kDeviceName, sizeof(properties->name) - 1);
  fill_device_extension_properties(properties->pNext);
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_get_compute_properties(ze_device_handle_t device,
                                          ze_device_compute_properties_t* properties) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  properties->maxTotalGroupSize = 1024;
  properties->maxGroupSizeX = 1024;
  properties->maxGroupSizeY = 1024;
  properties->maxGroupSizeZ = 1024;
  properties->maxGroupCountX = 0xffffffffu;
  properties->maxGroupCountY = 0xffffffffu;
  properties->maxGroupCountZ = 0xffffffffu;
  properties->maxSharedLocalMemory = 64 * 1024;
  properties->numSubGroupSizes = 1;
  properties->subGroupSizes[0] = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_get_command_queue_group_properties(ze_device_handle_t device, uint32_t* count,
                                                      ze_command_queue_group_properties_t* groups) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || groups == nullptr) {
    *count = 1;
    return ZE_RESULT_SUCCESS;
  }
  *count = 1;
  groups[0].flags =
      ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
  groups[0].maxMemoryFillPatternSize = kMaxFillPatternSize;
  groups[0].numQueues = 64;
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_get_memory_properties(ze_device_handle_t device, uint32_t* count,
                                         ze_device_memory_properties_t* memories) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || memories == nullptr) {
    *count = 1;
    return ZE_RESULT_SUCCESS;
  }
  *count = 1;
  memories[0].flags = 0;
  memories[0].maxClockRate = 0;
  memories[0].maxBusWidth = 64;
  memories[0].totalSize = physical_memory_bytes();
  std::memset(memories[0].name, 0, sizeof(memories[0].name));
  std::strncpy(memories[0].name, "host memory", sizeof(memories[0].name) - 1);
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_get_memory_access_properties(ze_device_handle_t device,
                                                ze_device_memory_access_properties_t* properties) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  const ze_memory_access_cap_flags_t all =
      ZE_MEMORY_ACCESS_CAP_FLAG_RW | ZE_MEMORY_ACCESS_CAP_FLAG_ATOMIC |
      ZE_MEMORY_ACCESS_CAP_FLAG_CONCURRENT | ZE_MEMORY_ACCESS_CAP_FLAG_CONCURRENT_ATOMIC;
  properties->hostAllocCapabilities = all;
  properties->deviceAllocCapabilities = all;
  properties->sharedSingleDeviceAllocCapabilities = all;
  properties->sharedCrossDeviceAllocCapabilities = all;
  properties->sharedSystemAllocCapabilities = all;
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_get_status(ze_device_handle_t device) {
  return resolve<Device>(device) != nullptr ? ZE_RESULT_SUCCESS
                                            : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
}

ze_result_t device_get_global_timestamps(ze_device_handle_t device, uint64_t* host_timestamp,
                                         uint64_t* device_timestamp) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (host_timestamp == nullptr || device_timestamp == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *host_timestamp = host_ns();
  *device_timestamp = device_ticks();
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_can_access_peer(ze_device_handle_t device, ze_device_handle_t peer,
                                   ze_bool_t* value) {
  if (resolve<Device>(device) == nullptr || resolve<Device>(peer) == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (value == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *value = 1;
  return ZE_RESULT_SUCCESS;
}

// -- context
// ------------------------------------------------------------------------------------------------------

ze_result_t context_create(ze_driver_handle_t driver, const ze_context_desc_t* desc,
                           ze_context_handle_t* context) {
  if (resolve<Driver>(driver) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || context == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *context = reinterpret_cast<ze_context_handle_t>(new Context());
  return ZE_RESULT_SUCCESS;
}

ze_result_t context_create_ex(ze_driver_handle_t driver, const ze_context_desc_t* desc, uint32_t,
                              ze_device_handle_t*, ze_context_handle_t* context) {
  return context_create(driver, desc, context);
}

ze_result_t context_destroy(ze_context_handle_t handle) {
  Context* context = resolve<Context>(handle);
  if (context == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete context;
  return ZE_RESULT_SUCCESS;
}

ze_result_t context_get_status(ze_context_handle_t context) {
  return resolve<Context>(context) != nullptr ? ZE_RESULT_SUCCESS
                                              : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
}

// -- DDI tables
// ---------------------------------------------------------------------------------------------------

// Note [Unsupported stub]
// Every table slot starts out pointing at this function, so an entry point this driver does not
// implement answers ZE_RESULT_ERROR_UNSUPPORTED_FEATURE instead of the loader finding a null
// pointer. It is called through pointer types with other parameter lists; on the SysV x86-64 and
// AArch64 ABIs a function that reads no arguments ignores them safely (caller cleans up), which is
// what this relies on.
ze_result_t unsupported() { return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE; }

template <class Table>
ze_result_t fill_with_stubs(ze_api_version_t version, Table* table) {
  if (table == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ZE_MAJOR_VERSION(version) != ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT))
    return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
  // Tables are plain structs of function pointers (checked below), filled slot by slot.
  static_assert(sizeof(Table) % sizeof(void*) == 0, "DDI table is not an array of pointers");
  auto* slots = reinterpret_cast<void**>(table);
  for (size_t i = 0; i < sizeof(Table) / sizeof(void*); ++i)
    slots[i] = reinterpret_cast<void*>(&unsupported);
  return ZE_RESULT_SUCCESS;
}

}  // namespace

}  // namespace zecpu

using namespace zecpu;

// Only these getters are exported (exports.map). Exporting anything named like the API itself
// (zeInit, ...) would make the loader's own symbols resolve to ours, or ours to the loader's, and
// the process hangs.
#define ZECPU_GETTER(name, table_type, body)                                    \
  extern "C" ZE_DLLEXPORT ze_result_t ZE_APICALL name(ze_api_version_t version, \
                                                      table_type* table) {      \
    const ze_result_t result = fill_with_stubs(version, table);                 \
    if (result != ZE_RESULT_SUCCESS) return result;                             \
    body;                                                                       \
    return ZE_RESULT_SUCCESS;                                                   \
  }

ZECPU_GETTER(zeGetGlobalProcAddrTable, ze_global_dditable_t, { table->pfnInit = ze_init; })

ZECPU_GETTER(zeGetDriverProcAddrTable, ze_driver_dditable_t, {
  table->pfnGet = driver_get;
  table->pfnGetApiVersion = driver_get_api_version;
  table->pfnGetProperties = driver_get_properties;
  table->pfnGetIpcProperties = driver_get_ipc_properties;
  table->pfnGetExtensionProperties = driver_get_extension_properties;
  table->pfnGetExtensionFunctionAddress = driver_get_extension_function_address;
})

ZECPU_GETTER(zeGetDeviceProcAddrTable, ze_device_dditable_t, {
  table->pfnGet = device_get;
  table->pfnGetSubDevices = device_get_sub_devices;
  table->pfnGetProperties = device_get_properties;
  table->pfnGetComputeProperties = device_get_compute_properties;
  table->pfnGetCommandQueueGroupProperties = device_get_command_queue_group_properties;
  table->pfnGetMemoryProperties = device_get_memory_properties;
  table->pfnGetMemoryAccessProperties = device_get_memory_access_properties;
  table->pfnCanAccessPeer = device_can_access_peer;
  table->pfnGetStatus = device_get_status;
  table->pfnGetGlobalTimestamps = device_get_global_timestamps;
})

ZECPU_GETTER(zeGetContextProcAddrTable, ze_context_dditable_t, {
  table->pfnCreate = context_create;
  table->pfnCreateEx = context_create_ex;
  table->pfnDestroy = context_destroy;
  table->pfnGetStatus = context_get_status;
})

ZECPU_GETTER(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t,
             fill_command_queue_table(table))
ZECPU_GETTER(zeGetCommandListProcAddrTable, ze_command_list_dditable_t,
             fill_command_list_table(table))
ZECPU_GETTER(zeGetFenceProcAddrTable, ze_fence_dditable_t, fill_fence_table(table))
ZECPU_GETTER(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t, fill_event_pool_table(table))
ZECPU_GETTER(zeGetEventProcAddrTable, ze_event_dditable_t, fill_event_table(table))
ZECPU_GETTER(zeGetMemProcAddrTable, ze_mem_dditable_t, fill_mem_table(table))
ZECPU_GETTER(zeGetModuleProcAddrTable, ze_module_dditable_t, fill_module_table(table))
ZECPU_GETTER(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t,
             fill_module_build_log_table(table))
ZECPU_GETTER(zeGetKernelProcAddrTable, ze_kernel_dditable_t, fill_kernel_table(table))

// Tables this driver leaves entirely to the stub. The Debian 1.8 loader refuses a driver (zeInit
// fails without a message) unless every getter it looks up exists, the tools (zet) and sysman (zes)
// ones included.
ZECPU_GETTER(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t, {})
ZECPU_GETTER(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t, {})
ZECPU_GETTER(zeGetImageProcAddrTable, ze_image_dditable_t, {})
ZECPU_GETTER(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t, {})
ZECPU_GETTER(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t, {})
ZECPU_GETTER(zeGetSamplerProcAddrTable, ze_sampler_dditable_t, {})
ZECPU_GETTER(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t, {})
ZECPU_GETTER(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t, {})
ZECPU_GETTER(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t, {})
ZECPU_GETTER(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t, {})

ZECPU_GETTER(zetGetDeviceProcAddrTable, zet_device_dditable_t, {})
ZECPU_GETTER(zetGetContextProcAddrTable, zet_context_dditable_t, {})
ZECPU_GETTER(zetGetCommandListProcAddrTable, zet_command_list_dditable_t, {})
ZECPU_GETTER(zetGetModuleProcAddrTable, zet_module_dditable_t, {})
ZECPU_GETTER(zetGetKernelProcAddrTable, zet_kernel_dditable_t, {})
ZECPU_GETTER(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t, {})
ZECPU_GETTER(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t, {})
ZECPU_GETTER(zetGetMetricProcAddrTable, zet_metric_dditable_t, {})
ZECPU_GETTER(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t, {})
ZECPU_GETTER(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t, {})
ZECPU_GETTER(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t, {})
ZECPU_GETTER(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t, {})
ZECPU_GETTER(zetGetDebugProcAddrTable, zet_debug_dditable_t, {})

ZECPU_GETTER(zesGetDriverProcAddrTable, zes_driver_dditable_t, {})
ZECPU_GETTER(zesGetDeviceProcAddrTable, zes_device_dditable_t, {})
ZECPU_GETTER(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t, {})
ZECPU_GETTER(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t, {})
ZECPU_GETTER(zesGetPowerProcAddrTable, zes_power_dditable_t, {})
ZECPU_GETTER(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t, {})
ZECPU_GETTER(zesGetEngineProcAddrTable, zes_engine_dditable_t, {})
ZECPU_GETTER(zesGetStandbyProcAddrTable, zes_standby_dditable_t, {})
ZECPU_GETTER(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t, {})
ZECPU_GETTER(zesGetMemoryProcAddrTable, zes_memory_dditable_t, {})
ZECPU_GETTER(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t, {})
ZECPU_GETTER(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t, {})
ZECPU_GETTER(zesGetPsuProcAddrTable, zes_psu_dditable_t, {})
ZECPU_GETTER(zesGetFanProcAddrTable, zes_fan_dditable_t, {})
ZECPU_GETTER(zesGetLedProcAddrTable, zes_led_dditable_t, {})
ZECPU_GETTER(zesGetRasProcAddrTable, zes_ras_dditable_t, {})
ZECPU_GETTER(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t, {})
