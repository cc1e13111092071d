// What the timing layer produces: one ReplayReport per replay (or eager region tree), the regions
// it times and the layout they share. Statistics over reports: accgraph/stats.hpp; writing them
// out: accgraph/exporters.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/types.hpp"  // kUnmeasurable

namespace accgraph::detail {

/// A leaf's duration from its begin and end marker times: a region that spans one ordinary
/// marker transition (Note [Marker transitions] in timing/model/report.cpp) takes what its
/// markers read beyond `overhead_ns` (0: what they read), never below 0 (0 when end < start);
/// kUnmeasurable when either time is. The one rule RegionTiming, ReportLayout::work_ns() and the
/// statistics (timing/model/stats.cpp) apply.
inline uint64_t span_duration(uint64_t begin_ns, uint64_t end_ns, uint64_t overhead_ns) {
  const uint64_t later = std::max(begin_ns, end_ns);  // kUnmeasurable when either is
  if (later == kUnmeasurable) return kUnmeasurable;
  return later - begin_ns > overhead_ns ? later - begin_ns - overhead_ns : 0;
}

}  // namespace accgraph::detail

namespace accgraph::timing {

/// Key/value annotations of a region (shown in trace `args` and reports).
using Metadata = std::vector<std::pair<std::string, std::string>>;

/// The kernels a marker set launches, by the names a kernel trace shows for them (CUPTI, and
/// torch.profiler's Chrome traces): each name is part of the trace's name of its kernel (which
/// may be demangled, with namespace and parameters). What a trace reader aligns markers by
/// (Python's accgraph.torch.annotate_trace, Note [Trace replay matching] in
/// bindings/python/accgraph/torch/_trace/_match.py). Filled by the backend (the optional
/// MarkerKernelNames of spi/marker_kernels.hpp); empty where markers are not kernels.
struct MarkerKernels {
  /// Write a marker's time as they start (the store is their first instruction).
  std::vector<std::string> record_at_start{};
  /// Write it as they end: they start early, wait for the kernel before them, then store.
  std::vector<std::string> record_at_end{};
  /// End a marker sequence: one per replay, after its record kernels.
  std::vector<std::string> end{};

  bool empty() const { return record_at_start.empty() && record_at_end.empty() && end.empty(); }
};

/// Where a report's times come from: the same for every replay of one capture.
struct ReportSource {
  std::string backend;
  int device = 0;
  std::string device_name;
  std::string marker_strategy;
  uint64_t resolution_ns = 0;
  /// What one marker transition (the marker and the step from the work before it to the work
  /// after it) adds on this device, measured when the profiler first times work there, and
  /// taken off once for every marker transition a region spans (Note [Marker overhead] in
  /// timing/engine/marker_overhead.cpp): RegionTiming::duration_ns() is then the time of the work
  /// between the markers, raw_duration_ns() what the markers read. 0: nothing is subtracted
  /// (ProfilerOptions::subtract_marker_overhead false, or not measurable here).
  uint64_t marker_overhead_ns = 0;
  /// What two markers with nothing enqueued between them read (an empty region's two markers),
  /// measured with marker_overhead_ns. Such a transition holds no work and adds 0 to a duration;
  /// this figure is taken off only where an unmeasurable marker joins it to an ordinary one
  /// (Note [Marker transitions] in timing/model/report.cpp).
  uint64_t marker_back_to_back_ns = 0;
  /// The kernels the markers launch, from the backend; empty when they are not kernels (the
  /// host backend's steady_clock markers, cuda's external_events).
  MarkerKernels marker_kernels{};
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
  /// `back_to_back_markers`: the markers recorded with nothing enqueued on their stream since
  /// its previous marker (their transition costs ReportSource::marker_back_to_back_ns).
  ReportLayout(ReportSource source, std::vector<RegionInfo> regions,
               std::vector<uint32_t> back_to_back_markers = {});

  const ReportSource& source() const { return source_; }
  const std::vector<RegionInfo>& regions() const { return regions_; }
  /// How many marker times a report of this layout holds.
  uint32_t marker_count() const { return marker_count_; }
  /// How many marker transitions region `index` spans: the markers of its stream from its begin
  /// marker to its end marker, in record order, the begin marker not counted (1 for a region
  /// around work with no region inside it, 0 for a region whose begin and end share a marker).
  /// Each costs ReportSource::marker_overhead_ns, or marker_back_to_back_ns when back to back
  /// (Note [Marker transitions] in timing/model/report.cpp).
  uint32_t marker_transitions(size_t index) const { return last_[index] - first_[index]; }
  /// How many of those transitions are back to back (between two markers with nothing enqueued
  /// between them).
  uint32_t back_to_back_transitions(size_t index) const;
  const std::vector<uint32_t>& back_to_back_markers() const { return back_to_back_markers_; }
  /// The time of the work region `index` encloses, from a report's marker times (`times`:
  /// marker_count() of them): for each marker transition it spans, what the transition read
  /// beyond its cost, never below 0, summed (Note [Marker transitions] in timing/model/report.cpp).
  /// Its begin and end times must be measured.
  uint64_t work_ns(const uint64_t* times, size_t index) const;
  /// Each stream's markers in record order, one stream after another, and for each position
  /// whether the transition into it is back to back (1) or not (0): what work_ns() walks.
  const std::vector<uint32_t>& ordered_markers() const { return ordered_; }
  const std::vector<uint8_t>& back_to_back_at() const { return back_to_back_at_; }
  /// Region `index`'s begin and end positions in ordered_markers().
  uint32_t first_position(size_t index) const { return first_[index]; }
  uint32_t last_position(size_t index) const { return last_[index]; }

 private:
  friend class ReplayReport;
  void count_transitions();
  ReportSource source_;
  std::vector<RegionInfo> regions_;
  uint32_t marker_count_ = 0;
  // The direct children of region i, in layout order: children_[child_begin_[i] ..
  // child_begin_[i + 1]). Built once with the layout, so a report's self times allocate nothing
  // (Note [Self time] in timing/model/report.cpp).
  std::vector<uint32_t> child_begin_;
  std::vector<uint32_t> children_;
  std::vector<uint32_t> back_to_back_markers_;  // sorted
  std::vector<uint32_t> ordered_;               // ordered_markers()
  std::vector<uint8_t> back_to_back_at_;        // back_to_back_at()
  std::vector<uint32_t> first_, last_;          // by region: first_position(), last_position()
  // Whether region i's children all run on its stream one after the other (their markers do
  // not interleave): its self time is then its duration minus theirs (Note [Self time]).
  std::vector<bool> sequential_children_;
};

/// One region of one replay, made on demand from its report: it refers to the layout's
/// RegionInfo (valid while the report it came from, or a copy of that report, lives). Read
/// through its accessors, all methods: `t.path()`, `t.depth()`, `t.start_ns()`, `t.duration_ns()`.
class RegionTiming {
 public:
  RegionTiming() = default;
  /// `start_ns`/`end_ns` on the backend's marker clock; either equal to kUnmeasurable
  /// (accgraph/types.hpp) makes the region unmeasurable.
  /// A timing made this way knows no children: self_ns() is duration_ns() (a report's
  /// regions() and region() know them), and subtracts no marker overhead.
  ACCGRAPH_API RegionTiming(const RegionInfo& info, uint64_t start_ns, uint64_t end_ns);

  const RegionInfo& info() const { return *info_; }
  const std::string& name() const { return info_->name; }
  const std::string& path() const { return info_->path; }
  int depth() const { return info_->depth; }
  int parent() const { return info_->parent; }
  uint64_t stream_id() const { return info_->stream_id; }
  const std::string& lane() const { return info_->lane; }
  const Metadata& metadata() const { return info_->metadata; }

  /// False when the backend could not place one of the region's markers in time (for example
  /// its timestamp counter may have wrapped more than once: kUnmeasurable).
  /// start_ns(), end_ns() and duration_ns() are then 0 and the statistics leave the region out.
  bool measurable() const { return measurable_; }
  /// The region's edges on the backend's marker clock, with the report's marker overhead
  /// (ReportSource::marker_overhead_ns) taken off: half after the start marker's time, half
  /// before the end marker's, when the markers are further apart than that overhead. A region
  /// no longer than the overhead keeps the edges its markers read (never negative), clamped
  /// into those of the nearest region around it on its stream that moved in, so a child never
  /// starts before or ends after its parent (Note [Edges inside the parent] in
  /// timing/model/report.cpp).
  uint64_t start_ns() const { return start_ns_; }
  uint64_t end_ns() const { return end_ns_; }
  /// The time of the work the region encloses: for every marker transition it spans
  /// (ReportLayout::marker_transitions), what that transition read beyond its cost, never below
  /// 0 (ReportLayout::work_ns; Note [Marker transitions] in timing/model/report.cpp). For a region
  /// with no region inside it on its stream, longer than the overhead, it is end_ns() -
  /// start_ns(); a region around others is shorter than its edges by the transitions between
  /// them, and it is exactly the sum of its children's durations plus its self time.
  uint64_t duration_ns() const { return duration_ns_; }
  /// end_ns() - start_ns() (0 when end < start): where the region lies on the clock, which for
  /// a region around others includes the transitions between them that duration_ns() leaves out.
  uint64_t span_ns() const { return end_ns_ >= start_ns_ ? end_ns_ - start_ns_ : 0; }
  /// What the region's two markers read (ReplayReport::marker_times), nothing subtracted.
  uint64_t raw_start_ns() const { return raw_start_ns_; }
  uint64_t raw_end_ns() const { return raw_end_ns_; }
  uint64_t raw_duration_ns() const {
    return ::accgraph::detail::span_duration(raw_start_ns_, raw_end_ns_, 0);
  }

  /// The region's own time: duration_ns() minus the time its direct children in the same
  /// report (RegionInfo::parent) cover, e.g. the glue work between two child regions. Children
  /// that run one after the other inside the region: exactly duration_ns() minus the sum of
  /// their durations. Children on other streams or lanes may overlap each other or the
  /// region's edges: the union of their intervals, clipped to the region's, is subtracted, so
  /// self_ns() is never negative and never more than duration_ns() (Note [Self time] in
  /// timing/model/report.cpp). 0 when !self_measurable().
  uint64_t self_ns() const { return self_ns_; }
  /// True when the region and every one of its direct children are measurable().
  bool self_measurable() const { return self_measurable_; }

 private:
  friend class ReplayReport;
  // What the constructor does; inline, so that a report's timing_of() pays no call into the
  // exported (interposable) constructor for every region it makes.
  // `work_ns`: the layout's work_ns() for it, or what the markers read (kUnmeasurable: that).
  void assign(const RegionInfo& info, uint64_t start_ns, uint64_t end_ns, uint64_t overhead_ns,
              uint64_t work_ns) {
    info_ = &info;
    measurable_ = start_ns != kUnmeasurable && end_ns != kUnmeasurable;
    self_measurable_ = measurable_;
    if (!measurable_) return;
    raw_start_ns_ = start_ns_ = start_ns;
    raw_end_ns_ = end_ns_ = end_ns;
    take_overhead(start_ns_, end_ns_, overhead_ns);
    duration_ns_ =
        work_ns == kUnmeasurable ? ::accgraph::detail::span_duration(start_ns, end_ns, 0) : work_ns;
    self_ns_ = duration_ns_;
  }
  // The edges of a region whose markers read [start, end] (Note [Marker overhead] in
  // timing/engine/marker_overhead.cpp): half the overhead off each, when the region is longer.
  static void take_overhead(uint64_t& start, uint64_t& end, uint64_t overhead_ns) {
    if (end > start && end - start > overhead_ns) {
      start += overhead_ns / 2;
      end -= overhead_ns - overhead_ns / 2;
    }
  }
  const RegionInfo* info_ = nullptr;
  uint64_t start_ns_ = 0;
  uint64_t end_ns_ = 0;
  uint64_t raw_start_ns_ = 0;
  uint64_t raw_end_ns_ = 0;
  uint64_t duration_ns_ = 0;
  uint64_t self_ns_ = 0;
  bool measurable_ = false;
  bool self_measurable_ = false;
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
///     std::cout << r.path() << ": " << r.duration_ns() << " ns\n";
class ACCGRAPH_API ReplayReport {
 public:
  /// An empty report (no regions).
  ReplayReport();
  /// InvalidArgument when `layout` is null or `marker_times` does not hold exactly
  /// layout->marker_count() values. A time equal to kUnmeasurable (accgraph/types.hpp) makes
  /// the regions that use it unmeasurable.
  ReplayReport(std::shared_ptr<const ReportLayout> layout, uint64_t graph_id, uint64_t replay_index,
               std::vector<uint64_t> marker_times);
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
  uint64_t marker_overhead_ns() const { return layout_->source().marker_overhead_ns; }
  const MarkerKernels& marker_kernels() const { return layout_->source().marker_kernels; }
  const ReportLayout& layout() const { return *layout_; }
  const std::shared_ptr<const ReportLayout>& shared_layout() const { return layout_; }
  const std::vector<uint64_t>& marker_times() const { return times_; }

  /// Regions in the order they were opened.
  size_t size() const { return layout_->regions().size(); }
  bool empty() const { return size() == 0; }
  /// The timing of region `index` (< size(); InvalidArgument otherwise).
  RegionTiming region(size_t index) const;

  /// A range over the regions, each made on demand: `for (auto& r : report.regions())`.
  class Regions;
  Regions regions() const;

 private:
  RegionTiming timing_of(size_t index) const;
  // A region that kept its raw edges, clamped into its parent's (Note [Edges inside the parent]
  // in timing/model/report.cpp).
  void keep_inside_parent(RegionTiming& timing, const RegionInfo& info) const;
  void set_self_time(RegionTiming& timing, size_t index) const;
  std::shared_ptr<const ReportLayout> layout_;
  uint64_t graph_id_ = 0;
  uint64_t replay_index_ = 0;
  std::vector<uint64_t> times_;
};

class ReplayReport::Regions {
 public:
  /// Yields a reference to the timing it made for the current region, valid until the
  /// iterator moves on: `for (auto& t : report.regions())` reads each one in place; copy a
  /// RegionTiming to keep it.
  class iterator {
   public:
    using value_type = RegionTiming;
    using difference_type = std::ptrdiff_t;
    using reference = const RegionTiming&;
    using pointer = const RegionTiming*;
    using iterator_category = std::input_iterator_tag;
    iterator(const ReplayReport* report, size_t index) : report_(report), index_(index) {}
    const RegionTiming& operator*() const {
      current_ = report_->timing_of(index_);
      return current_;
    }
    const RegionTiming* operator->() const { return &**this; }
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
    mutable RegionTiming current_;
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

}  // namespace accgraph::timing

// Until 0.2 this header also held the statistics and the exporters. It holds the model only:
// include accgraph/stats.hpp or accgraph/exporters.hpp (or accgraph/accgraph.hpp) for them. Code
// that included it for them compiles unchanged until 0.3 where ACCGRAPH_DEPRECATED_HEAVY_REPORT
// is defined (opt-in, as fmt's FMT_DEPRECATED_HEAVY_CORE: by default the model's header opens
// neither, so that the exporters, which include it, are not in a loop with it).
// See Note [Forwarding headers] in accgraph/backend.hpp.
#if defined(ACCGRAPH_DEPRECATED_HEAVY_REPORT)
#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "ACCGRAPH_DEPRECATED_HEAVY_REPORT is deprecated and goes in accgraph 0.3: include accgraph/stats.hpp and accgraph/exporters.hpp")
#endif
#include "accgraph/exporters.hpp"
#include "accgraph/stats.hpp"
#endif
