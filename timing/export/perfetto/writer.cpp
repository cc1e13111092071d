// write_perfetto_trace: replay reports as a native Perfetto trace, the trace layout (Note [Trace
// layout]) written as process and track descriptors (backing tracks for overlap), slices with
// typed debug annotations, and each process's clock information.
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "export_errors.hpp"
#include "exported_text.hpp"
#include "accgraph/error.hpp"
#include "accgraph/perfetto.hpp"
#include "annotations.hpp"
#include "packet_io.hpp"
#include "trace_info.hpp"
#include "trace_writers.hpp"
#include "tracks.hpp"

namespace accgraph::timing {

namespace {

namespace pb = accgraph::pftrace;
using detail::add_annotation;
using detail::TimedEvent;
using detail::TraceLayout;
using detail::TraceProcess;
using detail::TraceSlice;
using detail::TraceTrack;

// Note [Packet order]: the event packets are written in the order of their time on the host
// clock (the packet's device time minus its device's offset, PerfettoOptions::clocks; the device
// time itself for an uncalibrated device), ties kept in nesting order. With one device that is
// simply time order. With several it is the order merge_perfetto_traces needs: it shifts every
// device onto the host clock and interleaves the ranks' files by time, so each file must already
// be in host-time order for the merged trace to be in time order too.

const DeviceClockOffset* find_clock(const PerfettoOptions& options, const TraceProcess& p) {
  for (const DeviceClockOffset& clock : options.clocks)
    if (clock.backend == p.backend && clock.device == p.device) return &clock;
  return nullptr;
}

void validate(const PerfettoOptions& options) {
  if (options.rank < -1 || (options.rank >= 0 && options.rank >= options.world_size) ||
      (options.rank == -1 && options.world_size != 0))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("write_perfetto_trace: rank {} with world_size {}: give rank -1 and "
                            "world_size 0 for a single process, or a rank from 0 to "
                            "world_size - 1",
                            options.rank, options.world_size));
  const std::vector<HostClockOffset>& host = options.host_clock_offsets;
  if (host.size() > 2 || (host.size() == 2 && host[1].measured_at_ns < host[0].measured_at_ns))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("write_perfetto_trace: {} host clock offsets{}: give none, the one "
                            "measured at profiling start, or it and the one measured at flush, "
                            "in that order",
                            host.size(), host.size() == 2 ? " measured out of order" : ""));
}

// What the Perfetto trace adds to the layout: ids and clock offsets. Only processes with slices
// are in the trace, numbered 1.. in listing order; uuids are unique in the trace and distinct
// per rank (a merge renumbers them anyway): the processes', then each track's backing tracks.
struct PerfettoIds {
  std::vector<int> pid;                // per process; 0: not in the trace
  std::vector<uint64_t> process_uuid;  // per process
  std::vector<uint64_t> track_uuid;    // per track: its first backing track's; the rest follow
  std::vector<int64_t> offset_ns;      // per process; 0 for an uncalibrated device

  PerfettoIds(const TraceLayout& layout, const PerfettoOptions& options)
      : pid(layout.processes.size(), 0),
        process_uuid(layout.processes.size(), 0),
        track_uuid(layout.tracks.size(), 0),
        offset_ns(layout.processes.size(), 0) {
    uint64_t next_uuid = (static_cast<uint64_t>(options.rank + 1) << 48) + 1;
    int next_pid = 1;
    for (size_t k = 0; k < layout.processes.size(); ++k) {
      const TraceProcess& p = layout.processes[k];
      if (!p.has_slices()) continue;
      pid[k] = next_pid++;
      process_uuid[k] = next_uuid++;
      if (const DeviceClockOffset* clock = find_clock(options, p)) offset_ns[k] = clock->offset_ns;
    }
    for (size_t t = 0; t < layout.tracks.size(); ++t) {
      track_uuid[t] = next_uuid;
      next_uuid += static_cast<uint64_t>(layout.tracks[t].stacks);
    }
  }
  // `device_ns` of process `process` on the host clock (modulo 2^64, as merged).
  uint64_t host_time(uint64_t device_ns, uint32_t process) const {
    return device_ns - static_cast<uint64_t>(offset_ns[process]);
  }
};

// Writes one layout as packets: the descriptors, then the trace infos and the slices' begin and
// end packets by host time (Note [Packet order]). Every write stops at the first packet that
// `out` does not take (false).
class PerfettoTraceWriter {
 public:
  PerfettoTraceWriter(std::ostream& out, const std::vector<ReplayReport>& reports,
                      const PerfettoOptions& options)
      : reports_(reports),
        options_(options),
        layout_(detail::layout_trace(reports, "the Perfetto trace")),
        ids_(layout_, options),
        writer_(out) {}

  void write() {
    for (uint32_t k = 0; k < layout_.processes.size(); ++k)
      if (layout_.processes[k].has_slices() && !write_descriptors(k)) return;
    for (const TimedEvent& event : timed_events())
      if (!write_event(event)) return;
    writer_.flush();
  }

 private:
  // Process k's descriptor and its tracks' backing tracks.
  bool write_descriptors(uint32_t k) {
    const TraceProcess& p = layout_.processes[k];
    detail::start_process_track(packet_, ids_.process_uuid[k], ids_.pid[k], process_name(p));
    if (!writer_.write(packet_)) return false;
    for (uint32_t t = p.first_track; t < p.end_track; ++t) {
      const TraceTrack& track = layout_.tracks[t];
      detail::BackingTracks backing;
      backing.first_uuid = ids_.track_uuid[t];
      backing.parent_uuid = ids_.process_uuid[k];
      backing.name = detail::valid_utf8(track.name());
      backing.order_rank = static_cast<int32_t>(t - p.first_track);
      backing.merge_key = track.is_lane ? fmt::format("{}/lane/{}", ids_.pid[k], backing.name)
                                        : fmt::format("{}/stream/{}", ids_.pid[k], track.stream_id);
      backing.stacks = track.stacks;
      if (!detail::write_backing_tracks(writer_, packet_, backing)) return false;
    }
    return true;
  }

  std::string process_name(const TraceProcess& p) const {
    std::string name = detail::process_name(p, *p.first_measured);
    if (options_.rank >= 0) name = detail::rank_prefix(options_.rank) + name;
    return detail::valid_utf8(name);
  }

  // The trace infos, then the slices' begin and end packets per backing track in nesting order;
  // then all of them stably by host time.
  std::vector<TimedEvent> timed_events() const {
    std::vector<TimedEvent> events;
    events.reserve(2 * layout_.slices.size() + layout_.processes.size());
    for (uint32_t k = 0; k < layout_.processes.size(); ++k)
      if (layout_.processes[k].has_slices())
        events.push_back(TimedEvent{ids_.host_time(layout_.processes[k].first_start_ns, k), k,
                                    TimedEvent::Instant});
    std::vector<std::vector<uint32_t>> open;  // per backing track: its open slices
    for (const TraceTrack& track : layout_.tracks)
      detail::add_slice_events(layout_, track, ids_.offset_ns[track.process], open, events);
    detail::sort_by_time(events);
    return events;
  }

  bool write_event(const TimedEvent& ev) {
    if (ev.kind == TimedEvent::Instant) return write_info(ev.index);
    const TraceSlice& slice = layout_.slices[ev.index];
    const bool begin = ev.kind == TimedEvent::Begin;
    pb::TrackEvent& event = detail::start_track_event(
        packet_, begin ? slice.start_ns : slice.end_ns,
        ids_.track_uuid[slice.track] + static_cast<uint64_t>(slice.stack),
        begin ? pb::TrackEvent::TYPE_SLICE_BEGIN : pb::TrackEvent::TYPE_SLICE_END);
    if (begin) describe_slice(slice, event);
    return writer_.write(packet_);
  }

  // A slice's name, category and annotations: its metadata typed (Note [Typed annotations]),
  // then the writer's own path, graph_id, replay_index, stream and (when measurable) self_ns.
  void describe_slice(const TraceSlice& slice, pb::TrackEvent& event) const {
    const ReplayReport& r = reports_[slice.report];
    const RegionTiming t = r.region(slice.region);
    event.set_name(detail::valid_utf8(t.name()));
    event.add_categories(detail::slice_category(r));
    const Metadata& metadata = t.metadata();
    for (size_t k = 0; k < metadata.size(); ++k) {
      if (!detail::writes_metadata_entry(metadata, k)) continue;
      pb::DebugAnnotation* a = event.add_debug_annotations();
      a->set_name(detail::valid_utf8(metadata[k].first));
      detail::set_typed_value(*a, detail::valid_utf8(metadata[k].second));
    }
    add_annotation(event, "path", t.path());
    add_annotation(event, "graph_id", static_cast<int64_t>(r.graph_id()));
    add_annotation(event, "replay_index", static_cast<int64_t>(r.replay_index()));
    add_annotation(event, "stream", static_cast<int64_t>(t.stream_id()));
    if (t.self_measurable()) add_annotation(event, "self_ns", static_cast<int64_t>(t.self_ns()));
    if (t.duration_ns() != t.span_ns())  // Note [Marker transitions]
      add_annotation(event, "duration_ns", static_cast<int64_t>(t.duration_ns()));
    if (t.raw_duration_ns() != t.duration_ns())  // Note [Marker overhead]
      add_annotation(event, "raw_duration_ns", static_cast<int64_t>(t.raw_duration_ns()));
  }

  // Process k's "accgraph trace info" instant: what merge_perfetto_traces reads.
  bool write_info(uint32_t k) {
    const TraceProcess& p = layout_.processes[k];
    pb::TrackEvent* event = &detail::start_track_event(
        packet_, p.first_start_ns, ids_.process_uuid[k], pb::TrackEvent::TYPE_INSTANT);
    event->set_name(detail::kInfoEventName);
    event->add_categories(detail::kInfoCategory);
    add_annotation(*event, "rank", options_.rank);
    add_annotation(*event, "world_size", options_.world_size);
    add_annotation(*event, "host", options_.host);
    add_annotation(*event, "host_clock", options_.host_clock);
    add_annotation(*event, "host_clock_uncertainty_ns",
                   static_cast<int64_t>(options_.host_clock_uncertainty_ns));
    add_annotation(*event, "backend", p.backend);
    add_annotation(*event, "device", p.device);
    const ReportSource& source = p.named_by->source();  // what its times ran at
    add_annotation(*event, "timer_step_ns", static_cast<int64_t>(source.resolution_ns));
    add_annotation(*event, "marker_overhead_ns", static_cast<int64_t>(source.marker_overhead_ns));
    add_annotation(*event, "marker_back_to_back_ns",
                   static_cast<int64_t>(source.marker_back_to_back_ns));
    const DeviceClockOffset* clock = find_clock(options_, p);
    pb::DebugAnnotation* calibrated = event->add_debug_annotations();
    calibrated->set_name("clock_calibrated");
    calibrated->set_bool_value(clock != nullptr);
    if (clock != nullptr) {
      add_annotation(*event, "clock_offset_ns", clock->offset_ns);
      add_annotation(*event, "clock_uncertainty_ns", static_cast<int64_t>(clock->uncertainty_ns));
    }
    for (size_t i = 0; i < options_.host_clock_offsets.size(); ++i) {
      const HostClockOffset& host = options_.host_clock_offsets[i];
      const std::string suffix = i == 0 ? "" : "_end";
      add_annotation(*event, ("host_clock_offset" + suffix + "_ns").c_str(), host.offset_ns);
      add_annotation(*event, ("host_clock_offset" + suffix + "_uncertainty_ns").c_str(),
                     static_cast<int64_t>(host.uncertainty_ns));
      add_annotation(*event, ("host_clock_offset" + suffix + "_measured_at_ns").c_str(),
                     static_cast<int64_t>(host.measured_at_ns));
    }
    return writer_.write(packet_);
  }

  const std::vector<ReplayReport>& reports_;
  const PerfettoOptions& options_;
  const TraceLayout layout_;
  const PerfettoIds ids_;
  detail::PacketWriter writer_;
  pb::TracePacket packet_;
};

}  // namespace

void write_perfetto_trace(std::ostream& out, const std::vector<ReplayReport>& reports,
                          const PerfettoOptions& options) {
  detail::export_to(out, "the Perfetto trace", [&] {
    validate(options);
    PerfettoTraceWriter(out, reports, options).write();
  });
}

namespace {

// write_trace_file's writer of .pftrace files, handed over as this library is loaded (Note [Trace
// formats] in timing/export/trace_file.cpp).
[[maybe_unused]] const bool registered = (detail::register_trace_writer(TraceFormat::Perfetto, &write_perfetto_trace),
                         true);

}  // namespace

}  // namespace accgraph::timing
