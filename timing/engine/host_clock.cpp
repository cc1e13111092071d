// Host clock offsets over the job's transport (Note [Host clock offsets]) and the test-only skew
// of the host clock (Note [Host clock skew hook]).
#include "accgraph/host_clock.hpp"

#include <time.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/clock_sampling.hpp"

namespace accgraph::timing {

namespace {

constexpr const char* kSkewVariable = "ACCGRAPH_TEST_HOST_CLOCK_SKEW";

// Note [Host clock skew hook]: a test of the multi-host merge cannot move a host's clock, so
// every host time accgraph reads for alignment goes through host_clock_ns / skew_host_time, and
// ACCGRAPH_TEST_HOST_CLOCK_SKEW="OFFSET_NS[,DRIFT_PPM[,ANCHOR_NS]]" (for tests only; nothing
// in production sets it) makes this process read
//   CLOCK_REALTIME + OFFSET_NS + DRIFT_PPM * 1e-6 * (CLOCK_REALTIME - ANCHOR_NS)
// (ANCHOR_NS: CLOCK_REALTIME when the variable was first read, unless given). That is exactly
// what a host whose clock is off by OFFSET_NS and runs DRIFT_PPM fast would read: the device
// offsets of calibrate_clock come out against it (their samples' host reads are skewed), so the
// device times of the trace land on the skewed host clock, and measure_host_clock_offset must
// recover the skew for the merge to align the ranks (tests/perfetto/multihost_skew.cpp).
// Read once per process; a malformed value is an error on every read, never ignored.
struct Skew {
  bool set = false;
  bool valid = true;
  std::string text;
  int64_t offset_ns = 0;
  double drift_ppm = 0;
  uint64_t anchor_ns = 0;
};

Skew read_skew() {
  Skew skew;
  const char* value = std::getenv(kSkewVariable);
  if (value == nullptr || *value == '\0') return skew;
  skew.set = true;
  skew.text = value;
  const char* at = value;
  char* end = nullptr;
  errno = 0;
  skew.offset_ns = std::strtoll(at, &end, 10);
  skew.valid = end != at && errno == 0;
  skew.anchor_ns = realtime_ns();
  if (skew.valid && *end == ',') {
    at = end + 1;
    skew.drift_ppm = std::strtod(at, &end);
    skew.valid = end != at && std::isfinite(skew.drift_ppm) && std::fabs(skew.drift_ppm) < 1e6;
    if (skew.valid && *end == ',') {
      at = end + 1;
      errno = 0;
      skew.anchor_ns = std::strtoull(at, &end, 10);
      skew.valid = end != at && errno == 0;
    }
  }
  skew.valid = skew.valid && *end == '\0';
  return skew;
}

const Skew& skew() {
  static const Skew s = read_skew();
  if (!s.valid)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}='{}' is not OFFSET_NS[,DRIFT_PPM[,ANCHOR_NS]] (integers, "
                            "DRIFT_PPM a number): it is a test hook that skews the host clock; "
                            "unset it outside tests",
                            kSkewVariable, s.text));
  return s;
}

// The resolution of CLOCK_REALTIME in ns (1 on Linux with a TSC), at least 1.
uint64_t host_clock_resolution_ns() {
  timespec res{};
  if (::clock_getres(CLOCK_REALTIME, &res) != 0) return 1;
  const auto ns =
      static_cast<uint64_t>(res.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(res.tv_nsec);
  return ns == 0 ? 1 : ns;
}

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "measure_host_clock_offset: " + what);
}

// One round of the ping-pong on a rank other than 0: sent at t1, rank 0's answer t0, back at t2.
struct Answer {
  size_t round = 0;
  uint64_t t1 = 0, t0 = 0, t2 = 0;
  bool valid() const { return t2 != 0; }
};

[[noreturn]] void not_a_clock(const std::string& what) {
  throw Error(ErrorCode::BackendError,
              "measure_host_clock_offset: rank 0's answers are not its clock: " + what +
                  "; check that rank 0 calls measure_host_clock_offset with the same rounds and "
                  "that receive returns exactly the value the peer gave send (no truncation, no "
                  "unfilled buffer), then measure again");
}

// Note [Implausible answers]: rank 0 answers with its clock, so its answers are read in
// [t1, t2] of their rounds on the true time line: between two rounds they advance by what this
// host's clock advanced, within the two round trips, plus the drift between two quartz clocks
// (kDriftPpm, generous) and kSlackNs for clock resolution and slewing. An answer of 0 (an unfilled
// receive buffer) or answers that jump around (a transport that garbles values) give offsets of
// decades with an uncertainty of nanoseconds; both are refused instead. One round cannot be
// checked against another: only its 0 is refused.
void check_answer(const Answer& previous, const Answer& answer) {
  constexpr double kDriftPpm = 1000;
  constexpr double kSlackNs = 1e6;
  if (answer.t0 == 0)
    not_a_clock(
        fmt::format("round {} answered 0, which no clock reads (an unfilled receive "
                    "buffer?)",
                    answer.round + 1));
  if (!previous.valid()) return;
  const auto advanced = static_cast<double>(static_cast<int64_t>(answer.t0 - previous.t0));
  const auto least = static_cast<double>(static_cast<int64_t>(answer.t1 - previous.t2));
  const auto most = static_cast<double>(answer.t2 - previous.t1);
  const double slack = kSlackNs + most * kDriftPpm * 1e-6;
  if (advanced < least - slack || advanced > most + slack)
    not_a_clock(
        fmt::format("round {} answered {} ns, {:+.0f} ns after round {}'s answer, while "
                    "{:.0f} to {:.0f} ns passed here (a clock advances as this host's "
                    "does, within {} ppm and {} ns)",
                    answer.round + 1, answer.t0, advanced, previous.round + 1, least, most,
                    kDriftPpm, kSlackNs));
}

}  // namespace

uint64_t skew_host_time(uint64_t realtime) {
  const Skew& s = skew();
  if (!s.set) return realtime;
  const double since_anchor =
      static_cast<double>(static_cast<int64_t>(realtime - s.anchor_ns));  // modular, then signed
  const auto drift = static_cast<int64_t>(std::llround(since_anchor * s.drift_ppm * 1e-6));
  return realtime + static_cast<uint64_t>(s.offset_ns) + static_cast<uint64_t>(drift);
}

uint64_t host_clock_ns() { return skew_host_time(realtime_ns()); }

// Note [Host clock offsets]: every device offset (Note [Clock calibration]) is against its own
// host's CLOCK_REALTIME, and hosts disagree by their synchronisation error (NTP on a LAN: 10 us
// to 1 ms). The job's ranks already share a transport (torch.distributed's process group, MPI,
// sockets), so the hosts are compared over it with the method of Note [Clock calibration]:
// rank k stamps t1, sends a ping to rank 0, rank 0 answers with its clock t0, rank k stamps t2;
// t0 was read somewhere in [t1, t2] (on the true time line), so the round trip of least t2 - t1
// bounds it best: offset = (t1 + t2) / 2 - t0, uncertainty = ceil((t2 - t1) / 2) + the host
// clock's resolution. Rank 0 serves one peer at a time, so its own answers never queue behind
// another rank's pings. Measured at profiling start and again at flush: the two lines up the
// drift (tens of ppm between quartz oscillators: 50 ppm is 50 us per second), which the merge
// interpolates per event (interpolate_host_clock_offset); its uncertainty is the larger of the
// two. Every rank measures, even ranks that share a host (they then agree within their
// uncertainties); it costs rounds x round trips per rank.
HostClockOffset measure_host_clock_offset(int rank, int world_size,
                                          const HostClockTransport& transport, size_t rounds) {
  constexpr size_t kMaxRounds = 100000;
  if (world_size < 1 || rank < 0 || rank >= world_size)
    invalid(fmt::format("rank {} of a world of {}: a rank lies in 0 to world_size - 1", rank,
                        world_size));
  if (rounds == 0 || rounds > kMaxRounds)
    invalid(fmt::format("{} rounds: take from 1 to {} (about 64 is plenty)", rounds, kMaxRounds));
  if (!transport.send || !transport.receive)
    invalid("the transport lacks send or receive: give both callbacks");
  if (rank == 0) {
    for (int peer = 1; peer < world_size; ++peer)
      for (size_t round = 0; round < rounds; ++round) {
        (void)transport.receive(peer);  // the ping
        transport.send(peer, host_clock_ns());
      }
    return HostClockOffset{0, 0, host_clock_ns()};
  }
  uint64_t best_round_trip = std::numeric_limits<uint64_t>::max();
  HostClockOffset best;
  Answer previous;
  for (size_t round = 0; round < rounds; ++round) {
    const uint64_t t1 = host_clock_ns();
    transport.send(0, t1);
    const uint64_t t0 = transport.receive(0);
    const uint64_t t2 = host_clock_ns();
    if (t2 < t1) continue;  // the host clock stepped back (NTP): this round says nothing
    const Answer answer{round, t1, t0, t2};
    check_answer(previous, answer);
    previous = answer;
    if (t2 - t1 < best_round_trip) {
      best_round_trip = t2 - t1;
      best.measured_at_ns = t1 + best_round_trip / 2;
      best.offset_ns = static_cast<int64_t>(best.measured_at_ns - t0);  // modular, exact
    }
  }
  if (best_round_trip == std::numeric_limits<uint64_t>::max())
    throw Error(ErrorCode::BackendError,
                "measure_host_clock_offset: the host clock went backwards in every round (it "
                "is being stepped, e.g. by NTP): measure again once it is steady");
  const uint64_t half = best_round_trip / 2 + (best_round_trip & 1);
  const uint64_t resolution = host_clock_resolution_ns();
  best.uncertainty_ns = half > std::numeric_limits<uint64_t>::max() - resolution
                            ? std::numeric_limits<uint64_t>::max()
                            : half + resolution;
  return best;
}

int64_t interpolate_host_clock_offset(const HostClockOffset& first, const HostClockOffset& last,
                                      uint64_t at) {
  if (last.measured_at_ns == first.measured_at_ns) return first.offset_ns;
  const auto span =
      static_cast<long double>(static_cast<int64_t>(last.measured_at_ns - first.measured_at_ns));
  const auto since = static_cast<long double>(static_cast<int64_t>(at - first.measured_at_ns));
  const long double change =
      static_cast<long double>(last.offset_ns) - static_cast<long double>(first.offset_ns);
  const long double offset = static_cast<long double>(first.offset_ns) + change * since / span;
  constexpr auto kMax = static_cast<long double>(std::numeric_limits<int64_t>::max());
  if (!(offset < kMax) || !(offset > -kMax)) return offset > 0 ? INT64_MAX : -INT64_MAX;
  return static_cast<int64_t>(std::llroundl(offset));
}

}  // namespace accgraph::timing
