// write_perfetto_events: the events of a Chrome JSON trace (torch.profiler's, with accgraph's
// regions added) as a native Perfetto trace, laid out as write_perfetto_trace lays out reports.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "export_errors.hpp"
#include "exported_text.hpp"
#include "accgraph/error.hpp"
#include "accgraph/perfetto.hpp"
#include "annotations.hpp"
#include "packet_io.hpp"
#include "tracks.hpp"

namespace accgraph::timing {

namespace {

namespace pb = accgraph::pftrace;
using detail::TimedEvent;
using detail::TraceLayout;
using detail::TraceSlice;
using detail::TraceTrack;

constexpr const char* kWhat = "the Perfetto trace of trace events";

// Note [Trace events in Perfetto]: a Chrome JSON trace names its rows by (pid, tid) and gives
// names and order in metadata events; a Perfetto trace has tracks. write_perfetto_events maps
// each pid to a process track and each (pid, tid) to a child track of it, and then writes them
// as write_perfetto_trace writes a stream's track: the slices of one row sorted by start (longer
// first, then as given) and put on stacks by the same first fit (assign_stacks, Note [Trace
// layout]), each stack a backing track (Note [Backing tracks]), and the begin and end packets in
// time order (Note [Packet order], every offset 0). A row of Chrome JSON may hold slices that
// overlap without nesting (Chrome draws them anyway); Perfetto would otherwise drop them. Times
// are integer nanoseconds from the caller, so nothing is rounded here.

std::optional<int64_t> parse_integer(std::string_view text) {
  int64_t value = 0;
  const char* last = text.data() + text.size();
  auto [end, error] = std::from_chars(text.data(), last, value);
  if (text.empty() || error != std::errc() || end != last) return std::nullopt;
  return value;
}

// The value of `event`'s argument `name`, or nullptr.
const TraceEventArg* find_arg(const TraceEvent& event, std::string_view name) {
  for (const TraceEventArg& arg : event.args)
    if (arg.name == name) return &arg;
  return nullptr;
}

constexpr uint32_t kUnseen = std::numeric_limits<uint32_t>::max();

struct Row {         // a process (pid) or a thread (pid, tid)
  std::string id;    // the pid's or tid's text
  uint32_t process;  // a thread's process; a process's own index
  std::optional<std::string> name;
  std::optional<int64_t> sort_index;
  std::vector<std::string> labels;  // a process's
  uint32_t first_seen = kUnseen;    // the index of its first slice or instant

  Row(std::string row_id, uint32_t process_index) : id(std::move(row_id)), process(process_index) {}

  // Listing order: rows with a sort index by it, then the rest as first seen.
  std::tuple<bool, int64_t, uint32_t> order() const {
    return {!sort_index.has_value(), sort_index.value_or(0), first_seen};
  }
};

class EventTraceWriter {
 public:
  EventTraceWriter(std::ostream& out, const std::vector<TraceEvent>& events)
      : events_(events), writer_(out) {}

  void write() {
    collect();
    lay_out();
    for (uint32_t k = 0; k < process_order_.size(); ++k)
      if (!write_descriptors(k)) return;
    std::vector<TimedEvent> timed;
    timed.reserve(instants_.size() + 2 * layout_.slices.size());
    for (uint32_t i = 0; i < instants_.size(); ++i)
      timed.push_back(TimedEvent{events_[instants_[i].first].ts_ns, i, TimedEvent::Instant});
    std::vector<std::vector<uint32_t>> open;
    for (const TraceTrack& track : layout_.tracks)
      detail::add_slice_events(layout_, track, 0, open, timed);
    detail::sort_by_time(timed);
    for (const TimedEvent& event : timed)
      if (!write_event(event)) return;
    writer_.flush();
  }

 private:
  // The rows, their metadata, and the slices and instants by row (thread index).
  void collect() {
    for (size_t i = 0; i < events_.size(); ++i) {
      const TraceEvent& e = events_[i];
      switch (e.phase) {
        case 'M':
          read_metadata(e);
          break;
        case 'X': {
          if (e.dur_ns > std::numeric_limits<uint64_t>::max() - e.ts_ns)
            throw Error(ErrorCode::InvalidArgument,
                        fmt::format("write_perfetto_events: event {} ('{}') ends after 2^64 ns "
                                    "(ts_ns {}, dur_ns {}): give times in nanoseconds that fit",
                                    i, detail::valid_utf8(e.name), e.ts_ns, e.dur_ns));
          slices_.push_back({static_cast<uint32_t>(i), thread_of(e, i)});
          break;
        }
        case 'i':
        case 'I':
          instants_.push_back({static_cast<uint32_t>(i), thread_of(e, i)});
          break;
        default:
          throw Error(ErrorCode::InvalidArgument,
                      fmt::format("write_perfetto_events: event {} ('{}') has phase '{}', which "
                                  "is not written: give only complete slices ('X'), instants "
                                  "('i', 'I') and metadata ('M'), leaving flow, counter and "
                                  "begin/end events out",
                                  i, detail::valid_utf8(e.name),
                                  detail::valid_utf8(std::string(1, e.phase))));
      }
    }
  }

  void read_metadata(const TraceEvent& e) {
    const bool thread = e.name == "thread_name" || e.name == "thread_sort_index";
    if (!thread && e.name != "process_name" && e.name != "process_labels" &&
        e.name != "process_sort_index")
      return;  // other metadata has no place in a Perfetto trace
    Row& row = thread ? threads_[thread_index(e)] : processes_[process_index(e.pid)];
    if (const TraceEventArg* name = find_arg(e, "name"))
      row.name = name->value;
    else if (const TraceEventArg* labels = find_arg(e, "labels"))
      row.labels.push_back(labels->value);
    else if (const TraceEventArg* sort = find_arg(e, "sort_index"))
      row.sort_index = parse_integer(sort->value);
  }

  uint32_t process_index(const std::string& pid) {
    const auto [it, added] = process_of_.try_emplace(pid, static_cast<uint32_t>(processes_.size()));
    if (added) processes_.emplace_back(pid, it->second);
    return it->second;
  }

  uint32_t thread_index(const TraceEvent& e) {
    const uint32_t process = process_index(e.pid);
    const auto [it, added] =
        thread_of_.try_emplace({process, e.tid}, static_cast<uint32_t>(threads_.size()));
    if (added) threads_.emplace_back(e.tid, process);
    return it->second;
  }

  // The thread of slice or instant `i`, which is seen there first if not before.
  uint32_t thread_of(const TraceEvent& e, size_t i) {
    const uint32_t thread = thread_index(e);
    for (Row* row : {&threads_[thread], &processes_[threads_[thread].process]})
      row->first_seen = std::min(row->first_seen, static_cast<uint32_t>(i));
    return thread;
  }

  void lay_out();
  bool write_descriptors(uint32_t k);
  bool write_event(const TimedEvent& event);
  int32_t next_free_pid();

  const std::vector<TraceEvent>& events_;
  detail::PacketWriter writer_;
  pb::TracePacket packet_;
  std::vector<Row> processes_, threads_;
  std::map<std::string, uint32_t> process_of_;
  std::map<std::pair<uint32_t, std::string>, uint32_t> thread_of_;
  std::vector<std::pair<uint32_t, uint32_t>> slices_, instants_;  // (event, thread)
  // The layout: processes and tracks in listing order.
  TraceLayout layout_;
  std::vector<uint32_t> process_order_;  // row of each listed process
  std::vector<uint32_t> track_of_;       // per thread row: its track; kUnseen: not listed
  std::vector<uint32_t> thread_of_track_;
  std::vector<uint64_t> track_uuid_;  // per track: its first backing track's; the rest follow
  std::vector<int32_t> pid_;          // per listed process
  std::set<int32_t> pids_taken_;
  int32_t pid_cursor_ = 0;
};

// Listing order of processes and threads, the layout of the slices and the pids.
void EventTraceWriter::lay_out() {
  const auto by_order = [](const std::vector<Row>& rows) {
    std::vector<uint32_t> order;
    for (uint32_t r = 0; r < rows.size(); ++r)
      if (rows[r].first_seen != kUnseen) order.push_back(r);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return rows[a].order() < rows[b].order(); });
    return order;
  };
  process_order_ = by_order(processes_);
  const std::vector<uint32_t> thread_order = by_order(threads_);
  track_of_.assign(threads_.size(), kUnseen);
  layout_.processes.resize(process_order_.size());
  for (uint32_t k = 0; k < process_order_.size(); ++k) {
    for (uint32_t thread : thread_order) {
      if (threads_[thread].process != process_order_[k]) continue;
      track_of_[thread] = static_cast<uint32_t>(layout_.tracks.size());
      thread_of_track_.push_back(thread);
      TraceTrack track;
      track.process = k;
      layout_.tracks.push_back(track);
    }
    if (const auto pid = parse_integer(processes_[process_order_[k]].id);
        pid && *pid >= std::numeric_limits<int32_t>::min() &&
        *pid <= std::numeric_limits<int32_t>::max())
      pids_taken_.insert(static_cast<int32_t>(*pid));
  }
  for (const auto& [event, thread] : slices_) {
    const TraceEvent& e = events_[event];
    layout_.slices.push_back(
        TraceSlice{e.ts_ns, e.ts_ns + e.dur_ns, event, 0, track_of_[thread], -1});
  }
  std::sort(layout_.slices.begin(), layout_.slices.end(),
            [](const TraceSlice& a, const TraceSlice& b) {
              return std::make_tuple(a.track, a.start_ns, ~a.end_ns, a.report) <
                     std::make_tuple(b.track, b.start_ns, ~b.end_ns, b.report);
            });
  detail::assign_stacks(layout_, [](const TraceSlice&) -> int64_t { return -1; });
  for (TraceTrack& track : layout_.tracks) track.stacks = std::max(track.stacks, 1);
  for (uint32_t k = 0; k < process_order_.size(); ++k) {
    const auto pid = parse_integer(processes_[process_order_[k]].id);
    const bool fits = pid && *pid >= std::numeric_limits<int32_t>::min() &&
                      *pid <= std::numeric_limits<int32_t>::max();
    pid_.push_back(fits ? static_cast<int32_t>(*pid) : next_free_pid());
  }
  // Uuids: k + 1 for process k, then each track's backing tracks.
  uint64_t next_uuid = process_order_.size() + 1;
  for (const TraceTrack& track : layout_.tracks) {
    track_uuid_.push_back(next_uuid);
    next_uuid += static_cast<uint64_t>(track.stacks);
  }
}

// A pid for a process whose pid is not an int32 ("Spans"): above every int32 pid, or the
// smallest positive one free.
int32_t EventTraceWriter::next_free_pid() {
  if (pid_cursor_ == 0)
    pid_cursor_ = pids_taken_.empty() || *pids_taken_.rbegin() < 0 ? 1 : *pids_taken_.rbegin();
  for (;;) {
    pid_cursor_ = pid_cursor_ == std::numeric_limits<int32_t>::max() ? 1 : pid_cursor_ + 1;
    if (pids_taken_.insert(pid_cursor_).second) return pid_cursor_;
  }
}

// Process k (listing order) and its threads' backing tracks.
bool EventTraceWriter::write_descriptors(uint32_t k) {
  const Row& process = processes_[process_order_[k]];
  pb::ProcessDescriptor& descriptor = detail::start_process_track(
      packet_, k + 1, pid_[k], detail::valid_utf8(process.name.value_or(process.id)));
  for (const std::string& label : process.labels)
    descriptor.add_process_labels(detail::valid_utf8(label));
  if (process.sort_index && *process.sort_index >= std::numeric_limits<int32_t>::min() &&
      *process.sort_index <= std::numeric_limits<int32_t>::max())
    descriptor.set_legacy_sort_index(static_cast<int32_t>(*process.sort_index));
  if (!writer_.write(packet_)) return false;
  const detail::TraceProcess& p = layout_.processes[k];
  for (uint32_t t = p.first_track; t < p.end_track; ++t) {
    const Row& thread = threads_[thread_of_track_[t]];
    detail::BackingTracks backing;
    backing.first_uuid = track_uuid_[t];
    backing.parent_uuid = k + 1;
    backing.name = detail::valid_utf8(
        thread.name.value_or(parse_integer(thread.id) ? "thread " + thread.id : thread.id));
    backing.order_rank = static_cast<int32_t>(t - p.first_track);
    backing.merge_key = fmt::format("{}/thread/{}", pid_[k], detail::valid_utf8(thread.id));
    backing.stacks = layout_.tracks[t].stacks;
    if (!detail::write_backing_tracks(writer_, packet_, backing)) return false;
  }
  return true;
}

// A slice's begin (with its name, category and arguments) or end, or an instant.
bool EventTraceWriter::write_event(const TimedEvent& ev) {
  const bool instant = ev.kind == TimedEvent::Instant;
  const TraceSlice* slice = instant ? nullptr : &layout_.slices[ev.index];
  const TraceEvent& e = events_[instant ? instants_[ev.index].first : slice->report];
  const uint64_t track = instant ? track_uuid_[track_of_[instants_[ev.index].second]]
                                 : track_uuid_[slice->track] + static_cast<uint64_t>(slice->stack);
  const auto type = instant                        ? pb::TrackEvent::TYPE_INSTANT
                    : ev.kind == TimedEvent::Begin ? pb::TrackEvent::TYPE_SLICE_BEGIN
                                                   : pb::TrackEvent::TYPE_SLICE_END;
  pb::TrackEvent& event = detail::start_track_event(
      packet_, ev.kind == TimedEvent::End ? slice->end_ns : e.ts_ns, track, type);
  if (ev.kind != TimedEvent::End) {
    event.set_name(detail::valid_utf8(e.name));
    if (!e.category.empty()) event.add_categories(detail::valid_utf8(e.category));
    for (const TraceEventArg& arg : e.args) {
      pb::DebugAnnotation* a = event.add_debug_annotations();
      a->set_name(detail::valid_utf8(arg.name));
      if (arg.is_text)
        a->set_string_value(detail::valid_utf8(arg.value));
      else
        detail::set_typed_value(*a, detail::valid_utf8(arg.value));
    }
  }
  return writer_.write(packet_);
}

}  // namespace

void write_perfetto_events(std::ostream& out, const std::vector<TraceEvent>& events) {
  detail::export_to(out, kWhat, [&] {
    if (events.size() >= std::numeric_limits<uint32_t>::max())
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("write_perfetto_events: {} events; at most {} fit one trace: "
                              "write fewer at a time",
                              events.size(), std::numeric_limits<uint32_t>::max() - 1));
    EventTraceWriter(out, events).write();
  });
}

}  // namespace accgraph::timing
