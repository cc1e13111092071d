// The exporters of replay reports and their statistics: text table, CSV, Chrome trace JSON,
// speedscope JSON, and the trace format a file name asks for. Native Perfetto traces:
// accgraph/perfetto.hpp; a trace written to a file in the format its name asks for:
// accgraph/trace_file.hpp.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
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
/// `text` as write_stats_table shows a region's path: valid UTF-8 (Note [Exported text]) with
/// control characters as \xNN and C1 controls as \u00NN, so that no terminal escape sequence
/// and no line break gets through. For other tables of the same names (Python's
/// accgraph.torch module table and compare).
ACCGRAPH_API std::string table_text(std::string_view text);

/// The version of the statistics' schema this library writes (Note [Stats schema] in
/// timing/export/text_exporters.cpp): the CSV's schema_version column and the JSON's
/// "schema_version". A reader refuses a file of a larger version than it knows (a field that
/// changed meaning), and reads every smaller one.
ACCGRAPH_API int stats_schema_version();

/// What a statistics file says about its run besides the statistics: the CSV takes
/// graph_labels only (its graph_label column); write_stats_json all of it.
///
///   StatsRun run = profiler.stats_run();            // replays, devices, sampling options
///   run.graph_labels = {{3, "train.py:42"}};        // what names each graph for a reader
///   run.metadata = {{"torch_version", "2.11"}};      // what only the caller knows
///   write_stats_json(out, profiler.stats(), run);
struct StatsRun {
  /// Graph id -> its capture site or a label the caller gave ("train.py:42", "decode"): what a
  /// reader (compare) matches a graph of another run by, with the regions it holds, since ids
  /// are only the order of captures in one process.
  std::vector<std::pair<uint64_t, std::string>> graph_labels;
  /// Each graph's replays run and timed, and its N (Profiler::replay_counts()).
  std::vector<GraphReplays> replays;
  /// The devices the reports came from: backend, device, marker strategy, timer step
  /// (resolution_ns), marker overhead.
  std::vector<ReportSource> sources;
  uint64_t sample_every = 1;  ///< ProfilerOptions::sample_every
  double overhead = 0;        ///< ProfilerOptions::overhead
  uint64_t sample_seed = 0;   ///< ProfilerOptions::sample_seed
  /// Anything else the caller knows of the run, as key -> text: the framework's version, the
  /// driver, the marker placement.
  Metadata metadata;
};

/// CSV with a header row of stats_csv_columns(): path,depth,count,min_ns,mean_ns,p50_ns,p95_ns,
/// max_ns,self_count,self_min_ns,self_mean_ns,self_p50_ns,self_p95_ns,self_max_ns,graph_id,
/// first_call,p05_ns,replays_run,replays_timed,graph_label,schema_version (graph_label: from
/// run.graph_labels, empty for eager rows and unlabelled graphs; schema_version:
/// stats_schema_version() on every row). A field holding a comma, a double quote, CR or LF is
/// quoted, with its quotes doubled (RFC 4180).
ACCGRAPH_API void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats);
ACCGRAPH_API void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats,
                                  const StatsRun& run);
/// The same facts as JSON, with the run's metadata (Note [Stats schema]):
///
///   {"schema": "accgraph.stats", "schema_version": 2, "accgraph_version": "0.2.0",
///    "run": {"sample_every": 1, "overhead": 0.0, "sample_seed": 0,
///            "devices": [{"backend": "cuda", "device": 0, "device_name": "...",
///                         "marker_strategy": "...", "timer_step_ns": 32,
///                         "marker_overhead_ns": 540}],
///            "metadata": {"torch_version": "2.11.0", ...}},
///    "graphs": [{"graph_id": 3, "label": "train.py:42", "replays_run": 520,
///                "replays_timed": 32, "sample_every": 16, "sampled": true}],
///    "regions": [{"path": "GPT/h.0", "depth": 1, "graph_id": 3, "first_call": false,
///                 "count": 32, ...every numeric column of the CSV...}]}
///
/// Text is valid UTF-8 with JSON's escapes; numbers are integers or shortest round-trip doubles.
ACCGRAPH_API void write_stats_json(std::ostream& out, const std::vector<RegionStats>& stats,
                                   const StatsRun& run);
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

/// Speedscope's JSON (https://www.speedscope.app/file-format-schema.json; open it in
/// speedscope.app): one "evented" profile per stack of the trace layout's tracks (the Chrome
/// trace's threads: "<backend> device <n>: stream <id>", a lane, "... (overlap <k>)"), its
/// regions as open ("O") and close ("C") events of shared frames (one per region path: "name" the
/// region's name, "file" its path), in nanoseconds from the earliest start. Unmeasurable regions are left out; text is valid UTF-8.
ACCGRAPH_API void write_speedscope(std::ostream& out, const std::vector<ReplayReport>& reports);

/// The trace formats that write_trace_file (accgraph/trace_file.hpp) writes, chosen by the
/// file name's suffix (trace_format_for). The one list of them is timing/export/trace_file.cpp
/// (Note [Trace formats]).
enum class TraceFormat {
  ChromeJson,  ///< any name no other format claims: Chrome trace JSON (write_chrome_trace)
  Perfetto,    ///< ".pftrace", ".perfetto-trace": native Perfetto (accgraph/perfetto.hpp)
  Speedscope,  ///< ".speedscope.json": speedscope's JSON (write_speedscope)
};

/// The trace format a file name asks for, by its suffix: the CLI's --trace, Python's
/// write_trace and annotate_trace all choose by it.
///
///   trace_format_for("run.pftrace") == TraceFormat::Perfetto
///   trace_format_for("run.json") == TraceFormat::ChromeJson
ACCGRAPH_API TraceFormat trace_format_for(const std::string& path);

/// The format's short name: "chrome", "perfetto", "speedscope".
ACCGRAPH_API const char* to_string(TraceFormat format) noexcept;

/// Whether a file name asks for a native Perfetto trace (trace_format_for).
inline bool is_perfetto_trace_path(const std::string& path) {
  return trace_format_for(path) == TraceFormat::Perfetto;
}

}  // namespace accgraph::timing
