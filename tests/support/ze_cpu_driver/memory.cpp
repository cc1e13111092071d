// Memory allocation of the CPU Level Zero driver: host, device and shared allocations are all host
// memory.
#include "driver.h"

#include <cstdlib>
#include <iterator>
#include <map>

namespace zecpu {
namespace {

struct Allocation {
  size_t size;
  ze_memory_type_t type;
  uint64_t id;
};

// Allocations by base address, so a pointer anywhere inside one can be looked up.
std::mutex& allocations_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<uintptr_t, Allocation>& allocations() {
  static std::map<uintptr_t, Allocation> map;
  return map;
}

ze_result_t allocate(ze_context_handle_t context, size_t size, size_t alignment,
                     ze_memory_type_t type, void** out) {
  if (resolve<Context>(context) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  // More than the whole memory cannot be satisfied: answer without asking the allocator, which
  // would otherwise see absurd sizes (a sanitizer's allocator aborts on them) and could overflow
  // `rounded`.
  if (size > physical_memory_bytes() || alignment > physical_memory_bytes())
    return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  const size_t rounded =
      (size + alignment - 1) / alignment * alignment;  // aligned_alloc requires a multiple
  void* memory = std::aligned_alloc(alignment, rounded);
  if (memory == nullptr) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  static uint64_t next_id = 1;
  std::lock_guard<std::mutex> lock(allocations_mutex());
  allocations()[reinterpret_cast<uintptr_t>(memory)] = Allocation{size, type, next_id++};
  *out = memory;
  return ZE_RESULT_SUCCESS;
}

ze_result_t mem_alloc_shared(ze_context_handle_t context,
                             const ze_device_mem_alloc_desc_t* device_desc,
                             const ze_host_mem_alloc_desc_t* host_desc, size_t size,
                             size_t alignment, ze_device_handle_t, void** out) {
  if (device_desc == nullptr || host_desc == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return allocate(context, size, alignment, ZE_MEMORY_TYPE_SHARED, out);
}

ze_result_t mem_alloc_device(ze_context_handle_t context,
                             const ze_device_mem_alloc_desc_t* device_desc, size_t size,
                             size_t alignment, ze_device_handle_t device, void** out) {
  if (resolve<Device>(device) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (device_desc == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return allocate(context, size, alignment, ZE_MEMORY_TYPE_DEVICE, out);
}

ze_result_t mem_alloc_host(ze_context_handle_t context, const ze_host_mem_alloc_desc_t* host_desc,
                           size_t size, size_t alignment, void** out) {
  if (host_desc == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return allocate(context, size, alignment, ZE_MEMORY_TYPE_HOST, out);
}

ze_result_t mem_free(ze_context_handle_t context, void* pointer) {
  if (resolve<Context>(context) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (pointer == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex());
    if (allocations().erase(reinterpret_cast<uintptr_t>(pointer)) == 0)
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  std::free(pointer);
  return ZE_RESULT_SUCCESS;
}

// Finds the allocation containing `pointer`; false if none does.
bool find_allocation(const void* pointer, uintptr_t* base, Allocation* found) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(allocations_mutex());
  auto it = allocations().upper_bound(address);
  if (it == allocations().begin()) return false;
  --it;
  if (address >= it->first + it->second.size) return false;
  *base = it->first;
  *found = it->second;
  return true;
}

ze_result_t mem_get_alloc_properties(ze_context_handle_t context, const void* pointer,
                                     ze_memory_allocation_properties_t* properties,
                                     ze_device_handle_t* device) {
  if (resolve<Context>(context) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (pointer == nullptr || properties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  uintptr_t base = 0;
  Allocation allocation{};
  if (!find_allocation(pointer, &base, &allocation)) {
    properties->type = ZE_MEMORY_TYPE_UNKNOWN;
    properties->id = 0;
    properties->pageSize = 0;
    if (device != nullptr) *device = nullptr;
    return ZE_RESULT_SUCCESS;
  }
  properties->type = allocation.type;
  properties->id = allocation.id;
  properties->pageSize = 4096;
  if (device != nullptr) {
    *device = allocation.type == ZE_MEMORY_TYPE_HOST
                  ? nullptr
                  : reinterpret_cast<ze_device_handle_t>(the_device());
  }
  return ZE_RESULT_SUCCESS;
}

ze_result_t mem_get_address_range(ze_context_handle_t context, const void* pointer, void** base_out,
                                  size_t* size_out) {
  if (resolve<Context>(context) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (pointer == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  uintptr_t base = 0;
  Allocation allocation{};
  if (!find_allocation(pointer, &base, &allocation)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (base_out != nullptr) *base_out = reinterpret_cast<void*>(base);
  if (size_out != nullptr) *size_out = allocation.size;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

void fill_mem_table(ze_mem_dditable_t* table) {
  table->pfnAllocShared = mem_alloc_shared;
  table->pfnAllocDevice = mem_alloc_device;
  table->pfnAllocHost = mem_alloc_host;
  table->pfnFree = mem_free;
  table->pfnGetAllocProperties = mem_get_alloc_properties;
  table->pfnGetAddressRange = mem_get_address_range;
}

}  // namespace zecpu
