// Internal: how a fill at any offset and size is split into vkCmdFillBuffer's aligned words and
// copies from a pattern buffer (plan_fill; pure, tested without a driver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accgraph::detail::vulkan {

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

}  // namespace accgraph::detail::vulkan
