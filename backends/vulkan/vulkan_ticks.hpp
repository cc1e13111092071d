// Internal: Vulkan timestamp ticks -> nanoseconds for one device (TickConverter), across the
// counter's wraparound; pure, tested without a driver (tests/vulkan).
#pragma once

#include <cstddef>
#include <cstdint>

namespace accgraph::detail::vulkan {

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

}  // namespace accgraph::detail::vulkan
