// SPI for backends: the names of the kernels a marker set launches (the optional
// MarkerKernelNames interface a TimestampMarkers class may also derive from), which reports carry
// in ReportSource::marker_kernels for trace readers.
#pragma once

#include "accgraph/export.hpp"
#include "accgraph/report.hpp"  // MarkerKernels

namespace accgraph {

class TimestampMarkers;

/// Note [Marker kernel names]: a trace of the device's kernels (CUPTI, torch.profiler) shows a
/// backend's marker kernels among the user's, and a reader aligns regions on them (Python's
/// annotate_trace). Which kernels those are is the backend's fact, so the backend states it: a
/// TimestampMarkers class whose markers are kernels also derives from MarkerKernelNames, and the
/// timing layer copies the names into every report's source (ReportSource::marker_kernels) when
/// it creates the set. A set that does not derive from it has markers that are not kernels (or
/// that a reader cannot use): its reports carry no names, and a reader refuses to align them.
/// - (marker.kernels) marker_kernels() returns the same names for the life of the set; each name
///   is part of the name a kernel trace shows for that kernel; a kernel is listed under the kind
///   that says where its time is written (MarkerKernels).
/// Plugin ABI 2.4 (Note [Plugin ABI]): a plugin that derives from it needs a 2.4 core.
class ACCGRAPH_API MarkerKernelNames {
 public:
  virtual ~MarkerKernelNames();
  virtual timing::MarkerKernels marker_kernels() const = 0;
};

/// The MarkerKernelNames of `markers`, or nullptr when its class does not implement it.
ACCGRAPH_API const MarkerKernelNames* marker_kernel_names_of(
    const TimestampMarkers& markers) noexcept;

}  // namespace accgraph
