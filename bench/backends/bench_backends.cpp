// accgraph-bench-backends: one workload, through the portable API only, on several backends
// side by side in one process (issue 22: cuda and vulkan on one GPU). Every figure is a ratio or
// a difference against a baseline measured in the same run on the same backend. Numbers, not
// pass/fail.
//
//   accgraph-bench-backends [BACKEND...]     (default: cuda vulkan; unavailable ones are skipped)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../common/timing_v2.hpp"
#include "accgraph/accgraph.hpp"

using namespace accgraph;
using accgraph_bench::BenchClock;
using accgraph_bench::v2_median;
using accgraph_bench::v2_ns_since;

namespace {

struct Row {
  std::string measure, value, baseline, ratio;
};

// A graph of `ops` small fills, with a region around each when `profiler` is given.
std::unique_ptr<AcceleratorGraph> fills_graph(Stream& s, Buffer& buffer, int ops,
                                              timing::Profiler* profiler) {
  auto graph = std::make_unique<AcceleratorGraph>(s.backend_name());
  if (profiler) profiler->attach(*graph);
  graph->capture_begin(s);
  for (int i = 0; i < ops; ++i) {
    std::unique_ptr<timing::Profiler::Region> region;
    if (profiler)
      region =
          std::make_unique<timing::Profiler::Region>(profiler->region(s, "op" + std::to_string(i)));
    s.fill(buffer, static_cast<uint8_t>(i));
  }
  graph->capture_end();
  return graph;
}

// Host ns per replay() call (median of batches of `batch` back-to-back replays) and wall ns per
// replay including the device (batch, then synchronize and flush).
std::pair<double, double> replay_times(Stream& s, AcceleratorGraph& graph,
                                       timing::Profiler* profiler, int batch, int rounds) {
  std::vector<double> host, wall;
  for (int round = 0; round < rounds; ++round) {
    s.synchronize();
    if (profiler) profiler->flush();
    const auto t0 = BenchClock::now();
    std::vector<double> calls;
    for (int i = 0; i < batch; ++i) {
      const auto c0 = BenchClock::now();
      graph.replay(s);
      calls.push_back(v2_ns_since(c0));
    }
    s.synchronize();
    if (profiler) profiler->flush();
    if (round >= 2) {
      wall.push_back(v2_ns_since(t0) / batch);
      host.insert(host.end(), calls.begin(), calls.end());
    }
  }
  return {v2_median(host), v2_median(wall)};
}

std::vector<Row> bench_backend(const std::string& backend) {
  std::vector<Row> rows;
  Stream s = Stream::create(backend);
  Buffer buffer = Buffer::allocate(s, 256);
  constexpr int kRing = 64;
  timing::ProfilerOptions options;
  options.ring_depth = kRing;
  options.keep_reports = 0;

  // (1) replay host time and (2) device cost per region boundary: 100 fills, untimed vs one
  // region each (101 markers), back to back within the ring.
  {
    timing::Profiler profiler(options);
    auto untimed = fills_graph(s, buffer, 100, nullptr);
    auto timed = fills_graph(s, buffer, 100, &profiler);
    std::vector<double> u_host, u_wall, t_host, t_wall;
    for (int round = 0; round < 7; ++round) {
      auto [uh, uw] = replay_times(s, *untimed, nullptr, kRing / 2, 4);
      auto [th, tw] = replay_times(s, *timed, &profiler, kRing / 2, 4);
      u_host.push_back(uh), u_wall.push_back(uw), t_host.push_back(th), t_wall.push_back(tw);
    }
    const double uh = v2_median(u_host), th = v2_median(t_host);
    const double uw = v2_median(u_wall), tw = v2_median(t_wall);
    rows.push_back({"replay() host, 100 ops, 100 regions", fmt::format("{:.2f} us", th / 1e3),
                    fmt::format("{:.2f} us untimed", uh / 1e3), fmt::format("{:.2f}x", th / uh)});
    rows.push_back({"replay wall (device), 100 ops", fmt::format("{:.2f} us", tw / 1e3),
                    fmt::format("{:.2f} us untimed", uw / 1e3), fmt::format("{:.2f}x", tw / uw)});
    rows.push_back({"device cost per region boundary", fmt::format("{:.0f} ns", (tw - uw) / 101),
                    "(timed - untimed) / 101", "-"});
  }

  // (3) collection at 1000 regions and the profiler's host cost (timing_v2's measures, with a
  // small fill as the unit of work).
  {
    std::vector<std::string> lines;
    accgraph_bench::bench_timing_v2(
        backend, "", [&](Stream& st) { st.fill(buffer, 7); }, 0,
        [&](const std::string& line) { lines.push_back(line); });
    for (const std::string& line : lines) rows.push_back({line, "", "", ""});
  }

  // (4) accuracy on spins of known length: a region around delay(d), replayed.
  if (s.backend().capabilities(s.device()).timed_delay) {
    for (auto d : {std::chrono::microseconds(20), std::chrono::microseconds(200),
                   std::chrono::microseconds(2000)}) {
      timing::Profiler profiler(options);
      std::vector<double> durations;
      profiler.add_sink([&](const timing::ReplayReport& r) {
        if (r.size() == 1 && r.region(0).measurable())
          durations.push_back(static_cast<double>(r.region(0).duration_ns()));
      });
      AcceleratorGraph graph(backend);
      profiler.attach(graph);
      graph.capture_begin(s);
      {
        auto region = profiler.region(s, "spin");
        s.delay(d);
      }
      graph.capture_end();
      for (int i = 0; i < 30; ++i) graph.replay(s);
      s.synchronize();
      profiler.flush();
      const double expected = std::chrono::duration<double, std::nano>(d).count();
      const double measured = v2_median(durations);
      rows.push_back({fmt::format("region around delay({} us), median of 30", d.count()),
                      fmt::format("{:.2f} us", measured / 1e3),
                      fmt::format("{:.0f} us asked", expected / 1e3),
                      fmt::format("{:.3f}x", measured / expected)});
    }
  } else {
    rows.push_back({"accuracy on spins", "skipped: no timed_delay", "", ""});
  }

  // (5) a 100 ms delay against the host clock through calibrated timestamps (issue 35): the
  // region's markers, put on CLOCK_REALTIME by the device's clock offset (measured before and
  // after), must lie inside the host's time around the enqueue and the synchronize, and read
  // what the host saw. A spin that runs long shows in both clocks; timestamps that are off show
  // as a device duration that disagrees with the host's.
  if (s.backend().capabilities(s.device()).timed_delay) {
    try {
      const timing::DeviceClockOffset before = timing::calibrate_clock(s);
      timing::Profiler profiler(options);
      std::vector<timing::ReplayReport> delivered;  // the options may keep no report
      profiler.add_sink([&](const timing::ReplayReport& r) { delivered.push_back(r); });
      const uint64_t host_start = timing::realtime_ns();
      {
        auto region = profiler.region(s, "spin");
        s.delay(std::chrono::milliseconds(100));
      }
      s.synchronize();
      const uint64_t host_end = timing::realtime_ns();
      profiler.flush();
      const timing::DeviceClockOffset after = timing::calibrate_clock(s);
      if (delivered.empty() || delivered.back().size() != 1 ||
          !delivered.back().region(0).measurable())
        throw Error(ErrorCode::BackendError, "the region around the delay was not reported");
      const timing::ReplayReport r = delivered.back();
      const timing::RegionTiming t = r.region(0);
      const double device_ms = static_cast<double>(t.raw_duration_ns()) / 1e6;
      const double host_ms = static_cast<double>(host_end - host_start) / 1e6;
      const int64_t start_in_host = static_cast<int64_t>(t.raw_start_ns()) - before.offset_ns -
                                    static_cast<int64_t>(host_start);
      const int64_t end_in_host =
          static_cast<int64_t>(host_end) - (static_cast<int64_t>(t.raw_end_ns()) - after.offset_ns);
      rows.push_back(
          {"delay(100 ms): device markers / host around it",
           fmt::format("{:.3f} / {:.3f} ms", device_ms, host_ms),
           fmt::format("start {:+.1f} us after the host's, end {:+.1f} us before it; "
                       "offset drift {:+d} ns (+-{} ns)",
                       static_cast<double>(start_in_host) / 1e3,
                       static_cast<double>(end_in_host) / 1e3, after.offset_ns - before.offset_ns,
                       before.uncertainty_ns + after.uncertainty_ns),
           fmt::format("{:.3f}x", device_ms / 100.0)});
    } catch (const Error& e) {
      rows.push_back({"delay(100 ms) against the host clock",
                      fmt::format("skipped: {}", e.what()).substr(0, 120), "", ""});
    }
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> backends(argv + 1, argv + argc);
  if (backends.empty()) backends = {"cuda", "vulkan"};
  int measured = 0;
  for (const std::string& name : backends) {
    std::string device;
    try {
      device = accgraph::backend(name).devices().at(0).name;
    } catch (const std::exception& e) {
      fmt::print("== {}: skipped: {}\n\n", name, e.what());
      continue;
    }
    fmt::print("== {} ({})\n", name, device);
    try {
      for (const Row& r : bench_backend(name))
        fmt::print("  {:<46} {:>14} {:>20} {:>8}\n", r.measure, r.value, r.baseline, r.ratio);
      ++measured;
    } catch (const std::exception& e) {
      fmt::print("  failed: {}\n", e.what());
    }
    fmt::print("\n");
  }
  return measured > 0 ? 0 : 1;
}
