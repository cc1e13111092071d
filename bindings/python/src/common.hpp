// What the binding files share: the Python-side owners of the C++ objects, Python callables kept
// by C++, and the parsing of enum-or-string arguments.
//
// Note [GIL rules]: every call into accgraph that can block or can run a Python callable (a sink,
// a host call) on another thread is made with the GIL released (nb::call_guard<GilRelease> or a
// GilRelease block), and so is every destructor of a C++ object that waits for queued
// work (Stream, Graph, Profiler, Buffer). Python callables kept by C++ take the GIL themselves
// on whatever thread C++ calls them from (PythonCallable). So a thread holding the GIL never
// waits for a C++ lock or a queue whose owner waits for the GIL, and a Python thread inside
// flush() or synchronize() never blocks a sink or a host call that needs the GIL. Plain reads
// (ids, names, states) keep the GIL. Two launches keep it where they can: ForeignGraph.launch
// (Note [Launch callables] in foreign_graph.cpp) and Graph.replay (Note [Replay keeps the GIL] in
// graph.cpp) give it up only around the C++ waits that may need another thread (GilWaits), and
// Graph.replay only while no Python host call is alive (python_host_calls_alive()).
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <accgraph/accgraph.hpp>
#include <accgraph/host_clock.hpp>
#include <accgraph/perfetto.hpp>

namespace accgraph::python {

namespace nb = nanobind;

/// False once the interpreter is shutting down (atexit ran or finalisation began): Python
/// callables are then no longer called (a thread taking the GIL during finalisation is killed).
bool interpreter_alive() noexcept;
/// At exit (atexit): no new Python call from C++ starts, and the running ones are waited for.
void mark_interpreter_exiting() noexcept;

/// For a plain CPython method (Note [Replay method] in graph.cpp): raises `error`, a C++
/// exception, as the Python exception nanobind's translators make of it (by rethrowing it inside
/// a nanobind function); returns nullptr, the method's return value with the error set.
PyObject* raise_cpp_error(std::exception_ptr error);
/// Installs `method` (static, METH_FASTCALL) on the nanobind class `cls` as a plain CPython
/// method under its ml_name (Note [Replay method] in graph.cpp).
void add_plain_method(nb::handle cls, PyMethodDef& method);

/// The keyword names of a plain CPython method (METH_FASTCALL | METH_KEYWORDS), interned once
/// (made with the GIL held, kept for the process): find() compares a call's keyword name by
/// identity first, as a call site's names are interned, then by text.
template <size_t N>
class KeywordNames {
 public:
  explicit KeywordNames(const char* const (&names)[N]) {
    for (size_t i = 0; i < N; ++i) {
      text_[i] = names[i];
      interned_[i] = PyUnicode_InternFromString(names[i]);  // null on failure: text only
      if (interned_[i] == nullptr) PyErr_Clear();
    }
  }
  /// The index of `name` among the names, or -1.
  int find(PyObject* name) const {
    for (size_t i = 0; i < N; ++i)
      if (name == interned_[i]) return static_cast<int>(i);
    for (size_t i = 0; i < N; ++i)
      if (PyUnicode_CompareWithASCIIString(name, text_[i]) == 0) return static_cast<int>(i);
    return -1;
  }

 private:
  const char* text_[N];
  PyObject* interned_[N];
};

/// Counts a thread's use of Python from C++ (Note [Exit with callables running]): exit waits
/// until none runs. Create it before checking interpreter_alive().
class ActivePythonCall {
 public:
  ActivePythonCall() noexcept;
  ~ActivePythonCall();
  ActivePythonCall(const ActivePythonCall&) = delete;
  ActivePythonCall& operator=(const ActivePythonCall&) = delete;
};

/// A Python callable kept by C++ code (a report sink, a host call). Shared by the copies of the
/// std::function that holds it; the last copy drops the reference with the GIL held, from any
/// thread (or leaks it once the interpreter is gone).
class PythonCallable {
 public:
  /// `what` names it in errors. A host call (Stream.host_call) runs on a backend's thread,
  /// which a launch may wait for: it is counted from here until it has dropped its reference
  /// (python_host_calls_alive()).
  enum class Runs { WhereCalled, OnBackendThread };
  PythonCallable(nb::handle fn, std::string what, Runs runs = Runs::WhereCalled);
  ~PythonCallable();
  PythonCallable(const PythonCallable&) = delete;
  PythonCallable& operator=(const PythonCallable&) = delete;

  /// Calls it with the GIL taken. A Python exception becomes a std::runtime_error carrying its
  /// type, message and traceback, which C++ then reports as it reports any failing callable
  /// (synchronize() for a host call, the log for a sink).
  template <class... Args>
  void operator()(Args&&... args) const {
    ActivePythonCall active;
    if (!interpreter_alive())
      throw std::runtime_error(what_ + ": not called, the Python interpreter is shutting down");
    std::string failure;
    {
      nb::gil_scoped_acquire gil;
      try {
        nb::handle callable(fn_);
        callable(std::forward<Args>(args)...);
      } catch (nb::python_error& e) {
        failure = e.what();  // destroyed here, with the GIL held
      } catch (const nb::cast_error&) {
        failure = "an argument could not be converted to Python";
      }
    }
    if (!failure.empty()) throw std::runtime_error(what_ + " raised " + failure);
  }

 private:
  PyObject* fn_;
  std::string what_;
  bool counted_;  // Runs::OnBackendThread
};

/// Whether a Python host call (Stream.host_call, eager or captured) exists that has not yet
/// dropped its Python reference: one that a backend thread may still run, and which then takes
/// the GIL. While none does, no work a backend's launch may wait for needs the GIL (Note [Replay
/// keeps the GIL] in graph.cpp).
bool python_host_calls_alive() noexcept;

/// Note [Threads at exit]: CPython before 3.14 ends a thread that takes the GIL back once
/// finalisation has begun (PyEval_RestoreThread -> PyThread_exit_thread -> pthread_exit). Its
/// forced unwind aborts the process (std::terminate, exit 134) when it meets a noexcept frame,
/// and every C++ frame that gives the GIL up has one: a destructor taking it back (nanobind's
/// gil_scoped_release), LaunchWaits::reacquire, and nanobind's dispatch, which catches (...).
/// A daemon thread inside a replay that waits for a full marker ring, a synchronize() or a
/// flush() when the interpreter exits would do so. So the binding never asks
/// CPython for the GIL on a thread that finalisation would end: from the atexit hook on
/// (mark_interpreter_exiting), a thread other than the exiting one that would take it back is
/// parked instead, forever and holding nothing (as CPython 3.14 parks such threads itself), and
/// the process exits around it. The hook waits for the threads already asking for it
/// (counted as ActivePythonCall), so none is caught between the check and the call. The price
/// is Note [Exit with callables running]'s: a thread still in accgraph when the hook ran does
/// not return to Python, so an atexit handler registered before accgraph was imported (it runs
/// after accgraph's) that joins such a thread would wait for ever.
/// GilRelease parks in place; GilWaits, whose reacquire may run with a marker ring's lock held,
/// lets the C++ launch finish without the GIL and the launch's binding parks (park_if_lost)
/// once the C++ frames are gone.

/// Takes the GIL back with `state` (PyEval_RestoreThread), or parks the thread for good when
/// the interpreter is exiting and this is not the exiting thread (Note [Threads at exit]).
void restore_thread(PyThreadState* state) noexcept;
/// Whether this thread may take the GIL back; false once the interpreter exits, except on the
/// exiting thread. Call it while counted (ActivePythonCall).
bool may_take_gil() noexcept;
/// Never returns: the thread sleeps until the process ends (Note [Threads at exit]).
[[noreturn]] void park_thread_at_exit() noexcept;

/// nanobind's gil_scoped_release, except that a thread the interpreter's exit would end is
/// parked instead of aborting the process (Note [Threads at exit]). Also for nb::call_guard.
class GilRelease {
 public:
  GilRelease() noexcept : state_(PyEval_SaveThread()) {}
  ~GilRelease() { restore_thread(state_); }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

/// Note [Launch waits] (include/accgraph/foreign_graph.hpp) for a launch made with the GIL held:
/// gives the GIL up around each wait the C++ launch makes and takes it back after, on the
/// launching thread, with this thread's own state (PyEval_SaveThread/RestoreThread). When the
/// interpreter exits meanwhile, it does not take it back (the rest of the launch runs without
/// it) and the launch's binding calls park_if_lost() before touching Python again (Note
/// [Threads at exit]).
class GilWaits final : public LaunchWaits {
 public:
  void release() noexcept override {
    if (!lost_) state_ = PyEval_SaveThread();
  }
  void reacquire() noexcept override {
    if (lost_) return;
    {
      ActivePythonCall asking;
      if (may_take_gil()) {
        PyEval_RestoreThread(state_);
        state_ = nullptr;
        return;
      }
    }
    lost_ = true;
  }
  /// Whether the GIL was not taken back (the interpreter exits): Python must not be used.
  bool lost() const noexcept { return lost_; }
  /// Parks the thread when lost() (Note [Threads at exit]); call it where the launch's C++
  /// frames are done and before any Python call.
  void park_if_lost() const noexcept {
    if (lost_) park_thread_at_exit();
  }

 private:
  PyThreadState* state_ = nullptr;  // while given up
  bool lost_ = false;
};

// Note [Python-only lifetime policy]: the one thing this binding adds to the C++ API is when
// objects are freed. C++ programs order destruction themselves, under the contract of
// include/accgraph/stream.hpp ("A device or host allocation, freed when the Buffer is
// destroyed": the program keeps a Buffer alive while enqueued work, or a graph that captured
// it, may use it). Python frees an object when its last reference goes, in an order the user
// does not control (the garbage collector, interpreter exit, a temporary), so the binding keeps
// that contract on the user's behalf:
// - a Buffer waits for the streams that used it before it is freed (Note [Buffer lifetime] in
//   stream.cpp; StreamUses, PyBuffer, PyGraph::replayed_on);
// - a Graph keeps its capture's Buffers until it is reset, re-captured or dropped
//   (PyGraph::captured_buffers);
// - callables C++ holds are shown to the garbage collector, and unreachable graphs and
//   profilers are reset or flushed before they are cleared (Note [Cycles through C++] in
//   graph.cpp, Note [Sink cycles] in profiler.cpp);
// - a second call into a busy graph is an error, not a crash (GraphUse);
// - at exit no new Python call starts from C++ (Note [Exit with callables running]).
// It stays here rather than in C++ because there it would change the contract for every C++
// user (a blocking Buffer destructor, a destroyed Buffer whose memory lives on in a graph).
// The README's "Python-only lifetime policy" says the same for users.

/// Streams that may still run work using some memory: dropping that memory first waits for
/// them (Note [Buffer lifetime] in stream.cpp). Read and written with the GIL held.
class StreamUses {
 public:
  void add(const std::shared_ptr<Stream>& stream);
  void add_all(const StreamUses& other);
  /// Waits for the work enqueued so far on every stream still alive (GIL released by caller).
  void wait_all() const noexcept;

 private:
  std::vector<std::weak_ptr<Stream>> streams_;
};

/// Python's Stream: owns an accgraph::Stream (shared only with the waits of StreamUses);
/// `owner` keeps alive the object a wrapped native handle came from (a torch.cuda.Stream).
struct PyStream {
  std::shared_ptr<Stream> stream;
  nb::object owner;
  explicit PyStream(Stream s);
  ~PyStream();
  /// For short reads with the GIL held.
  Stream& get();
  /// For calls that release the GIL: keeps the Stream alive while another thread closes it.
  std::shared_ptr<Stream> share();
};

/// Python's Buffer: the allocation, where it lives (for DLPack and the buffer protocol), and the
/// streams whose work may still use it.
struct PyBuffer {
  std::optional<Buffer> buffer;
  std::string backend;
  int device = 0;
  DlpackDevice dlpack;  // as the backend states it (Note [DLPack devices])
  StreamUses used_on;
  PyBuffer(Buffer b, std::string backend_name, int device_index)
      : buffer(std::move(b)),
        backend(std::move(backend_name)),
        device(device_index),
        dlpack(dlpack_device(backend, device, buffer->kind())) {}
  ~PyBuffer();
  Buffer& get();
};

/// Python's Graph: the AcceleratorGraph, the Python buffers its capture uses (kept alive while
/// the graph may replay them), the host calls its capture holds (borrowed: C++ owns them; shown
/// to the garbage collector, Note [Cycles through C++] in graph.cpp), the streams it replayed
/// on, and the stream accgraph.graph() captures on when given none.
struct PyGraph {
  std::unique_ptr<AcceleratorGraph> graph;
  std::vector<nb::object> captured_buffers;
  std::vector<PyObject*> captured_calls;
  StreamUses replayed_on;
  nb::object side_stream;
  std::atomic<bool> busy{false};  // a call is running (GraphUse in graph.cpp)
  explicit PyGraph(std::unique_ptr<AcceleratorGraph> g);
  ~PyGraph();
  /// Drops the captured buffers; each first learns the streams this graph replayed on.
  void release_captured_buffers();
  /// The Python graph whose capture runs on `stream`, or nullptr (GIL held).
  static PyGraph* capturing_on(const Stream& stream);
};

/// A graph is used by one thread at a time (graph.hpp). Calls run without the GIL, so two Python
/// threads could otherwise enter one graph at once; the second one gets an error instead (also
/// a sink, host call or launch callable that calls back into the graph whose call runs it).
class GraphUse {
 public:
  /// `type` and `what` name the call in the error ("Graph", "replay").
  GraphUse(std::atomic<bool>& busy, const char* type, const char* what) : busy_(busy) {
    if (busy_.exchange(true, std::memory_order_acquire))
      throw Error(ErrorCode::InvalidState,
                  std::string(type) + "." + what +
                      ": the graph is in use by another call (another thread, or a sink, host "
                      "call or launch callable running inside this graph's call): use a graph "
                      "from one thread at a time");
  }
  ~GraphUse() { busy_.store(false, std::memory_order_release); }
  GraphUse(const GraphUse&) = delete;
  GraphUse& operator=(const GraphUse&) = delete;

 private:
  std::atomic<bool>& busy_;
};

/// Python's ForeignGraph: a graph its owner (PyTorch, code calling the native API) captures and
/// launches natively, told to accgraph so that profilers time it (Note [Foreign graphs] in
/// accgraph/foreign_graph.hpp). It keeps no Python object: the launch callable is called
/// during launch() only.
struct PyForeignGraph {
  std::unique_ptr<ForeignGraph> graph;
  std::atomic<bool> busy{false};  // a call is running (GraphUse)
  explicit PyForeignGraph(std::unique_ptr<ForeignGraph> g) : graph(std::move(g)) {}
  /// Destroying it collects its pending launches, calling sinks: done without the GIL.
  ~PyForeignGraph();
};

/// `value` as an enum, from the enum itself or its lower-case name ("global", "thread_local").
/// An unknown name is an InvalidArgument error listing the names.
template <class Enum>
using EnumOrName = std::variant<Enum, std::string>;

CaptureMode parse_capture_mode(const std::optional<EnumOrName<CaptureMode>>& value);
MemoryKind parse_memory_kind(const EnumOrName<MemoryKind>& value);
timing::Delivery parse_delivery(const EnumOrName<timing::Delivery>& value);
timing::StatsMode parse_stats_mode(const EnumOrName<timing::StatsMode>& value);

/// Note [Integer arguments]: nanobind's int casters refuse a Python int outside the C++ type's
/// range (-1 for a size_t, 2**64 for a uint64_t), and the call then fails with the "incompatible
/// function arguments" TypeError listing every overload's signature, naming no argument. So
/// an integer parameter is taken as IntArg (any object; "int"
/// in the signature and the stubs) and converted with int_arg, which raises
/// InvalidArgumentError (also a ValueError) naming the argument and its range, or a TypeError
/// naming it for what is not an integer.
struct IntArg {
  nb::object value;
};

/// `arg` as a T within [min, max] (Note [Integer arguments]); `what` names it in the error
/// ("Profiler: ring_depth").
template <class T>
T int_arg(const IntArg& arg, const char* what, T min = std::numeric_limits<T>::min(),
          T max = std::numeric_limits<T>::max());
/// The same for an optional one (None stays nullopt).
template <class T>
std::optional<T> int_arg(const std::optional<IntArg>& arg, const char* what,
                         T min = std::numeric_limits<T>::min(),
                         T max = std::numeric_limits<T>::max()) {
  if (!arg) return std::nullopt;
  return int_arg<T>(*arg, what, min, max);
}

namespace detail {
/// `arg` as a Python int (TypeError naming `what` when it is not an integer).
nb::int_ index_of(const IntArg& arg, const char* what);
/// Whether min <= value <= max (Python ints).
bool int_within(const nb::int_& value, const nb::int_& min, const nb::int_& max);
/// The InvalidArgument error for `value` outside [min, max].
[[noreturn]] void int_out_of_range(const char* what, const nb::int_& value, const nb::int_& min,
                                   const nb::int_& max);
}  // namespace detail

template <class T>
T int_arg(const IntArg& arg, const char* what, T min, T max) {
  static_assert(std::is_integral_v<T>);
  nb::int_ value = detail::index_of(arg, what);
  nb::int_ low(min), high(max);
  if (!detail::int_within(value, low, high)) detail::int_out_of_range(what, value, low, high);
  return nb::cast<T>(value);
}

/// A pool id from None (a new private pool) or a (first, second) pair such as Graph.pool().
PoolId parse_pool(const std::optional<std::pair<uint64_t, uint64_t>>& pool);

/// A list of `convert(item)` for each of `items`: a list attribute in a to_dict().
template <class Items, class Convert>
nb::list list_of(const Items& items, Convert&& convert) {
  nb::list out;
  for (const auto& item : items) out.append(convert(item));
  return out;
}

/// One key of a to_dict() and its value (held by reference until dict_of returns).
template <class Value>
std::pair<const char*, const Value&> field(const char* key, const Value& value) {
  return {key, value};
}

/// A dict of `fields` in their order, each made by field(): the to_dict() of a read-only view,
/// e.g. dict_of(field("device", c.device), field("offset_ns", c.offset_ns)).
template <class... Values>
nb::dict dict_of(const std::pair<const char*, const Values&>&... fields) {
  nb::dict out;
  ((out[fields.first] = fields.second), ...);
  return out;
}

/// A path argument: str or os.PathLike.
std::string fs_path(nb::handle path);

void bind_errors(nb::module_& m);
void bind_registry(nb::module_& m);
void bind_stream(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_foreign_graph(nb::module_& m);
void bind_timing(nb::module_& m);
void bind_traces(nb::module_& m);

/// Writes `file` through timing::write_output_file (Note [Atomic output]: an existing file is
/// replaced only once the new content is complete), with the GIL released; `write` must not
/// touch Python. A failed system call raises OSError (its errno, accgraph's message, the file).
void write_output(const std::string& file, const char* what,
                  const std::function<void(std::ostream&)>& write);

/// Writes `reports` to `path` in the format its name asks for (timing::write_trace_file): a
/// Perfetto trace with the given rank, host and clock options, or a format that refuses those
/// options. Defined in traces.cpp; called with the GIL held (released while writing).
/// rank, world_size and host_clock_uncertainty_ns are checked there (Note [Integer arguments]).
void write_trace_file(nb::handle path, const std::vector<timing::ReplayReport>& reports,
                      const IntArg& rank, const IntArg& world_size, const std::string& host,
                      const IntArg& host_clock_uncertainty_ns,
                      const std::vector<timing::DeviceClockOffset>& clocks,
                      const std::vector<timing::HostClockOffset>& host_clock_offsets);

}  // namespace accgraph::python

namespace nanobind::detail {

/// Note [Integer arguments]: any object, kept as it is for int_arg (which raises a TypeError
/// naming the argument for one without __index__).
template <>
struct type_caster<accgraph::python::IntArg> {
  NB_TYPE_CASTER(accgraph::python::IntArg, const_name("int"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    value.value = borrow(src);  // int_arg says what is wrong with it
    return true;
  }
  static handle from_cpp(const accgraph::python::IntArg& arg, rv_policy, cleanup_list*) noexcept {
    return arg.value.inc_ref();
  }
};

}  // namespace nanobind::detail
