// AddressTable: buffer addresses -> VkBuffer and offset (Note [Buffer addresses] in
// vulkan_addresses.hpp).
#include "vulkan_addresses.hpp"

#include <mutex>

namespace accgraph::detail::vulkan {

void AddressTable::insert(const Entry& entry) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  entries_[entry.base] = entry;
}

void AddressTable::erase(uintptr_t base) noexcept {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  entries_.erase(base);
}

std::optional<AddressTable::Resolved> AddressTable::find(const void* address,
                                                         uint64_t bytes) const {
  const auto where = reinterpret_cast<uintptr_t>(address);
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = entries_.upper_bound(where);
  if (it == entries_.begin()) return std::nullopt;
  --it;
  const Entry& entry = it->second;
  const uint64_t offset = where - entry.base;
  if (offset >= entry.size || bytes > entry.size - offset) return std::nullopt;
  return Resolved{entry, offset};
}

size_t AddressTable::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace accgraph::detail::vulkan
