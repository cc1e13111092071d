// The layout of a trace of replay reports, worked out once for every trace format: processes,
// tracks, stacks for overlapping regions and the order of the slices (Note [Trace layout]).
// Internal; compiled into libaccgraph (the Chrome trace) and accgraph::perfetto alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "accgraph/report.hpp"

namespace accgraph::timing::detail {

// Note [Trace layout]: the Chrome trace (chrome_trace.cpp) and the Perfetto trace
// (perfetto/writer.cpp) show the same picture, so layout_trace works it out once and the writers
// only serialise it:
//
// * One process per (backend, device), listed in (backend, device) order, because a stream is a
//   queue of one device and the regions of every graph replayed on it share its timeline.
// * In each process one track per stream ("stream <id>", by id) for the regions without a lane,
//   then one track per lane (named by the lane, in the order first seen) for those with one.
// * A track shows its slices as a call stack, so on every track each slice must either contain
//   or follow the ones before it. Regions of one track can overlap without nesting (a region
//   that ends on a stream other than where it began, replays of different graphs on one stream
//   id, two streams' regions in one lane): those go to further *stacks* of the track (Chrome's
//   "(overlap <k>)" threads, Perfetto's backing tracks, Note [Backing tracks]). Greedy first fit
//   over the track's slices sorted by start (longer first, shallower first, then input order,
//   so parents precede children): a region stays on its parent's stack when it nests there,
//   else takes the first stack whose innermost open slice contains it or that has none open.
// * Unmeasurable regions have no place in time and are left out.
//
// The index is one TraceSlice (32 bytes) per measurable region, plus 8 bytes per region while
// the stacks are assigned: no text. The two formats differ only where their documents always
// did: Chrome names every process that has regions (TraceProcess::named_by) and numbers them in
// the order first seen, Perfetto lists only processes with slices, numbered in listing order.

// One process of the trace: a (backend, device).
struct TraceProcess {
  std::string_view backend;
  int device = 0;
  const ReplayReport* named_by = nullptr;        // its first report with regions
  const ReplayReport* first_measured = nullptr;  // its first report with a slice; null: none
  uint32_t first_seen = 0;  // order of named_by among the processes' first reports
  uint64_t first_start_ns = std::numeric_limits<uint64_t>::max();  // of its slices
  uint32_t first_track = 0, end_track = 0;  // its tracks: TraceLayout::tracks[first, end)

  bool has_slices() const { return first_track != end_track; }
};

// One track of a process: a stream's or a lane's.
struct TraceTrack {
  uint32_t process = 0;  // index into TraceLayout::processes
  bool is_lane = false;
  uint64_t stream_id = 0;                   // !is_lane
  std::string_view lane;                    // is_lane (the report layout's string)
  int32_t stacks = 0;                       // stacks used, at least 1
  uint32_t first_slice = 0, end_slice = 0;  // its slices: TraceLayout::slices[first, end)

  // "stream <id>", or the lane as given (the writers make it valid text).
  std::string name() const;
};

// One measurable region, on its track's stack.
struct TraceSlice {
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t report = 0;  // index into the reports
  uint32_t region = 0;  // index into that report's regions
  uint32_t track = 0;   // index into TraceLayout::tracks
  int32_t stack = 0;    // 0: the track itself; k > 0: its k-th overflow stack
};

struct TraceLayout {
  std::vector<TraceProcess> processes;  // in (backend, device) order
  std::vector<TraceTrack> tracks;       // by process, then stream tracks by id, then lanes
  std::vector<TraceSlice> slices;       // by track, then start, longer first, shallower first
  uint64_t origin_ns = std::numeric_limits<uint64_t>::max();  // the earliest start
};

// The layout of `reports` (Note [Trace layout]). InvalidArgument, naming `what` ("the Chrome
// trace"), when there are more reports than a trace can index.
TraceLayout layout_trace(const std::vector<ReplayReport>& reports, const char* what);

// Gives every slice of `layout` its stack (Note [Trace layout]) and sets the tracks' slice ranges
// and the processes' track ranges. The slices must be sorted by track, then start, longer first
// (parents before their children), with stack -1; `parent_of` gives the index of a slice's
// enclosing slice in layout.slices, or -1 for none: a slice stays on its parent's stack when it
// nests there. What layout_trace does for reports, and write_perfetto_events for any events.
void assign_stacks(TraceLayout& layout, const std::function<int64_t(const TraceSlice&)>& parent_of);

// "<backend> device <n>", with " (<device name>)" when `named_by` has one.
std::string process_name(const TraceProcess& process, const ReplayReport& named_by);

// A slice's category: "eager", or "graph <id>" for a replay.
std::string slice_category(const ReplayReport& report);

// Whether a trace writes metadata entry `k` as an argument of its slice: a key repeated (once
// made valid UTF-8, Note [Exported text]) keeps its last value, and path, stream, graph_id,
// replay_index, self_us and self_ns are the writers' own (so each key is written once).
bool writes_metadata_entry(const Metadata& metadata, size_t k);

}  // namespace accgraph::timing::detail
