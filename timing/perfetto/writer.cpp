// write_perfetto_trace: replay reports as a native Perfetto trace (processes, stream and lane
// tracks, backing tracks for overlap, typed debug annotations, the rank's clock information).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/perfetto.hpp"
#include "annotations.hpp"
#include "../export_support.hpp"
#include "packet_io.hpp"

namespace accgraph::timing {

namespace {

namespace pb = accgraph::pftrace;

// Note [Backing tracks]: a Perfetto track shows its slices as a stack, so every track's
// begin/end packets must nest. Regions of one stream (or lane) may overlap without nesting: a
// region ended on another stream than it began, replays of different graphs on one stream id,
// regions of several streams on one lane. Those go to further *backing* tracks of the same name
// and the same sibling_merge_key (SIBLING_MERGE_BEHAVIOR_BY_SIBLING_MERGE_KEY), which the UI
// draws as one row: nothing is moved to a made-up track and no time is changed (the method of
// the CUDA-graph annotation tutorial). The assignment is the Chrome writer's first fit
// (detail::LaneAssigner): over the track's regions sorted by start (longer first, shallower
// first on ties), a region stays on its parent's backing track when it nests there, else takes
// the first backing track whose innermost open slice contains it or that has none open.
//
// Every track, even one with a single backing track, gets its own merge key, so a lane named
// like a stream ("stream 3") is never merged with that stream's track by name.
constexpr uint32_t kSequenceId = 1;
constexpr const char* kInfoEventName = "accgraph trace info";
constexpr const char* kInfoCategory = "accgraph";

// One measurable region in the index (about 32 bytes; 4 more per region for backing_of).
struct Entry {
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t report;
  uint32_t region;
  uint32_t track;
  uint32_t process;
  int32_t backing;
};

struct Process {
  std::string_view backend;
  int device;
  const ReplayReport* first;  // names the process
  uint64_t first_start_ns = std::numeric_limits<uint64_t>::max();
  int pid = 0;
  uint64_t uuid = 0;
};

struct Track {
  uint32_t process;
  bool is_lane;
  uint64_t stream_id;       // !is_lane
  std::string_view lane;    // is_lane (the layout's string)
  uint32_t first_seen;      // order of appearance, for lanes
  int32_t backings = 0;     // backing tracks used
  uint64_t first_uuid = 0;  // uuid of backing track 0; the others follow
};


// A packet to write after the descriptors: a slice's begin or end, or a process's trace info.
// Sorted by host time (Note [Packet order]).
struct Event {
  enum Kind : uint8_t { Info, Begin, End };
  uint64_t host_ns;
  uint32_t index;  // into entries (Begin, End) or processes (Info)
  Kind kind;
};

// Note [Packet order]: the event packets are written in the order of their time on the host
// clock (the packet's device time minus its device's offset, PerfettoOptions::clocks; the device
// time itself for an uncalibrated device), ties kept in nesting order. With one device that is
// simply time order. With several it is the order merge_perfetto_traces needs: it shifts every
// device onto the host clock and interleaves the ranks' files by time, so each file must already
// be in host-time order for the merged trace to be in time order too.

std::string process_name(const Process& p, const PerfettoOptions& options) {
  std::string name =
      p.first->device_name().empty()
          ? fmt::format("{} device {}", p.backend, p.device)
          : fmt::format("{} device {} ({})", p.backend, p.device, p.first->device_name());
  if (options.rank >= 0) name = fmt::format("rank {}: {}", options.rank, name);
  return detail::valid_utf8(name);
}

void add_annotation(pb::TrackEvent& event, std::string_view name, int64_t value) {
  pb::DebugAnnotation* a = event.add_debug_annotations();
  a->set_name(std::string(name));
  a->set_int_value(value);
}

void add_annotation(pb::TrackEvent& event, std::string_view name, std::string_view value) {
  pb::DebugAnnotation* a = event.add_debug_annotations();
  a->set_name(std::string(name));
  a->set_string_value(detail::valid_utf8(value));
}

const DeviceClockOffset* find_clock(const PerfettoOptions& options, const Process& p) {
  for (const DeviceClockOffset& clock : options.clocks)
    if (clock.backend == p.backend && clock.device == p.device) return &clock;
  return nullptr;
}

// The process's "accgraph trace info" instant: what merge_perfetto_traces reads. False when
// `writer`'s stream failed.
bool write_info(detail::PacketWriter& writer, const Process& p, const PerfettoOptions& options) {
  pb::TracePacket packet;
  packet.set_timestamp(p.first_start_ns);
  packet.set_trusted_packet_sequence_id(kSequenceId);
  pb::TrackEvent* event = packet.mutable_track_event();
  event->set_type(pb::TrackEvent::TYPE_INSTANT);
  event->set_track_uuid(p.uuid);
  event->set_name(kInfoEventName);
  event->add_categories(kInfoCategory);
  add_annotation(*event, "rank", options.rank);
  add_annotation(*event, "world_size", options.world_size);
  add_annotation(*event, "host", options.host);
  add_annotation(*event, "host_clock", options.host_clock);
  add_annotation(*event, "host_clock_uncertainty_ns",
                 static_cast<int64_t>(options.host_clock_uncertainty_ns));
  add_annotation(*event, "backend", p.backend);
  add_annotation(*event, "device", p.device);
  const DeviceClockOffset* clock = find_clock(options, p);
  pb::DebugAnnotation* calibrated = event->add_debug_annotations();
  calibrated->set_name("clock_calibrated");
  calibrated->set_bool_value(clock != nullptr);
  if (clock != nullptr) {
    add_annotation(*event, "clock_offset_ns", clock->offset_ns);
    add_annotation(*event, "clock_uncertainty_ns", static_cast<int64_t>(clock->uncertainty_ns));
  }
  return writer.write(packet);
}

void validate(const PerfettoOptions& options) {
  if (options.rank < -1 || (options.rank >= 0 && options.rank >= options.world_size) ||
      (options.rank == -1 && options.world_size != 0))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("write_perfetto_trace: rank {} with world_size {}: give rank -1 and "
                            "world_size 0 for a single process, or a rank from 0 to "
                            "world_size - 1",
                            options.rank, options.world_size));
}

void write_events(std::ostream& out, const std::vector<ReplayReport>& reports,
                  const PerfettoOptions& options) {
  validate(options);
  if (reports.size() > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing the Perfetto trace of {} reports: at most {} reports fit "
                            "one trace; export fewer reports at a time",
                            reports.size(), std::numeric_limits<uint32_t>::max()));

  // Processes by (backend, device); tracks by (process, stream) or (process, lane).
  std::map<std::pair<std::string_view, int>, uint32_t> process_index;
  std::vector<Process> processes;
  std::map<std::tuple<uint32_t, uint64_t>, uint32_t> stream_tracks;
  std::map<std::tuple<uint32_t, std::string_view>, uint32_t> lane_tracks;
  std::vector<Track> tracks;
  std::vector<size_t> first_index(reports.size() + 1, 0);  // of each report's regions
  std::vector<Entry> entries;
  for (size_t i = 0; i < reports.size(); ++i) {
    const ReplayReport& r = reports[i];
    first_index[i + 1] = first_index[i] + r.size();
    for (size_t j = 0; j < r.size(); ++j) {
      const RegionTiming t = r.region(j);
      if (!t.measurable) continue;  // no place in time
      const auto [p, new_process] = process_index.try_emplace(
          {std::string_view(r.backend()), r.device()}, static_cast<uint32_t>(processes.size()));
      if (new_process) processes.push_back(Process{r.backend(), r.device(), &r});
      Process& process = processes[p->second];
      process.first_start_ns = std::min(process.first_start_ns, t.start_ns);
      const std::string_view lane = t.lane();
      const auto next_track = static_cast<uint32_t>(tracks.size());
      const uint32_t track =
          lane.empty()
              ? stream_tracks.try_emplace({p->second, t.stream_id()}, next_track).first->second
              : lane_tracks.try_emplace({p->second, lane}, next_track).first->second;
      if (track == next_track)
        tracks.push_back(Track{p->second, !lane.empty(), t.stream_id(), lane, next_track});
      entries.push_back(Entry{t.start_ns, t.end_ns, static_cast<uint32_t>(i),
                              static_cast<uint32_t>(j), track, p->second, -1});
    }
  }

  // Processes in (backend, device) order, numbered 1.. in that order; within each, its stream
  // tracks by id, then its lanes as first seen.
  std::vector<uint32_t> process_order;
  for (const auto& [key, index] : process_index) process_order.push_back(index);
  std::vector<uint32_t> track_order(tracks.size());
  for (uint32_t t = 0; t < tracks.size(); ++t) track_order[t] = t;
  std::vector<uint32_t> process_rank(processes.size());
  for (uint32_t k = 0; k < process_order.size(); ++k) process_rank[process_order[k]] = k;
  std::sort(track_order.begin(), track_order.end(), [&](uint32_t a, uint32_t b) {
    const Track& x = tracks[a];
    const Track& y = tracks[b];
    return std::make_tuple(process_rank[x.process], x.is_lane, x.is_lane ? 0 : x.stream_id,
                           x.first_seen) < std::make_tuple(process_rank[y.process], y.is_lane,
                                                           y.is_lane ? 0 : y.stream_id,
                                                           y.first_seen);
  });
  std::vector<uint32_t> track_position(tracks.size());
  for (uint32_t k = 0; k < track_order.size(); ++k) track_position[track_order[k]] = k;

  // Backing tracks: per track, over its regions by start, longer first, shallower first, input
  // order (Note [Backing tracks]).
  const auto depth_of = [&](const Entry& e) {
    return reports[e.report].layout().regions()[e.region].depth;
  };
  std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    return std::make_tuple(track_position[a.track], a.start_ns, ~a.end_ns, depth_of(a), a.report,
                           a.region) < std::make_tuple(track_position[b.track], b.start_ns,
                                                       ~b.end_ns, depth_of(b), b.report, b.region);
  });
  std::vector<int32_t> backing_of(first_index.back(), -1);  // by first_index + region
  std::vector<uint32_t> track_of(first_index.back(), 0);
  for (const Entry& e : entries) track_of[first_index[e.report] + e.region] = e.track;
  detail::LaneAssigner assigner;  // Note [Backing tracks]
  for (size_t begin = 0; begin < entries.size();) {
    const uint32_t track = entries[begin].track;
    assigner.start_stream();
    size_t end = begin;
    for (; end < entries.size() && entries[end].track == track; ++end) {
      Entry& e = entries[end];
      const int parent = reports[e.report].layout().regions()[e.region].parent;
      int32_t parent_backing = -1;
      if (parent >= 0) {
        const size_t slot = first_index[e.report] + static_cast<size_t>(parent);
        if (backing_of[slot] >= 0 && track_of[slot] == track) parent_backing = backing_of[slot];
      }
      e.backing = assigner.assign(detail::Span{e.start_ns, e.end_ns}, parent_backing);
      backing_of[first_index[e.report] + e.region] = e.backing;
    }
    tracks[track].backings = assigner.used();
    begin = end;
  }
  backing_of = {};
  track_of = {};

  // Uuids: unique in the trace, distinct per rank (a merge renumbers them anyway).
  uint64_t next_uuid = (static_cast<uint64_t>(options.rank + 1) << 48) + 1;
  for (uint32_t k = 0; k < process_order.size(); ++k) {
    Process& p = processes[process_order[k]];
    p.pid = static_cast<int>(k) + 1;
    p.uuid = next_uuid++;
  }
  for (uint32_t t : track_order) {
    tracks[t].first_uuid = next_uuid;
    next_uuid += static_cast<uint64_t>(tracks[t].backings);
  }

  detail::PacketWriter writer(out);
  pb::TracePacket packet;
  // Descriptors, then each process's trace info, then the slices.
  size_t next_track = 0;
  for (uint32_t process : process_order) {
    const Process& p = processes[process];
    packet.Clear();
    pb::TrackDescriptor* d = packet.mutable_track_descriptor();
    d->set_uuid(p.uuid);
    d->mutable_process()->set_pid(p.pid);
    d->mutable_process()->set_process_name(process_name(p, options));
    d->set_child_ordering(pb::TrackDescriptor::EXPLICIT);
    if (!writer.write(packet)) return;
    for (int32_t rank_in_process = 0;
         next_track < track_order.size() && tracks[track_order[next_track]].process == process;
         ++next_track, ++rank_in_process) {
      const Track& track = tracks[track_order[next_track]];
      const std::string name = track.is_lane ? detail::valid_utf8(track.lane)
                                             : fmt::format("stream {}", track.stream_id);
      const std::string merge_key = track.is_lane
                                        ? fmt::format("{}/lane/{}", p.pid, name)
                                        : fmt::format("{}/stream/{}", p.pid, track.stream_id);
      for (int32_t b = 0; b < track.backings; ++b) {
        packet.Clear();
        d = packet.mutable_track_descriptor();
        d->set_uuid(track.first_uuid + static_cast<uint64_t>(b));
        d->set_parent_uuid(p.uuid);
        d->set_name(name);
        d->set_sibling_order_rank(rank_in_process);
        d->set_sibling_merge_behavior(
            pb::TrackDescriptor::SIBLING_MERGE_BEHAVIOR_BY_SIBLING_MERGE_KEY);
        d->set_sibling_merge_key(merge_key);
        if (!writer.write(packet)) return;
      }
    }
  }
  // The trace infos, then the slices' begin and end packets per backing track in nesting order
  // (a stack walk over its regions in sorted order); then all of them stably by host time.
  std::vector<int64_t> offset_of(processes.size(), 0);  // 0 for an uncalibrated device
  for (uint32_t k = 0; k < processes.size(); ++k)
    if (const DeviceClockOffset* clock = find_clock(options, processes[k]))
      offset_of[k] = clock->offset_ns;
  const auto host_time = [&](uint64_t device_ns, uint32_t process) {
    return device_ns - static_cast<uint64_t>(offset_of[process]);  // modulo 2^64, as merged
  };
  std::vector<Event> events;
  events.reserve(2 * entries.size() + processes.size());
  for (uint32_t process : process_order)
    events.push_back(
        Event{host_time(processes[process].first_start_ns, process), process, Event::Info});
  std::vector<std::vector<uint32_t>> open;  // per backing track of the current track
  for (size_t begin = 0; begin < entries.size();) {
    const uint32_t track = entries[begin].track;
    open.assign(static_cast<size_t>(tracks[track].backings), {});
    size_t end = begin;
    for (; end < entries.size() && entries[end].track == track; ++end) {
      const Entry& e = entries[end];
      auto& stack = open[static_cast<size_t>(e.backing)];
      while (!stack.empty() && entries[stack.back()].end_ns <= e.start_ns &&
             e.end_ns > entries[stack.back()].end_ns) {
        const Entry& closed = entries[stack.back()];
        events.push_back(Event{host_time(closed.end_ns, closed.process), stack.back(), Event::End});
        stack.pop_back();
      }
      events.push_back(
          Event{host_time(e.start_ns, e.process), static_cast<uint32_t>(end), Event::Begin});
      stack.push_back(static_cast<uint32_t>(end));
    }
    for (auto& stack : open)
      for (; !stack.empty(); stack.pop_back()) {
        const Entry& closed = entries[stack.back()];
        events.push_back(Event{host_time(closed.end_ns, closed.process), stack.back(), Event::End});
      }
    begin = end;
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.host_ns < b.host_ns; });

  for (const Event& ev : events) {
    if (ev.kind == Event::Info) {
      if (!write_info(writer, processes[ev.index], options)) return;
      continue;
    }
    const Entry& e = entries[ev.index];
    packet.Clear();
    packet.set_timestamp(ev.kind == Event::Begin ? e.start_ns : e.end_ns);
    packet.set_trusted_packet_sequence_id(kSequenceId);
    pb::TrackEvent* event = packet.mutable_track_event();
    event->set_track_uuid(tracks[e.track].first_uuid + static_cast<uint64_t>(e.backing));
    if (ev.kind == Event::End) {
      event->set_type(pb::TrackEvent::TYPE_SLICE_END);
      if (!writer.write(packet)) return;
      continue;
    }
    const ReplayReport& r = reports[e.report];
    const RegionTiming t = r.region(e.region);
    event->set_type(pb::TrackEvent::TYPE_SLICE_BEGIN);
    event->set_name(detail::valid_utf8(t.name()));
    event->add_categories(r.graph_id() == 0 ? std::string("eager")
                                            : fmt::format("graph {}", r.graph_id()));
    // Metadata: a key repeated (once made valid UTF-8) keeps its last value; path, graph_id,
    // replay_index and stream are the writer's own (each key is written once).
    const Metadata& metadata = t.metadata();
    for (size_t k = 0; k < metadata.size(); ++k) {
      const std::string key = detail::valid_utf8(metadata[k].first);
      bool replaced =
          key == "path" || key == "graph_id" || key == "replay_index" || key == "stream";
      for (size_t later = k + 1; later < metadata.size() && !replaced; ++later)
        replaced = detail::same_valid_utf8(key, metadata[later].first);
      if (replaced) continue;
      pb::DebugAnnotation* a = event->add_debug_annotations();
      a->set_name(key);
      detail::set_typed_value(*a, detail::valid_utf8(metadata[k].second));
    }
    add_annotation(*event, "path", t.path());
    add_annotation(*event, "graph_id", static_cast<int64_t>(r.graph_id()));
    add_annotation(*event, "replay_index", static_cast<int64_t>(r.replay_index()));
    add_annotation(*event, "stream", static_cast<int64_t>(t.stream_id()));
    if (!writer.write(packet)) return;
  }
  writer.flush();
}

}  // namespace

void write_perfetto_trace(std::ostream& out, const std::vector<ReplayReport>& reports,
                          const PerfettoOptions& options) {
  detail::export_to(out, "the Perfetto trace", [&] { write_events(out, reports, options); });
}

}  // namespace accgraph::timing
