// A trace of replay reports written to a file in the format its name asks for (Chrome JSON,
// native Perfetto, speedscope: TraceFormat in accgraph/exporters.hpp), atomically
// (accgraph/output_file.hpp), and what a Perfetto trace records of the process that wrote it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accgraph/clock.hpp"       // DeviceClockOffset
#include "accgraph/export.hpp"
#include "accgraph/exporters.hpp"   // TraceFormat, trace_format_for
#include "accgraph/host_clock.hpp"  // HostClockOffset
#include "accgraph/report.hpp"

namespace accgraph::timing {

/// What a trace says about the process that wrote it, for merge_perfetto_traces.
struct PerfettoOptions {
  int rank = -1;       ///< this process's rank in a multi-process job; -1 for none
  int world_size = 0;  ///< the job's number of ranks (rank < world_size); 0 with rank -1
  std::string host;    ///< the host's name (tells ranks on different hosts apart)
  /// The reference clock that the device offsets are against.
  std::string host_clock = "CLOCK_REALTIME";
  /// How far this host's clock may be from the job's reference (the NTP/PTP synchronisation
  /// error bound, e.g. chronyc tracking's "Root dispersion" + |"System time"|); 0 when every
  /// rank runs on one host.
  uint64_t host_clock_uncertainty_ns = 0;
  /// This host's clock against the job's reference host (rank 0's), measured over the job's
  /// transport (measure_host_clock_offset): none, one (at profiling start) or two (at start and
  /// at flush, measured_at_ns increasing: the merge interpolates the drift between them). With
  /// none, the merge falls back to host_clock_uncertainty_ns, and warns when the ranks run on
  /// several hosts. More than two, or two out of order, is InvalidArgument.
  std::vector<HostClockOffset> host_clock_offsets;
  /// Per device (backend, device): its clock offset. A device without one is written as
  /// uncalibrated; a merge leaves its times as they are and says so.
  std::vector<DeviceClockOffset> clocks;
};

/// Writes `reports` to `path` in the format its name asks for (trace_format_for), through
/// write_output_file (Note [Atomic output]: an existing file is replaced only once the new one
/// is complete). The one call behind the CLI's --trace and Python's write_trace.
///
///   write_trace_file("run.pftrace", profiler.reports());        // native Perfetto
///   write_trace_file("run.json", profiler.reports());           // Chrome trace JSON
///   write_trace_file("run.speedscope.json", profiler.reports());
///
/// `options` are recorded by native Perfetto traces only: for any other format, options other
/// than the defaults are InvalidArgument (a format that has nowhere to put them refuses them
/// rather than dropping them). Unsupported, saying how to get it, for a Perfetto trace in a
/// program without accgraph::perfetto (a build without libprotobuf, or a program that does not
/// link accgraph::perfetto, which adds its writer when it is loaded). Otherwise what
/// write_output_file and the format's writer throw (FileError for a failed system call).
ACCGRAPH_API void write_trace_file(const std::string& path, const std::vector<ReplayReport>& reports,
                                   const PerfettoOptions& options = {});

/// Whether this program can write `format` now: false for TraceFormat::Perfetto without
/// accgraph::perfetto (write_trace_file would throw Unsupported).
ACCGRAPH_API bool trace_format_supported(TraceFormat format) noexcept;

/// What write_trace_file(path, ...) would refuse before it writes anything, checked now: a format
/// this program cannot write (Unsupported, as write_trace_file says it) and a file that cannot
/// be created (check_output_file's FileError). For a program that would otherwise find out only
/// after a long run.
ACCGRAPH_API void check_trace_file(const std::string& path);

}  // namespace accgraph::timing
