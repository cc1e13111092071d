// accgraph::Error -> the accgraph.Error subclass of its code (accgraph/_errors.py), the enums
// shared by every binding file, and the parsing of their names.
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>

#include "common.hpp"

namespace accgraph::python {

namespace {

std::atomic<bool> exiting{false};
std::atomic<int> active_calls{0};
// The thread that ran the atexit hook: the one that finalises, which may still run Python.
std::atomic<std::thread::id> exiting_thread{};

const char* error_class_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "InvalidArgumentError";
    case ErrorCode::InvalidState:
      return "InvalidStateError";
    case ErrorCode::Unavailable:
      return "UnavailableError";
    case ErrorCode::Unsupported:
      return "UnsupportedError";
    case ErrorCode::BackendError:
      return "BackendError";
    case ErrorCode::PluginError:
      return "PluginError";
  }
  return "Error";
}

// Raises the Python exception for `e` (GIL held, no Python error set).
void raise_error(const Error& e) {
  nb::object errors = nb::module_::import_("accgraph._errors");
  nb::object cls = errors.attr(error_class_name(e.code()));
  nb::object instance =
      cls(e.what(), nb::arg("code") = e.code(), nb::arg("reason") = e.reason(),
          nb::arg("message") = e.message(), nb::arg("backend") = e.backend(),
          nb::arg("native_call") = e.native_call(), nb::arg("native_code") = e.native_code());
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

void translate(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    try {
      raise_error(e);
    } catch (nb::python_error& failure) {
      failure.restore();  // an error while building the exception (out of memory): raise that
    }
  }
}

template <class Enum>
struct EnumName {
  Enum value;
  const char* name;
};

template <class Enum, size_t N>
Enum parse_name(const EnumOrName<Enum>& value, const EnumName<Enum> (&names)[N], const char* what) {
  if (const Enum* e = std::get_if<Enum>(&value)) return *e;
  const std::string& name = std::get<std::string>(value);
  std::string list;
  for (const EnumName<Enum>& entry : names) {
    if (name == entry.name) return entry.value;
    list += (list.empty() ? "'" : ", '") + std::string(entry.name) + "'";
  }
  throw Error(ErrorCode::InvalidArgument,
              "unknown " + std::string(what) + " '" + name + "': use one of " + list);
}

}  // namespace

bool interpreter_alive() noexcept {
  // The finalising thread itself may run Python until the end (as __del__ methods do), while
  // nanobind's runtime lives; Py_IsInitialized() is already false then.
  if (exiting.load(std::memory_order_acquire))
    return exiting_thread.load() == std::this_thread::get_id() && nb::is_alive();
  if (!Py_IsInitialized()) return false;
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsFinalizing();
#else
  return !_Py_IsFinalizing();
#endif
}

// Note [Exit with callables running]: a thread that takes the GIL once finalisation has begun
// is stopped inside PyGILState_Ensure/PyEval_RestoreThread (CPython < 3.14 exits the thread),
// which aborts the process from a C++ worker. So at exit (atexit, before finalisation) no new
// Python call starts on another thread than the finalising one (which still flushes profilers
// collected at exit, calling their sinks), and the ones running finish first; their threads may
// still hold or wait for the GIL (a host call that sleeps), so the wait releases it. A call that
// has not returned after 10 s is left to its fate, with a warning.
void mark_interpreter_exiting() noexcept {
  exiting_thread.store(std::this_thread::get_id());
  exiting.store(true, std::memory_order_seq_cst);
  if (active_calls.load(std::memory_order_seq_cst) == 0) return;
  GilRelease release;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (active_calls.load(std::memory_order_seq_cst) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      log(LogLevel::Warning,
          "accgraph: a Python host call or sink still runs at interpreter exit after 10 s; "
          "exiting anyway");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace detail {

nb::int_ index_of(const IntArg& arg, const char* what) {
  PyObject* index = PyNumber_Index(arg.value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    throw nb::type_error(
        (std::string(what) + " must be an integer, not " + Py_TYPE(arg.value.ptr())->tp_name)
            .c_str());
  }
  return nb::steal<nb::int_>(index);
}

bool int_within(const nb::int_& value, const nb::int_& min, const nb::int_& max) {
  const int above_min = PyObject_RichCompareBool(value.ptr(), min.ptr(), Py_GE);
  const int below_max = PyObject_RichCompareBool(value.ptr(), max.ptr(), Py_LE);
  if (above_min < 0 || below_max < 0) throw nb::python_error();
  return above_min == 1 && below_max == 1;
}

void int_out_of_range(const char* what, const nb::int_& value, const nb::int_& min,
                      const nb::int_& max) {
  throw Error(ErrorCode::InvalidArgument, std::string(what) + " is " + nb::str(value).c_str() +
                                              ": give a whole number from " + nb::str(min).c_str() +
                                              " to " + nb::str(max).c_str());
}

}  // namespace detail

bool may_take_gil() noexcept {
  if (!exiting.load(std::memory_order_seq_cst)) return true;
  return exiting_thread.load() == std::this_thread::get_id();
}

void park_thread_at_exit() noexcept {
  // The parked thread's frames keep their objects alive past nanobind's shutdown, which would
  // report each as leaked: they are not lost, they are in use. (A flag nanobind reads at the
  // end of finalisation, long after the atexit hook this thread waited on.)
  nb::set_leak_warnings(false);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void restore_thread(PyThreadState* state) noexcept {
  {
    ActivePythonCall asking;  // counted before the check: the atexit hook waits for it
    if (may_take_gil()) {
      PyEval_RestoreThread(state);
      return;
    }
  }
  park_thread_at_exit();
}

ActivePythonCall::ActivePythonCall() noexcept {
  active_calls.fetch_add(1, std::memory_order_seq_cst);
}

ActivePythonCall::~ActivePythonCall() { active_calls.fetch_sub(1, std::memory_order_seq_cst); }

namespace {
// Host calls that have not yet dropped their Python reference (python_host_calls_alive).
std::atomic<uint64_t> live_host_calls{0};
}  // namespace

bool python_host_calls_alive() noexcept {
  return live_host_calls.load(std::memory_order_acquire) != 0;
}

PythonCallable::PythonCallable(nb::handle fn, std::string what, Runs runs)
    : fn_(fn.inc_ref().ptr()), what_(std::move(what)), counted_(runs == Runs::OnBackendThread) {
  if (counted_) live_host_calls.fetch_add(1, std::memory_order_acq_rel);
}

PythonCallable::~PythonCallable() {
  // Uncounted last, once the reference is dropped (the GIL taken for it included); a callable
  // leaked at interpreter exit stays counted.
  struct Uncount {
    bool counted;
    ~Uncount() {
      if (counted) live_host_calls.fetch_sub(1, std::memory_order_acq_rel);
    }
  };
  if (interpreter_alive() && PyGILState_Check()) {
    Uncount uncount{counted_};
    Py_DECREF(fn_);
    return;
  }
  ActivePythonCall active;
  if (!interpreter_alive()) return;  // leaked: no GIL to take any more
  Uncount uncount{counted_};
  nb::gil_scoped_acquire gil;
  Py_DECREF(fn_);
}

CaptureMode parse_capture_mode(const std::optional<EnumOrName<CaptureMode>>& value) {
  static constexpr EnumName<CaptureMode> names[] = {{CaptureMode::Default, "default"},
                                                    {CaptureMode::Global, "global"},
                                                    {CaptureMode::ThreadLocal, "thread_local"},
                                                    {CaptureMode::Relaxed, "relaxed"}};
  return value ? parse_name(*value, names, "capture mode") : CaptureMode::Default;
}

MemoryKind parse_memory_kind(const EnumOrName<MemoryKind>& value) {
  static constexpr EnumName<MemoryKind> names[] = {{MemoryKind::Device, "device"},
                                                   {MemoryKind::Host, "host"}};
  return parse_name(value, names, "memory kind");
}

timing::Delivery parse_delivery(const EnumOrName<timing::Delivery>& value) {
  static constexpr EnumName<timing::Delivery> names[] = {
      {timing::Delivery::Lazy, "lazy"}, {timing::Delivery::Immediate, "immediate"}};
  return parse_name(value, names, "delivery");
}

timing::StatsMode parse_stats_mode(const EnumOrName<timing::StatsMode>& value) {
  static constexpr EnumName<timing::StatsMode> names[] = {{timing::StatsMode::Sketch, "sketch"},
                                                          {timing::StatsMode::Exact, "exact"}};
  return parse_name(value, names, "stats mode");
}

PoolId parse_pool(const std::optional<std::pair<uint64_t, uint64_t>>& pool) {
  if (!pool) return {};
  return PoolId{pool->first, pool->second};
}

std::string fs_path(nb::handle path) {
  nb::object os = nb::module_::import_("os");
  nb::object text = os.attr("fsdecode")(path);  // TypeError for anything but str/bytes/PathLike
  return nb::cast<std::string>(text);
}

void bind_errors(nb::module_& m) {
  nb::enum_<ErrorCode>(m, "ErrorCode", "The canonical error codes (accgraph::ErrorCode).")
      .value("INVALID_ARGUMENT", ErrorCode::InvalidArgument, "A bad value from the caller.")
      .value("INVALID_STATE", ErrorCode::InvalidState, "A call in the wrong order.")
      .value("UNAVAILABLE", ErrorCode::Unavailable,
             "A backend or device that exists but cannot be used here.")
      .value("UNSUPPORTED", ErrorCode::Unsupported, "A request the backend does not implement.")
      .value("BACKEND_ERROR", ErrorCode::BackendError, "A native call failed.")
      .value("PLUGIN_ERROR", ErrorCode::PluginError, "A plugin library was rejected.");
  nb::enum_<ErrorReason>(m, "ErrorReason",
                         "Why a call failed, where callers tell the case apart "
                         "(accgraph::ErrorReason, Note [Error reasons]): stable values; "
                         "Error.reason, never the message's wording.")
      .value("UNSPECIFIED", ErrorReason::Unspecified, "Every error no caller tells apart.")
      .value("NATIVE_CAPTURE", ErrorReason::NativeCapture,
             "The stream captures into a graph accgraph was not told about.")
      .value("UNATTACHED_CAPTURE", ErrorReason::UnattachedCapture,
             "The stream captures into a graph this profiler does not time (not attached, or "
             "attached after its capture began).")
      .value("CAPTURE_ENDED", ErrorReason::CaptureEnded,
             "The capture a region belongs to ended, or was aborted or reset.")
      .value("REGION_ORDER", ErrorReason::RegionOrder,
             "Regions would not nest (open across capture_begin/end, not the innermost: "
             "dropped, none open, another thread's region open on the stream).");
  nb::register_exception_translator(translate);
  m.def("_mark_interpreter_exiting", &mark_interpreter_exiting,
        "Called at exit (atexit): Python callables kept by C++ are no longer called.");
  m.def(
      "_live_host_calls", [] { return live_host_calls.load(std::memory_order_acquire); },
      "For the tests: Python host_call callables not yet dropped (Note [Replay keeps the GIL]).");
}

}  // namespace accgraph::python
