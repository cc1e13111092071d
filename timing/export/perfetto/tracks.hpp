// What both Perfetto writers (write_perfetto_trace of reports, write_perfetto_events of Chrome
// trace events) write alike: backing tracks (Note [Backing tracks]), the begin and end packets of
// a laid-out trace's slices in time order (Note [Packet order]) and debug annotations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace_layout.hpp"
#include "packet_io.hpp"
#include "perfetto_trace.pb.h"

namespace accgraph::timing::detail {

// The one packet sequence of a trace that accgraph writes.
inline constexpr uint32_t kSequenceId = 1;

// A packet to write after the descriptors: a slice's begin or end, or an instant of the writer's
// own. Sorted by host time (Note [Packet order]).
struct TimedEvent {
  enum Kind : uint8_t { Instant, Begin, End };
  uint64_t host_ns;
  uint32_t index;  // into the layout's slices (Begin, End); the writer's own numbering (Instant)
  Kind kind;
};

// The backing tracks of one track of the layout, all children of `parent_uuid`: uuids
// first_uuid .. first_uuid + stacks - 1, all named `name`, at `order_rank` among the parent's
// children and with `merge_key` (distinct per track) as their sibling_merge_key.
struct BackingTracks {
  uint64_t first_uuid = 0;
  uint64_t parent_uuid = 0;
  std::string name;
  int32_t order_rank = 0;
  std::string merge_key;
  int32_t stacks = 1;
};

// Sets `packet` (cleared) to the descriptor of a process track whose children are ordered by
// their sibling_order_rank; returns the process, for more of its fields.
pftrace::ProcessDescriptor& start_process_track(pftrace::TracePacket& packet, uint64_t uuid,
                                                int32_t pid, const std::string& name);

// Writes the descriptors of `tracks` through `packet` (scratch); false when `out` failed.
bool write_backing_tracks(PacketWriter& writer, pftrace::TracePacket& packet,
                          const BackingTracks& tracks);

// Appends the begin and end events of `track`'s slices, per backing track in nesting order (a
// stack walk over the slices in layout order), at host time = time - `offset_ns`. `open` is
// scratch, reused across tracks.
void add_slice_events(const TraceLayout& layout, const TraceTrack& track, int64_t offset_ns,
                      std::vector<std::vector<uint32_t>>& open, std::vector<TimedEvent>& events);

// Every event by host time, ties kept in the order given (Note [Packet order]).
void sort_by_time(std::vector<TimedEvent>& events);

// Sets `packet` (cleared) to a TrackEvent of `type` at `timestamp` on track `track_uuid`, in
// accgraph's sequence; returns the event, for the begin's and the instant's name and arguments.
pftrace::TrackEvent& start_track_event(pftrace::TracePacket& packet, uint64_t timestamp,
                                       uint64_t track_uuid, pftrace::TrackEvent::Type type);

void add_annotation(pftrace::TrackEvent& event, std::string_view name, int64_t value);
// `value` made valid UTF-8 (Note [Exported text]).
void add_annotation(pftrace::TrackEvent& event, std::string_view name, std::string_view value);

}  // namespace accgraph::timing::detail
