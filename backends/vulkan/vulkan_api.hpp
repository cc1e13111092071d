// Internal: the Vulkan entry points the backend uses, resolved at run time from the loader
// (libvulkan.so.1, dlopen'ed) so that the module loads on a machine without Vulkan and reports the
// backend unavailable with the reason (Note [Loading the loader] in vulkan_api.cpp).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

namespace accgraph::detail::vulkan {

// X-macro lists: V(name). Global entry points come from vkGetInstanceProcAddr(nullptr, ...);
// the others from vkGetInstanceProcAddr(instance, ...), which for device functions returns the
// loader's trampolines (one table serves every device).
#define ACCGRAPH_VK_GLOBAL_FUNCTIONS(V) \
  V(vkCreateInstance)                   \
  V(vkEnumerateInstanceVersion)         \
  V(vkEnumerateInstanceExtensionProperties)

#define ACCGRAPH_VK_INSTANCE_FUNCTIONS(V)     \
  V(vkDestroyInstance)                        \
  V(vkEnumeratePhysicalDevices)               \
  V(vkGetPhysicalDeviceProperties)            \
  V(vkGetPhysicalDeviceQueueFamilyProperties) \
  V(vkGetPhysicalDeviceMemoryProperties)      \
  V(vkGetPhysicalDeviceFeatures2)             \
  V(vkEnumerateDeviceExtensionProperties)     \
  V(vkCreateDevice)                           \
  V(vkGetDeviceProcAddr)                      \
  V(vkDestroyDevice)                          \
  V(vkGetDeviceQueue)                         \
  V(vkDeviceWaitIdle)                         \
  V(vkCreateCommandPool)                      \
  V(vkDestroyCommandPool)                     \
  V(vkAllocateCommandBuffers)                 \
  V(vkFreeCommandBuffers)                     \
  V(vkBeginCommandBuffer)                     \
  V(vkEndCommandBuffer)                       \
  V(vkResetCommandBuffer)                     \
  V(vkQueueSubmit)                            \
  V(vkCreateSemaphore)                        \
  V(vkDestroySemaphore)                       \
  V(vkWaitSemaphores)                         \
  V(vkGetSemaphoreCounterValue)               \
  V(vkCreateBuffer)                           \
  V(vkDestroyBuffer)                          \
  V(vkGetBufferMemoryRequirements)            \
  V(vkAllocateMemory)                         \
  V(vkFreeMemory)                             \
  V(vkBindBufferMemory)                       \
  V(vkMapMemory)                              \
  V(vkUnmapMemory)                            \
  V(vkCmdCopyBuffer)                          \
  V(vkCmdFillBuffer)                          \
  V(vkCmdPipelineBarrier)                     \
  V(vkCmdWriteTimestamp)                      \
  V(vkCmdResetQueryPool)                      \
  V(vkCmdCopyQueryPoolResults)                \
  V(vkCreateQueryPool)                        \
  V(vkDestroyQueryPool)                       \
  V(vkResetQueryPool)                         \
  V(vkGetQueryPoolResults)                    \
  V(vkCreateShaderModule)                     \
  V(vkDestroyShaderModule)                    \
  V(vkCreatePipelineLayout)                   \
  V(vkCreateDescriptorSetLayout)              \
  V(vkDestroyDescriptorSetLayout)             \
  V(vkCreateDescriptorPool)                   \
  V(vkDestroyDescriptorPool)                  \
  V(vkAllocateDescriptorSets)                 \
  V(vkUpdateDescriptorSets)                   \
  V(vkCmdBindDescriptorSets)                  \
  V(vkDestroyPipelineLayout)                  \
  V(vkCreateComputePipelines)                 \
  V(vkDestroyPipeline)                        \
  V(vkCmdBindPipeline)                        \
  V(vkCmdPushConstants)                       \
  V(vkCmdDispatch)

/// The entry points, resolved once per process. Optional ones (calibrated timestamps) are null
/// when the loader has none.
struct Api {
#define ACCGRAPH_VK_MEMBER(name) PFN_##name name = nullptr;
  ACCGRAPH_VK_GLOBAL_FUNCTIONS(ACCGRAPH_VK_MEMBER)
  ACCGRAPH_VK_INSTANCE_FUNCTIONS(ACCGRAPH_VK_MEMBER)
#undef ACCGRAPH_VK_MEMBER
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  /// VK_EXT_calibrated_timestamps or VK_KHR_calibrated_timestamps (same signatures).
  PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT vkGetPhysicalDeviceCalibrateableTimeDomains =
      nullptr;
  PFN_vkGetCalibratedTimestampsEXT vkGetCalibratedTimestamps = nullptr;

  /// Opens the loader and resolves the global entry points; throws Error(Unavailable) naming
  /// what is missing (no libvulkan.so.1, or a loader without vkGetInstanceProcAddr).
  void load_loader();
  /// Resolves the instance and device entry points through `instance`; throws Error(Unavailable)
  /// naming the first one the loader does not have (a loader older than Vulkan 1.2).
  void load_instance(VkInstance instance);
};

/// The process's table (filled by the backend at start-up, then only read).
Api& vk();

}  // namespace accgraph::detail::vulkan
