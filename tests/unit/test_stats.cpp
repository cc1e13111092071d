// Tests of StatsAccumulator's two modes (report.hpp): the bounded sketch (the default) against
// exact nearest-rank values on fixed-seed distributions, its memory bound, StatsMode::Exact
// against today's (every-sample) results, and ProfilerOptions::stats_mode.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "stats_internal.hpp"  // kSketchMaxBuckets, the statistics thread's seams
#include "accgraph/accgraph.hpp"

using accgraph::Stream;
using namespace accgraph::timing;

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
// The stated bound (RegionStats): p50/p95 within 1/128 relative error of nearest rank.
constexpr double kSketchRelativeError = 1.0 / 128;

ReplayReport report_of(const std::string& path, uint64_t duration, bool measurable = true) {
  RegionSample region;
  region.info.name = path;
  region.end_ns = duration;
  region.measurable = measurable;
  return ReplayReport::from_samples({}, 1, 0, {region});
}

// Today's computation (before StatsMode): sort, sum the doubles in ascending order, nearest rank.
RegionStats reference(std::vector<uint64_t> samples) {
  RegionStats out;
  out.count = samples.size();
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (uint64_t v : samples) sum += static_cast<double>(v);
  auto rank = [&](double percent) {
    auto r = static_cast<size_t>(std::ceil(percent / 100.0 * static_cast<double>(samples.size())));
    return static_cast<double>(samples[std::clamp<size_t>(r, 1, samples.size()) - 1]);
  };
  out.min_ns = static_cast<double>(samples.front());
  out.max_ns = static_cast<double>(samples.back());
  out.mean_ns = sum / static_cast<double>(samples.size());
  out.p50_ns = rank(50);
  out.p95_ns = rank(95);
  return out;
}

long double exact_mean(const std::vector<uint64_t>& samples) {
  long double sum = 0;
  for (uint64_t v : samples) sum += static_cast<long double>(v);
  return sum / static_cast<long double>(samples.size());
}

RegionStats only_series(const StatsAccumulator& acc) {
  std::vector<RegionStats> stats = acc.stats();
  REQUIRE(stats.size() == 1);
  return stats[0];
}

struct Distribution {
  const char* name;
  std::function<uint64_t(std::mt19937_64&)> draw;
};

// Fixed-seed generators built from mt19937_64's raw output only, so every standard library
// produces the same samples.
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

const std::vector<Distribution>& distributions() {
  static const std::vector<Distribution> all = {
      {"uniform 0 .. 10^6", [](std::mt19937_64& rng) { return rng() % 1000001; }},
      {"log-normal-ish around 22 us",
       [](std::mt19937_64& rng) {
         double normal = -6;  // Irwin-Hall: 12 uniforms - 6 is close to N(0, 1)
         for (int i = 0; i < 12; ++i) normal += unit(rng);
         return static_cast<uint64_t>(std::exp(10 + 1.5 * normal));
       }},
      {"bimodal 1 us / 1 ms (70/30)",
       [](std::mt19937_64& rng) {
         return rng() % 10 < 7 ? 1000 + rng() % 100 : 1000000 + rng() % 10000;
       }},
      {"constant 0", [](std::mt19937_64&) { return uint64_t{0}; }},
      {"constant 12345", [](std::mt19937_64&) { return uint64_t{12345}; }},
      {"constant 2^64-2", [](std::mt19937_64&) { return kMax - 1; }},
      {"small 0 .. 200 (exact region and first octave)",
       [](std::mt19937_64& rng) { return rng() % 201; }},
      // 2^64-1 itself is not a duration: a marker time of UINT64_MAX means "unmeasurable".
      {"huge: within 2^60 of 2^64-2", [](std::mt19937_64& rng) { return kMax - 1 - (rng() >> 4); }},
      {"the whole range, 0 and 2^64-2 included",
       [](std::mt19937_64& rng) {
         const uint64_t pick = rng() % 70;
         if (pick == 64) return uint64_t{0};
         if (pick > 64) return kMax - 1;
         return rng() >> (63 - pick);  // highest bit at most `pick`
       }},
  };
  return all;
}

void check_sketch_against_exact(const std::vector<uint64_t>& samples) {
  StatsAccumulator sketch;
  StatsAccumulator exact(StatsMode::Exact);
  for (uint64_t v : samples) {
    sketch.add(report_of("r", v));
    exact.add(report_of("r", v));
  }
  const RegionStats want = reference(samples);
  const RegionStats e = only_series(exact);
  // Exact mode: today's results, bit for bit.
  CHECK(e.count == want.count);
  CHECK(e.min_ns == want.min_ns);
  CHECK(e.max_ns == want.max_ns);
  CHECK(e.mean_ns == want.mean_ns);
  CHECK(e.p50_ns == want.p50_ns);
  CHECK(e.p95_ns == want.p95_ns);
  // Sketch mode: count/min/max exact, mean from the exact sum, p50/p95 within the bound.
  const RegionStats s = only_series(sketch);
  CHECK(s.count == want.count);
  CHECK(s.min_ns == want.min_ns);
  CHECK(s.max_ns == want.max_ns);
  const long double mean = exact_mean(samples);
  CHECK(std::fabs(static_cast<long double>(s.mean_ns) - mean) <= 1e-15L * mean);
  CHECK(std::fabs(s.p50_ns - want.p50_ns) <= kSketchRelativeError * want.p50_ns);
  CHECK(std::fabs(s.p95_ns - want.p95_ns) <= kSketchRelativeError * want.p95_ns);
  CHECK(s.p50_ns >= s.min_ns);
  CHECK(s.p95_ns <= s.max_ns);
  if (want.p50_ns < 128) CHECK(s.p50_ns == want.p50_ns);  // one bucket per value below 128
  if (want.p95_ns < 128) CHECK(s.p95_ns == want.p95_ns);
  // A region without children: its self time is its duration, in the same kind of series.
  for (const RegionStats* r : {&e, &s}) {
    CHECK(r->self_count == r->count);
    CHECK(r->self_min_ns == r->min_ns);
    CHECK(r->self_mean_ns == r->mean_ns);
    CHECK(r->self_p50_ns == r->p50_ns);
    CHECK(r->self_p95_ns == r->p95_ns);
    CHECK(r->self_max_ns == r->max_ns);
  }
}

// A parent of duration `self + child` with one child of duration `child`.
ReplayReport parent_with_child(uint64_t self, uint64_t child) {
  RegionSample parent;
  parent.info.name = "p";
  parent.end_ns = self + child;
  RegionSample inner;
  inner.info.name = "c";
  inner.info.parent = 0;
  inner.info.depth = 1;
  inner.start_ns = self;
  inner.end_ns = self + child;
  return ReplayReport::from_samples({}, 1, 0, {parent, inner});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("stats sketch: p50/p95 within 1/128 of exact nearest rank on fixed-seed samples") {
  for (const Distribution& d : distributions()) {
    for (size_t n : {1, 2, 3, 7, 20, 101, 20001}) {
      CAPTURE(d.name);
      CAPTURE(n);
      std::mt19937_64 rng(20261123);
      std::vector<uint64_t> samples(n);
      for (uint64_t& v : samples) v = d.draw(rng);
      check_sketch_against_exact(samples);
    }
  }
}

TEST_CASE("stats: self times get their own series, within the same bound") {
  std::mt19937_64 rng(20261126);
  std::vector<uint64_t> selves, durations;
  StatsAccumulator sketch;
  StatsAccumulator exact(StatsMode::Exact);
  for (int i = 0; i < 5001; ++i) {
    const uint64_t self = rng() % 1'000'000, child = rng() % 50'000'000;
    selves.push_back(self);
    durations.push_back(self + child);
    sketch.add(parent_with_child(self, child));
    exact.add(parent_with_child(self, child));
  }
  const RegionStats want_self = reference(selves), want = reference(durations);
  const RegionStats e = exact.stats()[0], s = sketch.stats()[0];
  CHECK(e.path == "p");
  CHECK(e.self_count == 5001);
  CHECK(e.self_min_ns == want_self.min_ns);
  CHECK(e.self_max_ns == want_self.max_ns);
  CHECK(e.self_mean_ns == want_self.mean_ns);
  CHECK(e.self_p50_ns == want_self.p50_ns);
  CHECK(e.self_p95_ns == want_self.p95_ns);
  CHECK(e.p50_ns == want.p50_ns);  // the durations' series is not mixed with the self times
  CHECK(s.self_count == 5001);
  CHECK(s.self_min_ns == want_self.min_ns);
  CHECK(s.self_max_ns == want_self.max_ns);
  CHECK(std::fabs(s.self_p50_ns - want_self.p50_ns) <= kSketchRelativeError * want_self.p50_ns);
  CHECK(std::fabs(s.self_p95_ns - want_self.p95_ns) <= kSketchRelativeError * want_self.p95_ns);
  CHECK(std::fabs(s.p50_ns - want.p50_ns) <= kSketchRelativeError * want.p50_ns);
  CHECK(s.self_p50_ns < s.p50_ns / 10);
  // The child's own series: no children, self = duration.
  CHECK(e.self_count == exact.stats()[1].self_count);
}

TEST_CASE("stats: self times equal to the durations at first, apart later, keep every sample") {
  // "p" without children in its first reports (self = duration), then with a child: the self
  // series must hold the earlier samples too.
  for (StatsMode mode : {StatsMode::Sketch, StatsMode::Exact}) {
    CAPTURE(static_cast<int>(mode));
    StatsAccumulator acc(mode);
    for (uint64_t v : {10, 20, 30}) acc.add(report_of("p", v));
    acc.add(parent_with_child(5, 1000));
    acc.add(parent_with_child(7, 1000));
    const RegionStats s = acc.stats()[0];
    CHECK(s.count == 5);
    CHECK(s.self_count == 5);
    CHECK(s.self_min_ns == 5);
    CHECK(s.self_max_ns == 30);
    CHECK(s.self_p50_ns == 10);  // 5, 7, 10, 20, 30
    CHECK(s.self_mean_ns == doctest::Approx(72.0 / 5));
    CHECK(s.max_ns == 1007);
  }
}

TEST_CASE("stats sketch: every bucket boundary and its neighbours stay within the bound") {
  // Around each power of two and each bucket edge of the octave above it, up to 2^64-1.
  for (int e = 0; e < 64; ++e) {
    const uint64_t base = uint64_t{1} << e;
    for (uint64_t step = 0; step < 64; step += 7) {
      const uint64_t edge = base + (e >= 6 ? (base >> 6) * step : step);
      for (uint64_t v : {edge - 1, edge, edge + 1}) {
        CAPTURE(v);
        check_sketch_against_exact({v});
        check_sketch_against_exact({0, v, v, kMax - 1});  // p50 is v (rank 2)
      }
    }
  }
}

TEST_CASE("stats sketch: memory is bounded by kSketchMaxBuckets over the whole range") {
  StatsAccumulator sketch;
  std::mt19937_64 rng(7);
  RegionSample wide, narrow;
  wide.info.name = "wide";
  narrow.info.name = "narrow";
  // One layout (regions at markers 0-1 and 2-3), new times per report, as replays have.
  const ReplayReport first = ReplayReport::from_samples({}, 1, 0, {wide, narrow});
  // The longest duration a marker pair can hold: kMax itself is TimestampMarkers::kUnmeasurable.
  constexpr uint64_t kLongest = kMax - 1;
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t pick = rng() % 66;
    const uint64_t d0 = pick == 64 ? 0 : pick == 65 ? kLongest : rng() >> (63 - pick);
    const uint64_t d1 = 1000 + rng() % 1000;  // buckets of 1000 .. 1999: 67
    sketch.add(ReplayReport(first.shared_layout(), 1, static_cast<uint64_t>(i), {0, d0, 0, d1}));
  }
  const ReplayReport& report = first;
  const std::vector<size_t> buckets = sketch.sketch_buckets();
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0] <= kSketchMaxBuckets);
  CHECK(buckets[0] >= kSketchMaxBuckets / 2);  // the whole range really was exercised
  CHECK(buckets[1] <= 2 * 67);                 // grown on demand, at most doubled
  const std::vector<RegionStats> stats = sketch.stats();
  CHECK(stats[0].count == 1000000);
  CHECK(stats[0].min_ns == 0);
  CHECK(stats[0].max_ns == static_cast<double>(kLongest));

  // Exact mode keeps the samples instead and no sketch.
  StatsAccumulator exact(StatsMode::Exact);
  exact.add(report);
  CHECK(exact.sketch_buckets() == std::vector<size_t>{0, 0});
}

// Note [Stats contexts]: `graph_id` 0 is an eager region tree, each with a layout of its own.
ReplayReport context_report(uint64_t graph_id,
                            std::vector<std::pair<std::string, uint64_t>> paths) {
  std::vector<RegionSample> samples;
  for (const auto& [path, duration] : paths) {
    RegionSample region;
    region.info.name = path;
    region.end_ns = duration;
    samples.push_back(region);
  }
  return ReplayReport::from_samples({}, graph_id, 0, samples);
}

TEST_CASE(
    "stats: each graph's replays and the eager calls are kept apart (Note [Stats contexts])") {
  for (StatsFold fold : {StatsFold::Inline, StatsFold::Background}) {
    StatsAccumulator acc(StatsMode::Exact, fold);
    for (int i = 0; i < 20; ++i) {
      acc.add(context_report(3, {{"GPT", 100}}));
      acc.add(context_report(5, {{"GPT", 800}}));  // the same path in another graph
      acc.add(context_report(0, {{"GPT", i == 0 ? 90000 : 1000}}));  // eager, its first slow
    }
    const std::vector<RegionStats> stats = acc.stats();
    REQUIRE(stats.size() == 3);
    CHECK(stats[0].graph_id == 3);
    CHECK(stats[0].p50_ns == 100);
    CHECK(stats[0].count == 20);
    CHECK(stats[1].graph_id == 5);
    CHECK(stats[1].max_ns == 800);
    CHECK(stats[2].graph_id == 0);
    CHECK_FALSE(stats[2].first_call);
    CHECK(stats[2].count == 20);  // FirstEagerCall::Pooled (the default): the first one is in
    CHECK(stats[2].max_ns == 90000);
  }
}

TEST_CASE("stats: FirstEagerCall::Apart gives each path's first eager call a row of its own") {
  for (StatsFold fold : {StatsFold::Inline, StatsFold::Background}) {
    StatsAccumulator acc(StatsMode::Exact, fold, FirstEagerCall::Apart);
    acc.add(context_report(0, {{"GPT", 90000}, {"GPT/h.0", 50000}}));
    for (int i = 0; i < 40; ++i) acc.add(context_report(0, {{"GPT", 1000}, {"GPT/h.0", 500}}));
    acc.add(context_report(0, {{"GPT", 1000}, {"GPT/late", 7000}}));  // a path first seen later
    acc.add(context_report(0, {{"GPT/late", 70}}));
    acc.add(context_report(2, {{"GPT", 10}}));  // graphs have no first call apart
    // One layout reported twice (a layout that an eager path reuses): its first report only
    // is the first call.
    const ReplayReport shared = context_report(0, {{"reused", 5000}});
    ReplayReport again(shared.shared_layout(), 0, 1, {0, 60});
    acc.add(shared);
    acc.add(again);
    acc.add(again);
    const std::vector<RegionStats> stats = acc.stats();
    auto row = [&](const std::string& path, uint64_t graph_id, bool first) {
      for (const RegionStats& s : stats)
        if (s.path == path && s.graph_id == graph_id && s.first_call == first) return s;
      FAIL("no row for " << path);
      return RegionStats{};
    };
    CHECK(stats.size() == 9);
    CHECK(row("GPT", 0, true).count == 1);
    CHECK(row("GPT", 0, true).p50_ns == 90000);
    CHECK(row("GPT", 0, false).count == 41);
    CHECK(row("GPT", 0, false).max_ns == 1000);
    CHECK(row("GPT/h.0", 0, true).p50_ns == 50000);
    CHECK(row("GPT/h.0", 0, false).max_ns == 500);
    CHECK(row("GPT/late", 0, true).p50_ns == 7000);
    CHECK(row("GPT/late", 0, false).p50_ns == 70);
    CHECK(row("GPT", 2, false).count == 1);
    CHECK(row("reused", 0, true).count == 1);
    CHECK(row("reused", 0, true).p50_ns == 5000);
    CHECK(row("reused", 0, false).count == 2);
    CHECK(row("reused", 0, false).p50_ns == 60);
  }
}

TEST_CASE("stats: p05 is the 5th nearest-rank percentile, exact or within the sketch's bound") {
  std::vector<uint64_t> samples;
  for (uint64_t v = 1; v <= 1000; ++v) samples.push_back(v * 1000);
  for (StatsMode mode : {StatsMode::Exact, StatsMode::Sketch}) {
    StatsAccumulator acc(mode);
    for (uint64_t v : samples) acc.add(report_of("r", v));
    const RegionStats s = acc.stats().at(0);
    if (mode == StatsMode::Exact)
      CHECK(s.p05_ns == 50000);
    else
      CHECK(s.p05_ns == doctest::Approx(50000).epsilon(kSketchRelativeError));
  }
}

TEST_CASE("stats: unmeasurable regions are counted apart in both modes") {
  for (StatsMode mode : {StatsMode::Sketch, StatsMode::Exact}) {
    CAPTURE(static_cast<int>(mode));
    StatsAccumulator acc(mode);
    CHECK(acc.mode() == mode);
    acc.add(report_of("r", 0, false));
    RegionStats only_lost = only_series(acc);
    CHECK(only_lost.count == 0);
    CHECK(only_lost.unmeasurable == 1);
    CHECK(only_lost.max_ns == 0);
    for (uint64_t v : {300, 100, 200}) acc.add(report_of("r", v));
    acc.add(report_of("r", 0, false));
    RegionStats s = only_series(acc);
    CHECK(s.count == 3);
    CHECK(s.unmeasurable == 2);
    CHECK(s.min_ns == 100);  // the unmeasurable zeros are not samples
    CHECK(s.max_ns == 300);
    CHECK(s.mean_ns == 200);
    acc.clear();
    CHECK(acc.stats().empty());
    CHECK(acc.mode() == mode);
  }
}

TEST_CASE("profiler: stats_mode chooses the statistics' mode (Sketch by default)") {
  CHECK(ProfilerOptions{}.stats_mode == StatsMode::Sketch);
  for (StatsMode mode : {StatsMode::Sketch, StatsMode::Exact}) {
    CAPTURE(static_cast<int>(mode));
    ProfilerOptions options;
    options.stats_mode = mode;
    Profiler prof(options);
    Stream stream = Stream::create("host");
    for (int i = 1; i <= 21; ++i) {
      auto r = prof.region(stream, "e");
      stream.delay(std::chrono::microseconds(20 * i));
    }
    prof.flush();
    std::vector<uint64_t> durations;
    for (const ReplayReport& report : prof.reports())
      for (const RegionTiming& region : report.regions()) durations.push_back(region.duration_ns());
    REQUIRE(durations.size() == 21);
    const RegionStats want = reference(durations);
    const std::vector<RegionStats> stats = prof.stats();
    REQUIRE(stats.size() == 1);
    const RegionStats& got = stats[0];
    CHECK(got.count == 21);
    CHECK(got.min_ns == want.min_ns);
    CHECK(got.max_ns == want.max_ns);
    if (mode == StatsMode::Exact) {
      CHECK(got.mean_ns == want.mean_ns);
      CHECK(got.p50_ns == want.p50_ns);
      CHECK(got.p95_ns == want.p95_ns);
    } else {
      CHECK(std::fabs(got.p50_ns - want.p50_ns) <= kSketchRelativeError * want.p50_ns);
      // A sketch bucket above 128 ns is reported as the midpoint of an even number of
      // integers, never an integer: the median (rank 11 of 21 distinct delays) is not exact.
      CHECK(got.p50_ns != want.p50_ns);
    }
  }
}

TEST_CASE("profiler: a parent's self time holds the gap between its two children (host)") {
  ProfilerOptions options;
  options.stats_mode = StatsMode::Exact;
  Profiler prof(options);
  Stream stream = Stream::create("host");
  {
    auto parent = prof.region(stream, "parent");
    {
      auto a = prof.region(stream, "a");
      stream.delay(std::chrono::microseconds(100));
    }
    stream.delay(std::chrono::milliseconds(2));  // glue between the children: the parent's own
    {
      auto b = prof.region(stream, "b");
      stream.delay(std::chrono::microseconds(100));
    }
  }
  prof.flush();
  const std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 1);
  REQUIRE(reports[0].size() == 3);
  const RegionTiming p = reports[0].region(0), a = reports[0].region(1), b = reports[0].region(2);
  REQUIRE(p.measurable());
  CHECK(p.self_measurable());
  CHECK(a.parent() == 0);
  CHECK(b.parent() == 0);
  CHECK(p.self_ns() == p.duration_ns() - a.duration_ns() - b.duration_ns());
  // The gap is one marker transition (Note [Marker transitions]): what the markers read around
  // the glue, less that transition, and a delay lasts at least as long as asked.
  CHECK(b.raw_start_ns() - a.raw_end_ns() >= 2'000'000);
  CHECK(p.self_ns() == b.raw_start_ns() - a.raw_end_ns() - reports[0].marker_overhead_ns());
  CHECK(a.self_ns() == a.duration_ns());
  const std::vector<RegionStats> stats = prof.stats();
  REQUIRE(stats.size() == 3);
  CHECK(stats[0].self_count == 1);
  CHECK(stats[0].self_p50_ns == static_cast<double>(p.self_ns()));
  CHECK(stats[0].p50_ns == static_cast<double>(p.duration_ns()));
  const std::vector<std::string> table = lines_of(prof.stats_table());
  REQUIRE(table.size() == 4);
  CHECK(table[0].find("self_p50_us") != std::string::npos);
}

TEST_CASE("profiler: note_untimed counts calls by reason; the stats table ends with them") {
  Profiler prof;
  CHECK(prof.untimed().empty());
  CHECK(prof.stats_table().find("untimed") == std::string::npos);
  prof.note_untimed("layer1", "called outside a capture");
  prof.note_untimed("layer2", "called outside a capture");
  prof.note_untimed("head", "no stream");
  prof.note_untimed("layer3", "called outside a capture");
  const std::vector<UntimedCalls> untimed = prof.untimed();
  REQUIRE(untimed.size() == 2);
  CHECK(untimed[0].reason == "called outside a capture");
  CHECK(untimed[0].count == 3);
  CHECK(untimed[0].first_name == "layer1");
  CHECK(untimed[1].reason == "no stream");
  CHECK(untimed[1].count == 1);
  CHECK(untimed[1].first_name == "head");
  const std::vector<std::string> table = lines_of(prof.stats_table());
  REQUIRE(table.size() == 3);  // the header (no regions), then one line per reason
  CHECK(table[0].rfind("region", 0) == 0);
  CHECK(table[1] == "untimed: 3 call(s) not timed: called outside a capture (first: layer1)");
  CHECK(table[2] == "untimed: 1 call(s) not timed: no stream (first: head)");
}

TEST_CASE("profiler: note_untimed from many threads loses no count") {
  Profiler prof;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&prof, t] {
      for (int i = 0; i < 2000; ++i)
        prof.note_untimed("t" + std::to_string(t), i % 2 == 0 ? "even" : "odd");
    });
  for (std::thread& thread : threads) thread.join();
  const std::vector<UntimedCalls> untimed = prof.untimed();
  REQUIRE(untimed.size() == 2);
  CHECK(untimed[0].count == 4000);
  CHECK(untimed[1].count == 4000);
  CHECK(untimed[0].first_name.rfind('t', 0) == 0);
}

// One layout's storage: a layout placed there after the previous one died has its address (and
// another control block), which StatsAccumulator's per-layout plan must tell from the dead one.
alignas(ReportLayout) unsigned char layout_storage[sizeof(ReportLayout)];

TEST_CASE("stats: replays of a shared layout are staged, yet every stats() sees all of them") {
  // Note [Stats fold]: the replays of a layout seen before are folded in batches. Whenever
  // stats() reads, mid-batch or not, with a second layout of the same paths interleaved, an
  // unmeasurable region now and then and the first layout freed and another made (perhaps at its
  // address), the statistics must be those of every report added, as an Exact model computes
  // them from RegionTiming.
  for (StatsMode mode : {StatsMode::Sketch, StatsMode::Exact}) {
    CAPTURE(static_cast<int>(mode));
    auto make_layout = [](bool same_storage) -> std::shared_ptr<const ReportLayout> {
      // "p" [0, 5] with children "p/a" [1, 2] and "p/b" [3, 4]; the leaf "c" [5, 6].
      std::vector<RegionInfo> regions(4);
      regions[0].name = "p";
      regions[0].end_marker = 5;
      regions[1].name = "a";
      regions[1].parent = 0;
      regions[1].begin_marker = 1;
      regions[1].end_marker = 2;
      regions[2].name = "b";
      regions[2].parent = 0;
      regions[2].begin_marker = 3;
      regions[2].end_marker = 4;
      regions[3].name = "c";
      regions[3].begin_marker = 5;
      regions[3].end_marker = 6;
      if (same_storage)
        return std::shared_ptr<const ReportLayout>(
            new (layout_storage) ReportLayout(ReportSource{}, std::move(regions)),
            [](const ReportLayout* layout) { layout->~ReportLayout(); });
      return std::make_shared<const ReportLayout>(ReportSource{}, std::move(regions));
    };
    std::shared_ptr<const ReportLayout> first = make_layout(true);
    const std::shared_ptr<const ReportLayout> second = make_layout(false);
    std::mt19937_64 rng(21);
    StatsAccumulator acc(mode);
    std::vector<std::vector<uint64_t>> durations(4), selves(4);
    std::vector<uint64_t> unmeasurable(4, 0);
    for (uint64_t replay = 0; replay < 70; ++replay) {
      if (replay == 40) {  // the old one dies with replays staged; the new one takes its address
        const ReportLayout* old = first.get();
        first.reset();
        first = make_layout(true);
        REQUIRE(first.get() == old);
      }
      std::vector<uint64_t> times(7);
      uint64_t now = rng() % 1000;
      for (uint64_t& t : times) t = now += rng() % 5000;
      if (rng() % 9 == 0) times[1 + rng() % 6] = kMax;  // some region (and p's self) unmeasurable
      const ReplayReport report(replay % 5 == 3 ? second : first, 1, replay, times);
      for (size_t i = 0; i < report.size(); ++i) {
        const RegionTiming t = report.region(i);
        if (!t.measurable()) ++unmeasurable[i];
        if (t.measurable()) durations[i].push_back(t.duration_ns());
        if (t.self_measurable()) selves[i].push_back(t.self_ns());
      }
      acc.add(report);
      if (replay % 7 != 6 && replay < 60) continue;  // read mid-batch, and at every step at the end
      const std::vector<RegionStats> stats = acc.stats();
      REQUIRE(stats.size() == 4);
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(replay);
        CAPTURE(i);
        const RegionStats want = reference(durations[i]), want_self = reference(selves[i]);
        CHECK(stats[i].path == std::vector<std::string>{"p", "p/a", "p/b", "c"}[i]);
        CHECK(stats[i].count == want.count);
        CHECK(stats[i].unmeasurable == unmeasurable[i]);
        CHECK(stats[i].min_ns == want.min_ns);
        CHECK(stats[i].max_ns == want.max_ns);
        CHECK(stats[i].self_count == want_self.count);
        CHECK(stats[i].self_min_ns == want_self.min_ns);
        CHECK(stats[i].self_max_ns == want_self.max_ns);
        if (mode == StatsMode::Exact) {
          CHECK(stats[i].p50_ns == want.p50_ns);
          CHECK(stats[i].self_p95_ns == want_self.p95_ns);
        }
      }
    }
    CHECK(selves[0].size() < durations[0].size());  // p's self time was unmeasurable at times
    CHECK(selves[0] != durations[0]);               // and it was apart from the durations
  }
}

// --- StatsFold::Background (Note [Stats thread]) ------------------------------------------------

namespace {

using accgraph::detail::set_stats_thread_hook;
using accgraph::detail::stats_thread_counters;
using accgraph::detail::StatsThreadCounters;

// Every field of every series equal.
void check_same_stats(const std::vector<RegionStats>& want, const std::vector<RegionStats>& got) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].path == want[i].path);
    CHECK(got[i].depth == want[i].depth);
    CHECK(got[i].count == want[i].count);
    CHECK(got[i].unmeasurable == want[i].unmeasurable);
    CHECK(got[i].min_ns == want[i].min_ns);
    CHECK(got[i].mean_ns == want[i].mean_ns);
    CHECK(got[i].p50_ns == want[i].p50_ns);
    CHECK(got[i].p95_ns == want[i].p95_ns);
    CHECK(got[i].max_ns == want[i].max_ns);
    CHECK(got[i].self_count == want[i].self_count);
    CHECK(got[i].self_min_ns == want[i].self_min_ns);
    CHECK(got[i].self_mean_ns == want[i].self_mean_ns);
    CHECK(got[i].self_p50_ns == want[i].self_p50_ns);
    CHECK(got[i].self_p95_ns == want[i].self_p95_ns);
    CHECK(got[i].self_max_ns == want[i].self_max_ns);
  }
}

// The statistics and the sketch windows equal: the two accumulators folded the same samples in
// the same order.
void check_same(const StatsAccumulator& inline_acc, const StatsAccumulator& background) {
  check_same_stats(inline_acc.stats(), background.stats());
  CHECK(background.sketch_buckets() == inline_acc.sketch_buckets());
}

// A layout of `count` regions "<prefix>i": every 4th a parent of the next two (shared markers),
// the rest leaves; in `storage` if given (so that a later one can take a dead one's address).
std::shared_ptr<const ReportLayout> layout_of(const std::string& prefix, size_t count,
                                              unsigned char* storage = nullptr) {
  std::vector<RegionInfo> regions(count);
  for (size_t i = 0; i < count; ++i) {
    RegionInfo& r = regions[i];
    r.name = prefix + std::to_string(i);
    r.begin_marker = static_cast<uint32_t>(2 * i);
    r.end_marker = static_cast<uint32_t>(2 * i + 1);
    if (i % 4 == 0 && i + 2 < count) r.end_marker = static_cast<uint32_t>(2 * i + 5);
    if (i % 4 == 1 || i % 4 == 2) r.parent = static_cast<int>(i - i % 4);
  }
  if (storage == nullptr)
    return std::make_shared<const ReportLayout>(ReportSource{}, std::move(regions));
  return std::shared_ptr<const ReportLayout>(
      new (storage) ReportLayout(ReportSource{}, std::move(regions)),
      [](const ReportLayout* layout) { layout->~ReportLayout(); });
}

// A replay of `layout` with random increasing marker times, now and then one unmeasurable.
ReplayReport replay_of(const std::shared_ptr<const ReportLayout>& layout, std::mt19937_64& rng,
                       uint64_t replay) {
  std::vector<uint64_t> times(layout->marker_count());
  uint64_t now = rng() % 1000;
  for (uint64_t& t : times) t = now += rng() % (rng() % 3 == 0 ? 100000 : 3000);
  if (rng() % 11 == 0) times[rng() % times.size()] = kMax;
  return ReplayReport(layout, 1, replay, std::move(times));
}

// Holds every statistics thread in set_stats_thread_hook until opened.
struct ThreadGate {
  static std::mutex mutex;
  static std::condition_variable opened_cv;
  static bool opened;
  static int waits;  // hook calls so far

  static void hook() {
    std::unique_lock<std::mutex> lock(mutex);
    ++waits;
    opened_cv.wait(lock, [] { return opened; });
  }
  static void close() {
    std::lock_guard<std::mutex> lock(mutex);
    opened = false;
    waits = 0;
    set_stats_thread_hook(&ThreadGate::hook);
  }
  static void open() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      opened = true;
    }
    opened_cv.notify_all();
  }
  static int wait_count() {
    std::lock_guard<std::mutex> lock(mutex);
    return waits;
  }
};
std::mutex ThreadGate::mutex;
std::condition_variable ThreadGate::opened_cv;
bool ThreadGate::opened = true;
int ThreadGate::waits = 0;

// Waits (up to 30 s) until a statistics thread waits at the gate.
bool wait_for_gate() {
  for (int i = 0; i < 30000 && ThreadGate::wait_count() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return ThreadGate::wait_count() != 0;
}

// Opens the gate and removes the hook at the end of a test, however it ends.
struct GateGuard {
  ~GateGuard() {
    ThreadGate::open();
    set_stats_thread_hook(nullptr);
  }
};

alignas(ReportLayout) unsigned char rebuilt_storage[sizeof(ReportLayout)];

}  // namespace

TEST_CASE("stats: StatsFold::Background gives exactly the Inline results") {
  // Several layouts sharing paths, a large one (its stage holds fewer replays), eager one-shot
  // layouts, a layout rebuilt at a dead one's address, stats() mid-stream: the background
  // accumulator must agree with the inline one field for field, sketch windows included.
  for (StatsMode mode : {StatsMode::Sketch, StatsMode::Exact}) {
    CAPTURE(static_cast<int>(mode));
    StatsAccumulator inline_acc(mode);
    StatsAccumulator background(mode, StatsFold::Background);
    CHECK(StatsAccumulator(mode, StatsFold::Inline).mode() == mode);
    std::shared_ptr<const ReportLayout> small = layout_of("s", 9, rebuilt_storage);
    const std::shared_ptr<const ReportLayout> same_paths = layout_of("s", 9);
    const std::shared_ptr<const ReportLayout> large = layout_of("l", 20000);  // 1 replay a stage
    const std::shared_ptr<const ReportLayout> medium = layout_of("m", 2500);  // 6 a stage
    std::mt19937_64 rng(2121);
    const StatsThreadCounters before = stats_thread_counters();
    for (uint64_t replay = 0; replay < 600; ++replay) {
      if (replay == 300) {  // dies with replays staged and batches queued; rebuilt in its place
        const ReportLayout* old = small.get();
        small.reset();
        small = layout_of("s", 9, rebuilt_storage);
        REQUIRE(small.get() == old);
      }
      const uint64_t pick = rng() % 20;
      ReplayReport report;
      if (pick < 10)
        report = replay_of(small, rng, replay);
      else if (pick < 14)
        report = replay_of(same_paths, rng, replay);
      else if (pick < 16)
        report = replay_of(medium, rng, replay);
      else if (pick < 17 && replay % 5 == 0)
        report = replay_of(large, rng, replay);
      else  // an eager tree: a layout seen once
        report = report_of(rng() % 2 ? "s3" : "eager" + std::to_string(rng() % 7), rng() % 5000,
                           rng() % 13 != 0);
      inline_acc.add(report);
      background.add(report);
      if (rng() % 97 == 0) check_same(inline_acc, background);
    }
    check_same(inline_acc, background);
    const StatsThreadCounters after = stats_thread_counters();
    CHECK(after.thread_batches + after.add_batches > before.thread_batches + before.add_batches);
  }
}

TEST_CASE("stats: a layout's replays are folded 16 at a time, in both StatsFold modes") {
  // Note [Stats fold]: the first report at once, then a batch per 16 (kStageReplays), also
  // after a stage was handed over to the thread (and the plan took a spare buffer).
  const std::shared_ptr<const ReportLayout> layout = layout_of("b", 30);
  for (StatsFold fold : {StatsFold::Inline, StatsFold::Background}) {
    CAPTURE(static_cast<int>(fold));
    StatsAccumulator acc(StatsMode::Sketch, fold);
    std::mt19937_64 rng(4);
    const StatsThreadCounters before = stats_thread_counters();
    for (uint64_t replay = 0; replay < 1 + 16 * 10 + 5; ++replay)
      acc.add(replay_of(layout, rng, replay));
    const RegionStats first = acc.stats().at(0);  // folds the 5 staged, not as a batch
    CHECK(first.count + first.unmeasurable == 1 + 16 * 10 + 5);
    const StatsThreadCounters after = stats_thread_counters();
    const uint64_t batches = (after.inline_batches - before.inline_batches) +
                             (after.thread_batches - before.thread_batches) +
                             (after.add_batches - before.add_batches);
    CHECK(batches == 1 + 10);
  }
}

TEST_CASE("stats: a full queue makes add() fold it; nothing is lost, then the thread goes on") {
  GateGuard guard;
  ThreadGate::close();
  const std::shared_ptr<const ReportLayout> layout = layout_of("q", 40);  // 16 replays a stage
  StatsAccumulator inline_acc;
  StatsAccumulator background(StatsMode::Sketch, StatsFold::Background);
  std::mt19937_64 rng(7);
  const StatsThreadCounters before = stats_thread_counters();
  uint64_t replay = 0;
  // The thread takes no batch while the gate is closed: past 4 queued, add() folds them.
  for (; replay < 16 * 12 + 5; ++replay) {
    const ReplayReport report = replay_of(layout, rng, replay);
    inline_acc.add(report);
    background.add(report);
    if (replay == 0) REQUIRE(wait_for_gate());  // the first report is handed over at once
  }
  const StatsThreadCounters full = stats_thread_counters();
  CHECK(full.thread_batches == before.thread_batches);
  CHECK(full.add_batches - before.add_batches >= 5);
  check_same(inline_acc, background);  // stats() folds what is queued while the thread waits
  ThreadGate::open();
  for (; replay < 16 * 30; ++replay) {
    const ReplayReport report = replay_of(layout, rng, replay);
    inline_acc.add(report);
    background.add(report);
  }
  check_same(inline_acc, background);
}

TEST_CASE("stats: clear() drops queued batches; what follows is counted alone") {
  GateGuard guard;
  const std::shared_ptr<const ReportLayout> layout = layout_of("c", 12);
  for (StatsMode mode : {StatsMode::Sketch, StatsMode::Exact}) {
    ThreadGate::close();  // the previous round's accumulators are gone, their threads joined
    StatsAccumulator inline_acc(mode);
    StatsAccumulator background(mode, StatsFold::Background);
    std::mt19937_64 rng(11);
    for (uint64_t replay = 0; replay < 16 * 3 + 7; ++replay) {  // 3 batches queued, 7 staged
      const ReplayReport report = replay_of(layout, rng, replay);
      background.add(report);
    }
    background.clear();
    CHECK(background.stats().empty());
    for (uint64_t replay = 0; replay < 16 * 3 + 7; ++replay) {
      const ReplayReport report = replay_of(layout, rng, replay);
      inline_acc.add(report);
      background.add(report);
    }
    ThreadGate::open();
    check_same(inline_acc, background);
    CHECK(background.stats().at(0).count + background.stats().at(0).unmeasurable == 16 * 3 + 7);
  }
}

TEST_CASE("stats: an accumulator destroyed with batches queued stops its thread") {
  GateGuard guard;
  ThreadGate::close();
  const std::shared_ptr<const ReportLayout> layout = layout_of("d", 30);
  std::mt19937_64 rng(5);
  auto background = std::make_unique<StatsAccumulator>(StatsMode::Exact, StatsFold::Background);
  // The first report is handed over at once: the thread then waits at the gate (had add()
  // overtaken it, folding a full queue itself, it would find none left).
  background->add(replay_of(layout, rng, 0));
  REQUIRE(wait_for_gate());
  for (uint64_t replay = 1; replay < 16 * 3 + 3; ++replay)
    background->add(replay_of(layout, rng, replay));
  // The thread waits in the hook with 4 batches queued; the destructor must stop it once the
  // gate opens, without hanging (ctest's timeout) or leaking the batches (the asan build).
  std::thread opener([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ThreadGate::open();
  });
  background.reset();
  opener.join();
}

TEST_CASE("stats: a statistics thread that fails logs a warning; add() folds inline after") {
  static std::atomic<int> warnings{0};
  static std::string message;  // written before `warnings` counts it
  warnings = 0;
  accgraph::set_log_handler([](accgraph::LogLevel level, const char* text, void*) {
    if (level != accgraph::LogLevel::Warning) return;
    message = text;
    ++warnings;
  });
  set_stats_thread_hook([] { throw std::bad_alloc(); });
  const std::shared_ptr<const ReportLayout> layout = layout_of("f", 10);
  StatsAccumulator inline_acc;
  StatsAccumulator background(StatsMode::Sketch, StatsFold::Background);
  std::mt19937_64 rng(3);
  const StatsThreadCounters before = stats_thread_counters();
  for (uint64_t replay = 0; replay < 16 * 20; ++replay) {
    const ReplayReport report = replay_of(layout, rng, replay);
    inline_acc.add(report);
    background.add(report);
    if (replay == 16) {  // the thread got the first batch: wait until it has failed
      for (int i = 0; i < 30000 && warnings == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  set_stats_thread_hook(nullptr);
  accgraph::set_log_handler(nullptr);
  REQUIRE(warnings == 1);
  CHECK(message.find("the statistics thread failed") != std::string::npos);
  CHECK(message.find("folded on the delivering thread from now on") != std::string::npos);
  // The hook threw before the thread took a batch: nothing lost. Every later batch was folded
  // by add() itself.
  check_same(inline_acc, background);
  const StatsThreadCounters after = stats_thread_counters();
  CHECK(after.thread_batches == before.thread_batches);
  CHECK(after.add_batches - before.add_batches >= 18);
}

TEST_CASE("stats: add() from two threads and stats() meanwhile lose nothing (Background)") {
  // Each thread adds replays of its own layout (paths shared with the other's); stats() reads
  // meanwhile. Exact mode: the order of the samples does not matter to the results, so they
  // must be those of the same reports added from one thread.
  const std::shared_ptr<const ReportLayout> layouts[2] = {layout_of("t", 50), layout_of("t", 50)};
  std::vector<ReplayReport> reports[2];
  std::mt19937_64 rng(99);
  for (int t = 0; t < 2; ++t)
    for (uint64_t replay = 0; replay < 800; ++replay)
      reports[t].push_back(replay_of(layouts[t], rng, replay));
  StatsAccumulator reference_acc(StatsMode::Exact);
  for (int t = 0; t < 2; ++t)
    for (const ReplayReport& r : reports[t]) reference_acc.add(r);
  StatsAccumulator background(StatsMode::Exact, StatsFold::Background);
  std::thread adders[2];
  for (int t = 0; t < 2; ++t)
    adders[t] = std::thread([&, t] {
      for (const ReplayReport& r : reports[t]) background.add(r);
    });
  for (int i = 0; i < 20; ++i) {
    const std::vector<RegionStats> partial = background.stats();
    CHECK(partial.size() <= 50);
  }
  for (std::thread& adder : adders) adder.join();
  check_same_stats(reference_acc.stats(), background.stats());
}

TEST_CASE("profiler: stats_thread on and off give the same statistics (host)") {
  // One graph, two profilers timing the same replays through their own markers; each one's
  // statistics must be those of its own reports (Exact: recomputed here from reports()).
  CHECK(accgraph::timing::ProfilerOptions{}.stats_thread);
  Stream s = Stream::create("host");
  accgraph::Buffer target = accgraph::Buffer::allocate(s, 64);
  std::vector<std::unique_ptr<Profiler>> profilers;
  for (bool thread : {true, false}) {
    accgraph::timing::ProfilerOptions options;
    options.stats_mode = StatsMode::Exact;
    options.stats_thread = thread;
    options.keep_reports = accgraph::timing::KeepReports::all();
    profilers.push_back(std::make_unique<Profiler>(options));
  }
  accgraph::AcceleratorGraph graph("host");
  for (auto& p : profilers) p->attach(graph);
  graph.capture_begin(s);
  {
    auto outer0 = profilers[0]->region(s, "outer");
    auto outer1 = profilers[1]->region(s, "outer");
    for (int r = 0; r < 5; ++r) {
      auto inner0 = profilers[0]->region(s, "inner" + std::to_string(r));
      auto inner1 = profilers[1]->region(s, "inner" + std::to_string(r));
      s.fill(target, static_cast<uint8_t>(r));
    }
  }
  graph.capture_end();
  for (int i = 0; i < 100; ++i) graph.replay();
  s.synchronize();
  for (auto& p : profilers) {
    p->flush();
    std::vector<std::vector<uint64_t>> samples;
    for (const ReplayReport& report : p->reports()) {
      samples.resize(report.size());
      for (size_t i = 0; i < report.size(); ++i)
        if (report.region(i).measurable()) samples[i].push_back(report.region(i).duration_ns());
    }
    const std::vector<RegionStats> stats = p->stats();
    REQUIRE(stats.size() == 6);
    for (size_t i = 0; i < stats.size(); ++i) {
      const RegionStats want = reference(samples[i]);
      CHECK(stats[i].count == 100);
      CHECK(stats[i].min_ns == want.min_ns);
      CHECK(stats[i].mean_ns == want.mean_ns);
      CHECK(stats[i].p95_ns == want.p95_ns);
      CHECK(stats[i].max_ns == want.max_ns);
    }
  }
}
