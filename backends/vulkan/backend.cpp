// The Vulkan backend: discovery (the loader, an instance, every physical device with a compute
// queue family), one logical device per physical device with its queues, the spin shader of
// Stream::delay, capabilities, and the plugin entry point of the module.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "accgraph/spi/plugin.hpp"  // ACCGRAPH_DEFINE_PLUGIN and accgraph::priority
#include "accgraph/version.hpp"
#include "common/runtime_backend.hpp"
#include "vulkan_backend.hpp"

#if ACCGRAPH_VULKAN_SPIN_SHADER
#include "spin_spirv.h"  // generated at build time from shaders/spin.comp
#endif

namespace accgraph::detail::vulkan {

namespace {

constexpr const char* kDriverAdvice =
    "install a Vulkan driver (an ICD: the GPU vendor's, or Debian's mesa-vulkan-drivers for "
    "lavapipe on the CPU), or point the loader at one with "
    "VK_DRIVER_FILES=/path/to/icd.json (e.g. /usr/share/vulkan/icd.d/lvp_icd.x86_64.json)";

std::string version_string(uint32_t version) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version),
                     VK_API_VERSION_PATCH(version));
}

bool has_extension(const std::vector<VkExtensionProperties>& extensions, const char* name) {
  for (const VkExtensionProperties& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice physical) {
  uint32_t count = 0;
  ACCGRAPH_VK_CHECK(vk().vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr),
                    "start-up: counting device extensions");
  std::vector<VkExtensionProperties> extensions(count);
  if (count > 0)
    ACCGRAPH_VK_CHECK(
        vk().vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data()),
        "start-up: reading device extensions");
  extensions.resize(count);
  return extensions;
}

/// ACCGRAPH_VULKAN_DEVICE: the index (in the driver's order) of the one physical device to use.
std::optional<uint32_t> selected_device() {
  const char* value = std::getenv("ACCGRAPH_VULKAN_DEVICE");
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long index = std::strtoul(value, &end, 10);
  if (*end != '\0' || index > 1024)
    throw_unavailable(kBackendName,
                      fmt::format("ACCGRAPH_VULKAN_DEVICE='{}' is not a device index: set it to "
                                  "the index of one Vulkan physical device (0, 1, ...) or unset it",
                                  value));
  return static_cast<uint32_t>(index);
}

// Note [CPU devices]: a CPU implementation of Vulkan (lavapipe, SwiftShader) is installed on many
// machines with Mesa, and would otherwise make `vulkan` available, and possibly the default
// backend, everywhere. Such a device is used only when the user asked for Vulkan drivers
// explicitly: VK_DRIVER_FILES or VK_ICD_FILENAMES points the loader at them (as CI does for
// lavapipe), or ACCGRAPH_VULKAN_DEVICE selects a device. Otherwise it is skipped, and listed
// with that reason when no device is left.
bool cpu_devices_wanted() {
  return std::getenv("VK_DRIVER_FILES") != nullptr || std::getenv("VK_ICD_FILENAMES") != nullptr ||
         std::getenv("ACCGRAPH_VULKAN_DEVICE") != nullptr;
}

/// What a physical device offers that the backend uses; `problem` says why it cannot be used.
struct Candidate {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties properties{};
  uint32_t family = 0;
  uint32_t queue_count = 0;
  uint32_t timestamp_bits = 0;
  bool shader_clock = false;         // VK_KHR_shader_clock with shaderDeviceClock, and shaderInt64
  const char* calibrated = nullptr;  // the calibrated-timestamps extension's name, or null
  std::string problem;
};

/// Sets the candidate's queue family (its count and timestamp bits too); false when the device
/// has no queue family with compute.
bool choose_compute_family(Candidate& candidate) {
  const Api& api = vk();
  uint32_t count = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(candidate.physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  api.vkGetPhysicalDeviceQueueFamilyProperties(candidate.physical, &count, families.data());
  bool found = false;
  for (uint32_t i = 0; i < count; ++i) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) == 0 || families[i].queueCount == 0)
      continue;
    // The first compute family, or a later one that writes timestamps when it does not.
    if (!found || (candidate.timestamp_bits == 0 && families[i].timestampValidBits > 0)) {
      candidate.family = i;
      candidate.queue_count = families[i].queueCount;
      candidate.timestamp_bits = families[i].timestampValidBits;
      found = true;
    }
  }
  return found;
}

Candidate inspect(VkPhysicalDevice physical) {
  const Api& api = vk();
  Candidate candidate;
  candidate.physical = physical;
  api.vkGetPhysicalDeviceProperties(physical, &candidate.properties);
  if (candidate.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !cpu_devices_wanted()) {
    candidate.problem =
        "a CPU implementation, used only when VK_DRIVER_FILES (or "
        "VK_ICD_FILENAMES) or ACCGRAPH_VULKAN_DEVICE is set (Note [CPU devices])";
    return candidate;
  }
  if (candidate.properties.apiVersion < VK_API_VERSION_1_2) {
    candidate.problem = fmt::format("it supports Vulkan {} only (1.2 is needed)",
                                    version_string(candidate.properties.apiVersion));
    return candidate;
  }
  if (!choose_compute_family(candidate)) {
    candidate.problem = "it has no queue family with compute";
    return candidate;
  }
  VkPhysicalDeviceShaderClockFeaturesKHR clock =
      info_struct<VkPhysicalDeviceShaderClockFeaturesKHR>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR);
  VkPhysicalDeviceVulkan12Features v12 = info_struct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  const std::vector<VkExtensionProperties> extensions = device_extensions(physical);
  const bool clock_extension = has_extension(extensions, VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
  v12.pNext = clock_extension ? &clock : nullptr;
  VkPhysicalDeviceFeatures2 features =
      info_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  features.pNext = &v12;
  api.vkGetPhysicalDeviceFeatures2(physical, &features);
  if (!v12.timelineSemaphore || !v12.hostQueryReset) {
    candidate.problem = fmt::format("it lacks the Vulkan 1.2 feature(s){}{}",
                                    v12.timelineSemaphore ? "" : " timelineSemaphore",
                                    v12.hostQueryReset ? "" : " hostQueryReset");
    return candidate;
  }
  candidate.shader_clock =
      clock_extension && clock.shaderDeviceClock && features.features.shaderInt64;
  if (has_extension(extensions, "VK_EXT_calibrated_timestamps"))
    candidate.calibrated = "VK_EXT_calibrated_timestamps";
  else if (has_extension(extensions, "VK_KHR_calibrated_timestamps"))
    candidate.calibrated = "VK_KHR_calibrated_timestamps";
  return candidate;
}

/// Whether the device's calibrated timestamps offer the device time domain.
bool offers_device_domain(VkPhysicalDevice physical) {
  const Api& api = vk();
  if (api.vkGetPhysicalDeviceCalibrateableTimeDomains == nullptr) return false;
  uint32_t count = 0;
  if (api.vkGetPhysicalDeviceCalibrateableTimeDomains(physical, &count, nullptr) != VK_SUCCESS)
    return false;
  std::vector<VkTimeDomainEXT> domains(count);
  if (api.vkGetPhysicalDeviceCalibrateableTimeDomains(physical, &count, domains.data()) !=
      VK_SUCCESS)
    return false;
  return std::find(domains.begin(), domains.end(), VK_TIME_DOMAIN_DEVICE_EXT) != domains.end();
}

/// The device's queues of the candidate's family, each with its timeline semaphore.
void create_queues(DeviceState& state, const Candidate& candidate) {
  const Api& api = vk();
  for (uint32_t i = 0; i < candidate.queue_count; ++i) {
    auto queue = std::make_unique<QueueState>();
    queue->index = i;
    api.vkGetDeviceQueue(state.device, candidate.family, i, &queue->queue);
    VkSemaphoreTypeCreateInfo type =
        info_struct<VkSemaphoreTypeCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO);
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    type.initialValue = 0;
    VkSemaphoreCreateInfo semaphore =
        info_struct<VkSemaphoreCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO);
    semaphore.pNext = &type;
    ACCGRAPH_VK_CHECK(api.vkCreateSemaphore(state.device, &semaphore, nullptr, &queue->timeline),
                      "start-up: creating a queue's timeline semaphore");
    state.queues.push_back(std::move(queue));
  }
}

void create_device(DeviceState& state, const Candidate& candidate) {
  const Api& api = vk();
  std::vector<float> priorities(candidate.queue_count, 1.0f);
  VkDeviceQueueCreateInfo queue_info =
      info_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queue_info.queueFamilyIndex = candidate.family;
  queue_info.queueCount = candidate.queue_count;
  queue_info.pQueuePriorities = priorities.data();

#if ACCGRAPH_VULKAN_SPIN_SHADER
  const bool spin = candidate.shader_clock;
#else
  const bool spin = false;
#endif
  VkPhysicalDeviceShaderClockFeaturesKHR clock =
      info_struct<VkPhysicalDeviceShaderClockFeaturesKHR>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR);
  clock.shaderDeviceClock = VK_TRUE;
  VkPhysicalDeviceVulkan12Features v12 = info_struct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  v12.timelineSemaphore = VK_TRUE;
  v12.hostQueryReset = VK_TRUE;
  v12.pNext = spin ? &clock : nullptr;
  VkPhysicalDeviceFeatures2 features =
      info_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  features.pNext = &v12;
  features.features.shaderInt64 = spin ? VK_TRUE : VK_FALSE;
  std::vector<const char*> extensions;
  if (spin) extensions.push_back(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
  if (candidate.calibrated != nullptr) extensions.push_back(candidate.calibrated);

  VkDeviceCreateInfo info = info_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  ACCGRAPH_VK_CHECK(api.vkCreateDevice(candidate.physical, &info, nullptr, &state.device),
                    fmt::format("start-up: creating a logical device for '{}'", state.name));

  create_queues(state, candidate);

  if (candidate.calibrated != nullptr && offers_device_domain(candidate.physical)) {
    const bool ext = std::strcmp(candidate.calibrated, "VK_EXT_calibrated_timestamps") == 0;
    state.get_calibrated =
        reinterpret_cast<PFN_vkGetCalibratedTimestampsEXT>(api.vkGetDeviceProcAddr(
            state.device, ext ? "vkGetCalibratedTimestampsEXT" : "vkGetCalibratedTimestampsKHR"));
  }

  // Note [Unaligned fills]: the pattern buffer.
  state.pattern = state.allocate(256 * kPatternBytes, MemoryKind::Host,
                                 "start-up: allocating the fill pattern buffer");
  auto* bytes = static_cast<uint8_t*>(state.pattern.mapped());
  for (size_t value = 0; value < 256; ++value)
    std::memset(bytes + value * kPatternBytes, static_cast<int>(value), kPatternBytes);
}

// Note [Spin shader]: Stream::delay is a one-invocation compute dispatch of shaders/spin.comp,
// in one of two modes, chosen and calibrated per device at start-up against timestamp queries
// (which have a known period):
// - clock: spin until the realtime shader clock (VK_KHR_shader_clock) advanced by N ticks.
//   Vulkan does not say what a tick is (NVIDIA's is its nanosecond global timer; others may
//   count cycles), so the rate is measured. The clock is wall time: a spin that is preempted or
//   slowed ends no earlier than it should. Mesa 22.3's lavapipe compiles the clock loop away
//   (its spins take no time whatever N is), so the calibration rejects the mode there.
// - work: N iterations of a dependent integer recurrence, at most kMaxIterationsPerDispatch per
//   dispatch (lavapipe stops longer loops), so a spin is several dispatches with barriers
//   between them, each paying the dispatch's cost too (which only lengthens the delay; a
//   delay needing over kMaxSpinDispatches is Unsupported). Its rate is the device's speed at
//   calibration: used only when the clock mode fails (lavapipe, where the device is the CPU and a
//   preemption only lengthens a spin). On a GPU whose clock rises after start-up a work spin
//   could end early, which is why the clock mode comes first.
// Calibration: warm-up spins (the first dispatch may compile the pipeline), the dispatch's own
// cost, then N grown by 4x until a spin lasts 1 ms longer than that; then spins of N and 2N,
// seven times: rate = N / (d(2N) - d(N)), the largest of the seven (a preempted first spin makes
// the difference smaller and the rate larger: the delay only gets longer), plus 1% (2.5x for a
// work spin: see calibrate_spin). A final
// check spins for 200 us and requires at least 200 us between the timestamps. Without the
// shader (no glslangValidator at build time), shaderInt64 or timestamps, or when both modes
// fail, timed_delay is not offered and delay_problem says why.
class Calibration {
 public:
  explicit Calibration(DeviceState& device) : device_(device) {
    const Api& api = vk();
    VkQueryPoolCreateInfo query_info =
        info_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query_info.queryCount = 2;
    ACCGRAPH_VK_CHECK(api.vkCreateQueryPool(device.device, &query_info, nullptr, &queries_),
                      "start-up: calibrating the spin shader");
    pool_ = create_command_pool(device, VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                "start-up: calibrating the spin shader");
    buffer_ = allocate_command_buffer(device, pool_, "start-up: calibrating the spin shader");
  }
  ~Calibration() {
    vk().vkDestroyCommandPool(device_.device, pool_, nullptr);
    vk().vkDestroyQueryPool(device_.device, queries_, nullptr);
  }
  Calibration(const Calibration&) = delete;
  Calibration& operator=(const Calibration&) = delete;

  /// ns between timestamps around a spin of `ticks`; nullopt when it took more than 10 s.
  std::optional<uint64_t> measure(uint64_t ticks) {
    const Api& api = vk();
    api.vkResetQueryPool(device_.device, queries_, 0, 2);
    ACCGRAPH_VK_CHECK(api.vkResetCommandBuffer(buffer_, 0), "start-up: calibrating");
    VkCommandBufferBeginInfo begin =
        info_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    ACCGRAPH_VK_CHECK(api.vkBeginCommandBuffer(buffer_, &begin), "start-up: calibrating");
    Operation operations[3];
    Command stamp;
    stamp.kind = Command::Kind::Timestamp;
    stamp.pool = queries_;
    stamp.query = 0;
    operations[0].commands.push_back(stamp);
    operations[1].commands = spin_commands(device_, ticks);
    stamp.query = 1;
    operations[2].commands.push_back(stamp);
    record_operations(device_, buffer_, operations, 3);
    ACCGRAPH_VK_CHECK(api.vkEndCommandBuffer(buffer_), "start-up: calibrating");
    QueueState& queue = *device_.queues.front();
    const uint64_t value = queue.submit(&buffer_, 1, nullptr, 0, "start-up: calibrating");
    if (!queue.wait(device_.device, value, 10'000'000'000ull, "start-up: calibrating"))
      return std::nullopt;
    uint64_t stamps[2] = {};
    ACCGRAPH_VK_CHECK(api.vkGetQueryPoolResults(device_.device, queries_, 0, 2, sizeof(stamps),
                                                stamps, sizeof(uint64_t),
                                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                      "start-up: calibrating");
    uint64_t ns[2];
    device_.timer.to_ns(stamps, 2, ns);
    return ns[1] - ns[0];
  }

 private:
  DeviceState& device_;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer buffer_ = VK_NULL_HANDLE;
};

/// Calibrates device.spin_mode (set by the caller); an empty string on success, else why not.
std::string calibrate_spin(DeviceState& device, Calibration& calibration) {
  const bool clock = device.spin_mode == 0;
  // A mode that does not advance must not run for long: the clock mode is bounded by its
  // amount of iterations, 1e8 at most (0.1 s at 1 ns per iteration).
  const uint64_t max_amount = clock ? 100'000'000ull : 1'000'000'000ull;
  uint64_t overhead = UINT64_MAX;
  for (int i = 0; i < 4; ++i) {
    const std::optional<uint64_t> minimal = calibration.measure(1);
    if (!minimal) return "a minimal spin did not end within 10 s";
    if (i > 0) overhead = std::min(overhead, *minimal);
  }
  uint64_t amount = 1000;
  for (;;) {
    const std::optional<uint64_t> spun = calibration.measure(amount);
    if (!spun) return "a calibration spin did not end within 10 s";
    if (*spun >= overhead + 1'000'000) break;
    if (amount * 4 > max_amount)
      return fmt::format("spins of up to {} {} took no longer than {} ns", amount,
                         clock ? "shader clock ticks" : "iterations", *spun);
    amount *= 4;
  }
  long double rate = 0;
  for (int trial = 0; trial < 7; ++trial) {
    const std::optional<uint64_t> once = calibration.measure(amount);
    const std::optional<uint64_t> twice = calibration.measure(2 * amount);
    if (!once || !twice) return "a calibration spin did not end within 10 s";
    if (*twice > *once)
      rate = std::max(rate,
                      static_cast<long double>(amount) / static_cast<long double>(*twice - *once));
  }
  if (rate <= 0) return "spins twice as long did not take longer";
  // The clock mode measures wall time and its rate comes from differences of spins of 1 ms and
  // more between timestamps (well under 0.1% of error), so 1% covers it: with 10% a delay was
  // exactly that much too long (the H200's NVIDIA driver: regions around delays of 200 us and
  // 2 ms read 1.112x and 1.102x the asked time, bench/README.md, 'Targets and figures the code
  // cites'; the timestamps were right, the spin was long by its margin). A work spin's rate is the
  // device's speed at calibration, and on a CPU device (lavapipe) whose cores other processes
  // shared then or share later it varies a lot: with two test processes on two cores, 300 us delays
  // measured 274-299 us with a margin of 10% and of 50%. 2.5x keeps them at least as long as asked
  // (rule caps.honest); they are longer than asked when the cores are idle.
  device.spin_units_per_ns = static_cast<double>(rate * (clock ? 1.01L : 2.50L));
  constexpr uint64_t kCheckNs = 200'000;
  const std::optional<uint64_t> check =
      calibration.measure(static_cast<uint64_t>(kCheckNs * device.spin_units_per_ns) + 1);
  if (!check || *check < kCheckNs)
    return fmt::format("a 200 us spin measured {} ns between timestamps", check ? *check : 0);
  return {};
}

#if ACCGRAPH_VULKAN_SPIN_SHADER
/// The storage buffer the spin shader writes (so its loop has an effect) and the descriptor set
/// that binds it.
void create_spin_descriptors(DeviceState& device) {
  const Api& api = vk();
  VkDevice handle = device.device;
  device.spin_sink = device.allocate(64, MemoryKind::Device, "start-up: the spin shader's sink");
  auto binding = VkDescriptorSetLayoutBinding{};
  binding.binding = 0;
  binding.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  binding.descriptorCount = 1;
  binding.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  auto set_layout_info = info_struct<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  set_layout_info.bindingCount = 1;
  set_layout_info.pBindings = &binding;
  ACCGRAPH_VK_CHECK(
      api.vkCreateDescriptorSetLayout(handle, &set_layout_info, nullptr, &device.spin_set_layout),
      "start-up: the spin shader's descriptor set layout");
  const VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
  auto pool_info =
      info_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  pool_info.maxSets = 1;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  ACCGRAPH_VK_CHECK(
      api.vkCreateDescriptorPool(handle, &pool_info, nullptr, &device.spin_descriptor_pool),
      "start-up: the spin shader's descriptor pool");
  auto set_info =
      info_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  set_info.descriptorPool = device.spin_descriptor_pool;
  set_info.descriptorSetCount = 1;
  set_info.pSetLayouts = &device.spin_set_layout;
  ACCGRAPH_VK_CHECK(api.vkAllocateDescriptorSets(handle, &set_info, &device.spin_set),
                    "start-up: the spin shader's descriptor set");
  const VkDescriptorBufferInfo sink{device.spin_sink.get(), 0, VK_WHOLE_SIZE};
  auto write = info_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
  write.dstSet = device.spin_set;
  write.dstBinding = 0;
  write.descriptorCount = 1;
  write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  write.pBufferInfo = &sink;
  api.vkUpdateDescriptorSets(handle, 1, &write, 0, nullptr);
}

/// The spin shader's module, its pipeline layout (the sink's set, 16 bytes of push constants)
/// and its compute pipeline.
void create_spin_pipeline(DeviceState& device) {
  const Api& api = vk();
  VkDevice handle = device.device;
  auto module_info =
      info_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  module_info.codeSize = sizeof(accgraph_spin_spirv);
  module_info.pCode = accgraph_spin_spirv;
  ACCGRAPH_VK_CHECK(api.vkCreateShaderModule(handle, &module_info, nullptr, &device.spin_module),
                    "start-up: loading the spin shader");
  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4 * sizeof(uint32_t)};
  auto layout_info =
      info_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &device.spin_set_layout;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &range;
  ACCGRAPH_VK_CHECK(api.vkCreatePipelineLayout(handle, &layout_info, nullptr, &device.spin_layout),
                    "start-up: creating the spin shader's pipeline layout");
  auto pipeline_info =
      info_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = device.spin_module;
  pipeline_info.stage.pName = "main";
  pipeline_info.layout = device.spin_layout;
  ACCGRAPH_VK_CHECK(api.vkCreateComputePipelines(handle, VK_NULL_HANDLE, 1, &pipeline_info, nullptr,
                                                 &device.spin_pipeline),
                    "start-up: creating the spin shader's pipeline");
}

/// Sets device.spin_mode to the first mode whose calibration passes: the shader clock (0), else
/// counting loop iterations (1). Empty on success; else why neither works, with the pipeline
/// destroyed so the device has no Stream::delay.
std::string choose_spin_mode(DeviceState& device, const Candidate& candidate) {
  Calibration calibration(device);
  // A CPU device (lavapipe) is never timed by its shader clock: Mesa 22.3 compiles the clock loop
  // away, and the calibration that rejects it measures time, which a loaded machine's
  // preemptions can fake (it once accepted it: 5 ms delays that took 0.1 ms).
  const bool cpu = candidate.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  device.spin_mode = 0;
  const std::string clock_problem =
      cpu ? std::string("a CPU device's shader clock does not time a spin")
          : calibrate_spin(device, calibration);
  if (clock_problem.empty()) return {};
  device.spin_mode = 1;
  const std::string work_problem = calibrate_spin(device, calibration);
  if (work_problem.empty()) {
    log(LogLevel::Debug, fmt::format("vulkan: device {}: the spin shader counts loop iterations: "
                                     "its shader clock cannot time a spin ({})",
                                     device.index, clock_problem));
    return {};
  }
  vk().vkDestroyPipeline(device.device, device.spin_pipeline, nullptr);
  device.spin_pipeline = VK_NULL_HANDLE;
  return fmt::format(
      "the spin shader could not be calibrated: with the shader clock, {}; "
      "counting iterations, {}",
      clock_problem, work_problem);
}
#endif

std::string set_up_spin(DeviceState& device, const Candidate& candidate) {
#if !ACCGRAPH_VULKAN_SPIN_SHADER
  (void)device;
  (void)candidate;
  return "accgraph was built without glslangValidator (Debian: glslang-tools), so it has no spin "
         "shader";
#else
  if (!candidate.shader_clock)
    return "the device lacks VK_KHR_shader_clock's shaderDeviceClock or shaderInt64";
  if (!device.timestamps) return "its compute queue family writes no timestamps";
  create_spin_descriptors(device);
  create_spin_pipeline(device);
  return choose_spin_mode(device, candidate);
#endif
}

/// The loader, checked for Vulkan 1.2, and an instance with its entry points loaded: a Runtime
/// with no devices yet. Unavailable when the loader is too old or finds no driver.
std::shared_ptr<Runtime> create_instance() {
  Api& api = vk();
  api.load_loader();
  uint32_t loader_version = 0;
  ACCGRAPH_VK_CHECK(api.vkEnumerateInstanceVersion(&loader_version), "start-up");
  if (loader_version < VK_API_VERSION_1_2)
    throw_unavailable(kBackendName,
                      fmt::format("the Vulkan loader supports Vulkan {} only; accgraph needs 1.2 "
                                  "(timeline semaphores): install a newer loader (libvulkan1)",
                                  version_string(loader_version)));
  VkApplicationInfo app = info_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "accgraph";
  app.pEngineName = "accgraph";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo instance_info =
      info_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  instance_info.pApplicationInfo = &app;
  auto runtime = std::make_shared<Runtime>();
  const VkResult created = api.vkCreateInstance(&instance_info, nullptr, &runtime->instance);
  if (created != VK_SUCCESS)
    throw_unavailable(kBackendName,
                      fmt::format("vkCreateInstance failed with {}: the Vulkan loader found no "
                                  "usable driver; {}",
                                  result_name(created), kDriverAdvice),
                      "vkCreateInstance", result_name(created));
  api.load_instance(runtime->instance);
  return runtime;
}

/// The driver's physical devices, in its order; Unavailable when it has none.
std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  const Api& api = vk();
  uint32_t count = 0;
  ACCGRAPH_VK_CHECK(api.vkEnumeratePhysicalDevices(instance, &count, nullptr),
                    "start-up: counting devices");
  std::vector<VkPhysicalDevice> physical(count);
  if (count > 0)
    ACCGRAPH_VK_CHECK(api.vkEnumeratePhysicalDevices(instance, &count, physical.data()),
                      "start-up: listing devices");
  physical.resize(count);
  if (physical.empty())
    throw_unavailable(kBackendName,
                      fmt::format("the Vulkan loader found no physical device; {}", kDriverAdvice));
  return physical;
}

/// Opens a usable physical device (queues, memory types, timer) and sets up its spin shader, or
/// records why it has no Stream::delay; logged at Debug.
void add_device(Runtime& runtime, VkPhysicalDevice physical, const Candidate& candidate) {
  const Api& api = vk();
  auto state = std::make_unique<DeviceState>();
  state->index = static_cast<int>(runtime.devices.size());
  state->physical = physical;
  state->name = candidate.properties.deviceName;
  state->family = candidate.family;
  state->timestamps = candidate.timestamp_bits > 0;
  if (!state->timestamps)
    state->timestamp_problem = "its compute queue family writes no timestamps";
  state->timer =
      TickConverter(candidate.properties.limits.timestampPeriod, candidate.timestamp_bits);
  api.vkGetPhysicalDeviceMemoryProperties(physical, &state->memory);
  DeviceState& device = *state;
  runtime.devices.push_back(std::move(state));
  create_device(device, candidate);
  device.delay_problem = set_up_spin(device, candidate);
  log(LogLevel::Debug,
      fmt::format("vulkan: device {} is '{}' (Vulkan {}), queue family {} with {} queue(s); "
                  "timestamps: {} valid bits, {} ns per tick; calibrated timestamps: {}; "
                  "timed delay: {}",
                  device.index, device.name, version_string(candidate.properties.apiVersion),
                  device.family, device.queues.size(), candidate.timestamp_bits,
                  device.timer.period_ns(), device.get_calibrated ? "yes" : "no",
                  device.delay_problem.empty()
                      ? fmt::format("yes, {:.4f} {} per ns", device.spin_units_per_ns,
                                    device.spin_mode == 0 ? "shader clock ticks" : "iterations")
                      : device.delay_problem));
}

std::shared_ptr<Runtime> discover() {
  std::shared_ptr<Runtime> runtime = create_instance();
  // Note [Probe instance]: from here on, a backend found unavailable keeps its instance (and the
  // driver the loader opened for it) for the process's life, as an available one keeps its
  // runtime (life.backend): destroying it unloads the driver, and Mesa 22.3's lavapipe leaves an
  // allocation behind that LeakSanitizer then reports from an unloaded module in every process
  // that merely listed the backends.
  struct KeepOnFailure {
    std::shared_ptr<Runtime>& runtime;
    bool succeeded = false;
    ~KeepOnFailure() {
      if (succeeded) return;
      static std::mutex mutex;
      static auto* kept = new std::vector<std::shared_ptr<Runtime>>();  // never freed: on purpose
      std::lock_guard<std::mutex> lock(mutex);
      kept->push_back(runtime);
    }
  } keep_on_failure{runtime};

  const std::vector<VkPhysicalDevice> physical = physical_devices(runtime->instance);
  const std::optional<uint32_t> only = selected_device();
  if (only && *only >= physical.size())
    throw_unavailable(kBackendName,
                      fmt::format("ACCGRAPH_VULKAN_DEVICE={} but the driver lists {} physical "
                                  "device(s), numbered from 0",
                                  *only, physical.size()));
  std::vector<std::string> problems;
  for (uint32_t i = 0; i < physical.size(); ++i) {
    if (only && i != *only) continue;
    const Candidate candidate = inspect(physical[i]);
    if (!candidate.problem.empty()) {
      problems.push_back(
          fmt::format("'{}': {}", candidate.properties.deviceName, candidate.problem));
      continue;
    }
    add_device(*runtime, physical[i], candidate);
  }
  if (runtime->devices.empty()) {
    std::string list;
    for (const std::string& p : problems) list += (list.empty() ? "" : "; ") + p;
    throw_unavailable(kBackendName,
                      fmt::format("no Vulkan device can be used ({}); {}", list, kDriverAdvice));
  }
  keep_on_failure.succeeded = true;
  return runtime;
}

// The forwarding members (devices, capabilities, allocate, create_graph, create_markers) are
// RuntimeBackend's (Note [Runtime backends] in common/runtime_backend.hpp).
class VkBackend final : public RuntimeBackend<Runtime>, public ClockSampling {
 public:
  VkBackend() : RuntimeBackend(kBackendName, discover(), {kDefaultRingDepth, kMaxRingDepth},
                         dlpack::kDLVulkan) {}

  std::unique_ptr<StreamImpl> create_stream(int device) override {
    DeviceState& state = device_state(device, "create_stream");
    return std::make_unique<VkStream>(
        std::make_shared<StreamCore>(runtime(), state, state.pick_queue(), Ownership::Owned));
  }

  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) override {
    DeviceState& state = wrap_target(
        device, native_handle,
        "a VkQueue of the vulkan backend's device (the native_handle() of a vulkan stream)");
    QueueState* queue = state.find_queue(static_cast<VkQueue>(native_handle));
    if (queue == nullptr)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("wrap_stream: {} is not a VkQueue of vulkan device {}: the vulkan "
                              "backend wraps only the queues of its own VkDevice (the "
                              "native_handle() of a vulkan stream on that device)",
                              native_handle, device),
                  kBackendName);
    return std::make_unique<VkStream>(
        std::make_shared<StreamCore>(runtime(), state, *queue, Ownership::Borrowed));
  }

  void sample_clock(int device, timing::ClockSample* samples, size_t count) override {
    sample_calibrated(device_state(device, "sample_clock"), samples, count);
  }

 private:
  Capabilities device_capabilities(const DeviceState& state) const override {
    Capabilities caps;
    // Nothing is illegal during a capture: it only redirects the capturing stream's operations
    // (Note [Recorded graphs] in graph.cpp), so every mode is honoured by doing nothing.
    caps.capture_modes = {CaptureMode::Global, CaptureMode::ThreadLocal, CaptureMode::Relaxed};
    caps.timed_delay = state.spin_pipeline != VK_NULL_HANDLE;
    return caps;
  }

  std::vector<std::string> marker_strategies(const DeviceState& state) const override {
    if (state.timestamps) return {kStrategyTimestampQueries};
    return {};
  }
};

}  // namespace

QueueState* DeviceState::find_queue(VkQueue queue) const {
  for (const auto& q : queues)
    if (q->queue == queue) return q.get();
  return nullptr;
}

Runtime::~Runtime() {
  const Api& api = vk();
  for (auto& device : devices) {
    if (device->device == VK_NULL_HANDLE) continue;
    ACCGRAPH_VK_LOG(api.vkDeviceWaitIdle(device->device), "shutting down");
    device->pattern = RawBuffer();
    device->spin_sink = RawBuffer();
    if (device->spin_descriptor_pool != VK_NULL_HANDLE)
      api.vkDestroyDescriptorPool(device->device, device->spin_descriptor_pool, nullptr);
    if (device->spin_set_layout != VK_NULL_HANDLE)
      api.vkDestroyDescriptorSetLayout(device->device, device->spin_set_layout, nullptr);
    if (device->spin_pipeline != VK_NULL_HANDLE)
      api.vkDestroyPipeline(device->device, device->spin_pipeline, nullptr);
    if (device->spin_layout != VK_NULL_HANDLE)
      api.vkDestroyPipelineLayout(device->device, device->spin_layout, nullptr);
    if (device->spin_module != VK_NULL_HANDLE)
      api.vkDestroyShaderModule(device->device, device->spin_module, nullptr);
    for (auto& queue : device->queues)
      if (queue->timeline != VK_NULL_HANDLE)
        api.vkDestroySemaphore(device->device, queue->timeline, nullptr);
    api.vkDestroyDevice(device->device, nullptr);
  }
  if (instance != VK_NULL_HANDLE) api.vkDestroyInstance(instance, nullptr);
}

std::unique_ptr<Backend> make_vulkan_backend() { return std::make_unique<VkBackend>(); }

}  // namespace accgraph::detail::vulkan

ACCGRAPH_DEFINE_PLUGIN("vulkan", accgraph::priority::normal, ACCGRAPH_VERSION_STRING,
                       accgraph::detail::vulkan::make_vulkan_backend())
