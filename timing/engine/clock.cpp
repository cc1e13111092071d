// Device clock offsets from minimum-round-trip sampling (Note [Clock calibration]).
#include "accgraph/clock.hpp"

#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/host_clock.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/stream.hpp"

namespace accgraph::timing {

namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) noexcept {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// Runs the backend's sample_clock: whatever it throws becomes an accgraph::Error naming the
// backend (rule clock.sample: a plugin's exception must not escape as a foreign type, and a
// non-standard one must not reach std::terminate).
void sample_device_clock(ClockSampling& sampling, const std::string& backend, int device,
                         std::vector<ClockSample>& samples) {
  try {
    sampling.sample_clock(device, samples.data(), samples.size());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::BackendError,
                fmt::format("calibrate_clock: backend '{}' failed to sample the clock of device "
                            "{}: {} (its ClockSampling threw {}; it should throw "
                            "accgraph::Error)",
                            backend, device, e.what(), typeid(e).name()),
                backend);
  } catch (...) {
    throw Error(ErrorCode::BackendError,
                fmt::format("calibrate_clock: backend '{}' failed to sample the clock of device "
                            "{}: its ClockSampling threw something that is not a "
                            "std::exception; a backend must throw accgraph::Error",
                            backend, device),
                backend);
  }
}

// Rule clock.sample, checked on what the backend returned: every sample filled, the host reads
// in order, the device clock never going backwards. Breaking it is the backend's fault, so the
// error names the backend rather than blaming the caller.
void check_samples(const std::vector<ClockSample>& samples, const std::string& backend,
                   int device) {
  auto broken = [&](size_t i, const std::string& what) {
    return Error(ErrorCode::BackendError,
                 fmt::format("calibrate_clock: backend '{}' returned clock sample {} of {} for "
                             "device {} that {}: its ClockSampling breaks rule clock.sample "
                             "(host_before <= device read <= host_after, device times never "
                             "decreasing); fix the backend",
                             backend, i, samples.size(), device, what),
                 backend);
  };
  for (size_t i = 0; i < samples.size(); ++i) {
    const ClockSample& s = samples[i];
    if (s.host_before_ns == 0 && s.device_ns == 0 && s.host_after_ns == 0)
      throw broken(i, "is all zero (not filled in)");
    if (s.host_before_ns == 0 || s.host_after_ns == 0)
      throw broken(i, fmt::format("has a zero host time (host_before_ns {}, host_after_ns {})",
                                  s.host_before_ns, s.host_after_ns));
    if (s.host_after_ns < s.host_before_ns)
      throw broken(i, fmt::format("has host_after_ns {} before host_before_ns {}", s.host_after_ns,
                                  s.host_before_ns));
    if (i > 0 && s.device_ns < samples[i - 1].device_ns)
      throw broken(i, fmt::format("goes backwards: device_ns {} after {}", s.device_ns,
                                  samples[i - 1].device_ns));
  }
}

}  // namespace

// Note [Clock calibration]: every device timestamps its markers on its own clock (CUDA's
// %globaltimer, the host backend's CLOCK_MONOTONIC, ...), and those clocks disagree with the
// host and with each other by microseconds (measured on 2xH200: %globaltimer - CLOCK_REALTIME is
// -8.0 us on GPU0 and +0.2 us on GPU1). To put every device of every rank on one timeline, each
// device's offset against the host reference clock (CLOCK_REALTIME, the clock NTP/PTP
// discipline across hosts) is measured when the profiler starts (calibrate_clock): N samples
// of (host_before, device, host_after), where the device time is read by the device itself
// between the two host reads (ClockSampling in backend.hpp; on CUDA a one-thread kernel reads
// %globaltimer when it sees a flag the host raised in host-mapped memory). The device read
// happened somewhere in [host_before, host_after], so the sample with the smallest round trip
// bounds it best (as NTP and Cristian's algorithm do): offset = device - midpoint, uncertainty =
// half the round trip (plus the device timer's resolution). Scheduling and PCIe jitter only
// ever lengthen a round trip, so the minimum over ~100 samples is close to the true wire time
// (a couple of microseconds over PCIe, tens of nanoseconds for the host backend's own clock).
// The offset is written into each rank's trace ("accgraph trace info", write_perfetto_trace)
// and applied by merge_perfetto_traces; drift over a run (ppm-level between quartz
// oscillators) is not modelled, so calibrate again (and write a new trace) on long runs. The
// same method compares the hosts of a job with each other (Note [Host clock offsets] in
// timing/engine/host_clock.cpp), where the drift is modelled.
DeviceClockOffset estimate_clock_offset(const std::vector<ClockSample>& samples,
                                        uint64_t device_resolution_ns) {
  if (samples.empty())
    throw Error(ErrorCode::InvalidArgument,
                "estimate_clock_offset: no samples: take at least one (host_before, device, "
                "host_after) sample, ideally about 100");
  const ClockSample* best = nullptr;
  for (const ClockSample& s : samples) {
    if (s.host_after_ns < s.host_before_ns)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("estimate_clock_offset: a sample has host_after_ns {} before "
                              "host_before_ns {}: read the host clock before and after the "
                              "device clock, on a monotonic host clock",
                              s.host_after_ns, s.host_before_ns));
    if (best == nullptr ||
        s.host_after_ns - s.host_before_ns < best->host_after_ns - best->host_before_ns)
      best = &s;
  }
  const uint64_t round_trip = best->host_after_ns - best->host_before_ns;
  const uint64_t midpoint = best->host_before_ns + round_trip / 2;
  DeviceClockOffset offset;
  // Modular subtraction: exact for any two clocks less than 2^63 ns (292 years) apart.
  offset.offset_ns = static_cast<int64_t>(best->device_ns - midpoint);
  // Half the round trip rounded up, then the resolution: saturating, so a huge round trip or
  // resolution gives a huge uncertainty, never a wrapped small one.
  offset.uncertainty_ns = saturating_add(round_trip / 2 + (round_trip & 1), device_resolution_ns);
  return offset;
}

DeviceClockOffset calibrate_clock(std::string_view backend_name, int device, size_t samples) {
  constexpr size_t kMaxSamples = 100000;
  const std::string name =
      backend_name.empty() ? default_backend_name() : std::string(backend_name);
  if (samples == 0 || samples > kMaxSamples)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("calibrate_clock: {} samples: take from 1 to {} (about 100 is "
                            "plenty)",
                            samples, kMaxSamples));
  Backend& backend = Registry::instance().backend(name);
  const size_t devices = backend.devices().size();
  if (device < 0 || static_cast<size_t>(device) >= devices)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("calibrate_clock: device {} does not exist: backend '{}' has {} "
                            "device(s), numbered from 0",
                            device, name, devices),
                name);
  ClockSampling* sampling = clock_sampling(backend);
  if (sampling == nullptr)
    throw Error(ErrorCode::Unsupported,
                fmt::format("calibrate_clock: backend '{}' cannot read its device clock against "
                            "the host's (it does not implement accgraph::ClockSampling); its "
                            "traces can still be written, and a merge leaves them "
                            "uncalibrated. The host and cuda backends can.",
                            name),
                name);
  std::vector<ClockSample> taken(samples);
  sample_device_clock(*sampling, name, device, taken);
  check_samples(taken, name, device);
  for (ClockSample& s : taken) {  // Note [Host clock skew hook]: a no-op outside tests
    s.host_before_ns = skew_host_time(s.host_before_ns);
    s.host_after_ns = skew_host_time(s.host_after_ns);
  }
  DeviceClockOffset offset =
      estimate_clock_offset(taken, backend.capabilities(device).timer_resolution_ns);
  offset.backend = name;
  offset.device = device;
  return offset;
}

DeviceClockOffset calibrate_clock(const Stream& stream, size_t samples) {
  return calibrate_clock(stream.backend_name(), stream.device(), samples);
}

}  // namespace accgraph::timing
