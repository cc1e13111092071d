// Writes the Perfetto traces the tests check, each with what it must hold (from the reports,
// written out by hand here, not by the writer's logic) for check_trace.py:
//
//   make_perfetto_traces DIR
//     DIR/writer.pftrace, DIR/writer.expected.json: processes, stream and lane tracks, overlap
//       (backing tracks), zero-length and touching regions, typed metadata, invalid UTF-8,
//       unmeasurable regions, eager and graph reports, trace info with and without a clock
//     DIR/rank0.pftrace, DIR/rank1.pftrace: one job's ranks with known clock offsets, and
//     DIR/merged.expected.json: what `accgraph merge-traces` of the two must hold (every event
//       on the true host time)
//     DIR/huge_world0.pftrace, DIR/huge_world1.pftrace: ranks 0 and 1 of 100,000,000;
//     DIR/saturated0.pftrace: rank 0 of 2 whose clock uncertainty is 2^64-1 ns (odd cases for
//       the CLI's merge-traces)
//     DIR/epoch0.pftrace: rank 0 of 1 whose device clock counts from its own epoch
//     DIR/hosts0.pftrace, DIR/hosts1.pftrace: ranks on two hosts, rank 1's host clock measured
//       350 us behind rank 0's at start and 300 us at flush (+-4,200 and +-4,800 ns)
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "accgraph/perfetto.hpp"
#include "accgraph/report.hpp"

using namespace accgraph::timing;
using json = nlohmann::json;

namespace {

constexpr uint64_t kUnmeasurable = UINT64_MAX;

// One region of a synthetic report, with the arguments its slice must carry.
struct Region {
  std::string name;
  int parent = -1;
  uint64_t stream = 1;
  std::string lane;
  uint64_t start = 0, end = 0;
  Metadata metadata;
  json expected_args = json::object();  // typed, without path/graph_id/replay_index/stream/self_ns
  std::string expected_name;            // when not `name` (invalid UTF-8)
};

struct Expected {
  json slices = json::array();
};

ReplayReport make_report(const ReportSource& source, uint64_t graph_id, uint64_t replay_index,
                         const std::vector<Region>& regions, const std::string& process_name,
                         Expected& expected, int64_t expected_shift = 0) {
  std::vector<RegionSample> samples;
  std::vector<std::string> paths, expected_paths;   // as recorded, as the trace shows them
  std::vector<std::pair<size_t, size_t>> slice_of;  // (region, its expected slice)
  for (const Region& r : regions) {
    const std::string shown = r.expected_name.empty() ? r.name : r.expected_name;
    RegionSample s;
    s.info.name = r.name;
    s.info.parent = r.parent;
    s.info.depth = r.parent < 0 ? 0 : samples[static_cast<size_t>(r.parent)].info.depth + 1;
    s.info.path = r.parent < 0 ? r.name : paths[static_cast<size_t>(r.parent)] + "/" + r.name;
    s.info.stream_id = r.stream;
    s.info.lane = r.lane;
    s.info.metadata = r.metadata;
    s.start_ns = r.start;
    s.end_ns = r.end;
    s.measurable = r.start != kUnmeasurable;
    paths.push_back(s.info.path);
    expected_paths.push_back(
        r.parent < 0 ? shown : expected_paths[static_cast<size_t>(r.parent)] + "/" + shown);
    samples.push_back(std::move(s));
    if (r.start == kUnmeasurable) continue;  // not in the trace
    json args = r.expected_args;
    args["path"] = {"string", expected_paths.back()};
    args["graph_id"] = {"int", graph_id};
    args["replay_index"] = {"int", replay_index};
    args["stream"] = {"int", r.stream};
    slice_of.emplace_back(samples.size() - 1, expected.slices.size());
    expected.slices.push_back({
        {"process", process_name},
        {"track", r.lane.empty() ? "stream " + std::to_string(r.stream) : r.lane},
        {"name", shown},
        {"start", static_cast<uint64_t>(static_cast<int64_t>(r.start) - expected_shift)},
        {"end", static_cast<uint64_t>(static_cast<int64_t>(r.end) - expected_shift)},
        {"category", {graph_id == 0 ? std::string("eager") : "graph " + std::to_string(graph_id)}},
        {"args", args},
    });
  }
  ReplayReport report =
      ReplayReport::from_samples(source, graph_id, replay_index, std::move(samples));
  // self_ns: the region minus its direct children (RegionTiming::self_ns, checked on its own
  // in tests/unit/test_report.cpp), written when measurable.
  for (const auto& [region, slice] : slice_of) {
    const RegionTiming t = report.region(region);
    if (t.self_measurable()) expected.slices[slice]["args"]["self_ns"] = {"int", t.self_ns()};
  }
  return report;
}

ReportSource source(std::string backend, int device, std::string device_name) {
  ReportSource s;
  s.backend = std::move(backend);
  s.device = device;
  s.device_name = std::move(device_name);
  s.marker_strategy = "test";
  s.resolution_ns = 1;
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string perfetto(const std::vector<ReplayReport>& reports, const PerfettoOptions& options) {
  std::ostringstream out;
  write_perfetto_trace(out, reports, options);
  return out.str();
}

json info(int rank, int world, const std::string& host, const std::string& backend, int device,
          const DeviceClockOffset* clock) {
  json i = {{"rank", {"int", rank}},
            {"world_size", {"int", world}},
            {"host", {"string", host}},
            {"host_clock", {"string", "CLOCK_REALTIME"}},
            {"backend", {"string", backend}},
            {"device", {"int", device}},
            {"clock_calibrated", {"bool", clock != nullptr}}};
  if (clock != nullptr) {
    i["clock_offset_ns"] = {"int", clock->offset_ns};
    i["clock_uncertainty_ns"] = {"int", clock->uncertainty_ns};
  }
  return i;
}

// The writer's trace: every feature of write_perfetto_trace on one set of reports.
void writer_case(const std::string& dir) {
  Expected expected;
  const std::string gpu0 = "rank 1: host device 0 (cpu)";
  const std::string gpu1 = "rank 1: host device 1";
  const std::string other = "rank 1: aa device 0 (first)";
  const std::string fffd = "\xEF\xBF\xBD";
  Metadata typed = {{"collective", "all_reduce"},
                    {"In msg nelems", "1048576"},
                    {"neg", "-7"},
                    {"big", "18446744073709551615"},
                    {"ratio", "0.5"},
                    {"exp", "1e3"},
                    {"flag", "true"},
                    {"off", "false"},
                    {"Process Group Ranks", "[0, 1]"},
                    {"mixed list", "[1, x]"},
                    {"empty list", "[]"},
                    {"zeros", "007"},
                    {"plus", "+1"},
                    {"nan", "nan"},
                    {"empty", ""},
                    {"spaced", " 5"},
                    {"dup", "1"},
                    {"dup", "2"},
                    {"path", "mine"},
                    {"graph_id", "x"},
                    {"stream", "y"}};
  json typed_args = {
      {"collective", {"string", "all_reduce"}},
      {"In msg nelems", {"int", 1048576}},
      {"neg", {"int", -7}},
      {"big", {"uint", 18446744073709551615ull}},
      {"ratio", {"double", 0.5}},
      {"exp", {"double", 1000.0}},
      {"flag", {"bool", true}},
      {"off", {"bool", false}},
      {"Process Group Ranks", {"array", json::array({{"int", 0}, {"int", 1}})}},
      {"mixed list", {"string", "[1, x]"}},
      {"empty list", {"string", "[]"}},
      {"zeros", {"string", "007"}},
      {"plus", {"string", "+1"}},
      {"nan", {"string", "nan"}},
      {"empty", {"string", ""}},
      {"spaced", {"string", " 5"}},
      {"dup", {"int", 2}},
  };

  std::vector<ReplayReport> reports;
  // Graph 7: nesting, a lane under a stream region and back, two streams' regions in one lane
  // that overlap (two backing tracks), a zero-length region at its parent's end, invalid UTF-8.
  reports.push_back(make_report(
      source("host", 0, "cpu"), 7, 0,
      {
          {"layer0", -1, 1, "", 1000, 5000, {{"bytes", "4096"}}, {{"bytes", {"int", 4096}}}},
          {"attention", 0, 1, "attention", 1100, 2000},
          {"fill", 1, 1, "", 1200, 1500},
          {"mlp", -1, 2, "mlp", 1500, 3000},
          {"comm", -1, 2, "comm", 3000, 4000, typed, typed_args},
          {"comm", -1, 3, "comm", 3500, 4500},
          {"zero", 0, 1, "", 5000, 5000},
          {"lost", 0, 1, "", kUnmeasurable, kUnmeasurable},
          {"bad\xFF",
           0,
           1,
           "",
           2000,
           2500,
           {{"k\xC3", "v\xFF"}},
           {{"k" + fffd, {"string", "v" + fffd}}},
           "bad" + fffd},
      },
      gpu0, expected));
  // Graph 8 on the same stream overlaps layer0 without nesting: a second backing track; its
  // lane region joins the lane track "attention" (first seen above).
  reports.push_back(make_report(source("host", 0, "cpu"), 8, 3,
                                {
                                    {"other", -1, 1, "", 4500, 6000},
                                    {"later", -1, 1, "attention", 7000, 7100},
                                    {"touching", -1, 1, "", 6000, 6500},
                                },
                                gpu0, expected));
  // Eager work on another device (no name, no clock) and a backend sorting first.
  reports.push_back(
      make_report(source("host", 1, ""), 0, 2, {{"eager", -1, 5, "", 100, 200}}, gpu1, expected));
  reports.push_back(
      make_report(source("aa", 0, "first"), 9, 0, {{"first", -1, 1, "", 50, 60}}, other, expected));
  // A report with no measurable region adds no process.
  reports.push_back(make_report(source("zz", 0, "none"), 10, 0,
                                {{"gone", -1, 1, "", kUnmeasurable, kUnmeasurable}}, "", expected));

  PerfettoOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.host = "node-a";
  options.clocks = {{"host", 0, -8000, 500}, {"aa", 0, -250, 40}};
  write_file(dir + "/writer.pftrace", perfetto(reports, options));

  json e;
  e["processes"] = {gpu0, gpu1, other};
  e["tracks"] = {{gpu0, {"stream 1", "attention", "mlp", "comm"}},
                 {gpu1, {"stream 5"}},
                 {other, {"stream 1"}}};
  e["backings"] = {
      {gpu0 + "|stream 1", 2}, {gpu0 + "|comm", 2}, {gpu0 + "|attention", 1}, {gpu0 + "|mlp", 1}};
  e["sequences"] = 1;
  e["slices"] = expected.slices;
  e["infos"] = {{gpu0, info(1, 2, "node-a", "host", 0, &options.clocks[0])},
                {gpu1, info(1, 2, "node-a", "host", 1, nullptr)},
                {other, info(1, 2, "node-a", "aa", 0, &options.clocks[1])}};
  write_file(dir + "/writer.expected.json", e.dump(1));
}

// Two ranks of one job whose GPUs' clocks are off the host clock by known amounts: after the
// merge every event must be at its true host time, and the all-reduce ends (true time
// kHost + 15000 on both ranks) at the same time.
void merge_case(const std::string& dir) {
  constexpr uint64_t kHost = 1700000000000000000ull;  // true host times are kHost + ...
  const int64_t offsets[2] = {-8000, 200};            // device = host + offset
  Expected expected;
  json infos;
  std::vector<std::string> processes;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string gpu = "rank " + std::to_string(rank) + ": cuda device " +
                            std::to_string(rank) + " (gpu" + std::to_string(rank) + ")";
    const uint64_t d = kHost + static_cast<uint64_t>(offsets[rank]);  // device time of kHost
    std::vector<ReplayReport> reports;
    for (uint64_t replay = 0; replay < 3; ++replay) {
      const uint64_t t = d + replay * 100000;
      reports.push_back(
          make_report(source("cuda", rank, "gpu" + std::to_string(rank)), 3, replay,
                      {{"step", -1, 1, "", t + 1000, t + 20000},
                       {"compute", 0, 1, "compute", t + 1000, t + 4000 + rank * 300},
                       {"all_reduce",
                        0,
                        1,
                        "comm",
                        t + 5000 + rank * 300,
                        t + 15000,
                        {{"collective", "all_reduce"}, {"Group size", "2"}},
                        {{"collective", {"string", "all_reduce"}}, {"Group size", {"int", 2}}}}},
                      gpu, expected, offsets[rank]));
    }
    PerfettoOptions options;
    options.rank = rank;
    options.world_size = 2;
    options.host = "node-a";
    options.clocks = {{"cuda", rank, offsets[rank], 700}};
    // Rank 1 also has an uncalibrated device: its times stay as they are.
    if (rank == 1) {
      const std::string uncalibrated = "rank 1: cuda device 7";
      reports.push_back(make_report(source("cuda", 7, ""), 4, 0,
                                    {{"copy", -1, 9, "", kHost + 2000, kHost + 2500}}, uncalibrated,
                                    expected));
      json i = info(1, 2, "node-a", "cuda", 7, nullptr);
      i["merged_offset_ns"] = {"int", 0};
      i["alignment_uncertainty_ns"] = {"int", -1};
      infos[uncalibrated] = i;
      processes.push_back(uncalibrated);
    }
    write_file(dir + "/rank" + std::to_string(rank) + ".pftrace", perfetto(reports, options));
    json i = info(rank, 2, "node-a", "cuda", rank, &options.clocks[0]);
    i["merged_offset_ns"] = {"int", offsets[rank]};
    i["alignment_uncertainty_ns"] = {"int", 700};
    infos[gpu] = i;
    processes.push_back(gpu);
  }
  json e;
  e["processes"] = processes;
  e["sequences"] = 2;
  e["slices"] = expected.slices;
  e["infos"] = infos;
  write_file(dir + "/merged.expected.json", e.dump(1));
}

// Valid but odd traces (the 2026-11-25 audit, #49 and #55).
void odd_cases(const std::string& dir) {
  const std::vector<ReplayReport> reports = {
      ReplayReport::from_samples(source("cuda", 0, "gpu"), 1, 0, {[] {
                                   RegionSample s;
                                   s.info.name = "step";
                                   s.start_ns = 5000;
                                   s.end_ns = 6000;
                                   return s;
                                 }()})};
  for (int rank = 0; rank < 2; ++rank) {
    PerfettoOptions options;
    options.rank = rank;
    options.world_size = 100'000'000;
    write_file(dir + "/huge_world" + std::to_string(rank) + ".pftrace", perfetto(reports, options));
  }
  PerfettoOptions saturated;
  saturated.rank = 0;
  saturated.world_size = 2;
  saturated.host = "node-a";
  saturated.clocks = {{"cuda", 0, 0, UINT64_MAX}};
  write_file(dir + "/saturated0.pftrace", perfetto(reports, saturated));
  // A device clock with its own epoch (a steady clock since boot): its offset against
  // CLOCK_REALTIME is about -1.8e18 ns, which the CLI's table shows as "own epoch".
  PerfettoOptions epoch;
  epoch.rank = 0;
  epoch.world_size = 1;
  epoch.host = "node-a";
  epoch.clocks = {{"cuda", 0, -1'796'651'411'036'512'430, 900}};
  write_file(dir + "/epoch0.pftrace", perfetto(reports, epoch));
  for (int rank = 0; rank < 2; ++rank) {
    PerfettoOptions hosts;
    hosts.rank = rank;
    hosts.world_size = 2;
    hosts.host = rank == 0 ? "node-a" : "node-b";
    hosts.clocks = {{"cuda", 0, 0, 32}};
    if (rank == 0)
      hosts.host_clock_offsets = {{0, 0, 1'000}, {0, 0, 1'000'001'000}};
    else
      hosts.host_clock_offsets = {{-350'000, 4'200, 1'000}, {-300'000, 4'800, 1'000'001'000}};
    write_file(dir + "/hosts" + std::to_string(rank) + ".pftrace", perfetto(reports, hosts));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_perfetto_traces DIR\n";
    return 2;
  }
  try {
    writer_case(argv[1]);
    merge_case(argv[1]);
    odd_cases(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "make_perfetto_traces: " << e.what() << "\n";
    return 1;
  }
  std::cout << "make_perfetto_traces: wrote writer.pftrace, rank0.pftrace, rank1.pftrace and "
               "their expectations to "
            << argv[1] << "\n";
  return 0;
}
