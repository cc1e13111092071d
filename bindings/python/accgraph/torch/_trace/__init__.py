"""accgraph's regions laid over a torch.profiler trace: :func:`annotate_trace` reads the Chrome
JSON that ``prof.export_chrome_trace(path)`` wrote (Kineto, CUPTI kernels included) and writes
it back with every timed replay's regions as ``gpu_user_annotation`` slices on rows of their own
under the GPU stream where the replay ran, and with each kernel of those replays carrying its
innermost region in ``args["accgraph_region"]`` (kernel -> module attribution)::

    prof = accgraph.Profiler()
    accgraph.torch.instrument(prof, ...)
    ...                                     # capture
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as tp:
        for _ in range(10):
            g.replay()
    torch.cuda.synchronize()
    prof.flush()
    tp.export_chrome_trace("trace.json")
    accgraph.torch.annotate_trace("trace.json", "annotated.json.gz", prof)

Region edges are the marker kernels accgraph itself put into the graph, found in the trace,
not a conversion between the trace's clock and the device's: Note [Trace replay matching] in
_match.py.
Which kernels those are, the backend says in each report (``ReplayReport.marker_kernels``,
Note [Marker kernel names] in include/accgraph/spi/marker_kernels.hpp): the cuda backend's
``device_timestamps`` markers are kernels; ``external_events`` markers (CUDA events) leave
nothing in the trace to align with, and their reports name no kernels.

The work is split by concern: _sources.py reads the reports (a Profiler, ReplayReports, a
reports CSV), _kineto.py loads the trace and finds its marker sequences, _match.py pairs them
with the reports, _annotate.py adds the slices and labels, _output.py writes the result through
the library's writers.
"""

from __future__ import annotations

import gc
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from ..._accgraph import MarkerKernels
from ..._errors import InvalidArgumentError
from ._annotate import Rows, annotate_match
from ._common import WHAT, error
from ._kineto import load_trace, marker_sequences, strip_annotations, trace_kernels
from ._match import match_reports, no_match_error
from ._output import check_output, output_format, same_file, write_json, write_perfetto
from ._sources import KernelNames, marker_kernels_arg, reports_of

__all__ = ["annotate_trace"]


def annotate_trace(trace: Union[str, os.PathLike, Dict[str, Any]],
                   output: Union[str, os.PathLike],
                   profiler_or_reports: Union[Any, Sequence[Any], str, os.PathLike],
                   *, tolerance_us: float = 1.0, overwrite_input: bool = False,
                   marker_kernels: Optional[MarkerKernels] = None) -> Dict[str, Any]:
    """Writes `output`: the torch.profiler trace `trace` (a Chrome JSON path, ``.json`` or
    ``.json.gz``, or the loaded dict) with accgraph's regions as ``gpu_user_annotation`` slices
    (rows of their own per lane and depth, under the GPU stream the replay ran on; args:
    ``accgraph_path``, ``graph_id``, ``replay_index``, ``duration_ns`` as reported, ``self_ns``
    where the reports have it, ``raw_duration_ns`` where the report took the marker overhead off
    (the slice then lies that much inside its marker kernels, half at each edge), ``lane``,
    ``stream_id`` and the region's metadata) and each
    kernel of a timed replay carrying ``args["accgraph_region"]`` (its innermost region's path,
    "" when outside every region) and ``args["accgraph_replay"]`` ("graph_id:replay_index");
    accgraph's marker kernels carry ``args["accgraph_marker"]``. Kernels of other work are left
    as they are. `output` ends in ``.json`` or ``.json.gz`` (Chrome JSON; Perfetto opens both)
    or ``.pftrace`` (a native Perfetto trace of the same slices, instants and process and
    thread names, ns exact, written by the C++ library; flow arrows and counters are left out).

    `profiler_or_reports`: the accgraph Profiler that timed the replays (its kept reports:
    flush it first), a list of ReplayReport, or the path of Profiler.write_csv's file.
    Regions are aligned on accgraph's own marker kernels in the trace, matched per replay by
    the times the markers wrote, within `tolerance_us` (Note [Trace replay matching] in
    _trace/_match.py). Which kernels those are, each report says (ReplayReport.marker_kernels, from the
    backend); `marker_kernels` names them for reports that do not: a reports CSV, which holds
    no report source (pass the marker_kernels of a report timed on that backend), or reports
    whose markers are not kernels, taken as stand-ins (tests). Returns a summary: replays
    annotated, regions, kernels labelled, replays of the trace left unmatched, and how closely
    they matched (the largest disagreement of a marker's offset within a replay, and of the
    gaps between replays, in ns).

    `output` is checked before any work and written atomically (Note [Atomic output]: a
    failed write leaves an existing file as it was). It may not be the trace file itself (also
    under another name or through a link) unless `overwrite_input` is True. A trace annotated
    before is annotated afresh: the earlier region slices and labels are replaced, not doubled.
    Events whose time a ``.pftrace`` cannot hold (negative, beyond 2^63 ns) are left out of it
    with a RuntimeWarning saying how many.

    InvalidArgumentError when no replay of the trace matches a report, saying why (no marker
    kernels, marker counts that differ, gaps that disagree, no reports), and for input it cannot
    read (a damaged or cut-short trace, a reports CSV with a damaged row, a region that ends
    before it starts or a row given twice), naming the file, the line where there is one, and
    what to do (also for a reports CSV without `marker_kernels`); UnsupportedError for reports
    whose markers are not kernels (the external_events marker strategy), or a
    ``.pftrace`` output from a package built without Perfetto support
    (accgraph.perfetto_supported())."""
    output = os.fspath(output)
    # Note [Matching cost]: the cyclic garbage collector is off while annotate_trace runs. It
    # makes no cycles, and a trace's millions of objects made the collector's passes half its
    # time (a pass walks every object tracked so far).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _annotate_trace(trace, output, profiler_or_reports, tolerance_us,
                               overwrite_input, marker_kernels)
    finally:
        if collecting:
            gc.enable()


def _annotate_trace(trace: Any, output: str, profiler_or_reports: Any, tolerance_us: float,
                    overwrite_input: bool, marker_kernels: Optional[MarkerKernels]
                    ) -> Dict[str, Any]:
    perfetto = output_format(output) == "perfetto"
    if isinstance(tolerance_us, bool) or not isinstance(tolerance_us, numbers.Real):
        raise TypeError(f"{WHAT}: tolerance_us must be a number of microseconds, not "
                        f"{type(tolerance_us).__name__}")
    if not tolerance_us > 0:
        raise error(InvalidArgumentError, f"tolerance_us must be positive (got {tolerance_us})")
    if not isinstance(trace, dict) and same_file(trace, output) and not overwrite_input:
        raise error(InvalidArgumentError,
                    f"output {output!r} is the trace {os.fspath(trace)!r} itself (the same "
                    "file): annotating would replace the torch.profiler trace; write another "
                    "file, or pass overwrite_input=True to replace it (atomically: a failed "
                    "write leaves it as it was)")
    marker_kernels = marker_kernels_arg(marker_kernels)
    check_output(output)
    names = KernelNames()
    reports = reports_of(profiler_or_reports, names, marker_kernels)
    data = load_trace(trace)
    events = data["traceEvents"]
    strip_annotations(events)
    kernels, unusable = trace_kernels(events, names)
    sequences = marker_sequences(kernels)
    tolerance_ns = tolerance_us * 1000
    matches = match_reports(sequences, reports, tolerance_ns)
    if not matches:
        raise no_match_error(trace, sequences, kernels, unusable, reports, tolerance_ns, names)
    rows = Rows(events)
    slices: List[Dict[str, Any]] = []
    regions = labelled = 0
    for match in matches:
        r, k = annotate_match(match, rows, slices)
        regions += r
        labelled += k
    events.extend(rows.added)
    events.extend(slices)
    if perfetto:
        write_perfetto(data, output)
    else:
        write_json(data, output)
    return {"replays": len(matches), "regions": regions, "kernels_labelled": labelled,
            "unmatched_replays": len(sequences) - len(matches),
            "max_marker_residual_ns": max(m.residual_ns for m in matches),
            "max_replay_disagreement_ns": max(m.disagreement_ns for m in matches)}
