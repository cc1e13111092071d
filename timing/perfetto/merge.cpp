// merge_perfetto_traces: several ranks' traces on one clock, one process per (rank, device).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/perfetto.hpp"
#include "../export_support.hpp"
#include "packet_io.hpp"

namespace accgraph::timing {

namespace {

namespace pb = accgraph::pftrace;

constexpr const char* kInfoEventName = "accgraph trace info";  // as write_perfetto_trace writes

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("merge_perfetto_traces: '{}': {}", path, what));
}

const pb::DebugAnnotation* find_annotation(const pb::TrackEvent& event, const char* name) {
  for (const pb::DebugAnnotation& a : event.debug_annotations())
    if (a.name() == name) return &a;
  return nullptr;
}

// A process (device) of one input, as its descriptor and its trace info say.
struct InputProcess {
  uint64_t uuid = 0;
  std::string name;
  bool has_info = false;
  std::string backend;
  int device = 0;
  bool calibrated = false;
  int64_t offset_ns = 0;
  uint64_t uncertainty_ns = 0;
  int new_pid = 0;
};

struct Input {
  std::string path;
  int rank = -1;
  int world_size = 0;
  std::string host, host_clock;
  uint64_t host_clock_uncertainty_ns = 0;
  bool has_info = false;
  std::vector<InputProcess> processes;
  std::unordered_map<uint64_t, size_t> process_of_uuid;  // process track uuid -> processes[i]
  std::unordered_map<uint64_t, uint64_t> parent_of;      // track uuid -> parent uuid
  std::unordered_map<uint64_t, uint64_t> new_uuid;       // renumbering
  std::unordered_map<uint64_t, std::optional<size_t>> process_cache;  // track uuid -> process
  std::map<uint32_t, uint32_t> new_sequence;
  uint64_t packets = 0;

  // The process a track belongs to (following parent_uuid), or none.
  std::optional<size_t> process_of_track(uint64_t uuid) {
    if (auto cached = process_cache.find(uuid); cached != process_cache.end())
      return cached->second;
    std::optional<size_t> result;
    uint64_t at = uuid;
    for (size_t hops = 0; hops <= parent_of.size(); ++hops) {  // bounded: a cycle ends here
      if (auto p = process_of_uuid.find(at); p != process_of_uuid.end()) {
        result = p->second;
        break;
      }
      auto parent = parent_of.find(at);
      if (parent == parent_of.end()) break;
      at = parent->second;
    }
    process_cache.emplace(uuid, result);
    return result;
  }
};

// Reads an input once: its processes, track tree and trace info.
void scan(Input& input) {
  detail::PacketReader reader(input.path);
  if (!reader.opened())
    fail(input.path, "cannot open the file: check that it exists and that you may read it");
  pb::TracePacket packet;
  std::vector<const pb::TrackEvent*> infos;
  std::vector<pb::TracePacket> info_packets;
  for (;;) {
    const auto status = reader.next(packet);
    if (status == detail::PacketReader::Status::End) break;
    if (status == detail::PacketReader::Status::Error)
      fail(input.path, fmt::format("not a Perfetto trace: {}; give the .pftrace files that "
                                   "accgraph wrote",
                                   reader.error()));
    ++input.packets;
    if (packet.has_track_descriptor()) {
      const pb::TrackDescriptor& d = packet.track_descriptor();
      if (d.has_process()) {
        input.process_of_uuid.emplace(d.uuid(), input.processes.size());
        InputProcess process;
        process.uuid = d.uuid();
        process.name = d.process().process_name();
        input.processes.push_back(std::move(process));
      }
      if (d.has_parent_uuid()) input.parent_of.emplace(d.uuid(), d.parent_uuid());
    } else if (packet.has_track_event() && packet.track_event().name() == kInfoEventName) {
      info_packets.push_back(packet);
    }
  }
  for (const pb::TracePacket& p : info_packets) {
    const pb::TrackEvent& e = p.track_event();
    const auto process = input.process_of_track(e.track_uuid());
    const auto* rank = find_annotation(e, "rank");
    const auto* world = find_annotation(e, "world_size");
    const auto* backend = find_annotation(e, "backend");
    const auto* device = find_annotation(e, "device");
    const auto* calibrated = find_annotation(e, "clock_calibrated");
    if (!process || !rank || !world || !backend || !device || !calibrated)
      fail(input.path,
           "its \"accgraph trace info\" event lacks the process track or one of "
           "rank, world_size, backend, device, clock_calibrated: write the trace "
           "with write_perfetto_trace");
    const int this_rank = static_cast<int>(rank->int_value());
    const int this_world = static_cast<int>(world->int_value());
    if (input.has_info && (this_rank != input.rank || this_world != input.world_size))
      fail(input.path, fmt::format("its processes disagree on the rank ({} and {}) or the world "
                                   "size ({} and {}): write one trace per rank",
                                   input.rank, this_rank, input.world_size, this_world));
    input.has_info = true;
    input.rank = this_rank;
    input.world_size = this_world;
    if (const auto* a = find_annotation(e, "host")) input.host = a->string_value();
    if (const auto* a = find_annotation(e, "host_clock")) input.host_clock = a->string_value();
    if (const auto* a = find_annotation(e, "host_clock_uncertainty_ns"))
      input.host_clock_uncertainty_ns = static_cast<uint64_t>(a->int_value());
    InputProcess& target = input.processes[*process];
    target.has_info = true;
    target.backend = backend->string_value();
    target.device = static_cast<int>(device->int_value());
    target.calibrated = calibrated->bool_value();
    if (target.calibrated) {
      const auto* offset = find_annotation(e, "clock_offset_ns");
      const auto* uncertainty = find_annotation(e, "clock_uncertainty_ns");
      if (!offset || !uncertainty)
        fail(input.path,
             "its \"accgraph trace info\" says clock_calibrated but has no "
             "clock_offset_ns or clock_uncertainty_ns: write the trace with "
             "write_perfetto_trace");
      target.offset_ns = offset->int_value();
      target.uncertainty_ns = static_cast<uint64_t>(uncertainty->int_value());
    }
  }
  if (!input.has_info)
    fail(input.path,
         "it has no \"accgraph trace info\" event, so its rank and clock offsets "
         "are unknown: merge traces written by write_perfetto_trace (accgraph "
         "--trace FILE.pftrace) with PerfettoOptions::rank set");
}

void add_int(pb::TrackEvent& event, const char* name, int64_t value) {
  pb::DebugAnnotation* a = event.add_debug_annotations();
  a->set_name(name);
  a->set_int_value(value);
}

// The next packet of one input, waiting to be written.
struct Cursor {
  std::unique_ptr<detail::PacketReader> reader;
  pb::TracePacket packet;
  uint64_t time_ns = 0;  // the merged time of this packet, or of the input's last timed packet
  bool done = false;
};

}  // namespace

MergeSummary merge_perfetto_traces(std::ostream& out, const std::vector<std::string>& paths) {
  if (paths.empty())
    throw Error(ErrorCode::InvalidArgument,
                "merge_perfetto_traces: no input traces: give one .pftrace file per rank");
  std::vector<Input> inputs(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    inputs[i].path = paths[i];
    scan(inputs[i]);
  }
  // Ranks: every input has one (a single rank-less trace counts as rank 0 of 1).
  if (inputs.size() == 1 && inputs[0].rank == -1) {
    inputs[0].rank = 0;
    inputs[0].world_size = 1;
  }
  for (const Input& input : inputs)
    if (input.rank < 0)
      fail(input.path,
           "it was written without a rank (PerfettoOptions::rank -1): give each "
           "rank's trace its rank and world size to merge several");
  std::sort(inputs.begin(), inputs.end(),
            [](const Input& a, const Input& b) { return a.rank < b.rank; });
  MergeSummary summary;
  summary.world_size = inputs.front().world_size;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& input = inputs[i];
    if (i > 0 && input.rank == inputs[i - 1].rank)
      fail(input.path, fmt::format("rank {} is also the rank of '{}': give each rank's trace "
                                   "once",
                                   input.rank, inputs[i - 1].path));
    if (input.world_size != summary.world_size)
      fail(input.path, fmt::format("its world size is {}, but '{}' has {}: merge the traces of "
                                   "one job",
                                   input.world_size, inputs.front().path, summary.world_size));
    if (input.host_clock != inputs.front().host_clock)
      fail(input.path,
           fmt::format("its offsets are against {}, those of '{}' against {}: the "
                       "clocks cannot be compared; calibrate every rank against the "
                       "same host clock",
                       input.host_clock, inputs.front().path, inputs.front().host_clock));
  }
  {
    std::set<int> present;
    for (const Input& input : inputs) present.insert(input.rank);
    std::string missing;
    for (int r = 0; r < summary.world_size; ++r)
      if (present.count(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    if (!missing.empty())
      summary.warnings.push_back(
          fmt::format("no trace of rank(s) {} of the job's {} among the "
                      "inputs: the merged trace lacks their events",
                      missing, summary.world_size));
    std::set<std::string> hosts;
    for (const Input& input : inputs) hosts.insert(input.host);
    if (hosts.size() > 1)
      for (const Input& input : inputs)
        if (input.host_clock_uncertainty_ns == 0)
          summary.warnings.push_back(fmt::format(
              "the ranks run on {} hosts but rank {} ({}) records no host clock uncertainty: "
              "the alignment across hosts is only as good as their clock synchronisation; "
              "give PerfettoOptions::host_clock_uncertainty_ns (the NTP/PTP error bound)",
              hosts.size(), input.rank, input.host));
  }

  // New pids and the summary, in rank order.
  std::vector<uint64_t> uncertainties;  // per calibrated (rank, device)
  int next_pid = 1;
  for (Input& input : inputs) {
    MergedRank merged;
    merged.path = input.path;
    merged.rank = input.rank;
    merged.host = input.host;
    merged.host_clock_uncertainty_ns = input.host_clock_uncertainty_ns;
    merged.packets = input.packets;
    for (InputProcess& p : input.processes) {
      p.new_pid = next_pid++;
      if (!p.has_info) continue;
      if (p.calibrated) {
        merged.clocks.push_back(
            DeviceClockOffset{p.backend, p.device, p.offset_ns, p.uncertainty_ns});
        uncertainties.push_back(p.uncertainty_ns + input.host_clock_uncertainty_ns);
      } else {
        merged.uncalibrated.push_back(fmt::format("{} device {}", p.backend, p.device));
        summary.warnings.push_back(fmt::format(
            "rank {}'s {} device {} has no clock offset: its times stay on its own clock, so "
            "it can be misaligned with the others by any amount; calibrate its clock "
            "(PerfettoOptions::clocks)",
            input.rank, p.backend, p.device));
      }
    }
    summary.ranks.push_back(std::move(merged));
  }
  std::sort(uncertainties.rbegin(), uncertainties.rend());
  if (uncertainties.size() >= 2)
    summary.alignment_uncertainty_ns = uncertainties[0] + uncertainties[1];

  detail::export_to(out, "the merged Perfetto trace", [&] {
    detail::PacketWriter writer(out);
    uint64_t next_uuid = 1;
    uint32_t next_sequence = 1;
    std::vector<Cursor> cursors(inputs.size());
    // By merged time, then input (rank) order; each input's own packet order is kept.
    using Key = std::pair<uint64_t, size_t>;
    std::priority_queue<Key, std::vector<Key>, std::greater<>> queue;

    // Reads input i's next packet and puts it on the common clock (renumbered, renamed).
    const auto advance = [&](size_t i) {
      Cursor& c = cursors[i];
      Input& input = inputs[i];
      const auto status = c.reader->next(c.packet);
      if (status == detail::PacketReader::Status::End) {
        c.done = true;
        return;
      }
      if (status == detail::PacketReader::Status::Error)
        fail(input.path, fmt::format("changed while it was merged: {}", c.reader->error()));
      pb::TracePacket& packet = c.packet;
      const auto renumber = [&](uint64_t uuid) {
        if (uuid == 0) return uuid;  // the implicit global track stays shared
        return input.new_uuid.try_emplace(uuid, next_uuid).second ? next_uuid++
                                                                  : input.new_uuid[uuid];
      };
      if (packet.has_trusted_packet_sequence_id()) {
        const auto [it, added] =
            input.new_sequence.try_emplace(packet.trusted_packet_sequence_id(), next_sequence);
        if (added) ++next_sequence;
        packet.set_trusted_packet_sequence_id(it->second);
      }
      if (packet.has_track_descriptor()) {
        pb::TrackDescriptor& d = *packet.mutable_track_descriptor();
        const auto process = input.process_of_uuid.find(d.uuid());
        d.set_uuid(renumber(d.uuid()));
        if (d.has_parent_uuid()) d.set_parent_uuid(renumber(d.parent_uuid()));
        if (d.has_process() && process != input.process_of_uuid.end()) {
          d.mutable_process()->set_pid(input.processes[process->second].new_pid);
          const std::string prefix = fmt::format("rank {}: ", input.rank);
          if (d.process().process_name().compare(0, prefix.size(), prefix) != 0)
            d.mutable_process()->set_process_name(prefix + d.process().process_name());
        }
      }
      if (packet.has_track_event()) {
        pb::TrackEvent& e = *packet.mutable_track_event();
        const auto process = input.process_of_track(e.track_uuid());
        e.set_track_uuid(renumber(e.track_uuid()));
        const InputProcess* p = process ? &input.processes[*process] : nullptr;
        if (packet.has_timestamp() && p != nullptr && p->calibrated) {
          const uint64_t device_time = packet.timestamp();
          const uint64_t host_time = device_time - static_cast<uint64_t>(p->offset_ns);
          // Wrapped: the device time and the offset put the event before the clock's epoch.
          if ((p->offset_ns > 0 && host_time > device_time) ||
              (p->offset_ns < 0 && host_time < device_time))
            fail(input.path, fmt::format("an event at {} ns on {} device {} lies before the host "
                                         "clock's epoch once its offset of {} ns is applied: "
                                         "the recorded offset is wrong; calibrate again",
                                         device_time, p->backend, p->device, p->offset_ns));
          packet.set_timestamp(host_time);
        }
        if (e.name() == kInfoEventName && p != nullptr) {
          add_int(e, "merged_offset_ns", p->calibrated ? p->offset_ns : 0);
          add_int(e, "alignment_uncertainty_ns",
                  p->calibrated
                      ? static_cast<int64_t>(p->uncertainty_ns + input.host_clock_uncertainty_ns)
                      : -1);
        }
      }
      if (packet.has_timestamp()) c.time_ns = packet.timestamp();
      queue.emplace(c.time_ns, i);
    };

    for (size_t i = 0; i < inputs.size(); ++i) {
      cursors[i].reader = std::make_unique<detail::PacketReader>(inputs[i].path);
      if (!cursors[i].reader->opened())
        fail(inputs[i].path,
             "cannot open the file again for the merge: check that it still "
             "exists");
      advance(i);
    }
    while (!queue.empty()) {
      const size_t i = queue.top().second;
      queue.pop();
      if (!writer.write(cursors[i].packet)) return;
      advance(i);
    }
    writer.flush();
  });
  return summary;
}

}  // namespace accgraph::timing
