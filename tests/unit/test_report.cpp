// Tests of report.hpp: statistics math, the text table, both CSVs (escaping) and the Chrome
// trace (fields, metadata events, overlapping regions split so every track nests).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"

using namespace accgraph::timing;

namespace {

RegionSample region(std::string path, uint64_t start, uint64_t end, uint64_t stream = 1,
                    int depth = 0, Metadata metadata = {}) {
  RegionSample r;
  r.info.name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  r.info.path = std::move(path);
  r.info.depth = depth;
  r.info.stream_id = stream;
  r.info.metadata = std::move(metadata);
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

RegionSample child_of(RegionSample r, int parent) {
  r.info.parent = parent;
  return r;
}

ReplayReport report(uint64_t graph, uint64_t replay, std::vector<RegionSample> regions) {
  return ReplayReport::from_samples({"host", 0, "cpu", "steady_clock", 1}, graph, replay,
                                    std::move(regions));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct TraceSpan {
  int64_t start_ns, end_ns;
  std::string name;
};

// Every "X" event of each (pid, tid) track, in nanoseconds (ts and dur are microseconds).
std::map<std::pair<int, int>, std::vector<TraceSpan>> tracks_of(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::vector<TraceSpan>> tracks;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    auto start = static_cast<int64_t>(std::llround(e.at("ts").get<double>() * 1000.0));
    auto dur = static_cast<int64_t>(std::llround(e.at("dur").get<double>() * 1000.0));
    tracks[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(
        {start, start + dur, e.at("name").get<std::string>()});
  }
  return tracks;
}

// True when the spans of one track form a forest: each one lies inside or after the others.
bool nests(std::vector<TraceSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const TraceSpan& a, const TraceSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::vector<TraceSpan> open;
  for (const TraceSpan& s : spans) {
    while (!open.empty() && open.back().end_ns <= s.start_ns && s.end_ns > open.back().end_ns)
      open.pop_back();
    if (!open.empty() && s.end_ns > open.back().end_ns) return false;
    open.push_back(s);
  }
  return true;
}

nlohmann::json trace_of(const std::vector<ReplayReport>& reports) {
  std::ostringstream out;
  write_chrome_trace(out, reports);
  return nlohmann::json::parse(out.str());
}

}  // namespace

// StatsMode::Exact: exact percentiles. The default sketch's are checked in test_stats.cpp.
TEST_CASE("RegionTiming is read through methods; regions() yields references to read in place") {
  RegionSample broken = region("b", 50, 40);  // end before start: duration 0, times kept
  RegionSample lost = region("c", 1, 2);
  lost.measurable = false;
  const ReplayReport r = report(7, 3, {region("a", 100, 250), broken, lost});
  std::vector<std::string> seen;
  for (auto& t : r.regions()) {  // `auto&` binds: the range yields const RegionTiming&
    static_assert(std::is_same_v<decltype(t), const RegionTiming&>);
    seen.push_back(t.path() + ":" + std::to_string(t.start_ns()) + "-" +
                   std::to_string(t.end_ns()) + "=" + std::to_string(t.duration_ns()) +
                   (t.measurable() ? "" : "?"));
  }
  CHECK(seen == std::vector<std::string>{"a:100-250=150", "b:50-40=0", "c:0-0=0?"});
  const RegionTiming first = r.region(0);  // a copy outlives the iteration
  CHECK(&first.info() == &r.layout().regions()[0]);
  CHECK(first.name() == "a");
  CHECK(first.depth() == 0);
}

TEST_CASE("self time: duration minus the direct children, the gap between them included") {
  // parent [1000, 2000): a [1100, 1300), a gap, b [1500, 1900) with a grandchild inside b.
  const ReplayReport r =
      report(1, 0,
             {region("p", 1000, 2000), child_of(region("p/a", 1100, 1300, 1, 1), 0),
              child_of(region("p/b", 1500, 1900, 1, 1), 0),
              child_of(region("p/b/c", 1600, 1700, 1, 2), 2), region("q", 2000, 2100)});
  const RegionTiming p = r.region(0), a = r.region(1), b = r.region(2), c = r.region(3);
  CHECK(p.self_measurable());
  CHECK(p.self_ns() == p.duration_ns() - a.duration_ns() - b.duration_ns());
  CHECK(p.self_ns() == 400);
  CHECK(p.self_ns() >= b.start_ns() - a.end_ns());  // the gap between the children is self
  CHECK(b.self_ns() == 300);                        // only direct children: c, not deeper
  CHECK(a.self_ns() == a.duration_ns());            // no children
  CHECK(c.self_ns() == 100);
  CHECK(r.region(4).self_ns() == 100);
  // regions() yields the same values as region(i).
  std::vector<uint64_t> selves;
  for (const RegionTiming& t : r.regions()) selves.push_back(t.self_ns());
  CHECK(selves == std::vector<uint64_t>{400, 200, 300, 100, 100});
  // A RegionTiming made by hand knows no children.
  const RegionTiming alone(r.layout().regions()[0], 1000, 2000);
  CHECK(alone.self_ns() == 1000);
  CHECK(alone.self_measurable());
}

TEST_CASE("self time: an unmeasurable child or region makes self unmeasurable") {
  RegionSample lost = child_of(region("p/lost", 0, 0, 1, 1), 0);
  lost.measurable = false;
  const ReplayReport r = report(1, 0,
                                {region("p", 0, 1000), child_of(region("p/a", 100, 200, 1, 1), 0),
                                 lost, child_of(region("p/lost/x", 300, 400, 1, 2), 2)});
  CHECK(r.region(0).measurable());
  CHECK_FALSE(r.region(0).self_measurable());
  CHECK(r.region(0).self_ns() == 0);
  CHECK(r.region(1).self_measurable());
  CHECK_FALSE(r.region(2).self_measurable());  // not measurable itself
  CHECK(r.region(3).self_measurable());        // its parent's state does not matter
  CHECK(r.region(3).self_ns() == 100);

  StatsAccumulator acc(StatsMode::Exact);
  acc.add(r);
  const std::vector<RegionStats> stats = acc.stats();
  CHECK(stats[0].count == 1);
  CHECK(stats[0].self_count == 0);
  CHECK(stats[0].self_p50_ns == 0);
  std::ostringstream csv;
  write_reports_csv(csv, {r});
  CHECK(csv.str().find("\n1,0,host,0,p,0,1,,0,1000,1000,,0,1000,,\n") != std::string::npos);
  CHECK(csv.str().find("p/a,1,1,,100,200,100,100,") != std::string::npos);
}

TEST_CASE("self time: overlapping children count once, and only inside the parent") {
  // Children on two lanes overlap each other: [100, 400) and [300, 600) cover 500 ns of the
  // parent [0, 1000); a plain sum (600) would overstate them.
  const ReplayReport lanes =
      report(1, 0,
             {region("p", 0, 1000), child_of(region("p/a", 100, 400, 1, 1), 0),
              child_of(region("p/b", 300, 600, 2, 1), 0)});
  CHECK(lanes.region(0).self_ns() == 500);
  // Children out of start order (opened on one stream, run first on another) give the same.
  const ReplayReport reversed = report(
      1, 0,
      {region("p", 0, 1000), child_of(region("p/b", 300, 600, 2, 1), 0),
       child_of(region("p/a", 100, 400, 1, 1), 0), child_of(region("p/c", 800, 900, 2, 1), 0)});
  CHECK(reversed.region(0).self_ns() == 400);
  // A child on another stream that runs past the parent's edges: only its part inside counts,
  // so self never goes negative.
  const ReplayReport edges =
      report(1, 0,
             {region("p", 1000, 2000), child_of(region("p/early", 500, 1200, 2, 1), 0),
              child_of(region("p/late", 1900, 3000, 2, 1), 0)});
  CHECK(edges.region(0).self_ns() == 700);  // 1000 - 200 - 100
  const ReplayReport covering =
      report(1, 0, {region("p", 1000, 2000), child_of(region("p/all", 0, 5000, 2, 1), 0)});
  CHECK(covering.region(0).self_ns() == 0);
  CHECK(covering.region(0).self_measurable());
  // Random children: 0 <= self <= duration, and = duration - sum when they neither overlap nor
  // leave the parent.
  std::mt19937_64 rng(20);
  for (int round = 0; round < 200; ++round) {
    std::vector<RegionSample> regions = {region("p", 1000, 2000)};
    for (int i = 0; i < 6; ++i) {
      const uint64_t start = 500 + rng() % 2000;
      regions.push_back(child_of(region("p/c", start, start + rng() % 400, 1, 1), 0));
    }
    const RegionTiming p = report(1, 0, regions).region(0);
    CHECK(p.self_ns() <= p.duration_ns());
    uint64_t covered = 0;  // by brute force, one nanosecond at a time
    for (uint64_t t = 1000; t < 2000; ++t)
      for (size_t i = 1; i < regions.size(); ++i)
        if (regions[i].start_ns <= t && t < regions[i].end_ns) {
          ++covered;
          break;
        }
    CHECK(p.self_ns() == 1000 - covered);
  }
}

TEST_CASE("stats: count, min, mean and nearest-rank percentiles over known samples") {
  StatsAccumulator acc(StatsMode::Exact);
  for (uint64_t i = 1; i <= 20; ++i)
    acc.add(report(1, i - 1, {region("a", 0, i * 100), region("a/b", 0, 7)}));
  acc.add(report(2, 0, {region("c", 10, 15)}));
  acc.add(report(2, 1, {region("c", 10, 11)}));
  acc.add(report(2, 2, {region("c", 10, 13)}));

  std::vector<RegionStats> stats = acc.stats();
  REQUIRE(stats.size() == 3);
  // First-seen order, keyed by path.
  CHECK(stats[0].path == "a");
  CHECK(stats[1].path == "a/b");
  CHECK(stats[2].path == "c");
  CHECK(stats[0].count == 20);
  CHECK(stats[0].min_ns == 100);
  CHECK(stats[0].max_ns == 2000);
  CHECK(stats[0].mean_ns == 1050);
  CHECK(stats[0].p50_ns == 1000);  // rank ceil(0.50 * 20) = 10
  CHECK(stats[0].p95_ns == 1900);  // rank ceil(0.95 * 20) = 19
  CHECK(stats[1].count == 20);
  CHECK(stats[1].min_ns == 7);
  CHECK(stats[1].p95_ns == 7);
  // Samples 5, 1, 3: p50 is rank 2 (3), p95 rank 3 (5), mean 3.
  CHECK(stats[2].count == 3);
  CHECK(stats[2].min_ns == 1);
  CHECK(stats[2].mean_ns == 3);
  CHECK(stats[2].p50_ns == 3);
  CHECK(stats[2].p95_ns == 5);
  CHECK(stats[2].max_ns == 5);

  acc.add(report(3, 0, {region("single", 0, 42)}));
  RegionStats single = acc.stats().back();
  CHECK(single.p50_ns == 42);
  CHECK(single.p95_ns == 42);

  acc.clear();
  CHECK(acc.stats().empty());
}

TEST_CASE("stats table: aligned columns in microseconds with three decimals") {
  StatsAccumulator acc;
  acc.add(report(1, 0, {region("forward", 0, 1500), region("forward/a_long_layer_name", 0, 2)}));
  std::ostringstream out;
  write_stats_table(out, acc.stats());
  std::vector<std::string> lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("region", 0) == 0);
  for (const char* column :
       {"count", "min_us", "mean_us", "p50_us", "p95_us", "max_us", "self_p50_us"})
    CHECK(lines[0].find(column) != std::string::npos);
  CHECK(lines[0].size() == lines[1].size());
  CHECK(lines[1].size() == lines[2].size());
  CHECK(lines[1].find("1.500") != std::string::npos);
  CHECK(lines[2].find("0.002") != std::string::npos);
  // Numbers end in the same column as their header; the last column is the self p50 (these
  // regions have no parent links, so self = duration).
  CHECK(lines[1].rfind("1.500") + 5 == lines[0].size());
  CHECK(lines[0].rfind("self_p50_us") + 11 == lines[0].size());
}

TEST_CASE("stats table: a context column only where rows come from more than one context") {
  StatsAccumulator acc;
  acc.add(report(4, 0, {region("forward", 0, 1500)}));
  acc.add(report(0, 0, {region("forward", 0, 2500)}));  // graph_id 0: an eager call
  std::ostringstream out;
  write_stats_table(out, acc.stats());
  std::vector<std::string> lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("  context") + 9 == lines[0].size());
  CHECK(lines[1].rfind("  graph 4") + 9 == lines[1].size());
  CHECK(lines[2].rfind("  eager") + 7 == lines[2].size());
}

TEST_CASE("stats csv: header and exact values") {
  StatsAccumulator acc;
  for (uint64_t d : {100, 300}) acc.add(report(1, 0, {region("a,b", 0, d)}));
  std::ostringstream out;
  write_stats_csv(out, acc.stats());
  std::vector<std::string> lines = lines_of(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "path,depth,count,min_ns,mean_ns,p50_ns,p95_ns,max_ns,self_count,self_min_ns,self_mean_ns,"
        "self_p50_ns,self_p95_ns,self_max_ns,graph_id,first_call,p05_ns,replays_run,replays_timed,"
        "graph_label,schema_version");
  // replays_run/replays_timed: 0 where the statistics do not come from Profiler::stats(); no
  // label without a StatsRun; the schema's version on every row.
  CHECK(lines[1] == "\"a,b\",0,2,100,200,100,300,300,2,100,200,100,300,300,1,0,100,0,0,,2");
  // The header is stats_csv_columns(), the schema readers find columns by.
  std::string header;
  for (const std::string& column : stats_csv_columns())
    header += (header.empty() ? "" : ",") + column;
  CHECK(lines[0] == header);
}

TEST_CASE("reports csv: one row per region, metadata as k=v;k=v, fields escaped") {
  std::vector<ReplayReport> reports = {
      report(7, 3,
             {region("outer", 1000, 2000, 5, 0, {{"bytes", "4096"}, {"note", "a,b"}}),
              region("outer/in\"ner", 1100, 1200, 5, 1, {{"q", "say \"hi\""}})})};
  std::ostringstream out;
  write_reports_csv(out, reports);
  std::vector<std::string> lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(
      lines[0] ==
      "graph_id,replay_index,backend,device,path,depth,stream_id,lane,start_ns,end_ns,duration_ns,"
      "self_ns,raw_start_ns,raw_end_ns,metadata,marker_kernels");
  std::string header;
  for (const std::string& column : reports_csv_columns())
    header += (header.empty() ? "" : ",") + column;
  CHECK(lines[0] == header);
  CHECK(lines[1] == "7,3,host,0,outer,0,5,,1000,2000,1000,1000,1000,2000,\"bytes=4096;note=a,b\",");
  CHECK(lines[2] ==
        "7,3,host,0,\"outer/in\"\"ner\",1,5,,1100,1200,100,100,1100,1200,\"q=say \"\"hi\"\"\",");

  std::ostringstream newline;
  write_reports_csv(newline, {report(1, 0, {region("x", 0, 1, 1, 0, {{"k", "line\nbreak"}})})});
  CHECK(newline.str().find("\"k=line\nbreak\"") != std::string::npos);
}

TEST_CASE("chrome trace: events, units, args and metadata events") {
  std::vector<ReplayReport> reports = {
      report(4, 0,
             {region("step", 10'000, 11'500, 3, 0, {{"layer", "0"}}),
              child_of(region("step/mm", 10'250, 10'750, 3, 1), 0)}),
      report(4, 1, {region("step", 20'000, 21'000, 3, 0, {{"layer", "0"}})}),
      report(0, 0, {region("eager", 30'000, 30'001, 9)})};
  nlohmann::json trace = trace_of(reports);
  CHECK(trace.at("displayTimeUnit") == "ns");
  const auto& events = trace.at("traceEvents");

  std::vector<nlohmann::json> x;
  std::set<std::pair<int, int>> named_threads;
  std::set<int> named_processes;
  for (const auto& e : events) {
    if (e.at("ph") == "X") x.push_back(e);
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      named_threads.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      named_processes.insert(e.at("pid").get<int>());
      CHECK(e.at("args").at("name") == "host device 0 (cpu)");
    }
  }
  REQUIRE(x.size() == 4);
  // One process for the one (backend, device), one thread per stream, all of them named.
  CHECK(named_processes.size() == 1);
  std::set<int> tids;
  for (const auto& e : x) {
    CHECK(named_processes.count(e.at("pid").get<int>()) == 1);
    CHECK(named_threads.count({e.at("pid").get<int>(), e.at("tid").get<int>()}) == 1);
    tids.insert(e.at("tid").get<int>());
  }
  CHECK(tids.size() == 2);  // streams 3 and 9

  auto find = [&](const std::string& name, uint64_t replay) {
    for (const auto& e : x)
      if (e.at("name") == name && e.at("args").at("replay_index") == replay) return e;
    FAIL("no event " << name);
    return nlohmann::json();
  };
  nlohmann::json step0 = find("step", 0);
  CHECK(step0.at("ts").get<double>() == 0.0);  // relative to the earliest start
  CHECK(step0.at("dur").get<double>() == doctest::Approx(1.5));
  CHECK(step0.at("cat") == "graph 4");
  CHECK(step0.at("args").at("layer") == "0");
  CHECK(step0.at("args").at("graph_id") == 4);
  CHECK(step0.at("args").at("path") == "step");
  nlohmann::json mm = find("mm", 0);
  CHECK(mm.at("ts").get<double>() == doctest::Approx(0.25));
  CHECK(mm.at("dur").get<double>() == doctest::Approx(0.5));
  CHECK(mm.at("args").at("path") == "step/mm");
  CHECK(step0.at("args").at("self_us").get<double>() == doctest::Approx(1.0));  // 1.5 - 0.5
  CHECK(mm.at("args").at("self_us").get<double>() == doctest::Approx(0.5));
  CHECK(find("step", 1).at("ts").get<double>() == doctest::Approx(10.0));
  nlohmann::json eager = find("eager", 0);
  CHECK(eager.at("cat") == "eager");
  CHECK(eager.at("dur").get<double>() == doctest::Approx(0.001));
  CHECK(eager.at("args").at("graph_id") == 0);

  for (const auto& [track, spans] : tracks_of(trace)) CHECK(nests(spans));
}

TEST_CASE("chrome trace: overlapping regions of one stream are split onto nesting tracks") {
  // On stream 1: A [0,100) and B [50,150) overlap without nesting; C lies in both; D follows A
  // inside B. A replay of another graph on the same stream overlaps both.
  std::vector<ReplayReport> reports = {
      report(
          1, 0,
          {region("A", 0, 100), region("B", 50, 150), region("C", 60, 70), region("D", 100, 120)}),
      report(2, 0, {region("E", 90, 200), child_of(region("E/F", 95, 130, 1, 1), 0)})};
  nlohmann::json trace = trace_of(reports);
  auto tracks = tracks_of(trace);
  size_t events = 0;
  std::map<std::string, int> tid_of;
  for (const auto& [track, spans] : tracks) {
    CHECK_MESSAGE(nests(spans), "track " << track.second << " does not nest");
    events += spans.size();
    for (const TraceSpan& s : spans) tid_of[s.name] = track.second;
  }
  CHECK(events == 6);
  CHECK(tid_of["A"] != tid_of["B"]);
  CHECK(tid_of["E"] != tid_of["A"]);
  CHECK(tid_of["E"] != tid_of["B"]);
  CHECK(tid_of["F"] == tid_of["E"]);  // a child stays with its parent when it fits there
  CHECK(tracks.size() >= 3);
  bool overlap_named = false;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name" &&
        e.at("args").at("name") == "stream 1 (overlap 1)")
      overlap_named = true;
  CHECK(overlap_named);

  // Properly nested regions and back-to-back siblings need no extra track.
  nlohmann::json simple = trace_of(
      {report(1, 0,
              {region("a", 0, 100), region("a/b", 0, 40, 1, 1), region("a/c", 40, 100, 1, 1),
               region("d", 100, 100), region("e", 100, 180)})});
  CHECK(tracks_of(simple).size() == 1);
}

TEST_CASE("chrome trace: a stream id with the top bit set has its own track, named by its id") {
  // The writer once marked lane tracks with bit 63 of the track key and cleared it from stream
  // ids, so stream 2^63 + 1 shared stream 1's track and was named "stream 1" (fuzz_exporters).
  const uint64_t high = (uint64_t{1} << 63) + 1;
  nlohmann::json trace =
      trace_of({report(1, 0, {region("low", 0, 100, 1), region("high", 0, 100, high)})});
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name");
  std::map<std::string, std::string> track_of_region;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X")
      track_of_region[e.at("name")] =
          thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}];
  CHECK(track_of_region["low"] == "stream 1");
  CHECK(track_of_region["high"] == "stream " + std::to_string(high));
  CHECK(thread_names.size() == 2);  // two streams, no overlap track
}

TEST_CASE("chrome trace: random intervals always end up on nesting tracks") {
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 50; ++round) {
    std::vector<RegionSample> regions;
    for (int i = 0; i < 40; ++i) {
      uint64_t start = rng() % 1000;
      uint64_t length = rng() % 300;
      regions.push_back(region("r" + std::to_string(i), start, start + length, 1 + rng() % 2));
      // Parents that need not contain the child: the exporter must still produce nesting tracks.
      if (i > 0 && rng() % 2 == 0) regions.back().info.parent = static_cast<int>(rng() % i);
    }
    size_t total = regions.size();
    auto tracks = tracks_of(trace_of({report(1, 0, std::move(regions))}));
    size_t events = 0;
    for (const auto& [track, spans] : tracks) {
      CHECK(nests(spans));
      events += spans.size();
    }
    CHECK(events == total);
  }
}

TEST_CASE("exporters accept empty input") {
  std::ostringstream table, csv, reports_csv, trace;
  write_stats_table(table, {});
  write_stats_csv(csv, {});
  write_reports_csv(reports_csv, {});
  write_chrome_trace(trace, {});
  CHECK(lines_of(table.str()).size() == 1);
  CHECK(lines_of(csv.str()).size() == 1);
  CHECK(lines_of(reports_csv.str()).size() == 1);
  nlohmann::json parsed = nlohmann::json::parse(trace.str());
  CHECK(parsed.at("traceEvents").empty());
}

// Note [Marker overhead] (timing/engine/marker_overhead.cpp), on a layout made by hand: p encloses
// a, b, c and d, which follow each other and share markers.
TEST_CASE("marker overhead: off once per transition, half at each edge; short regions read 0") {
  auto make = [](uint64_t overhead) {
    ReportSource source{"host", 0, "cpu", "steady_clock", 1, overhead};
    auto info = [](std::string name, int parent, uint32_t begin, uint32_t end) {
      RegionInfo r;
      r.name = name;
      r.path = parent < 0 ? name : "p/" + name;
      r.depth = parent < 0 ? 0 : 1;
      r.parent = parent;
      r.stream_id = 1;
      r.begin_marker = begin;
      r.end_marker = end;
      return r;
    };
    auto layout = std::make_shared<const ReportLayout>(
        source, std::vector<RegionInfo>{info("p", -1, 0, 4), info("a", 0, 0, 1), info("b", 0, 1, 2),
                                        info("c", 0, 2, 3), info("d", 0, 3, 4)});
    return ReplayReport(layout, 1, 0, {1000, 2000, 2060, 2160, 5000});
  };
  const ReplayReport r = make(100);
  CHECK(r.marker_overhead_ns() == 100);
  struct Want {
    uint64_t start, end, raw_start, raw_end, duration;
  };
  const std::vector<Want> want = {
      // p: 4 transitions, each what it read beyond the overhead (Note [Marker transitions])
      {1050, 4950, 1000, 5000, 900 + 0 + 0 + 2740},
      {1050, 1950, 1000, 2000, 900},   // a
      {2000, 2060, 2000, 2060, 0},     // b: 60 read, no longer than the overhead: 0, edges as read
      {2060, 2160, 2060, 2160, 0},     // c: exactly the overhead
      {2210, 4950, 2160, 5000, 2740},  // d
  };
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    const RegionTiming t = r.region(i);
    CHECK(t.start_ns() == want[i].start);
    CHECK(t.end_ns() == want[i].end);
    CHECK(t.duration_ns() == want[i].duration);
    CHECK(t.span_ns() == want[i].end - want[i].start);
    CHECK(t.raw_start_ns() == want[i].raw_start);
    CHECK(t.raw_end_ns() == want[i].raw_end);
    CHECK(t.raw_duration_ns() == want[i].raw_end - want[i].raw_start);
    CHECK(t.duration_ns() <= t.raw_duration_ns());
  }
  // p's own time: nothing between its children, whose durations make up its own exactly.
  CHECK(r.region(0).self_ns() == 0);
  CHECK(r.region(1).self_ns() == 900);

  // The statistics take the same overhead off, staged or not (Note [Stats fold]).
  StatsAccumulator acc(StatsMode::Exact);
  for (int k = 0; k < 40; ++k) acc.add(r);
  const std::vector<RegionStats> stats = acc.stats();
  REQUIRE(stats.size() == 5);
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(stats[i].count == 40);
    CHECK(stats[i].min_ns == static_cast<double>(want[i].duration));
    CHECK(stats[i].max_ns == static_cast<double>(want[i].duration));
  }
  CHECK(stats[0].self_p50_ns == 0.0);

  // The exporters write what the regions report, and the raw duration where it differs.
  std::ostringstream csv;
  write_reports_csv(csv, {r});
  CHECK(csv.str().find(",p/a,1,1,,1050,1950,900,900,1000,2000,") != std::string::npos);
  CHECK(csv.str().find(",p/b,1,1,,2000,2060,0,0,2000,2060,") != std::string::npos);
  const nlohmann::json trace = trace_of({r});
  int with_raw = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    if (event["name"] == "a") CHECK(event["args"]["raw_us"] == 1.0);
    if (event["name"] == "b") CHECK(event["args"]["raw_us"] == 0.06);
    with_raw += event["args"].contains("raw_us") ? 1 : 0;
  }
  CHECK(with_raw == 5);  // every region: each lost some or all of what its markers read
  for (const auto& event : trace["traceEvents"])  // p's duration is shorter than its slice
    if (event["ph"] == "X" && event["name"] == "p") CHECK(event["args"]["duration_us"] == 3.64);

  // Without an overhead every region is what its markers read.
  const ReplayReport plain = make(0);
  for (const RegionTiming& t : plain.regions()) {
    CHECK(t.start_ns() == t.raw_start_ns());
    CHECK(t.end_ns() == t.raw_end_ns());
  }
  CHECK(plain.region(0).self_ns() == 0);  // the children cover it all
}

// Note [Edges inside the parent] (timing/model/report.cpp): a child no longer than the overhead
// keeps the edges its markers read, and its parent, longer, moves in by half the overhead at each
// edge; a short child at the parent's start or end is clamped into the parent's edges, also
// through a short ancestor between them, but not one on another stream. Found by gpu-check's
// sanitizer stage, where the overhead is milliseconds and a 20 us child ended after its parent.
TEST_CASE("marker overhead: a short child stays inside its parent's edges") {
  ReportSource source{"host", 0, "cpu", "steady_clock", 1, 100};
  auto info = [](std::string name, int parent, uint32_t begin, uint32_t end, uint64_t stream) {
    RegionInfo r;
    r.name = name;
    r.parent = parent;
    r.stream_id = stream;
    r.begin_marker = begin;
    r.end_marker = end;
    return r;
  };
  // p [1000, 3050] holds first (an empty module sharing p's begin marker), work, last (sharing
  // p's end marker) and inner inside last; other runs on stream 2.
  auto layout = std::make_shared<const ReportLayout>(
      source, std::vector<RegionInfo>{info("p", -1, 0, 3, 1), info("first", 0, 0, 1, 1),
                                      info("work", 0, 1, 2, 1), info("last", 0, 2, 3, 1),
                                      info("inner", 3, 2, 3, 1), info("other", 0, 4, 5, 2)});
  const ReplayReport r(layout, 1, 0, {1000, 1040, 3000, 3050, 900, 980});
  struct Want {
    uint64_t start, end, duration;
  };
  const std::vector<Want> want = {
      {1050, 3000, 1860},  // p: moved in
      {1050, 1050, 0},     // first: read [1000, 1040], clamped to p's start
      {1090, 2950, 1860},  // work: moved in
      {3000, 3000, 0},     // last: read [3000, 3050], clamped to p's end
      {3000, 3000, 0},     // inner: clamped through last (which did not move in) into p
      {900, 980, 0},       // other: another stream, as read
  };
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    const RegionTiming t = r.region(i);
    CHECK(t.start_ns() == want[i].start);
    CHECK(t.end_ns() == want[i].end);
    CHECK(t.duration_ns() == want[i].duration);
    CHECK(t.raw_start_ns() == r.marker_times()[layout->regions()[i].begin_marker]);
  }
}

// Note [Marker transitions]: a parent loses every transition between its children, so with
// children back to back (shared markers) and glue work between two of them, parent =
// sum(children) + self exactly, the self time is the glue alone, and an empty region (two
// markers back to back, nothing enqueued between them) reads 0.
TEST_CASE("marker transitions: parent = sum(children) + self, exactly") {
  // p(0..6) = a(0,1) [glue] b(2,3) q(3,5){x(3,4) e(4,5): empty, back to back} ; c(5,6)
  ReportSource source{"host", 0, "cpu", "steady_clock", 1, 100};
  source.marker_back_to_back_ns = 30;
  auto info = [](std::string name, int parent, uint32_t begin, uint32_t end) {
    RegionInfo r;
    r.name = std::move(name);
    r.parent = parent;
    r.stream_id = 7;
    r.begin_marker = begin;
    r.end_marker = end;
    return r;
  };
  auto layout = std::make_shared<const ReportLayout>(
      source,
      std::vector<RegionInfo>{info("p", -1, 0, 6), info("a", 0, 0, 1), info("b", 0, 2, 3),
                              info("q", 0, 3, 5), info("x", 3, 3, 4), info("e", 3, 4, 5),
                              info("c", 0, 5, 6)},
      std::vector<uint32_t>{5});
  CHECK(layout->marker_transitions(0) == 6);
  CHECK(layout->back_to_back_transitions(0) == 1);
  CHECK(layout->marker_transitions(5) == 1);
  CHECK(layout->back_to_back_transitions(5) == 1);
  //                          0     1     2     3     4     5     6
  const ReplayReport r(layout, 1, 0, {1000, 2000, 2600, 3600, 5600, 5640, 7000});
  auto d = [&](size_t i) { return r.region(i).duration_ns(); };
  CHECK(d(1) == 900);   // a
  CHECK(d(2) == 900);   // b
  CHECK(d(4) == 1900);  // x
  CHECK(d(5) == 0);     // e: back to back, no work between its markers
  CHECK(d(3) == 1900);  // q = x + e, its self 0
  CHECK(r.region(3).self_ns() == 0);
  CHECK(d(3) == d(4) + d(5));
  CHECK(d(6) == 1260);                               // c
  CHECK(d(0) == 900 + 500 + 900 + 1900 + 0 + 1260);  // p: its transitions' work
  CHECK(r.region(0).self_ns() == 500);  // the glue between a and b: 600 read, one transition
  CHECK(d(0) == d(1) + d(2) + d(3) + d(6) + r.region(0).self_ns());
  // The statistics agree, staged or not.
  StatsAccumulator acc(StatsMode::Exact);
  for (int k = 0; k < 20; ++k) acc.add(r);
  for (const RegionStats& st : acc.stats()) {
    CAPTURE(st.path);
    for (size_t i = 0; i < r.size(); ++i)
      if (r.region(i).path() == st.path) {
        CHECK(st.p50_ns == static_cast<double>(d(i)));
        CHECK(st.self_p50_ns == static_cast<double>(r.region(i).self_ns()));
      }
  }
}
