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
// own C++ region (audit 2026-11-25 #18, #19). Creating and ending a C++ region may wait for the
// stream, so it runs without the GIL; the entries are pushed, marked and removed with the GIL
// held, and an entry being ended stays in `open` until its end() succeeded.
//
// __exit__ ends an entry of the calling thread, its innermost one (a thread without one, since
// enter and exit may be on different threads, takes the most recent entry of any thread). On one
// stream the C++ regions nest in the order they began, which need not be the order in which the
// threads got the GIL back: so a lock per stream, taken without the GIL, orders this object's
// regions on that stream (recursive, for a sink that enters the region from inside an end that
// delivers). C++ ends only the innermost region of a stream. When a later entry of another
// thread is still open on the stream (A enters, B enters, A exits), A's exit marks its entry
// `exited` and returns; the entry ends as soon as every entry that began after it on the stream
// has ended (B's exit ends B's, then A's). So every exit ends its own thread's entry, never
// another's: until 2026-11-28 A's exit ended B's region and B's exit A's, silently swapping
// their ends (audit 2026-11-25 #19). A's region then ends where B's does, which is what nesting
// on one stream can record: it enclosed B's from its start.
std::shared_ptr<std::recursive_mutex> stream_lock(PyRegion& self, uint64_t stream_id) {
  std::shared_ptr<std::recursive_mutex>& lock = self.stream_locks[stream_id];
  if (!lock) lock = std::make_shared<std::recursive_mutex>();
  return lock;
}

void region_enter(PyRegion& self) {
  Profiler& profiler = nb::cast<PyProfiler&>(self.profiler).get();
  nb::object stream_object = self.stream.is_valid() ? self.stream : default_stream(self);
  std::shared_ptr<Stream> stream_owner = nb::cast<PyStream&>(stream_object).share();
  Stream& stream = *stream_owner;
  const uint64_t stream_id = stream.id();
  std::shared_ptr<std::recursive_mutex> order = stream_lock(self, stream_id);
  GilRelease release;
  std::lock_guard<std::recursive_mutex> ordered(*order);
  auto region = std::make_unique<Profiler::Region>(
      profiler.region(stream, self.name, self.metadata, self.lane));
  nb::gil_scoped_acquire gil;
  self.open.push_back({std::this_thread::get_id(), stream_id, std::move(region)});
}

// The index in `open` of the most recent entry not yet exited of `thread` (of any thread when
// `thread` is null), or -1.
ptrdiff_t innermost_unexited(const PyRegion& self, const std::thread::id* thread) {
  for (size_t i = self.open.size(); i-- > 0;)
    if (!self.open[i].exited && (thread == nullptr || self.open[i].thread == *thread))
      return static_cast<ptrdiff_t>(i);
  return -1;
}

// The most recent entry on `stream_id`, if it has exited (it is the next to end), or null.
// With the GIL held.
Profiler::Region* next_to_end(const PyRegion& self, uint64_t stream_id) {
  for (size_t i = self.open.size(); i-- > 0;)
    if (self.open[i].stream_id == stream_id)
      return self.open[i].exited ? self.open[i].region.get() : nullptr;
  return nullptr;
}

void region_exit(PyRegion& self) {
  const std::thread::id me = std::this_thread::get_id();
  ptrdiff_t mine = innermost_unexited(self, &me);
  if (mine < 0) mine = innermost_unexited(self, nullptr);
  if (mine < 0)
    throw Error(ErrorCode::InvalidState,
                "Profiler.region '" + self.name +
                    "': __exit__ without __enter__: use the region in a with statement");
  // Marked with the GIL held: no other exit takes this entry.
  RegionEntry& entry = self.open[static_cast<size_t>(mine)];
  entry.exited = true;
  const uint64_t stream_id = entry.stream_id;
  const Profiler::Region* const target = entry.region.get();
  std::shared_ptr<std::recursive_mutex> order = stream_lock(self, stream_id);

  GilRelease release;
  // From here no other entry of this object on the stream begins or ends.
  std::lock_guard<std::recursive_mutex> ordered(*order);
  std::exception_ptr failure;
  for (;;) {
    Profiler::Region* ending = nullptr;
    {
      nb::gil_scoped_acquire gil;
      ending = next_to_end(self, stream_id);
    }
    if (!ending) break;  // none, or a later entry is open: ours ends with it
    try {
      ending->end();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    nb::gil_scoped_acquire gil;
    auto it = std::find_if(self.open.begin(), self.open.end(),
                           [&](const RegionEntry& e) { return e.region.get() == ending; });
    // Ended, or can never end: the entry goes (unless a sink that end() called removed it). A
    // refused end (a region of other code began on the stream after it) leaves it open and
    // listed, as the C++ region is, and stops here; this thread's own entry is then not
    // exited (its exit raises: exit it again once the other region ended).
    if (it == self.open.end()) continue;
    if (ending->is_open()) {
      if (ending == target) it->exited = false;
      break;
    }
    std::unique_ptr<Profiler::Region> ended = std::move(it->region);
    self.open.erase(it);
  }
  nb::gil_scoped_acquire gil;
  // The stream's lock goes with its last entry, unless another thread holds it already.
  if (order.use_count() == 2 &&
      std::none_of(self.open.begin(), self.open.end(),
                   [&](const RegionEntry& e) { return e.stream_id == stream_id; }))
    self.stream_locks.erase(stream_id);
  if (failure) std::rethrow_exception(failure);
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
      .def(
          "__enter__", [](PyRegion& self) { region_enter(self); },
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
          "thread that opened none: the most recent one of another thread). While a region "
          "another thread opened later on the same stream is open, this one ends when that one "
          "ends (regions on one stream nest).")
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
        const auto exited = static_cast<size_t>(std::count_if(
            r.open.begin(), r.open.end(), [](const RegionEntry& e) { return e.exited; }));
        return "<accgraph.Region '" + r.name + "' open=" + std::to_string(r.open.size() - exited) +
               (exited != 0 ? " ending=" + std::to_string(exited) : std::string()) + ">";
      });
}

}  // namespace accgraph::python
