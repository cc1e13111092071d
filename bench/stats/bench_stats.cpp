// Measures StatsAccumulator's two modes (report.hpp) on the Profiler's path, where the replays of
// one capture share one ReportLayout and add() finds their regions' series by that layout: the
// time of one StatsAccumulator::add for a report of 1000 regions, and the heap held after 10^6
// reports of 10 regions. Prints numbers, no pass/fail. Built as accgraph-bench-stats where glibc
// has mallinfo2 (bench/stats/CMakeLists.txt; ctest runs it once as `accgraph-bench-stats smoke`,
// a few rounds and 10^4 reports, label bench-smoke), or by hand without a build tree:
//   g++ -std=c++17 -O2 -Iinclude bench/stats/bench_stats.cpp timing/model/stats.cpp
//       timing/model/report.cpp core/error.cpp -lfmt -o /tmp/bench_stats && /tmp/bench_stats
//   (one command line)
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"

using namespace accgraph::timing;

namespace {

// The layout of a capture of `regions` top-level regions "layer<i>", region i on markers 2i and
// 2i+1, as the Profiler builds one per capture.
std::shared_ptr<const ReportLayout> make_layout(size_t regions) {
  std::vector<RegionInfo> infos;
  for (size_t i = 0; i < regions; ++i) {
    RegionInfo info;
    info.name = "layer" + std::to_string(i);
    info.begin_marker = static_cast<uint32_t>(2 * i);
    info.end_marker = static_cast<uint32_t>(2 * i + 1);
    infos.push_back(std::move(info));
  }
  return std::make_shared<const ReportLayout>(ReportSource{"host", 0, "cpu", "bench", 1},
                                              std::move(infos));
}

// One replay of `layout`: durations around 10 us, log-normal-ish, from a fixed seed.
ReplayReport make_report(const std::shared_ptr<const ReportLayout>& layout, uint64_t replay,
                         std::mt19937_64& rng) {
  std::vector<uint64_t> times(layout->marker_count());
  uint64_t now = 1000;
  for (size_t i = 0; i < layout->regions().size(); ++i) {
    double normal = -6;
    for (int k = 0; k < 12; ++k) normal += static_cast<double>(rng() >> 11) * 0x1p-53;
    times[2 * i] = now;
    now += static_cast<uint64_t>(std::exp(9.2 + 0.5 * normal));
    times[2 * i + 1] = now;
  }
  return ReplayReport(layout, 1, replay, std::move(times));
}

size_t heap_in_use() {  // mmapped blocks (large vectors) included
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

}  // namespace

int main(int argc, char** argv) {
  // `smoke`: a few rounds and 10^4 reports, to check that it runs (ctest), not to measure.
  const bool smoke = argc > 1 && std::strcmp(argv[1], "smoke") == 0;
  if (argc > 1 && !smoke) {
    std::fprintf(stderr, "usage: %s [smoke]\n", argv[0]);
    return 2;
  }
  const int rounds = smoke ? 3 : 25;
  const int small_reports = smoke ? 10000 : 1000000;
  std::mt19937_64 rng(1);
  // (1) ns per StatsAccumulator::add of a 1000-region report: 16 replays of one layout with
  // different durations, fed in rounds of 1000 adds, modes alternating which goes first;
  // medians over 25 rounds (3 with `smoke`). The first add of each round (not timed) finds the layout new and
  // builds its series.
  const std::shared_ptr<const ReportLayout> layout = make_layout(1000);
  std::vector<ReplayReport> reports;
  for (int i = 0; i < 16; ++i) reports.push_back(make_report(layout, i, rng));
  const StatsMode modes[] = {StatsMode::Sketch, StatsMode::Exact};
  std::vector<double> per_add[2];
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int m = (round + k) % 2;
      StatsAccumulator stats(modes[m]);
      stats.add(reports[0]);  // builds the layout's cache and the series
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) stats.add(reports[i % 16]);
      const auto ns =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
              .count();
      per_add[m].push_back(ns / 1000);
    }
  }
  for (auto& v : per_add) std::sort(v.begin(), v.end());
  const double sketch_ns = per_add[0][per_add[0].size() / 2],
               exact_ns = per_add[1][per_add[1].size() / 2];
  std::printf(
      "(1) StatsAccumulator::add, 1000-region report, layout shared by the replays"
      " (median of %d rounds of 1000 adds)\n",
      rounds);
  std::printf(
      "    sketch %.0f ns/report (%.2f ns/region), exact %.0f ns/report (%.2f ns/region),"
      " sketch/exact %.2fx\n",
      sketch_ns, sketch_ns / 1000, exact_ns, exact_ns / 1000, sketch_ns / exact_ns);

  // (2) heap held after 10^6 reports of 10 regions (64 replays of one layout, built before the
  // count starts), and the time stats() then takes.
  const std::shared_ptr<const ReportLayout> small_layout = make_layout(10);
  std::vector<ReplayReport> small;
  for (int i = 0; i < 64; ++i) small.push_back(make_report(small_layout, i, rng));
  std::printf("(2) %d reports of 10 regions, layout shared\n", small_reports);
  for (StatsMode mode : modes) {
    const size_t before = heap_in_use();
    StatsAccumulator stats(mode);
    for (int i = 0; i < small_reports; ++i) stats.add(small[i % 64]);
    const size_t held = heap_in_use() - before;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<RegionStats> out = stats.stats();
    const double stats_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    size_t buckets = 0;
    for (size_t b : stats.sketch_buckets()) buckets += b;
    std::printf(
        "    %-6s heap %10zu bytes (%.1f MiB), %zu sketch buckets, stats() %.2f ms,"
        " p50 of region 0 %.1f ns\n",
        mode == StatsMode::Sketch ? "sketch" : "exact", held, static_cast<double>(held) / (1 << 20),
        buckets, stats_ms, out[0].p50_ns);
  }
  return 0;
}
