// The Profiler from Python: its options, attaching graphs, regions, sinks (shown to the garbage
// collector), reports, statistics and the exporters.
#include <chrono>
#include <exception>
#include <sstream>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "timing.hpp"

namespace accgraph::python {

namespace {

using timing::Delivery;
using timing::Metadata;
using timing::Profiler;
using timing::ProfilerOptions;
using timing::ReplayReport;
using timing::StatsMode;

// Note [Sink cycles]: a sink that refers to its profiler (a closure over it, or a function whose
// module globals hold it) makes a reference cycle through C++, invisible to the garbage
// collector: the profiler would never be flushed nor freed (also not at exit, where the
// module's globals then outlive the module). So the profiler shows each sink it holds to the
// collector (tp_traverse: exactly the one reference its PythonCallable owns); an unreachable
// profiler is flushed first (tp_finalize, while the cycle is intact), then cleared (tp_clear:
// the C++ profiler is destroyed, which drops the sinks).
int profiler_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  for (PyObject* sink : nb::inst_ptr<PyProfiler>(self)->sinks) Py_VISIT(sink);
  return 0;
}

// Called on every object of an unreachable cycle before any is cleared (PEP 442): the sinks
// still see their closures intact.
void profiler_finalize(PyObject* self) {
  if (!nb::inst_ready(self)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  nb::inst_ptr<PyProfiler>(self)->flush_quietly();
  PyErr_Restore(type, value, traceback);
}

int profiler_clear(PyObject* self) {
  nb::inst_ptr<PyProfiler>(self)->destroy();
  return 0;
}

PyType_Slot profiler_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(profiler_traverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(profiler_clear)},
                                {Py_tp_finalize, reinterpret_cast<void*>(profiler_finalize)},
                                {0, nullptr}};

// A Profiler method writing what `write(out, profiler)` produces to the file `path` (OSError
// naming it when it cannot be written; the exporters' own errors otherwise).
template <class Write>
auto exporter(Write write) {
  return [write](PyProfiler& self, nb::handle path) {
    Profiler& profiler = self.get();
    write_output(fs_path(path), "the exported data",
                 [&](std::ostream& out) { write(out, profiler); });
  };
}

}  // namespace

Profiler& PyProfiler::get() {
  if (!profiler)
    throw Error(ErrorCode::InvalidState,
                "this Profiler was cleared by the garbage collector (it was part of an "
                "unreachable reference cycle): create a new Profiler");
  return *profiler;
}

void PyProfiler::flush_quietly() noexcept {
  if (!profiler) return;
  // Waits for replays and calls sinks, which take the GIL.
  GilRelease release;
  try {
    profiler->flush();
  } catch (const std::exception& e) {
    log(LogLevel::Warning, std::string("accgraph.Profiler: flushing it failed: ") + e.what());
  }
}

void PyProfiler::destroy() noexcept {
  if (!profiler) return;
  flush_quietly();  // the sinks may still use this profiler: flush before it goes
  {
    // ~Profiler flushes again and stops its collector thread, which may be calling a sink.
    GilRelease release;
    profiler.reset();
  }
  sinks.clear();  // their references went with the profiler
}

Metadata metadata_of(const nb::kwargs& kwargs) {
  Metadata metadata;
  for (auto [key, value] : kwargs)
    metadata.emplace_back(nb::cast<std::string>(key), nb::cast<std::string>(nb::str(value)));
  return metadata;
}

namespace {

using ProfilerClass = nb::class_<PyProfiler>;

// Profiler.__init__: the options from the keyword arguments, checked where C++ does not.
void init_profiler(PyProfiler* self, EnumOrName<Delivery> delivery, IntArg ring_depth,
                   std::optional<std::string> marker_strategy, bool background_collector,
                   std::optional<IntArg> keep_reports, EnumOrName<StatsMode> stats_mode,
                   std::optional<double> collector_period, bool collect_stats, IntArg marker_memory,
                   bool subtract_marker_overhead, bool stats_thread,
                   const std::string& first_eager_call, IntArg sample_every, double overhead,
                   IntArg sample_seed) {
  ProfilerOptions options;
  options.delivery = parse_delivery(delivery);
  options.ring_depth = int_arg<size_t>(ring_depth, "Profiler: ring_depth");
  options.marker_strategy = marker_strategy.value_or("");
  options.background_collector = background_collector;
  const std::optional<int64_t> keep = int_arg<int64_t>(keep_reports, "Profiler: keep_reports");
  options.keep_reports = keep ? timing::KeepReports(*keep) : timing::KeepReports::all();
  options.stats_mode = parse_stats_mode(stats_mode);
  options.collect_stats = collect_stats;
  options.marker_memory = int_arg<size_t>(marker_memory, "Profiler: marker_memory");
  options.subtract_marker_overhead = subtract_marker_overhead;
  options.stats_thread = stats_thread;
  // Checked by C++ (InvalidArgument: 0, a budget outside [0, 1), both given).
  options.sample_every = int_arg<uint64_t>(sample_every, "Profiler: sample_every");
  options.overhead = overhead;
  options.sample_seed = int_arg<uint64_t>(sample_seed, "Profiler: sample_seed");
  if (first_eager_call == "apart")
    options.first_eager_call = timing::FirstEagerCall::Apart;
  else if (first_eager_call != "pooled")
    throw Error(
        ErrorCode::InvalidArgument,
        "Profiler: first_eager_call must be 'pooled' or 'apart' (got '" + first_eager_call + "')");
  if (collector_period) {
    if (!(*collector_period > 0 && *collector_period <= 3600))
      throw Error(ErrorCode::InvalidArgument,
                  "Profiler: collector_period must be from 0 to 3600 seconds (got " +
                      std::to_string(*collector_period) + ")");
    options.collector_period =
        std::chrono::microseconds(static_cast<int64_t>(*collector_period * 1e6));
  }
  auto profiler = [&] {
    GilRelease release;
    return std::make_unique<Profiler>(options);
  }();
  new (self) PyProfiler(std::move(profiler));
}

// Profiler(...): its keyword arguments and their documentation.
void def_profiler_init(ProfilerClass& cls) {
  cls.def(
      "__init__", &init_profiler, nb::arg("delivery") = Delivery::Lazy, nb::arg("ring_depth") = 0,
      nb::arg("marker_strategy") = nb::none(), nb::arg("background_collector") = false,
      nb::arg("keep_reports").none() = 1024, nb::arg("stats_mode") = StatsMode::Sketch,
      nb::arg("collector_period") = nb::none(), nb::arg("collect_stats") = true,
      nb::arg("marker_memory") = ProfilerOptions{}.marker_memory,
      nb::arg("subtract_marker_overhead") = true, nb::arg("stats_thread") = true,
      nb::arg("first_eager_call") = "pooled", nb::arg("sample_every") = 1,
      nb::arg("overhead") = 0.0, nb::arg("sample_seed") = 0,
      "`delivery`: 'lazy' or 'immediate'. `ring_depth`: replays in flight per graph (0: "
      "as many as `marker_memory` holds). `marker_memory`: bytes of marker storage per "
      "graph (default 1 MiB; 0: the backend's default depth); a replay waits for the "
      "device only when its graph's ring is full (ring_waits counts it). `marker_strategy`: one "
      "of Capabilities.marker_strategies "
      "(None: the backend's default). `background_collector`: a thread delivers completed "
      "replays every `collector_period` seconds. `keep_reports`: how many of the last "
      "reports reports() keeps (0: none; None: every one, memory grows without bound). "
      "`stats_mode`: 'sketch' or 'exact'. `collect_stats=False` leaves stats() empty and "
      "saves its cost per report. `subtract_marker_overhead`: take what one marker costs "
      "(measured once per device) off every region's duration; the raw_* attributes keep "
      "what the markers read. `stats_thread`: fold the statistics on a thread of their own, "
      "so that flush() and a full ring only copy each report's times (same results); "
      "False on a single-core host. stats() keeps each graph's replays and the eager calls "
      "apart (RegionStats.graph_id); `first_eager_call='apart'` also gives the first eager "
      "call of each path a row of its own (RegionStats.first_call: warm-up, compilation). "
      "Sampled timing (Note [Sampled replays]): `sample_every=N` times 1 replay in N of each "
      "graph (one in each window of N, at an offset drawn from `sample_seed`, the graph and "
      "the window: is_sampled_replay), the others launch without markers; `overhead` (e.g. "
      "0.005) instead picks each graph's N from its first 8 reports so that its markers cost "
      "at most that share of its device time. A graph whose backend cannot launch it without "
      "markers (Level Zero, Vulkan, foreign graphs such as PyTorch's) has every replay timed "
      "(replay_counts(): sampled=False). Default: every replay timed.");
}

// Which graphs it times: attach, attach_all, detach.
void def_profiler_attach(ProfilerClass& cls) {
  cls.def(
         "attach",
         [](PyProfiler& self, nb::handle graph) {
           std::atomic<bool>* busy = nullptr;
           if (nb::isinstance<PyGraph>(graph))
             busy = &nb::inst_ptr<PyGraph>(graph)->busy;
           else if (nb::isinstance<PyForeignGraph>(graph))
             busy = &nb::inst_ptr<PyForeignGraph>(graph)->busy;
           else
             throw nb::type_error(
                 "Profiler.attach: graph must be an accgraph.Graph or an accgraph.ForeignGraph");
           if (busy->load())
             throw Error(ErrorCode::InvalidState,
                         "Profiler.attach: the graph is in use by another call");
           Profiler& profiler = self.get();
           GilRelease release;
           if (nb::isinstance<PyGraph>(graph))
             profiler.attach(*nb::inst_ptr<PyGraph>(graph)->graph);
           else
             profiler.attach(*nb::inst_ptr<PyForeignGraph>(graph)->graph);
         },
         nb::arg("graph"), nb::sig("def attach(self, graph: Graph | ForeignGraph) -> None"),
         "Times `graph` (a Graph or a ForeignGraph) from its next capture on "
         "(InvalidStateError while it captures).")
      .def(
          "attach_all", [](PyProfiler& self) { self.get().attach_all(); },
          nb::call_guard<GilRelease>(), "Times every graph whose capture begins from now on.")
      .def(
          "detach", [](PyProfiler& self) { self.get().detach(); }, nb::call_guard<GilRelease>(),
          "Stops timing new captures; pending reports are still delivered by flush().");
}

// The options, and which graphs it times.
void def_profiler_setup(ProfilerClass& cls) {
  def_profiler_init(cls);
  def_profiler_attach(cls);
}

// Opening and ending regions: region (context manager and decorator), begin, end.
void def_profiler_region_calls(ProfilerClass& cls) {
  cls.def(
         "region",
         [](nb::handle self, nb::handle stream, std::optional<std::string> name, std::string lane,
            nb::kwargs metadata) {
           // region(stream, name) or region(name): Note [Default stream].
           nb::object on;
           if (nb::isinstance<PyStream>(stream)) {
             if (!name)
               throw nb::type_error(
                   "Profiler.region: give the region's name: region(stream, name, **metadata)");
             on = nb::borrow(stream);
           } else if (nb::isinstance<nb::str>(stream) && !name) {
             name = nb::cast<std::string>(stream);
           } else {
             throw nb::type_error(
                 "Profiler.region: stream must be an accgraph.Stream, or give the name alone "
                 "(region(name, **metadata)) to time on the default stream");
           }
           return PyRegion(nb::borrow(self), std::move(on), std::move(*name), metadata_of(metadata),
                           std::move(lane));
         },
         nb::arg("stream"), nb::arg("name") = nb::none(), nb::kw_only(), nb::arg("lane") = "",
         nb::arg("metadata"),
         nb::sig("def region(self, stream: Stream | str, name: str | None = None, *, lane: str "
                 "= '', **metadata: object) -> Region"),
         "A region named `name` on `stream`, with `metadata` (values shown with str()) and an "
         "optional `lane`: use it as a context manager or a decorator. Inside a capture it "
         "records markers into the graph; outside, it is timed eagerly.\n\n"
         "`region(name, **metadata)` (no stream) times on the default stream, looked up at "
         "each entry: PyTorch's current stream while accgraph.torch is instrumented, or what "
         "accgraph.set_default_stream_provider installed; InvalidStateError when none is.")
      .def(
          "begin",
          [](PyProfiler& self, PyStream& stream, std::string name, std::string lane,
             nb::kwargs metadata) {
            std::shared_ptr<Stream> s_owner = stream.share();
            Stream& s = *s_owner;
            Metadata md = metadata_of(metadata);
            GilRelease release;
            self.get().begin(s, std::move(name), std::move(md), std::move(lane));
          },
          nb::arg("stream"), nb::arg("name"), nb::kw_only(), nb::arg("lane") = "",
          nb::arg("metadata"),
          nb::sig("def begin(self, stream: Stream, name: str, *, lane: str = '', **metadata: "
                  "object) -> None"),
          "Opens a region on `stream` (end it with end(stream)).")
      .def(
          "end",
          [](PyProfiler& self, PyStream& stream) {
            std::shared_ptr<Stream> s_owner = stream.share();
            Stream& s = *s_owner;
            GilRelease release;
            self.get().end(s);
          },
          nb::arg("stream"), "Ends the innermost open region on `stream`.");
}

// Where reports go: sinks, flush and the kept reports.
void def_profiler_sinks(ProfilerClass& cls) {
  cls.def(
         "add_sink",
         [](PyProfiler& self, nb::callable sink) {
           Profiler& profiler = self.get();
           auto callable = std::make_shared<PythonCallable>(sink, "a report sink");
           {
             GilRelease release;
             profiler.add_sink(
                 [callable](const ReplayReport& report) { (*callable)(ReplayReport(report)); });
           }
           self.sinks.push_back(sink.ptr());  // held by `callable`, now the profiler's
         },
         nb::arg("sink"),
         nb::sig("def add_sink(self, sink: collections.abc.Callable[[ReplayReport], object]) "
                 "-> None"),
         "Calls `sink(report)` for every report, in replay order per graph, with the GIL held "
         "on the collecting thread. The report is the sink's to keep. An exception it raises "
         "is logged (with its traceback) and delivery goes on.")
      .def(
          "flush", [](PyProfiler& self) { self.get().flush(); }, nb::call_guard<GilRelease>(),
          "Waits (without the GIL) for every pending replay and eager region and delivers its "
          "report: those pending when it is called (what a sink launches meanwhile, a replay "
          "or an eager region, is delivered by the next flush).")
      .def(
          "reports", [](PyProfiler& self) { return self.get().reports(); },
          nb::call_guard<GilRelease>(), "The kept reports (keep_reports).");
}

// Regions, sinks and flush.
void def_profiler_regions(ProfilerClass& cls) {
  def_profiler_region_calls(cls);
  def_profiler_sinks(cls);
}

// Statistics and counters: stats, deliveries, ring waits, sampling, replay counts.
void def_profiler_results_stats(ProfilerClass& cls) {
  cls.def(
         "stats", [](PyProfiler& self) { return self.get().stats(); }, nb::call_guard<GilRelease>(),
         "Per-region statistics over every report delivered so far.")
      .def_prop_ro(
          "delivered", [](PyProfiler& self) { return self.get().delivered(); },
          "Reports delivered so far (counted also when not kept).")
      .def_prop_ro(
          "ring_waits", [](PyProfiler& self) { return self.get().ring_waits(); },
          "Launches that waited because their graph's marker ring was full (every replay in it "
          "unread); 0 while the rings hold the loop (marker_memory, ring_depth).")
      .def_prop_ro(
          "sample_every", [](PyProfiler& self) { return self.get().options().sample_every; },
          "Profiler(sample_every=N): 1 times every replay.")
      .def_prop_ro(
          "overhead", [](PyProfiler& self) { return self.get().options().overhead; },
          "Profiler(overhead=...): the sampling budget (0: none; sample_every applies).")
      .def(
          "replay_counts", [](PyProfiler& self) { return self.get().replay_counts(); },
          nb::call_guard<GilRelease>(),
          "Every timed graph's replays, run and timed, one GraphReplays per graph by id (Note "
          "[Sampled replays]).")
      .def_prop_ro(
          "ring_wait_time",
          [](PyProfiler& self) {
            return static_cast<double>(self.get().ring_wait_time().count()) / 1e9;
          },
          "Seconds those launches spent waiting, in all.");
}

// The kept reports as traces and CSV.
void def_profiler_export_reports(ProfilerClass& cls) {
  cls.def("write_chrome_trace", exporter([](std::ostream& out, Profiler& profiler) {
            timing::write_chrome_trace(out, profiler.reports());
          }),
          nb::arg("path"),
          nb::sig("def write_chrome_trace(self, path: str | os.PathLike[str]) -> None"),
          "Writes the kept reports as Chrome trace JSON (Perfetto, chrome://tracing).")
      .def(
          "write_trace",
          [](PyProfiler& self, nb::handle path, IntArg rank, IntArg world_size, std::string host,
             IntArg host_clock_uncertainty_ns, std::vector<timing::DeviceClockOffset> clocks,
             std::vector<timing::HostClockOffset> host_clock_offsets) {
            std::vector<ReplayReport> reports;
            {
              GilRelease release;
              reports = self.get().reports();
            }
            write_trace_file(path, reports, rank, world_size, host, host_clock_uncertainty_ns,
                             clocks, host_clock_offsets);
          },
          nb::arg("path"), nb::kw_only(), nb::arg("rank") = -1, nb::arg("world_size") = 0,
          nb::arg("host") = "", nb::arg("host_clock_uncertainty_ns") = 0,
          nb::arg("clocks") = std::vector<timing::DeviceClockOffset>{},
          nb::arg("host_clock_offsets") = std::vector<timing::HostClockOffset>{},
          nb::sig("def write_trace(self, path: str | os.PathLike[str], *, rank: int = -1, "
                  "world_size: int = 0, host: str = '', host_clock_uncertainty_ns: int = 0, "
                  "clocks: collections.abc.Sequence[ClockOffset] = [], host_clock_offsets: "
                  "collections.abc.Sequence[HostClockOffset] = []) -> None"),
          "Writes the kept reports as accgraph.write_trace() does, in the format the name asks "
          "for: *.pftrace or *.perfetto-trace a native Perfetto trace (with the rank and clock "
          "options a merge_traces() needs), *.speedscope.json a speedscope profile, any other "
          "name Chrome trace JSON.")
      .def("write_csv", exporter([](std::ostream& out, Profiler& profiler) {
             timing::write_reports_csv(out, profiler.reports());
           }),
           nb::arg("path"), nb::sig("def write_csv(self, path: str | os.PathLike[str]) -> None"),
           "Writes the kept reports as CSV, one row per region per report.");
}

// The statistics as CSV and JSON.
void def_profiler_export_stats(ProfilerClass& cls) {
  cls.def(
         "write_stats_csv",
         [](PyProfiler& self, nb::handle path,
            std::optional<std::map<uint64_t, std::string>> graph_labels) {
           Profiler& profiler = self.get();
           timing::StatsRun run;
           if (graph_labels) run.graph_labels.assign(graph_labels->begin(), graph_labels->end());
           write_output(fs_path(path), "the exported data", [&](std::ostream& out) {
             timing::write_stats_csv(out, profiler.stats(), run);
           });
         },
         nb::arg("path"), nb::kw_only(), nb::arg("graph_labels") = nb::none(),
         nb::sig("def write_stats_csv(self, path: str | os.PathLike[str], *, graph_labels: "
                 "collections.abc.Mapping[int, str] | None = None) -> None"),
         "Writes the statistics as CSV, one row per region path and context (the columns of "
         "stats_csv_columns()). `graph_labels`: graph id -> its capture site or label "
         "(accgraph.torch.graph_labels()), written in the graph_label column, which "
         "accgraph.torch's compare matches the graphs of two runs by.")
      .def(
          "write_stats_json",
          [](PyProfiler& self, nb::handle path,
             std::optional<std::map<uint64_t, std::string>> graph_labels,
             std::optional<std::map<std::string, std::string>> metadata) {
            Profiler& profiler = self.get();
            timing::StatsRun run = profiler.stats_run();
            if (graph_labels) run.graph_labels.assign(graph_labels->begin(), graph_labels->end());
            if (metadata) run.metadata.assign(metadata->begin(), metadata->end());
            write_output(fs_path(path), "the exported data", [&](std::ostream& out) {
              timing::write_stats_json(out, profiler.stats(), run);
            });
          },
          nb::arg("path"), nb::kw_only(), nb::arg("graph_labels") = nb::none(),
          nb::arg("metadata") = nb::none(),
          nb::sig("def write_stats_json(self, path: str | os.PathLike[str], *, graph_labels: "
                  "collections.abc.Mapping[int, str] | None = None, metadata: "
                  "collections.abc.Mapping[str, str] | None = None) -> None"),
          "Writes the statistics as versioned JSON (accgraph::timing::write_stats_json; the "
          "README's \"Statistics as JSON\"): the CSV's facts per region, each graph's replays "
          "and label, the devices of the kept reports (timer step, marker strategy), the "
          "sampling options, and `metadata` (key -> text: what only the caller knows, e.g. the "
          "framework's version).");
}

// The exporters: traces, CSV and JSON files.
void def_profiler_results_export(ProfilerClass& cls) {
  def_profiler_export_reports(cls);
  def_profiler_export_stats(cls);
}

// The text table, the calls noted as untimed, and the region loop for bench/python.
void def_profiler_results_reports(ProfilerClass& cls) {
  cls.def(
         "stats_table", [](PyProfiler& self) { return self.get().stats_table(); },
         nb::call_guard<GilRelease>(),
         "The statistics as a fixed-width text table (microseconds), as `accgraph demo` "
         "prints it, then one line per reason of note_untimed(): \"untimed: <count> call(s) "
         "not timed: <reason> (first: <name>)\".")
      .def(
          "note_untimed",
          [](PyProfiler& self, std::string name, std::string reason) {
            self.get().note_untimed(std::move(name), std::move(reason));
          },
          nb::arg("name"), nb::arg("reason"),
          "Counts a call that was seen but not timed, under `reason`; `name` is kept for the "
          "first call of each reason. stats_table() ends with one line per reason.")
      .def(
          "untimed", [](PyProfiler& self) { return self.get().untimed(); },
          nb::call_guard<GilRelease>(),
          "The calls noted by note_untimed(), one UntimedCalls per reason in first-seen order.")
      .def(
          "_region_loop_ns",
          [](PyProfiler& self, PyStream& stream, std::string name, IntArg count_arg) {
            const auto count = int_arg<uint64_t>(count_arg, "Profiler._region_loop_ns: count");
            std::shared_ptr<Stream> s_owner = stream.share();
            Stream& s = *s_owner;
            GilRelease release;
            auto start = std::chrono::steady_clock::now();
            for (uint64_t i = 0; i < count; ++i) {
              Profiler::Region region = self.get().region(s, name);
            }
            return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - start)
                                             .count());
          },
          nb::arg("stream"), nb::arg("name"), nb::arg("count"),
          "For bench/python: opens and ends the region `name` `count` times in a C++ loop (RAII "
          "Region), returns the nanoseconds it took.");
}

// What it measured: reports, statistics and the exporters.
void def_profiler_results(ProfilerClass& cls) {
  def_profiler_results_stats(cls);
  def_profiler_results_export(cls);
  def_profiler_results_reports(cls);
}

// What a Profiler counts besides its reports: UntimedCalls and GraphReplays.
void bind_profiler_counts(nb::module_& m) {
  nb::class_<timing::UntimedCalls>(m, "UntimedCalls",
                                   "Calls noted by Profiler.note_untimed() under one reason "
                                   "(read-only).")
      .def_ro("reason", &timing::UntimedCalls::reason, "Why the calls were not timed.")
      .def_ro("count", &timing::UntimedCalls::count, "How many calls were noted.")
      .def_ro("first_name", &timing::UntimedCalls::first_name,
              "The name given with the first of them.")
      .def("__repr__", [](const timing::UntimedCalls& u) {
        return "UntimedCalls(reason='" + u.reason + "', count=" + std::to_string(u.count) +
               ", first_name='" + u.first_name + "')";
      });
  nb::class_<timing::GraphReplays>(m, "GraphReplays",
                                   "One graph's replays as one Profiler counted them "
                                   "(Profiler.replay_counts(); read-only).")
      .def_ro("graph_id", &timing::GraphReplays::graph_id, "The graph (ReplayReport.graph_id).")
      .def_ro("run", &timing::GraphReplays::run, "Replays launched, timed or not.")
      .def_ro("timed", &timing::GraphReplays::timed,
              "Of them, launched with markers (each gives one report).")
      .def_ro("sample_every", &timing::GraphReplays::sample_every,
              "The N in effect: Profiler(sample_every=N), or the one `overhead` chose (1 until "
              "then).")
      .def_ro("sampled", &timing::GraphReplays::sampled,
              "False when replays the schedule left untimed were timed all the same (the "
              "backend cannot launch the graph without markers, e.g. PyTorch's graphs, or "
              "another profiler times it too).")
      .def("__repr__", [](const timing::GraphReplays& g) {
        return "GraphReplays(graph_id=" + std::to_string(g.graph_id) +
               ", run=" + std::to_string(g.run) + ", timed=" + std::to_string(g.timed) +
               ", sample_every=" + std::to_string(g.sample_every) +
               ", sampled=" + (g.sampled ? "True" : "False") + ")";
      });
}

}  // namespace

void bind_profiler(nb::module_& m) {
  bind_profiler_counts(m);
  m.def(
      "is_sampled_replay",
      [](IntArg replay, IntArg every, IntArg seed, IntArg graph_id) {
        return timing::is_sampled_replay(int_arg<uint64_t>(replay, "is_sampled_replay: replay"),
                                         int_arg<uint64_t>(every, "is_sampled_replay: every"),
                                         int_arg<uint64_t>(seed, "is_sampled_replay: seed"),
                                         int_arg<uint64_t>(graph_id, "is_sampled_replay: graph_id"));
      },
      nb::arg("replay"), nb::arg("every"), nb::arg("seed"), nb::arg("graph_id"),
      "Whether replay `replay` (0, 1, ... of a capture; ReplayReport.replay_index) of graph "
      "`graph_id` is one that Profiler(sample_every=every, sample_seed=seed) times: one in each "
      "window of `every` consecutive replays, at an offset drawn from (seed, graph, window). "
      "Always True for every <= 1.");
  ProfilerClass cls(m, "Profiler", nb::type_slots(profiler_slots),
                    "Times regions of captured graphs and of eager work "
                    "(accgraph::timing::Profiler):\n\n"
                    "    prof = accgraph.Profiler()\n"
                    "    prof.attach(g)\n"
                    "    with g.capture(s):\n"
                    "        with prof.region(s, 'layer0', bytes=4096):\n"
                    "            s.fill(buf, 1)\n"
                    "    g.replay()\n"
                    "    prof.flush()\n"
                    "    print(prof.stats_table())\n\n"
                    "Sinks run with the GIL held on the thread that collects (replay, "
                    "flush, the background collector); an exception in a sink is logged "
                    "and does not stop delivery. Dropping the profiler flushes it.");
  def_profiler_setup(cls);
  def_profiler_regions(cls);
  def_profiler_results(cls);
  cls.def("__repr__", [](PyProfiler& self) {
    if (!self.profiler) return std::string("<accgraph.Profiler (cleared)>");
    return "<accgraph.Profiler delivered=" + std::to_string(self.profiler->delivered()) + ">";
  });
}

}  // namespace accgraph::python
