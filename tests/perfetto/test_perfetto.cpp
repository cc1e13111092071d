// Unit tests of accgraph::perfetto (perfetto.hpp): clock offsets from samples, the writer's
// errors and typed annotations, and merge_perfetto_traces' clock arithmetic, renumbering and
// errors, decoded with accgraph's own proto subset (check_trace.py decodes with Perfetto's).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "accgraph/perfetto.hpp"
#include "check_error.hpp"
#include "perfetto_trace.pb.h"

using namespace accgraph::timing;
using accgraph::ErrorCode;
namespace pb = accgraph::pftrace;

namespace {

ReportSource source(const std::string& backend, int device) {
  ReportSource s;
  s.backend = backend;
  s.device = device;
  s.device_name = "dev";
  return s;
}

RegionSample sample(const std::string& name, uint64_t start, uint64_t end, Metadata meta = {},
                    std::string lane = {}) {
  RegionSample s;
  s.info.name = name;
  s.info.stream_id = 1;
  s.info.lane = std::move(lane);
  s.info.metadata = std::move(meta);
  s.start_ns = start;
  s.end_ns = end;
  return s;
}

std::string write(const std::vector<ReplayReport>& reports, const PerfettoOptions& options = {}) {
  std::ostringstream out;
  write_perfetto_trace(out, reports, options);
  return out.str();
}

pb::Trace decode(const std::string& bytes) {
  pb::Trace trace;
  REQUIRE(trace.ParseFromString(bytes));
  return trace;
}

const pb::DebugAnnotation* annotation(const pb::TrackEvent& e, const std::string& name) {
  for (const pb::DebugAnnotation& a : e.debug_annotations())
    if (a.name() == name) return &a;
  return nullptr;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("accgraph_perfetto_" + std::to_string(getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string file(const std::string& name, const std::string& bytes) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

std::string rank_trace(int rank, int world, int64_t offset, uint64_t device_time,
                       std::string host_clock = "CLOCK_REALTIME") {
  PerfettoOptions options;
  options.rank = rank;
  options.world_size = world;
  options.host_clock = std::move(host_clock);
  options.clocks = {{"cuda", 0, offset, 100}};
  return write({ReplayReport::from_samples(
                   source("cuda", 0), 5, 0,
                   {sample("step", device_time, device_time + 1000),
                    sample("all_reduce", device_time + 200, device_time + 900, {}, "comm")})},
               options);
}

}  // namespace

TEST_CASE("estimate_clock_offset: the sample with the shortest round trip, its midpoint") {
  const std::vector<ClockSample> samples = {
      {1000, 5000, 1400},  // round trip 400
      {2000, 5800, 2100},  // 100: the best; midpoint 2050
      {3000, 7000, 3300},
  };
  const DeviceClockOffset clock = estimate_clock_offset(samples, 10);
  CHECK(clock.offset_ns == 3750);
  CHECK(clock.uncertainty_ns == 50 + 10);
  // A device clock behind the host's, and an odd round trip (rounded up).
  const DeviceClockOffset behind = estimate_clock_offset({{1'000'000, 991'000, 1'000'101}}, 0);
  CHECK(behind.offset_ns == 991'000 - 1'000'050);
  CHECK(behind.uncertainty_ns == 51);
  // Clocks far apart (a monotonic device clock against CLOCK_REALTIME).
  const uint64_t realtime = 1'700'000'000'000'000'000ull;
  CHECK(estimate_clock_offset({{realtime, 5'000, realtime}}, 0).offset_ns ==
        5'000 - static_cast<int64_t>(realtime));
}

TEST_CASE("estimate_clock_offset: no samples or a sample running backwards is an error") {
  CHECK_ACCGRAPH_ERROR(estimate_clock_offset({}, 1), ErrorCode::InvalidArgument,
                       "no samples: take at least one");
  CHECK_ACCGRAPH_ERROR(estimate_clock_offset({{9, 100, 5}}, 1), ErrorCode::InvalidArgument,
                       "a sample has host_after_ns 5 before host_before_ns 9");
}

TEST_CASE("write_perfetto_trace: a rank outside the world is an error") {
  const std::vector<ReplayReport> none;
  for (auto [rank, world] : std::vector<std::pair<int, int>>{{2, 2}, {-1, 3}, {-2, 0}, {0, 0}}) {
    PerfettoOptions options;
    options.rank = rank;
    options.world_size = world;
    std::ostringstream out;
    CHECK_ACCGRAPH_ERROR(write_perfetto_trace(out, none, options), ErrorCode::InvalidArgument,
                         "rank " + std::to_string(rank) + " with world_size " +
                             std::to_string(world) + ": give rank -1");
  }
}

TEST_CASE("write_perfetto_trace: a failed stream is an error, no reports an empty trace") {
  std::ostringstream failed;
  failed.setstate(std::ios::badbit);
  CHECK_ACCGRAPH_ERROR(
      write_perfetto_trace(
          failed, {ReplayReport::from_samples(source("host", 0), 1, 0, {sample("a", 10, 20)})}),
      ErrorCode::InvalidArgument, "writing the Perfetto trace failed: the output stream reported");
  CHECK(write({}).empty());
  CHECK(decode(write({})).packet_size() == 0);
}

TEST_CASE("write_perfetto_trace: metadata values become typed annotations") {
  const Metadata meta = {
      {"n", "42"},           {"neg", "-3"},  {"half", "0.5"},   {"yes", "true"},
      {"list", "[0, 1, 2]"}, {"text", "x1"}, {"padded", "007"}, {"huge", "18446744073709551615"},
      {"stream", "mine"}};
  const pb::Trace trace = decode(
      write({ReplayReport::from_samples(source("host", 0), 3, 4, {sample("r", 10, 20, meta)})}));
  const pb::TrackEvent* begin = nullptr;
  for (const pb::TracePacket& p : trace.packet())
    if (p.has_track_event() && p.track_event().type() == pb::TrackEvent::TYPE_SLICE_BEGIN)
      begin = &p.track_event();
  REQUIRE(begin != nullptr);
  CHECK(annotation(*begin, "n")->int_value() == 42);
  CHECK(annotation(*begin, "neg")->int_value() == -3);
  CHECK(annotation(*begin, "half")->double_value() == 0.5);
  CHECK(annotation(*begin, "yes")->bool_value());
  REQUIRE(annotation(*begin, "list")->array_values_size() == 3);
  CHECK(annotation(*begin, "list")->array_values(2).int_value() == 2);
  CHECK(annotation(*begin, "text")->string_value() == "x1");
  CHECK(annotation(*begin, "padded")->string_value() == "007");
  CHECK(annotation(*begin, "huge")->uint_value() == UINT64_MAX);
  CHECK(annotation(*begin, "stream")->int_value() == 1);  // the writer's own key wins
  CHECK(annotation(*begin, "graph_id")->int_value() == 3);
  CHECK(annotation(*begin, "replay_index")->int_value() == 4);
}

TEST_CASE("merge_perfetto_traces: each rank on the host clock, ids renumbered, one process each") {
  TempDir dir;
  constexpr uint64_t kHost = 1'700'000'000'000'000'000ull;
  // The all-reduce ends at host time kHost + 900 on both ranks; their clocks are off by -8000
  // and +200 ns.
  const std::string r0 = dir.file("r0.pftrace", rank_trace(0, 2, -8000, kHost - 8000));
  const std::string r1 = dir.file("r1.pftrace", rank_trace(1, 2, 200, kHost + 200));
  std::ostringstream out;
  const MergeSummary summary = merge_perfetto_traces(out, {r1, r0});
  CHECK(summary.world_size == 2);
  REQUIRE(summary.ranks.size() == 2);
  CHECK(summary.ranks[0].rank == 0);
  CHECK(summary.ranks[0].path == r0);
  CHECK(summary.ranks[1].clocks.at(0).offset_ns == 200);
  CHECK(summary.alignment_uncertainty_ns == 200);
  CHECK(summary.warnings.empty());

  const pb::Trace merged = decode(out.str());
  std::map<uint64_t, std::string> process_names;  // uuid -> name
  std::set<uint64_t> uuids;
  std::set<int> pids;
  std::map<uint64_t, uint64_t> parent;
  for (const pb::TracePacket& p : merged.packet()) {
    if (!p.has_track_descriptor()) continue;
    const pb::TrackDescriptor& d = p.track_descriptor();
    CHECK(uuids.insert(d.uuid()).second);
    if (d.has_process()) {
      CHECK(pids.insert(d.process().pid()).second);
      process_names[d.uuid()] = d.process().process_name();
    } else {
      parent[d.uuid()] = d.parent_uuid();
    }
  }
  CHECK(process_names.size() == 2);
  std::set<std::string> names;
  for (const auto& [uuid, name] : process_names) names.insert(name);
  CHECK(names ==
        std::set<std::string>{"rank 0: cuda device 0 (dev)", "rank 1: cuda device 0 (dev)"});
  std::map<std::string, std::vector<uint64_t>> reduce_ends;  // process -> ends
  std::set<uint32_t> sequences;
  uint64_t last = 0;
  for (const pb::TracePacket& p : merged.packet()) {
    if (!p.has_track_event()) continue;
    CHECK(p.timestamp() >= last);  // interleaved by time
    last = p.timestamp();
    sequences.insert(p.trusted_packet_sequence_id());
    const pb::TrackEvent& e = p.track_event();
    if (e.type() == pb::TrackEvent::TYPE_INSTANT) {
      const bool rank0 = process_names.at(e.track_uuid()).rfind("rank 0", 0) == 0;
      CHECK(annotation(e, "merged_offset_ns")->int_value() == (rank0 ? -8000 : 200));
      CHECK(annotation(e, "alignment_uncertainty_ns")->int_value() == 100);
      continue;
    }
    REQUIRE(parent.count(e.track_uuid()) == 1);
    CHECK(p.timestamp() >= kHost);
    CHECK(p.timestamp() <= kHost + 1000);
  }
  CHECK(sequences == std::set<uint32_t>{1, 2});
  // Both all-reduce ends (the last end on each "comm" track) are at kHost + 900: check by
  // counting end packets at that time.
  int ends_at_900 = 0;
  for (const pb::TracePacket& p : merged.packet())
    if (p.has_track_event() && p.track_event().type() == pb::TrackEvent::TYPE_SLICE_END &&
        p.timestamp() == kHost + 900)
      ++ends_at_900;
  CHECK(ends_at_900 == 2);
}

TEST_CASE("merge_perfetto_traces: inputs it cannot merge are errors that name the file") {
  TempDir dir;
  std::ostringstream out;
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {}), ErrorCode::InvalidArgument,
                       "no input traces: give one .pftrace file per rank");
  const std::string missing = (dir.path / "missing.pftrace").string();
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {missing}), ErrorCode::InvalidArgument,
                       "'" + missing + "': cannot open the file");
  const std::string garbage = dir.file("garbage.pftrace", "{\"traceEvents\": []}");
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {garbage}), ErrorCode::InvalidArgument,
                       "garbage.pftrace': not a Perfetto trace: ");
  const std::string truncated =
      dir.file("truncated.pftrace", rank_trace(0, 1, 0, 5000).substr(0, 40));
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {truncated}), ErrorCode::InvalidArgument,
                       "truncated.pftrace': not a Perfetto trace: a packet that is truncated");
  const std::string empty = dir.file("empty.pftrace", write({}));
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {empty}), ErrorCode::InvalidArgument,
                       "it has no \"accgraph trace info\" event");
  const std::string r0 = dir.file("r0.pftrace", rank_trace(0, 2, 0, 5000));
  const std::string r0_again = dir.file("r0b.pftrace", rank_trace(0, 2, 0, 5000));
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {r0, r0_again}), ErrorCode::InvalidArgument,
                       "rank 0 is also the rank of");
  const std::string other_job = dir.file("r1of3.pftrace", rank_trace(1, 3, 0, 5000));
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {r0, other_job}), ErrorCode::InvalidArgument,
                       "its world size is 3, but '" + r0 + "' has 2");
  const std::string monotonic =
      dir.file("mono.pftrace", rank_trace(1, 2, 0, 5000, "CLOCK_MONOTONIC"));
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {r0, monotonic}), ErrorCode::InvalidArgument,
                       "calibrate every rank against the same host clock");
  const std::string rankless_a = dir.file("a.pftrace", rank_trace(-1, 0, 0, 5000));
  const std::string rankless_b = dir.file("b.pftrace", rank_trace(-1, 0, 0, 5000));
  CHECK_ACCGRAPH_ERROR(merge_perfetto_traces(out, {rankless_a, rankless_b}),
                       ErrorCode::InvalidArgument, "it was written without a rank");
  // One rank-less trace merges alone (its devices put on the host clock); a missing rank warns.
  CHECK(merge_perfetto_traces(out, {rankless_a}).ranks.at(0).rank == 0);
  const MergeSummary partial = merge_perfetto_traces(out, {r0});
  REQUIRE(partial.warnings.size() == 1);
  CHECK(partial.warnings[0] ==
        "no trace of rank(s) 1 of the job's 2 among the inputs: the merged trace lacks their "
        "events");
}
