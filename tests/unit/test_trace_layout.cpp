// Tests of the trace layout (timing/export/trace_layout.hpp, internal): the processes, tracks,
// stacks and slice order that the Chrome and Perfetto writers both serialise (Note [Trace layout]).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trace_layout.hpp"
#include "accgraph/report.hpp"

using namespace accgraph::timing;
using namespace accgraph::timing::detail;

namespace {

constexpr uint64_t kUnmeasurable = UINT64_MAX;

struct Region {
  std::string name;
  int parent;
  uint64_t stream;
  std::string lane;
  uint64_t start, end;
};

ReplayReport make_report(const std::string& backend, int device, const std::string& device_name,
                         uint64_t graph_id, const std::vector<Region>& regions) {
  std::vector<RegionSample> samples;
  for (const Region& r : regions) {
    RegionSample s;
    s.info.name = r.name;
    s.info.parent = r.parent;
    s.info.depth = r.parent < 0 ? 0 : samples[static_cast<size_t>(r.parent)].info.depth + 1;
    s.info.stream_id = r.stream;
    s.info.lane = r.lane;
    s.measurable = r.start != kUnmeasurable;
    s.start_ns = s.measurable ? r.start : 0;
    s.end_ns = s.measurable ? r.end : 0;
    samples.push_back(std::move(s));
  }
  ReportSource source;
  source.backend = backend;
  source.device = device;
  source.device_name = device_name;
  return ReplayReport::from_samples(source, graph_id, 0, std::move(samples));
}

// Three devices, first seen in the opposite of their (backend, device) order; one has only an
// unmeasurable region.
std::vector<ReplayReport> layout_reports() {
  return {make_report("zeta", 1, "card", 1,
                      {{"outer", -1, 7, "", 100, 500},
                       {"inner", 0, 7, "", 150, 250},
                       {"cross", 0, 7, "", 400, 700},  // overlaps outer without nesting
                       {"child", 2, 7, "", 450, 460},  // fits outer too, but stays with cross
                       {"comm", -1, 8, "comm", 120, 130},
                       {"attn", -1, 7, "attn", 50, 60},
                       {"s3", -1, 3, "", 900, 950}}),
          make_report("beta", 0, "", 2, {{"lost", -1, 1, "", kUnmeasurable, 0}}),
          make_report("alpha", 0, "", 0,
                      {{"e", -1, 1, "", 10, 20}, {"lost", 0, 1, "", kUnmeasurable, 0}})};
}

std::string slice_name(const std::vector<ReplayReport>& reports, const TraceSlice& slice) {
  return reports[slice.report].region(slice.region).name();
}

}  // namespace

TEST_CASE("trace layout: processes in (backend, device) order, numbered as first seen") {
  const std::vector<ReplayReport> reports = layout_reports();
  const TraceLayout layout = layout_trace(reports, "the test trace");
  REQUIRE(layout.processes.size() == 3);
  const TraceProcess& alpha = layout.processes[0];
  const TraceProcess& beta = layout.processes[1];
  const TraceProcess& zeta = layout.processes[2];
  CHECK(alpha.backend == "alpha");
  CHECK(alpha.first_seen == 2);
  CHECK(beta.backend == "beta");
  CHECK(beta.first_seen == 1);
  CHECK(zeta.backend == "zeta");
  CHECK(zeta.device == 1);
  CHECK(zeta.first_seen == 0);
  // A process whose regions are all unmeasurable is named (Chrome) but has no slices.
  CHECK(beta.named_by == &reports[1]);
  CHECK(beta.first_measured == nullptr);
  CHECK_FALSE(beta.has_slices());
  CHECK(zeta.first_measured == &reports[0]);
  CHECK(zeta.first_start_ns == 50);
  CHECK(layout.origin_ns == 10);
  CHECK(process_name(zeta, *zeta.named_by) == "zeta device 1 (card)");
  CHECK(process_name(alpha, *alpha.named_by) == "alpha device 0");
}

TEST_CASE("trace layout: stream tracks by id, then lanes as first seen") {
  const std::vector<ReplayReport> reports = layout_reports();
  const TraceLayout layout = layout_trace(reports, "the test trace");
  std::vector<std::string> names;
  for (const TraceTrack& track : layout.tracks) names.push_back(track.name());
  CHECK(names == std::vector<std::string>{"stream 1", "stream 3", "stream 7", "comm", "attn"});
  const TraceProcess& zeta = layout.processes[2];
  CHECK(zeta.first_track == 1);
  CHECK(zeta.end_track == 5);
  for (uint32_t t = 0; t < layout.tracks.size(); ++t)
    for (uint32_t s = layout.tracks[t].first_slice; s < layout.tracks[t].end_slice; ++s)
      CHECK(layout.slices[s].track == t);
  CHECK(layout.slices.size() == 8);  // the unmeasurable regions are left out
}

TEST_CASE("trace layout: overlapping regions go to further stacks, children stay with parents") {
  const std::vector<ReplayReport> reports = layout_reports();
  const TraceLayout layout = layout_trace(reports, "the test trace");
  const TraceTrack& stream7 = layout.tracks[2];
  REQUIRE(stream7.name() == "stream 7");
  CHECK(stream7.stacks == 2);
  std::vector<std::string> order;
  std::vector<int32_t> stacks;
  for (uint32_t s = stream7.first_slice; s < stream7.end_slice; ++s) {
    order.push_back(slice_name(reports, layout.slices[s]));
    stacks.push_back(layout.slices[s].stack);
  }
  CHECK(order == std::vector<std::string>{"outer", "inner", "cross", "child"});
  CHECK(stacks == std::vector<int32_t>{0, 0, 1, 1});
  for (const TraceTrack& track : layout.tracks)
    if (track.name() != "stream 7") CHECK(track.stacks == 1);
}

TEST_CASE("trace layout: which metadata a slice shows, and its category") {
  const Metadata metadata = {{"dup", "first"}, {"path", "x"},    {"bad\xFF", "1"},
                             {"dup", "last"},  {"bad\xFE", "2"}, {"stream", "y"}};
  std::vector<size_t> written;
  for (size_t k = 0; k < metadata.size(); ++k)
    if (writes_metadata_entry(metadata, k)) written.push_back(k);
  CHECK(written == std::vector<size_t>{3, 4});  // the last "dup" and the last invalid key
  const std::vector<ReplayReport> reports = layout_reports();
  CHECK(slice_category(reports[0]) == "graph 1");
  CHECK(slice_category(reports[2]) == "eager");
}
