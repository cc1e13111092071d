// The extension module accgraph._accgraph; the package accgraph (bindings/python/accgraph/)
// re-exports it with the exception classes and documentation.
#include "common.hpp"

NB_MODULE(_accgraph, m) {
  namespace py = accgraph::python;
  m.doc() = "accgraph's C++ API (the accgraph package re-exports it; import accgraph).";
  py::bind_errors(m);
  py::bind_registry(m);
  py::bind_stream(m);
  py::bind_graph(m);
  py::bind_foreign_graph(m);
  py::bind_timing(m);
  py::bind_traces(m);
}
