// Unit tests of accgraph/host_clock.hpp: measure_host_clock_offset over an in-process transport
// (threads and queues: one host, so every offset is 0 within its uncertainty), its argument
// errors, and the test-only skew hook (Note [Host clock skew hook]), set before its first read.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "accgraph/clock.hpp"
#include "accgraph/host_clock.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "check_error.hpp"

using namespace accgraph::timing;
using accgraph::ErrorCode;

namespace {

// Ranks as threads: mailbox[to][from] holds the values `from` sent to `to`, in order.
class Mailboxes {
 public:
  explicit Mailboxes(int world)
      : boxes_(static_cast<size_t>(world), std::vector<std::deque<uint64_t>>(world)) {}
  HostClockTransport transport(int me) {
    return {[this, me](int peer, uint64_t v) {
              std::lock_guard<std::mutex> lock(mutex_);
              boxes_[static_cast<size_t>(peer)][static_cast<size_t>(me)].push_back(v);
              ready_.notify_all();
            },
            [this, me](int peer) {
              std::unique_lock<std::mutex> lock(mutex_);
              auto& box = boxes_[static_cast<size_t>(me)][static_cast<size_t>(peer)];
              if (!ready_.wait_for(lock, std::chrono::seconds(30), [&] { return !box.empty(); }))
                throw std::runtime_error("nothing received within 30 s");
              const uint64_t v = box.front();
              box.pop_front();
              return v;
            }};
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<std::vector<std::deque<uint64_t>>> boxes_;
};

}  // namespace

// First: the skew hook is read once per process, at the first host clock read.
TEST_CASE("ACCGRAPH_TEST_HOST_CLOCK_SKEW skews host_clock_ns and calibrate_clock's host reads") {
  const uint64_t anchor = realtime_ns();
  ::setenv("ACCGRAPH_TEST_HOST_CLOCK_SKEW", ("5000000,100," + std::to_string(anchor)).c_str(), 1);
  // 5 ms ahead, and 100 ppm fast: 100 us more one second after the anchor.
  CHECK(skew_host_time(anchor) == anchor + 5'000'000);
  CHECK(skew_host_time(anchor + 1'000'000'000) == anchor + 1'000'000'000 + 5'000'000 + 100'000);
  const int64_t ahead = static_cast<int64_t>(host_clock_ns() - realtime_ns());
  CHECK(ahead > 4'000'000);
  CHECK(ahead < 6'000'000);
  // The host backend's device clock (steady_clock) against the skewed host clock: its offset
  // moves by the 5 ms against the unskewed one.
  const DeviceClockOffset skewed = calibrate_clock("host", 0, 50);
  std::vector<ClockSample> plain(50);
  accgraph::sample_steady_clock(plain.data(), plain.size());
  const DeviceClockOffset unskewed = estimate_clock_offset(plain, 1);
  const int64_t moved = unskewed.offset_ns - skewed.offset_ns;
  CHECK(moved > 4'000'000);
  CHECK(moved < 6'000'000);
}

TEST_CASE("measure_host_clock_offset: ranks on one host measure 0 within the uncertainty") {
  constexpr int kWorld = 3;
  Mailboxes mail(kWorld);
  std::vector<HostClockOffset> result(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      result[static_cast<size_t>(r)] = measure_host_clock_offset(r, kWorld, mail.transport(r), 32);
    });
  for (std::thread& t : ranks) t.join();
  CHECK(result[0].offset_ns == 0);
  CHECK(result[0].uncertainty_ns == 0);
  for (int r = 1; r < kWorld; ++r) {
    const HostClockOffset& h = result[static_cast<size_t>(r)];
    CHECK(h.uncertainty_ns >= 1);
    CHECK_MESSAGE(
        static_cast<uint64_t>(h.offset_ns < 0 ? -h.offset_ns : h.offset_ns) <= h.uncertainty_ns,
        "rank " << r << ": " << h.offset_ns << " +- " << h.uncertainty_ns);
    CHECK(h.measured_at_ns > 0);
  }
}

TEST_CASE("measure_host_clock_offset: bad arguments are errors, a transport's error propagates") {
  HostClockTransport none;
  CHECK_ACCGRAPH_ERROR(measure_host_clock_offset(0, 2, none), ErrorCode::InvalidArgument,
                       "measure_host_clock_offset: the transport lacks send or receive");
  HostClockTransport dead{[](int, uint64_t) { throw std::runtime_error("link down"); },
                          [](int) -> uint64_t { return 0; }};
  CHECK_ACCGRAPH_ERROR(measure_host_clock_offset(2, 2, dead), ErrorCode::InvalidArgument,
                       "rank 2 of a world of 2: a rank lies in 0 to world_size - 1");
  CHECK_ACCGRAPH_ERROR(measure_host_clock_offset(1, 2, dead, 0), ErrorCode::InvalidArgument,
                       "0 rounds: take from 1 to 100000");
  CHECK_THROWS_WITH_AS(measure_host_clock_offset(1, 2, dead), "link down", std::runtime_error);
}

// Audit K10, K11: answers that cannot be rank 0's clock are refused, saying why, instead of an
// offset of decades within nanoseconds.
TEST_CASE("measure_host_clock_offset: a peer answering 0 or garbage is refused") {
  HostClockTransport zero{[](int, uint64_t) {}, [](int) -> uint64_t { return 0; }};
  CHECK_ACCGRAPH_ERROR(measure_host_clock_offset(1, 2, zero), ErrorCode::BackendError,
                       "rank 0's answers are not its clock: round 1 answered 0, which no clock "
                       "reads (an unfilled receive buffer?)");
  uint64_t state = 0x9e3779b97f4a7c15u;
  HostClockTransport garbage{[](int, uint64_t) {}, [&](int) {
                               state = state * 6364136223846793005u + 1442695040888963407u;
                               return state | 1;
                             }};
  CHECK_ACCGRAPH_ERROR(measure_host_clock_offset(1, 2, garbage), ErrorCode::BackendError,
                       "rank 0's answers are not its clock: round 2 answered");
}

TEST_CASE("steady_clock_ns reads steady_clock's nanoseconds (the clock of SteadyClockMarkers)") {
  // Bracketed by steady_clock::now(): the same clock and unit, whichever way it is read.
  for (int i = 0; i < 1000; ++i) {
    const auto ns = [](std::chrono::steady_clock::time_point t) {
      return static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
    };
    const uint64_t before = ns(std::chrono::steady_clock::now());
    const uint64_t read = accgraph::steady_clock_ns();
    const uint64_t after = ns(std::chrono::steady_clock::now());
    REQUIRE(before <= read);
    REQUIRE(read <= after);
  }
}
