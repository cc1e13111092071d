// The writers of the trace formats that libaccgraph does not hold itself: a library that has one
// (accgraph::perfetto) hands it over when it is loaded (Note [Trace formats] in trace_file.cpp).
// Internal; included by name ("trace_writers.hpp") through accgraph_export_support.
#pragma once

#include <iosfwd>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/report.hpp"
#include "accgraph/trace_file.hpp"

namespace accgraph::timing::detail {

// Writes `reports` to `out` in one format; the options are the Perfetto trace's (the other
// formats are given the defaults: write_trace_file refuses any other).
using TraceWriter = void (*)(std::ostream& out, const std::vector<ReplayReport>& reports,
                             const PerfettoOptions& options);

// Makes `writer` the writer of `format` for write_trace_file; a later call replaces it.
ACCGRAPH_API void register_trace_writer(TraceFormat format, TraceWriter writer) noexcept;

}  // namespace accgraph::timing::detail
