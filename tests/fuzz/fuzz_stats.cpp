// Fuzzes timing::StatsAccumulator (the per-region statistics every Profiler feeds): arbitrary
// reports (any path bytes, any depth, durations up to 2^64-1) and clear() calls, checked after
// every stats() against a straightforward model: series in first-seen order with the first-seen
// depth, exact count/min/max/unmeasurable, the mean within rounding, p50/p95 by nearest rank:
// equal in StatsMode::Exact, within the stated 1/128 relative error (report.hpp) and inside
// [min, max] in StatsMode::Sketch, whose buckets stay within kSketchMaxBuckets.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "accgraph/report.hpp"
#include "timing/stats_internal.hpp"

namespace {

using accgraph::timing::RegionStats;
using accgraph::timing::RegionTiming;
using accgraph::timing::ReplayReport;
using accgraph::timing::StatsAccess;
using accgraph::timing::StatsAccumulator;
using accgraph::timing::StatsMode;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value = (value << 8) | byte();
    return value;
  }
  std::string text(size_t length) {
    std::string out;
    for (size_t i = 0; i < length && !empty(); ++i) out.push_back(static_cast<char>(byte()));
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct ModelSeries {
  std::string path;
  int depth = 0;
  std::vector<uint64_t> samples;
  uint64_t unmeasurable = 0;
};

struct Model {
  std::vector<ModelSeries> series;
  std::unordered_map<std::string, size_t> index;
  void add(const ReplayReport& report) {
    for (const RegionTiming& region : report.regions) {
      auto [it, fresh] = index.emplace(region.path, series.size());
      if (fresh) series.push_back({region.path, region.depth, {}});
      if (region.measurable)
        series[it->second].samples.push_back(region.duration_ns);
      else
        ++series[it->second].unmeasurable;
    }
  }
  void clear() {
    series.clear();
    index.clear();
  }
};

[[noreturn]] void mismatch(const char* what, size_t series, double got, double want) {
  std::fprintf(stderr, "fuzz_stats: series %zu: %s is %.17g, expected %.17g\n", series, what, got,
               want);
  std::abort();
}

// The smallest sample such that at least `percent` % of the samples are <= it, in integers.
uint64_t nearest_rank(const std::vector<uint64_t>& sorted, uint64_t percent) {
  uint64_t n = sorted.size();
  uint64_t rank = (percent * n + 99) / 100;
  rank = std::clamp<uint64_t>(rank, 1, n);
  return sorted[rank - 1];
}

void check(const StatsAccumulator& stats, const Model& model) {
  const bool exact_mode = stats.mode() == StatsMode::Exact;
  std::vector<RegionStats> got = stats.stats();
  if (got.size() != model.series.size())
    mismatch("the number of series", 0, static_cast<double>(got.size()),
             static_cast<double>(model.series.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    const RegionStats& g = got[i];
    const ModelSeries& m = model.series[i];
    if (g.path != m.path) {
      std::fprintf(stderr, "fuzz_stats: series %zu has path of %zu bytes, expected %zu bytes\n", i,
                   g.path.size(), m.path.size());
      std::abort();
    }
    if (g.depth != m.depth) mismatch("depth (the first-seen one)", i, g.depth, m.depth);
    if (g.count != m.samples.size())
      mismatch("count", i, static_cast<double>(g.count), static_cast<double>(m.samples.size()));
    if (g.unmeasurable != m.unmeasurable)
      mismatch("unmeasurable", i, static_cast<double>(g.unmeasurable),
               static_cast<double>(m.unmeasurable));
    if (m.samples.empty()) {
      if (g.min_ns != 0 || g.mean_ns != 0 || g.p50_ns != 0 || g.p95_ns != 0 || g.max_ns != 0)
        mismatch("a field of a series without samples", i, g.max_ns, 0);
      continue;
    }
    std::vector<uint64_t> sorted = m.samples;
    std::sort(sorted.begin(), sorted.end());
    auto exact = [](uint64_t v) { return static_cast<double>(v); };
    if (g.min_ns != exact(sorted.front())) mismatch("min", i, g.min_ns, exact(sorted.front()));
    if (g.max_ns != exact(sorted.back())) mismatch("max", i, g.max_ns, exact(sorted.back()));
    for (uint64_t percent : {50, 95}) {
      const double want = exact(nearest_rank(sorted, percent));
      const double value = percent == 50 ? g.p50_ns : g.p95_ns;
      const char* what = percent == 50 ? "p50" : "p95";
      if (exact_mode ? value != want : std::fabs(value - want) > want / 128)
        mismatch(what, i, value, want);
      if (value < g.min_ns || value > g.max_ns) mismatch(what, i, value, want);
    }
    long double sum = 0;
    for (uint64_t v : sorted) sum += static_cast<long double>(v);
    double mean = static_cast<double>(sum / static_cast<long double>(sorted.size()));
    // Summing n doubles loses at most about n ulps; 1e-9 relative is far above that for the
    // sizes a fuzz input can produce, and far below any real error (a lost or doubled sample).
    if (std::fabs(g.mean_ns - mean) > 1e-9 * mean + 1e-9) mismatch("mean", i, g.mean_ns, mean);
    if (g.mean_ns < g.min_ns * (1 - 1e-12) || g.mean_ns > g.max_ns * (1 + 1e-12))
      mismatch("mean (outside [min, max])", i, g.mean_ns, mean);
  }
  for (size_t buckets : StatsAccess::sketch_buckets(stats))
    if (buckets > (exact_mode ? 0 : accgraph::timing::kSketchMaxBuckets))
      mismatch("sketch buckets", 0, static_cast<double>(buckets),
               static_cast<double>(accgraph::timing::kSketchMaxBuckets));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  StatsAccumulator sketch;
  StatsAccumulator exact(StatsMode::Exact);
  Model model;
  // A few recurring paths, so that series collect several samples, plus arbitrary ones.
  const std::string common[] = {"a", "a/b", "", "layer0/copy"};
  while (!in.empty()) {
    uint8_t op = in.byte();
    if (op % 8 == 6) {
      sketch.clear();
      exact.clear();
      model.clear();
      continue;
    }
    if (op % 8 == 7) {
      check(sketch, model);
      check(exact, model);
      continue;
    }
    ReplayReport report;
    size_t regions = in.byte() % 8;
    for (size_t r = 0; r < regions; ++r) {
      RegionTiming region;
      uint8_t shape = in.byte();
      region.path = shape < 192 ? common[shape % 4] : in.text(shape % 16);
      region.name = region.path;
      region.depth = static_cast<int8_t>(in.byte());
      const uint8_t kind = in.byte();
      if (kind & 1) {
        region.duration_ns = in.u64();
      } else if (kind & 2) {  // any magnitude, so that sketch buckets of every octave are hit
        const uint64_t bits = in.u64();
        region.duration_ns = bits >> (in.byte() % 64);
      } else {
        region.duration_ns = in.byte();
      }
      region.measurable = kind < 240;  // 1 in 16 unmeasurable (duration 0, as the profiler sets)
      if (!region.measurable) region.duration_ns = 0;
      region.end_ns = region.start_ns + region.duration_ns;
      report.regions.push_back(region);
    }
    sketch.add(report);
    exact.add(report);
    model.add(report);
  }
  check(sketch, model);
  check(exact, model);
  return 0;
}
