"""accgraph: capture accelerator work into graphs, replay it on any backend (host CPU, CUDA,
Level Zero, plugins), and time every replay per region.

The Python API is accgraph's C++ API in Python's idioms, close to PyTorch's CUDA graphs::

    import accgraph

    stream = accgraph.Stream("host")            # or "cuda", "level_zero", a plugin, None
    buf = accgraph.Buffer(stream, 1 << 20)
    g = accgraph.Graph("host")
    with accgraph.graph(g, stream=stream):      # like torch.cuda.graph(g)
        stream.fill(buf, 0x2a)                  # recorded, not run
    for _ in range(100):
        g.replay()
    stream.synchronize()

Graphs that a framework captures and launches itself are timed through :class:`ForeignGraph`;
``accgraph.torch`` (imported on demand) does that for every ``torch.cuda.CUDAGraph``.

Errors are :class:`Error` subclasses that also derive from the matching built-in
(``InvalidArgumentError`` is a ``ValueError``). Blocking calls release the GIL; callables given
to C++ (report sinks, host calls) run with the GIL held on whatever thread C++ calls them from.
"""

from __future__ import annotations

import atexit as _atexit
from typing import Optional, Tuple, Union

from . import _accgraph
from ._accgraph import (
    BackendInfo,
    Buffer,
    Capabilities,
    CaptureMode,
    CaptureScope,
    ClockOffset,
    Delivery,
    DeviceInfo,
    ErrorCode,
    ErrorReason,
    ForeignGraph,
    Graph,
    GraphReplays,
    GraphState,
    GraphStats,
    HostClockOffset,
    MarkerKernels,
    MemoryKind,
    MergedRank,
    MergeSummary,
    PluginFailure,
    Profiler,
    Region,
    RegionStats,
    RegionTiming,
    ReplayReport,
    StatsMode,
    Stream,
    UntimedCalls,
    backends,
    calibrate_clock,
    default_backend,
    estimate_clock_offset,
    host_clock_ns,
    is_sampled_replay,
    library_version,
    load_plugin,
    merge_traces,
    perfetto_supported,
    plugin_failures,
    reports_csv_columns,
    stats_csv_columns,
    stats_schema_version,
    write_trace,
)
from ._default_stream import default_stream, set_default_stream_provider
from ._errors import (
    BackendError,
    Error,
    InvalidArgumentError,
    InvalidStateError,
    PluginError,
    UnavailableError,
    UnsupportedError,
)
from ._host_clock import measure_host_clock_offset

__version__ = "{}.{}.{}".format(*library_version())

# Callables kept by C++ are not called once the interpreter begins to exit (a thread that takes
# the GIL during finalisation is killed, see Note [GIL rules] in bindings/python/src/common.hpp).
_atexit.register(_accgraph._mark_interpreter_exiting)


def graph(
    cuda_graph: Graph,
    pool: Optional[Tuple[int, int]] = None,
    stream: Optional[Stream] = None,
    capture_error_mode: Union[CaptureMode, str, None] = None,
) -> CaptureScope:
    """Captures the block's work into `cuda_graph`, like ``torch.cuda.graph``::

        g = accgraph.Graph()
        with accgraph.graph(g) as s:     # s: the stream captured on
            s.fill(buf, 1)
        g.replay()

    `stream` defaults to a stream the graph creates on its backend and keeps
    (``Graph.capture_stream``), so ``replay()`` works after the block; `pool` is another graph's
    ``pool()`` to share its memory pool; `capture_error_mode` is a :class:`CaptureMode` or its
    name (``"global"``, ``"thread_local"``, ``"relaxed"``; None: the backend's default). An
    exception inside the block aborts the capture and leaves the graph reusable.
    """
    return cuda_graph.capture(stream, pool=pool, mode=capture_error_mode)


__all__ = [
    "BackendError",
    "BackendInfo",
    "Buffer",
    "Capabilities",
    "CaptureMode",
    "CaptureScope",
    "ClockOffset",
    "Delivery",
    "DeviceInfo",
    "Error",
    "ErrorCode",
    "ErrorReason",
    "ForeignGraph",
    "Graph",
    "GraphReplays",
    "GraphState",
    "GraphStats",
    "HostClockOffset",
    "MarkerKernels",
    "InvalidArgumentError",
    "InvalidStateError",
    "MemoryKind",
    "MergeSummary",
    "MergedRank",
    "PluginError",
    "PluginFailure",
    "Profiler",
    "Region",
    "RegionStats",
    "RegionTiming",
    "ReplayReport",
    "StatsMode",
    "Stream",
    "UnavailableError",
    "UnsupportedError",
    "UntimedCalls",
    "backends",
    "calibrate_clock",
    "default_backend",
    "default_stream",
    "estimate_clock_offset",
    "graph",
    "host_clock_ns",
    "is_sampled_replay",
    "library_version",
    "load_plugin",
    "measure_host_clock_offset",
    "merge_traces",
    "perfetto_supported",
    "plugin_failures",
    "reports_csv_columns",
    "set_default_stream_provider",
    "stats_csv_columns",
    "stats_schema_version",
    "write_trace",
]
