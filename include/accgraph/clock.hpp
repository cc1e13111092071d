// Device clocks against the host's: clock samples, the offset they give, and calibration of a
// device (Note [Clock calibration] in timing/engine/clock.cpp). Traces of several devices or ranks
// are put on one timeline with these offsets (accgraph/perfetto.hpp: PerfettoOptions::clocks,
// merge_perfetto_traces).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accgraph/export.hpp"

namespace accgraph {
class Stream;
}

namespace accgraph::timing {

/// The host reference clock of every ClockSample and DeviceClockOffset: CLOCK_REALTIME
/// (std::chrono::system_clock on Linux) in nanoseconds since the epoch.
inline uint64_t realtime_ns() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

/// One clock sample: the host clock (CLOCK_REALTIME, ns) read before and after the device read
/// its own marker clock (the clock of TimestampMarkers::read on that device).
struct ClockSample {
  uint64_t host_before_ns = 0;
  uint64_t device_ns = 0;
  uint64_t host_after_ns = 0;
};

/// One device clock against the host's reference clock (CLOCK_REALTIME): host_time =
/// device_time - offset_ns, true to within +-uncertainty_ns.
struct DeviceClockOffset {
  std::string backend;  ///< ReplayReport::backend() of the device's reports
  int device = 0;       ///< ReplayReport::device()
  int64_t offset_ns = 0;
  uint64_t uncertainty_ns = 0;
};

/// The offset of a device clock from minimum-round-trip sampling: the sample with the shortest
/// host_after - host_before bounds the device read best; offset = device - midpoint, uncertainty
/// = half that round trip plus the device timer's resolution. InvalidArgument when `samples` is
/// empty or a sample has host_after < host_before. backend and device are left empty/0.
ACCGRAPH_API DeviceClockOffset estimate_clock_offset(const std::vector<ClockSample>& samples,
                                                     uint64_t device_resolution_ns);

/// Measures the offset of device `device` of `backend` (empty: the default backend) against
/// CLOCK_REALTIME from `samples` clock samples (1 to 100,000; about 100 is plenty) taken by the
/// backend's ClockSampling (accgraph/spi/clock_sampling.hpp), with the device's marker resolution
/// as the timer's. Takes a few hundred microseconds on a GPU (one small kernel on a private
/// stream); call it when the profiler starts, before the timed work, and again on runs of many
/// minutes (drift is not modelled). Unsupported when the backend cannot sample its clock (the
/// message says which backends can); InvalidArgument for a bad device or sample count.
///
///   accgraph::timing::DeviceClockOffset clock = accgraph::timing::calibrate_clock(stream);
///   options.clocks.push_back(clock);  // PerfettoOptions of this rank's trace
ACCGRAPH_API DeviceClockOffset calibrate_clock(std::string_view backend, int device,
                                               size_t samples = 100);
/// The same for the stream's backend and device (the stream itself is not used).
ACCGRAPH_API DeviceClockOffset calibrate_clock(const Stream& stream, size_t samples = 100);

}  // namespace accgraph::timing
