// accgraph-bench-host: (a) replay overhead per node, (b) timed vs untimed replay, (r) a replay loop
// running ahead of the device, timed vs untimed, on the host backend, (c) the Chrome trace writer
// vs the one before it streamed. Every figure is a ratio
// against a baseline measured side by side in the same run, in interleaved rounds (medians), so
// machine noise hits both alike. Numbers, not pass/fail.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../common/run_ahead.hpp"
#include "../common/timing_v2.hpp"
#include "accgraph/accgraph.hpp"
#include "exported_text.hpp"

#if ACCGRAPH_BENCH_WITH_PERFETTO
#include "accgraph/perfetto.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using accgraph::AcceleratorGraph;
using accgraph::Buffer;
using accgraph::Stream;
namespace timing = accgraph::timing;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

nlohmann::json results = nlohmann::json::object();

// (a) One replay (enqueue + wait) of a graph of `nodes` 64-byte fills, against enqueueing the same
// fills eagerly and waiting: what the graph costs or saves per node on this backend.
void bench_replay_overhead() {
  fmt::print(
      "(a) replay overhead per node: replay+synchronize vs the same ops eagerly "
      "(median us per run)\n");
  fmt::print("{:>7} {:>12} {:>12} {:>10} {:>14} {:>14}\n", "nodes", "replay us", "eager us",
             "ratio", "replay us/node", "eager us/node");
  Stream s = Stream::create("host");
  Buffer target = Buffer::allocate(s, 64);
  for (int nodes : {1, 10, 100, 1000}) {
    AcceleratorGraph graph("host");
    graph.capture_begin(s);
    for (int i = 0; i < nodes; ++i) s.fill(target, static_cast<uint8_t>(i));
    graph.capture_end();
    const int per_round = nodes >= 1000 ? 20 : 200, rounds = 25, warmup = 3;
    std::vector<double> replay_us, eager_us;
    auto time_replays = [&] {
      auto t0 = Clock::now();
      for (int r = 0; r < per_round; ++r) {
        graph.replay();
        s.synchronize();
      }
      return us_since(t0) / per_round;
    };
    auto time_eager = [&] {
      auto t0 = Clock::now();
      for (int r = 0; r < per_round; ++r) {
        for (int i = 0; i < nodes; ++i) s.fill(target, static_cast<uint8_t>(i));
        s.synchronize();
      }
      return us_since(t0) / per_round;
    };
    for (int round = 0; round < rounds; ++round) {
      // Alternate which goes first, so a frequency ramp or a neighbour's burst hits both alike.
      double replay = 0, eager = 0;
      if (round % 2 == 0) {
        replay = time_replays();
        eager = time_eager();
      } else {
        eager = time_eager();
        replay = time_replays();
      }
      if (round < warmup) continue;
      replay_us.push_back(replay);
      eager_us.push_back(eager);
    }
    double r = median(replay_us), e = median(eager_us);
    fmt::print("{:>7} {:>12.2f} {:>12.2f} {:>9.2f}x {:>14.3f} {:>14.3f}\n", nodes, r, e, r / e,
               r / nodes, e / nodes);
    results["a_replay_overhead"].push_back(
        {{"nodes", nodes}, {"replay_us", r}, {"eager_us", e}, {"ratio_replay_vs_eager", r / e}});
  }
}

// (b) R replays back to back then one wait, of a graph with `regions` regions around tiny fills:
// untimed vs timed with lazy delivery (the ring) vs Immediate delivery (waits every replay).
void bench_timed_replay() {
  fmt::print("\n(b) timed vs untimed replay: {} replays back to back (median us per replay)\n",
             200);
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "regions", "untimed", "timed lazy",
             "immediate", "lazy x", "immed. x");
  Stream s = Stream::create("host");
  Buffer target = Buffer::allocate(s, 64);
  for (int regions : {10, 100}) {
    struct Variant {
      std::unique_ptr<timing::Profiler> profiler;
      std::unique_ptr<AcceleratorGraph> graph;
    };
    auto make = [&](bool timed, timing::Delivery delivery) {
      Variant v;
      v.graph = std::make_unique<AcceleratorGraph>("host");
      if (timed) {
        timing::ProfilerOptions options;
        options.delivery = delivery;
        options.keep_reports = 0;
        v.profiler = std::make_unique<timing::Profiler>(options);
        v.profiler->attach(*v.graph);
      }
      v.graph->capture_begin(s);
      for (int r = 0; r < regions; ++r) {
        if (v.profiler) v.profiler->begin(s, fmt::format("r{}", r));
        s.fill(target, static_cast<uint8_t>(r));
        if (v.profiler) v.profiler->end(s);
      }
      v.graph->capture_end();
      return v;
    };
    std::vector<Variant> variants;
    variants.push_back(make(false, timing::Delivery::Lazy));
    variants.push_back(make(true, timing::Delivery::Lazy));
    variants.push_back(make(true, timing::Delivery::Immediate));
    const int replays = 200, rounds = 25, warmup = 3;
    std::vector<std::vector<double>> us(variants.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < variants.size(); ++k) {
        size_t i = (k + static_cast<size_t>(round)) % variants.size();  // rotate the order
        Variant& v = variants[i];
        auto t0 = Clock::now();
        for (int r = 0; r < replays; ++r) v.graph->replay();
        if (v.profiler) v.profiler->flush();  // every report delivered, inside the timing
        s.synchronize();
        double per_replay = us_since(t0) / replays;
        if (round >= warmup) us[i].push_back(per_replay);
      }
    }
    double u = median(us[0]), lazy = median(us[1]), immediate = median(us[2]);
    fmt::print("{:>8} {:>12.2f} {:>12.2f} {:>12.2f} {:>9.2f}x {:>9.2f}x\n", regions, u, lazy,
               immediate, lazy / u, immediate / u);
    results["b_timed_replay"].push_back(
        {{"regions", regions},
         {"untimed_us", u},
         {"timed_lazy_us", lazy},
         {"timed_immediate_us", immediate},
         {"lazy_ratio", lazy / u},
         {"immediate_ratio", immediate / u},
         {"reports_per_variant", variants[1].profiler->delivered()}});
  }
}

// ---- (c) Chrome trace export ----------------------------------------------------------------

// The Chrome trace writer as it was before it streamed (timing/exporters.cpp at commit 4b21339):
// the whole trace as one nlohmann::json document, dumped at the end. Kept here only as the
// baseline of (c); the library no longer has it.
namespace reference {

using timing::RegionTiming;
using timing::ReplayReport;

// The baseline writer makes its text valid the way the library does (Note [Exported text]).
using accgraph::timing::detail::valid_utf8;

struct TraceEvent {
  const ReplayReport* report;
  RegionTiming region;  // made on demand from the report (48 bytes)
  size_t order;
  const TraceEvent* parent = nullptr;
  int lane = -1;
};

void assign_lanes(std::vector<TraceEvent*>& events) {
  std::sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) {
    return std::make_tuple(a->region.start_ns(), ~a->region.end_ns(), a->region.depth(), a->order) <
           std::make_tuple(b->region.start_ns(), ~b->region.end_ns(), b->region.depth(), b->order);
  });
  std::vector<std::vector<const RegionTiming*>> lanes;
  auto fits = [&](size_t lane, const RegionTiming& r) {
    auto& open = lanes[lane];
    while (!open.empty() && open.back()->end_ns() <= r.start_ns() &&
           r.end_ns() > open.back()->end_ns())
      open.pop_back();
    return open.empty() || r.end_ns() <= open.back()->end_ns();
  };
  for (TraceEvent* event : events) {
    const RegionTiming& r = event->region;
    size_t lane = 0;
    if (event->parent != nullptr && event->parent->lane >= 0 &&
        fits(static_cast<size_t>(event->parent->lane), r)) {
      lane = static_cast<size_t>(event->parent->lane);
    } else {
      while (lane < lanes.size() && !fits(lane, r)) ++lane;
    }
    if (lane == lanes.size()) lanes.emplace_back();
    lanes[lane].push_back(&r);
    event->lane = static_cast<int>(lane);
  }
}

}  // namespace reference

void write_chrome_trace_document_reference(std::ostream& out,
                                           const std::vector<timing::ReplayReport>& reports) {
  using namespace reference;
  std::vector<TraceEvent> events;
  size_t total = 0;
  for (const ReplayReport& r : reports) total += r.size();
  events.reserve(total);
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (const ReplayReport& r : reports) {
    const size_t first = events.size();
    for (const RegionTiming& t : r.regions()) {
      events.push_back({&r, t, events.size()});
      if (t.measurable()) origin = std::min(origin, t.start_ns());
    }
    for (size_t i = first; i < events.size(); ++i) {
      int parent = events[i].region.parent();
      if (parent >= 0 && static_cast<size_t>(parent) < r.size() &&
          r.region(parent).stream_id() == events[i].region.stream_id() &&
          r.region(parent).measurable())
        events[i].parent = &events[first + static_cast<size_t>(parent)];
    }
  }

  using ProcessKey = std::pair<std::string, int>;
  std::map<ProcessKey, int> pids;
  std::map<ProcessKey, std::string> process_names;
  std::map<std::pair<int, uint64_t>, std::vector<TraceEvent*>> by_stream;
  for (TraceEvent& e : events) {
    ProcessKey key{e.report->backend(), e.report->device()};
    auto [it, inserted] = pids.emplace(key, 0);
    if (inserted) {
      it->second = static_cast<int>(pids.size());
      process_names[key] = valid_utf8(
          e.report->device_name().empty()
              ? fmt::format("{} device {}", key.first, key.second)
              : fmt::format("{} device {} ({})", key.first, key.second, e.report->device_name()));
    }
    if (e.region.measurable()) by_stream[{it->second, e.region.stream_id()}].push_back(&e);
  }

  nlohmann::json trace_events = nlohmann::json::array();
  for (const auto& [key, pid] : pids)
    trace_events.push_back({{"name", "process_name"},
                            {"ph", "M"},
                            {"pid", pid},
                            {"tid", 0},
                            {"args", {{"name", process_names[key]}}}});

  int next_tid = 1;
  for (auto& [key, stream_events] : by_stream) {
    const auto [pid, stream_id] = key;
    assign_lanes(stream_events);
    int lanes = 0;
    for (const TraceEvent* e : stream_events) lanes = std::max(lanes, e->lane + 1);
    const int first_tid = next_tid;
    next_tid += lanes;
    for (int lane = 0; lane < lanes; ++lane) {
      std::string name = lane == 0 ? fmt::format("stream {}", stream_id)
                                   : fmt::format("stream {} (overlap {})", stream_id, lane);
      trace_events.push_back({{"name", "thread_name"},
                              {"ph", "M"},
                              {"pid", pid},
                              {"tid", first_tid + lane},
                              {"args", {{"name", name}}}});
      trace_events.push_back({{"name", "thread_sort_index"},
                              {"ph", "M"},
                              {"pid", pid},
                              {"tid", first_tid + lane},
                              {"args", {{"sort_index", first_tid + lane}}}});
    }
    for (const TraceEvent* e : stream_events) {
      const RegionTiming& t = e->region;
      nlohmann::json args = nlohmann::json::object();
      for (const auto& [k, v] : t.metadata()) args[valid_utf8(k)] = valid_utf8(v);
      args["path"] = valid_utf8(t.path());
      args["graph_id"] = e->report->graph_id();
      args["replay_index"] = e->report->replay_index();
      trace_events.push_back(
          {{"name", valid_utf8(t.name())},
           {"cat", e->report->graph_id() == 0 ? std::string("eager")
                                              : fmt::format("graph {}", e->report->graph_id())},
           {"ph", "X"},
           {"ts", static_cast<double>(t.start_ns() - origin) / 1000.0},
           {"dur", static_cast<double>(t.duration_ns()) / 1000.0},
           {"pid", pid},
           {"tid", first_tid + e->lane},
           {"args", std::move(args)}});
    }
  }

  nlohmann::json document = {{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ns"}};
  out << document.dump(1) << '\n';
}

// Reports like a profiled training loop's: `count` replays of 4 graphs alternating over 2
// streams, each 20 blocks of 1 + 4 nested regions (100 regions), replays on one stream
// overlapping their neighbours (so overlap tracks are assigned too), metadata on the blocks.
std::vector<timing::ReplayReport> trace_bench_reports(size_t count) {
  // One layout per graph (its replays share it, as the profiler's reports do): 20 blocks of one
  // region and 4 nested ones, markers 2i and 2i+1 for region i.
  std::vector<std::shared_ptr<const timing::ReportLayout>> layouts;
  for (uint64_t graph = 1; graph <= 4; ++graph) {
    std::vector<timing::RegionInfo> regions;
    for (int block = 0; block < 20; ++block) {
      const int parent = static_cast<int>(regions.size());
      timing::RegionInfo b;
      b.name = fmt::format("block{}", block);
      b.path = fmt::format("step/{}", b.name);
      b.stream_id = graph % 2 + 1;
      b.metadata = {{"bytes", "4096"}};
      regions.push_back(b);
      for (int op = 0; op < 4; ++op) {
        timing::RegionInfo o;
        o.name = fmt::format("op{}", op);
        o.path = fmt::format("{}/{}", b.path, o.name);
        o.depth = 1;
        o.parent = parent;
        o.stream_id = b.stream_id;
        regions.push_back(o);
      }
    }
    for (size_t i = 0; i < regions.size(); ++i) {
      regions[i].begin_marker = static_cast<uint32_t>(2 * i);
      regions[i].end_marker = static_cast<uint32_t>(2 * i + 1);
    }
    layouts.push_back(std::make_shared<const timing::ReportLayout>(
        timing::ReportSource{"host", 0, "cpu", "steady_clock", 1}, std::move(regions)));
  }
  std::vector<timing::ReplayReport> reports;
  reports.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    const uint64_t base = 1'000'000 + k * 15'000;  // spans 40 us
    std::vector<uint64_t> times;
    times.reserve(200);
    for (int block = 0; block < 20; ++block) {
      const uint64_t start = base + static_cast<uint64_t>(block) * 2000;
      times.push_back(start);
      times.push_back(start + 1900);
      for (int op = 0; op < 4; ++op) {
        times.push_back(start + static_cast<uint64_t>(op) * 450);
        times.push_back(start + static_cast<uint64_t>(op) * 450 + 400);
      }
    }
    reports.emplace_back(layouts[k % 4], k % 4 + 1, k / 4, std::move(times));
  }
  return reports;
}

// An output stream that counts the bytes and drops them, so (c) times the writer, not a disk.
struct CountingBuffer : std::streambuf {
  uint64_t bytes = 0;
  int_type overflow(int_type c) override {
    bytes += !traits_type::eq_int_type(c, traits_type::eof());
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<uint64_t>(n);
    return n;
  }
};

long max_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

// The child of (c): builds the reports, then writes them once with the old or the new writer.
// Prints "<ms> <peak RSS growth KiB> <bytes>". The peak RSS before the write is that of the
// reports (they are only built, never freed), so the growth is what the writer added at its peak.
int run_trace_child(const std::string& writer, size_t reports) {
  const std::vector<timing::ReplayReport> input = trace_bench_reports(reports);
  CountingBuffer counting;
  std::ostream out(&counting);
  const long before = max_rss_kib();
  const auto t0 = Clock::now();
  if (writer == "old") {
    write_chrome_trace_document_reference(out, input);
  } else if (writer == "pftrace") {
#if ACCGRAPH_BENCH_WITH_PERFETTO
    timing::write_perfetto_trace(out, input);
#else
    throw std::runtime_error("built without accgraph::perfetto (libprotobuf)");
#endif
  } else {
    timing::write_chrome_trace(out, input);
  }
  out.flush();
  const double ms = us_since(t0) / 1000.0;
  const long after = max_rss_kib();
  std::printf("%.1f %ld %llu\n", ms, after - before,
              static_cast<unsigned long long>(counting.bytes));
  return out ? 0 : 1;
}

// (c) The Chrome trace of `reports` x 100 regions, written by the writer before streaming (one
// nlohmann::json document) and by the streaming one, each in a fresh child process per round
// (rounds alternate which goes first), so each peak RSS is that one write's.
void bench_trace_export(const std::string& self, size_t reports, int rounds) {
  fmt::print(
      "\n(c) trace export of {} region events ({} reports x 100): Chrome JSON (old and "
      "new writer) and .pftrace, into a discarding stream; median of {} rounds, each "
      "write in a fresh process\n",
      reports * 100, reports, rounds);
  struct Sample {
    std::vector<double> ms;
    std::vector<double> growth_mib;
    uint64_t bytes = 0;
  };
  std::map<std::string, Sample> samples;
  // The native Perfetto writer of the same reports, where accgraph::perfetto was built.
  std::vector<std::string> writers = {"old", "new"};
  if (ACCGRAPH_BENCH_WITH_PERFETTO) writers.push_back("pftrace");
  const size_t count = writers.size();
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < count; ++k) {
      const std::string writer = writers[(k + static_cast<size_t>(round)) % count];
      const std::string command = fmt::format("'{}' --trace-child {} {}", self, writer, reports);
      FILE* pipe = popen(command.c_str(), "r");
      if (pipe == nullptr) throw std::runtime_error("cannot start " + command);
      double ms = 0;
      long growth_kib = 0;
      unsigned long long bytes = 0;
      const int fields = std::fscanf(pipe, "%lf %ld %llu", &ms, &growth_kib, &bytes);
      if (pclose(pipe) != 0 || fields != 3)
        throw std::runtime_error("the child '" + command + "' failed");
      Sample& s = samples[writer];
      s.ms.push_back(ms);
      s.growth_mib.push_back(static_cast<double>(growth_kib) / 1024.0);
      s.bytes = bytes;
    }
  }
  fmt::print("{:>22} {:>12} {:>18} {:>14}\n", "writer", "wall ms", "peak RSS growth MiB",
             "output MiB");
  for (const std::string& writer : writers) {
    const Sample& s = samples[writer];
    fmt::print("{:>22} {:>12.1f} {:>18.1f} {:>14.1f}\n",
               writer == "old"   ? "old (json document)"
               : writer == "new" ? "new (streaming)"
                                 : ".pftrace (Perfetto)",
               median(s.ms), median(s.growth_mib), static_cast<double>(s.bytes) / 1048576.0);
    results["c_trace_export"].push_back({{"writer", writer},
                                         {"events", reports * 100},
                                         {"wall_ms", median(s.ms)},
                                         {"peak_rss_growth_mib", median(s.growth_mib)},
                                         {"output_bytes", s.bytes}});
  }
  const Sample& o = samples["old"];
  const Sample& n = samples["new"];
  fmt::print("{:>22} {:>11.2f}x {:>17.3f}x\n", "new / old", median(n.ms) / median(o.ms),
             median(n.growth_mib) / std::max(median(o.growth_mib), 1e-9));
  if (samples.count("pftrace") != 0) {
    const Sample& p = samples["pftrace"];
    fmt::print("{:>22} {:>11.2f}x {:>17.3f}x {:>13.2f}x\n", ".pftrace / new",
               median(p.ms) / median(n.ms),
               median(p.growth_mib) / std::max(median(n.growth_mib), 1e-9),
               static_cast<double>(p.bytes) / static_cast<double>(std::max<uint64_t>(n.bytes, 1)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: accgraph-bench-host [--json FILE] [--only-trace] [--trace-reports N] "
      "[--trace-rounds R] [--memory-replays N]";
  std::string json_path;
  bool only_trace = false;
  size_t trace_reports = 10'000;
  int trace_rounds = 3;
  size_t memory_replays = 100'000;
  if (argc == 4 && std::string(argv[1]) == "--trace-child") {  // (c)'s child process
    try {
      return run_trace_child(argv[2], std::strtoull(argv[3], nullptr, 10));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accgraph-bench-host --trace-child: %s\n", e.what());
      return 1;
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--memory-replays" && i + 1 < argc) {
      memory_replays = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--only-trace") {
      only_trace = true;
    } else if (arg == "--trace-reports" && i + 1 < argc) {
      trace_reports = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--trace-rounds" && i + 1 < argc) {
      trace_rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--help" || arg == "-h") {
      std::puts(usage);
      return 0;
    } else {
      std::fprintf(stderr, "accgraph-bench-host: unknown argument '%s'\n%s\n", arg.c_str(), usage);
      return 2;
    }
  }
  try {
    if (!only_trace) {
      fmt::print("accgraph-bench-host: host backend, {}\n\n",
                 accgraph::backend("host").devices().at(0).name);
      bench_replay_overhead();
      bench_timed_replay();
      fmt::print(
          "\n(r) run ahead: 400 replays back to back of a graph of 10 regions of 20 us delays, "
          "host time per replay() call, default ProfilerOptions (median of 15 rounds)\n");
      results["run_ahead"] = accgraph_bench::to_json(accgraph_bench::bench_run_ahead(
          "host", [](Stream& s) { s.delay(std::chrono::microseconds(20)); }, 10, 400, 15,
          [](const std::string& line) { fmt::print("{}\n", line); }));
      fmt::print(
          "\n(v2) timing layer v2 (issue 8), steady_clock markers, each figure against its "
          "baseline in this run\n");
      const auto v2 = accgraph_bench::bench_timing_v2(
          "host", "", [](Stream& s) { s.host_call([] {}); }, memory_replays,
          [](const std::string& line) { fmt::print("{}\n", line); });
      results["v2"] = accgraph_bench::to_json(v2);
    }
    char self[4096];
    const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0) throw std::runtime_error("cannot read /proc/self/exe to start (c)'s children");
    bench_trace_export(std::string(self, static_cast<size_t>(length)), trace_reports, trace_rounds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accgraph-bench-host: %s\n", e.what());
    return 1;
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << results.dump(2) << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "accgraph-bench-host: cannot write '%s'\n", json_path.c_str());
      return 1;
    }
    fmt::print("\nJSON written to {}\n", json_path);
  }
  return 0;
}
