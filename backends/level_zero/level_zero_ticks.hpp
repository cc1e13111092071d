// Internal: Level Zero device timestamp ticks -> nanoseconds (TickConverter), across the
// counter's wraparound; pure, tested without a driver (tests/level_zero).
#pragma once

#include <cstddef>
#include <cstdint>

namespace accgraph::detail::level_zero {

/// Device timestamp ticks -> nanoseconds. ze_device_properties_t::timerResolution is in Hz when
/// queried with ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 and in ns per tick (truncated to an
/// integer, so a 19.2 MHz timer reads 52 instead of 52.083) with the 1.0 structure; only the
/// low timestampValidBits bits of a timestamp count, so differences are taken modulo 2^bits.
class TickConverter {
 public:
  /// From the 1_2 properties (exact). hz == 0 is treated as 1 GHz; valid_bits outside 1..64 as 64.
  static TickConverter from_frequency_hz(uint64_t hz, uint32_t valid_bits);
  /// From the 1.0 properties (ns per tick, truncated by the driver).
  static TickConverter from_ns_per_tick(uint64_t ns_per_tick, uint32_t valid_bits);

  uint32_t valid_bits() const noexcept { return valid_bits_; }
  uint64_t mask() const noexcept;
  /// ns of `ticks` ticks (rounded down; 128-bit intermediate, never overflows).
  uint64_t ticks_to_ns(uint64_t ticks) const noexcept;
  /// ns from timestamp `from` to the later timestamp `to`, across one wraparound of the counter.
  uint64_t elapsed_ns(uint64_t from, uint64_t to) const noexcept;
  /// The duration of one tick, rounded up, at least 1 ns.
  uint64_t resolution_ns() const noexcept;
  /// ns of one period of the counter (2^valid_bits ticks); UINT64_MAX when that does not fit.
  uint64_t period_ns() const noexcept;
  /// True when timestamps all taken within `window_ns` of host time can be placed exactly: the
  /// window plus a margin for clock drift and sampling (1/64 of it, plus 50 us) is shorter
  /// than one period, so no two of them are a whole period or more apart (Note [Counter
  /// period] in markers.cpp).
  bool window_is_unambiguous(uint64_t window_ns) const noexcept;
  /// Timestamps taken in this order -> ns on one clock: the first is its masked value in ns,
  /// each later one the previous plus elapsed_ns(previous, this), so a sequence stays monotonic
  /// across a wraparound as long as consecutive stamps are less than one period apart. Writes
  /// ns[0..count); `ticks` and `ns` may be the same array.
  void to_ns(const uint64_t* ticks, size_t count, uint64_t* ns) const;

 private:
  TickConverter(uint64_t numerator, uint64_t denominator, uint32_t valid_bits) noexcept;
  uint64_t ns_numerator_;  // ns = ticks * ns_numerator_ / ns_denominator_
  uint64_t ns_denominator_;
  uint32_t valid_bits_;
};

}  // namespace accgraph::detail::level_zero
