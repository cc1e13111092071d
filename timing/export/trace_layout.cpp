// layout_trace: the processes, tracks, stacks and slice order of a trace (Note [Trace layout]).
#include "trace_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"
#include "exported_text.hpp"

namespace accgraph::timing::detail {

namespace {

struct Span {
  uint64_t start_ns, end_ns;
};

// The first-fit assignment of one track's slices to its stacks (Note [Trace layout]): a stack
// keeps the end times of its slices still open; a slice fits a stack when, after popping what
// ended before it starts, it lies inside the innermost open one.
class StackAssigner {
 public:
  // Forgets the stacks of the previous track.
  void start_track() {
    for (auto& open : stacks_) open.clear();
    used_ = 0;
  }
  // The stack of `slice`, the track's next in sorted order; `parent_stack` is the stack of its
  // enclosing region on the same track, or -1 (none, or not assigned yet).
  int32_t assign(const Span& slice, int32_t parent_stack) {
    size_t stack = 0;
    // A region stays on its parent's stack when it fits there (sorting puts parents first).
    if (parent_stack >= 0 && fits(static_cast<size_t>(parent_stack), slice)) {
      stack = static_cast<size_t>(parent_stack);
    } else {
      while (stack < used_ && !fits(stack, slice)) ++stack;
    }
    if (stack == used_) {
      if (used_ == stacks_.size()) stacks_.emplace_back();
      ++used_;
    }
    stacks_[stack].push_back(slice.end_ns);
    return static_cast<int32_t>(stack);
  }
  // The number of stacks the track used.
  int32_t used() const { return static_cast<int32_t>(used_); }

 private:
  bool fits(size_t stack, const Span& slice) {
    auto& open = stacks_[stack];
    // Sorted by start, an open slice that ended by the time this one starts (and does not
    // contain it as a zero-length slice at its end) can contain no later slice either.
    while (!open.empty() && open.back() <= slice.start_ns && slice.end_ns > open.back())
      open.pop_back();
    return open.empty() || slice.end_ns <= open.back();
  }

  std::vector<std::vector<uint64_t>> stacks_;  // end times of the open slices (reused)
  size_t used_ = 0;
};

void check_report_count(const std::vector<ReplayReport>& reports, const char* what) {
  if (reports.size() > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} of {} reports: at most {} reports fit one trace; export "
                            "fewer reports at a time",
                            what, reports.size(), std::numeric_limits<uint32_t>::max()));
}

// The layout as the reports first give it: processes and tracks in the order first seen, then
// put in listing order by order_layout.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(const std::vector<ReplayReport>& reports)
      : reports_(reports), first_index_(reports.size() + 1, 0) {}

  void collect() {
    for (size_t i = 0; i < reports_.size(); ++i) {
      const ReplayReport& r = reports_[i];
      first_index_[i + 1] = first_index_[i] + r.size();
      if (r.empty()) continue;
      const uint32_t process = process_of(r);
      for (size_t j = 0; j < r.size(); ++j) {
        const RegionTiming t = r.region(j);
        if (!t.measurable()) continue;  // no place in time
        TraceProcess& p = layout_.processes[process];
        if (p.first_measured == nullptr) p.first_measured = &r;
        p.first_start_ns = std::min(p.first_start_ns, t.start_ns());
        layout_.origin_ns = std::min(layout_.origin_ns, t.start_ns());
        layout_.slices.push_back(TraceSlice{t.start_ns(), t.end_ns(), static_cast<uint32_t>(i),
                                            static_cast<uint32_t>(j), track_of(process, t), -1});
      }
    }
  }

  // Processes in (backend, device) order; within each, its stream tracks by id, then its lanes
  // as first seen; slices by track, then start, longer first, shallower first, input order.
  void order_layout() {
    std::vector<uint32_t> process_rank(layout_.processes.size());
    std::vector<TraceProcess> processes;
    for (const auto& [key, index] : process_index_) {
      process_rank[index] = static_cast<uint32_t>(processes.size());
      processes.push_back(layout_.processes[index]);
    }
    layout_.processes = std::move(processes);
    for (TraceTrack& track : layout_.tracks) track.process = process_rank[track.process];

    std::vector<uint32_t> order(layout_.tracks.size());  // creation index by listing position
    for (uint32_t t = 0; t < order.size(); ++t) order[t] = t;
    const auto key = [&](uint32_t t) {
      const TraceTrack& x = layout_.tracks[t];
      return std::make_tuple(x.process, x.is_lane, x.is_lane ? 0 : x.stream_id, t);
    };
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    std::vector<uint32_t> position(order.size());
    std::vector<TraceTrack> tracks;
    tracks.reserve(order.size());
    for (uint32_t k = 0; k < order.size(); ++k) {
      position[order[k]] = k;
      tracks.push_back(layout_.tracks[order[k]]);
    }
    layout_.tracks = std::move(tracks);
    for (TraceSlice& s : layout_.slices) s.track = position[s.track];
    sort_slices();
  }

  // Every track's stacks (Note [Trace layout]), and the ranges of tracks and slices.
  void assign_stacks() {
    std::vector<int64_t> slice_at(first_index_.back(), -1);  // by first_index_ + region
    for (size_t k = 0; k < layout_.slices.size(); ++k)
      slice_at[slot(layout_.slices[k].report, layout_.slices[k].region)] = static_cast<int64_t>(k);
    detail::assign_stacks(layout_, [&](const TraceSlice& s) -> int64_t {
      const int parent = reports_[s.report].layout().regions()[s.region].parent;
      return parent >= 0 ? slice_at[slot(s.report, static_cast<size_t>(parent))] : -1;
    });
  }

  TraceLayout take() { return std::move(layout_); }

 private:
  size_t slot(uint32_t report, size_t region) const { return first_index_[report] + region; }

  uint32_t process_of(const ReplayReport& r) {
    const auto next = static_cast<uint32_t>(layout_.processes.size());
    const auto [it, added] = process_index_.try_emplace({r.backend(), r.device()}, next);
    if (added) {
      TraceProcess p;
      p.backend = r.backend();
      p.device = r.device();
      p.named_by = &r;
      p.first_seen = next;
      layout_.processes.push_back(p);
    }
    return it->second;
  }

  uint32_t track_of(uint32_t process, const RegionTiming& t) {
    const std::string_view lane = t.lane();
    const auto next = static_cast<uint32_t>(layout_.tracks.size());
    const uint32_t track =
        lane.empty() ? stream_tracks_.try_emplace({process, t.stream_id()}, next).first->second
                     : lane_tracks_.try_emplace({process, lane}, next).first->second;
    if (track == next) {
      TraceTrack added;
      added.process = process;
      added.is_lane = !lane.empty();
      added.stream_id = t.stream_id();
      added.lane = lane;
      layout_.tracks.push_back(added);
    }
    return track;
  }

  void sort_slices() {
    const auto depth = [&](const TraceSlice& s) {
      return reports_[s.report].layout().regions()[s.region].depth;
    };
    std::sort(
        layout_.slices.begin(), layout_.slices.end(),
        [&](const TraceSlice& a, const TraceSlice& b) {
          return std::make_tuple(a.track, a.start_ns, ~a.end_ns, depth(a), a.report, a.region) <
                 std::make_tuple(b.track, b.start_ns, ~b.end_ns, depth(b), b.report, b.region);
        });
  }

  const std::vector<ReplayReport>& reports_;
  std::vector<size_t> first_index_;  // of each report's regions in one numbering of all
  TraceLayout layout_;
  std::map<std::pair<std::string_view, int>, uint32_t> process_index_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> stream_tracks_;
  std::map<std::pair<uint32_t, std::string_view>, uint32_t> lane_tracks_;
};

}  // namespace

void assign_stacks(TraceLayout& layout,
                   const std::function<int64_t(const TraceSlice&)>& parent_of) {
  StackAssigner assigner;
  std::vector<TraceSlice>& slices = layout.slices;
  for (size_t begin = 0; begin < slices.size();) {
    const uint32_t track = slices[begin].track;
    assigner.start_track();
    size_t end = begin;
    for (; end < slices.size() && slices[end].track == track; ++end) {
      TraceSlice& s = slices[end];
      const int64_t parent = parent_of(s);
      const bool placed = parent >= 0 && slices[static_cast<size_t>(parent)].track == track;
      const int32_t parent_stack = placed ? slices[static_cast<size_t>(parent)].stack : -1;
      s.stack = assigner.assign(Span{s.start_ns, s.end_ns}, parent_stack);
    }
    TraceTrack& t = layout.tracks[track];
    t.stacks = assigner.used();
    t.first_slice = static_cast<uint32_t>(begin);
    t.end_slice = static_cast<uint32_t>(end);
    begin = end;
  }
  for (uint32_t t = 0; t < layout.tracks.size(); ++t) {
    TraceProcess& p = layout.processes[layout.tracks[t].process];
    if (!p.has_slices()) p.first_track = t;
    p.end_track = t + 1;
  }
}

std::string TraceTrack::name() const {
  return is_lane ? std::string(lane) : fmt::format("stream {}", stream_id);
}

TraceLayout layout_trace(const std::vector<ReplayReport>& reports, const char* what) {
  check_report_count(reports, what);
  LayoutBuilder builder(reports);
  builder.collect();
  builder.order_layout();
  builder.assign_stacks();
  return builder.take();
}

std::string process_name(const TraceProcess& process, const ReplayReport& named_by) {
  if (named_by.device_name().empty())
    return fmt::format("{} device {}", process.backend, process.device);
  return fmt::format("{} device {} ({})", process.backend, process.device, named_by.device_name());
}

std::string slice_category(const ReplayReport& report) {
  return report.graph_id() == 0 ? std::string("eager") : fmt::format("graph {}", report.graph_id());
}

bool writes_metadata_entry(const Metadata& metadata, size_t k) {
  const std::string& key = metadata[k].first;
  if (key == "path" || key == "stream" || key == "graph_id" || key == "replay_index" ||
      key == "self_us" || key == "self_ns")
    return false;
  for (size_t later = k + 1; later < metadata.size(); ++later)
    if (same_valid_utf8(key, metadata[later].first)) return false;
  return true;
}

}  // namespace accgraph::timing::detail
