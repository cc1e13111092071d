// ReportLayout and ReplayReport: a replay's report is a shared, immutable layout plus that
// replay's marker times; RegionTiming values are made from them on demand.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"
#include "accgraph/spi/backend.hpp"

namespace accgraph::timing {

ReportLayout::ReportLayout(ReportSource source, std::vector<RegionInfo> regions)
    : source_(std::move(source)), regions_(std::move(regions)) {
  uint64_t markers = 0;
  for (size_t i = 0; i < regions_.size(); ++i) {
    RegionInfo& r = regions_[i];
    if (r.parent < -1 || r.parent >= static_cast<int64_t>(i))
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("ReportLayout: region {} ('{}') names parent {}, which is not an "
                              "earlier region: a parent is -1 or the index of a region before it",
                              i, r.name, r.parent));
    if (r.path.empty())
      r.path = r.parent < 0 ? r.name : regions_[static_cast<size_t>(r.parent)].path + "/" + r.name;
    markers =
        std::max<uint64_t>({markers, uint64_t{r.begin_marker} + 1, uint64_t{r.end_marker} + 1});
  }
  marker_count_ = static_cast<uint32_t>(markers);
  // Children by parent, in layout order (a counting sort): Note [Self time].
  child_begin_.assign(regions_.size() + 1, 0);
  for (const RegionInfo& r : regions_)
    if (r.parent >= 0) ++child_begin_[static_cast<size_t>(r.parent) + 1];
  for (size_t i = 0; i < regions_.size(); ++i) child_begin_[i + 1] += child_begin_[i];
  children_.resize(child_begin_.back());
  std::vector<uint32_t> next(child_begin_.begin(), child_begin_.end() - 1);
  for (size_t i = 0; i < regions_.size(); ++i)
    if (regions_[i].parent >= 0)
      children_[next[static_cast<size_t>(regions_[i].parent)]++] = static_cast<uint32_t>(i);
}

namespace {
const std::shared_ptr<const ReportLayout>& empty_layout() {
  static const std::shared_ptr<const ReportLayout> layout = std::make_shared<ReportLayout>();
  return layout;
}
}  // namespace

ReplayReport::ReplayReport() : layout_(empty_layout()) {}

ReplayReport::ReplayReport(std::shared_ptr<const ReportLayout> layout, uint64_t graph_id,
                           uint64_t replay_index, std::vector<uint64_t> marker_times)
    : layout_(std::move(layout)),
      graph_id_(graph_id),
      replay_index_(replay_index),
      times_(std::move(marker_times)) {
  if (!layout_)
    throw Error(ErrorCode::InvalidArgument,
                "ReplayReport: the layout is null: pass the ReportLayout the times belong to");
  if (times_.size() != layout_->marker_count())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("ReplayReport: {} marker times for a layout of {} markers: pass "
                            "exactly layout->marker_count() times",
                            times_.size(), layout_->marker_count()));
}

ReplayReport ReplayReport::from_samples(ReportSource source, uint64_t graph_id,
                                        uint64_t replay_index, std::vector<RegionSample> samples) {
  std::vector<RegionInfo> regions;
  std::vector<uint64_t> times;
  regions.reserve(samples.size());
  times.reserve(samples.size() * 2);
  constexpr uint64_t kUnmeasurable = TimestampMarkers::kUnmeasurable;
  for (RegionSample& sample : samples) {
    sample.info.begin_marker = static_cast<uint32_t>(times.size());
    sample.info.end_marker = static_cast<uint32_t>(times.size() + 1);
    times.push_back(sample.measurable ? sample.start_ns : kUnmeasurable);
    times.push_back(sample.measurable ? sample.end_ns : kUnmeasurable);
    regions.push_back(std::move(sample.info));
  }
  return ReplayReport(std::make_shared<const ReportLayout>(std::move(source), std::move(regions)),
                      graph_id, replay_index, std::move(times));
}

RegionTiming ReplayReport::region(size_t index) const {
  if (index >= size())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("ReplayReport::region: index {} is out of range: the report has {} "
                            "regions",
                            index, size()));
  return timing_of(index);
}

RegionTiming::RegionTiming(const RegionInfo& info, uint64_t start_ns, uint64_t end_ns) {
  static_assert(TimestampMarkers::kUnmeasurable == UINT64_MAX, "RegionTiming::assign assumes it");
  assign(info, start_ns, end_ns, 0);
}

RegionTiming ReplayReport::timing_of(size_t index) const {
  const RegionInfo& info = layout_->regions()[index];
  RegionTiming timing;
  timing.assign(info, times_[info.begin_marker], times_[info.end_marker],
                layout_->source().marker_overhead_ns);
  if (timing.measurable_ && layout_->child_begin_[index] != layout_->child_begin_[index + 1])
    set_self_time(timing, index);
  return timing;
}

// Note [Self time]
// A region's self time is its duration minus the time its direct children (RegionInfo::parent,
// same report) cover: the glue between and around them. The children's intervals are clipped
// to the region's [start, end] and their union is subtracted, so 0 <= self <= duration holds
// exactly. For children that run one after the other inside the region (one stream, the usual
// nesting) that is the rule, duration minus the sum of the children's durations. A
// child on another stream or lane may start before the region or end after it (only its part
// inside counts) and children on parallel lanes may overlap each other (time covered by two of
// them is taken once): a plain difference of sums could go negative there.
// The intervals are the edges the regions report, marker overhead taken off (Note [Marker
// overhead] in marker_overhead.cpp): a marker two children share then leaves its own cost
// between them, in the parent's self time, where the device spent it. A child no longer than
// the overhead keeps its raw edges, which may reach past its parent's: only its part inside
// counts, so duration minus the children's durations can exceed the self time by up to the
// overhead there.
// Cost: regions() makes each timing on demand and every region is some region's child at most
// once, so a pass over a report reads each marker time about twice and allocates nothing. The
// children come in layout (open) order, which on one stream is start order: the union is then a
// single merging walk. A child that starts before the run being merged (parallel streams) sends
// the region to a sort of its children's intervals in a per-thread scratch vector, which
// allocates only when it grows.
namespace {
using Interval = std::pair<uint64_t, uint64_t>;

uint64_t union_length(std::vector<Interval>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t covered = 0;
  uint64_t run_start = 0, run_end = 0;
  bool open = false;
  for (const Interval& i : intervals) {
    if (open && i.first <= run_end) {
      run_end = std::max(run_end, i.second);
      continue;
    }
    if (open) covered += run_end - run_start;
    run_start = i.first;
    run_end = i.second;
    open = true;
  }
  return open ? covered + run_end - run_start : covered;
}
}  // namespace

void ReplayReport::set_self_time(RegionTiming& timing, size_t index) const {
  constexpr uint64_t kUnmeasurable = TimestampMarkers::kUnmeasurable;
  const std::vector<RegionInfo>& regions = layout_->regions();
  const uint32_t* first = layout_->children_.data() + layout_->child_begin_[index];
  const uint32_t* last = layout_->children_.data() + layout_->child_begin_[index + 1];
  const uint64_t overhead = layout_->source().marker_overhead_ns;  // as timing_of took it off
  const uint64_t lo = timing.start_ns_, hi = std::max(timing.start_ns_, timing.end_ns_);
  uint64_t covered = 0, run_start = lo, run_end = lo;
  bool in_order = true;
  for (const uint32_t* c = first; c != last; ++c) {
    const RegionInfo& child = regions[*c];
    uint64_t start = times_[child.begin_marker], end = times_[child.end_marker];
    if (start == kUnmeasurable || end == kUnmeasurable) {
      timing.self_measurable_ = false;
      timing.self_ns_ = 0;
      return;
    }
    if (!in_order) continue;  // still checking that every child is measurable
    RegionTiming::take_overhead(start, end, overhead);
    const uint64_t s = std::clamp(start, lo, hi), e = std::clamp(std::max(start, end), lo, hi);
    if (s < run_start) {
      in_order = false;
    } else if (s <= run_end) {
      run_end = std::max(run_end, e);
    } else {
      covered += run_end - run_start;
      run_start = s;
      run_end = e;
    }
  }
  if (in_order) {
    covered += run_end - run_start;
  } else {
    thread_local std::vector<Interval> scratch;
    scratch.clear();
    for (const uint32_t* c = first; c != last; ++c) {
      const RegionInfo& child = regions[*c];
      uint64_t start = times_[child.begin_marker], end = times_[child.end_marker];
      RegionTiming::take_overhead(start, end, overhead);
      scratch.emplace_back(std::clamp(start, lo, hi), std::clamp(std::max(start, end), lo, hi));
    }
    covered = union_length(scratch);
  }
  timing.self_ns_ = hi - lo - std::min(covered, hi - lo);
}

}  // namespace accgraph::timing
