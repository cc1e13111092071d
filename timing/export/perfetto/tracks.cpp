// What both Perfetto writers write alike: backing tracks, slice packets in time order and debug
// annotations (tracks.hpp).
#include "tracks.hpp"

#include <algorithm>

#include "exported_text.hpp"

namespace accgraph::timing::detail {

namespace pb = accgraph::pftrace;

pb::ProcessDescriptor& start_process_track(pb::TracePacket& packet, uint64_t uuid, int32_t pid,
                                           const std::string& name) {
  packet.Clear();
  pb::TrackDescriptor* d = packet.mutable_track_descriptor();
  d->set_uuid(uuid);
  d->set_child_ordering(pb::TrackDescriptor::EXPLICIT);
  pb::ProcessDescriptor* process = d->mutable_process();
  process->set_pid(pid);
  process->set_process_name(name);
  return *process;
}

// Note [Backing tracks]: a Perfetto track shows its slices as a stack, so every track's
// begin/end packets must nest. A track of the layout whose regions overlap without nesting has
// several stacks (Note [Trace layout]); each stack is a *backing* track of the same name and the
// same sibling_merge_key (SIBLING_MERGE_BEHAVIOR_BY_SIBLING_MERGE_KEY), which the UI draws as
// one row: nothing is moved to a made-up track and no time is changed (the method of the
// CUDA-graph annotation tutorial).
//
// Every track, even one with a single backing track, gets its own merge key, so a lane named
// like a stream ("stream 3") is never merged with that stream's track by name.
bool write_backing_tracks(PacketWriter& writer, pb::TracePacket& packet,
                          const BackingTracks& tracks) {
  for (int32_t b = 0; b < tracks.stacks; ++b) {
    packet.Clear();
    pb::TrackDescriptor* d = packet.mutable_track_descriptor();
    d->set_uuid(tracks.first_uuid + static_cast<uint64_t>(b));
    d->set_parent_uuid(tracks.parent_uuid);
    d->set_name(tracks.name);
    d->set_sibling_order_rank(tracks.order_rank);
    d->set_sibling_merge_behavior(pb::TrackDescriptor::SIBLING_MERGE_BEHAVIOR_BY_SIBLING_MERGE_KEY);
    d->set_sibling_merge_key(tracks.merge_key);
    if (!writer.write(packet)) return false;
  }
  return true;
}

void add_slice_events(const TraceLayout& layout, const TraceTrack& track, int64_t offset_ns,
                      std::vector<std::vector<uint32_t>>& open, std::vector<TimedEvent>& events) {
  // On the host clock modulo 2^64, as merged.
  const auto host_time = [&](uint64_t ns) { return ns - static_cast<uint64_t>(offset_ns); };
  const auto close = [&](std::vector<uint32_t>& stack) {
    const TraceSlice& closed = layout.slices[stack.back()];
    events.push_back(TimedEvent{host_time(closed.end_ns), stack.back(), TimedEvent::End});
    stack.pop_back();
  };
  open.assign(static_cast<size_t>(track.stacks), {});
  for (uint32_t s = track.first_slice; s < track.end_slice; ++s) {
    const TraceSlice& slice = layout.slices[s];
    auto& stack = open[static_cast<size_t>(slice.stack)];
    while (!stack.empty() && layout.slices[stack.back()].end_ns <= slice.start_ns &&
           slice.end_ns > layout.slices[stack.back()].end_ns)
      close(stack);
    events.push_back(TimedEvent{host_time(slice.start_ns), s, TimedEvent::Begin});
    stack.push_back(s);
  }
  for (auto& stack : open)
    while (!stack.empty()) close(stack);
}

void sort_by_time(std::vector<TimedEvent>& events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const TimedEvent& a, const TimedEvent& b) { return a.host_ns < b.host_ns; });
}

pb::TrackEvent& start_track_event(pb::TracePacket& packet, uint64_t timestamp, uint64_t track_uuid,
                                  pb::TrackEvent::Type type) {
  packet.Clear();
  packet.set_timestamp(timestamp);
  packet.set_trusted_packet_sequence_id(kSequenceId);
  pb::TrackEvent* event = packet.mutable_track_event();
  event->set_track_uuid(track_uuid);
  event->set_type(type);
  return *event;
}

void add_annotation(pb::TrackEvent& event, std::string_view name, int64_t value) {
  pb::DebugAnnotation* a = event.add_debug_annotations();
  a->set_name(std::string(name));
  a->set_int_value(value);
}

void add_annotation(pb::TrackEvent& event, std::string_view name, std::string_view value) {
  pb::DebugAnnotation* a = event.add_debug_annotations();
  a->set_name(std::string(name));
  a->set_string_value(valid_utf8(value));
}

}  // namespace accgraph::timing::detail
