// Reports from Python: RegionTiming, ReplayReport and RegionStats, read-only views with to_dict().
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "timing.hpp"

namespace accgraph::python {

namespace {

using timing::RegionStats;
using timing::RegionTiming;
using timing::ReplayReport;

// A RegionTiming refers to its report's layout: the Python object keeps the layout alive.
struct PyRegionTiming {
  std::shared_ptr<const timing::ReportLayout> layout;
  RegionTiming timing;
};

nb::dict timing_dict(const RegionTiming& r) {
  return dict_of(field("name", r.name()), field("path", r.path()), field("depth", r.depth()),
                 field("parent", r.parent()), field("stream_id", r.stream_id()),
                 field("lane", r.lane()), field("start_ns", r.start_ns()),
                 field("end_ns", r.end_ns()), field("duration_ns", r.duration_ns()),
                 field("raw_start_ns", r.raw_start_ns()), field("raw_end_ns", r.raw_end_ns()),
                 field("raw_duration_ns", r.raw_duration_ns()), field("measurable", r.measurable()),
                 field("self_ns", r.self_ns()), field("self_measurable", r.self_measurable()),
                 field("metadata", metadata_dict(r.metadata())));
}

PyRegionTiming region_at(const ReplayReport& report, size_t i) {
  return PyRegionTiming{report.shared_layout(), report.region(i)};
}

nb::list region_list(const ReplayReport& report) {
  return list_of(report.regions(), [&](const RegionTiming& t) {
    return nb::cast(PyRegionTiming{report.shared_layout(), t});
  });
}

nb::dict report_dict(const ReplayReport& r) {
  return dict_of(field("graph_id", r.graph_id()), field("replay_index", r.replay_index()),
                 field("backend", r.backend()), field("device", r.device()),
                 field("device_name", r.device_name()),
                 field("marker_strategy", r.marker_strategy()),
                 field("resolution_ns", r.resolution_ns()),
                 field("marker_overhead_ns", r.marker_overhead_ns()),
                 field("regions", list_of(r.regions(), timing_dict)));
}

nb::dict stats_dict(const RegionStats& s) {
  return dict_of(field("path", s.path), field("depth", s.depth), field("count", s.count),
                 field("unmeasurable", s.unmeasurable), field("min_ns", s.min_ns),
                 field("mean_ns", s.mean_ns), field("p50_ns", s.p50_ns), field("p95_ns", s.p95_ns),
                 field("max_ns", s.max_ns), field("self_count", s.self_count),
                 field("self_min_ns", s.self_min_ns), field("self_mean_ns", s.self_mean_ns),
                 field("self_p50_ns", s.self_p50_ns), field("self_p95_ns", s.self_p95_ns),
                 field("self_max_ns", s.self_max_ns), field("graph_id", s.graph_id),
                 field("first_call", s.first_call), field("p05_ns", s.p05_ns),
                 field("replays_run", s.replays_run), field("replays_timed", s.replays_timed));
}

std::string repr_timing(const RegionTiming& r) {
  return "RegionTiming(path='" + r.path() + "', duration_ns=" + std::to_string(r.duration_ns()) +
         (r.measurable() ? "" : ", measurable=False") + ")";
}

// Where a region lies: its name, place in the tree, stream, lane and metadata.
void def_region_timing_place(nb::class_<PyRegionTiming>& cls) {
  cls.def_prop_ro(
         "name", [](const PyRegionTiming& r) { return r.timing.name(); }, "The region's name.")
      .def_prop_ro(
          "path", [](const PyRegionTiming& r) { return r.timing.path(); },
          "The names of the enclosing regions and this one, joined by '/'.")
      .def_prop_ro(
          "depth", [](const PyRegionTiming& r) { return r.timing.depth(); },
          "0 for top-level regions.")
      .def_prop_ro(
          "parent", [](const PyRegionTiming& r) { return r.timing.parent(); },
          "Index of the enclosing region in the report, or -1.")
      .def_prop_ro(
          "stream_id", [](const PyRegionTiming& r) { return r.timing.stream_id(); },
          "Stream.id of the stream the region was recorded on.")
      .def_prop_ro(
          "lane", [](const PyRegionTiming& r) { return r.timing.lane(); },
          "The named lane within the stream's track ('' for the stream itself).")
      .def_prop_ro(
          "metadata", [](const PyRegionTiming& r) { return metadata_dict(r.timing.metadata()); },
          "The region's key/value annotations, as a new dict.");
}

// Its times on the marker clock and the markers they come from.
void def_region_timing_times(nb::class_<PyRegionTiming>& cls) {
  cls.def_prop_ro(
         "start_ns", [](const PyRegionTiming& r) { return r.timing.start_ns(); },
         "Start on the marker clock, half the report's marker_overhead_ns after the start "
         "marker's time when the region is longer than that overhead (0 when not measurable).")
      .def_prop_ro(
          "end_ns", [](const PyRegionTiming& r) { return r.timing.end_ns(); },
          "End on the marker clock, half the marker overhead before the end marker's time "
          "(0 when not measurable).")
      .def_prop_ro(
          "duration_ns", [](const PyRegionTiming& r) { return r.timing.duration_ns(); },
          "The time of the work the region encloses: the markers' distance minus the report's "
          "marker_overhead_ns for every marker transition the region spans (one for a region "
          "with no region inside it, where it is end_ns - start_ns; a parent also loses the "
          "transitions between its children, so it is their sum plus its self time); never all "
          "of the distance (0 when not measurable).")
      .def_prop_ro(
          "span_ns", [](const PyRegionTiming& r) { return r.timing.span_ns(); },
          "end_ns - start_ns: where the region lies on the clock; for a region around others it "
          "includes the marker transitions between them, which duration_ns leaves out.")
      .def_prop_ro(
          "raw_start_ns", [](const PyRegionTiming& r) { return r.timing.raw_start_ns(); },
          "The start marker's time, nothing subtracted.")
      .def_prop_ro(
          "raw_end_ns", [](const PyRegionTiming& r) { return r.timing.raw_end_ns(); },
          "The end marker's time, nothing subtracted.")
      .def_prop_ro(
          "raw_duration_ns", [](const PyRegionTiming& r) { return r.timing.raw_duration_ns(); },
          "raw_end_ns - raw_start_ns: what the markers read.")
      .def_prop_ro(
          "begin_marker", [](const PyRegionTiming& r) { return r.timing.info().begin_marker; },
          "Index of the marker whose time is raw_start_ns (regions whose edges coincide share "
          "markers; accgraph.torch.annotate_trace matches markers to the marker kernels of a "
          "trace).")
      .def_prop_ro(
          "end_marker", [](const PyRegionTiming& r) { return r.timing.info().end_marker; },
          "Index of the marker whose time is raw_end_ns.");
}

// Whether it could be measured, its self time, and the dict and repr.
void def_region_timing_self(nb::class_<PyRegionTiming>& cls) {
  cls.def_prop_ro(
         "measurable", [](const PyRegionTiming& r) { return r.timing.measurable(); },
         "False when the backend could not place a marker in time; the statistics "
         "leave such regions out.")
      .def_prop_ro(
          "self_ns", [](const PyRegionTiming& r) { return r.timing.self_ns(); },
          "The region's own time: duration_ns minus the time its direct children in the same "
          "report cover (their union, clipped to the region: never negative); 0 when not "
          "self_measurable.")
      .def_prop_ro(
          "self_measurable", [](const PyRegionTiming& r) { return r.timing.self_measurable(); },
          "True when the region and all its direct children are measurable.")
      .def(
          "to_dict", [](const PyRegionTiming& r) { return timing_dict(r.timing); },
          "The attributes as a dict.")
      .def("__repr__", [](const PyRegionTiming& r) { return repr_timing(r.timing); });
}

void bind_region_timing(nb::module_& m) {
  nb::class_<PyRegionTiming> cls(m, "RegionTiming",
                                 "One region of one report (read-only). Times are on the backend's "
                                 "marker clock, in nanoseconds.");
  def_region_timing_place(cls);
  def_region_timing_times(cls);
  def_region_timing_self(cls);
}

void bind_marker_kernels(nb::module_& m) {
  using timing::MarkerKernels;
  nb::class_<MarkerKernels>(m, "MarkerKernels",
                            "The kernels a marker set launches, by the names a kernel trace "
                            "(CUPTI, torch.profiler) shows for them (accgraph::timing::"
                            "MarkerKernels): each name is part of the trace's name of its kernel. "
                            "From the backend (ReplayReport.marker_kernels); empty where markers "
                            "are not kernels. What annotate_trace aligns regions on.")
      .def(
          "__init__",
          [](MarkerKernels* self, std::vector<std::string> record_at_start,
             std::vector<std::string> record_at_end, std::vector<std::string> end) {
            new (self)
                MarkerKernels{std::move(record_at_start), std::move(record_at_end), std::move(end)};
          },
          nb::kw_only(), nb::arg("record_at_start") = std::vector<std::string>(),
          nb::arg("record_at_end") = std::vector<std::string>(),
          nb::arg("end") = std::vector<std::string>(),
          "The names of kernels that write a marker's time as they start, as they end (after "
          "waiting for the kernel before them), and that end a marker sequence (one per "
          "replay).")
      .def_ro("record_at_start", &MarkerKernels::record_at_start,
              "Kernels that write the marker's time as they start.")
      .def_ro("record_at_end", &MarkerKernels::record_at_end,
              "Kernels that write it as they end (they wait for the kernel before them).")
      .def_ro("end", &MarkerKernels::end, "Kernels that end a marker sequence (one per replay).")
      .def(
          "__bool__", [](const MarkerKernels& k) { return !k.empty(); },
          "False when there are none (markers that are not kernels).")
      .def("__repr__", [](const MarkerKernels& k) {
        auto list = [](const std::vector<std::string>& names) {
          std::string out = "[";
          for (const std::string& name : names) out += (out.size() > 1 ? ", '" : "'") + name + "'";
          return out + "]";
        };
        return "MarkerKernels(record_at_start=" + list(k.record_at_start) +
               ", record_at_end=" + list(k.record_at_end) + ", end=" + list(k.end) + ")";
      });
}

void bind_replay_report(nb::module_& m) {
  nb::class_<ReplayReport>(m, "ReplayReport",
                           "The timing of one replay (or one eager region tree), read-only. A "
                           "sequence of RegionTiming in the order the regions were opened.")
      .def_prop_ro("graph_id", &ReplayReport::graph_id, "Graph.id; 0 for eager regions.")
      .def_prop_ro("replay_index", &ReplayReport::replay_index,
                   "0-based replay number since the capture (eager: a sequence number).")
      .def_prop_ro(
          "backend", [](const ReplayReport& r) { return r.backend(); }, "The backend's name.")
      .def_prop_ro("device", &ReplayReport::device, "The device index.")
      .def_prop_ro(
          "device_name", [](const ReplayReport& r) { return r.device_name(); },
          "The device's name.")
      .def_prop_ro(
          "marker_strategy", [](const ReplayReport& r) { return r.marker_strategy(); },
          "The timestamp marker kind used.")
      .def_prop_ro(
          "marker_kernels", [](const ReplayReport& r) { return r.marker_kernels(); },
          "The kernels the markers launch, as a kernel trace names them (MarkerKernels, from "
          "the backend; empty where the markers are not kernels).")
      .def_prop_ro("resolution_ns", &ReplayReport::resolution_ns,
                   "The smallest step of the marker clock.")
      .def_prop_ro("marker_overhead_ns", &ReplayReport::marker_overhead_ns,
                   "What one marker transition costs on this device, taken off a region once "
                   "for every transition it spans (0: nothing taken off). "
                   "Profiler(subtract_marker_overhead=False) keeps it 0.")
      .def_prop_ro(
          "marker_back_to_back_ns",
          [](const ReplayReport& r) { return r.source().marker_back_to_back_ns; },
          "What a transition between two markers with nothing between them costs (an empty "
          "region's), taken off instead of marker_overhead_ns for such a transition.")
      .def_prop_ro("regions", &region_list, "Every region, as a new list of RegionTiming.")
      .def("__len__", &ReplayReport::size, "The number of regions.")
      .def(
          "__getitem__",
          [](const ReplayReport& r, IntArg index) {
            const int64_t n = static_cast<int64_t>(r.size());
            // Out of int64's range is out of the report's too (as a list says it).
            nb::int_ i_big = detail::index_of(index, "ReplayReport index");
            if (!detail::int_within(i_big, nb::int_(-n), nb::int_(n - 1)))
              throw nb::index_error("ReplayReport index out of range");
            int64_t i = nb::cast<int64_t>(i_big);
            if (i < 0) i += n;
            return region_at(r, static_cast<size_t>(i));
          },
          nb::arg("index"), "The region at `index` (negative counts from the end).")
      .def(
          "__iter__", [](const ReplayReport& r) { return region_list(r).attr("__iter__")(); },
          nb::sig("def __iter__(self) -> collections.abc.Iterator[RegionTiming]"),
          "Iterates over the regions.")
      .def("to_dict", &report_dict, "The attributes, regions included, as a dict.")
      .def("__repr__", [](const ReplayReport& r) {
        return "<accgraph.ReplayReport graph " + std::to_string(r.graph_id()) + " replay " +
               std::to_string(r.replay_index()) + " backend='" + r.backend() + "' " +
               std::to_string(r.size()) + " regions>";
      });
}

void bind_region_stats(nb::module_& m) {
  nb::class_<RegionStats>(m, "RegionStats",
                          "Statistics of one region path over every report seen (read-only). "
                          "count, unmeasurable, min_ns and max_ns are exact; see StatsMode for "
                          "the others.")
      .def_ro("path", &RegionStats::path, "The region path.")
      .def_ro("depth", &RegionStats::depth, "The region's depth.")
      .def_ro("graph_id", &RegionStats::graph_id,
              "The graph whose replays these are (ReplayReport.graph_id); 0: eager calls.")
      .def_ro("first_call", &RegionStats::first_call,
              "Eager only, with Profiler(first_eager_call='apart'): the first eager call of "
              "the path, kept out of the row of the calls after it.")
      .def_ro("replays_run", &RegionStats::replays_run,
              "Graph rows from Profiler.stats(): the graph's replays run, timed or not (0 for "
              "eager rows).")
      .def_ro("replays_timed", &RegionStats::replays_timed,
              "Of them, timed (Profiler(sample_every=N): about 1 in N; count is over these).")
      .def_ro("p05_ns", &RegionStats::p05_ns, "5th percentile duration.")
      .def_ro("count", &RegionStats::count, "Measured samples.")
      .def_ro("unmeasurable", &RegionStats::unmeasurable,
              "Reports in which the region was not measurable.")
      .def_ro("min_ns", &RegionStats::min_ns, "Shortest duration.")
      .def_ro("mean_ns", &RegionStats::mean_ns, "Mean duration.")
      .def_ro("p50_ns", &RegionStats::p50_ns, "Median duration.")
      .def_ro("p95_ns", &RegionStats::p95_ns, "95th percentile duration.")
      .def_ro("max_ns", &RegionStats::max_ns, "Longest duration.")
      .def_ro("self_count", &RegionStats::self_count,
              "Measured self times (reports where RegionTiming.self_measurable).")
      .def_ro("self_min_ns", &RegionStats::self_min_ns, "Shortest self time.")
      .def_ro("self_mean_ns", &RegionStats::self_mean_ns, "Mean self time.")
      .def_ro("self_p50_ns", &RegionStats::self_p50_ns, "Median self time.")
      .def_ro("self_p95_ns", &RegionStats::self_p95_ns, "95th percentile self time.")
      .def_ro("self_max_ns", &RegionStats::self_max_ns, "Longest self time.")
      .def("to_dict", &stats_dict, "The attributes as a dict.")
      .def("__repr__", [](const RegionStats& s) {
        const std::string context =
            s.graph_id != 0 ? ", graph_id=" + std::to_string(s.graph_id)
                            : (s.first_call ? std::string(", first_call=True") : std::string());
        return "RegionStats(path='" + s.path + "'" + context +
               ", count=" + std::to_string(s.count) + ", mean_ns=" + std::to_string(s.mean_ns) +
               ")";
      });
}

}  // namespace

nb::dict metadata_dict(const timing::Metadata& metadata) {
  nb::dict out;
  for (const auto& [key, value] : metadata) out[nb::str(key.c_str())] = value;
  return out;
}

void bind_reports(nb::module_& m) {
  bind_marker_kernels(m);
  bind_region_timing(m);
  bind_replay_report(m);
  bind_region_stats(m);
  m.def(
      "reports_csv_columns", [] { return timing::reports_csv_columns(); },
      "The header fields of the reports CSV (Profiler.write_csv), in column order "
      "(accgraph::timing::reports_csv_columns): find its columns by these names.");
  m.def(
      "stats_csv_columns", [] { return timing::stats_csv_columns(); },
      "The header fields of the statistics CSV (Profiler.write_stats_csv), in column order "
      "(accgraph::timing::stats_csv_columns).");
  m.def(
      "stats_schema_version", [] { return timing::stats_schema_version(); },
      "The version of the statistics' schema this library writes: the stats CSV's "
      "schema_version column and the stats JSON's \"schema_version\" (a reader refuses a "
      "larger one; accgraph::timing::stats_schema_version).");
  m.def(
      "_table_text", [](const std::string& text) { return timing::table_text(text); },
      nb::arg("text"),
      "`text` as the statistics table shows a name: control characters as \\xNN (C1 as "
      "\\u00NN), so that no terminal escape gets through (accgraph::timing::table_text). "
      "Internal: accgraph.torch's tables.");
}

}  // namespace accgraph::python
