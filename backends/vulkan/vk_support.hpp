// Internal: the vulkan backend's pure helpers, testable without a driver (tests/vulkan): the
// VkResult check traits (Note [Native calls]), timestamp tick conversion, how an unaligned fill
// is split, and the table that maps the addresses Buffer::data() hands out to VkBuffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "accgraph/error.hpp"
#include "accgraph/native_call.hpp"

namespace accgraph::detail::vulkan {

inline constexpr const char* kBackendName = "vulkan";

/// "VK_ERROR_DEVICE_LOST" for a VkResult ("VkResult(-12345)" for one this list lacks).
std::string result_name(VkResult result);
/// What a VkResult means, in words (empty when nothing useful can be said).
std::string result_meaning(VkResult result);

/// VkResult for accgraph's native-call checks. VK_SUCCESS only: the calls the backend checks
/// with it never legitimately return VK_TIMEOUT, VK_NOT_READY or VK_INCOMPLETE (where one may,
/// the call site handles that code itself).
struct VkCall {
  using Result = VkResult;
  static constexpr const char* kBackend = kBackendName;
  static bool succeeded(VkResult result) noexcept { return result == VK_SUCCESS; }
  static std::string name(VkResult result) { return result_name(result); }
  static std::string meaning(VkResult result) { return result_meaning(result); }
  static std::string hint(VkResult result);
  static ErrorCode error_code(VkResult) noexcept { return ErrorCode::BackendError; }
  static void on_failure(VkResult) noexcept {}
};

/// ACCGRAPH_VK_CHECK(vk().vkQueueSubmit(...), "replay") throws, naming the call and the result;
/// ACCGRAPH_VK_LOG(...) logs instead, for destructors.
#define ACCGRAPH_VK_CHECK(expr, what) \
  ACCGRAPH_NATIVE_CHECK(::accgraph::detail::vulkan::VkCall, expr, what)
#define ACCGRAPH_VK_LOG(expr, what) \
  ACCGRAPH_NATIVE_LOG(::accgraph::detail::vulkan::VkCall, expr, what)

/// Timestamp ticks -> ns for one device: timestampPeriod ns per tick, `valid_bits` valid bits.
class TickConverter {
 public:
  /// period_ns <= 0 is treated as 1; valid_bits outside 1..64 as 64.
  TickConverter(double period_ns, uint32_t valid_bits) noexcept;

  uint32_t valid_bits() const noexcept { return valid_bits_; }
  double period_ns() const noexcept { return period_; }
  uint64_t mask() const noexcept;
  /// ns of a masked tick count (rounded down; exact integer arithmetic for an integer period).
  uint64_t ticks_to_ns(uint64_t ticks) const noexcept;
  /// The duration of one tick, rounded up, at least 1 ns.
  uint64_t resolution_ns() const noexcept;
  /// ns of one period of the counter (2^valid_bits ticks); UINT64_MAX when that does not fit.
  uint64_t counter_period_ns() const noexcept;
  /// True when timestamps taken within `window_ns` of host time can be placed exactly: the
  /// window plus a margin (1/64 of it, plus 50 us) is shorter than one counter period.
  bool window_is_unambiguous(uint64_t window_ns) const noexcept;
  /// Timestamps taken in this order -> ns: the first is its masked value in ns, each later one
  /// the previous plus the masked difference, so a sequence stays monotonic across one
  /// wraparound between consecutive stamps. `ticks` and `ns` may be the same array.
  void to_ns(const uint64_t* ticks, size_t count, uint64_t* ns) const;

 private:
  double period_;
  uint64_t integer_period_;  // period_ when it is a whole number of ns, else 0
  uint32_t valid_bits_;
};

/// Note [Unaligned fills]: vkCmdFillBuffer writes 32-bit words at offsets and sizes that are
/// multiples of 4. A fill of [offset, offset + bytes) is split into at most three pieces: an
/// unaligned head and tail of at most 3 bytes each (or, for a short range with no whole word
/// inside, the whole range, at most 6 bytes), copied with vkCmdCopyBuffer from the device's
/// pattern buffer (host-visible memory holding kPatternBytes copies of each byte value, written
/// by the host at start-up), and the aligned middle, filled with vkCmdFillBuffer. Every byte is
/// written exactly once: never a silently wrong result.
inline constexpr size_t kPatternBytes = 8;

struct FillPiece {
  enum class Kind { Fill, CopyPattern };
  Kind kind;
  uint64_t offset;  ///< in the destination buffer
  uint64_t bytes;
};

/// The pieces of a fill at `offset`, `bytes` long (bytes > 0), in increasing offset order.
std::vector<FillPiece> plan_fill(uint64_t offset, uint64_t bytes);

/// The 32-bit word vkCmdFillBuffer writes for a byte value.
constexpr uint32_t fill_word(uint8_t value) noexcept { return 0x01010101u * value; }

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
