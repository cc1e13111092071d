// ReportLayout and ReplayReport: a replay's report is a shared, immutable layout plus that
// replay's marker times; RegionTiming values are made from them on demand.
#include <algorithm>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"
#include "accgraph/types.hpp"  // kUnmeasurable
#include "marker_transitions.hpp"

namespace accgraph::timing {

ReportLayout::ReportLayout(ReportSource source, std::vector<RegionInfo> regions,
                           std::vector<uint32_t> back_to_back_markers)
    : source_(std::move(source)),
      regions_(std::move(regions)),
      back_to_back_markers_(std::move(back_to_back_markers)) {
  std::sort(back_to_back_markers_.begin(), back_to_back_markers_.end());
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
  count_transitions();
}

// Note [Marker transitions]
// A marker costs time on the device that belongs to no region's work: its own execution and the
// step from the work before it to the work after it (ReportSource::marker_overhead_ns, measured
// per device: Note [Marker overhead] in marker_overhead.cpp). On one stream the markers, in
// record order, cut the timeline into transitions: the interval between two consecutive markers
// holds one marker's cost and whatever work ran between them. A region spans the transitions
// from its begin marker to its end marker, and its duration is, for each of them, what the
// interval read beyond the marker's cost, never below 0 (timing/model/marker_transitions.hpp). So:
// - a region around work with no region inside it spans one: its markers' distance less the
//   cost (its edges move in by half the cost each);
// - an empty region whose begin and end share a marker spans none; one with two markers (Note
//   [Boundary sharing] keeps two when nothing was enqueued between them) spans one back-to-back
//   transition, which holds no work by construction and adds exactly 0 (measured on the H200
//   with transformers' GPT-2, whose eval dropouts are such regions: subtracting the calibrated
//   back-to-back cost instead left 0.19-0.29 us per empty module);
// - a parent spans its children's transitions and those between and around them, so with
//   children one after the other on its stream, parent = sum(children) + self exactly, and a
//   container with no work of its own has a self time of 0 up to the jitter of its transitions
//   (with one overhead per region, (children - 1) overheads stayed in every parent's self time:
//   2-3 us per call in GPT-2's containers, bench/README.md, 'Targets and figures the code
//   cites').
// Markers of other streams are not counted: they run beside this stream's work, not in it.
// Indices stand for record order: the profiler numbers a sequence's markers as it records them
// (a layout made by hand, whose regions each have markers of their own, counts one per region).
// An interval that read less than its cost (jitter) adds 0, never a negative amount, so a
// region no longer than the overhead reads 0 where it used to read its raw distance.
void ReportLayout::count_transitions() {
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_stream;  // each stream's markers
  std::vector<uint64_t> streams;                                  // in first-seen order
  for (const RegionInfo& r : regions_) {
    auto [it, fresh] = by_stream.try_emplace(r.stream_id);
    if (fresh) streams.push_back(r.stream_id);
    it->second.push_back(r.begin_marker);
    it->second.push_back(r.end_marker);
  }
  std::unordered_map<uint64_t, uint32_t> offset;  // each stream's first position in ordered_
  for (uint64_t stream : streams) {
    std::vector<uint32_t>& markers = by_stream[stream];
    std::sort(markers.begin(), markers.end());
    markers.erase(std::unique(markers.begin(), markers.end()), markers.end());
    offset[stream] = static_cast<uint32_t>(ordered_.size());
    for (uint32_t m : markers) {
      ordered_.push_back(m);
      back_to_back_at_.push_back(
          std::binary_search(back_to_back_markers_.begin(), back_to_back_markers_.end(), m) ? 1
                                                                                            : 0);
    }
  }
  auto position = [&](uint64_t stream, uint32_t marker) {
    const std::vector<uint32_t>& markers = by_stream[stream];
    return offset[stream] +
           static_cast<uint32_t>(std::lower_bound(markers.begin(), markers.end(), marker) -
                                 markers.begin());
  };
  first_.resize(regions_.size());
  last_.resize(regions_.size());
  for (size_t i = 0; i < regions_.size(); ++i) {
    const RegionInfo& r = regions_[i];
    first_[i] = position(r.stream_id, r.begin_marker);
    last_[i] = std::max(first_[i], position(r.stream_id, r.end_marker));
  }
  sequential_children_.assign(regions_.size(), true);
  for (size_t i = 0; i < regions_.size(); ++i) {
    uint32_t reached = first_[i];
    for (uint32_t k = child_begin_[i]; k < child_begin_[i + 1]; ++k) {
      const uint32_t c = children_[k];
      if (regions_[c].stream_id != regions_[i].stream_id || first_[c] < reached ||
          last_[c] > last_[i]) {
        sequential_children_[i] = false;
        break;
      }
      reached = last_[c];
    }
  }
}

uint32_t ReportLayout::back_to_back_transitions(size_t index) const {
  uint32_t count = 0;
  for (uint32_t k = first_[index] + 1; k <= last_[index]; ++k) count += back_to_back_at_[k];
  return count;
}

uint64_t ReportLayout::work_ns(const uint64_t* times, size_t index) const {
  if (source_.marker_overhead_ns == 0 && source_.marker_back_to_back_ns == 0) {
    // Nothing subtracted: what the region's two markers read, whatever their indices' order
    // (a layout made by hand may number an end before its begin).
    return ::accgraph::detail::span_duration(times[regions_[index].begin_marker],
                                             times[regions_[index].end_marker], 0);
  }
  return detail::work_ns(times, ordered_.data(), back_to_back_at_.data(), first_[index],
                         last_[index], source_.marker_overhead_ns, source_.marker_back_to_back_ns);
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
  assign(info, start_ns, end_ns, 0, kUnmeasurable);
}

// Note [Edges inside the parent]: take_overhead moves a region's edges in by half the overhead
// each only when the region is longer than the overhead; a shorter one keeps what its markers
// read (its duration is 0 or what its transitions read beyond their cost: Note [Marker
// transitions]). Its parent, longer, moved in: a short child at the parent's start (an empty
// module sharing the parent's begin marker) then started before its parent, and a short child at
// its end ended after it (seen under compute-sanitizer, where the calibrated overhead is
// milliseconds), which breaks the nesting every trace viewer draws. On one stream the markers'
// raw times nest as the regions do, and a region moved in lies inside its parent moved in (the
// parent is at least as long, so it moved in too, by the same amount). So only a region that
// kept its raw edges is clamped, into the moved-in edges of its nearest ancestor on its stream
// that moved in (the ancestors between them kept their raw edges, which hold its own). Its
// duration is unchanged.
namespace {
bool moves_in(uint64_t start, uint64_t end, uint64_t overhead_ns) {
  return overhead_ns != 0 && end > start && end - start > overhead_ns;
}
}  // namespace

void ReplayReport::keep_inside_parent(RegionTiming& timing, const RegionInfo& info) const {
  const uint64_t overhead = layout_->source().marker_overhead_ns;
  if (overhead == 0 || moves_in(timing.raw_start_ns_, timing.raw_end_ns_, overhead)) return;
  const std::vector<RegionInfo>& regions = layout_->regions();
  for (int p = info.parent; p >= 0; p = regions[static_cast<size_t>(p)].parent) {
    const RegionInfo& ancestor = regions[static_cast<size_t>(p)];
    uint64_t lo = times_[ancestor.begin_marker], hi = times_[ancestor.end_marker];
    if (ancestor.stream_id != info.stream_id || lo == kUnmeasurable || hi == kUnmeasurable)
      return;
    if (!moves_in(lo, hi, overhead)) continue;
    RegionTiming::take_overhead(lo, hi, overhead);
    timing.start_ns_ = std::clamp(timing.start_ns_, lo, hi);
    timing.end_ns_ = std::clamp(timing.end_ns_, timing.start_ns_, hi);
    return;
  }
}

RegionTiming ReplayReport::timing_of(size_t index) const {
  const RegionInfo& info = layout_->regions()[index];
  RegionTiming timing;
  const uint64_t begin = times_[info.begin_marker], end = times_[info.end_marker];
  const bool measured = begin != kUnmeasurable && end != kUnmeasurable;
  const uint64_t overhead = layout_->source().marker_overhead_ns;
  timing.assign(info, begin, end, overhead,
                measured ? layout_->work_ns(times_.data(), index) : 0);
  // Only a region that kept its raw edges can lie outside its parent's (a call saved for the
  // others: this runs for every region a report makes).
  if (measured && overhead != 0 && !moves_in(begin, end, overhead))
    keep_inside_parent(timing, info);
  if (timing.measurable_ && layout_->child_begin_[index] != layout_->child_begin_[index + 1])
    set_self_time(timing, index);
  return timing;
}

// Note [Self time]
// A region's self time is its duration minus the time its direct children (RegionInfo::parent,
// same report) take: the glue between and around them. For children that run one after the
// other on the region's stream (the usual nesting; ReportLayout::sequential_children_) it is
// exactly duration minus the sum of the children's durations: both are sums over marker
// transitions (Note [Marker transitions]) and the parent's include its children's, so the self
// time is what the transitions between and around the children read beyond their cost: parent =
// sum(children) + self exactly, and a container with no work of its own reads about 0. Otherwise (a
// child on another stream, children that overlap, or no marker cost subtracted, where durations
// are what the markers read, in any order) the children's intervals are clipped to the
// region's [start, end] and their union is subtracted: a child on another stream may start before
// the region or end after it (only its part inside counts) and children on parallel streams may
// overlap each other (time covered by two of them is taken once), where a plain difference of sums
// could go negative. Those intervals are the edges the regions report (marker overhead taken off
// their ends) on the device's clock, so the transitions between such children stay in the self
// time; it is clamped to the duration. Cost: regions() makes each timing on demand and every region
// is some region's child at most once, so a pass over a report reads each marker time about twice
// and allocates nothing. The children come in layout (open) order, which on one stream is start
// order: the union is then a single merging walk. A child that starts before the run being merged
// (parallel streams) sends the region to a sort of its children's intervals in a per-thread scratch
// vector, which allocates only when it grows.
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
  const std::vector<RegionInfo>& regions = layout_->regions();
  const uint32_t* first = layout_->children_.data() + layout_->child_begin_[index];
  const uint32_t* last = layout_->children_.data() + layout_->child_begin_[index + 1];
  const uint64_t overhead = layout_->source().marker_overhead_ns;  // as timing_of took it off
  const bool subtracted = overhead != 0 || layout_->source().marker_back_to_back_ns != 0;
  if (subtracted && layout_->sequential_children_[index]) {
    uint64_t children = 0;
    for (const uint32_t* c = first; c != last; ++c) {
      const RegionInfo& child = regions[*c];
      const uint64_t start = times_[child.begin_marker], end = times_[child.end_marker];
      if (start == kUnmeasurable || end == kUnmeasurable) {
        timing.self_measurable_ = false;
        timing.self_ns_ = 0;
        return;
      }
      children += layout_->work_ns(times_.data(), *c);
    }
    timing.self_ns_ = timing.duration_ns_ - std::min(children, timing.duration_ns_);
    return;
  }
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
  timing.self_ns_ = std::min(timing.duration_ns_, hi - lo - std::min(covered, hi - lo));
}

}  // namespace accgraph::timing
