// The vulkan backend's pure helpers (vk_support.hpp): result names, tick conversion, fill
// splitting and the buffer address table.
#include "vk_support.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace accgraph::detail::vulkan {

std::string result_name(VkResult result) {
  switch (result) {
#define ACCGRAPH_VK_RESULT(name) \
  case name:                     \
    return #name;
    ACCGRAPH_VK_RESULT(VK_SUCCESS)
    ACCGRAPH_VK_RESULT(VK_NOT_READY)
    ACCGRAPH_VK_RESULT(VK_TIMEOUT)
    ACCGRAPH_VK_RESULT(VK_EVENT_SET)
    ACCGRAPH_VK_RESULT(VK_EVENT_RESET)
    ACCGRAPH_VK_RESULT(VK_INCOMPLETE)
    ACCGRAPH_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    ACCGRAPH_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    ACCGRAPH_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    ACCGRAPH_VK_RESULT(VK_ERROR_DEVICE_LOST)
    ACCGRAPH_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    ACCGRAPH_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    ACCGRAPH_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    ACCGRAPH_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    ACCGRAPH_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    ACCGRAPH_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    ACCGRAPH_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    ACCGRAPH_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    ACCGRAPH_VK_RESULT(VK_ERROR_UNKNOWN)
    ACCGRAPH_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    ACCGRAPH_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    ACCGRAPH_VK_RESULT(VK_ERROR_FRAGMENTATION)
    ACCGRAPH_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef ACCGRAPH_VK_RESULT
    default:
      return fmt::format("VkResult({})", static_cast<int>(result));
  }
}

std::string result_meaning(VkResult result) {
  switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "the driver ran out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "the device is out of memory";
    case VK_ERROR_INITIALIZATION_FAILED: return "the driver could not initialise an object";
    case VK_ERROR_DEVICE_LOST: return "the device was lost (a hang, a reset or a driver fault)";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "no compatible Vulkan driver (ICD) was found";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "a requested extension is not supported";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "a requested feature is not supported";
    case VK_ERROR_TOO_MANY_OBJECTS: return "the driver's limit on objects of this type is reached";
    case VK_TIMEOUT: return "the wait timed out";
    default: return "";
  }
}

std::string VkCall::hint(VkResult result) {
  switch (result) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "free buffers or allocate less";
    case VK_ERROR_DEVICE_LOST:
      return "the device cannot be used any more by this process: restart it";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "install a Vulkan driver, or point the loader at one with VK_DRIVER_FILES";
    default:
      return "";
  }
}

// --- ticks -----------------------------------------------------------------------------------

TickConverter::TickConverter(double period_ns, uint32_t valid_bits) noexcept
    : period_(period_ns > 0 && std::isfinite(period_ns) ? period_ns : 1.0),
      integer_period_(0),
      valid_bits_(valid_bits >= 1 && valid_bits <= 64 ? valid_bits : 64) {
  if (period_ == std::floor(period_) && period_ < 1e9) integer_period_ = static_cast<uint64_t>(period_);
}

uint64_t TickConverter::mask() const noexcept {
  return valid_bits_ == 64 ? UINT64_MAX : (uint64_t{1} << valid_bits_) - 1;
}

uint64_t TickConverter::ticks_to_ns(uint64_t ticks) const noexcept {
  if (integer_period_ != 0) {
    if (ticks > UINT64_MAX / integer_period_) return UINT64_MAX;
    return ticks * integer_period_;
  }
  const long double ns = static_cast<long double>(ticks) * static_cast<long double>(period_);
  return ns >= 18446744073709551615.0L ? UINT64_MAX : static_cast<uint64_t>(ns);
}

uint64_t TickConverter::resolution_ns() const noexcept {
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(period_)));
}

uint64_t TickConverter::counter_period_ns() const noexcept {
  if (valid_bits_ == 64) return UINT64_MAX;
  const long double ns = std::ldexp(static_cast<long double>(period_), static_cast<int>(valid_bits_));
  return ns >= 18446744073709551615.0L ? UINT64_MAX : static_cast<uint64_t>(ns);
}

bool TickConverter::window_is_unambiguous(uint64_t window_ns) const noexcept {
  const uint64_t period = counter_period_ns();
  if (period == UINT64_MAX) return true;
  const long double needed = static_cast<long double>(window_ns) * (1.0L + 1.0L / 64) + 50'000.0L;
  return needed < static_cast<long double>(period);
}

void TickConverter::to_ns(const uint64_t* ticks, size_t count, uint64_t* ns) const {
  if (count == 0) return;
  const uint64_t m = mask();
  uint64_t previous = ticks[0] & m;
  uint64_t time = ticks_to_ns(previous);
  ns[0] = time;
  for (size_t i = 1; i < count; ++i) {
    const uint64_t current = ticks[i] & m;
    const uint64_t elapsed_ticks = (current - previous) & m;
    previous = current;
    time += ticks_to_ns(elapsed_ticks);
    ns[i] = time;
  }
}

// --- fills -----------------------------------------------------------------------------------

std::vector<FillPiece> plan_fill(uint64_t offset, uint64_t bytes) {
  const uint64_t end = offset + bytes;
  const uint64_t aligned_start = (offset + 3) & ~uint64_t{3};
  const uint64_t aligned_end = end & ~uint64_t{3};
  std::vector<FillPiece> pieces;
  if (aligned_start >= aligned_end) {  // no whole word inside: at most 6 bytes
    pieces.push_back({FillPiece::Kind::CopyPattern, offset, bytes});
    return pieces;
  }
  if (aligned_start > offset)
    pieces.push_back({FillPiece::Kind::CopyPattern, offset, aligned_start - offset});
  pieces.push_back({FillPiece::Kind::Fill, aligned_start, aligned_end - aligned_start});
  if (end > aligned_end) pieces.push_back({FillPiece::Kind::CopyPattern, aligned_end, end - aligned_end});
  return pieces;
}

// --- addresses -------------------------------------------------------------------------------

void AddressTable::insert(const Entry& entry) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  entries_[entry.base] = entry;
}

void AddressTable::erase(uintptr_t base) noexcept {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  entries_.erase(base);
}

std::optional<AddressTable::Resolved> AddressTable::find(const void* address, uint64_t bytes) const {
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
