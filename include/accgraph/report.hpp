// What the timing layer produces: one ReplayReport per replay (or eager region tree), per-region
// statistics over replays, and the exporters (text table, CSV, Chrome trace JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accgraph/export.hpp"

namespace accgraph::timing {

/// Key/value annotations of a region (shown in trace `args` and reports).
using Metadata = std::vector<std::pair<std::string, std::string>>;

/// Where a report's times come from: the same for every replay of one capture.
struct ReportSource {
  std::string backend;
  int device = 0;
  std::string device_name;
  std::string marker_strategy;
  uint64_t resolution_ns = 0;
};

/// One region as it was recorded: the same for every replay of its capture.
struct RegionInfo {
  std::string name;
  std::string path;        ///< names of the enclosing regions and this one, joined by '/'
  int depth = 0;           ///< 0 for top-level regions
  int parent = -1;         ///< index of the enclosing region in the layout, or -1
  uint64_t stream_id = 0;  ///< the Stream the region was recorded on (one trace track each)
  std::string lane;        ///< a trace track of its own within the stream's process; empty: none
  Metadata metadata;
  uint32_t begin_marker = 0;  ///< index of the region's start time in ReplayReport::marker_times
  uint32_t end_marker = 0;    ///< index of its end time
};

/// The regions of one capture (or of one eager region tree) and where their times come from:
/// built once, immutable, shared by every report of that capture's replays (a report refers to
/// it and copies none of its strings).
class ACCGRAPH_API ReportLayout {
 public:
  ReportLayout() = default;
  /// InvalidArgument when a region's parent is neither -1 nor the index of an earlier region.
  /// An empty path is made from the parent's path, '/' and the name. (The profiler's layouts
  /// also have depth = parent's depth + 1 and path = parent's path + '/' + name; a layout built
  /// by hand is taken as given.)
  /// marker_count() becomes one more than the largest marker index.
  ReportLayout(ReportSource source, std::vector<RegionInfo> regions);

  const ReportSource& source() const { return source_; }
  const std::vector<RegionInfo>& regions() const { return regions_; }
  /// How many marker times a report of this layout holds.
  uint32_t marker_count() const { return marker_count_; }

 private:
  ReportSource source_;
  std::vector<RegionInfo> regions_;
  uint32_t marker_count_ = 0;
};

/// One region of one replay, made on demand from its report: it refers to the layout's
/// RegionInfo (valid while the report it came from, or a copy of that report, lives).
struct RegionTiming {
  const RegionInfo* info = nullptr;
  uint64_t start_ns = 0;  ///< on the backend's marker clock
  uint64_t end_ns = 0;
  uint64_t duration_ns = 0;
  /// False when the backend could not place one of the region's markers in time (for example
  /// its timestamp counter may have wrapped more than once: TimestampMarkers::kUnmeasurable).
  /// start_ns, end_ns and duration_ns are then 0 and the statistics leave the region out.
  bool measurable = true;

  const std::string& name() const { return info->name; }
  const std::string& path() const { return info->path; }
  int depth() const { return info->depth; }
  int parent() const { return info->parent; }
  uint64_t stream_id() const { return info->stream_id; }
  const std::string& lane() const { return info->lane; }
  const Metadata& metadata() const { return info->metadata; }
};

/// A region as a report's builder takes it: what was recorded and its two times.
struct RegionSample {
  RegionInfo info;  ///< begin_marker and end_marker are assigned by ReplayReport::from_samples
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool measurable = true;
};

/// One replay of a timed graph (or one eager region tree): a shared ReportLayout plus that
/// replay's marker times. Copying a report copies the times and shares the layout.
///
///   for (const RegionTiming& r : report.regions())
///     std::cout << r.path() << ": " << r.duration_ns << " ns\n";
class ACCGRAPH_API ReplayReport {
 public:
  /// An empty report (no regions).
  ReplayReport();
  /// InvalidArgument when `layout` is null or `marker_times` does not hold exactly
  /// layout->marker_count() values. A time equal to TimestampMarkers::kUnmeasurable (UINT64_MAX)
  /// makes the regions that use it unmeasurable.
  ReplayReport(std::shared_ptr<const ReportLayout> layout, uint64_t graph_id,
               uint64_t replay_index, std::vector<uint64_t> marker_times);
  /// Builds a layout from `samples` (each region gets markers 2i and 2i+1) and its report:
  /// for tests, tools that import timings and exporters' callers. Validated as above.
  static ReplayReport from_samples(ReportSource source, uint64_t graph_id, uint64_t replay_index,
                                   std::vector<RegionSample> samples);

  uint64_t graph_id() const { return graph_id_; }          ///< AcceleratorGraph::id(); 0: eager
  uint64_t replay_index() const { return replay_index_; }  ///< 0-based since the capture
  const ReportSource& source() const { return layout_->source(); }
  const std::string& backend() const { return layout_->source().backend; }
  int device() const { return layout_->source().device; }
  const std::string& device_name() const { return layout_->source().device_name; }
  const std::string& marker_strategy() const { return layout_->source().marker_strategy; }
  uint64_t resolution_ns() const { return layout_->source().resolution_ns; }
  const ReportLayout& layout() const { return *layout_; }
  const std::shared_ptr<const ReportLayout>& shared_layout() const { return layout_; }
  const std::vector<uint64_t>& marker_times() const { return times_; }

  /// Regions in the order they were opened.
  size_t size() const { return layout_->regions().size(); }
  bool empty() const { return size() == 0; }
  /// The timing of region `index` (< size(); InvalidArgument otherwise).
  RegionTiming region(size_t index) const;

  /// A range over the regions, each made on demand: `for (RegionTiming r : report.regions())`.
  class Regions;
  Regions regions() const;

 private:
  RegionTiming timing_of(size_t index) const;
  std::shared_ptr<const ReportLayout> layout_;
  uint64_t graph_id_ = 0;
  uint64_t replay_index_ = 0;
  std::vector<uint64_t> times_;
};

class ReplayReport::Regions {
 public:
  class iterator {
   public:
    using value_type = RegionTiming;
    using difference_type = std::ptrdiff_t;
    using reference = RegionTiming;
    using pointer = void;
    using iterator_category = std::input_iterator_tag;
    iterator(const ReplayReport* report, size_t index) : report_(report), index_(index) {}
    RegionTiming operator*() const { return report_->timing_of(index_); }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++index_;
      return old;
    }
    bool operator==(const iterator& other) const { return index_ == other.index_; }
    bool operator!=(const iterator& other) const { return index_ != other.index_; }

   private:
    const ReplayReport* report_;
    size_t index_;
  };
  explicit Regions(const ReplayReport* report) : report_(report) {}
  iterator begin() const { return {report_, 0}; }
  iterator end() const { return {report_, report_->size()}; }
  size_t size() const { return report_->size(); }
  RegionTiming operator[](size_t index) const { return report_->region(index); }

 private:
  const ReplayReport* report_;
};

inline ReplayReport::Regions ReplayReport::regions() const { return Regions(this); }

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
  /// Adds the measurable regions of `report`. Reports that share a layout (the replays of one
  /// capture) find their regions' series by that layout, without hashing every path each time.
  void add(const ReplayReport& report);
  std::vector<RegionStats> stats() const;
  void clear();
  /// Memory diagnostics: the buckets each region's sketch holds now, in first-seen order (all 0
  /// in StatsMode::Exact; at most 3776 each).
  std::vector<size_t> sketch_buckets() const;

 private:
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
/// stream_id,lane,start_ns,end_ns,duration_ns,metadata (key=value pairs joined by ';'; the
/// times are empty for an unmeasurable region). Quoted as in write_stats_csv.
ACCGRAPH_API void write_reports_csv(std::ostream& out, const std::vector<ReplayReport>& reports);
/// Chrome trace JSON ({"traceEvents":[...], "displayTimeUnit":"ns"}, ph "X", ts/dur in
/// microseconds relative to the earliest start in `reports`, cat "graph <id>" or "eager");
/// loads in Perfetto and chrome://tracing. One process per (backend, device); in it one thread
/// per stream ("stream <id>", in id order), then one per lane (RegionInfo::lane, named after
/// it, in the order first seen; a lane collects the regions of every stream of that process
/// that name it); both named by "M" events. args hold the metadata, path, stream, graph_id and
/// replay_index. Regions of one track that overlap without nesting (other graphs' replays,
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
