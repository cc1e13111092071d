// Level Zero buffers: device and host USM allocations of the backend's context.
#include <fmt/format.h>

#include "level_zero_backend.hpp"

namespace accgraph::detail::level_zero {

ZeBuffer::ZeBuffer(std::shared_ptr<Runtime> runtime, void* data, size_t bytes, MemoryKind kind)
    : runtime_(std::move(runtime)), data_(data), bytes_(bytes), kind_(kind) {}

ZeBuffer::~ZeBuffer() { ACCGRAPH_ZE_LOG(zeMemFree(runtime_->context, data_), "freeing a buffer"); }

std::unique_ptr<BufferImpl> allocate_buffer(const std::shared_ptr<Runtime>& runtime,
                                            DeviceState& device, size_t bytes, MemoryKind kind) {
  constexpr size_t kAlignment = 64;
  void* data = nullptr;
  if (kind == MemoryKind::Device) {
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    ACCGRAPH_ZE_CHECK(
        zeMemAllocDevice(runtime->context, &desc, bytes, kAlignment, device.handle, &data),
        fmt::format("allocating {} bytes of device memory on device {}", bytes, device.index));
  } else {
    ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    ACCGRAPH_ZE_CHECK(zeMemAllocHost(runtime->context, &desc, bytes, kAlignment, &data),
                      fmt::format("allocating {} bytes of host memory", bytes));
  }
  try {
    return std::make_unique<ZeBuffer>(runtime, data, bytes, kind);
  } catch (...) {
    ACCGRAPH_ZE_LOG(zeMemFree(runtime->context, data), "allocate: cleaning up");
    throw;
  }
}

}  // namespace accgraph::detail::level_zero
