// The Vulkan loader, opened at run time (Note [Loading the loader]).
#include "vulkan_api.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "vulkan_check.hpp"

namespace accgraph::detail::vulkan {

// Note [Loading the loader]: the module does not link libvulkan. It dlopen()s libvulkan.so.1
// (the loader's soname on every Linux distribution; Debian's libvulkan1) when the backend is
// first created, so that accgraph built with Vulkan headers runs on a machine without the
// loader and lists `vulkan` as unavailable with that reason, as it does without an ICD or a
// device. The loader stays loaded for the life of the process (the backend is never destroyed).
// Which driver (ICD) the loader uses is the loader's business: VK_DRIVER_FILES (or the older
// VK_ICD_FILENAMES) selects one, e.g. lavapipe in CI.

namespace {

// An entry point the backend cannot do without, or Error(Unavailable) naming it.
template <class Pfn>
Pfn required(PFN_vkVoidFunction function, const char* name) {
  if (function == nullptr)
    throw Error(
        ErrorCode::Unavailable,
        fmt::format("the Vulkan loader has no {}: install a Vulkan 1.2 or newer loader", name),
        kBackendName, "vkGetInstanceProcAddr");
  return reinterpret_cast<Pfn>(function);
}

}  // namespace

Api& vk() {
  static Api api;
  return api;
}

void Api::load_loader() {
  if (vkGetInstanceProcAddr != nullptr) return;
  void* library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorCode::Unavailable,
                fmt::format("the Vulkan loader libvulkan.so.1 could not be loaded ({}): install "
                            "it (Debian: libvulkan1) and a Vulkan driver (e.g. "
                            "mesa-vulkan-drivers for lavapipe on the CPU)",
                            why ? why : "no reason given"),
                kBackendName, "dlopen");
  }
  auto get = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
  if (get == nullptr)
    throw Error(ErrorCode::Unavailable,
                "libvulkan.so.1 has no vkGetInstanceProcAddr: it is not a Vulkan loader",
                kBackendName, "dlsym");
#define ACCGRAPH_VK_LOAD_GLOBAL(name) name = required<PFN_##name>(get(nullptr, #name), #name);
  ACCGRAPH_VK_GLOBAL_FUNCTIONS(ACCGRAPH_VK_LOAD_GLOBAL)
#undef ACCGRAPH_VK_LOAD_GLOBAL
  vkGetInstanceProcAddr = get;
}

void Api::load_instance(VkInstance instance) {
#define ACCGRAPH_VK_LOAD_INSTANCE(name) \
  name = required<PFN_##name>(vkGetInstanceProcAddr(instance, #name), #name);
  ACCGRAPH_VK_INSTANCE_FUNCTIONS(ACCGRAPH_VK_LOAD_INSTANCE)
#undef ACCGRAPH_VK_LOAD_INSTANCE
  auto optional = [&](const char* ext, const char* khr) {
    PFN_vkVoidFunction f = vkGetInstanceProcAddr(instance, ext);
    return f != nullptr ? f : vkGetInstanceProcAddr(instance, khr);
  };
  vkGetPhysicalDeviceCalibrateableTimeDomains =
      reinterpret_cast<PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT>(
          optional("vkGetPhysicalDeviceCalibrateableTimeDomainsEXT",
                   "vkGetPhysicalDeviceCalibrateableTimeDomainsKHR"));
  vkGetCalibratedTimestamps = reinterpret_cast<PFN_vkGetCalibratedTimestampsEXT>(
      optional("vkGetCalibratedTimestampsEXT", "vkGetCalibratedTimestampsKHR"));
}

}  // namespace accgraph::detail::vulkan
