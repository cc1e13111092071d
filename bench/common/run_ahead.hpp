// The back-to-back replay loop (issue 21 item 1), shared by accgraph-bench-host and
// accgraph-bench-cuda: a graph whose replay takes far longer on the device than its launch on the
// host, replayed without waiting, as training and serving loops do. Host time of the replay()
// calls alone, timed at default ProfilerOptions vs untimed, side by side in interleaved rounds
// (medians); every report must arrive (flushed after each round, outside the timing). Before the
// marker ring was sized by memory (Note [Marker budget] in spi/backend.hpp), the timed loop was
// paced by the device once the fixed ring was full. Numbers, not pass/fail.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "accgraph/accgraph.hpp"

namespace accgraph_bench {

struct RunAheadResults {
  int regions = 0;
  int replays = 0;
  double device_us = 0;     // per replay: the untimed loop's wall time to the last completion
  double untimed_us = 0;    // host time per replay() call, untimed
  double timed_us = 0;      // the same, timed at default settings
  uint64_t ring_waits = 0;  // launches of the timed loop that waited for a full ring (all rounds)
  double ring_wait_ms = 0;  // and how long, in all
  uint64_t delivered = 0;   // reports of the timed loop (all rounds)
  uint64_t expected = 0;    // replays of the timed loop (all rounds)
};

inline nlohmann::json to_json(const RunAheadResults& r) {
  return {{"regions", r.regions},       {"replays", r.replays},
          {"device_us", r.device_us},   {"untimed_us", r.untimed_us},
          {"timed_us", r.timed_us},     {"ratio", r.timed_us / r.untimed_us},
          {"ring_waits", r.ring_waits}, {"ring_wait_ms", r.ring_wait_ms},
          {"delivered", r.delivered},   {"expected", r.expected}};
}

/// `work(stream)` enqueues one region's device work (e.g. stream.delay(20us)); the graph has
/// `regions` regions of it, replayed `replays` times per round.
inline RunAheadResults bench_run_ahead(const std::string& backend,
                                       const std::function<void(accgraph::Stream&)>& work,
                                       int regions, int replays, int rounds,
                                       const std::function<void(const std::string&)>& print) {
  namespace timing = accgraph::timing;
  using Clock = std::chrono::steady_clock;
  accgraph::Stream s = accgraph::Stream::create(backend);
  timing::ProfilerOptions options;  // the defaults: what a user gets
  options.keep_reports = 0;
  timing::Profiler profiler(options);
  auto make = [&](bool timed) {
    auto graph = std::make_unique<accgraph::AcceleratorGraph>(backend);
    if (timed) profiler.attach(*graph);
    graph->capture_begin(s);
    for (int r = 0; r < regions; ++r) {
      if (timed) profiler.begin(s, fmt::format("r{}", r));
      work(s);
      if (timed) profiler.end(s);
    }
    graph->capture_end();
    return graph;
  };
  std::unique_ptr<accgraph::AcceleratorGraph> graphs[2] = {make(false), make(true)};
  std::vector<double> host_us[2], device_us;
  const int warmup = 1;
  for (int round = 0; round < rounds + warmup; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int v = (k + round) % 2;  // rotate the order
      const auto t0 = Clock::now();
      for (int i = 0; i < replays; ++i) graphs[v]->replay(s);
      const auto t1 = Clock::now();
      s.synchronize();
      const auto t2 = Clock::now();
      if (v == 1) profiler.flush();  // every report delivered, outside the timing
      if (round < warmup) continue;
      host_us[v].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / replays);
      if (v == 0)
        device_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count() / replays);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  };
  RunAheadResults r;
  r.regions = regions;
  r.replays = replays;
  r.device_us = median(device_us);
  r.untimed_us = median(host_us[0]);
  r.timed_us = median(host_us[1]);
  r.ring_waits = profiler.ring_waits();
  r.ring_wait_ms = static_cast<double>(profiler.ring_wait_time().count()) / 1e6;
  r.delivered = profiler.delivered();
  r.expected = static_cast<uint64_t>(replays) * static_cast<uint64_t>(rounds + warmup);
  print(fmt::format("{:>8} {:>8} {:>12} {:>12} {:>12} {:>8} {:>10} {:>14}", "regions", "replays",
                    "device us", "untimed us", "timed us", "x", "ring waits", "delivered"));
  print(fmt::format("{:>8} {:>8} {:>12.2f} {:>12.3f} {:>12.3f} {:>7.2f}x {:>10} {:>6}/{:<7}",
                    r.regions, r.replays, r.device_us, r.untimed_us, r.timed_us,
                    r.timed_us / r.untimed_us, r.ring_waits, r.delivered, r.expected));
  if (r.ring_waits != 0)
    print(fmt::format("  the timed loop waited {} times, {:.3f} ms in all, for a full marker ring",
                      r.ring_waits, r.ring_wait_ms));
  return r;
}

}  // namespace accgraph_bench
