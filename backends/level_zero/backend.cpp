// The Level Zero backend: discovery (zeInit, a driver with GPU devices, a context), the capture
// path and timer of each device, capabilities, and the plugin entry point of the module.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "accgraph/spi/library_check.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/plugin.hpp"  // ACCGRAPH_DEFINE_PLUGIN and accgraph::priority
#include "accgraph/version.hpp"
#include "common/runtime_backend.hpp"
#include "level_zero_backend.hpp"

namespace accgraph::detail::level_zero {

namespace {

constexpr const char* kInstallAdvice =
    "install a Level Zero GPU driver (Intel's compute runtime, e.g. the intel-level-zero-gpu "
    "package), or, to run accgraph on the CPU test driver, set "
    "ZE_ENABLE_ALT_DRIVERS=/absolute/path/to/libze_accgraph_cpu.so (built in "
    "tests/support/ze_cpu_driver of the accgraph build tree)";

/// ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list forces the regular-command-list path (to compare
/// both paths on one driver); unset, empty or "auto" lets the driver decide.
bool forced_command_list() {
  const char* value = std::getenv("ACCGRAPH_LEVEL_ZERO_CAPTURE");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return false;
  if (std::strcmp(value, "command_list") == 0) return true;
  log(LogLevel::Warning,
      fmt::format("level_zero: ignoring ACCGRAPH_LEVEL_ZERO_CAPTURE='{}': use 'auto' or "
                  "'command_list'",
                  value));
  return false;
}

// The graph entry points of a device: the chosen flavour's on the native-graph path. On the
// command-list path accgraph's captures need none, but the application may still capture a
// wrapped list natively, so the first advertised flavour that resolved the capture query is
// kept for asking (Note [Native captures of wrapped lists] in stream.cpp); none when no
// flavour is advertised.
GraphApi graph_api_for(ze_driver_handle_t driver, const PathChoice& choice,
                       const GraphSupport& support) {
  std::vector<std::string> missing;
  if (choice.path == CapturePath::NativeGraph)
    return GraphApi::resolve(driver, choice.flavor, missing);
  if (support.ext_advertised) {
    GraphApi api = GraphApi::resolve(driver, GraphFlavor::Ext, missing);
    if (api.can_query_capture()) return api;
  }
  if (support.exp_advertised) {
    GraphApi api = GraphApi::resolve(driver, GraphFlavor::Exp, missing);
    if (api.can_query_capture()) return api;
  }
  return {};
}

std::vector<std::string> driver_extensions(ze_driver_handle_t driver) {
  uint32_t count = 0;
  ACCGRAPH_ZE_CHECK(zeDriverGetExtensionProperties(driver, &count, nullptr),
                    "start-up: counting the driver's extensions");
  std::vector<ze_driver_extension_properties_t> properties(count);
  if (count > 0)
    ACCGRAPH_ZE_CHECK(zeDriverGetExtensionProperties(driver, &count, properties.data()),
                      "start-up: reading the driver's extensions");
  std::vector<std::string> names;
  for (uint32_t i = 0; i < count; ++i)
    names.emplace_back(properties[i].name, strnlen(properties[i].name, sizeof(properties[i].name)));
  return names;
}

/// The device properties, with `extension` chained (may be null). Hz when `use_1_2`.
ze_device_properties_t device_properties(ze_device_handle_t device, bool use_1_2, void* extension) {
  ze_device_properties_t properties{};
  properties.stype =
      use_1_2 ? ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 : ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  properties.pNext = extension;
  ACCGRAPH_ZE_CHECK(zeDeviceGetProperties(device, &properties),
                    "start-up: reading device properties");
  return properties;
}

uint32_t graph_flags(ze_device_handle_t device, bool use_1_2, ze_structure_type_t stype) {
  GraphProperties graph{stype, nullptr, 0};
  device_properties(device, use_1_2, &graph);
  return graph.graphFlags;
}

uint32_t compute_ordinal(ze_device_handle_t device) {
  uint32_t count = 0;
  if (zeDeviceGetCommandQueueGroupProperties(device, &count, nullptr) != ZE_RESULT_SUCCESS ||
      count == 0)
    return 0;
  std::vector<ze_command_queue_group_properties_t> groups(count);
  for (auto& group : groups) group.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
  if (zeDeviceGetCommandQueueGroupProperties(device, &count, groups.data()) != ZE_RESULT_SUCCESS)
    return 0;
  for (uint32_t i = 0; i < count; ++i)
    if (groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) return i;
  return 0;
}

/// Loads the spin kernel and runs it once: Stream::delay is offered only where this works. On
/// an Intel GPU the placeholder module below does not build (the backend ships no SPIR-V yet),
/// so timed_delay is false there; the CPU test driver offers its built-in kernels from any
/// module.
void set_up_delay(const Runtime& runtime, DeviceState& device) {
  static const uint8_t kSpirvMagic[] = {0x03, 0x02, 0x23, 0x07};
  ze_module_desc_t module_desc{};
  module_desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
  module_desc.format = ZE_MODULE_FORMAT_IL_SPIRV;
  module_desc.inputSize = sizeof(kSpirvMagic);
  module_desc.pInputModule = kSpirvMagic;
  auto fail = [&](ze_result_t result, const char* call) {
    device.delay_problem = fmt::format("{} failed with {}", call, result_name(result));
    if (device.spin_kernel != nullptr)
      ACCGRAPH_ZE_LOG(zeKernelDestroy(device.spin_kernel), "start-up");
    if (device.module != nullptr) ACCGRAPH_ZE_LOG(zeModuleDestroy(device.module), "start-up");
    device.spin_kernel = nullptr;
    device.module = nullptr;
  };
  ze_result_t result =
      zeModuleCreate(runtime.context, device.handle, &module_desc, &device.module, nullptr);
  if (result != ZE_RESULT_SUCCESS) return fail(result, "zeModuleCreate");
  ze_kernel_desc_t kernel_desc{ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, kSpinKernelName};
  result = zeKernelCreate(device.module, &kernel_desc, &device.spin_kernel);
  if (result != ZE_RESULT_SUCCESS) return fail(result, "zeKernelCreate(accgraph_spin_ns)");
  result = zeKernelSetGroupSize(device.spin_kernel, 1, 1, 1);
  if (result != ZE_RESULT_SUCCESS) return fail(result, "zeKernelSetGroupSize");
  // One short launch, waited for: the kernel must really run here.
  try {
    ze_command_list_handle_t list = create_immediate_list(runtime, device);
    EventSet done(runtime, 1, "start-up: testing the spin kernel");
    const uint64_t ns = 1000;
    const ze_group_count_t one{1, 1, 1};
    result = zeKernelSetArgumentValue(device.spin_kernel, 0, sizeof(ns), &ns);
    if (result == ZE_RESULT_SUCCESS)
      result = zeCommandListAppendLaunchKernel(list, device.spin_kernel, &one, done[0], 0, nullptr);
    if (result == ZE_RESULT_SUCCESS) result = zeEventHostSynchronize(done[0], 10'000'000'000ull);
    ACCGRAPH_ZE_LOG(zeCommandListDestroy(list), "start-up: destroying a test list");
    if (result != ZE_RESULT_SUCCESS) return fail(result, "launching accgraph_spin_ns");
  } catch (const Error& e) {
    device.delay_problem = e.message();
    fail(ZE_RESULT_SUCCESS, "start-up");
    device.delay_problem = e.message();
  }
}

// Note [Alternative drivers]: ZE_ENABLE_ALT_DRIVERS replaces the Level Zero loader's list of
// drivers by its comma-separated entries, each dlopen()ed inside zeInit (loader 1.8 onwards). A
// truncated library there kills the process with SIGBUS inside that dlopen, so before zeInit every
// entry that names an existing file (it has a '/') goes through the core's library check (Note
// [Library check], accgraph/plugin.hpp); a broken one makes level_zero unavailable without calling
// zeInit. Entries without a '/' are searched for by dlopen in the library path, and paths that do
// not exist are skipped by the loader: both are left to it.
std::vector<std::string> alt_driver_entries(const std::string& value) {
  std::vector<std::string> entries;
  size_t start = 0;
  for (;;) {
    size_t comma = value.find(',', start);
    entries.push_back(value.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) return entries;
    start = comma + 1;
  }
}

bool names_existing_file(const std::string& entry) {
  struct stat info {};
  return entry.find('/') != std::string::npos && ::stat(entry.c_str(), &info) == 0;
}

void check_alt_drivers(const std::string& value) {
  for (const std::string& entry : alt_driver_entries(value)) {
    if (!names_existing_file(entry)) continue;
    if (std::optional<std::string> problem = plugin::shared_library_problem(entry))
      throw_unavailable(kBackendName,
                        fmt::format("ZE_ENABLE_ALT_DRIVERS names '{}', which the Level Zero loader "
                                    "would load, but {}; fix or remove that entry (zeInit was not "
                                    "called)",
                                    plugin::escape_for_message(entry), *problem));
  }
}

// What to do when the loader offers no usable driver. With ZE_ENABLE_ALT_DRIVERS set the loader
// loads only its entries (Note [Alternative drivers]), so the advice is about those.
std::string no_driver_advice() {
  const char* alt = std::getenv("ZE_ENABLE_ALT_DRIVERS");
  if (alt == nullptr) return kInstallAdvice;
  std::string entries;
  for (const std::string& entry : alt_driver_entries(alt)) {
    std::string verdict;
    if (entry.empty()) {
      verdict = "an empty entry";
    } else if (entry.find('/') == std::string::npos) {
      verdict = "a name without a '/', which dlopen looks for in the library search path";
    } else if (std::optional<std::string> problem = plugin::shared_library_problem(entry)) {
      verdict = *problem;
    } else {
      verdict = "a shared library, but not one the loader accepted as a Level Zero driver";
    }
    entries += fmt::format("{}'{}': {}", entries.empty() ? "" : "; ",
                           plugin::escape_for_message(entry), verdict);
  }
  return fmt::format(
      "ZE_ENABLE_ALT_DRIVERS is set to '{}', so the Level Zero loader loads only "
      "these drivers, and none of them is usable ({}); check that each entry is "
      "the absolute path of a Level Zero driver library (the CPU test driver is "
      "libze_accgraph_cpu.so, built in tests/support/ze_cpu_driver of the accgraph "
      "build tree) whose dependencies can be found (ldd), or unset "
      "ZE_ENABLE_ALT_DRIVERS to use the installed GPU drivers",
      plugin::escape_for_message(alt), entries);
}

/// The Level Zero loader initialised (after the alternative-driver check) and its drivers;
/// Unavailable when it offers none.
std::vector<ze_driver_handle_t> init_drivers() {
  if (const char* alt = std::getenv("ZE_ENABLE_ALT_DRIVERS")) check_alt_drivers(alt);
  ze_result_t result = zeInit(0);
  if (result != ZE_RESULT_SUCCESS)
    throw_unavailable(kBackendName,
                      fmt::format("zeInit failed with {}: {}", result_name(result),
                                  std::getenv("ZE_ENABLE_ALT_DRIVERS")
                                      ? no_driver_advice()
                                      : fmt::format("the Level Zero loader found no usable "
                                                    "driver; {}",
                                                    kInstallAdvice)),
                      "zeInit", result_name(result));
  uint32_t driver_count = 0;
  result = zeDriverGet(&driver_count, nullptr);
  if (result != ZE_RESULT_SUCCESS || driver_count == 0)
    throw_unavailable(kBackendName,
                      fmt::format("the Level Zero loader reports no driver{}; {}",
                                  result == ZE_RESULT_SUCCESS
                                      ? std::string()
                                      : fmt::format(" (zeDriverGet: {})", result_name(result)),
                                  no_driver_advice()),
                      "zeDriverGet", result_name(result));
  std::vector<ze_driver_handle_t> drivers(driver_count);
  ACCGRAPH_ZE_CHECK(zeDriverGet(&driver_count, drivers.data()), "start-up: listing drivers");
  drivers.resize(driver_count);
  return drivers;
}

/// A runtime with the GPU devices (and their timers) of the first driver that has any: a
/// context belongs to one driver. Unavailable when no driver has a GPU.
std::shared_ptr<Runtime> open_first_gpu_driver(const std::vector<ze_driver_handle_t>& drivers) {
  auto runtime = std::make_shared<Runtime>();
  size_t devices_seen = 0;
  for (ze_driver_handle_t driver : drivers) {
    uint32_t count = 0;
    if (zeDeviceGet(driver, &count, nullptr) != ZE_RESULT_SUCCESS || count == 0) continue;
    std::vector<ze_device_handle_t> handles(count);
    ACCGRAPH_ZE_CHECK(zeDeviceGet(driver, &count, handles.data()), "start-up: listing devices");
    devices_seen += count;
    ze_api_version_t version{};
    ACCGRAPH_ZE_CHECK(zeDriverGetApiVersion(driver, &version), "start-up: reading the API version");
    // The 1_2 properties (timer in Hz) exist from API 1.2 on; older drivers report ns per tick.
    const bool use_1_2 = version >= ZE_MAKE_VERSION(1, 2);
    for (ze_device_handle_t handle : handles) {
      ze_device_properties_t properties = device_properties(handle, use_1_2, nullptr);
      if (properties.type != ZE_DEVICE_TYPE_GPU) continue;
      auto device = std::make_unique<DeviceState>();
      device->index = static_cast<int>(runtime->devices.size());
      device->handle = handle;
      device->name = properties.name;
      device->timer = use_1_2 ? TickConverter::from_frequency_hz(properties.timerResolution,
                                                                 properties.timestampValidBits)
                              : TickConverter::from_ns_per_tick(properties.timerResolution,
                                                                properties.timestampValidBits);
      runtime->devices.push_back(std::move(device));
    }
    if (!runtime->devices.empty()) {
      runtime->driver = driver;
      break;  // one driver: a context belongs to one driver
    }
  }
  if (runtime->devices.empty())
    throw_unavailable(kBackendName,
                      fmt::format("the Level Zero loader found {} driver(s) with {} device(s) but "
                                  "no GPU device; {}",
                                  drivers.size(), devices_seen, kInstallAdvice));
  return runtime;
}

/// What the driver and `device` say about the record-and-replay graph extension, both flavours.
GraphSupport graph_support(ze_driver_handle_t driver, ze_device_handle_t device, bool use_1_2,
                           const std::vector<std::string>& extensions, bool forced) {
  auto advertised = [&](const char* name) {
    for (const std::string& e : extensions)
      if (e == name) return true;
    return false;
  };
  GraphSupport support;
  support.forced_command_list = forced;
  support.ext_advertised = advertised(kGraphExtName);
  support.exp_advertised = advertised(kGraphExpName);
  if (support.ext_advertised) {
    support.ext_flags = graph_flags(device, use_1_2, kGraphExtPropertiesStype);
    GraphApi::resolve(driver, GraphFlavor::Ext, support.ext_missing);
  }
  if (support.exp_advertised) {
    support.exp_flags = graph_flags(device, use_1_2, kGraphExpPropertiesStype);
    GraphApi::resolve(driver, GraphFlavor::Exp, support.exp_missing);
  }
  return support;
}

std::shared_ptr<Runtime> discover() {
  std::shared_ptr<Runtime> runtime = open_first_gpu_driver(init_drivers());
  ze_context_desc_t context_desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  ACCGRAPH_ZE_CHECK(zeContextCreate(runtime->driver, &context_desc, &runtime->context),
                    "start-up: creating a context");

  ze_api_version_t version{};
  ACCGRAPH_ZE_CHECK(zeDriverGetApiVersion(runtime->driver, &version),
                    "start-up: reading the API version");
  const bool use_1_2 = version >= ZE_MAKE_VERSION(1, 2);
  const std::vector<std::string> extensions = driver_extensions(runtime->driver);
  const bool forced = forced_command_list();
  for (auto& device : runtime->devices) {
    device->compute_ordinal = compute_ordinal(device->handle);
    const GraphSupport support =
        graph_support(runtime->driver, device->handle, use_1_2, extensions, forced);
    device->capture = choose_capture_path(support);
    device->graph_api = graph_api_for(runtime->driver, device->capture, support);
    set_up_delay(*runtime, *device);
    device->name = fmt::format("{} [capture: {}, {}]", device->name,
                               to_string(device->capture.path), device->capture.reason);
    log(LogLevel::Debug,
        fmt::format("level_zero: device {} is '{}'; timer {} ns/tick, {} valid bits; timed delay: "
                    "{}",
                    device->index, device->name, device->timer.resolution_ns(),
                    device->timer.valid_bits(),
                    device->spin_kernel ? std::string("yes") : device->delay_problem));
  }
  return runtime;
}

// The forwarding members (devices, capabilities, allocate, create_graph, create_markers) are
// RuntimeBackend's (Note [Runtime backends] in common/runtime_backend.hpp).
class ZeBackend final : public RuntimeBackend<Runtime> {
 public:
  ZeBackend() : RuntimeBackend(kBackendName, discover(), {kDefaultRingDepth, kMaxRingDepth},
                         dlpack::kDLOneAPI) {}

  std::unique_ptr<StreamImpl> create_stream(int device) override {
    DeviceState& state = device_state(device, "create_stream");
    ze_command_list_handle_t list = create_immediate_list(*runtime(), state);
    try {
      return std::make_unique<ZeStream>(runtime(), state, list, Ownership::Owned);
    } catch (...) {
      ACCGRAPH_ZE_LOG(zeCommandListDestroy(list), "create_stream: cleaning up");
      throw;
    }
  }

  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) override {
    DeviceState& state =
        wrap_target(device, native_handle,
                    "an immediate ze_command_list_handle_t created in this backend's context");
    auto list = static_cast<ze_command_list_handle_t>(native_handle);
    std::shared_ptr<StreamCore> owner = find_list_owner(*runtime(), list);
    if (owner != nullptr && &owner->device != &state)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("wrap_stream: command list {} belongs to a level_zero stream on "
                              "device {}, not device {}: wrap it with device {}",
                              native_handle, owner->device.index, device, owner->device.index),
                  kBackendName);
    return std::make_unique<ZeStream>(runtime(), state, list, Ownership::Borrowed,
                                      std::move(owner));
  }

 private:
  Capabilities device_capabilities(const DeviceState& state) const override {
    Capabilities caps;
    caps.timed_delay = state.spin_kernel != nullptr;
    return caps;
  }

  std::vector<std::string> marker_strategies(const DeviceState& /*state*/) const override {
    return {kStrategyGlobalTimestamps};
  }
};

}  // namespace

Runtime::~Runtime() {
  for (auto& device : devices) {
    if (device->spin_kernel != nullptr)
      ACCGRAPH_ZE_LOG(zeKernelDestroy(device->spin_kernel), "destroying the spin kernel");
    if (device->module != nullptr)
      ACCGRAPH_ZE_LOG(zeModuleDestroy(device->module), "destroying the module");
  }
  if (context != nullptr) ACCGRAPH_ZE_LOG(zeContextDestroy(context), "destroying the context");
}

EventSet::EventSet(const Runtime& runtime, uint32_t count, const char* purpose) {
  ze_event_pool_desc_t pool_desc{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                                 ZE_EVENT_POOL_FLAG_HOST_VISIBLE, count};
  ACCGRAPH_ZE_CHECK(zeEventPoolCreate(runtime.context, &pool_desc, 0, nullptr, &pool_), purpose);
  events_.reserve(count);
  try {
    for (uint32_t i = 0; i < count; ++i) {
      ze_event_desc_t desc{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, i, ZE_EVENT_SCOPE_FLAG_HOST,
                           ZE_EVENT_SCOPE_FLAG_HOST};
      ze_event_handle_t event = nullptr;
      ACCGRAPH_ZE_CHECK(zeEventCreate(pool_, &desc, &event), purpose);
      events_.push_back(event);
    }
  } catch (...) {
    for (ze_event_handle_t event : events_) ACCGRAPH_ZE_LOG(zeEventDestroy(event), purpose);
    ACCGRAPH_ZE_LOG(zeEventPoolDestroy(pool_), purpose);
    throw;
  }
}

void EventSet::leak() noexcept {
  events_.clear();
  pool_ = nullptr;
}

EventSet::~EventSet() {
  for (ze_event_handle_t event : events_)
    ACCGRAPH_ZE_LOG(zeEventDestroy(event), "destroying an event");
  if (pool_ != nullptr) ACCGRAPH_ZE_LOG(zeEventPoolDestroy(pool_), "destroying an event pool");
}

std::unique_ptr<Backend> make_level_zero_backend() { return std::make_unique<ZeBackend>(); }

}  // namespace accgraph::detail::level_zero

ACCGRAPH_DEFINE_PLUGIN("level_zero", accgraph::priority::normal, ACCGRAPH_VERSION_STRING,
                       accgraph::detail::level_zero::make_level_zero_backend())
