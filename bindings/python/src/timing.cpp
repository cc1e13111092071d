// The timing layer from Python: Profiler, regions as context managers and decorators, report
// sinks, read-only reports and statistics, and the exporters.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"

namespace accgraph::python {

namespace {

using timing::Delivery;
using timing::Metadata;
using timing::Profiler;
using timing::ProfilerOptions;
using timing::RegionStats;
using timing::RegionTiming;
using timing::ReplayReport;
using timing::StatsMode;

// A RegionTiming refers to its report's layout: the Python object keeps the layout alive.
struct PyRegionTiming {
  std::shared_ptr<const timing::ReportLayout> layout;
  RegionTiming timing;
};

// `sinks` are the Python callables the C++ profiler holds (one reference each, owned by their
// PythonCallable): borrowed here to show them to the garbage collector (Note [Sink cycles]).
struct PyProfiler {
  std::unique_ptr<Profiler> profiler;
  std::vector<PyObject*> sinks;
  explicit PyProfiler(std::unique_ptr<Profiler> p) : profiler(std::move(p)) {}
  ~PyProfiler() { destroy(); }
  Profiler& get() {
    if (!profiler)
      throw Error(ErrorCode::InvalidState,
                  "this Profiler was cleared by the garbage collector (it was part of an "
                  "unreachable reference cycle): create a new Profiler");
    return *profiler;
  }
  void destroy() noexcept {
    if (!profiler) return;
    {
      // Waits for replays and calls sinks, which take the GIL (and may still use this
      // profiler: flush before it goes).
      nb::gil_scoped_release release;
      try {
        profiler->flush();
      } catch (const std::exception& e) {
        log(LogLevel::Warning, std::string("accgraph.Profiler: flushing it failed: ") + e.what());
      }
      profiler.reset();
    }
    sinks.clear();  // their references went with the profiler
  }
};

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
  PyProfiler* p = nb::inst_ptr<PyProfiler>(self);
  if (p->profiler) {
    nb::gil_scoped_release release;
    try {
      p->profiler->flush();
    } catch (const std::exception& e) {
      log(LogLevel::Warning, std::string("accgraph.Profiler: flushing it failed: ") + e.what());
    }
  }
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

// One entry of a Profiler.region() object: the C++ region it opened, on whose behalf
// (Note [Region entries]).
struct RegionEntry {
  std::thread::id thread;  // the thread whose __exit__ ends it
  uint64_t stream_id;
  std::unique_ptr<Profiler::Region> region;  // on the heap: ended while `open` may reallocate
};

// Profiler.region(): opens a C++ region on each entry (so one object serves as a decorator and
// re-entrantly, on any number of threads), ends one on exit (Note [Region entries]). Keeps the
// Python profiler and stream alive.
struct PyRegion {
  nb::object profiler;  // PyProfiler
  nb::object stream;    // PyStream, or unset: the default stream at each entry (Note [Default stream])
  std::string name;
  Metadata metadata;
  std::string lane;
  // The open entries, oldest first; changed only with the GIL held.
  std::vector<RegionEntry> open;
  // One lock per stream with entries, taken without the GIL around creating or ending one of
  // this object's regions on that stream; the map itself is read and changed with the GIL held.
  std::map<uint64_t, std::shared_ptr<std::recursive_mutex>> stream_locks;
  PyRegion(nb::object p, nb::object s, std::string n, Metadata md, std::string l)
      : profiler(std::move(p)), stream(std::move(s)), name(std::move(n)),
        metadata(std::move(md)), lane(std::move(l)) {}
  PyRegion(PyRegion&&) = default;
  ~PyRegion() {
    if (open.empty()) return;
    // Regions left open end here, innermost first (the C++ destructor logs a failure); ending
    // one may wait for the stream's work, which may need the GIL. No other thread can reach
    // this object any more.
    nb::gil_scoped_release release;
    while (!open.empty()) open.pop_back();
  }
};

Metadata metadata_of(const nb::kwargs& kwargs) {
  Metadata metadata;
  for (auto [key, value] : kwargs)
    metadata.emplace_back(nb::cast<std::string>(key), nb::cast<std::string>(nb::str(value)));
  return metadata;
}

nb::dict metadata_dict(const Metadata& metadata) {
  nb::dict out;
  for (const auto& [key, value] : metadata) out[nb::str(key.c_str())] = value;
  return out;
}

nb::dict timing_dict(const RegionTiming& r) {
  nb::dict d;
  d["name"] = r.name();
  d["path"] = r.path();
  d["depth"] = r.depth();
  d["parent"] = r.parent();
  d["stream_id"] = r.stream_id();
  d["lane"] = r.lane();
  d["start_ns"] = r.start_ns;
  d["end_ns"] = r.end_ns;
  d["duration_ns"] = r.duration_ns;
  d["measurable"] = r.measurable;
  d["metadata"] = metadata_dict(r.metadata());
  return d;
}

PyRegionTiming region_at(const ReplayReport& report, size_t i) {
  return PyRegionTiming{report.shared_layout(), report.region(i)};
}

nb::list region_list(const ReplayReport& report) {
  nb::list out;
  for (size_t i = 0; i < report.size(); ++i) out.append(nb::cast(region_at(report, i)));
  return out;
}

nb::dict report_dict(const ReplayReport& r) {
  nb::dict d;
  d["graph_id"] = r.graph_id();
  d["replay_index"] = r.replay_index();
  d["backend"] = r.backend();
  d["device"] = r.device();
  d["device_name"] = r.device_name();
  d["marker_strategy"] = r.marker_strategy();
  d["resolution_ns"] = r.resolution_ns();
  nb::list regions;
  for (size_t i = 0; i < r.size(); ++i) regions.append(timing_dict(r.region(i)));
  d["regions"] = regions;
  return d;
}

nb::dict stats_dict(const RegionStats& s) {
  nb::dict d;
  d["path"] = s.path;
  d["depth"] = s.depth;
  d["count"] = s.count;
  d["unmeasurable"] = s.unmeasurable;
  d["min_ns"] = s.min_ns;
  d["mean_ns"] = s.mean_ns;
  d["p50_ns"] = s.p50_ns;
  d["p95_ns"] = s.p95_ns;
  d["max_ns"] = s.max_ns;
  return d;
}

// Writes what `write` produces to the file `path` (OSError naming it when it cannot be opened;
// the exporters' own errors otherwise).
template <class Write>
void write_file(nb::handle path, Write&& write) {
  write_output(fs_path(path), "the exported data", write);
}

Profiler& profiler_of(PyProfiler& p) { return p.get(); }

// Note [Default stream]: region(name) without a stream times on the stream the installed
// provider names at each entry (accgraph._default_stream; accgraph.torch installs PyTorch's
// current stream), so one region object, or a decorator, follows the caller: into a capture on
// the capture stream, eagerly elsewhere. The lookup is Python's; the binding only asks for it.
nb::object default_stream(const PyRegion& region) {
  return nb::module_::import_("accgraph._default_stream")
      .attr("default_stream")("Profiler.region('" + region.name + "')");
}

// Note [Region entries]: one Region object may be entered by several threads at once (a
// decorated function called from a thread pool, a shared `with` object), each entry opening its
// own C++ region (audit 2026-11-25 #18, #19). Creating and ending a C++ region may wait for the
// stream, so it runs without the GIL; the entries are pushed and removed with the GIL held, and
// an entry being ended stays in `open` until its end() succeeded (a refused end, e.g. an outer
// region ended first, leaves it open and listed, as the C++ region is).
//
// __exit__ ends one entry on the stream of the calling thread's innermost entry (a thread
// without one, since enter and exit may be on different threads, takes the most recent entry
// of any thread). Threads sharing a stream nest their regions on it in the order the C++
// regions began, which need not be the order in which they got the GIL back: so a lock per
// stream, taken without the GIL, orders this object's regions on that stream (recursive, for a
// sink that enters the region from inside an end that delivers), and __exit__ ends the most
// recent of them, the only one C++ can end. When that one is another thread's, the calling
// thread's entry passes to that thread, to end in its turn: every exit ends one region, and
// each thread's count of open entries stays what its enters and exits make it.
std::shared_ptr<std::recursive_mutex> stream_lock(PyRegion& self, uint64_t stream_id) {
  std::shared_ptr<std::recursive_mutex>& lock = self.stream_locks[stream_id];
  if (!lock) lock = std::make_shared<std::recursive_mutex>();
  return lock;
}

void region_enter(PyRegion& self) {
  Profiler& profiler = profiler_of(nb::cast<PyProfiler&>(self.profiler));
  nb::object stream_object = self.stream.is_valid() ? self.stream : default_stream(self);
  std::shared_ptr<Stream> stream_owner = nb::cast<PyStream&>(stream_object).share();
  Stream& stream = *stream_owner;
  const uint64_t stream_id = stream.id();
  std::shared_ptr<std::recursive_mutex> order = stream_lock(self, stream_id);
  nb::gil_scoped_release release;
  std::lock_guard<std::recursive_mutex> ordered(*order);
  auto region = std::make_unique<Profiler::Region>(
      profiler.region(stream, self.name, self.metadata, self.lane));
  nb::gil_scoped_acquire gil;
  self.open.push_back({std::this_thread::get_id(), stream_id, std::move(region)});
}

// The index in `open` of the most recent entry of `thread` (on `stream_id` unless 0), or -1.
ptrdiff_t innermost(const PyRegion& self, std::thread::id thread, uint64_t stream_id = 0) {
  for (size_t i = self.open.size(); i-- > 0;)
    if (self.open[i].thread == thread && (stream_id == 0 || self.open[i].stream_id == stream_id))
      return static_cast<ptrdiff_t>(i);
  return -1;
}

void region_exit(PyRegion& self) {
  const std::thread::id me = std::this_thread::get_id();
  const auto never_entered = [&] {
    return Error(ErrorCode::InvalidState,
                 "Profiler.region '" + self.name +
                     "': __exit__ without __enter__: use the region in a with statement");
  };
  if (self.open.empty()) throw never_entered();
  const ptrdiff_t mine = innermost(self, me);
  const uint64_t stream_id =
      mine >= 0 ? self.open[static_cast<size_t>(mine)].stream_id : self.open.back().stream_id;
  std::shared_ptr<std::recursive_mutex> order = stream_lock(self, stream_id);

  nb::gil_scoped_release release;
  // From here no other entry of this object on the stream begins or ends.
  std::lock_guard<std::recursive_mutex> ordered(*order);
  Profiler::Region* ending = nullptr;
  {
    nb::gil_scoped_acquire gil;
    for (size_t i = self.open.size(); i-- > 0 && !ending;)
      if (self.open[i].stream_id == stream_id) ending = self.open[i].region.get();
  }
  if (!ending) throw never_entered();  // a thread without entries ended them meanwhile
  std::exception_ptr failure;
  try {
    ending->end();
  } catch (...) {
    failure = std::current_exception();
  }
  nb::gil_scoped_acquire gil;
  auto it = std::find_if(self.open.begin(), self.open.end(),
                         [&](const RegionEntry& e) { return e.region.get() == ending; });
  // Ended, or can never end: the entry goes (unless a sink that end() called removed it).
  if (it != self.open.end() && !ending->is_open()) {
    const std::thread::id owner = it->thread;
    std::unique_ptr<Profiler::Region> ended = std::move(it->region);
    self.open.erase(it);
    if (owner != me) {
      ptrdiff_t passed = innermost(self, me, stream_id);
      if (passed >= 0) self.open[static_cast<size_t>(passed)].thread = owner;
    }
    // The stream's lock goes with its last entry, unless another thread holds it already.
    if (order.use_count() == 2 &&
        std::none_of(self.open.begin(), self.open.end(),
                     [&](const RegionEntry& e) { return e.stream_id == stream_id; }))
      self.stream_locks.erase(stream_id);
  }
  if (failure) std::rethrow_exception(failure);
}

std::string repr_timing(const RegionTiming& r) {
  return "RegionTiming(path='" + r.path() + "', duration_ns=" + std::to_string(r.duration_ns) +
         (r.measurable ? "" : ", measurable=False") + ")";
}

}  // namespace

void bind_timing(nb::module_& m) {
  nb::enum_<Delivery>(m, "Delivery",
                      "When reports reach the sinks; arguments also take 'lazy' and 'immediate'.")
      .value("LAZY", Delivery::Lazy,
             "When the ring is full, on flush(), when the profiler is dropped, or by the "
             "background collector.")
      .value("IMMEDIATE", Delivery::Immediate,
             "Right after each replay (waits for it: serialises replays with the host).");

  nb::enum_<StatsMode>(m, "StatsMode",
                       "How statistics keep durations; arguments also take 'sketch' and 'exact'.")
      .value("SKETCH", StatsMode::Sketch,
             "Bounded memory: exact count/min/max/mean, p50/p95 within 1/128 relative error.")
      .value("EXACT", StatsMode::Exact, "Every sample: exact percentiles, memory grows.");

  nb::class_<PyRegionTiming>(m, "RegionTiming",
                             "One region of one report (read-only). Times are on the backend's "
                             "marker clock, in nanoseconds.")
      .def_prop_ro("name", [](const PyRegionTiming& r) { return r.timing.name(); },
                   "The region's name.")
      .def_prop_ro("path", [](const PyRegionTiming& r) { return r.timing.path(); },
                   "The names of the enclosing regions and this one, joined by '/'.")
      .def_prop_ro("depth", [](const PyRegionTiming& r) { return r.timing.depth(); },
                   "0 for top-level regions.")
      .def_prop_ro("parent", [](const PyRegionTiming& r) { return r.timing.parent(); },
                   "Index of the enclosing region in the report, or -1.")
      .def_prop_ro("stream_id", [](const PyRegionTiming& r) { return r.timing.stream_id(); },
                   "Stream.id of the stream the region was recorded on.")
      .def_prop_ro("lane", [](const PyRegionTiming& r) { return r.timing.lane(); },
                   "The named lane within the stream's track ('' for the stream itself).")
      .def_prop_ro("metadata",
                   [](const PyRegionTiming& r) { return metadata_dict(r.timing.metadata()); },
                   "The region's key/value annotations, as a new dict.")
      .def_prop_ro("start_ns", [](const PyRegionTiming& r) { return r.timing.start_ns; },
                   "Start on the marker clock (0 when not measurable).")
      .def_prop_ro("end_ns", [](const PyRegionTiming& r) { return r.timing.end_ns; },
                   "End on the marker clock (0 when not measurable).")
      .def_prop_ro("duration_ns", [](const PyRegionTiming& r) { return r.timing.duration_ns; },
                   "end_ns - start_ns (0 when not measurable).")
      .def_prop_ro("measurable", [](const PyRegionTiming& r) { return r.timing.measurable; },
                   "False when the backend could not place a marker in time; the statistics "
                   "leave such regions out.")
      .def("to_dict", [](const PyRegionTiming& r) { return timing_dict(r.timing); },
           "The attributes as a dict.")
      .def("__repr__", [](const PyRegionTiming& r) { return repr_timing(r.timing); });

  nb::class_<ReplayReport>(m, "ReplayReport",
                           "The timing of one replay (or one eager region tree), read-only. A "
                           "sequence of RegionTiming in the order the regions were opened.")
      .def_prop_ro("graph_id", &ReplayReport::graph_id, "Graph.id; 0 for eager regions.")
      .def_prop_ro("replay_index", &ReplayReport::replay_index,
                   "0-based replay number since the capture (eager: a sequence number).")
      .def_prop_ro("backend", [](const ReplayReport& r) { return r.backend(); },
                   "The backend's name.")
      .def_prop_ro("device", &ReplayReport::device, "The device index.")
      .def_prop_ro("device_name", [](const ReplayReport& r) { return r.device_name(); },
                   "The device's name.")
      .def_prop_ro("marker_strategy", [](const ReplayReport& r) { return r.marker_strategy(); },
                   "The timestamp marker kind used.")
      .def_prop_ro("resolution_ns", &ReplayReport::resolution_ns,
                   "The smallest step of the marker clock.")
      .def_prop_ro("regions", &region_list, "Every region, as a new list of RegionTiming.")
      .def("__len__", &ReplayReport::size, "The number of regions.")
      .def(
          "__getitem__",
          [](const ReplayReport& r, int64_t i) {
            const int64_t n = static_cast<int64_t>(r.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) throw nb::index_error("ReplayReport index out of range");
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

  nb::class_<RegionStats>(m, "RegionStats",
                          "Statistics of one region path over every report seen (read-only). "
                          "count, unmeasurable, min_ns and max_ns are exact; see StatsMode for "
                          "the others.")
      .def_ro("path", &RegionStats::path, "The region path.")
      .def_ro("depth", &RegionStats::depth, "The region's depth.")
      .def_ro("count", &RegionStats::count, "Measured samples.")
      .def_ro("unmeasurable", &RegionStats::unmeasurable,
              "Reports in which the region was not measurable.")
      .def_ro("min_ns", &RegionStats::min_ns, "Shortest duration.")
      .def_ro("mean_ns", &RegionStats::mean_ns, "Mean duration.")
      .def_ro("p50_ns", &RegionStats::p50_ns, "Median duration.")
      .def_ro("p95_ns", &RegionStats::p95_ns, "95th percentile duration.")
      .def_ro("max_ns", &RegionStats::max_ns, "Longest duration.")
      .def("to_dict", &stats_dict, "The attributes as a dict.")
      .def("__repr__", [](const RegionStats& s) {
        return "RegionStats(path='" + s.path + "', count=" + std::to_string(s.count) +
               ", mean_ns=" + std::to_string(s.mean_ns) + ")";
      });

  nb::class_<PyRegion>(m, "Region",
                       "What Profiler.region() returns: a context manager timing its block, "
                       "and a decorator timing every call of a function:\n\n"
                       "    with prof.region(s, 'layer0', bytes=4096):\n"
                       "        ...\n"
                       "    @prof.region(s, 'step')\n"
                       "    def step(): ...\n\n"
                       "Made without a stream (prof.region('step')), it times on the default "
                       "stream of each entry (accgraph.set_default_stream_provider).\n\n"
                       "Each entry opens a region of its own: one object may be entered "
                       "re-entrantly and from several threads at once; __exit__ ends an entry "
                       "of the calling thread (Note [Region entries]).\n\n"
                       "The decorator refuses generator, async generator and coroutine "
                       "functions (InvalidArgumentError): calling one only creates the "
                       "generator or coroutine object, so the region would end before any of "
                       "the work ran. Open the region inside the function body (`with "
                       "prof.region(...):`) or around the loop that consumes the generator.")
      .def("__enter__", [](PyRegion& self) { region_enter(self); },
           "Opens the region on its stream.")
      .def(
          "__exit__",
          [](PyRegion& self, nb::handle, nb::handle, nb::handle) {
            region_exit(self);
            return false;
          },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none(),
          nb::sig("def __exit__(self, exc_type: type[BaseException] | None, exc_value: "
                  "BaseException | None, traceback: types.TracebackType | None) -> bool"),
          "Ends the innermost region the calling thread opened with this object (on a "
          "thread that opened none: the most recent one of another thread).")
      .def(
          "__call__",
          [](nb::handle self, nb::callable fn) {
            return nb::module_::import_("accgraph._decorate").attr("region_decorator")(self, fn);
          },
          nb::arg("fn"),
          nb::sig("def __call__(self, fn: collections.abc.Callable[..., typing.Any]) -> "
                  "collections.abc.Callable[..., typing.Any]"),
          "Decorates `fn`: each call runs inside this region (functools.wraps keeps its name). "
          "InvalidArgumentError for a generator, async generator or coroutine function.")
      .def_ro("name", &PyRegion::name, "The region's name.")
      .def_ro("lane", &PyRegion::lane, "The region's lane ('' for the stream's own track).")
      .def("__repr__", [](const PyRegion& r) {
        return "<accgraph.Region '" + r.name + "' open=" + std::to_string(r.open.size()) + ">";
      });

  nb::class_<PyProfiler>(m, "Profiler", nb::type_slots(profiler_slots),
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
                         "and does not stop delivery. Dropping the profiler flushes it.")
      .def(
          "__init__",
          [](PyProfiler* self, EnumOrName<Delivery> delivery, size_t ring_depth,
             std::optional<std::string> marker_strategy, bool background_collector,
             std::optional<int64_t> keep_reports, EnumOrName<StatsMode> stats_mode,
             std::optional<double> collector_period, bool collect_stats) {
            ProfilerOptions options;
            options.delivery = parse_delivery(delivery);
            options.ring_depth = ring_depth;
            options.marker_strategy = marker_strategy.value_or("");
            options.background_collector = background_collector;
            options.keep_reports =
                keep_reports ? timing::KeepReports(*keep_reports) : timing::KeepReports::all();
            options.stats_mode = parse_stats_mode(stats_mode);
            options.collect_stats = collect_stats;
            if (collector_period) {
              if (!(*collector_period > 0 && *collector_period <= 3600))
                throw Error(ErrorCode::InvalidArgument,
                            "Profiler: collector_period must be from 0 to 3600 seconds (got " +
                                std::to_string(*collector_period) + ")");
              options.collector_period =
                  std::chrono::microseconds(static_cast<int64_t>(*collector_period * 1e6));
            }
            auto profiler = [&] {
              nb::gil_scoped_release release;
              return std::make_unique<Profiler>(options);
            }();
            new (self) PyProfiler(std::move(profiler));
          },
          nb::arg("delivery") = Delivery::Lazy, nb::arg("ring_depth") = 0,
          nb::arg("marker_strategy") = nb::none(), nb::arg("background_collector") = false,
          nb::arg("keep_reports").none() = 1024, nb::arg("stats_mode") = StatsMode::Sketch,
          nb::arg("collector_period") = nb::none(), nb::arg("collect_stats") = true,
          "`delivery`: 'lazy' or 'immediate'. `ring_depth`: replays in flight per graph (0: "
          "the backend's default). `marker_strategy`: one of Capabilities.marker_strategies "
          "(None: the backend's default). `background_collector`: a thread delivers completed "
          "replays every `collector_period` seconds. `keep_reports`: how many of the last "
          "reports reports() keeps (0: none; None: every one, memory grows without bound). "
          "`stats_mode`: 'sketch' or 'exact'. `collect_stats=False` leaves stats() empty and "
          "saves its cost per report.")
      .def(
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
            nb::gil_scoped_release release;
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
          nb::call_guard<nb::gil_scoped_release>(),
          "Times every graph whose capture begins from now on.")
      .def(
          "detach", [](PyProfiler& self) { self.get().detach(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "Stops timing new captures; pending reports are still delivered by flush().")
      .def(
          "region",
          [](nb::handle self, nb::handle stream, std::optional<std::string> name,
             std::string lane, nb::kwargs metadata) {
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
            return PyRegion(nb::borrow(self), std::move(on), std::move(*name),
                            metadata_of(metadata), std::move(lane));
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
            nb::gil_scoped_release release;
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
            nb::gil_scoped_release release;
            self.get().end(s);
          },
          nb::arg("stream"), "Ends the innermost open region on `stream`.")
      .def(
          "add_sink",
          [](PyProfiler& self, nb::callable sink) {
            Profiler& profiler = self.get();
            auto callable = std::make_shared<PythonCallable>(sink, "a report sink");
            {
              nb::gil_scoped_release release;
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
          "flush", [](PyProfiler& self) { self.get().flush(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "Waits (without the GIL) for every pending replay and eager region and delivers its "
          "report.")
      .def(
          "reports", [](PyProfiler& self) { return self.get().reports(); },
          nb::call_guard<nb::gil_scoped_release>(), "The kept reports (keep_reports).")
      .def(
          "stats", [](PyProfiler& self) { return self.get().stats(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "Per-region statistics over every report delivered so far.")
      .def_prop_ro(
          "delivered", [](PyProfiler& self) { return self.get().delivered(); },
          "Reports delivered so far (counted also when not kept).")
      .def(
          "write_chrome_trace",
          [](PyProfiler& self, nb::handle path) {
            Profiler& profiler = self.get();
            write_file(path, [&](std::ostream& out) {
              timing::write_chrome_trace(out, profiler.reports());
            });
          },
          nb::arg("path"),
          nb::sig("def write_chrome_trace(self, path: str | os.PathLike[str]) -> None"),
          "Writes the kept reports as Chrome trace JSON (Perfetto, chrome://tracing).")
      .def(
          "write_trace",
          [](PyProfiler& self, nb::handle path, int rank, int world_size, std::string host,
             uint64_t host_clock_uncertainty_ns, std::vector<timing::DeviceClockOffset> clocks) {
            std::vector<ReplayReport> reports;
            {
              nb::gil_scoped_release release;
              reports = self.get().reports();
            }
            write_trace_file(path, reports, rank, world_size, host, host_clock_uncertainty_ns,
                             clocks);
          },
          nb::arg("path"), nb::kw_only(), nb::arg("rank") = -1, nb::arg("world_size") = 0,
          nb::arg("host") = "", nb::arg("host_clock_uncertainty_ns") = 0,
          nb::arg("clocks") = std::vector<timing::DeviceClockOffset>{},
          nb::sig("def write_trace(self, path: str | os.PathLike[str], *, rank: int = -1, "
                  "world_size: int = 0, host: str = '', host_clock_uncertainty_ns: int = 0, "
                  "clocks: collections.abc.Sequence[ClockOffset] = []) -> None"),
          "Writes the kept reports as accgraph.write_trace() does: *.pftrace a native "
          "Perfetto trace (with the rank and clock options a merge_traces() needs), any other "
          "name Chrome trace JSON.")
      .def(
          "write_csv",
          [](PyProfiler& self, nb::handle path) {
            Profiler& profiler = self.get();
            write_file(path, [&](std::ostream& out) {
              timing::write_reports_csv(out, profiler.reports());
            });
          },
          nb::arg("path"), nb::sig("def write_csv(self, path: str | os.PathLike[str]) -> None"),
          "Writes the kept reports as CSV, one row per region per report.")
      .def(
          "write_stats_csv",
          [](PyProfiler& self, nb::handle path) {
            Profiler& profiler = self.get();
            write_file(path, [&](std::ostream& out) {
              timing::write_stats_csv(out, profiler.stats());
            });
          },
          nb::arg("path"),
          nb::sig("def write_stats_csv(self, path: str | os.PathLike[str]) -> None"),
          "Writes the statistics as CSV, one row per region path.")
      .def(
          "stats_table",
          [](PyProfiler& self) {
            std::ostringstream out;
            timing::write_stats_table(out, self.get().stats());
            return out.str();
          },
          nb::call_guard<nb::gil_scoped_release>(),
          "The statistics as a fixed-width text table (microseconds), as `accgraph demo` "
          "prints it.")
      .def(
          "_region_loop_ns",
          [](PyProfiler& self, PyStream& stream, std::string name, uint64_t count) {
            std::shared_ptr<Stream> s_owner = stream.share();
            Stream& s = *s_owner;
            nb::gil_scoped_release release;
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
          "Region), returns the nanoseconds it took.")
      .def("__repr__", [](PyProfiler& self) {
        if (!self.profiler) return std::string("<accgraph.Profiler (cleared)>");
        return "<accgraph.Profiler delivered=" + std::to_string(self.profiler->delivered()) +
               ">";
      });
}

}  // namespace accgraph::python
