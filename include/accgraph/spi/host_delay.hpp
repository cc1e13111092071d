// SPI helper for backends whose streams run host code: the body of a timed Stream::delay.
#pragma once

#include <chrono>
#include <thread>

namespace accgraph {

/// The body of a host-run Stream::delay (Capabilities::timed_delay): returns no earlier than
/// `duration` after it was called. It sleeps through most of a long delay and spins on
/// steady_clock for the last 200 us, for a precise end without burning a shared core: a thread
/// that spins for milliseconds uses up its time slice and is then preempted for a whole one
/// (measured: a pure 5 ms spin took a median 7.9 ms on 2 loaded cores). Saturating: a duration
/// near nanoseconds::max() waits "forever" instead of overflowing.
inline void delay_on_this_thread(std::chrono::nanoseconds duration) {
  using clock = std::chrono::steady_clock;
  constexpr auto kSpinTail = std::chrono::microseconds(200);
  const auto now = clock::now();
  const auto deadline =
      duration < clock::time_point::max() - now ? now + duration : clock::time_point::max();
  if (duration > kSpinTail) std::this_thread::sleep_until(deadline - kSpinTail);
  while (clock::now() < deadline) {
  }
}

}  // namespace accgraph
