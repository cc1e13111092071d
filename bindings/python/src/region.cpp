// Profiler.region() from Python: the Region object, a context manager and decorator whose
// entries open C++ regions, on a given stream or on the default stream of each entry.
#include <algorithm>
#include <exception>

#include <nanobind/stl/string.h>

#include "timing.hpp"

namespace accgraph::python {

namespace {

using timing::Profiler;

// Note [Default stream]: region(name) without a stream times on the stream the installed
// provider names at each entry (accgraph.set_default_stream_provider; accgraph.torch installs
// PyTorch's current stream), so one region object, or a decorator, follows the caller: into a
// capture on the capture stream, eagerly elsewhere. accgraph._default_stream keeps the provider
// and hands each one it installs to the binding too, so an entry calls it directly: no module
// import and no message built per entry. Only a failure goes back to Python, which raises the
// error it raises itself. The binding lets its reference go at interpreter exit (an atexit hook
// in _default_stream.py), while Python can still free the provider; an entry after that asks
// Python, which still has it.
PyObject* default_stream_provider = nullptr;  // a reference; read and written with the GIL held

void set_default_stream_provider(nb::handle provider) {
  PyObject* previous = default_stream_provider;
  default_stream_provider = provider.is_none() ? nullptr : provider.inc_ref().ptr();
  Py_XDECREF(previous);  // last: dropping it may run Python code
}

nb::object default_stream(const PyRegion& region) {
  const auto what = [&] { return "Profiler.region('" + region.name + "')"; };
  if (!default_stream_provider)  // none installed (an error), or the interpreter is exiting
    return nb::module_::import_("accgraph._default_stream").attr("default_stream")(what());
  nb::object provider = nb::borrow(default_stream_provider);  // the call may install another
  nb::object stream = provider();
  if (!nb::isinstance<PyStream>(stream)) {
    nb::object error = nb::module_::import_("accgraph._default_stream")
                           .attr("not_a_stream_error")(what(), provider, stream);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    throw nb::python_error();
  }
  return stream;
}

// Note [Region entries]: one Region object may be entered by several threads at once (a
// decorated function called from a thread pool, a shared `with` object), each entry opening its
// own C++ region. Creating and ending a C++ region may wait for the
// stream, so it runs without the GIL, given up and taken back by GilRelease: a thread that would
// take it back once the interpreter exits is parked there instead of being ended inside these
// frames (Note [Threads at exit] in common.hpp; with nb::gil_scoped_acquire taking it back, a
// daemon thread in a region at exit aborted the process).
// The entries are pushed, marked and removed with the GIL held; an entry being ended stays in
// `open`, marked `ending`, until its end() returned.
//
// __exit__ ends an entry of the calling thread, its innermost one (a thread without one, since
// enter and exit may be on different threads, takes the most recent entry of any thread). Its C++
// region either ends, and is reported, or raises: ended while a region that began after it on
// the stream is open, it is dropped with a RegionOrder error, and no other thread's region
// begins on a stream while one of this thread's is open there (Note [Regions out of order] in
// timing/engine/region_recorder.cpp). Were the entries of several threads nested on one
// stream, an exit whose entry enclosed another thread's later one would wait for that one to
// end: A's region would be reported ending where B's did, silently.
void region_enter(PyRegion& self) {
  Profiler& profiler = nb::cast<PyProfiler&>(self.profiler).get();
  nb::object stream_object = self.stream.is_valid() ? self.stream : default_stream(self);
  std::shared_ptr<Stream> stream = nb::cast<PyStream&>(stream_object).share();
  std::unique_ptr<Profiler::Region> region;
  {
    GilRelease release;
    region = std::make_unique<Profiler::Region>(
        profiler.region(*stream, self.name, self.metadata, self.lane));
  }
  self.open.push_back({std::this_thread::get_id(), std::move(region)});
}

// The index in `open` of the most recent entry not being ended of `thread` (of any thread when
// `thread` is null), or -1.
ptrdiff_t innermost_entry(const PyRegion& self, const std::thread::id* thread) {
  for (size_t i = self.open.size(); i-- > 0;)
    if (!self.open[i].ending && (thread == nullptr || self.open[i].thread == *thread))
      return static_cast<ptrdiff_t>(i);
  return -1;
}

void region_exit(PyRegion& self) {
  const std::thread::id me = std::this_thread::get_id();
  ptrdiff_t mine = innermost_entry(self, &me);
  if (mine < 0) mine = innermost_entry(self, nullptr);
  if (mine < 0)
    throw Error(ErrorCode::InvalidState,
                "Profiler.region '" + self.name +
                    "': __exit__ without __enter__: use the region in a with statement");
  // Marked with the GIL held: no other exit takes this entry.
  RegionEntry& entry = self.open[static_cast<size_t>(mine)];
  entry.ending = true;
  Profiler::Region* const region = entry.region.get();
  std::exception_ptr failure;
  {
    GilRelease release;
    try {
      region->end();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  auto it = std::find_if(self.open.begin(), self.open.end(),
                         [&](const RegionEntry& e) { return e.region.get() == region; });
  if (it != self.open.end()) {
    // Ended, dropped or never to end: the entry goes. A region still open after a refused end
    // (ended while its stream captures, where it began eagerly) stays, to be exited again.
    if (region->is_open()) {
      it->ending = false;
    } else {
      std::unique_ptr<Profiler::Region> ended = std::move(it->region);
      self.open.erase(it);
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Entering and leaving the region: the context manager and the decorator.
void def_region_entries(nb::class_<PyRegion>& cls) {
  cls.def(
         "__enter__", [](PyRegion& self) { region_enter(self); }, "Opens the region on its stream.")
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
          "thread that opened none: the most recent one of another thread). While a region "
          "that began after it on its stream is open, it is dropped, not reported, and "
          "InvalidStateError (REGION_ORDER) says so (regions on one stream nest).")
      .def(
          "__call__",
          [](nb::handle self, nb::callable fn) {
            return nb::module_::import_("accgraph._decorate").attr("region_decorator")(self, fn);
          },
          nb::arg("fn"),
          nb::sig("def __call__(self, fn: collections.abc.Callable[..., typing.Any]) -> "
                  "collections.abc.Callable[..., typing.Any]"),
          "Decorates `fn`: each call runs inside this region (functools.wraps keeps its name). "
          "InvalidArgumentError for a generator, async generator or coroutine function.");
}

// What the region is: its name and lane.
void def_region_attributes(nb::class_<PyRegion>& cls) {
  cls.def_ro("name", &PyRegion::name, "The region's name.")
      .def_ro("lane", &PyRegion::lane, "The region's lane ('' for the stream's own track).")
      .def("__repr__", [](const PyRegion& r) {
        const auto exited = static_cast<size_t>(std::count_if(
            r.open.begin(), r.open.end(), [](const RegionEntry& e) { return e.ending; }));
        return "<accgraph.Region '" + r.name + "' open=" + std::to_string(r.open.size() - exited) +
               (exited != 0 ? " ending=" + std::to_string(exited) : std::string()) + ">";
      });
}
}  // namespace

PyRegion::~PyRegion() {
  if (open.empty()) return;
  // Regions left open end here, innermost first (the C++ destructor logs a failure); ending
  // one may wait for the stream's work, which may need the GIL. No other thread can reach
  // this object any more.
  GilRelease release;
  while (!open.empty()) open.pop_back();
}


void bind_region(nb::module_& m) {
  m.def("_set_default_stream_provider", &set_default_stream_provider, nb::arg("provider").none(),
        nb::sig("def _set_default_stream_provider(provider: collections.abc.Callable[[], Stream] "
                "| None) -> None"),
        "For accgraph._default_stream: the provider region entries call (Note [Default "
        "stream]); None: none.");
  nb::class_<PyRegion> cls(
      m, "Region",
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
      "of the calling thread (Note [Region entries]). Regions on one stream "
      "nest, from one thread at a time: an entry while another thread's region "
      "is open on its stream raises InvalidStateError (REGION_ORDER); give "
      "each thread a stream of its own.\n\n"
      "The decorator refuses generator, async generator and coroutine "
      "functions (InvalidArgumentError): calling one only creates the "
      "generator or coroutine object, so the region would end before any of "
      "the work ran. Open the region inside the function body (`with "
      "prof.region(...):`) or around the loop that consumes the generator.");
  def_region_entries(cls);
  def_region_attributes(cls);
}

}  // namespace accgraph::python
