// merge_perfetto_traces: several ranks' traces on one clock, one process per (rank, device).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
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

#include "export_errors.hpp"
#include "accgraph/error.hpp"
#include "accgraph/output_file.hpp"
#include "accgraph/perfetto.hpp"
#include "packet_io.hpp"
#include "trace_info.hpp"

namespace accgraph::timing {

namespace {

namespace pb = accgraph::pftrace;

using detail::kInfoEventName;
constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("merge_perfetto_traces: '{}': {}", path, what));
}

// An input that did not open: errno's text, and for a lack of descriptors what to do about it.
[[noreturn]] void fail_open(const std::string& path, int error_number, const char* when,
                            size_t inputs) {
  const std::string reason = error_number != 0 ? std::strerror(error_number) : "unknown reason";
  if (error_number == EMFILE || error_number == ENFILE)
    fail(path, fmt::format("cannot open the file {}: {}, even with none of the other {} "
                           "inputs open (the merge closes inputs to make room): the process "
                           "has no descriptor to spare; raise the limit (ulimit -n)",
                           when, reason, inputs - 1));
  fail(path, fmt::format("cannot open the file {}: {}: check that it exists and that you may "
                         "read it",
                         when, reason));
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
  // Measured against rank 0's host (Note [Host clock offsets]): none, at start, or at start and
  // at flush.
  std::vector<HostClockOffset> host_offsets;
  bool has_info = false;
  std::vector<InputProcess> processes;
  std::unordered_map<uint64_t, size_t> process_of_uuid;  // process track uuid -> processes[i]
  std::unordered_map<uint64_t, uint64_t> parent_of;      // track uuid -> parent uuid
  std::unordered_map<uint64_t, uint64_t> new_uuid;       // renumbering
  std::unordered_map<uint64_t, std::optional<size_t>> process_cache;  // track uuid -> process
  std::map<uint32_t, uint32_t> new_sequence;
  uint64_t packets = 0;
  std::unordered_map<uint64_t, uint64_t> last_time_of_track;  // track uuid -> latest event
  // What the host clock may have drifted since its one measured offset (Note [Drift after one
  // measurement]); 0 with two measurements, none, or on the reference host.
  uint64_t drift_ns = 0;

  // The process a track belongs to (following parent_uuid), or none. Every track on the walked
  // chain is remembered, so a chain of N tracks costs O(N) in all, not O(N^2).
  std::optional<size_t> process_of_track(uint64_t uuid) {
    std::vector<uint64_t> walked;
    std::optional<size_t> result;
    uint64_t at = uuid;
    for (size_t hops = 0; hops <= parent_of.size(); ++hops) {  // bounded: a cycle ends here
      if (auto cached = process_cache.find(at); cached != process_cache.end()) {
        result = cached->second;
        break;
      }
      walked.push_back(at);
      if (auto p = process_of_uuid.find(at); p != process_of_uuid.end()) {
        result = p->second;
        break;
      }
      auto parent = parent_of.find(at);
      if (parent == parent_of.end()) break;
      at = parent->second;
    }
    for (uint64_t track : walked) process_cache[track] = result;
    return result;
  }
};

// An integer field of a trace info event, which must lie in [low, high] (an int64 or a string
// is refused, never truncated or read as 0).
int64_t integer_field(const Input& input, const pb::DebugAnnotation& a, const char* field,
                      int64_t low, int64_t high) {
  std::optional<int64_t> value;
  if (a.has_int_value()) value = a.int_value();
  if (a.has_uint_value() && a.uint_value() <= static_cast<uint64_t>(INT64_MAX))
    value = static_cast<int64_t>(a.uint_value());
  if (!value && !a.has_uint_value())
    fail(input.path, fmt::format("its \"accgraph trace info\" has a {} that is not an integer: "
                                 "write the trace with write_perfetto_trace",
                                 field));
  if (!value || *value < low || *value > high)
    fail(input.path,
         fmt::format("its \"accgraph trace info\" has {} {}, outside {} to {}: write the trace "
                     "with write_perfetto_trace",
                     field, value ? fmt::format("{}", *value) : fmt::format("{}", a.uint_value()),
                     low, high));
  return *value;
}

// The rank and world size of one info event: rank -1 with world size 0 (written without a
// rank), or 0 <= rank < world_size <= INT_MAX.
std::pair<int, int> rank_and_world(const Input& input, const pb::DebugAnnotation& rank,
                                   const pb::DebugAnnotation& world) {
  const auto r = static_cast<int>(integer_field(input, rank, "rank", -1, INT_MAX - 1));
  const auto w = static_cast<int>(integer_field(input, world, "world_size", 0, INT_MAX));
  if ((r == -1) != (w == 0) || r >= w)
    fail(input.path, fmt::format("its \"accgraph trace info\" has rank {} with world_size {}, "
                                 "which do not fit: a rank lies in 0 to world_size - 1 (or is "
                                 "-1 with world_size 0); write the trace with "
                                 "write_perfetto_trace",
                                 r, w));
  return {r, w};
}

// The host clock offsets of an info event (host_clock_offset_ns, ..._end_ns, with their
// uncertainty and time), into `input`; every process of the input must carry the same ones.
void read_host_offsets(Input& input, const pb::TrackEvent& e) {
  std::vector<HostClockOffset> offsets;
  for (const std::string suffix : {"", "_end"}) {
    const std::string offset_name = "host_clock_offset" + suffix + "_ns";
    const std::string uncertainty_name = "host_clock_offset" + suffix + "_uncertainty_ns";
    const std::string at_name = "host_clock_offset" + suffix + "_measured_at_ns";
    const auto* offset = find_annotation(e, offset_name.c_str());
    const auto* uncertainty = find_annotation(e, uncertainty_name.c_str());
    const auto* at = find_annotation(e, at_name.c_str());
    if (!offset && !uncertainty && !at) break;
    if (!offset || !uncertainty || !at)
      fail(input.path, fmt::format("its \"accgraph trace info\" has only some of {}, {} and {}: "
                                   "write the trace with write_perfetto_trace",
                                   offset_name, uncertainty_name, at_name));
    HostClockOffset h;
    h.offset_ns = integer_field(input, *offset, offset_name.c_str(), -INT64_MAX, INT64_MAX);
    h.uncertainty_ns = static_cast<uint64_t>(
        integer_field(input, *uncertainty, uncertainty_name.c_str(), 0, INT64_MAX));
    h.measured_at_ns =
        static_cast<uint64_t>(integer_field(input, *at, at_name.c_str(), 0, INT64_MAX));
    offsets.push_back(h);
  }
  if (offsets.size() == 2 && offsets[1].measured_at_ns < offsets[0].measured_at_ns)
    fail(input.path,
         "its host clock offset at flush was measured before the one at start: "
         "write the trace with write_perfetto_trace");
  const auto same = [](const HostClockOffset& a, const HostClockOffset& b) {
    return a.offset_ns == b.offset_ns && a.uncertainty_ns == b.uncertainty_ns &&
           a.measured_at_ns == b.measured_at_ns;
  };
  if (input.has_info &&
      (offsets.size() != input.host_offsets.size() ||
       !std::equal(offsets.begin(), offsets.end(), input.host_offsets.begin(), same)))
    fail(input.path,
         "its processes disagree on the host clock offsets: write one trace per rank "
         "with write_perfetto_trace");
  input.host_offsets = std::move(offsets);
}

// The uncertainty of an input's host clock against the reference: the larger of its measured
// offsets' (the interpolation between them is no worse than either end), else the host's
// declared bound.
uint64_t host_uncertainty(const Input& input) {
  if (input.host_offsets.empty()) return input.host_clock_uncertainty_ns;
  uint64_t u = 0;
  for (const HostClockOffset& h : input.host_offsets) u = std::max(u, h.uncertainty_ns);
  u = add_uncertainties(u, input.drift_ns);
  return u;
}

// Takes one "accgraph trace info" event of `input` into it.
void read_info(Input& input, const pb::TrackEvent& e) {
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
  const auto [this_rank, this_world] = rank_and_world(input, *rank, *world);
  if (input.has_info && (this_rank != input.rank || this_world != input.world_size))
    fail(input.path, fmt::format("its processes disagree on the rank ({} and {}) or the world "
                                 "size ({} and {}): write one trace per rank",
                                 input.rank, this_rank, input.world_size, this_world));
  read_host_offsets(input, e);
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
  target.device = static_cast<int>(integer_field(input, *device, "device", INT_MIN, INT_MAX));
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

// Reads an input once: its processes, track tree and trace info. The file is closed again.
void scan(Input& input, size_t inputs) {
  std::error_code ignored;
  if (std::filesystem::is_directory(input.path, ignored))
    fail(input.path,
         "not a Perfetto trace: it is a directory: give the rank traces in it "
         "(e.g. DIR/rank*.pftrace)");
  detail::PacketReader reader(input.path);
  if (!reader.opened()) fail_open(input.path, reader.open_errno(), "to read it", inputs);
  pb::TracePacket packet;
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
    } else if (packet.has_track_event() && packet.has_timestamp()) {
      uint64_t& last = input.last_time_of_track[packet.track_event().track_uuid()];
      last = std::max(last, packet.timestamp());
    }
  }
  for (const pb::TracePacket& p : info_packets) read_info(input, p.track_event());
  if (!input.has_info)
    fail(input.path,
         "it has no \"accgraph trace info\" event, so its rank and clock offsets "
         "are unknown: merge traces written by write_perfetto_trace (accgraph "
         "--trace FILE.pftrace) with PerfettoOptions::rank set");
}

// The inputs scanned, given ranks and sorted by rank; refuses inputs that cannot be merged.
std::vector<Input> scan_inputs(const std::vector<std::string>& paths) {
  std::vector<Input> inputs(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    inputs[i].path = paths[i];
    scan(inputs[i], paths.size());
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
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Input& input = inputs[i];
    if (input.rank == inputs[i - 1].rank)
      fail(input.path, fmt::format("rank {} is also the rank of '{}': give each rank's trace "
                                   "once",
                                   input.rank, inputs[i - 1].path));
    if (input.world_size != inputs.front().world_size)
      fail(input.path,
           fmt::format("its world size is {}, but '{}' has {}: merge the traces of "
                       "one job",
                       input.world_size, inputs.front().path, inputs.front().world_size));
    if (input.host_clock != inputs.front().host_clock)
      fail(input.path,
           fmt::format("its offsets are against {}, those of '{}' against {}: the "
                       "clocks cannot be compared; calibrate every rank against the "
                       "same host clock",
                       input.host_clock, inputs.front().path, inputs.front().host_clock));
  }
  return inputs;
}

// The ranks of 0..world_size-1 that no input has, as at most kShown ranges and a count (a world
// of INT_MAX ranks costs as much as one of 2); "" when none is missing.
std::string missing_ranks_warning(const std::vector<Input>& inputs, int world_size) {
  constexpr size_t kShown = 5;
  std::vector<std::string> shown;
  uint64_t missing = 0, ranges = 0;
  const auto gap = [&](int64_t from, int64_t to) {
    if (from > to) return;
    ++ranges;
    missing += static_cast<uint64_t>(to - from + 1);
    if (shown.size() < kShown)
      shown.push_back(from == to ? fmt::format("{}", from) : fmt::format("{}-{}", from, to));
  };
  int64_t next = 0;
  for (const Input& input : inputs) {  // sorted by rank, each below world_size
    gap(next, static_cast<int64_t>(input.rank) - 1);
    next = static_cast<int64_t>(input.rank) + 1;
  }
  gap(next, static_cast<int64_t>(world_size) - 1);
  if (missing == 0) return "";
  std::string list = fmt::format("{}", fmt::join(shown, ", "));
  if (ranges > shown.size()) list += fmt::format(" and {} more ranges", ranges - shown.size());
  if (missing > 1) list += fmt::format(" ({} ranks)", missing);
  return fmt::format(
      "no trace of rank(s) {} of the job's {} among the inputs: the merged trace "
      "lacks their events",
      list, world_size);
}

std::string uncertainty_text(uint64_t ns) {
  return ns == kSaturated ? "unknown (saturated)" : fmt::format("+-{} ns", ns);
}

// The warnings that do not depend on the devices: missing ranks, hosts without a clock bound.
// Whether the alignment across hosts is unknown: ranks on several hosts, one of them with
// neither a measured offset nor a declared bound.
bool add_job_warnings(MergeSummary& summary, const std::vector<Input>& inputs) {
  bool unknown = false;
  if (std::string missing = missing_ranks_warning(inputs, summary.world_size); !missing.empty())
    summary.warnings.push_back(std::move(missing));
  std::set<std::string> hosts;
  for (const Input& input : inputs) hosts.insert(input.host);
  if (hosts.size() > 1)
    for (const Input& input : inputs) {
      if (!input.host_offsets.empty()) continue;
      if (input.host_clock_uncertainty_ns == 0) {
        unknown = true;
        summary.warnings.push_back(fmt::format(
            "the ranks run on {} hosts but rank {} ({}) has no measured host clock offset "
            "(host_clock_offset_ns) and records no host clock uncertainty: the alignment "
            "across hosts is unknown (only as good as their clock synchronisation, 10 us to "
            "1 ms apart under NTP); measure the offset "
            "(measure_host_clock_offset, accgraph.torch.measure_host_clock_offset) "
            "or give PerfettoOptions::host_clock_uncertainty_ns (the NTP/PTP error bound)",
            hosts.size(), input.rank, input.host));
      } else
        summary.warnings.push_back(fmt::format(
            "the ranks run on {} hosts but rank {} ({}) has no measured host clock offset "
            "(host_clock_offset_ns): its times are taken as on the reference clock, within "
            "its declared bound of +-{} ns (host_clock_uncertainty_ns); measure the offset "
            "(measure_host_clock_offset) for a tighter one",
            hosts.size(), input.rank, input.host, input.host_clock_uncertainty_ns));
    }
  return unknown;
}

// Note [Drift after one measurement]: with offsets measured at start and at flush the merge
// interpolates the drift between them; with one only it cannot, and two quartz clocks drift up
// to kDriftPpm apart (tens of ppm is usual: 50 ppm is 50 us per second). So a rank on another
// host than rank 0 with one measured offset gets kDriftPpm x the time from that measurement to
// its last event added to its uncertainty, and a warning saying so and to measure at flush.
constexpr double kDriftPpm = 100;

void add_drift(MergeSummary& summary, std::vector<Input>& inputs) {
  const Input* reference = nullptr;
  for (const Input& input : inputs)
    if (input.rank == 0) reference = &input;
  for (Input& input : inputs) {
    if (input.host_offsets.size() != 1 || input.rank == 0) continue;
    if (reference != nullptr && reference->host == input.host) continue;
    const uint64_t at = input.host_offsets.front().measured_at_ns;
    uint64_t last = 0;
    for (const auto& [track, time] : input.last_time_of_track) {
      const auto process = input.process_of_track(track);
      uint64_t host_time = time;
      if (process && input.processes[*process].calibrated)
        host_time = time - static_cast<uint64_t>(input.processes[*process].offset_ns);
      if (host_time <= static_cast<uint64_t>(INT64_MAX)) last = std::max(last, host_time);
    }
    if (last <= at) continue;
    const double seconds = static_cast<double>(last - at) * 1e-9;
    input.drift_ns =
        static_cast<uint64_t>(std::ceil(static_cast<double>(last - at) * kDriftPpm * 1e-6));
    summary.warnings.push_back(fmt::format(
        "rank {} ({}) has one measured host clock offset, {:.3f} s before its last event: the "
        "drift since is not measured, so its uncertainty grows by up to {} ns (at {} ppm, "
        "included above); measure the offset again at flush and write both "
        "(host_clock_offsets=[start, end]) for the merge to correct the drift",
        input.rank, input.host, seconds, input.drift_ns, kDriftPpm));
  }
}

// Note [Implausible host offsets]: a host offset says what rank 0's clock read when it was
// measured: measured_at_ns - offset_ns. Host clocks are CLOCK_REALTIME, so an offset of a day or
// more that leaves rank 0 a reading within a day of 1970 is the whole clock: rank 0 answered 0
// (an unfilled receive buffer) or garbage, which places the rank's events decades away from the
// others. measure_host_clock_offset refuses such answers (Note [Implausible answers]); an offset
// recorded by other means, or by an older accgraph, gets a warning here. (Small offsets with
// small times, as synthetic traces have, are no such sign.)
constexpr long double kDayNs = 86400e9L;
constexpr double kYearNs = 365.25 * 86400e9;

void add_implausible_offset_warnings(MergeSummary& summary, const std::vector<Input>& inputs) {
  for (const Input& input : inputs)
    for (const HostClockOffset& h : input.host_offsets) {
      if (h.measured_at_ns == 0 || h.offset_ns == 0) continue;  // not measured, or rank 0's own
      const long double reading =
          static_cast<long double>(h.measured_at_ns) - static_cast<long double>(h.offset_ns);
      if (reading >= kDayNs || std::fabs(static_cast<long double>(h.offset_ns)) < kDayNs)
        continue;
      summary.warnings.push_back(fmt::format(
          "rank {} ({}) has a host clock offset of {:+} ns ({:.1f} years), which says rank 0's "
          "host clock read {:.3f} s past its epoch (1970) when it was measured: no running host's "
          "clock reads that (rank 0 answered 0 or garbage?), so its events are placed that far "
          "from the others; measure the offset again (measure_host_clock_offset refuses such "
          "answers)",
          input.rank, input.host, h.offset_ns, static_cast<double>(h.offset_ns) / kYearNs,
          static_cast<double>(reading) * 1e-9));
      break;  // one warning per rank
    }
}

// New pids and the summary, in rank order.
MergeSummary summarise(std::vector<Input>& inputs) {
  MergeSummary summary;
  summary.world_size = inputs.front().world_size;
  const bool unknown_hosts = add_job_warnings(summary, inputs);
  add_implausible_offset_warnings(summary, inputs);
  add_drift(summary, inputs);
  std::vector<uint64_t> uncertainties;  // per calibrated (rank, device)
  int next_pid = 1;
  for (Input& input : inputs) {
    MergedRank merged;
    merged.path = input.path;
    merged.rank = input.rank;
    merged.host = input.host;
    merged.host_clock_uncertainty_ns = input.host_clock_uncertainty_ns;
    merged.host_clock_offsets = input.host_offsets;
    merged.host_clock_drift_ns = input.drift_ns;
    merged.packets = input.packets;
    for (InputProcess& p : input.processes) {
      p.new_pid = next_pid++;
      if (!p.has_info) continue;
      if (p.calibrated) {
        merged.clocks.push_back(
            DeviceClockOffset{p.backend, p.device, p.offset_ns, p.uncertainty_ns});
        uncertainties.push_back(add_uncertainties(p.uncertainty_ns, host_uncertainty(input)));
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
    summary.alignment_uncertainty_ns = add_uncertainties(uncertainties[0], uncertainties[1]);
  if (unknown_hosts)  // a warning above names the ranks
    summary.alignment_uncertainty_ns = kSaturated;
  else if (summary.alignment_uncertainty_ns == kSaturated)
    summary.warnings.push_back(fmt::format(
        "the alignment uncertainty between ranks is {}: a device's clock_uncertainty_ns plus its "
        "host's host_clock_uncertainty_ns exceed 2^64-1 ns; calibrate the clocks again",
        uncertainty_text(kSaturated)));
  return summary;
}

void add_int(pb::TrackEvent& event, const char* name, int64_t value) {
  pb::DebugAnnotation* a = event.add_debug_annotations();
  a->set_name(name);
  a->set_int_value(value);
}

// One input being interleaved: the packet waiting to be written and a window of the ones after
// it; the file is open only while it is in the pool of open inputs (Note [Merge streaming]).
struct Cursor {
  std::unique_ptr<detail::PacketReader> reader;  // null while closed
  uint64_t position = 0;                         // where the window's last packet ended
  uint64_t packets_read = 0;
  uint64_t last_used = 0;  // for closing the least recently used
  bool end_of_file = false;
  std::deque<pb::TracePacket> window;
  pb::TracePacket packet;
  uint64_t time_ns = 0;  // the merged time of this packet, or of the input's last timed packet
};

// Note [Merge streaming]: the merge holds, per input, its track tree (from the scan) and a
// window of at most kWindowPackets decoded packets (fewer with many inputs: kWindowBudget in
// all, at least kMinWindowPackets each), never the input itself: memory grows with the number
// of inputs and tracks, not with the replays (bench/perfetto/bench_merge prints the
// figures; perfetto_unit checks peak RSS against a run of a tenth of the replays). Packets are
// interleaved by merged time through a heap of one entry per input (time linear in the events,
// times log of the inputs). At most kMaxOpenInputs inputs are open at once, and fewer when the
// process runs out of descriptors (EMFILE/ENFILE: the least recently used input is closed and
// the open tried again), so a merge of 1,024 ranks works under the usual limit of 1,024
// descriptors; a closed input is reopened at the byte where its window ended, once per window at
// worst.
constexpr size_t kWindowPackets = 64;
constexpr size_t kMinWindowPackets = 8;
constexpr size_t kWindowBudget = 8192;
constexpr size_t kMaxOpenInputs = 128;

// Interleaves the inputs' packets by merged time, then input (rank) order; each input's own
// packet order is kept.
class Interleaver {
 public:
  explicit Interleaver(std::vector<Input>& inputs)
      : inputs_(inputs),
        cursors_(inputs.size()),
        window_(std::clamp(kWindowBudget / std::max<size_t>(inputs.size(), 1), kMinWindowPackets,
                           kWindowPackets)) {}

  void write(detail::PacketWriter& writer) {
    for (size_t i = 0; i < inputs_.size(); ++i) advance(i);
    while (!queue_.empty()) {
      const size_t i = queue_.top().second;
      queue_.pop();
      if (!writer.write(cursors_[i].packet)) return;
      advance(i);
    }
    writer.flush();
  }

 private:
  // Input i's next packet, on the common clock (renumbered, renamed), onto the heap.
  void advance(size_t i) {
    Cursor& c = cursors_[i];
    Input& input = inputs_[i];
    if (c.window.empty() && !c.end_of_file) refill(i);
    if (c.window.empty()) return;  // done
    c.packet.Swap(&c.window.front());
    c.window.pop_front();
    pb::TracePacket& packet = c.packet;
    if (packet.has_trusted_packet_sequence_id()) {
      const auto [it, added] =
          input.new_sequence.try_emplace(packet.trusted_packet_sequence_id(), next_sequence_);
      if (added) ++next_sequence_;
      packet.set_trusted_packet_sequence_id(it->second);
    }
    if (packet.has_track_descriptor())
      rewrite_descriptor(input, *packet.mutable_track_descriptor());
    if (packet.has_track_event()) rewrite_event(input, packet);
    if (packet.has_timestamp()) c.time_ns = packet.timestamp();
    queue_.emplace(c.time_ns, i);
  }

  // Reads up to kWindowPackets packets of input i into its window, opening it if closed.
  void refill(size_t i) {
    Cursor& c = cursors_[i];
    if (!c.reader) open(i);
    c.last_used = ++clock_;
    while (c.window.size() < window_) {
      c.window.emplace_back();
      const auto status = c.reader->next(c.window.back());
      if (status == detail::PacketReader::Status::Packet) continue;
      c.window.pop_back();
      if (status == detail::PacketReader::Status::Error)
        fail(inputs_[i].path, fmt::format("changed while it was merged: {}", c.reader->error()));
      c.end_of_file = true;
      break;
    }
    c.position = c.reader->position();
    c.packets_read = c.reader->packets();
    if (c.end_of_file) close(i);  // its descriptor is not needed any more
  }

  void open(size_t i) {
    Cursor& c = cursors_[i];
    if (open_ >= kMaxOpenInputs) close_least_recently_used(i);
    for (;;) {
      c.reader =
          std::make_unique<detail::PacketReader>(inputs_[i].path, c.position, c.packets_read);
      if (c.reader->opened()) break;
      const int error = c.reader->open_errno();
      c.reader.reset();
      if ((error != EMFILE && error != ENFILE) || open_ == 0)
        fail_open(inputs_[i].path, error, "again for the merge", inputs_.size());
      close_least_recently_used(i);
    }
    ++open_;
  }

  void close(size_t i) {
    if (!cursors_[i].reader) return;
    cursors_[i].reader.reset();
    --open_;
  }

  void close_least_recently_used(size_t except) {
    size_t oldest = cursors_.size();
    for (size_t k = 0; k < cursors_.size(); ++k)
      if (k != except && cursors_[k].reader &&
          (oldest == cursors_.size() || cursors_[k].last_used < cursors_[oldest].last_used))
        oldest = k;
    if (oldest != cursors_.size()) close(oldest);
  }

  uint64_t renumber(Input& input, uint64_t uuid) {
    if (uuid == 0) return uuid;  // the implicit global track stays shared
    const auto [it, added] = input.new_uuid.try_emplace(uuid, next_uuid_);
    if (added) ++next_uuid_;
    return it->second;
  }

  void rewrite_descriptor(Input& input, pb::TrackDescriptor& d) {
    const auto process = input.process_of_uuid.find(d.uuid());
    d.set_uuid(renumber(input, d.uuid()));
    if (d.has_parent_uuid()) d.set_parent_uuid(renumber(input, d.parent_uuid()));
    if (d.has_process() && process != input.process_of_uuid.end()) {
      d.mutable_process()->set_pid(input.processes[process->second].new_pid);
      const std::string prefix = detail::rank_prefix(input.rank);
      if (d.process().process_name().compare(0, prefix.size(), prefix) != 0)
        d.mutable_process()->set_process_name(prefix + d.process().process_name());
    }
  }

  void rewrite_event(Input& input, pb::TracePacket& packet) {
    pb::TrackEvent& e = *packet.mutable_track_event();
    const auto process = input.process_of_track(e.track_uuid());
    e.set_track_uuid(renumber(input, e.track_uuid()));
    const InputProcess* p = process ? &input.processes[*process] : nullptr;
    uint64_t host_time = packet.timestamp();  // on this input's host clock
    if (packet.has_timestamp() && p != nullptr && p->calibrated) {
      const uint64_t device_time = packet.timestamp();
      host_time = device_time - static_cast<uint64_t>(p->offset_ns);
      // Wrapped: the device time and the offset put the event before the clock's epoch.
      if ((p->offset_ns > 0 && host_time > device_time) ||
          (p->offset_ns < 0 && host_time < device_time))
        fail(input.path, fmt::format("an event at {} ns on {} device {} lies before the host "
                                     "clock's epoch once its offset of {} ns is applied: "
                                     "the recorded offset is wrong; calibrate again",
                                     device_time, p->backend, p->device, p->offset_ns));
      packet.set_timestamp(on_reference_clock(input, host_time));
    }
    if (e.name() == kInfoEventName && p != nullptr) {
      add_int(e, "merged_offset_ns", p->calibrated ? p->offset_ns : 0);
      // -1: unknown (uncalibrated, or too large for int64: saturated).
      const uint64_t u = add_uncertainties(p->uncertainty_ns, host_uncertainty(input));
      if (!input.host_offsets.empty())
        add_int(e, "merged_host_clock_offset_ns",
                interpolate_host_clock_offset(input.host_offsets.front(), input.host_offsets.back(),
                                              host_time));
      add_int(
          e, "alignment_uncertainty_ns",
          p->calibrated && u <= static_cast<uint64_t>(INT64_MAX) ? static_cast<int64_t>(u) : -1);
    }
  }

  // A time of this input's host clock on the reference host's: minus the host offset
  // interpolated at that time (Note [Host clock offsets]); unchanged without one.
  uint64_t on_reference_clock(const Input& input, uint64_t host_time) const {
    if (input.host_offsets.empty()) return host_time;
    const int64_t offset = interpolate_host_clock_offset(input.host_offsets.front(),
                                                         input.host_offsets.back(), host_time);
    const uint64_t reference = host_time - static_cast<uint64_t>(offset);
    // Beyond INT64_MAX: past 2262, which no clock reads (a garbage offset such as -(2^63-1)
    // from a peer that answered nonsense), and not representable in a .pftrace's int64 times.
    if ((offset > 0 && reference > host_time) || (offset < 0 && reference < host_time) ||
        reference > static_cast<uint64_t>(INT64_MAX))
      fail(input.path, fmt::format("an event at {} ns of host {} lies outside the reference "
                                   "clock's range (0 to 2^63-1 ns) once its host clock offset "
                                   "of {} ns is applied: the recorded host offset is wrong; "
                                   "measure again",
                                   host_time, input.host, offset));
    return reference;
  }

  using Key = std::pair<uint64_t, size_t>;
  std::vector<Input>& inputs_;
  std::vector<Cursor> cursors_;
  const size_t window_;  // packets per refill
  size_t open_ = 0;      // cursors with an open reader
  uint64_t clock_ = 0;   // refills so far, for last_used
  std::priority_queue<Key, std::vector<Key>, std::greater<>> queue_;
  uint64_t next_uuid_ = 1;
  uint32_t next_sequence_ = 1;
};

// Refuses an output that is one of the inputs under another name (./r0, an absolute path, a
// symbolic or hard link): same device and inode, or, for an output that does not exist yet, the
// same canonical path.
void refuse_output_among_inputs(const std::string& output, const std::vector<std::string>& paths) {
  struct stat out_st {};
  const bool output_exists = ::stat(output.c_str(), &out_st) == 0;
  std::error_code out_error;
  const std::filesystem::path out_canonical = std::filesystem::weakly_canonical(output, out_error);
  for (const std::string& input : paths) {
    struct stat in_st {};
    std::error_code in_error;
    bool same = input == output;
    if (output_exists && ::stat(input.c_str(), &in_st) == 0) {
      same = same || (in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino);
    } else if (!out_error) {
      const std::filesystem::path in_canonical = std::filesystem::weakly_canonical(input, in_error);
      same = same || (!in_error && in_canonical == out_canonical);
    }
    if (same)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("merge_perfetto_traces: '{}' is both an input and the output: it "
                              "is the same file as the input '{}', which the merge would "
                              "overwrite; choose another output file",
                              output, input));
  }
}

void refuse_no_inputs(const std::vector<std::string>& paths) {
  if (paths.empty())
    throw Error(ErrorCode::InvalidArgument,
                "merge_perfetto_traces: no input traces: give one .pftrace file per rank");
}

}  // namespace

MergeSummary merge_perfetto_traces(std::ostream& out, const std::vector<std::string>& paths) {
  refuse_no_inputs(paths);
  std::vector<Input> inputs = scan_inputs(paths);
  MergeSummary summary = summarise(inputs);
  detail::export_to(out, "the merged Perfetto trace", [&] {
    detail::PacketWriter writer(out);
    Interleaver(inputs).write(writer);
  });
  return summary;
}

MergeSummary merge_perfetto_trace_files(const std::string& output,
                                        const std::vector<std::string>& paths) {
  refuse_no_inputs(paths);
  refuse_output_among_inputs(output, paths);
  MergeSummary summary;
  write_output_file(output, "the merged Perfetto trace",
                    [&](std::ostream& out) { summary = merge_perfetto_traces(out, paths); });
  return summary;
}

}  // namespace accgraph::timing
