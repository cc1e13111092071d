// What the timing layer produces: one ReplayReport per replay (or eager region tree), per-region
// statistics over replays, and the exporters (text table, CSV, Chrome trace JSON).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accgraph/export.hpp"

namespace accgraph::timing {

/// Key/value annotations of a region (shown in trace `args` and reports).
using Metadata = std::vector<std::pair<std::string, std::string>>;

struct RegionTiming {
  std::string name;
  std::string path;        ///< names of the enclosing regions and this one, joined by '/'
  int depth = 0;           ///< 0 for top-level regions
  int parent = -1;         ///< index of the enclosing region in ReplayReport::regions, or -1
  uint64_t stream_id = 0;  ///< the Stream the region was recorded on (one trace track each)
  uint64_t start_ns = 0;   ///< on the backend's marker clock
  uint64_t end_ns = 0;
  uint64_t duration_ns = 0;
  /// False when the backend could not place one of the region's markers in time (for example
  /// its timestamp counter may have wrapped more than once: TimestampMarkers::kUnmeasurable).
  /// start_ns, end_ns and duration_ns are then 0 and the statistics leave the region out.
  bool measurable = true;
  Metadata metadata;
};

struct ReplayReport {
  uint64_t graph_id = 0;      ///< AcceleratorGraph::id(), 0 for eager (non-captured) regions
  uint64_t replay_index = 0;  ///< 0-based replay number since the capture (eager: sequence)
  std::string backend;
  int device = 0;
  std::string device_name;
  std::string marker_strategy;
  uint64_t resolution_ns = 0;
  std::vector<RegionTiming> regions;  ///< in the order the regions were opened
};

/// Statistics of one region path over all reports seen. count, unmeasurable, min_ns and max_ns
/// are exact in both modes. In StatsMode::Exact, mean_ns is the sum of the samples (as doubles,
/// in ascending order) over count, and p50_ns/p95_ns are exact nearest-rank percentiles (the
/// smallest sample with at least p% of the samples <= it). In StatsMode::Sketch, mean_ns is the
/// exact 128-bit integer sum over count, rounded to double; p50_ns/p95_ns are within 1/128
/// (0.79%) relative error of the exact nearest-rank values, exact below 128 ns, and always
/// inside [min_ns, max_ns].
struct RegionStats {
  std::string path;
  int depth = 0;
  uint64_t count = 0;         ///< measured samples (the other fields are over these)
  uint64_t unmeasurable = 0;  ///< reports in which the region was not measurable
  double min_ns = 0, mean_ns = 0, p50_ns = 0, p95_ns = 0, max_ns = 0;
};

/// How StatsAccumulator keeps the durations of each region.
enum class StatsMode {
  /// Bounded memory: exact count/min/max/sum and a log-bucketed histogram for p50/p95 (at most
  /// 3776 bucket counts, 30 KiB, per region whatever the number of reports; a region whose
  /// durations stay within a factor of 2^k of each other uses about 64k+1 of them).
  Sketch,
  /// Every sample (8 bytes per region per report, without bound): exact percentiles.
  Exact,
};

/// Accumulates per-region statistics from reports (keyed by region path, in first-seen order).
/// See RegionStats for which fields are exact in which StatsMode. Thread-safe; stats() copies
/// the state under the lock and computes outside it.
///
///   StatsAccumulator sketch;                    // bounded memory, p50/p95 within 0.79%
///   StatsAccumulator exact(StatsMode::Exact);   // keeps every sample
class ACCGRAPH_API StatsAccumulator {
 public:
  explicit StatsAccumulator(StatsMode mode = StatsMode::Sketch);
  ~StatsAccumulator();
  StatsAccumulator(const StatsAccumulator&) = delete;
  StatsAccumulator& operator=(const StatsAccumulator&) = delete;

  StatsMode mode() const;
  void add(const ReplayReport& report);
  std::vector<RegionStats> stats() const;
  void clear();

 private:
  friend struct StatsAccess;  // the Profiler feeds samples by cached series index
  struct State;
  std::unique_ptr<State> state_;
};

/// The exporters below write to `out` and flush it. Text from the reports (names, paths,
/// metadata, backend and device names) is written as valid UTF-8: each byte that is not part of
/// a well-formed UTF-8 sequence becomes U+FFFD (valid text is written unchanged). They throw
/// only accgraph::Error: InvalidArgument when `out` is in a failed state after the write (a full
/// disk, a closed pipe, a stream that had failed before the call; what reached `out` then is
/// incomplete), or when anything else goes wrong (e.g. out of memory).
///
/// A fixed-width text table: region, count, min, mean, p50, p95, max (microseconds). Control
/// characters in a path are shown as \xNN (C1 controls as \u00NN), so each region is one line.
ACCGRAPH_API void write_stats_table(std::ostream& out, const std::vector<RegionStats>& stats);
/// CSV with a header row: path,depth,count,min_ns,mean_ns,p50_ns,p95_ns,max_ns. A field
/// holding a comma, a double quote, CR or LF is quoted, with its quotes doubled (RFC 4180).
ACCGRAPH_API void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats);
/// CSV, one row per region per report: graph_id,replay_index,backend,device,path,depth,
/// stream_id,start_ns,end_ns,duration_ns,metadata (key=value pairs joined by ';'). Quoted as in
/// write_stats_csv.
ACCGRAPH_API void write_reports_csv(std::ostream& out, const std::vector<ReplayReport>& reports);
/// Chrome trace JSON ({"traceEvents":[...], "displayTimeUnit":"ns"}, ph "X", ts/dur in
/// microseconds relative to the earliest start in `reports`, cat "graph <id>" or "eager");
/// loads in Perfetto and chrome://tracing. One process per (backend, device), one thread per
/// stream, both named by "M" events; args hold the metadata, path, graph_id and replay_index.
/// Regions of one stream that overlap without nesting (other graphs' replays, regions ended on
/// another stream) move to extra tracks "stream <id> (overlap <k>)", so every track nests.
/// Control characters are escaped as JSON requires. Written to `out` event by event as it goes:
/// besides the reports, the writer holds about 20 bytes of index per region (to sort each stream's
/// events by start) and a 64 KiB buffer, never the whole trace.
ACCGRAPH_API void write_chrome_trace(std::ostream& out, const std::vector<ReplayReport>& reports);

}  // namespace accgraph::timing
