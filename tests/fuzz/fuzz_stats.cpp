// Fuzzes timing::StatsAccumulator (the per-region statistics every Profiler feeds): arbitrary
// reports and clear() calls, checked after every stats() against a straightforward model:
// series in first-seen order with the first-seen depth, exact count/min/max/unmeasurable, the
// mean within rounding, p50/p95 by nearest rank: equal in StatsMode::Exact, within the stated
// 1/128 relative error (report.hpp) and inside [min, max] in StatsMode::Sketch, whose buckets
// (sketch_buckets()) stay within kSketchMaxBuckets. Reports come as the profiler makes them,
// several replays sharing one layout (ReplayReport(layout, ...), so add()'s per-layout cache is
// hit, and layouts die and new ones may reuse their address), and as fresh layouts: from
// RegionSample (from_samples) and built by hand with markers shared between regions. Any path
// bytes, any depth, durations up to 2^64-2 (a marker time of UINT64_MAX makes a region
// unmeasurable), end < start (duration 0). The model takes each region's duration from the
// layout's marker indices and the report's times, not from RegionTiming, and checks that
// RegionTiming agrees; likewise each region's self time (its duration minus the union of its
// direct children's intervals clipped to it; measurable when it and they are), whose
// statistics (RegionStats::self_*) get the same checks. Two more accumulators fold on their own
// threads (StatsFold::Background) and must agree with the inline ones exactly, sketch windows
// included.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "stats_internal.hpp"

namespace {

using accgraph::timing::RegionInfo;
using accgraph::timing::RegionSample;
using accgraph::timing::RegionStats;
using accgraph::timing::RegionTiming;
using accgraph::timing::ReplayReport;
using accgraph::timing::ReportLayout;
using accgraph::timing::ReportSource;
using accgraph::timing::StatsAccumulator;
using accgraph::timing::StatsFold;
using accgraph::timing::StatsMode;

constexpr uint64_t kUnmeasurable = UINT64_MAX;  // TimestampMarkers::kUnmeasurable

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
  std::vector<uint64_t> self_samples;
};

// Region `i`'s self time, from the markers alone (sorting every time, unlike the library), or
// false when it is not measurable.
bool model_self(const ReplayReport& report, size_t i, uint64_t& self) {
  const std::vector<uint64_t>& times = report.marker_times();
  const std::vector<RegionInfo>& regions = report.layout().regions();
  auto interval = [&](size_t k, std::pair<uint64_t, uint64_t>& out) {
    const uint64_t start = times.at(regions[k].begin_marker), end = times.at(regions[k].end_marker);
    out = {start, std::max(start, end)};
    return start != kUnmeasurable && end != kUnmeasurable;
  };
  std::pair<uint64_t, uint64_t> parent;
  if (!interval(i, parent)) return false;
  std::vector<std::pair<uint64_t, uint64_t>> children;
  for (size_t k = i + 1; k < regions.size(); ++k) {
    if (regions[k].parent != static_cast<int>(i)) continue;
    std::pair<uint64_t, uint64_t> child;
    if (!interval(k, child)) return false;
    children.emplace_back(std::clamp(child.first, parent.first, parent.second),
                          std::clamp(child.second, parent.first, parent.second));
  }
  std::sort(children.begin(), children.end());
  uint64_t covered = 0, reach = parent.first;  // the union so far ends at `reach`
  for (const auto& [start, end] : children) {
    const uint64_t from = std::max(start, reach);
    if (end > from) {
      covered += end - from;
      reach = end;
    }
  }
  self = parent.second - parent.first - covered;
  return true;
}

struct Model {
  std::vector<ModelSeries> series;
  std::unordered_map<std::string, size_t> index;
  std::unordered_map<const ReportLayout*, uint64_t> layout_graph;
  // Durations from the layout's markers and the report's times; RegionTiming must agree.
  void add(const ReplayReport& report) {
    const std::vector<uint64_t>& times = report.marker_times();
    const std::vector<RegionInfo>& regions = report.layout().regions();
    for (size_t i = 0; i < regions.size(); ++i) {
      const RegionInfo& info = regions[i];
      const uint64_t start = times.at(info.begin_marker), end = times.at(info.end_marker);
      const bool measurable = start != kUnmeasurable && end != kUnmeasurable;
      const uint64_t duration = measurable && end >= start ? end - start : 0;
      const RegionTiming timing = report.region(i);
      uint64_t self = 0;
      const bool self_measurable = model_self(report, i, self);
      if (timing.self_measurable() != self_measurable ||
          timing.self_ns() != (self_measurable ? self : 0)) {
        std::fprintf(stderr,
                     "fuzz_stats: region %zu: self time %llu (measurable %d), expected %llu "
                     "(measurable %d)\n",
                     i, static_cast<unsigned long long>(timing.self_ns()),
                     timing.self_measurable() ? 1 : 0, static_cast<unsigned long long>(self),
                     self_measurable ? 1 : 0);
        std::abort();
      }
      if (timing.measurable() != measurable || timing.duration_ns() != duration ||
          (measurable && (timing.start_ns() != start || timing.end_ns() != end)) ||
          &timing.info() != &info) {
        std::fprintf(stderr, "fuzz_stats: region %zu: RegionTiming disagrees with its markers\n",
                     i);
        std::abort();
      }
      // One series per context and path: each graph's apart from the others and from eager
      // regions (graph id 0), as the accumulator keeps them (Note [Stats contexts]); a layout
      // belongs to the graph of its first report (the accumulator plans by layout).
      const uint64_t graph =
          layout_graph.emplace(&report.layout(), report.graph_id()).first->second;
      auto [it, fresh] = index.emplace(std::to_string(graph) + '\n' + info.path, series.size());
      if (fresh) series.push_back({info.path, info.depth, {}, 0, {}});
      if (measurable)
        series[it->second].samples.push_back(duration);
      else
        ++series[it->second].unmeasurable;
      if (self_measurable) series[it->second].self_samples.push_back(self);
    }
  }
  void clear() {
    series.clear();
    index.clear();
    layout_graph.clear();
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

// min, max, p50, p95 and mean of series `i` against `samples` ("self " for its self times).
void check_samples(const std::string& prefix, size_t i, bool exact_mode,
                   const std::vector<uint64_t>& samples, double min_ns, double mean_ns,
                   double p50_ns, double p95_ns, double max_ns) {
  auto fail = [&](const char* what, double got, double want) {
    mismatch((prefix + what).c_str(), i, got, want);
  };
  if (samples.empty()) {
    if (min_ns != 0 || mean_ns != 0 || p50_ns != 0 || p95_ns != 0 || max_ns != 0)
      fail("a field of a series without samples", max_ns, 0);
    return;
  }
  std::vector<uint64_t> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  auto exact = [](uint64_t v) { return static_cast<double>(v); };
  if (min_ns != exact(sorted.front())) fail("min", min_ns, exact(sorted.front()));
  if (max_ns != exact(sorted.back())) fail("max", max_ns, exact(sorted.back()));
  for (uint64_t percent : {50, 95}) {
    const double want = exact(nearest_rank(sorted, percent));
    const double value = percent == 50 ? p50_ns : p95_ns;
    const char* what = percent == 50 ? "p50" : "p95";
    if (exact_mode ? value != want : std::fabs(value - want) > want / 128) fail(what, value, want);
    if (value < min_ns || value > max_ns) fail(what, value, want);
  }
  long double sum = 0;
  for (uint64_t v : sorted) sum += static_cast<long double>(v);
  double mean = static_cast<double>(sum / static_cast<long double>(sorted.size()));
  // Summing n doubles loses at most about n ulps; 1e-9 relative is far above that for the
  // sizes a fuzz input can produce, and far below any real error (a lost or doubled sample).
  if (std::fabs(mean_ns - mean) > 1e-9 * mean + 1e-9) fail("mean", mean_ns, mean);
  if (mean_ns < min_ns * (1 - 1e-12) || mean_ns > max_ns * (1 + 1e-12))
    fail("mean (outside [min, max])", mean_ns, mean);
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
    check_samples("", i, exact_mode, m.samples, g.min_ns, g.mean_ns, g.p50_ns, g.p95_ns, g.max_ns);
    if (g.self_count != m.self_samples.size())
      mismatch("self_count", i, static_cast<double>(g.self_count),
               static_cast<double>(m.self_samples.size()));
    check_samples("self ", i, exact_mode, m.self_samples, g.self_min_ns, g.self_mean_ns,
                  g.self_p50_ns, g.self_p95_ns, g.self_max_ns);
  }
  for (size_t buckets : stats.sketch_buckets())
    if (buckets > (exact_mode ? 0 : accgraph::timing::kSketchMaxBuckets))
      mismatch("sketch buckets", 0, static_cast<double>(buckets),
               static_cast<double>(accgraph::timing::kSketchMaxBuckets));
}

// StatsFold::Background against StatsFold::Inline fed the same reports: every field and the
// sketch windows equal (Note [Stats thread]: the same samples folded in the same order).
void check_same(const StatsAccumulator& background, const StatsAccumulator& inline_acc) {
  const std::vector<RegionStats> got = background.stats(), want = inline_acc.stats();
  if (got.size() != want.size())
    mismatch("the number of series (background)", 0, static_cast<double>(got.size()),
             static_cast<double>(want.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    const RegionStats& g = got[i];
    const RegionStats& w = want[i];
    if (g.path != w.path || g.depth != w.depth || g.count != w.count ||
        g.unmeasurable != w.unmeasurable || g.self_count != w.self_count)
      mismatch("path, depth or a count (background)", i, static_cast<double>(g.count),
               static_cast<double>(w.count));
    const double got_values[] = {g.min_ns,      g.mean_ns,     g.p50_ns,       g.p95_ns,
                                 g.max_ns,      g.self_min_ns, g.self_mean_ns, g.self_p50_ns,
                                 g.self_p95_ns, g.self_max_ns};
    const double want_values[] = {w.min_ns,      w.mean_ns,     w.p50_ns,       w.p95_ns,
                                  w.max_ns,      w.self_min_ns, w.self_mean_ns, w.self_p50_ns,
                                  w.self_p95_ns, w.self_max_ns};
    for (size_t k = 0; k < std::size(got_values); ++k)
      if (got_values[k] != want_values[k])
        mismatch("a statistic (background; min, mean, p50, p95, max, then self's)", i,
                 got_values[k], want_values[k]);
  }
  if (background.sketch_buckets() != inline_acc.sketch_buckets())
    mismatch("the sketch windows (background)", 0, 0, 0);
}

// A duration of any magnitude up to 2^64-2, so that sketch buckets of every octave are hit.
uint64_t consume_duration(Input& in) {
  const uint8_t kind = in.byte();
  uint64_t duration;
  if (kind & 1)
    duration = in.u64();
  else if (kind & 2)
    duration = in.u64() >> (in.byte() % 64);
  else
    duration = in.byte();
  if (kind & 4) duration = UINT64_MAX - 1 - (duration & 0xff);  // near the longest
  return std::min<uint64_t>(duration, UINT64_MAX - 1);
}

// A marker time: small, anything (UINT64_MAX is unmeasurable), or near the top.
uint64_t consume_time(Input& in) {
  const uint8_t kind = in.byte();
  if (kind < 96) return in.byte();
  if (kind < 160) return in.u64();
  if (kind < 240) return UINT64_MAX - 1 - in.byte();
  return kUnmeasurable;
}

std::string consume_path(Input& in) {
  // A few recurring paths, so that series collect several samples, plus arbitrary ones.
  static const std::string common[] = {"a", "a/b", "", "layer0/copy"};
  const uint8_t shape = in.byte();
  return shape < 192 ? common[shape % 4] : in.text(shape % 16);
}

// A fresh report from RegionSample, with durations chosen by the input; checks that the report
// holds them.
ReplayReport consume_samples(Input& in) {
  std::vector<RegionSample> samples;
  std::vector<uint64_t> durations;
  const size_t regions = in.byte() % 8;
  for (size_t r = 0; r < regions; ++r) {
    RegionSample sample;
    sample.info.path = consume_path(in);
    sample.info.name = sample.info.path;
    sample.info.depth = static_cast<int8_t>(in.byte());
    const uint64_t duration = consume_duration(in);
    // Any start that leaves end = start + duration below UINT64_MAX.
    sample.start_ns =
        std::min<uint64_t>(in.byte() % 2 ? in.u64() : in.byte(), UINT64_MAX - 1 - duration);
    sample.end_ns = sample.start_ns + duration;
    const uint8_t kind = in.byte();
    if (kind >= 240) {
      sample.measurable = false;                      // 1 in 16
    } else if (kind >= 224 && sample.start_ns > 0) {  // end < start: duration 0
      sample.end_ns = sample.start_ns - 1 - (in.u64() % sample.start_ns);
    }
    durations.push_back(sample.measurable && sample.end_ns >= sample.start_ns ? duration : 0);
    samples.push_back(std::move(sample));
  }
  std::vector<bool> measurable;
  for (const RegionSample& s : samples) measurable.push_back(s.measurable);
  ReplayReport report = ReplayReport::from_samples(ReportSource{}, 1, 0, std::move(samples));
  for (size_t i = 0; i < report.size(); ++i) {
    const RegionTiming t = report.region(i);
    if (t.measurable() != measurable[i] || t.duration_ns() != durations[i]) {
      std::fprintf(stderr,
                   "fuzz_stats: from_samples region %zu: duration %llu (measurable %d), "
                   "expected %llu (measurable %d)\n",
                   i, static_cast<unsigned long long>(t.duration_ns()), t.measurable() ? 1 : 0,
                   static_cast<unsigned long long>(durations[i]), measurable[i] ? 1 : 0);
      std::abort();
    }
  }
  return report;
}

// A layout built by hand, as the profiler's are: regions may share markers (one region's end is
// another's begin), parents are earlier regions or -1.
std::shared_ptr<const ReportLayout> consume_layout(Input& in) {
  std::vector<RegionInfo> regions;
  const size_t count = in.byte() % 8;
  const uint32_t markers = static_cast<uint32_t>(count) + 1;
  for (size_t r = 0; r < count; ++r) {
    RegionInfo info;
    info.name = consume_path(in);
    info.depth = static_cast<int8_t>(in.byte());
    const uint8_t parent = in.byte();
    info.parent = parent < 128 || r == 0 ? -1 : static_cast<int>(parent % r);
    if (info.parent >= 0 && in.byte() < 128) info.path = info.name;  // else parent's path + name
    info.begin_marker = in.byte() % markers;
    info.end_marker = in.byte() % markers;
    regions.push_back(std::move(info));
  }
  return std::make_shared<const ReportLayout>(ReportSource{}, std::move(regions));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  StatsAccumulator sketch;
  StatsAccumulator exact(StatsMode::Exact);
  // The same, folded on their own threads (they start at the first batch).
  StatsAccumulator sketch_background(StatsMode::Sketch, StatsFold::Background);
  StatsAccumulator exact_background(StatsMode::Exact, StatsFold::Background);
  Model model;
  // Layouts that later reports replay; replacing one lets it die, so that a new layout may take
  // its address (add() must not take the new one's regions for the old one's).
  std::vector<std::shared_ptr<const ReportLayout>> layouts;
  uint64_t replay = 0;
  while (!in.empty()) {
    const uint8_t op = in.byte();
    if (op % 8 == 6) {
      sketch.clear();
      exact.clear();
      sketch_background.clear();
      exact_background.clear();
      model.clear();
      continue;
    }
    if (op % 8 == 7) {
      check(sketch, model);
      check(exact, model);
      check_same(sketch_background, sketch);
      check_same(exact_background, exact);
      continue;
    }
    ReplayReport report;
    if (op % 8 <= 2 && !layouts.empty()) {  // another replay of a known layout
      std::shared_ptr<const ReportLayout> layout = layouts[in.byte() % layouts.size()];
      std::vector<uint64_t> times(layout->marker_count());
      for (uint64_t& t : times) t = consume_time(in);
      report = ReplayReport(std::move(layout), 1, ++replay, std::move(times));
    } else {
      if (op % 8 == 5) {
        std::shared_ptr<const ReportLayout> layout = consume_layout(in);
        std::vector<uint64_t> times(layout->marker_count());
        for (uint64_t& t : times) t = consume_time(in);
        report = ReplayReport(std::move(layout), 2, ++replay, std::move(times));
      } else {
        report = consume_samples(in);
      }
      if (layouts.size() < 4)
        layouts.push_back(report.shared_layout());
      else if (op >= 128)
        layouts[op % 4] = report.shared_layout();
    }
    sketch.add(report);
    exact.add(report);
    sketch_background.add(report);
    exact_background.add(report);
    model.add(report);
  }
  check(sketch, model);
  check(exact, model);
  check_same(sketch_background, sketch);
  check_same(exact_background, exact);
  return 0;
}
