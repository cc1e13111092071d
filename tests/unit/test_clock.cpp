// accgraph/clock.hpp: calibrate_clock on the host backend (its markers' clock, steady_clock,
// against CLOCK_REALTIME), its argument checks, and a backend without ClockSampling.
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "accgraph/accgraph.hpp"
#include "check_error.hpp"
#include "host_alias_backend.hpp"

using namespace accgraph;
using timing::calibrate_clock;
using timing::DeviceClockOffset;

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_CASE("calibrate_clock on host: steady_clock minus CLOCK_REALTIME, within its uncertainty") {
  // The truth, bracketed: steady_clock read between two CLOCK_REALTIME reads, as a span of
  // possible offsets [steady - after, steady - before].
  const auto before = static_cast<int64_t>(timing::realtime_ns());
  const int64_t steady = steady_ns();
  const auto after = static_cast<int64_t>(timing::realtime_ns());
  const DeviceClockOffset clock = calibrate_clock("host", 0, 100);
  CHECK(clock.backend == "host");
  CHECK(clock.device == 0);
  const int64_t low = steady - after, high = steady - before;
  const auto uncertainty = static_cast<int64_t>(clock.uncertainty_ns);
  INFO("offset " << clock.offset_ns << " +- " << uncertainty << ", truth in [" << low << ", "
                 << high << "]");
  // The two intervals overlap (allowing for CLOCK_REALTIME being slewed by NTP between the two
  // measurements, which moves it by far less than a microsecond in this time).
  CHECK(clock.offset_ns + uncertainty + 1000 >= low);
  CHECK(clock.offset_ns - uncertainty - 1000 <= high);
  // The best of 100 host samples is at least as tight as the one bracket taken here.
  CHECK(clock.uncertainty_ns <= static_cast<uint64_t>(after - before) / 2 + 1 + 1);

  // Through a Stream: its backend and device.
  Stream stream = Stream::create("host");
  const DeviceClockOffset again = timing::calibrate_clock(stream, 10);
  CHECK(again.backend == "host");
  const int64_t difference = again.offset_ns - clock.offset_ns;
  CHECK((difference < 0 ? -difference : difference) <=
        static_cast<int64_t>(again.uncertainty_ns + clock.uncertainty_ns) + 1000);
}

TEST_CASE("calibrate_clock: bad arguments and a backend without ClockSampling") {
  CHECK_ACCGRAPH_ERROR(calibrate_clock("host", 0, 0), ErrorCode::InvalidArgument,
                       "0 samples: take from 1 to 100000");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("host", 0, 100001), ErrorCode::InvalidArgument,
                       "100001 samples");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("host", 1, 10), ErrorCode::InvalidArgument,
                       "device 1 does not exist: backend 'host' has 1 device(s)");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("host", -1, 10), ErrorCode::InvalidArgument,
                       "device -1 does not exist");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("no_such_backend", 0, 10), ErrorCode::InvalidArgument,
                       "no_such_backend");
  // The host backend's objects under another name, without ClockSampling.
  test::register_host_alias("host_unclocked", "test_clock.cpp");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("host_unclocked", 0, 10), ErrorCode::Unsupported,
                       "backend 'host_unclocked' cannot read its device clock against the "
                       "host's (it does not implement accgraph::ClockSampling)");
}

namespace {

// A host alias whose ClockSampling misbehaves in the way `Mode` says (rule clock.sample).
enum class BadClock { ThrowsStd, ThrowsInt, FillsNothing, SwapsHostReads, GoesBackwards };

template <BadClock Mode>
class BadClockBackend final : public test::HostAliasBackend, public ClockSampling {
 public:
  using HostAliasBackend::HostAliasBackend;
  void sample_clock(int, timing::ClockSample* samples, size_t count) override {
    if (Mode == BadClock::ThrowsStd) throw std::runtime_error("bad clock read");
    if (Mode == BadClock::ThrowsInt) throw 42;
    if (Mode == BadClock::FillsNothing) return;
    for (size_t i = 0; i < count; ++i) {
      samples[i] = {1000 + 10 * i, 1005 + 10 * i, 1010 + 10 * i};
      if (Mode == BadClock::SwapsHostReads)
        std::swap(samples[i].host_before_ns, samples[i].host_after_ns);
      if (Mode == BadClock::GoesBackwards && i == 3) samples[i].device_ns = 7;
    }
  }
};

}  // namespace

// audit 2026-11-25 #63: the arithmetic saturates.
TEST_CASE("estimate_clock_offset: a huge round trip or resolution saturates, never wraps") {
  const uint64_t max = UINT64_MAX;
  CHECK(timing::estimate_clock_offset({{0, 0, max}}, 0).uncertainty_ns == max / 2 + 1);
  CHECK(timing::estimate_clock_offset({{0, 0, max}}, 1).uncertainty_ns >= max / 2 + 1);
  CHECK(timing::estimate_clock_offset({{0, 0, 2}}, max).uncertainty_ns == max);
  CHECK(timing::estimate_clock_offset({{0, 0, max}}, max).uncertainty_ns == max);
  CHECK(timing::estimate_clock_offset({{10, 11, 12}}, 1).uncertainty_ns == 2);
  CHECK(timing::estimate_clock_offset({{10, 11, 13}}, 0).uncertainty_ns == 2);
}

// audit 2026-11-25 #69, #70: a ClockSampling that throws anything, or returns samples that break
// rule clock.sample, is a BackendError naming the backend.
TEST_CASE("calibrate_clock: a misbehaving ClockSampling is a BackendError naming the backend") {
  test::register_host_alias<BadClockBackend<BadClock::ThrowsStd>>("clock_throws_std", "t");
  test::register_host_alias<BadClockBackend<BadClock::ThrowsInt>>("clock_throws_int", "t");
  test::register_host_alias<BadClockBackend<BadClock::FillsNothing>>("clock_fills_nothing", "t");
  test::register_host_alias<BadClockBackend<BadClock::SwapsHostReads>>("clock_swaps", "t");
  test::register_host_alias<BadClockBackend<BadClock::GoesBackwards>>("clock_backwards", "t");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("clock_throws_std", 0, 10), ErrorCode::BackendError,
                       "backend 'clock_throws_std' failed to sample the clock of device 0: bad "
                       "clock read");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("clock_throws_int", 0, 10), ErrorCode::BackendError,
                       "backend 'clock_throws_int' failed to sample the clock of device 0: its "
                       "ClockSampling threw something that is not a std::exception");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("clock_fills_nothing", 0, 10), ErrorCode::BackendError,
                       "backend 'clock_fills_nothing' returned clock sample 0 of 10 for device 0 "
                       "that is all zero (not filled in): its ClockSampling breaks rule "
                       "clock.sample");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("clock_swaps", 0, 10), ErrorCode::BackendError,
                       "backend 'clock_swaps' returned clock sample 0 of 10 for device 0 that "
                       "has host_after_ns 1000 before host_before_ns 1010");
  CHECK_ACCGRAPH_ERROR(calibrate_clock("clock_backwards", 0, 10), ErrorCode::BackendError,
                       "returned clock sample 3 of 10 for device 0 that goes backwards: "
                       "device_ns 7 after 1025");
  try {
    calibrate_clock("clock_throws_int", 0, 10);
  } catch (const Error& e) {
    CHECK(e.backend() == "clock_throws_int");
  }
}
