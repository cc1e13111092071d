// SPI for backends: clock sampling, how a backend lets timing::calibrate_clock put its devices'
// reports on the host's timeline (the optional ClockSampling interface, and sample_steady_clock
// for backends whose marker clock is steady_clock). The ClockSample a sample is, and
// realtime_ns, are public types (accgraph/clock.hpp), included from here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "accgraph/clock.hpp"  // timing::ClockSample, timing::realtime_ns (public types)
#include "accgraph/export.hpp"

#if defined(__linux__)
#include <time.h>  // clock_gettime, CLOCK_MONOTONIC
#endif

namespace accgraph {

class Backend;

/// Note [Clock sampling]: optional, for a Backend whose marker clock can be read against the
/// host's (accgraph/clock.hpp, Note [Clock calibration] in timing/engine/clock.cpp): a backend
/// class that also derives from ClockSampling lets timing::calibrate_clock (accgraph/clock.hpp) put
/// its devices' reports on the host's timeline. The core finds it with clock_sampling() below;
/// a backend without it makes calibrate_clock an Unsupported error, and nothing else changes.
/// - (clock.sample) sample_clock(device, samples, count) fills samples[0..count), each with
///   CLOCK_REALTIME read on the host, then the device's marker clock (the clock of
///   TimestampMarkers::read on that device, every strategy) read by the device itself, then
///   CLOCK_REALTIME again: host_before_ns <= host_after_ns, and the device read happened between
///   the two host reads. Samples are taken one after another, so device_ns never decreases. The
///   closer the device read is to the host reads (a device polling host memory, not a launch),
///   the smaller the offset's uncertainty. It may run work on the device, never on a user's
///   stream, and throws Error (BackendError naming the native call) when it cannot.
///   Preconditions (checked by the core): `device` exists, 1 <= count <= 100,000.
class ACCGRAPH_API ClockSampling {
 public:
  virtual ~ClockSampling();
  virtual void sample_clock(int device, timing::ClockSample* samples, size_t count) = 0;
};

/// The ClockSampling of `backend` (a Registry backend, built-in or a plugin's), or nullptr when
/// it has none. Use it rather than dynamic_cast: the Registry holds a plugin's backend behind a
/// forwarding owner that is not the plugin's class.
ACCGRAPH_API ClockSampling* clock_sampling(Backend& backend) noexcept;

/// Nanoseconds since steady_clock's epoch: the clock of SteadyClockMarkers
/// (accgraph/spi/steady_clock_markers.hpp), read once per marker on a host worker.
inline uint64_t steady_clock_ns() noexcept {
#if defined(__linux__)
  // steady_clock is CLOCK_MONOTONIC in nanoseconds on Linux (libstdc++ and libc++ both read it
  // with clock_gettime): read it directly, without steady_clock::now()'s out-of-line call
  // (3 instructions a marker fewer under callgrind). The same clock and value, so times from
  // here and from steady_clock::now() compare (test_host_clock.cpp checks).
  timespec now;
  if (clock_gettime(CLOCK_MONOTONIC, &now) == 0)
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
#endif
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

/// ClockSampling::sample_clock for a backend whose marker clock is steady_clock (clock.sample):
/// each sample reads CLOCK_REALTIME (std::chrono::system_clock), steady_clock, CLOCK_REALTIME.
///
///   class MyBackend final : public accgraph::Backend, public accgraph::ClockSampling {
///     void sample_clock(int, timing::ClockSample* s, size_t n) override {
///       sample_steady_clock(s, n);
///     }
///   };
inline void sample_steady_clock(timing::ClockSample* samples, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) {
    samples[i].host_before_ns = timing::realtime_ns();
    samples[i].device_ns = steady_clock_ns();
    samples[i].host_after_ns = timing::realtime_ns();
  }
}

}  // namespace accgraph
