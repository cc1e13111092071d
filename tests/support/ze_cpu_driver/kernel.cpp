// Modules and kernels of the CPU Level Zero driver: any module "builds", kernels are built-ins
// chosen by name.
#include "driver.h"

#include <cstring>

namespace zecpu {
namespace {

template <class T>
T arg_as(const KernelLaunch& launch, size_t index) {
  T value{};
  if (index < launch.args.size()) {
    const auto& bytes = launch.args[index];
    std::memcpy(&value, bytes.data(), bytes.size() < sizeof(T) ? bytes.size() : sizeof(T));
  }
  return value;
}

uint64_t global_size(const KernelLaunch& launch) {
  return uint64_t{launch.group_count.groupCountX} * launch.group_size[0] *
         launch.group_count.groupCountY * launch.group_size[1] * launch.group_count.groupCountZ *
         launch.group_size[2];
}

// accgraph_spin_ns(uint64 ns): busy-waits, so that measured kernel time means something.
void spin_ns(const KernelLaunch& launch) {
  const uint64_t duration = arg_as<uint64_t>(launch, 0);
  const uint64_t start = host_ns();
  while (host_ns() - start < duration) {
  }
}

// accgraph_fill_u32(uint32* dst, uint32 value): dst[i] = value for every work item i of the launch.
void fill_u32(const KernelLaunch& launch) {
  auto* destination = arg_as<uint32_t*>(launch, 0);
  const auto value = arg_as<uint32_t>(launch, 1);
  const uint64_t count = global_size(launch);
  for (uint64_t i = 0; i < count; ++i) destination[i] = value;
}

struct BuiltinInfo {
  const char* name;
  BuiltinKernel body;
  uint32_t num_args;
};

constexpr BuiltinInfo kBuiltins[] = {
    {"accgraph_spin_ns", spin_ns, 1},
    {"accgraph_fill_u32", fill_u32, 2},
};

ze_result_t module_create(ze_context_handle_t context, ze_device_handle_t device,
                          const ze_module_desc_t* desc, ze_module_handle_t* module,
                          ze_module_build_log_handle_t* build_log) {
  if (resolve<Context>(context) == nullptr || resolve<Device>(device) == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || module == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  // The SPIR-V (or anything else) is ignored: every module offers all built-in kernels.
  *module = reinterpret_cast<ze_module_handle_t>(new Module());
  if (build_log != nullptr)
    *build_log = reinterpret_cast<ze_module_build_log_handle_t>(new ModuleBuildLog());
  return ZE_RESULT_SUCCESS;
}

ze_result_t module_destroy(ze_module_handle_t handle) {
  Module* module = resolve<Module>(handle);
  if (module == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete module;
  return ZE_RESULT_SUCCESS;
}

ze_result_t module_get_kernel_names(ze_module_handle_t module, uint32_t* count,
                                    const char** names) {
  if (resolve<Module>(module) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (count == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  constexpr uint32_t available = sizeof(kBuiltins) / sizeof(kBuiltins[0]);
  if (*count == 0 || names == nullptr) {
    *count = available;
    return ZE_RESULT_SUCCESS;
  }
  if (*count > available) *count = available;
  for (uint32_t i = 0; i < *count; ++i) names[i] = kBuiltins[i].name;
  return ZE_RESULT_SUCCESS;
}

ze_result_t build_log_destroy(ze_module_build_log_handle_t handle) {
  ModuleBuildLog* log = resolve<ModuleBuildLog>(handle);
  if (log == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete log;
  return ZE_RESULT_SUCCESS;
}

ze_result_t build_log_get_string(ze_module_build_log_handle_t handle, size_t* size, char* text) {
  if (resolve<ModuleBuildLog>(handle) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (size == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (text != nullptr && *size > 0) text[0] = '\0';
  *size = 1;  // the empty string
  return ZE_RESULT_SUCCESS;
}

ze_result_t kernel_create(ze_module_handle_t module, const ze_kernel_desc_t* desc,
                          ze_kernel_handle_t* out) {
  if (resolve<Module>(module) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || desc->pKernelName == nullptr || out == nullptr)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  for (const BuiltinInfo& builtin : kBuiltins) {
    if (std::strcmp(builtin.name, desc->pKernelName) != 0) continue;
    auto* kernel = new Kernel();
    kernel->name = builtin.name;
    kernel->body = builtin.body;
    kernel->num_args = builtin.num_args;
    kernel->state.args.resize(builtin.num_args);
    *out = reinterpret_cast<ze_kernel_handle_t>(kernel);
    return ZE_RESULT_SUCCESS;
  }
  return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
}

ze_result_t kernel_destroy(ze_kernel_handle_t handle) {
  Kernel* kernel = resolve<Kernel>(handle);
  if (kernel == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  delete kernel;
  return ZE_RESULT_SUCCESS;
}

ze_result_t kernel_set_group_size(ze_kernel_handle_t handle, uint32_t x, uint32_t y, uint32_t z) {
  Kernel* kernel = resolve<Kernel>(handle);
  if (kernel == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (x == 0 || y == 0 || z == 0 || uint64_t{x} * y * z > 1024)
    return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
  kernel->state.group_size[0] = x;
  kernel->state.group_size[1] = y;
  kernel->state.group_size[2] = z;
  return ZE_RESULT_SUCCESS;
}

// Largest divisor of `global` that is at most `limit`, so that groups tile the global size exactly.
uint32_t largest_divisor(uint32_t global, uint32_t limit) {
  for (uint32_t candidate = global < limit ? global : limit; candidate > 1; --candidate) {
    if (global % candidate == 0) return candidate;
  }
  return 1;
}

ze_result_t kernel_suggest_group_size(ze_kernel_handle_t kernel, uint32_t global_x,
                                      uint32_t global_y, uint32_t global_z, uint32_t* x,
                                      uint32_t* y, uint32_t* z) {
  if (resolve<Kernel>(kernel) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (x == nullptr || y == nullptr || z == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *x = largest_divisor(global_x, 256);
  *y = largest_divisor(global_y, 1024 / *x);
  *z = largest_divisor(global_z, 1024 / (*x * *y));
  return ZE_RESULT_SUCCESS;
}

ze_result_t kernel_set_argument_value(ze_kernel_handle_t handle, uint32_t index, size_t size,
                                      const void* value) {
  Kernel* kernel = resolve<Kernel>(handle);
  if (kernel == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (index >= kernel->num_args) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  if (size == 0 || size > 8) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
  std::vector<uint8_t> bytes(size, 0);  // a null value (local memory) reads as zeros
  if (value != nullptr) std::memcpy(bytes.data(), value, size);
  kernel->state.args[index] = std::move(bytes);
  return ZE_RESULT_SUCCESS;
}

ze_result_t kernel_get_properties(ze_kernel_handle_t handle, ze_kernel_properties_t* properties) {
  Kernel* kernel = resolve<Kernel>(handle);
  if (kernel == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  void* next = properties->pNext;
  const ze_structure_type_t stype = properties->stype;
  std::memset(properties, 0, sizeof(*properties));
  properties->stype = stype;
  properties->pNext = next;
  properties->numKernelArgs = kernel->num_args;
  properties->maxSubgroupSize = 1;
  properties->maxNumSubgroups = 1024;
  return ZE_RESULT_SUCCESS;
}

ze_result_t kernel_get_name(ze_kernel_handle_t handle, size_t* size, char* name) {
  Kernel* kernel = resolve<Kernel>(handle);
  if (kernel == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (size == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  const size_t needed = kernel->name.size() + 1;
  if (name != nullptr && *size >= needed) std::memcpy(name, kernel->name.c_str(), needed);
  *size = needed;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

void fill_module_table(ze_module_dditable_t* table) {
  table->pfnCreate = module_create;
  table->pfnDestroy = module_destroy;
  table->pfnGetKernelNames = module_get_kernel_names;
}

void fill_module_build_log_table(ze_module_build_log_dditable_t* table) {
  table->pfnDestroy = build_log_destroy;
  table->pfnGetString = build_log_get_string;
}

void fill_kernel_table(ze_kernel_dditable_t* table) {
  table->pfnCreate = kernel_create;
  table->pfnDestroy = kernel_destroy;
  table->pfnSetGroupSize = kernel_set_group_size;
  table->pfnSuggestGroupSize = kernel_suggest_group_size;
  table->pfnSetArgumentValue = kernel_set_argument_value;
  table->pfnGetProperties = kernel_get_properties;
  table->pfnGetName = kernel_get_name;
}

}  // namespace zecpu
