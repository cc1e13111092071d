// Measures StatsAccumulator's two modes (report.hpp): the time of one StatsAccess::add (the
// Profiler's cached path) for a report of 1000 regions, and the heap held after 10^6 reports of
// 10 regions. Prints numbers, no pass/fail. Not in CMake (it compiles timing/stats.cpp in, to
// reach the internal StatsAccess::add); build and run by hand, glibc only (mallinfo2):
//   g++ -std=c++17 -O2 -Iinclude -I. bench/stats/bench_stats.cpp timing/stats.cpp \
//       -o /tmp/bench_stats && /tmp/bench_stats
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "accgraph/report.hpp"
#include "timing/stats_internal.hpp"

using namespace accgraph::timing;

namespace {

// Durations around 10 us, log-normal-ish, from a fixed seed.
ReplayReport make_report(size_t regions, std::mt19937_64& rng) {
  ReplayReport report;
  for (size_t i = 0; i < regions; ++i) {
    RegionTiming region;
    region.path = "layer" + std::to_string(i);
    region.name = region.path;
    double normal = -6;
    for (int k = 0; k < 12; ++k) normal += static_cast<double>(rng() >> 11) * 0x1p-53;
    region.duration_ns = static_cast<uint64_t>(std::exp(9.2 + 0.5 * normal));
    report.regions.push_back(region);
  }
  return report;
}

size_t heap_in_use() {  // mmapped blocks (large vectors) included
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

}  // namespace

int main() {
  std::mt19937_64 rng(1);
  // (1) ns per StatsAccess::add of a 1000-region report: 16 reports with different durations,
  // fed in rounds of 1000 adds, modes alternating which goes first; medians over 25 rounds.
  std::vector<ReplayReport> reports;
  for (int i = 0; i < 16; ++i) reports.push_back(make_report(1000, rng));
  const StatsMode modes[] = {StatsMode::Sketch, StatsMode::Exact};
  std::vector<double> per_add[2];
  for (int round = 0; round < 25; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int m = (round + k) % 2;
      StatsAccumulator stats(modes[m]);
      SeriesCache cache;
      StatsAccess::add(stats, cache, reports[0]);  // builds the cache and the series
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) StatsAccess::add(stats, cache, reports[i % 16]);
      const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() -
                                                               start).count();
      per_add[m].push_back(ns / 1000);
    }
  }
  for (auto& v : per_add) std::sort(v.begin(), v.end());
  const double sketch_ns = per_add[0][12], exact_ns = per_add[1][12];
  std::printf("(1) StatsAccess::add, 1000-region report (median of 25 rounds of 1000 adds)\n");
  std::printf("    sketch %.0f ns/report (%.2f ns/region), exact %.0f ns/report (%.2f ns/region),"
              " sketch/exact %.2fx\n",
              sketch_ns, sketch_ns / 1000, exact_ns, exact_ns / 1000, sketch_ns / exact_ns);

  // (2) heap held after 10^6 reports of 10 regions, and the time stats() then takes.
  std::vector<ReplayReport> small;
  for (int i = 0; i < 64; ++i) small.push_back(make_report(10, rng));
  std::printf("(2) 10^6 reports of 10 regions\n");
  for (StatsMode mode : modes) {
    const size_t before = heap_in_use();
    StatsAccumulator stats(mode);
    SeriesCache cache;
    for (int i = 0; i < 1000000; ++i) StatsAccess::add(stats, cache, small[i % 64]);
    const size_t held = heap_in_use() - before;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<RegionStats> out = stats.stats();
    const double stats_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    size_t buckets = 0;
    for (size_t b : StatsAccess::sketch_buckets(stats)) buckets += b;
    std::printf("    %-6s heap %10zu bytes (%.1f MiB), %zu sketch buckets, stats() %.2f ms,"
                " p50 of region 0 %.1f ns\n",
                mode == StatsMode::Sketch ? "sketch" : "exact", held,
                static_cast<double>(held) / (1 << 20), buckets, stats_ms, out[0].p50_ns);
  }
  return 0;
}
