// accgraph's implementation of PyTorch's torch.accelerator.Graph: a GraphImplInterface whose every
// call goes to a Python GraphAdapter (accgraph/torch/_accelerator.py), compiled on first use
// against the installed torch (Note [Accelerator graph] in _accelerator.py).
//
// Two layers, so that the code the registry calls runs on a torch without the registry:
// - PythonGraph: calls one GraphAdapter's methods from any thread, with or without the GIL, and
//   lets a Python exception through unchanged (pybind11::error_already_set, which torch's
//   bindings restore). Built on every torch; the module's Driver class calls it from Python with
//   the GIL released, as torch's _acceleratorGraph binding does (tests/python/test_accelerator_graph.py).
// - AcceleratorGraphImpl: the at::GraphImplInterface subclass over a PythonGraph, and its
//   registration under a device key at c10::REGISTRY_FALLBACK. Only where torch has the
//   registry (ATen/core/GraphImplInterface.h, torch >= 2.12).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#if __has_include(<ATen/core/GraphImplInterface.h>)
#include <ATen/core/GraphImplInterface.h>
#define ACCGRAPH_TORCH_GRAPH_REGISTRY 1
#else
#define ACCGRAPH_TORCH_GRAPH_REGISTRY 0
#endif

namespace py = pybind11;

namespace accgraph_torch {

// The capture modes by at::GraphCaptureMode's value, as GraphAdapter.capture_begin takes them.
constexpr const char* kCaptureModes[] = {"default", "global", "thread_local", "relaxed"};
constexpr int kCaptureModeCount = 4;

// Whether Python can still run code: at interpreter exit an object is leaked, not released.
bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/// One GraphAdapter, called from any thread (the GIL is taken for each call).
class PythonGraph {
 public:
  /// With the GIL held.
  explicit PythonGraph(py::object adapter) : adapter_(std::move(adapter)) {}
  PythonGraph(const PythonGraph&) = delete;
  PythonGraph& operator=(const PythonGraph&) = delete;
  ~PythonGraph() {
    if (!python_alive()) {
      adapter_.release();  // the interpreter is gone or going: nothing may run
      return;
    }
    py::gil_scoped_acquire gil;
    adapter_ = py::object();
  }

  void capture_begin(std::uint64_t pool_first, std::uint64_t pool_second, int mode) {
    py::gil_scoped_acquire gil;
    if (mode < 0 || mode >= kCaptureModeCount)
      throw py::value_error("accgraph: capture mode " + std::to_string(mode) +
                            " is not an at::GraphCaptureMode this build knows: rebuild the "
                            "extension for the installed torch");
    adapter_.attr("capture_begin")(py::make_tuple(pool_first, pool_second),
                                   kCaptureModes[mode]);
  }
  void capture_end() { call("capture_end"); }
  void instantiate() { call("instantiate"); }
  void replay() { call("replay"); }
  void reset() { call("reset"); }
  std::pair<std::uint64_t, std::uint64_t> pool() const {
    py::gil_scoped_acquire gil;
    return adapter_.attr("pool")().cast<std::pair<std::uint64_t, std::uint64_t>>();
  }
  void enable_debug_mode() { call("enable_debug_mode"); }
  void debug_dump(const std::string& path) {
    py::gil_scoped_acquire gil;
    adapter_.attr("debug_dump")(path);
  }
  /// The adapter (with the GIL held).
  const py::object& adapter() const { return adapter_; }

 private:
  void call(const char* method) {
    py::gil_scoped_acquire gil;
    adapter_.attr(method)();
  }

  py::object adapter_;
};

#if ACCGRAPH_TORCH_GRAPH_REGISTRY
static_assert(static_cast<int>(at::GraphCaptureMode::Default) == 0 &&
                  static_cast<int>(at::GraphCaptureMode::Global) == 1 &&
                  static_cast<int>(at::GraphCaptureMode::ThreadLocal) == 2 &&
                  static_cast<int>(at::GraphCaptureMode::Relaxed) == 3,
              "at::GraphCaptureMode changed: update kCaptureModes");

/// The thin subclass: every virtual is the PythonGraph call of the same name.
class AcceleratorGraphImpl final : public at::GraphImplInterface {
 public:
  explicit AcceleratorGraphImpl(py::object adapter) : graph_(std::move(adapter)) {}
  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
    graph_.capture_begin(pool.first, pool.second, static_cast<int>(mode));
  }
  void capture_end() override { graph_.capture_end(); }
  void instantiate() override { graph_.instantiate(); }
  void replay() override { graph_.replay(); }
  void reset() override { graph_.reset(); }
  at::MempoolId_t pool() const override {
    auto [first, second] = graph_.pool();
    return {first, second};
  }
  void enable_debug_mode() override { graph_.enable_debug_mode(); }
  void debug_dump(const std::string& path) override { graph_.debug_dump(path); }

 private:
  PythonGraph graph_;
};

// The factories registered by this module, by key; kept to the end of the process (the
// registry keeps our creators), never released.
py::dict& factories() {
  static auto* table = new py::dict();
  return *table;
}

/// Registers `factory` (keep_graph: bool -> GraphAdapter) under `key` at `priority`, unless the
/// registry already holds the key (whatever its priority: torch's own implementation, or an
/// earlier registration, which at the same priority would make c10::Registry call exit(1)).
/// Returns "registered" or "kept" (the key was there: nothing changed).
std::string register_graph(const std::string& key, py::object factory, int priority) {
  if (at::GraphImplRegistry()->Has(key)) return "kept";
  factories()[py::str(key)] = factory;
  auto create = [key](at::GraphImplArgs args) -> std::unique_ptr<at::GraphImplInterface> {
    py::gil_scoped_acquire gil;
    py::object adapter = factories()[py::str(key)](args.keep_graph);
    return std::make_unique<AcceleratorGraphImpl>(std::move(adapter));
  };
  at::GraphImplRegistry()->Register(key, create, static_cast<c10::RegistryPriority>(priority));
  return "registered";
}

/// Whether the registry holds `key`, and what it creates there: the adapter's type name when
/// the implementation is this module's, else "" (another implementation).
py::object registered(const std::string& key) {
  if (!at::GraphImplRegistry()->Has(key)) return py::none();
  std::unique_ptr<at::GraphImplInterface> impl;
  try {
    py::gil_scoped_release no_gil;  // the creator takes the GIL itself
    impl = at::GraphImplRegistry()->Create(key, at::GraphImplArgs{});
  } catch (const std::exception&) {
    return py::str("");  // another implementation, which cannot be made here (no device)
  }
  auto* ours = dynamic_cast<AcceleratorGraphImpl*>(impl.get());
  return py::str(ours == nullptr ? std::string() : std::string("accgraph"));
}
#endif

}  // namespace accgraph_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using accgraph_torch::PythonGraph;
  m.doc() = "accgraph's torch.accelerator.Graph implementation for the installed torch";
  m.attr("HAS_GRAPH_REGISTRY") = py::bool_(ACCGRAPH_TORCH_GRAPH_REGISTRY != 0);
  // The calls the registry makes, made from Python with the GIL released as torch's
  // _acceleratorGraph binding makes them: capture modes by at::GraphCaptureMode's value.
  py::class_<PythonGraph>(m, "Driver")
      .def(py::init<py::object>(), py::arg("adapter"))
      .def("capture_begin", &PythonGraph::capture_begin, py::arg("pool_first"),
           py::arg("pool_second"), py::arg("mode"), py::call_guard<py::gil_scoped_release>())
      .def("capture_end", &PythonGraph::capture_end, py::call_guard<py::gil_scoped_release>())
      .def("instantiate", &PythonGraph::instantiate, py::call_guard<py::gil_scoped_release>())
      .def("replay", &PythonGraph::replay, py::call_guard<py::gil_scoped_release>())
      .def("reset", &PythonGraph::reset, py::call_guard<py::gil_scoped_release>())
      .def("pool", &PythonGraph::pool, py::call_guard<py::gil_scoped_release>())
      .def("enable_debug_mode", &PythonGraph::enable_debug_mode,
           py::call_guard<py::gil_scoped_release>())
      .def("debug_dump", &PythonGraph::debug_dump, py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("adapter", &PythonGraph::adapter);
#if ACCGRAPH_TORCH_GRAPH_REGISTRY
  m.attr("REGISTRY_FALLBACK") = static_cast<int>(c10::REGISTRY_FALLBACK);
  m.attr("REGISTRY_DEFAULT") = static_cast<int>(c10::REGISTRY_DEFAULT);
  m.def("register_graph", &accgraph_torch::register_graph, py::arg("key"), py::arg("factory"),
        py::arg("priority"));
  m.def("registered", &accgraph_torch::registered, py::arg("key"));
  m.def("keys", [] { return at::GraphImplRegistry()->Keys(); });
#endif
}
