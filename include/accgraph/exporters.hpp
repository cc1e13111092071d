// The exporters of replay reports and their statistics: text table, CSV, Chrome trace JSON, and
// the trace format a file name asks for. Native Perfetto traces: accgraph/perfetto.hpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"

namespace accgraph::timing {

/// The exporters below write to `out` and flush it. Text from the reports (names, paths,
/// metadata, backend and device names) is written as valid UTF-8: each byte that is not part of
/// a well-formed UTF-8 sequence becomes U+FFFD (valid text is written unchanged). They throw
/// only accgraph::Error: InvalidArgument when `out` is in a failed state after the write (a full
/// disk, a closed pipe, a stream that had failed before the call; what reached `out` then is
/// incomplete), or when anything else goes wrong (e.g. out of memory).
///
/// A fixed-width text table: region, count, min, mean, p50, p95, max and self p50
/// (RegionStats::self_p50_ns), in microseconds. Control characters in a path are shown as \xNN
/// (C1 controls as \u00NN), so each region is one line.
ACCGRAPH_API void write_stats_table(std::ostream& out, const std::vector<RegionStats>& stats);
/// CSV with a header row of stats_csv_columns(): path,depth,count,min_ns,mean_ns,p50_ns,p95_ns,
/// max_ns,self_count,self_min_ns,self_mean_ns,self_p50_ns,self_p95_ns,self_max_ns,graph_id,
/// first_call,p05_ns. A field holding a comma, a double quote, CR or LF is quoted, with its quotes
/// doubled (RFC 4180).
ACCGRAPH_API void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats);
/// CSV, one row per region per report, with a header row of reports_csv_columns():
/// graph_id,replay_index,backend,device,path,depth,stream_id,lane,start_ns,end_ns,duration_ns,
/// self_ns,raw_start_ns,raw_end_ns,metadata (self_ns: RegionTiming::self_ns; raw_*: the markers'
/// own times; metadata: key=value pairs joined by ';'; the times are empty for an unmeasurable
/// region, and self_ns when !self_measurable()). Quoted as in write_stats_csv.
ACCGRAPH_API void write_reports_csv(std::ostream& out, const std::vector<ReplayReport>& reports);
/// The header fields of write_stats_csv and write_reports_csv, in column order: the one
/// declaration of each CSV's columns, which readers (Python's accgraph.torch) find columns by
/// instead of spelling the header again. Columns are only ever appended or inserted, never
/// renamed, so a reader finds by name the columns it knows and ignores the others.
ACCGRAPH_API const std::vector<std::string>& stats_csv_columns();
ACCGRAPH_API const std::vector<std::string>& reports_csv_columns();
/// Chrome trace JSON ({"traceEvents":[...], "displayTimeUnit":"ns"}, ph "X", ts/dur in
/// microseconds relative to the earliest start in `reports`, cat "graph <id>" or "eager");
/// loads in Perfetto and chrome://tracing. One process per (backend, device); in it one thread
/// per stream ("stream <id>", in id order), then one per lane (RegionInfo::lane, named after
/// it, in the order first seen; a lane collects the regions of every stream of that process
/// that name it); both named by "M" events. args hold the metadata, path, stream, graph_id and
/// replay_index, and self_us (RegionTiming::self_ns in microseconds) when the region's self time
/// is measurable. Regions of one track that overlap without nesting (other graphs' replays,
/// regions ended on another stream, two streams' regions in one lane) move to extra tracks
/// "<track> (overlap <k>)", so every track nests. Control characters are escaped as JSON
/// requires. Written to `out` event by event as it goes: besides the reports, the writer holds
/// about 44 bytes of index per region (to sort each track's events by start) and a 64 KiB
/// buffer, never the whole trace.
ACCGRAPH_API void write_chrome_trace(std::ostream& out, const std::vector<ReplayReport>& reports);

/// The trace format a file name asks for: a name ending in ".pftrace" is a native Perfetto trace
/// (write_perfetto_trace, accgraph/perfetto.hpp), any other Chrome trace JSON. The CLI's
/// --trace and Python's Profiler.write_trace choose by it.
inline bool is_perfetto_trace_path(const std::string& path) {
  const std::string extension = ".pftrace";
  return path.size() >= extension.size() &&
         path.compare(path.size() - extension.size(), extension.size(), extension) == 0;
}

}  // namespace accgraph::timing
