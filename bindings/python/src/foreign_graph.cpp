// ForeignGraph from Python: a graph its owner (PyTorch's torch.cuda.CUDAGraph, code calling the
// native API) captures and launches natively, told to accgraph so that a Profiler times it.
#include <array>
#include <exception>
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "common.hpp"

#include <structmember.h>  // after Python.h (common.hpp): PyMemberDef's T_ types

namespace accgraph::python {

namespace {

// Unwinds ForeignGraph::launch when the owner's launch callable raised: the C++ call counts no
// launch, and the Python exception, kept aside, is raised again when the C++ call is over.
struct LaunchCallableRaised final : std::exception {
  const char* what() const noexcept override {
    return "ForeignGraph.launch: the launch callable raised";
  }
};

// Note [Launch callables]: launch(stream, fn) holds the GIL throughout, `fn` included, except
// where the C++ launch may wait for another thread (Note [Launch waits] in
// include/accgraph/foreign_graph.hpp: a full marker ring, Immediate delivery, the first launch,
// replay observers, a collection holding the ring's lock): there it gives the GIL up
// (GilWaits), so that a sink on the background
// collector's thread, which takes the GIL, never waits for this thread while this thread waits
// for it. The usual launch (room in the ring, lazy delivery) gives it up only inside `fn`, as
// the owner's own launch does (torch's replay drops it around cudaGraphLaunch): before issue
// 21's sixth session it was given up for all of the C++ launch and taken back to call `fn`,
// two round trips more per launch. What `fn` raises reaches the caller as that same exception
// (not a C++ error carrying its text), and the launch is not counted. The GIL goes back and
// forth with this thread's own state (PyEval_SaveThread/RestoreThread): the C++ launch calls
// release and reacquire on this thread (GilWaits in common.hpp).

// `owner`: null (None), or what `fn` is called with (fn(owner)).
void launch(PyForeignGraph& self, PyStream& py_stream, PyObject* fn, PyObject* owner,
            bool trusted) {
  std::shared_ptr<Stream> stream_owner = py_stream.share();
  Stream& stream = *stream_owner;
  GraphUse use(self.busy, "ForeignGraph", "launch");
  GilWaits waits;
  std::optional<nb::python_error> raised;  // with the GIL held throughout
  try {
    self.graph->launch(
        stream,
        [&] {
          // The interpreter exits (Note [Threads at exit]): `fn` is not called.
          if (waits.lost())
            throw Error(ErrorCode::InvalidState,
                        "ForeignGraph.launch: the interpreter is exiting: not launched");
          PyObject* result =
              owner != nullptr ? PyObject_CallOneArg(fn, owner) : PyObject_CallNoArgs(fn);
          if (result == nullptr) {
            raised.emplace();  // takes the error fn raised: none is pending while C++ unwinds
            throw LaunchCallableRaised();
          }
          Py_DECREF(result);
        },
        trusted ? LaunchCheck::Trusted : LaunchCheck::Fenced, &waits);
  } catch (const LaunchCallableRaised&) {
    waits.park_if_lost();
    nb::python_error error = std::move(*raised);
    raised.reset();
    throw error;  // nanobind restores it: the caller sees fn's own exception
  } catch (...) {
    waits.park_if_lost();  // Note [Threads at exit]: no Python without the GIL
    throw;
  }
  waits.park_if_lost();
}

// ForeignGraph.launch's keyword arguments (Note [Launch method]) into `slots` (stream, fn, owner,
// trusted); false, with a TypeError set, for an unknown or repeated one.
bool take_launch_keywords(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                          const std::array<PyObject**, 4>& slots) {
  const Py_ssize_t keywords = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  // A call site's keyword names are interned strings, so they are compared by identity first
  // (accgraph.torch's benchmark split passes owner= and trusted= on every launch: comparing the
  // text cost about 240 instructions per launch: callgrind, bench/callgrind/foreign_launch.py).
  static const KeywordNames<4> names({"stream", "fn", "owner", "trusted"});
  for (Py_ssize_t i = 0; i < keywords; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    const int index = names.find(name);
    PyObject** slot = index >= 0 ? slots[index] : nullptr;
    if (slot == nullptr) {
      PyErr_Format(PyExc_TypeError,
                   "ForeignGraph.launch() got an unexpected keyword argument '%U': its "
                   "arguments are stream, fn, owner and trusted",
                   name);
      return false;
    }
    if (*slot != nullptr) {
      PyErr_Format(PyExc_TypeError, "ForeignGraph.launch() got multiple values for argument '%U'",
                   name);
      return false;
    }
    *slot = args[nargs + i];
  }
  return true;
}

// Note [Launch method]: ForeignGraph.launch is the call accgraph.torch makes on every replay of
// a timed torch graph (Note [Wrapping CUDAGraph]; that loop's target is at most 1.10x the untimed
// one: bench/README.md, "Targets and figures the code cites"), so like Graph.replay (Note [Replay
// method] in graph.cpp) it is a plain CPython method: nanobind's dispatch of a keyword argument
// (trusted=True), its casters and the GIL's PyGILState round trip around `fn` cost 660-880
// instructions more per launch (bench/callgrind/run_foreign_launch.sh, host backend: 7157-7341 ->
// 6460-6494 per launch with a bound-method callable, against 3226-3567 for the owner's launch
// alone). The arguments are the nanobind version's (stream and fn positional or keyword, trusted
// keyword-only, a bool) and the errors TypeErrors naming them; its stub entry comes from
// bindings/python/stubgen_patterns.txt.
PyObject* launch_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  if (nargs > 2)
    return PyErr_Format(PyExc_TypeError,
                        "ForeignGraph.launch() takes 2 positional arguments (stream, fn) but "
                        "%zd were given: pass trusted by keyword (trusted=True)",
                        nargs);
  PyObject* stream_arg = nargs > 0 ? args[0] : nullptr;
  PyObject* fn = nargs > 1 ? args[1] : nullptr;
  PyObject* trusted_arg = nullptr;
  PyObject* owner = nullptr;
  if (!take_launch_keywords(args, nargs, kwnames, {&stream_arg, &fn, &owner, &trusted_arg}))
    return nullptr;
  if (stream_arg == nullptr || fn == nullptr)
    return PyErr_Format(PyExc_TypeError,
                        "ForeignGraph.launch() missing required argument '%s': call "
                        "launch(stream, fn), fn enqueuing one execution of the graph",
                        stream_arg == nullptr ? "stream" : "fn");
  PyStream* stream = nullptr;
  if (!nb::try_cast<PyStream*>(nb::handle(stream_arg), stream) || stream == nullptr)
    return PyErr_Format(PyExc_TypeError,
                        "ForeignGraph.launch(): stream must be an accgraph.Stream, not %s: pass "
                        "the Stream wrapping the queue the owner launches on",
                        Py_TYPE(stream_arg)->tp_name);
  if (PyCallable_Check(fn) == 0)
    return PyErr_Format(PyExc_TypeError,
                        "ForeignGraph.launch(): fn must be callable, not %s: pass the owner's "
                        "launch (e.g. torch_graph.replay)",
                        Py_TYPE(fn)->tp_name);
  if (trusted_arg != nullptr && trusted_arg != Py_True && trusted_arg != Py_False)
    return PyErr_Format(PyExc_TypeError,
                        "ForeignGraph.launch(): trusted must be True or False, not %s",
                        Py_TYPE(trusted_arg)->tp_name);
  if (!nb::inst_ready(self))
    return PyErr_Format(PyExc_TypeError,
                        "ForeignGraph.launch(): the ForeignGraph is not initialized: create it "
                        "with accgraph.ForeignGraph(backend)");
  try {
    launch(*nb::inst_ptr<PyForeignGraph>(self), *stream, fn, owner == Py_None ? nullptr : owner,
           trusted_arg == Py_True);
  } catch (...) {
    return raise_cpp_error(std::current_exception());
  }
  Py_RETURN_NONE;
}

PyMethodDef launch_method_def = {
    "launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&launch_method)),
    METH_FASTCALL | METH_KEYWORDS,
    "launch($self, /, stream, fn, *, owner=None, trusted=False)\n--\n\n"
    "Launches the captured graph through `fn()` (`fn(owner)` when `owner` is not None: the "
    "owner's launch method and its object, with no bound method made per launch), which "
    "must enqueue exactly one execution of "
    "it on `stream` (or on the native queue `stream` wraps) and nothing else: the marker ring "
    "is made ready first (giving the GIL up only where that waits: a full ring, Immediate "
    "delivery), the launch counted after `fn` returns. What `fn` "
    "raises propagates unchanged and counts no launch. An `fn` that breaks the rule (launches "
    "nothing, or twice) gets an unmeasurable report, never a hang, through a fence enqueued "
    "after it (one eager marker sequence); `trusted=True` skips the fence, and the question "
    "whether `stream` is capturing, for an owner whose launch runs the graph exactly once by "
    "construction and refuses a capturing stream (accgraph.torch: CUDAGraph.replay). "
    "InvalidStateError before a finished capture."};

// Note [Owner replay]: accgraph.torch gives each timed torch.cuda.CUDAGraph instance a `replay`
// of its own (Note [Wrapping CUDAGraph] in accgraph/torch/_graphs.py). That call is the one a
// back-to-back replay loop pays on every iteration (at most 1.10x the untimed loop:
// bench/README.md, "Targets and figures the code cites"), and as a Python function it cost about as
// much again as ForeignGraph.launch itself (bench_torch part 5's split on the H100: wrapper
// +0.27-0.65 us, launch +0.61-0.64 us). So it is this C object
// (bench/callgrind/run_foreign_launch.sh, torch stand-in: a timed replay() costs 1,788 instructions
// more than an untimed one, against 4,158 with the Python function): a call without arguments while
// `enabled` reads the owner's current native queue (`current_queue(device)`, PyTorch's raw-stream
// read), finds its accgraph Stream (the last one found is kept; else `streams[(device, queue)]`)
// and launches `fn(owner)` through the ForeignGraph, trusted, with the GIL held (Note [Launch
// callables]). Everything else (a call with arguments, `enabled` cleared, the owner gone, a queue
// with no Stream yet) goes to `fallback(*args, **kwargs)`, which accgraph.torch writes in Python.
// The owner is held weakly; `__wrapped__` is `fn`.
struct OwnerReplay {
  PyObject ob_base;  // PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* foreign;        // the ForeignGraph
  PyObject* fn;             // the owner's unbound launch
  PyObject* owner;          // a weak reference to the owner
  PyObject* current_queue;  // current_queue(device) -> the native queue's handle (int)
  PyObject* device;         // int
  PyObject* streams;        // dict: (device, queue handle) -> Stream
  PyObject* fallback;
  PyObject* last_queue;  // the queue handle last found in `streams`, and its Stream
  PyObject* last_stream;
  char enabled;
};

PyObject* owner_replay_fallback(OwnerReplay* self, PyObject* const* args, size_t nargsf,
                                PyObject* kwnames) {
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

// The Stream wrapping the owner's current queue, borrowed (kept by `last_stream`); null with no
// error set when `streams` has none yet (the fallback wraps it), null with an error on failure.
PyObject* owner_replay_stream(OwnerReplay* self) {
  PyObject* queue = PyObject_CallOneArg(self->current_queue, self->device);
  if (queue == nullptr) return nullptr;
  if (self->last_queue != nullptr) {
    const int same = PyObject_RichCompareBool(queue, self->last_queue, Py_EQ);
    if (same != 0) {
      Py_DECREF(queue);
      return same > 0 ? self->last_stream : nullptr;
    }
  }
  PyObject* key = PyTuple_Pack(2, self->device, queue);
  if (key == nullptr) {
    Py_DECREF(queue);
    return nullptr;
  }
  PyObject* stream = PyDict_GetItemWithError(self->streams, key);  // borrowed
  Py_DECREF(key);
  if (stream == nullptr) {
    Py_DECREF(queue);
    return nullptr;
  }
  Py_INCREF(stream);
  Py_XSETREF(self->last_queue, queue);
  Py_XSETREF(self->last_stream, stream);
  return stream;
}

PyObject* owner_replay_call(PyObject* callable, PyObject* const* args, size_t nargsf,
                            PyObject* kwnames) {
  auto* self = reinterpret_cast<OwnerReplay*>(callable);
  if (self->fallback == nullptr)  // cleared by the cycle collector
    return PyErr_Format(PyExc_RuntimeError, "accgraph.torch: this replay's graph is gone");
  if (!self->enabled || PyVectorcall_NARGS(nargsf) != 0 ||
      (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0))
    return owner_replay_fallback(self, args, nargsf, kwnames);
  PyObject* owner = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  if (PyWeakref_GetRef(self->owner, &owner) < 0) return nullptr;
#else
  owner = PyWeakref_GetObject(self->owner);  // borrowed
  if (owner == nullptr) return nullptr;
  if (owner == Py_None) owner = nullptr;
  Py_XINCREF(owner);
#endif
  if (owner == nullptr) return owner_replay_fallback(self, args, nargsf, kwnames);
  PyObject* stream = owner_replay_stream(self);
  PyStream* py_stream = nullptr;
  if (stream == nullptr || !nb::try_cast<PyStream*>(nb::handle(stream), py_stream) ||
      py_stream == nullptr) {
    Py_DECREF(owner);
    if (PyErr_Occurred() != nullptr) return nullptr;
    return owner_replay_fallback(self, args, nargsf, kwnames);
  }
  // Held for the launch: `fn`, or a sink during a wait, may run Python that replaces
  // last_stream (a replay of this object on another thread).
  Py_INCREF(stream);
  PyObject* result = Py_None;
  try {
    launch(*nb::inst_ptr<PyForeignGraph>(self->foreign), *py_stream, self->fn, owner, true);
    Py_INCREF(result);
  } catch (...) {
    result = raise_cpp_error(std::current_exception());
  }
  Py_DECREF(stream);
  Py_DECREF(owner);
  return result;
}

int owner_replay_traverse(PyObject* object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<OwnerReplay*>(object);
  Py_VISIT(Py_TYPE(object));
  Py_VISIT(self->foreign);
  Py_VISIT(self->fn);
  Py_VISIT(self->owner);
  Py_VISIT(self->current_queue);
  Py_VISIT(self->device);
  Py_VISIT(self->streams);
  Py_VISIT(self->fallback);
  Py_VISIT(self->last_queue);
  Py_VISIT(self->last_stream);
  return 0;
}

int owner_replay_clear(PyObject* object) {
  auto* self = reinterpret_cast<OwnerReplay*>(object);
  Py_CLEAR(self->foreign);
  Py_CLEAR(self->fn);
  Py_CLEAR(self->owner);
  Py_CLEAR(self->current_queue);
  Py_CLEAR(self->device);
  Py_CLEAR(self->streams);
  Py_CLEAR(self->fallback);
  Py_CLEAR(self->last_queue);
  Py_CLEAR(self->last_stream);
  return 0;
}

void owner_replay_dealloc(PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  PyObject_GC_UnTrack(object);
  owner_replay_clear(object);
  type->tp_free(object);
  Py_DECREF(type);
}

PyObject* owner_replay_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"foreign", "fn",      "owner",    "current_queue",
                                "device",  "streams", "fallback", nullptr};
  PyObject *foreign, *fn, *owner, *current_queue, *device, *streams, *fallback;
  if (PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO!O:_OwnerReplay", const_cast<char**>(names),
                                  &foreign, &fn, &owner, &current_queue, &device, &PyDict_Type,
                                  &streams, &fallback) == 0)
    return nullptr;
  PyForeignGraph* graph = nullptr;
  if (!nb::try_cast<PyForeignGraph*>(nb::handle(foreign), graph) || graph == nullptr)
    return PyErr_Format(PyExc_TypeError, "_OwnerReplay: foreign must be an accgraph.ForeignGraph");
  if (PyCallable_Check(fn) == 0 || PyCallable_Check(current_queue) == 0 ||
      PyCallable_Check(fallback) == 0)
    return PyErr_Format(PyExc_TypeError,
                        "_OwnerReplay: fn, current_queue and fallback must be callable");
  if (!PyLong_Check(device))
    return PyErr_Format(PyExc_TypeError, "_OwnerReplay: device must be an int");
  PyObject* ref = PyWeakref_NewRef(owner, nullptr);
  if (ref == nullptr) return nullptr;
  auto* self = reinterpret_cast<OwnerReplay*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    Py_DECREF(ref);
    return nullptr;
  }
  self->vectorcall = owner_replay_call;
  self->foreign = Py_NewRef(foreign);
  self->fn = Py_NewRef(fn);
  self->owner = ref;
  self->current_queue = Py_NewRef(current_queue);
  self->device = Py_NewRef(device);
  self->streams = Py_NewRef(streams);
  self->fallback = Py_NewRef(fallback);
  self->enabled = 1;
  return reinterpret_cast<PyObject*>(self);
}

PyMemberDef owner_replay_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(OwnerReplay, vectorcall), READONLY, nullptr},
    {"enabled", T_BOOL, offsetof(OwnerReplay, enabled), 0,
     "Whether a call launches through the ForeignGraph (else it goes to the fallback)."},
    {"__wrapped__", T_OBJECT, offsetof(OwnerReplay, fn), READONLY, "The owner's launch."},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot owner_replay_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(&owner_replay_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(&owner_replay_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&owner_replay_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&owner_replay_clear)},
    {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
    {Py_tp_members, owner_replay_members},
    {Py_tp_doc, const_cast<char*>(
                    "_OwnerReplay(foreign, fn, owner, current_queue, device, streams, fallback): "
                    "accgraph.torch's per-instance replay (Note [Owner replay] in "
                    "bindings/python/src/foreign_graph.cpp); not a public API.")},
    {0, nullptr}};

PyType_Spec owner_replay_spec = {
    "accgraph._accgraph._OwnerReplay", sizeof(OwnerReplay), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, owner_replay_slots};

std::string foreign_repr(const PyForeignGraph& self) {
  const AcceleratorGraph& g = self.graph->graph();
  return "<accgraph.ForeignGraph " + std::to_string(g.id()) + " backend='" + g.backend_name() +
         "' state=" + to_string(g.state()) + " launches=" + std::to_string(g.replay_count()) + ">";
}

// A method that runs `method` of the graph without the GIL, one call on the graph at a time
// (GraphUse); `what` names it in the error.
auto unlocked_call(void (ForeignGraph::*method)(), const char* what) {
  return [method, what](PyForeignGraph& self) {
    GraphUse use(self.busy, "ForeignGraph", what);
    GilRelease release;
    (self.graph.get()->*method)();
  };
}

// Making it, and what its owner tells it about a capture.
void def_foreign_graph_capture(nb::class_<PyForeignGraph>& cls) {
  cls.def(
         "__init__",
         [](PyForeignGraph* self, std::optional<std::string> backend) {
           auto graph = [&] {
             GilRelease release;
             return std::make_unique<ForeignGraph>(backend.value_or(""));
           }();
           new (self) PyForeignGraph(std::move(graph));
         },
         nb::arg("backend") = nb::none(),
         "A foreign graph whose work runs on streams of `backend` (None: the default "
         "backend).")
      .def(
          "capture_begin",
          [](PyForeignGraph& self, PyStream& stream) {
            std::shared_ptr<Stream> stream_owner = stream.share();
            Stream& s = *stream_owner;
            GraphUse use(self.busy, "ForeignGraph", "capture_begin");
            GilRelease release;
            self.graph->capture_begin(s);
          },
          nb::arg("stream"),
          "The owner's native capture has begun on the queue `stream` wraps: regions on "
          "`stream` record into that capture from now on. InvalidStateError when `stream` is "
          "not capturing, or captures into another accgraph graph; InvalidArgumentError for a "
          "stream of another backend.")
      .def(
          "capture_end",
          [](PyForeignGraph& self, bool untimed_copy) {
            GraphUse use(self.busy, "ForeignGraph", "capture_end");
            GilRelease release;
            self.graph->capture_end(untimed_copy ? UntimedCopy::Make : UntimedCopy::None);
          },
          nb::arg("untimed_copy") = false,
          "The owner is about to end its native capture: call it while the capture is still "
          "open (the last markers go into it). A failure (a region left open) leaves the "
          "graph empty, untimed; the owner still ends its capture. `untimed_copy=True` also "
          "copies the capture where the backend can (CUDA: no memory or event record nodes), "
          "so that a sampling Profiler (sample_every, overhead) launches the replays it does "
          "not time as that copy without markers, once enable_untimed_launches(True) says the "
          "owner's launch does nothing else (Note [Untimed foreign replays]).");
}

// Untimed launches of a copy of the capture, and reset.
void def_foreign_graph_untimed(nb::class_<PyForeignGraph>& cls) {
  cls.def(
         "enable_untimed_launches",
         [](PyForeignGraph& self, bool enabled) { self.graph->enable_untimed_launches(enabled); },
         nb::arg("enabled"),
         "Whether a replay that sampling does not time may launch the capture's copy "
         "(capture_end(untimed_copy=True)) instead of calling the owner's launch `fn`: only "
         "true when `fn` enqueues the captured graph and nothing else (PyTorch's replay also "
         "advances its RNG generators when the graph draws random numbers). Off by default.")
      .def_prop_ro(
          "has_untimed_copy", [](PyForeignGraph& self) { return self.graph->has_untimed_copy(); },
          "Whether the last capture_end made a copy for untimed launches (reset drops it).")
      .def("reset", unlocked_call(&ForeignGraph::reset, "reset"),
           "The owner drops its graph, or its capture failed: delivers the reports of the "
           "launches still pending (which needs their markers to run: call it before the native "
           "graph is reset or destroyed). The graph may capture again.");
}

// What it is: ids, state, backend, device and launch counts.
void def_foreign_graph_properties(nb::class_<PyForeignGraph>& cls) {
  cls.def_prop_ro(
         "id", [](PyForeignGraph& self) { return self.graph->id(); },
         "A stable process-unique id, shared with Graph ids.")
      .def_prop_ro(
          "graph_id", [](PyForeignGraph& self) { return self.graph->graph().id(); },
          "The id its reports carry (ReplayReport.graph_id); the same as id.")
      .def_prop_ro(
          "state", [](PyForeignGraph& self) { return self.graph->state(); },
          "The GraphState: EMPTY, CAPTURING (between capture_begin and capture_end), "
          "INSTANTIATED (launchable).")
      .def_prop_ro(
          "backend", [](PyForeignGraph& self) { return self.graph->graph().backend_name(); },
          "The backend's name.")
      .def_prop_ro(
          "device", [](PyForeignGraph& self) { return self.graph->graph().device(); },
          "The device of the last capture (-1 before the first).")
      .def_prop_ro(
          "replay_count", [](PyForeignGraph& self) { return self.graph->graph().replay_count(); },
          "Launches counted since the last capture_begin.")
      .def_prop_ro(
          "replay_hooks", [](PyForeignGraph& self) { return self.graph->graph().replay_hooks(); },
          "How many profilers' timings and replay observers act on each launch. 0 after a "
          "capture in which no region was recorded (no profiler reports its launches): an "
          "owner may then launch natively without launch() (accgraph.torch does).")
      .def("__repr__", &foreign_repr);
}
}  // namespace

PyForeignGraph::~PyForeignGraph() {
  GilRelease release;
  graph.reset();
}


void bind_foreign_graph(nb::module_& m) {
  nb::class_<PyForeignGraph> cls(
      m, "ForeignGraph",
      "A graph its owner captures and launches natively (a torch.cuda.CUDAGraph, a "
      "cudaGraphExec_t), told to accgraph so that a Profiler times it like a Graph "
      "(accgraph::ForeignGraph, Note [Foreign graphs]). accgraph.torch does this for every "
      "torch.cuda.CUDAGraph; by hand, on a Stream wrapping the owner's native stream:\n\n"
      "    fg = accgraph.ForeignGraph('cuda')\n"
      "    prof.attach(fg)\n"
      "    # ... the owner's native capture begins on the stream s wraps ...\n"
      "    fg.capture_begin(s)                  # regions on s now record into it\n"
      "    with prof.region(s, 'layer0'):\n"
      "        ...\n"
      "    fg.capture_end()                     # right before the native capture ends\n"
      "    # ... the native capture ends ...\n"
      "    fg.launch(s, torch_graph.replay)     # one report per launch\n"
      "    fg.reset()                           # before the native graph is reset or dropped\n\n"
      "Dropping it does what reset() does. Use it from one thread at a time.");
  def_foreign_graph_capture(cls);
  def_foreign_graph_untimed(cls);
  def_foreign_graph_properties(cls);
  // Note [Launch method]
  add_plain_method(cls, launch_method_def);
  // Note [Owner replay]
  PyObject* owner_replay = PyType_FromSpec(&owner_replay_spec);
  if (owner_replay == nullptr) throw nb::python_error();
  m.attr("_OwnerReplay") = nb::steal(owner_replay);
}

}  // namespace accgraph::python
