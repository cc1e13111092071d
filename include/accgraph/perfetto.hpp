// Native Perfetto traces (.pftrace) of replay reports and of Chrome trace events, and the merge of
// several ranks' traces into one timeline on a common clock. Library accgraph::perfetto (target
// accgraph_perfetto), built when libprotobuf is found; the core library does not depend on it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "accgraph/clock.hpp"       // DeviceClockOffset, ClockSample, calibrate_clock
#include "accgraph/host_clock.hpp"  // HostClockOffset, measure_host_clock_offset
#include "accgraph/report.hpp"
#include "accgraph/trace_file.hpp"  // PerfettoOptions, write_trace_file

#if defined(_WIN32)
#if defined(ACCGRAPH_BUILDING_PERFETTO)
#define ACCGRAPH_PERFETTO_API __declspec(dllexport)
#else
#define ACCGRAPH_PERFETTO_API __declspec(dllimport)
#endif
#else
#define ACCGRAPH_PERFETTO_API __attribute__((visibility("default")))
#endif

namespace accgraph::timing {

/// Writes `reports` as a native Perfetto trace (protobuf, .pftrace; open in ui.perfetto.dev).
/// Timestamps are the marker clock's nanoseconds (not shifted: merge_perfetto_traces puts
/// several traces on one clock).
///
/// Tracks: one process per (backend, device), named "<backend> device <n> (<name>)" (prefixed
/// "rank <r>: " with a rank); in it one track per stream ("stream <id>", by id) for the regions
/// without a lane, then one track per lane (named by the lane, in the order first seen) for the
/// regions with one. Regions of one track that overlap without nesting go to further backing
/// tracks sharing the track's sibling_merge_key, so the UI still shows one row (Note [Backing
/// tracks]). Each region is a slice (begin and end packets) with category "graph <id>" or
/// "eager" and debug annotations: its metadata, typed (Note [Typed annotations]), then path,
/// graph_id, replay_index, stream and self_ns (RegionTiming::self_ns, when self_measurable()).
/// Each process track also carries one instant event "accgraph trace info" (category
/// "accgraph") with rank, world_size, host, host_clock, host_clock_uncertainty_ns, backend, device,
/// clock_calibrated, clock_offset_ns and clock_uncertainty_ns, and for each host clock offset
/// (PerfettoOptions::host_clock_offsets) host_clock_offset_ns, host_clock_offset_uncertainty_ns
/// and host_clock_offset_measured_at_ns (the second one's names end in _end: host_clock_offset_
/// end_ns, ...). Unmeasurable regions are left out.
/// Text is written as valid UTF-8.
///
/// Written packet by packet through a 64 KiB buffer; besides the reports it holds a sorted index
/// of the regions and their begin/end packets (about 72 bytes per region at the peak), never
/// the whole trace. Throws only accgraph::Error: InvalidArgument for inconsistent options (a
/// rank outside 0..world_size-1) or when `out` fails (as the exporters in report.hpp).
ACCGRAPH_PERFETTO_API void write_perfetto_trace(std::ostream& out,
                                                const std::vector<ReplayReport>& reports,
                                                const PerfettoOptions& options = {});

/// One argument of a TraceEvent ("args" of Chrome's JSON).
struct TraceEventArg {
  std::string name;
  /// A string's text, or (is_text false) any other JSON value as its JSON text: a number, true,
  /// false or a list of them is written typed (Note [Typed annotations]), anything else (an
  /// object, null) as its text.
  std::string value;
  bool is_text = true;
};

/// One event of a Chrome JSON trace (the Trace Event Format, as torch.profiler's Kineto writes
/// it), for write_perfetto_events.
struct TraceEvent {
  /// 'X' a complete slice (ts, dur), 'i' or 'I' an instant (ts), 'M' metadata: process_name,
  /// process_labels, process_sort_index, thread_name and thread_sort_index are read (their
  /// "name", "labels" or "sort_index" argument), other metadata is ignored.
  char phase = 'X';
  std::string name;
  std::string category;  ///< "cat"; "" for none
  /// The JSON values of "pid" and "tid" as text: a number as written ("6046"), a string's text
  /// ("Spans").
  std::string pid, tid;
  uint64_t ts_ns = 0;   ///< "ts" (microseconds) in nanoseconds, exactly
  uint64_t dur_ns = 0;  ///< "dur" in nanoseconds ('X')
  std::vector<TraceEventArg> args;
};

/// Writes Chrome trace `events` as a native Perfetto trace (.pftrace), with the same tracks and
/// times: what accgraph.torch.annotate_trace writes for a .pftrace output.
///
/// One process per pid that has slices or instants (its pid when the pid is an int32, else a
/// number above every such pid), named by its process_name metadata (else the pid's text), with
/// its process_labels and process_sort_index (legacy_sort_index). In it one track per (pid, tid),
/// named by the thread_name metadata (else "thread <tid>" for a number, the tid's text for a
/// string), ordered by thread_sort_index, then as first seen. 'X' events are slices (begin and end
/// packets, ns exact; category and args as debug annotations, typed as TraceEventArg says), 'i'/'I'
/// instants on their thread's track. Slices of one thread that overlap without nesting go to
/// further backing tracks sharing the track's sibling_merge_key, so the UI still shows one row
/// (Note [Backing tracks]). Text is written as valid UTF-8.
///
/// Throws only accgraph::Error: InvalidArgument for an event of any other phase (flow 's'/'f',
/// 'B'/'E', counters: leave them out), a slice whose end does not fit 64 bits, or when `out`
/// fails.
ACCGRAPH_PERFETTO_API void write_perfetto_events(std::ostream& out,
                                                 const std::vector<TraceEvent>& events);

/// One input of a merge, as merge_perfetto_traces found it.
struct MergedRank {
  std::string path;
  int rank = 0;
  std::string host;
  uint64_t host_clock_uncertainty_ns = 0;  ///< the host's declared bound, as written
  /// The host clock offsets measured against rank 0's host (PerfettoOptions::host_clock_offsets),
  /// as applied: each event moved by the offset interpolated at its time; empty where none was
  /// measured (then host_clock_uncertainty_ns stands for it).
  std::vector<HostClockOffset> host_clock_offsets;
  /// With one measured host offset on another host than rank 0's: what its clock may have
  /// drifted from that measurement to its last event (100 ppm), included in the alignment
  /// uncertainty; 0 otherwise (two measurements: the drift is interpolated).
  uint64_t host_clock_drift_ns = 0;
  /// Per process (device) of the input: its offset as applied; uncertainty_ns 0 and
  /// offset_ns 0 for an uncalibrated device (see `uncalibrated`).
  std::vector<DeviceClockOffset> clocks;
  std::vector<std::string> uncalibrated;  ///< "<backend> device <n>" without a clock offset
  uint64_t packets = 0;
};

struct MergeSummary {
  int world_size = 0;
  std::vector<MergedRank> ranks;  ///< by rank
  /// The largest alignment error of any two events in the merged timeline: the two largest
  /// per-rank uncertainties (device offset + host clock: the larger of the measured host
  /// offsets' uncertainties plus host_clock_drift_ns, else the declared
  /// host_clock_uncertainty_ns) added, saturating: UINT64_MAX means unknown (the sum did not
  /// fit, or ranks on several hosts and one without a measured offset or a declared bound; a
  /// warning says which).
  uint64_t alignment_uncertainty_ns = 0;
  /// E.g. ranks missing from the inputs (at most five ranges of them and their count, however
  /// large the world size).
  std::vector<std::string> warnings;
};

/// a + b, or UINT64_MAX when the sum does not fit: how the merge adds clock uncertainties (a
/// saturated one is unknown, never a small number after wrapping around).
constexpr uint64_t add_uncertainties(uint64_t a, uint64_t b) noexcept {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/// Merges the traces of several ranks (each written by write_perfetto_trace with
/// PerfettoOptions::rank) into one trace on the host clock: every event's time becomes
/// device_time - offset of its device, then, where the rank's host clock offset was measured
/// (PerfettoOptions::host_clock_offsets), minus that offset interpolated at the event's host
/// time (rank 0's host clock is the reference); one process per (rank, device) named
/// "rank <r>: ...", track ids and sequence ids renumbered so the inputs cannot collide, packets
/// interleaved by time. Each rank's "accgraph trace info" event is kept, with
/// "merged_offset_ns", "alignment_uncertainty_ns" and, with a measured host offset,
/// "merged_host_clock_offset_ns" added. Packets accgraph does not know pass through unchanged.
/// Ranks on several hosts without a measured host offset fall back to their declared
/// host_clock_uncertainty_ns, with a warning.
///
/// InvalidArgument (naming the file and what to do) when an input cannot be read or parsed, has
/// no "accgraph trace info" (not written by write_perfetto_trace with a rank), has a rank or
/// world size that is not an integer, lies outside int or does not fit (rank >= world_size),
/// two inputs have the same rank, or they disagree on world_size or host_clock. Each input is
/// read twice (scanned, then interleaved). Streamed (Note [Merge streaming] in
/// timing/export/perfetto/merge.cpp): memory holds each input's tracks and a window of its packets,
/// not its events, and at most 128 inputs are open at once (fewer when descriptors run out), so
/// any number of inputs can be merged under the descriptor limit.
ACCGRAPH_PERFETTO_API MergeSummary merge_perfetto_traces(std::ostream& out,
                                                         const std::vector<std::string>& paths);

/// merge_perfetto_traces into the file `output`, written through write_output_file
/// (accgraph/output_file.hpp): the output is replaced only once the merge succeeded, and an
/// existing one is untouched otherwise. An output that is one of the inputs under any name
/// (another spelling, a symbolic or hard link: the same device and inode, or the same canonical
/// path) is refused with InvalidArgument naming both before anything is read. What the CLI's
/// merge-traces and Python's merge_traces call.
ACCGRAPH_PERFETTO_API MergeSummary
merge_perfetto_trace_files(const std::string& output, const std::vector<std::string>& paths);

}  // namespace accgraph::timing
