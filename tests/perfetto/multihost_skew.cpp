// Ranks "on several hosts" without a second machine: separate processes on loopback sockets,
// each reading a host clock skewed by its own offset and drift (ACCGRAPH_TEST_HOST_CLOCK_SKEW,
// Note [Host clock skew hook]); the merged trace must recover every skew within the reported
// uncertainty and line up a barrier-aligned region within it. The measurement
// (measure_host_clock_offset, through its transport callback) and the merge are the real ones;
// only the transport is a test's (the torch.distributed/Gloo path is
// tests/python/test_multihost_skew_torch.py, run where torch is installed).
//
// Without arguments (ctest): the doctest cases launch the ranks as child processes of this
// program with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus
// ACCGRAPH_SKEW_TEST_OUT, and check their traces. With ACCGRAPH_SKEW_TEST_OUT set: one rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "accgraph/accgraph.hpp"
#include "accgraph/perfetto.hpp"
#include "perfetto_trace.pb.h"

namespace pb = accgraph::pftrace;
using namespace accgraph::timing;

namespace {

constexpr uint64_t kGo = 0x60;
constexpr uint64_t kAck = 0xAC;
constexpr int kRounds = 4;  // barrier-aligned regions per rank
// Between the first host offset measurement and the rounds, and between them and the second:
// the drift accrues meanwhile (50 ppm: 40 us), so the rounds need it interpolated.
constexpr auto kDriftTime = std::chrono::milliseconds(800);
constexpr int kSocketTimeoutSeconds = 30;  // nothing waits forever

[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what + (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) throw std::runtime_error(std::string(name) + " is not set");
  return v;
}

// Loopback links of one rank: rank 0 to every other rank, each other rank to rank 0 (the
// star measure_host_clock_offset and the barrier need), bounded by socket timeouts.
class Links {
 public:
  Links(int rank, int world, int port) : fds_(static_cast<size_t>(world), -1) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (rank == 0) {
      const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
      const int one = 1;
      ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
          ::listen(listener, world) != 0)
        die("rank 0: cannot listen on port " + std::to_string(port));
      bound(listener);
      for (int accepted = 1; accepted < world; ++accepted) {
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) die("rank 0: accept");
        bound(fd);
        uint64_t peer = 0;
        read_all(fd, &peer);
        if (peer < 1 || peer >= static_cast<uint64_t>(world) || fds_[peer] != -1)
          die("rank 0: a peer says it is rank " + std::to_string(peer));
        fds_[peer] = fd;
      }
      ::close(listener);
    } else {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      bound(fd);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        if (std::chrono::steady_clock::now() > deadline) die("cannot connect to rank 0");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      fds_[0] = fd;
      const uint64_t me = static_cast<uint64_t>(rank);
      write_all(fd, me);
    }
  }
  ~Links() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  void send(int peer, uint64_t value) { write_all(fds_.at(static_cast<size_t>(peer)), value); }
  uint64_t receive(int peer) {
    uint64_t v = 0;
    read_all(fds_.at(static_cast<size_t>(peer)), &v);
    return v;
  }

 private:
  static void bound(int fd) {
    if (fd < 0) die("socket");
    timeval t{kSocketTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  static void write_all(int fd, uint64_t v) {
    if (::send(fd, &v, sizeof v, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof v)) die("send");
  }
  static void read_all(int fd, uint64_t* v) {
    auto* p = reinterpret_cast<char*>(v);
    size_t got = 0;
    while (got < sizeof *v) {
      const ssize_t n = ::recv(fd, p + got, sizeof *v - got, 0);
      if (n <= 0) die("recv (the peer is gone or timed out)");
      got += static_cast<size_t>(n);
    }
  }
  std::vector<int> fds_;
};

// One rank: measure the host offset, wait, calibrate its (host backend) device clock against its
// skewed host clock, run kRounds barrier-aligned regions, wait, measure again, write its trace.
// Rank 0 also writes, per round and rank, the bracket [go sent, ack received] on its own clock:
// the rank's region began inside it.
//
// The device clock is calibrated just before the rounds because the hook skews CLOCK_REALTIME
// only, not the host backend's steady_clock: a drifting skew then moves the device offset too
// (by the drift rate times the time since calibration), which a real host would not show (its
// CLOCK_MONOTONIC and CLOCK_REALTIME run off one oscillator). Calibrated just before, that
// artefact stays under a nanosecond per 20 us of rounds.
int run_rank() {
  const int rank = std::stoi(env("RANK"));
  const int world = std::stoi(env("WORLD_SIZE"));
  const std::string out = env("ACCGRAPH_SKEW_TEST_OUT");
  Links links(rank, world, std::stoi(env("MASTER_PORT")));
  HostClockTransport transport{[&](int peer, uint64_t v) { links.send(peer, v); },
                               [&](int peer) { return links.receive(peer); }};

  PerfettoOptions options;
  options.rank = rank;
  options.world_size = world;
  options.host = "simulated-host-" + std::to_string(rank);
  options.host_clock_offsets.push_back(measure_host_clock_offset(rank, world, transport, 100));
  std::this_thread::sleep_for(kDriftTime);
  accgraph::Stream stream = accgraph::Stream::create("host");
  options.clocks = {calibrate_clock(stream, 200)};

  ProfilerOptions profiler_options;
  profiler_options.keep_reports = 100;
  Profiler profiler(profiler_options);
  std::vector<uint8_t> scratch(4096);
  const auto aligned_region = [&] {
    {
      auto region = profiler.region(stream, "aligned");
      stream.fill(scratch.data(), 1, scratch.size());
    }
    stream.synchronize();
  };
  std::ostringstream brackets;
  for (int round = 0; round < kRounds; ++round) {
    if (rank != 0) {
      if (links.receive(0) != kGo) throw std::runtime_error("expected go");
      aligned_region();
      links.send(0, kAck);
      continue;
    }
    for (int k = 0; k < world; ++k) {
      const uint64_t go = host_clock_ns();
      if (k == 0) {
        aligned_region();
      } else {
        links.send(k, kGo);
        if (links.receive(k) != kAck) throw std::runtime_error("expected ack");
      }
      brackets << round << ' ' << k << ' ' << go << ' ' << host_clock_ns() << '\n';
    }
  }
  profiler.flush();
  std::this_thread::sleep_for(kDriftTime);
  options.host_clock_offsets.push_back(measure_host_clock_offset(rank, world, transport, 100));

  std::ofstream trace(out + "/rank" + std::to_string(rank) + ".pftrace", std::ios::binary);
  write_perfetto_trace(trace, profiler.reports(), options);
  if (rank == 0) std::ofstream(out + "/brackets.txt") << brackets.str();
  return trace ? 0 : 1;
}

// A skew as ACCGRAPH_TEST_HOST_CLOCK_SKEW gives it.
struct Skew {
  int64_t offset_ns;
  double drift_ppm;
  // The skew at true time t of a host whose skew is anchored at `anchor`.
  double at(double t, uint64_t anchor) const {
    return static_cast<double>(offset_ns) + drift_ppm * 1e-6 * (t - static_cast<double>(anchor));
  }
};

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Launches one process per skew (rank = index) and waits for them, at most 60 s.
void launch(const std::vector<Skew>& skews, uint64_t anchor, const std::string& out) {
  const int port = free_port();
  std::vector<pid_t> children;
  for (size_t rank = 0; rank < skews.size(); ++rank) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(skews.size()).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("ACCGRAPH_SKEW_TEST_OUT", out.c_str(), 1);
      const std::string skew = std::to_string(skews[rank].offset_ns) + "," +
                               std::to_string(skews[rank].drift_ppm) + "," + std::to_string(anchor);
      ::setenv("ACCGRAPH_TEST_HOST_CLOCK_SKEW", skew.c_str(), 1);
      ::execl("/proc/self/exe", "multihost_skew", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    children.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t rank = 0; rank < children.size(); ++rank) {
    int status = 0;
    for (;;) {
      const pid_t done = ::waitpid(children[rank], &status, WNOHANG);
      if (done == children[rank]) break;
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t child : children) ::kill(child, SIGKILL);
        FAIL("rank " << rank << " did not finish within 60 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "rank " << rank << " failed (status " << status << ")");
  }
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("ranks with skewed host clocks: offsets recovered, aligned regions line up") {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / ("accgraph_skew_" + std::to_string(getpid()));
  fs::create_directories(out);
  // Rank 0 is the reference, itself skewed; the others by hundreds of microseconds, two with a
  // drift of 50 ppm against it (40 us by the rounds, more than the uncertainty: the rounds line
  // up only with the drift interpolated between the two measurements).
  const std::vector<Skew> skews = {{100'000, 0}, {-350'000, 50}, {800'000, -50}, {250'000, 0}};
  const uint64_t anchor = realtime_ns();
  launch(skews, anchor, out.string());
  std::vector<std::string> paths;
  for (size_t rank = 0; rank < skews.size(); ++rank)
    paths.push_back((out / ("rank" + std::to_string(rank) + ".pftrace")).string());
  const std::string merged_path = (out / "merged.pftrace").string();
  const MergeSummary summary = merge_perfetto_trace_files(merged_path, paths);
  CHECK(summary.warnings.empty());
  REQUIRE(summary.ranks.size() == skews.size());

  // 1. Every skew recovered, at start and at flush: offset - (skew_k - skew_0) within the
  // reported uncertainty. t is true time ~ the measurement's local time - the rank's skew
  // (off by drift x skew, under a nanosecond).
  std::vector<uint64_t> uncertainty(skews.size());  // per rank: device + host
  for (size_t k = 0; k < skews.size(); ++k) {
    const MergedRank& r = summary.ranks[k];
    REQUIRE(r.host_clock_offsets.size() == 2);
    REQUIRE(r.clocks.size() == 1);
    uint64_t host_u = 0;
    for (const HostClockOffset& h : r.host_clock_offsets) {
      const double t = static_cast<double>(h.measured_at_ns) -
                       skews[k].at(static_cast<double>(h.measured_at_ns), anchor);
      const double expected = skews[k].at(t, anchor) - skews[0].at(t, anchor);
      const double error = static_cast<double>(h.offset_ns) - expected;
      MESSAGE("rank " << k << ": host offset " << h.offset_ns << " ns, injected "
                      << std::llround(expected) << " ns, error " << std::llround(error)
                      << " ns, uncertainty +-" << h.uncertainty_ns << " ns");
      CHECK(std::fabs(error) <= static_cast<double>(h.uncertainty_ns));
      host_u = std::max(host_u, h.uncertainty_ns);
    }
    uncertainty[k] = add_uncertainties(r.clocks[0].uncertainty_ns, host_u);
  }

  // 2. The aligned regions: rank k's region of round j began, on rank 0's clock, inside the
  // bracket [go sent, ack received] that rank 0 recorded; its merged begin must lie there
  // within rank k's alignment uncertainty. Without the host offsets it would be off by the skew
  // (hundreds of us, far outside), so this fails if the merge ignores them or gets them wrong.
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> bracket;  // (round, rank)
  {
    std::ifstream in((out / "brackets.txt").string());
    int round = 0, k = 0;
    uint64_t go = 0, ack = 0;
    while (in >> round >> k >> go >> ack) bracket[{round, k}] = {go, ack};
  }
  REQUIRE(bracket.size() == kRounds * skews.size());
  pb::Trace merged;
  REQUIRE(merged.ParseFromString(file_bytes(merged_path)));
  std::map<uint64_t, int> rank_of_track;  // every track uuid -> its rank
  std::map<uint64_t, uint64_t> parent;
  for (const pb::TracePacket& p : merged.packet()) {
    if (!p.has_track_descriptor()) continue;
    const pb::TrackDescriptor& d = p.track_descriptor();
    if (d.has_process()) rank_of_track[d.uuid()] = std::stoi(d.process().process_name().substr(5));
    if (d.has_parent_uuid()) parent[d.uuid()] = d.parent_uuid();
  }
  std::map<int, std::vector<uint64_t>> begins;  // rank -> aligned begins, in time order
  for (const pb::TracePacket& p : merged.packet()) {
    if (!p.has_track_event() || p.track_event().type() != pb::TrackEvent::TYPE_SLICE_BEGIN ||
        p.track_event().name() != "aligned")
      continue;
    uint64_t track = p.track_event().track_uuid();
    while (!rank_of_track.count(track)) track = parent.at(track);
    begins[rank_of_track[track]].push_back(p.timestamp());
  }
  double widest_bracket = 0, worst_uncorrected = 0;
  for (size_t k = 0; k < skews.size(); ++k) {
    const int rank = static_cast<int>(k);
    REQUIRE(begins[rank].size() == kRounds);
    std::sort(begins[rank].begin(), begins[rank].end());
    const std::vector<HostClockOffset>& h = summary.ranks[k].host_clock_offsets;
    for (int round = 0; round < kRounds; ++round) {
      const auto [go, ack] = bracket.at({round, rank});
      const uint64_t begin = begins[rank][static_cast<size_t>(round)];
      const auto u = static_cast<double>(uncertainty[k]);
      const double early = static_cast<double>(go) - static_cast<double>(begin);
      const double late = static_cast<double>(begin) - static_cast<double>(ack);
      CHECK_MESSAGE((early <= u && late <= u),
                    "rank " << rank << " round " << round << ": merged begin " << begin
                            << " outside [" << go << ", " << ack << "] by " << std::max(early, late)
                            << " ns, uncertainty +-" << u << " ns");
      widest_bracket = std::max(widest_bracket, static_cast<double>(ack - go));
      // How far the begin would be off with the offset measured at start only (no drift).
      const int64_t interpolated = interpolate_host_clock_offset(h[0], h[1], begin);
      worst_uncorrected = std::max(worst_uncorrected,
                                   std::fabs(static_cast<double>(interpolated - h[0].offset_ns)));
    }
  }
  MESSAGE("widest bracket " << widest_bracket << " ns; without the drift interpolated a begin "
                            << "would be off by up to " << worst_uncorrected << " ns more");
  std::error_code ignored;
  fs::remove_all(out, ignored);
}

int main(int argc, char** argv) {
  if (std::getenv("ACCGRAPH_SKEW_TEST_OUT") != nullptr) {
    try {
      return run_rank();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "multihost_skew rank %s: %s\n", std::getenv("RANK"), e.what());
      return 1;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
