// accgraph/clock.hpp: calibrate_clock on the host backend (its markers' clock, steady_clock,
// against CLOCK_REALTIME), its argument checks, and a backend without ClockSampling.
#include <chrono>
#include <cstdint>
#include <string>

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
