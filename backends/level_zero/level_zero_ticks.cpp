// TickConverter: exact tick -> ns conversion and wraparound-safe differences.
#include "level_zero_ticks.hpp"

namespace accgraph::detail::level_zero {

namespace {
// 128-bit intermediates keep tick conversions exact; __extension__ marks the GCC/Clang type as
// intended under -Wpedantic.
__extension__ typedef unsigned __int128 Wide;
}  // namespace

TickConverter::TickConverter(uint64_t numerator, uint64_t denominator, uint32_t valid_bits) noexcept
    : ns_numerator_(numerator),
      ns_denominator_(denominator == 0 ? 1 : denominator),
      valid_bits_(valid_bits == 0 || valid_bits > 64 ? 64 : valid_bits) {}

TickConverter TickConverter::from_frequency_hz(uint64_t hz, uint32_t valid_bits) {
  return TickConverter(1000000000ull, hz == 0 ? 1000000000ull : hz, valid_bits);
}

TickConverter TickConverter::from_ns_per_tick(uint64_t ns_per_tick, uint32_t valid_bits) {
  return TickConverter(ns_per_tick == 0 ? 1 : ns_per_tick, 1, valid_bits);
}

uint64_t TickConverter::mask() const noexcept {
  return valid_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << valid_bits_) - 1;
}

uint64_t TickConverter::ticks_to_ns(uint64_t ticks) const noexcept {
  Wide ns = static_cast<Wide>(ticks) * ns_numerator_ / ns_denominator_;
  return ns > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(ns);
}

uint64_t TickConverter::elapsed_ns(uint64_t from, uint64_t to) const noexcept {
  return ticks_to_ns((to - from) & mask());
}

uint64_t TickConverter::resolution_ns() const noexcept {
  uint64_t ns = (ns_numerator_ + ns_denominator_ - 1) / ns_denominator_;
  return ns == 0 ? 1 : ns;
}

uint64_t TickConverter::period_ns() const noexcept {
  if (valid_bits_ >= 64) return ~uint64_t{0};
  return ticks_to_ns(uint64_t{1} << valid_bits_);
}

bool TickConverter::window_is_unambiguous(uint64_t window_ns) const noexcept {
  constexpr uint64_t kFixedMarginNs = 50'000;
  const Wide needed = static_cast<Wide>(window_ns) + window_ns / 64 + kFixedMarginNs;
  return needed < period_ns();
}

void TickConverter::to_ns(const uint64_t* ticks, size_t count, uint64_t* ns) const {
  if (count == 0) return;
  uint64_t previous = ticks[0];  // ticks[i - 1] may already be overwritten when ns == ticks
  ns[0] = ticks_to_ns(previous & mask());
  for (size_t i = 1; i < count; ++i) {
    const uint64_t current = ticks[i];
    ns[i] = ns[i - 1] + elapsed_ns(previous, current);
    previous = current;
  }
}

}  // namespace accgraph::detail::level_zero
