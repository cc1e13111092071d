// The timing layer from Python: its enums, then the reports (reports.cpp), Region (region.cpp)
// and Profiler (profiler.cpp), bound in the order the stubs list them.
#include "timing.hpp"

namespace accgraph::python {

namespace {

using timing::Delivery;
using timing::StatsMode;

void bind_timing_enums(nb::module_& m) {
  nb::enum_<Delivery>(m, "Delivery",
                      "When reports reach the sinks; arguments also take 'lazy' and 'immediate'.")
      .value("LAZY", Delivery::Lazy,
             "When the ring is full, on flush(), when the profiler is dropped, or by the "
             "background collector.")
      .value("IMMEDIATE", Delivery::Immediate,
             "Right after each replay (waits for it: serialises replays with the host).");

  nb::enum_<StatsMode>(m, "StatsMode",
                       "How statistics keep durations; arguments also take 'sketch' and 'exact'.")
      .value("SKETCH", StatsMode::Sketch,
             "Bounded memory: exact count/min/max/mean, p50/p95 within 1/128 relative error.")
      .value("EXACT", StatsMode::Exact, "Every sample: exact percentiles, memory grows.");
}

}  // namespace

void bind_timing(nb::module_& m) {
  bind_timing_enums(m);
  bind_reports(m);
  bind_region(m);
  bind_profiler(m);
}

}  // namespace accgraph::python
