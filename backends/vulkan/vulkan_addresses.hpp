// Internal: the table that maps the addresses Buffer::data() hands out to VkBuffers and offsets
// (AddressTable; thread-safe, tested without a driver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

namespace accgraph::detail::vulkan {

/// Note [Buffer addresses]: the SPI hands copy and fill raw pointers, so every accgraph buffer
/// has an address, registered here with the VkBuffer behind it. A host buffer's address is its
/// mapped pointer (the CPU reads it); a device buffer's is the start of an inaccessible range of
/// the process's address space reserved for it (mmap PROT_NONE, never backed), so addresses are
/// unique among each other and with every real pointer, and a CPU access to device memory faults
/// instead of touching something else. A pointer into [base, base + size) resolves to the
/// buffer and the offset. Thread-safe (readers share the lock).
class AddressTable {
 public:
  struct Entry {
    uintptr_t base = 0;
    uint64_t size = 0;
    VkBuffer buffer = VK_NULL_HANDLE;
    int device = 0;
  };
  struct Resolved {
    Entry entry;
    uint64_t offset = 0;
  };

  void insert(const Entry& entry);
  void erase(uintptr_t base) noexcept;
  /// The buffer holding [address, address + bytes), or nullopt when no single buffer does.
  std::optional<Resolved> find(const void* address, uint64_t bytes) const;
  size_t size() const;

 private:
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Entry> entries_;
};

}  // namespace accgraph::detail::vulkan
