// Graph from Python: AcceleratorGraph with PyTorch's graph idioms (capture as a context manager,
// pool ids as tuples), and the map from a capturing C++ graph back to its Python owner.
#include <atomic>
#include <chrono>
#include <exception>
#include <unordered_map>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>

#include "common.hpp"

namespace accgraph::python {

namespace {

// AcceleratorGraph -> its Python owner; read and written with the GIL held.
std::unordered_map<const AcceleratorGraph*, PyGraph*>& owners() {
  static auto* map = new std::unordered_map<const AcceleratorGraph*, PyGraph*>;
  return *map;
}

struct CaptureScope {
  nb::object graph;   // PyGraph, kept alive for the block
  nb::object stream;  // PyStream
  PoolId pool;
  CaptureMode mode;
};

void capture_begin(PyGraph& self, PyStream& py_stream, PoolId pool, CaptureMode mode) {
  AcceleratorGraph& graph = *self.graph;
  std::shared_ptr<Stream> stream_owner = py_stream.share();
  Stream& stream = *stream_owner;
  GraphUse use(self.busy, "Graph", "capture_begin");
  {
    GilRelease release;
    graph.capture_begin(stream, pool, mode);
  }
  self.release_captured_buffers();         // the previous capture's, dropped with it
  self.replayed_on.add(py_stream.stream);  // replay() without a stream replays on it
}

void capture_end(PyGraph& self) {
  GraphUse use(self.busy, "Graph", "capture_end");
  GilRelease release;
  self.graph->capture_end();
}

void reset(PyGraph& self) {
  GraphUse use(self.busy, "Graph", "reset");
  {
    GilRelease release;
    self.graph->reset();
  }
  self.release_captured_buffers();
}

nb::object side_stream(PyGraph& self) {
  if (!self.side_stream.is_valid()) {
    nb::object stream_type = nb::module_::import_("accgraph._accgraph").attr("Stream");
    self.side_stream = stream_type(self.graph->backend_name());
  }
  return self.side_stream;
}

}  // namespace

PyGraph::PyGraph(std::unique_ptr<AcceleratorGraph> g) : graph(std::move(g)) {
  owners()[graph.get()] = this;
}

PyGraph::~PyGraph() {
  owners().erase(graph.get());
  {
    // Destroying a graph collects its pending reports, calling sinks.
    GilRelease release;
    graph.reset();
  }
  release_captured_buffers();
}

void PyGraph::release_captured_buffers() {
  for (nb::object& buffer : captured_buffers)
    nb::inst_ptr<PyBuffer>(buffer)->used_on.add_all(replayed_on);
  captured_buffers.clear();
  captured_calls.clear();
}

namespace {

// Note [Cycles through C++]: a host call captured into a graph is a Python callable that the C++
// graph owns (one reference, held by its PythonCallable). One that refers back to the graph (a
// closure over it, or a function whose module globals hold it) makes a cycle the garbage
// collector cannot see: the graph, and what its module holds, would never be freed. So the
// graph shows those references to the collector (tp_traverse), and clearing an unreachable
// graph resets it (tp_clear), which drops them. The borrowed pointers are valid while the C++
// graph holds its capture: every capture begins through this binding (which clears the list),
// and a capture the C++ side drops by itself (a failed capture_end, the capture stream
// destroyed) leaves the graph Empty, where they are not visited. (Profiler sinks: Note [Sink
// cycles] in profiler.cpp.)
int graph_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  PyGraph* g = nb::inst_ptr<PyGraph>(self);
  if (g->graph && g->graph->state() != GraphState::Empty)
    for (PyObject* call : g->captured_calls) Py_VISIT(call);
  for (const nb::object& buffer : g->captured_buffers) Py_VISIT(buffer.ptr());
  if (g->side_stream.is_valid()) Py_VISIT(g->side_stream.ptr());
  return 0;
}

int graph_clear(PyObject* self) {
  PyGraph* g = nb::inst_ptr<PyGraph>(self);
  if (g->graph && !g->captured_calls.empty()) {
    GilRelease release;
    try {
      g->graph->reset();
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          std::string("accgraph.Graph: resetting an unreachable graph failed: ") + e.what());
    }
  }
  g->release_captured_buffers();
  g->side_stream.reset();
  return 0;
}

PyType_Slot graph_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(graph_traverse)},
                             {Py_tp_clear, reinterpret_cast<void*>(graph_clear)},
                             {0, nullptr}};

}  // namespace

PyGraph* PyGraph::capturing_on(const Stream& stream) {
  AcceleratorGraph* graph = stream.capturing_graph();
  if (graph == nullptr) return nullptr;
  auto it = owners().find(graph);
  return it == owners().end() ? nullptr : it->second;
}

namespace {
thread_local std::exception_ptr pending_error;  // raise_cpp_error's, for its rethrow
}  // namespace

void add_plain_method(nb::handle cls, PyMethodDef& method) {
  nb::object descriptor =
      nb::steal(PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &method));
  if (!descriptor.is_valid()) throw nb::python_error();
  nb::setattr(cls, method.ml_name, descriptor);
}

PyObject* raise_cpp_error(std::exception_ptr error) {
  pending_error = std::move(error);
  static PyObject* rethrow = nb::cpp_function([] {
                               std::exception_ptr pending = std::move(pending_error);
                               pending_error = nullptr;
                               std::rethrow_exception(pending);
                             })
                                 .release()
                                 .ptr();  // kept for the process: nanobind functions are immortal
  PyObject* result = PyObject_CallNoArgs(rethrow);
  Py_XDECREF(result);  // always null: the function throws
  return nullptr;
}

namespace {

using GraphClass = nb::class_<PyGraph>;

// Note [Replay keeps the GIL]: Graph.replay holds the GIL for the whole C++ replay, the backend's
// launch included, and gives it up only around the waits its timing hooks make
// (AcceleratorGraph::replay(waits), Note [Replay waits] in core/graph.cpp; GilWaits), while no
// Python host call is alive (python_host_calls_alive()). Then nothing a launch may wait for
// needs the GIL: queued work and a device draining a full launch queue run no Python, and the
// only Python code on other threads that a launch waits for, a sink on the background
// collector, runs while the launch waits for the ring's lock, where the hooks give the GIL up.
// A host call, eager or captured (the host worker's, or CUDA's callback thread, takes the GIL
// to run it), may sit ahead of the launch in a queue the launch waits on, so while one exists
// the replay gives the GIL up for all of the C++ replay, as every replay did before (also after
// a captured one's CUDA graph was dropped, until CUDA runs the user object's destructor on its
// own thread, which it may defer: seen still pending 10 s after reset() on the H200). Giving it
// up and taking it back was 425 of the 588 instructions the binding and the core added to the
// backend's launch (bench/callgrind/run_python_replay.sh), and Python's replay() is to cost under
// 0.5x of torch.cuda.CUDAGraph.replay() (bench/README.md, "Targets and figures the code cites"). A
// launch that blocks on a full device queue holds the GIL meanwhile, as a PyTorch kernel launch
// does. No new host call can appear while the GIL is held; one made during a wait that gave the GIL
// up is covered by Note [Replay waits] (the rest of that replay gives the GIL up around the
// backend's launch).
// Graph.replay(stream=None): the capture stream when `stream` is null (GIL held on entry).
void replay(PyGraph& self, PyStream* stream) {
  AcceleratorGraph& graph = *self.graph;
  GraphUse use(self.busy, "Graph", "replay");
  std::shared_ptr<Stream> s_owner;
  if (stream != nullptr) {
    s_owner = stream->share();
    if (!self.captured_buffers.empty()) self.replayed_on.add(stream->stream);
  }
  if (python_host_calls_alive()) {
    GilRelease release;
    s_owner ? graph.replay(*s_owner) : graph.replay();
    return;
  }
  GilWaits waits;
  try {
    s_owner ? graph.replay(*s_owner, waits) : graph.replay(waits);
  } catch (...) {
    waits.park_if_lost();  // Note [Threads at exit]: no Python without the GIL
    throw;
  }
  waits.park_if_lost();
}

// Note [Replay method]: Graph.replay is a plain CPython method (METH_FASTCALL), not a nanobind
// function: nanobind's dispatch of a method with a keyword default (the bound-method call, the
// overload loop with its default substitution, the argument casters) cost 340 instructions per
// call, 41% of what the binding and the core add to the backend's launch (callgrind,
// bench/callgrind/run_python_replay.sh), and Python's replay() is to cost under 0.5x of
// torch.cuda.CUDAGraph.replay() (bench/README.md, "Targets and figures the code cites"). The
// arguments are the nanobind version's (stream=None, positional or keyword, an accgraph.Stream or
// None) and so are the errors: a C++ exception is rethrown inside a nanobind function
// (raise_cpp_error), whose translators raise what nanobind would. stubgen cannot type it (it would
// write a MethodDescriptorType attribute): its stub entry comes from
// bindings/python/stubgen_patterns.txt; inspect.signature reads the docstring.
PyObject* replay_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  Py_ssize_t given = nargs + (kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0);
  if (given > 1)
    return PyErr_Format(PyExc_TypeError,
                        "Graph.replay() takes at most 1 argument (stream) (%zd given): pass "
                        "the stream to replay on, or nothing for the capture stream",
                        given);
  if (kwnames != nullptr && nargs == 0 && given == 1) {
    static const KeywordNames<1> names({"stream"});
    PyObject* name = PyTuple_GET_ITEM(kwnames, 0);
    if (names.find(name) != 0)
      return PyErr_Format(PyExc_TypeError,
                          "Graph.replay() got an unexpected keyword argument '%U': its only "
                          "argument is stream",
                          name);
  }
  PyStream* stream = nullptr;
  if (given == 1 && args[0] != Py_None && !nb::try_cast<PyStream*>(nb::handle(args[0]), stream))
    return PyErr_Format(PyExc_TypeError,
                        "Graph.replay(): stream must be an accgraph.Stream or None, not %s: "
                        "pass a Stream of the graph's backend and device",
                        Py_TYPE(args[0])->tp_name);
  if (!nb::inst_ready(self))
    return PyErr_Format(PyExc_TypeError,
                        "Graph.replay(): the Graph is not initialized: create it with "
                        "accgraph.Graph(backend)");
  try {
    replay(*nb::inst_ptr<PyGraph>(self), stream);
  } catch (...) {
    return raise_cpp_error(std::current_exception());
  }
  Py_RETURN_NONE;
}

PyMethodDef replay_method_def = {
    "replay", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&replay_method)),
    METH_FASTCALL | METH_KEYWORDS,
    "replay($self, /, stream=None)\n--\n\n"
    "Replays on `stream` (an accgraph.Stream of the same backend and device, or None), or on "
    "the capture stream when None (InvalidStateError once that stream was dropped). Gives "
    "the GIL up only where the replay waits for another thread, or throughout while a Python "
    "host_call callable is alive."};

// Capturing, instantiating, replaying and resetting: the C++ life cycle.
void def_graph_capture_and_replay(GraphClass& cls) {
  cls.def(
         "__init__",
         [](PyGraph* self, std::optional<std::string> backend, bool keep_graph) {
           GraphArgs args;
           args.keep_graph = keep_graph;
           auto graph = [&] {
             GilRelease release;
             return backend ? std::make_unique<AcceleratorGraph>(*backend, args)
                            : std::make_unique<AcceleratorGraph>(args);
           }();
           new (self) PyGraph(std::move(graph));
         },
         nb::arg("backend") = nb::none(), nb::arg("keep_graph") = false,
         "A graph on `backend` (None: the default backend). With keep_graph=True, "
         "capture_end keeps the captured graph and instantiation happens on instantiate() or "
         "the first replay().")
      .def(
          "capture_begin",
          [](PyGraph& self, PyStream& stream, std::optional<std::pair<uint64_t, uint64_t>> pool,
             std::optional<EnumOrName<CaptureMode>> mode) {
            capture_begin(self, stream, parse_pool(pool), parse_capture_mode(mode));
          },
          nb::arg("stream"), nb::arg("pool") = nb::none(), nb::arg("mode") = nb::none(),
          "Starts capturing the work enqueued on `stream` (of this graph's backend). `pool`: "
          "another graph's pool() to share it, None for a new private pool. `mode`: a "
          "CaptureMode or its name ('default', 'global', 'thread_local', 'relaxed'); None is "
          "the backend's default.")
      .def("capture_end", &capture_end,
           "Ends the capture and, unless keep_graph, instantiates. A failure leaves the graph "
           "empty and reusable.")
      .def(
          "instantiate",
          [](PyGraph& self) {
            GraphUse use(self.busy, "Graph", "instantiate");
            GilRelease release;
            self.graph->instantiate();
          },
          "Instantiates a graph captured with keep_graph=True.")
      .def("reset", &reset,
           "Drops the capture (aborting one in progress); the graph may capture again.");
}

// PyTorch's idioms (pool ids, debug dumps) and the capture context manager.
void def_graph_extras(GraphClass& cls) {
  cls.def(
         "pool",
         [](PyGraph& self) {
           PoolId pool = self.graph->pool();
           return std::pair<uint64_t, uint64_t>(pool.first, pool.second);
         },
         "The memory pool id as a (first, second) tuple; pass it as `pool` to share it.")
      .def(
          "enable_debug_mode",
          [](PyGraph& self) {
            GraphUse use(self.busy, "Graph", "enable_debug_mode");
            self.graph->enable_debug_mode();
          },
          "Keeps what debug_dump() needs (call before capture_begin).")
      .def(
          "debug_dump",
          [](PyGraph& self, nb::handle path) {
            std::string file = fs_path(path);
            GraphUse use(self.busy, "Graph", "debug_dump");
            GilRelease release;
            self.graph->debug_dump(file);
          },
          nb::arg("path"), nb::sig("def debug_dump(self, path: str | os.PathLike[str]) -> None"),
          "Writes the backend's description of the captured graph to `path` (DOT on cuda).")
      .def(
          "capture",
          [](nb::handle self, std::optional<nb::handle> stream,
             std::optional<std::pair<uint64_t, uint64_t>> pool,
             std::optional<EnumOrName<CaptureMode>> mode) {
            PyGraph& graph = nb::cast<PyGraph&>(self);
            nb::object on = stream && !stream->is_none() ? nb::borrow(*stream) : side_stream(graph);
            if (!nb::isinstance<PyStream>(on))
              throw nb::type_error("Graph.capture: stream must be an accgraph.Stream or None");
            return CaptureScope{nb::borrow(self), on, parse_pool(pool), parse_capture_mode(mode)};
          },
          nb::arg("stream").none() = nb::none(), nb::arg("pool") = nb::none(),
          nb::arg("mode") = nb::none(),
          nb::sig("def capture(self, stream: Stream | None = None, pool: tuple[int, int] | None "
                  "= None, mode: CaptureMode | str | None = None) -> CaptureScope"),
          "A context manager capturing the block's work on `stream` (None: a stream this graph "
          "creates on its backend and keeps, so that replay() works after the block). An "
          "exception inside the block aborts the capture and leaves the graph reusable.");
}

// Its id, state and counters, and the C++ replay loop of bench/python.
void def_graph_properties(GraphClass& cls) {
  cls.def_prop_ro(
         "capture_stream", [](PyGraph& self) { return side_stream(self); },
         "The stream capture(None) and accgraph.graph() capture on (created on first use).")
      .def_prop_ro(
          "id", [](PyGraph& self) { return self.graph->id(); },
          "A stable process-unique id (ReplayReport.graph_id).")
      .def_prop_ro(
          "state", [](PyGraph& self) { return self.graph->state(); }, "The GraphState.")
      .def_prop_ro(
          "backend", [](PyGraph& self) { return self.graph->backend_name(); },
          "The backend's name.")
      .def_prop_ro(
          "device", [](PyGraph& self) { return self.graph->device(); },
          "The device of the last capture (-1 before the first).")
      .def_prop_ro(
          "keep_graph", [](PyGraph& self) { return self.graph->args().keep_graph; },
          "Whether capture_end keeps the captured graph (Graph(keep_graph=...)).")
      .def_prop_ro(
          "replay_count", [](PyGraph& self) { return self.graph->replay_count(); },
          "Completed replay() calls since the last capture.")
      .def_prop_ro(
          "capture_stream_id", [](PyGraph& self) { return self.graph->capture_stream_id(); },
          "Stream.id of the stream the current or last capture began on (0 before the first).")
      .def_prop_ro(
          "stats",
          [](PyGraph& self) {
            GilRelease release;
            return self.graph->stats();
          },
          "The backend's counters for this graph (GraphStats).")
      .def(
          "_replay_loop_ns",
          [](PyGraph& self, IntArg count_arg) {
            const auto count = int_arg<uint64_t>(count_arg, "Graph._replay_loop_ns: count");
            GraphUse use(self.busy, "Graph", "_replay_loop_ns");
            GilRelease release;
            auto start = std::chrono::steady_clock::now();
            for (uint64_t i = 0; i < count; ++i) self.graph->replay();
            return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - start)
                                             .count());
          },
          nb::arg("count"),
          "For bench/python: calls replay() `count` times in a C++ loop, returns the "
          "nanoseconds it took (the C++ baseline of Python's replay()).")
      .def("__repr__", [](PyGraph& self) {
        const AcceleratorGraph& g = *self.graph;
        return "<accgraph.Graph " + std::to_string(g.id()) + " backend='" + g.backend_name() +
               "' state=" + to_string(g.state()) + " replays=" + std::to_string(g.replay_count()) +
               ">";
      });
}

// Graph.capture() and accgraph.graph().
void bind_capture_scope(nb::module_& m) {
  nb::class_<CaptureScope>(m, "CaptureScope",
                           "The context manager of Graph.capture() and accgraph.graph(): "
                           "capture_begin on entry, capture_end on a normal exit; an exception "
                           "inside the block aborts the capture (reset) and leaves the graph "
                           "reusable.")
      .def(
          "__enter__",
          [](CaptureScope& self) {
            capture_begin(nb::cast<PyGraph&>(self.graph), nb::cast<PyStream&>(self.stream),
                          self.pool, self.mode);
            return self.stream;
          },
          nb::sig("def __enter__(self) -> Stream"),
          "Begins the capture; returns the stream captured on.")
      .def(
          "__exit__",
          [](CaptureScope& self, nb::handle exc_type, nb::handle, nb::handle) {
            PyGraph& graph = nb::cast<PyGraph&>(self.graph);
            if (exc_type.is_none())
              capture_end(graph);
            else
              reset(graph);  // abort; the exception goes on
            return false;
          },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none(),
          nb::sig("def __exit__(self, exc_type: type[BaseException] | None, exc_value: "
                  "BaseException | None, traceback: types.TracebackType | None) -> bool"),
          "Ends the capture (instantiating unless keep_graph), or aborts it on an exception.");
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::enum_<GraphState>(m, "GraphState", "Where a Graph is in its life cycle.")
      .value("EMPTY", GraphState::Empty, "Nothing captured (new, or after reset()).")
      .value("CAPTURING", GraphState::Capturing, "Between capture_begin and capture_end.")
      .value("CAPTURED", GraphState::Captured, "Captured, not yet instantiated (keep_graph=True).")
      .value("INSTANTIATED", GraphState::Instantiated, "Ready to replay.");

  nb::class_<GraphStats>(m, "GraphStats", "Counters a backend's graph may expose.")
      .def_ro("nodes", &GraphStats::nodes, "Operations in the captured graph, when known.")
      .def_ro("instantiations", &GraphStats::instantiations, "Executables built from scratch.")
      .def_ro("updates", &GraphStats::updates, "Executables updated in place after a re-capture.")
      .def("__repr__", [](const GraphStats& s) {
        return "GraphStats(nodes=" + std::to_string(s.nodes) +
               ", instantiations=" + std::to_string(s.instantiations) +
               ", updates=" + std::to_string(s.updates) + ")";
      });

  bind_capture_scope(m);

  GraphClass cls(m, "Graph", nb::type_slots(graph_slots),
                 "A graph captured once on a stream and replayed many times, on any "
                 "backend (accgraph::AcceleratorGraph; like torch.cuda.CUDAGraph).\n\n"
                 "    g = accgraph.Graph('host')\n"
                 "    with g.capture(stream):\n"
                 "        stream.fill(buf, 1)   # recorded, not run\n"
                 "    g.replay()\n\n"
                 "Use a graph from one thread at a time.");
  def_graph_capture_and_replay(cls);
  def_graph_extras(cls);
  def_graph_properties(cls);
  // Note [Replay method]
  add_plain_method(cls, replay_method_def);
}

}  // namespace accgraph::python
