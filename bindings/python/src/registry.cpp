// The registry from Python: backends(), default_backend(), load_plugin(), plugin_failures(), the
// value types they return (BackendInfo, DeviceInfo, Capabilities) and the library version.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"

namespace accgraph::python {

namespace {

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) out += (out.size() > 1 ? ", '" : "'") + item + "'";
  return out + "]";
}

std::string repr(const Capabilities& caps) {
  std::vector<std::string> modes;
  for (CaptureMode mode : caps.capture_modes) modes.push_back(to_string(mode));
  auto yes_no = [](bool b) { return b ? "True" : "False"; };
  return std::string("Capabilities(capture_modes=") + quoted_list(modes) +
         ", multi_stream_capture=" + yes_no(caps.multi_stream_capture) +
         ", host_calls=" + yes_no(caps.host_calls) + ", timed_delay=" + yes_no(caps.timed_delay) +
         ", graph_update=" + yes_no(caps.graph_update) +
         ", pool_sharing=" + yes_no(caps.pool_sharing) +
         ", marker_strategies=" + quoted_list(caps.marker_strategies) +
         ", marker_ring_depth=" + std::to_string(caps.marker_ring_depth) +
         ", timer_resolution_ns=" + std::to_string(caps.timer_resolution_ns) + ")";
}

// The enums of the capture and allocation arguments.
void bind_registry_enums(nb::module_& m) {
  nb::enum_<CaptureMode>(m, "CaptureMode",
                         "How a capture treats unsafe calls from other threads (CUDA's "
                         "cudaStreamCaptureMode); arguments also take the lower-case names.")
      .value("DEFAULT", CaptureMode::Default,
             "The backend's documented default (global on cuda and host).")
      .value("GLOBAL", CaptureMode::Global, "Unsafe calls from any thread fail the capture.")
      .value("THREAD_LOCAL", CaptureMode::ThreadLocal,
             "Only unsafe calls from the capturing thread fail it.")
      .value("RELAXED", CaptureMode::Relaxed, "Nothing is refused.");

  nb::enum_<MemoryKind>(m, "MemoryKind",
                        "Where a Buffer lives; arguments also take 'device' and 'host'.")
      .value("DEVICE", MemoryKind::Device, "Device memory.")
      .value("HOST", MemoryKind::Host,
             "Host memory the CPU reads and the device's copies use (buffer protocol).");
}

// What the registry says of a backend: BackendInfo, its devices and capabilities, and the
// plugins it rejected.
void bind_backend_info(nb::module_& m) {
  nb::class_<DeviceInfo>(m, "DeviceInfo", "One device of a backend.")
      .def_ro("index", &DeviceInfo::index, "The device index (Stream(device=...)).")
      .def_ro("name", &DeviceInfo::name, "The device's name.")
      .def("__repr__", [](const DeviceInfo& d) {
        return "DeviceInfo(index=" + std::to_string(d.index) + ", name='" + d.name + "')";
      });

  nb::class_<Capabilities>(m, "Capabilities",
                           "What a backend can do on a device: queried, never guessed.")
      .def_prop_ro(
          "capture_modes", [](const Capabilities& c) { return c.capture_modes; },
          "Capture modes honoured besides CaptureMode.DEFAULT.")
      .def_ro("multi_stream_capture", &Capabilities::multi_stream_capture,
              "Fork/join during a capture through Stream.wait.")
      .def_ro("host_calls", &Capabilities::host_calls, "Stream.host_call, eagerly and in graphs.")
      .def_ro("timed_delay", &Capabilities::timed_delay,
              "Stream.delay (device work of a given duration).")
      .def_ro("graph_update", &Capabilities::graph_update,
              "A re-capture updates the executable in place.")
      .def_ro("pool_sharing", &Capabilities::pool_sharing, "Graphs share a pool through pool().")
      .def_ro("marker_strategies", &Capabilities::marker_strategies,
              "Timestamp marker kinds, the default first (Profiler(marker_strategy=...)).")
      .def_ro("marker_ring_depth", &Capabilities::marker_ring_depth,
              "Replays in flight with distinct marker storage by default.")
      .def_ro("timer_resolution_ns", &Capabilities::timer_resolution_ns,
              "The smallest step of the marker clock, in nanoseconds.")
      .def("supports", &Capabilities::supports, nb::arg("mode"),
           "True when `mode` is honoured (CaptureMode.DEFAULT always is).")
      .def("__repr__", [](const Capabilities& c) { return repr(c); });

  nb::class_<BackendStatus>(m, "BackendInfo",
                            "One registered backend, as `accgraph backends` shows it.")
      .def_ro("name", &BackendStatus::name, "The backend's name (Stream(backend=...)).")
      .def_ro("priority", &BackendStatus::priority,
              "The default backend is the available one of highest priority.")
      .def_ro("origin", &BackendStatus::origin,
              "'built-in', 'built-in module <path>' or 'plugin <path>'.")
      .def_ro("available", &BackendStatus::available, "Whether it can be used here.")
      .def_ro("reason", &BackendStatus::unavailable_reason,
              "Why it is unavailable ('' when available).")
      .def_ro("devices", &BackendStatus::devices, "Its devices (empty when unavailable).")
      .def_ro("capabilities", &BackendStatus::capabilities,
              "The capabilities of device 0 (when available).")
      .def("__repr__", [](const BackendStatus& s) {
        std::string out = "BackendInfo(name='" + s.name +
                          "', priority=" + std::to_string(s.priority) +
                          ", available=" + (s.available ? "True" : "False");
        if (!s.available) out += ", reason='" + s.unavailable_reason + "'";
        return out + ", devices=" + std::to_string(s.devices.size()) + ")";
      });

  nb::class_<PluginFailure>(m, "PluginFailure", "A plugin library that was rejected.")
      .def_ro("path", &PluginFailure::path, "The file (escaped for display).")
      .def_ro("reason", &PluginFailure::reason, "Why it was rejected.")
      .def("__repr__", [](const PluginFailure& f) {
        return "PluginFailure(path='" + f.path + "', reason='" + f.reason + "')";
      });
}

// backends(), default_backend(), load_plugin() and plugin_failures().
void bind_registry_functions(nb::module_& m) {
  m.def(
      "backends", [] { return Registry::instance().status(); }, nb::call_guard<GilRelease>(),
      "Every registered backend, highest priority first: name, priority, available, reason, "
      "devices, capabilities (creates each backend to learn whether it is available).");
  m.def(
      "default_backend", [] { return default_backend_name(); }, nb::call_guard<GilRelease>(),
      "The default backend's name: ACCGRAPH_BACKEND if set, else the available backend of "
      "highest priority that has a device.");
  m.def(
      "load_plugin",
      [](nb::handle path) {
        std::string file = fs_path(path);
        GilRelease release;
        load_plugin(file);
      },
      nb::arg("path"), nb::sig("def load_plugin(path: str | os.PathLike[str]) -> None"),
      "Loads one plugin library and registers its backend. A rejected file raises PluginError "
      "naming the file and the reason; the registry is then unchanged.");
  m.def(
      "plugin_failures", [] { return Registry::instance().plugin_failures(); },
      nb::call_guard<GilRelease>(),
      "Plugin libraries rejected so far (ACCGRAPH_PLUGIN_PATH and load_plugin).");
  m.def(
      "library_version",
      [] {
        Version v = accgraph::library_version();
        return nb::make_tuple(v.major, v.minor, v.patch);
      },
      nb::sig("def library_version() -> tuple[int, int, int]"),
      "The version of the C++ library in use, as (major, minor, patch).");
}

}  // namespace

void bind_registry(nb::module_& m) {
  bind_registry_enums(m);
  bind_backend_info(m);
  bind_registry_functions(m);
}

}  // namespace accgraph::python
