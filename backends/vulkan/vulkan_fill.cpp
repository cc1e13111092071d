// plan_fill: the pieces of a fill (Note [Unaligned fills] in vulkan_fill.hpp).
#include "vulkan_fill.hpp"

namespace accgraph::detail::vulkan {

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
  if (end > aligned_end)
    pieces.push_back({FillPiece::Kind::CopyPattern, aligned_end, end - aligned_end});
  return pieces;
}

}  // namespace accgraph::detail::vulkan
