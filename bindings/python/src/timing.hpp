// What the timing binders share (timing.cpp, reports.cpp, region.cpp, profiler.cpp): the Python
// Profiler and Region objects and the conversion of region metadata.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

namespace accgraph::python {

/// Python's Profiler. `sinks` are the Python callables the C++ profiler holds (one reference
/// each, owned by their PythonCallable): borrowed here to show them to the garbage collector
/// (Note [Sink cycles] in profiler.cpp).
struct PyProfiler {
  std::unique_ptr<timing::Profiler> profiler;
  std::vector<PyObject*> sinks;
  explicit PyProfiler(std::unique_ptr<timing::Profiler> p) : profiler(std::move(p)) {}
  ~PyProfiler() { destroy(); }
  /// The profiler; InvalidState once the garbage collector cleared it.
  timing::Profiler& get();
  /// Flushes without the GIL, logging a failure (for a destructor or a garbage collector slot,
  /// which cannot raise).
  void flush_quietly() noexcept;
  /// Flushes and destroys the C++ profiler, which drops the sinks.
  void destroy() noexcept;
};

/// One entry of a Profiler.region() object: the C++ region it opened, on whose behalf
/// (Note [Region entries] in region.cpp).
struct RegionEntry {
  std::thread::id thread;  // the thread that entered it
  std::unique_ptr<timing::Profiler::Region> region;  // on the heap: ended while `open` may grow
  bool ending = false;  // an __exit__ is ending it, without the GIL (Note [Region entries])
};

/// Profiler.region(): opens a C++ region on each entry (so one object serves as a decorator and
/// re-entrantly, on any number of threads), ends one on exit (Note [Region entries]). Keeps the
/// Python profiler and stream alive. name, metadata and lane never change once it is made.
struct PyRegion {
  nb::object profiler;  // PyProfiler
  nb::object
      stream;  // PyStream, or unset: the default stream at each entry (Note [Default stream])
  std::string name;
  timing::Metadata metadata;
  std::string lane;
  // The open entries, oldest first; changed only with the GIL held.
  std::vector<RegionEntry> open;
  PyRegion(nb::object p, nb::object s, std::string n, timing::Metadata md, std::string l)
      : profiler(std::move(p)),
        stream(std::move(s)),
        name(std::move(n)),
        metadata(std::move(md)),
        lane(std::move(l)) {}
  PyRegion(PyRegion&&) = default;
  ~PyRegion();
};

/// Region metadata from keyword arguments (values shown with str()).
timing::Metadata metadata_of(const nb::kwargs& kwargs);
/// Region metadata as a new dict.
nb::dict metadata_dict(const timing::Metadata& metadata);

/// RegionTiming, ReplayReport and RegionStats (reports.cpp).
void bind_reports(nb::module_& m);
/// Region and the default stream's provider (region.cpp).
void bind_region(nb::module_& m);
/// Profiler (profiler.cpp).
void bind_profiler(nb::module_& m);

}  // namespace accgraph::python
