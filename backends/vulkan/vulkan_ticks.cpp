// TickConverter: tick -> ns conversion (exact for an integer period) and wraparound-safe
// differences.
#include "vulkan_ticks.hpp"

#include <algorithm>
#include <cmath>

namespace accgraph::detail::vulkan {

TickConverter::TickConverter(double period_ns, uint32_t valid_bits) noexcept
    : period_(period_ns > 0 && std::isfinite(period_ns) ? period_ns : 1.0),
      integer_period_(0),
      valid_bits_(valid_bits >= 1 && valid_bits <= 64 ? valid_bits : 64) {
  if (period_ == std::floor(period_) && period_ < 1e9)
    integer_period_ = static_cast<uint64_t>(period_);
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
  const long double ns =
      std::ldexp(static_cast<long double>(period_), static_cast<int>(valid_bits_));
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

}  // namespace accgraph::detail::vulkan
