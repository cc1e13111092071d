// Vulkan buffers: a VkBuffer with its own memory (device-local, or host-visible and mapped), and
// the address Buffer::data() hands out for it (Note [Buffer addresses] in vulkan_addresses.hpp).
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "vulkan_backend.hpp"

namespace accgraph::detail::vulkan {

RawBuffer& RawBuffer::operator=(RawBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    buffer_ = other.buffer_;
    memory_ = other.memory_;
    mapped_ = other.mapped_;
    size_ = other.size_;
    other.device_ = VK_NULL_HANDLE;
    other.buffer_ = VK_NULL_HANDLE;
    other.memory_ = VK_NULL_HANDLE;
    other.mapped_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void RawBuffer::release() noexcept {
  if (device_ == VK_NULL_HANDLE) return;
  if (buffer_ != VK_NULL_HANDLE) vk().vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vk().vkFreeMemory(device_, memory_, nullptr);  // unmaps too
  device_ = VK_NULL_HANDLE;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

namespace {

/// The first memory type allowed by `type_bits` with all of `required`, preferring one that
/// also has `preferred`; UINT32_MAX when none has `required`.
uint32_t memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t type_bits,
                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) == 0) continue;
    const VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

}  // namespace

RawBuffer DeviceState::allocate(uint64_t bytes, MemoryKind kind, const char* what) const {
  const Api& api = vk();
  VkBufferCreateInfo info = info_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  ACCGRAPH_VK_CHECK(api.vkCreateBuffer(device, &info, nullptr, &buffer), what);
  RawBuffer raw(device, buffer, VK_NULL_HANDLE, nullptr, bytes);  // destroys the buffer on throw
  VkMemoryRequirements requirements{};
  api.vkGetBufferMemoryRequirements(device, buffer, &requirements);
  const bool host = kind == MemoryKind::Host;
  const uint32_t type =
      host ? memory_type(memory, requirements.memoryTypeBits,
                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                         VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
           : memory_type(memory, requirements.memoryTypeBits, 0,
                         VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type == UINT32_MAX)
    throw Error(ErrorCode::BackendError,
                fmt::format("{}: device {} has no {} memory type for a buffer", what, index,
                            host ? "host-visible, coherent" : "suitable"),
                kBackendName);
  VkMemoryAllocateInfo allocate_info =
      info_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  allocate_info.allocationSize = requirements.size;
  allocate_info.memoryTypeIndex = type;
  VkDeviceMemory memory_handle = VK_NULL_HANDLE;
  ACCGRAPH_VK_CHECK(
      api.vkAllocateMemory(device, &allocate_info, nullptr, &memory_handle),
      fmt::format("{}: allocating {} bytes of {} memory", what, bytes, to_string(kind)));
  void* mapped = nullptr;
  raw.leak();  // the same buffer, now owned with its memory
  raw = RawBuffer(device, buffer, memory_handle, nullptr, bytes);
  ACCGRAPH_VK_CHECK(api.vkBindBufferMemory(device, buffer, memory_handle, 0), what);
  if (host) {
    ACCGRAPH_VK_CHECK(api.vkMapMemory(device, memory_handle, 0, VK_WHOLE_SIZE, 0, &mapped), what);
    raw.leak();
    raw = RawBuffer(device, buffer, memory_handle, mapped, bytes);
  }
  return raw;
}

namespace {

size_t page_rounded(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

class VkBufferImpl final : public BufferImpl {
 public:
  VkBufferImpl(std::shared_ptr<Runtime> runtime, DeviceState& device, size_t bytes, MemoryKind kind)
      : runtime_(std::move(runtime)), bytes_(bytes), kind_(kind) {
    raw_ = device.allocate(bytes, kind, "allocate");
    if (kind == MemoryKind::Host) {
      address_ = raw_.mapped();
      std::memset(address_, 0, bytes);
    } else {
      // Note [Buffer addresses]: a reserved, inaccessible range as the buffer's address.
      reserved_ = page_rounded(bytes);
      void* range =
          ::mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (range == MAP_FAILED)
        throw Error(ErrorCode::BackendError,
                    fmt::format("allocate: reserving {} bytes of address space for a device "
                                "buffer failed: {}",
                                reserved_, std::strerror(errno)),
                    kBackendName, "mmap");
      address_ = range;
    }
    runtime_->addresses.insert(
        {reinterpret_cast<uintptr_t>(address_), bytes, raw_.get(), device.index});
  }

  ~VkBufferImpl() override {
    runtime_->addresses.erase(reinterpret_cast<uintptr_t>(address_));
    if (reserved_ != 0) ::munmap(address_, reserved_);
  }

  void* data() const override { return address_; }
  size_t size() const override { return bytes_; }
  MemoryKind kind() const override { return kind_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  RawBuffer raw_;
  void* address_ = nullptr;
  size_t reserved_ = 0;  // bytes of address space reserved (device buffers)
  size_t bytes_;
  MemoryKind kind_;
};

}  // namespace

std::unique_ptr<BufferImpl> allocate_buffer(const std::shared_ptr<Runtime>& runtime,
                                            DeviceState& device, size_t bytes, MemoryKind kind) {
  return std::make_unique<VkBufferImpl>(runtime, device, bytes, kind);
}

}  // namespace accgraph::detail::vulkan
