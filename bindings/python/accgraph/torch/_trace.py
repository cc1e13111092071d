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
not a conversion between the trace's clock and the device's: Note [Trace replay matching].
Which kernels those are, the backend says in each report (``ReplayReport.marker_kernels``,
Note [Marker kernel names] in include/accgraph/spi/marker_kernels.hpp): the cuda backend's
``device_timestamps`` markers are kernels; ``external_events`` markers (CUDA events) leave
nothing in the trace to align with, and their reports name no kernels.
"""

from __future__ import annotations

import csv
import errno
import gc
import gzip
import json
import math
import numbers
import os
import secrets
import sys
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import IO, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .. import _accgraph
from .._accgraph import MarkerKernels, Profiler, ReplayReport, reports_csv_columns
from .._errors import InvalidArgumentError, UnsupportedError, make_error
from .._native import write_perfetto_events
from ._table import wide_csv_fields

__all__ = ["annotate_trace"]

_WHAT = "annotate_trace"
CATEGORY = "gpu_user_annotation"
# The reports CSV's columns this reader cannot do without, and those it reads where a CSV has
# them (an earlier version's lacks the raw_* ones). Each is a column of the writer's schema,
# reports_csv_columns() (accgraph::timing::reports_csv_columns): the CSV's header is declared
# once, in C++; tests/python/test_torch_trace.py checks that these are among its columns.
CSV_NEEDED = ("graph_id", "replay_index", "path", "depth", "lane", "start_ns", "end_ns")
CSV_OPTIONAL = ("stream_id", "self_ns", "raw_start_ns", "raw_end_ns")
# Kineto's categories of a graph's nodes that run on the GPU: kernels, copies and fills.
_GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")

# Note [Trace replay matching]: a timed replay leaves in a CUPTI trace the marker kernels of
# its marker sequence: one record kernel per marker of its layout (markers, not region edges:
# coinciding edges share a marker, e.g. a module's begin and its first child's) and one end
# kernel. The report of that replay holds what each marker wrote (%globaltimer when the record
# kernel ran) and which markers each region's edges use (RegionTiming.begin_marker/end_marker).
#
# 1. Sequences in the trace: every end kernel closes one. All kernels of one cudaGraphLaunch
#    share its CUPTI correlation id, so a graph replay's record kernels are those with the end
#    kernel's correlation, and its kernels are every kernel with it, on whichever streams the
#    graph ran. An end kernel alone under its correlation (an eager sequence, or a trace without
#    correlation ids) takes the record kernels of its own stream row since that row's previous
#    end kernel, and the kernels of that row from its first record kernel to the end kernel.
# 2. A marker's instant in the trace (its anchor) is where the kernel wrote its timestamp: the
#    start of a plain record kernel (the store is its first instruction), the end of a
#    programmatic one (it starts early, waits in griddepcontrol.wait for the kernel before it,
#    then stores and exits). The record kernels sorted by anchor are the markers sorted by the
#    times they wrote (ties by index: on one stream the markers' order). That is the map from
#    kernel to marker index, which is why matching is by marker, never by counting edges.
# 3. Shape: a sequence fits a report when both have the same number of markers and every
#    marker's offset from the first agrees within `tolerance_us` (anchor gaps against the
#    report's gaps: the same device clock, so only the kernel's own latency differs). Replays
#    of one graph differ by more than that (a kernel's duration varies from run to run), so a
#    sequence first goes to the graph of its marker count whose reports come closest (the
#    first, middle and last report of each graph, no threshold: graphs of one marker count
#    differ in their gaps), and fits are checked per pair once the replay is chosen.
# 4. Which replay: a graph's sequences in the trace are consecutive replays (CUPTI sees every
#    launch while tracing), so sequence i is replay r0 + i, and only r0 is unknown. An r0 is
#    possible when the pairs' clock offsets (anchor of the first marker minus its time) agree
#    between consecutive pairs within `tolerance_us`: the gaps between replays, which the
#    host's launch jitter makes distinct, match as the gaps within a replay do. Of those, the
#    r0 whose pairs fit (3) most often wins, then the smallest disagreement, then the latest
#    replays. Replays run back to back at a fixed period may fit at several r0: the replay
#    index may then be off, but the slices still sit on that replay's own marker kernels, since
#    edges come from the trace. A report without a traced replay, or the reverse, is skipped.
# 5. Every region with both markers measured becomes a slice from its begin marker's anchor to
#    its end marker's anchor, each moved in by what the report took off that edge (the marker
#    overhead, Note [Marker overhead] in timing/engine/marker_overhead.cpp; kernels are still labelled
#    by the anchors), on a row of (the begin kernel's GPU row, lane, depth): one row per
#    nesting level, so slices with a shared edge never depend on a viewer's tie-breaking. Each
#    other kernel of the replay gets the deepest region that contains its end ("" when none
#    does): a kernel ends after the begin marker's store and before the end marker's, while its
#    start may come early (a kernel launched as a programmatic dependent starts while the one
#    before it runs). Marker kernels get `accgraph_marker` instead (the index, or "end").
#
# The CSV export (Profiler.write_csv) holds the edges' times but not their markers:
# markers are then the distinct edge times of each report, which joins two markers that wrote
# the same time (that report's sequence then has one kernel more than it, and does not fit).

# Note [Trace input checks]: what annotate_trace refuses and what it takes (the 2026-11-28
# reliability audit's rows A03-A36):
# - The reports CSV is read by column name: columns it does not know (a later version's) are
#   ignored. A row with fewer or more fields than the header, a field that is not a whole
#   number, a region that ends before it starts and a region's row given twice in one report
#   (two exports concatenated) are refused, naming the file and line: slices of negative or
#   doubled length would be wrong without a word. Only a region with no time between its edges
#   may repeat (boundaries sharing a marker make such rows alike). A gzip file given as the CSV
#   is named as such; a field longer than csv.field_size_limit() (a long metadata value) is
#   read: the limit is raised while the file is read, then put back.
# - A trace that is not gzip or JSON, cut short or damaged, or nested deeper than Python's JSON
#   reader follows is refused naming the file. An event the matching cannot use (a ts that is
#   not a number; a pid, tid or correlation that is a list or an object) is passed over, and
#   the marker kernels passed over are counted in the error when none is left.
# - A trace annotated before is annotated afresh: its region slices (gpu_user_annotation with
#   args.accgraph_path), the rows that held only those and the kernels' accgraph_* labels are
#   taken out first, so the output is what the original trace would give. Replacing, not
#   refusing: annotated in place (overwrite_input=True), the original is gone.
# - A .pftrace holds unsigned ns: events with a negative time or one beyond 2^63 ns are left
#   out of it with one RuntimeWarning counting them (the .json output keeps every event).

@dataclass
class _Region:
    path: str
    name: str
    depth: int
    lane: str
    stream_id: int
    begin_marker: Optional[int]
    end_marker: Optional[int]
    duration_ns: Optional[int]
    metadata: Dict[str, str] = field(default_factory=dict)
    self_ns: Optional[int] = None  # RegionTiming.self_ns where the report has it
    # How far the reported edges lie inside the markers' (the marker overhead taken off: Note
    # [Marker overhead] in timing/engine/marker_overhead.cpp): the slice moves in as much (5).
    start_shift_ns: int = 0
    end_shift_ns: int = 0


@dataclass
class _Report:
    graph_id: int
    replay_index: int
    regions: List[_Region]
    times: List[Optional[int]]  # per marker index; None: not measured
    resolution_ns: int = 0
    order: List[int] = field(default_factory=list)  # marker indices sorted by time
    # In that order, (rank, time - the first measured marker's time) of each measured marker,
    # and the rank of that first one (None: none measured): what _shape_residual compares.
    shape: List[Tuple[int, int]] = field(default_factory=list)
    base: Optional[int] = None

    def __post_init__(self) -> None:
        if any(t is None for t in self.times):
            self.order = list(range(len(self.times)))
        else:
            self.order = sorted(range(len(self.times)), key=lambda i: (self.times[i], i))
        ordered = [self.times[i] for i in self.order]
        self.base = next((j for j, t in enumerate(ordered) if t is not None), None)
        if self.base is not None:
            first = ordered[self.base]
            self.shape = [(j, t - first) for j, t in enumerate(ordered) if t is not None]


@dataclass(eq=False)
class _Kernel:
    __slots__ = ("event", "start", "end", "row", "kind", "correlation")
    event: Dict[str, Any]
    start: int  # ns, the trace's clock
    end: int
    row: Tuple[Any, Any]  # (pid, tid)
    kind: str  # "record", "programmatic", "end" or ""
    correlation: Any

    @property
    def anchor(self) -> int:
        return self.end if self.kind == "programmatic" else self.start


@dataclass
class _Sequence:
    records: List[_Kernel]  # sorted by anchor
    end: _Kernel
    kernels: List[_Kernel]
    anchors: List[int] = field(init=False)  # the records' (matching compares them often)

    def __post_init__(self) -> None:
        self.anchors = [k.anchor for k in self.records]


def _error(cls: type, message: str) -> Exception:
    return make_error(cls, f"{_WHAT}: {message}")


# --- reports ----------------------------------------------------------------------------------


def _markers_from_times(regions: List[Tuple[_Region, Optional[int], Optional[int]]]) -> List[int]:
    """Gives each region markers from its edge times (distinct times = markers); the times."""
    times = sorted({t for _, a, b in regions for t in (a, b) if t is not None})
    index = {t: i for i, t in enumerate(times)}
    for region, start, end in regions:
        region.begin_marker = index.get(start) if start is not None else None
        region.end_marker = index.get(end) if end is not None else None
    return times


class _KernelNames:
    """The marker kernels' names of the reports (Note [Marker kernel names]), and what kind each
    kernel of the trace is by its name: "record" (the time written as it starts),
    "programmatic" (as it ends), "end" (a sequence's end) or "" (not a marker kernel)."""

    def __init__(self) -> None:
        self.record: List[str] = []
        self.programmatic: List[str] = []
        self.end: List[str] = []
        self.kinds: Dict[str, str] = {}  # a trace's kernel name -> its kind (names repeat)

    def add(self, names: Any) -> None:
        for ours, theirs in ((self.record, names.record_at_start),
                             (self.programmatic, names.record_at_end), (self.end, names.end)):
            ours.extend(n for n in theirs if n and n not in ours)
        self.kinds.clear()

    def kind(self, name: str) -> str:
        kind = self.kinds.get(name)
        if kind is None:
            # A name may be part of another (marker_record_kernel, marker_record_placed_kernel
            # are not, but a backend's may be): the longest name found wins.
            found = [(len(n), k) for k, names in (("programmatic", self.programmatic),
                                                  ("record", self.record), ("end", self.end))
                     for n in names if n in name]
            kind = max(found)[1] if found else ""
            self.kinds[name] = kind
        return kind

    def describe(self) -> str:
        return ", ".join(self.record + self.programmatic + self.end)


def _from_replay_report(report: Any, names: _KernelNames,
                        fallback: Optional[MarkerKernels]) -> _Report:
    kernels = report.marker_kernels
    if not kernels:
        kernels = fallback
    if not kernels:
        raise _error(UnsupportedError,
                     f"graph {report.graph_id} was timed with the '{report.marker_strategy}' "
                     f"markers of the {report.backend} backend, which are not kernels (its "
                     "reports name no marker kernels: ReplayReport.marker_kernels), so a kernel "
                     "trace holds nothing to align them with: time it with markers that are "
                     "kernels (the cuda backend's default, device_timestamps)")
    names.add(kernels)
    regions = []
    edges = []
    with_markers = True
    for t in report:
        measured = t.measurable
        region = _Region(t.path, t.name, t.depth, t.lane, t.stream_id, None, None,
                         t.duration_ns if measured else None, dict(t.metadata),
                         getattr(t, "self_ns", None) if measured else None)
        if hasattr(t, "begin_marker"):
            region.begin_marker, region.end_marker = t.begin_marker, t.end_marker
        else:  # an extension built before the markers were exposed
            with_markers = False
        regions.append(region)
        # The markers' own times (Note [Marker overhead]: start_ns/end_ns have it taken off).
        raw_start = getattr(t, "raw_start_ns", t.start_ns) if measured else None
        raw_end = getattr(t, "raw_end_ns", t.end_ns) if measured else None
        if measured:
            region.start_shift_ns, region.end_shift_ns = t.start_ns - raw_start, raw_end - t.end_ns
        edges.append((region, raw_start, raw_end))
    if with_markers:
        count = max((max(r.begin_marker, r.end_marker) + 1 for r in regions), default=0)
        times: List[Optional[int]] = [None] * count
        for region, start, end in edges:
            if start is not None:
                times[region.begin_marker] = start
                times[region.end_marker] = end
    else:
        times = list(_markers_from_times(edges))
    return _Report(report.graph_id, report.replay_index, regions, times,
                   getattr(report, "resolution_ns", 0))


class _CsvRow:
    """One row of the reports CSV, its errors naming the file and line (A30, A31, A35)."""

    def __init__(self, path: str, line: int, row: Dict[Any, Any]) -> None:
        self.path, self.line, self.row = path, line, row

    def fail(self, problem: str, todo: str = "write it again with Profiler.write_csv") -> Exception:
        return _error(InvalidArgumentError,
                      f"the reports CSV {self.path!r}, line {self.line}: {problem}: {todo}")

    def int(self, column: str, required: bool = True) -> Optional[int]:
        text = self.row.get(column)
        if text is None or text == "":
            if required:
                raise self.fail(f"column {column!r} is empty")
            return None
        try:
            return int(text)
        except ValueError:
            raise self.fail(f"column {column!r} is {_cut(text)!r}, not a whole number") from None


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _csv_rows(path: str) -> Tuple[List[str], List[Tuple[int, Dict[Any, Any]]]]:
    """The header and (line, row) of every row. A field longer than csv.field_size_limit() is
    read (a region's metadata may be long): the limit is raised while this file is read."""
    with open(path, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            raise _error(InvalidArgumentError,
                         f"the reports CSV {path!r} is a gzip file (the trace?), not the CSV "
                         "Profiler.write_csv wrote: pass that CSV")
    try:
        with wide_csv_fields(), open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = [(reader.line_num, row) for row in reader]
            return list(reader.fieldnames or []), rows
    except UnicodeDecodeError as e:
        raise _error(InvalidArgumentError,
                     f"the reports CSV {path!r} is not UTF-8 text (byte {e.object[e.start]:#04x} "
                     f"at offset {e.start}): pass the CSV Profiler.write_csv wrote") from None
    except csv.Error as e:
        raise _error(InvalidArgumentError,
                     f"the reports CSV {path!r}, line {reader.line_num}: {e}: the file is "
                     "damaged; write it again with Profiler.write_csv") from None


def _marker_kernels_arg(value: Any) -> Optional[MarkerKernels]:
    """annotate_trace's `marker_kernels`: None or a MarkerKernels; a dict of its fields (as
    ReplayReport.to_dict() gives it: the three lists of names) is taken as the same; anything
    else is a TypeError naming it (audit T03-T05: a str, a list of names)."""
    if value is None or isinstance(value, MarkerKernels):
        return value
    fields = ("record_at_start", "record_at_end", "end")
    if isinstance(value, dict) and set(value) <= set(fields) and all(
            isinstance(v, (list, tuple)) and all(isinstance(n, str) for n in v)
            for v in value.values()):
        return MarkerKernels(**{k: list(v) for k, v in value.items()})
    raise TypeError(f"{_WHAT}: marker_kernels must be an accgraph.MarkerKernels (or a dict "
                    f"of its fields), not {type(value).__name__} ({_cut(repr(value), 80)}): give "
                    "the ReplayReport.marker_kernels of a report timed on that backend, or "
                    "accgraph.MarkerKernels(record_at_start=[...], record_at_end=[...], "
                    "end=[...])")


def _csv_marker_kernels(path: str, rows: List[Tuple[int, Dict[str, Any]]]
                        ) -> Optional[MarkerKernels]:
    """The marker kernels the reports CSV's rows name (its marker_kernels column,
    "record_at_start=A|B;record_at_end=C;end=D", as write_reports_csv writes them), so a GPU
    run's CSV is annotated without marker_kernels=; None when no row names any."""
    fields = {"record_at_start": [], "record_at_end": [], "end": []}
    for line, row in rows:
        text = row.get("marker_kernels")
        if not isinstance(text, str) or not text:
            continue
        for part in text.split(";"):
            kind, _, listed = part.partition("=")
            if kind not in fields or not listed:
                raise _CsvRow(path, line, row).fail(
                    f"its marker_kernels {_cut(text, 80)!r} is not "
                    "record_at_start=A|B;record_at_end=C;end=D",
                    "write the CSV again with Profiler.write_csv, or pass marker_kernels=")
            fields[kind].extend(n for n in listed.split("|") if n and n not in fields[kind])
    if not any(fields.values()):
        return None
    return MarkerKernels(**fields)


def _from_csv(path: Union[str, os.PathLike], names: _KernelNames,
              marker_kernels: Optional[MarkerKernels]) -> List[_Report]:
    """The reports of Profiler.write_csv's file. Columns are found by name: others (added by a
    later version) are ignored. A row cut short, a field that is not a number, a region that
    ends before it starts and a row given twice are refused, naming the line (Note [Trace
    input checks])."""
    path = os.fspath(path)
    try:
        header, rows = _csv_rows(path)
    except OSError as e:
        raise _error(InvalidArgumentError, f"cannot read the reports CSV {path!r}: "
                     f"{e.strerror or e}: pass the file Profiler.write_csv wrote") from e
    if marker_kernels is not None and not marker_kernels:
        raise _error(InvalidArgumentError,
                     f"the given marker_kernels names no kernel ({marker_kernels!r}), so the "
                     f"markers of the reports CSV {path!r} cannot be found in the trace: give "
                     "the ReplayReport.marker_kernels of a report timed on the backend that "
                     "wrote the CSV (the cuda backend's, for a GPU run)")
    if marker_kernels is None:
        marker_kernels = _csv_marker_kernels(path, rows)
    if not marker_kernels:
        raise _error(InvalidArgumentError,
                     f"the reports CSV {path!r} does not say which kernels its markers are (its "
                     "marker_kernels column is missing or empty: written before accgraph wrote "
                     "it, or by a backend whose markers are not kernels): pass marker_kernels= "
                     "(the ReplayReport.marker_kernels of a report timed on that backend), or "
                     "the reports themselves (the Profiler)")
    names.add(marker_kernels)
    needed = set(CSV_NEEDED)
    if rows and not needed <= set(header):
        raise _error(InvalidArgumentError,
                     f"{path!r} is not accgraph's reports CSV (it lacks the columns "
                     f"{sorted(needed - set(header))} of {','.join(reports_csv_columns())}): "
                     "pass the file Profiler.write_csv wrote, or the reports themselves")
    grouped: Dict[Tuple[int, int], List[Tuple[_Region, Optional[int], Optional[int]]]] = {}
    seen: Dict[Tuple[Any, ...], int] = {}
    for line, row in rows:
        r = _CsvRow(path, line, row)
        if None in row:
            raise r.fail(f"the row has {len(header) + len(row[None])} fields, the header "
                         f"{len(header)}", "the file is damaged; write it again with "
                         "Profiler.write_csv")
        if any(row.get(c) is None for c in header):
            raise r.fail(f"the row has {sum(v is not None for v in row.values())} fields, the "
                         f"header {len(header)} (the file is cut short?)",
                         "write it again with Profiler.write_csv")
        graph_id, replay_index = r.int("graph_id"), r.int("replay_index")
        depth = r.int("depth")
        start, end = r.int("start_ns", False), r.int("end_ns", False)
        raw_start, raw_end = r.int("raw_start_ns", False), r.int("raw_end_ns", False)
        where = f"region {_cut(row['path'], 80)!r} of graph {graph_id} replay {replay_index}"
        for lo, hi, lo_name, hi_name in ((start, end, "start_ns", "end_ns"),
                                         (raw_start, raw_end, "raw_start_ns", "raw_end_ns")):
            if lo is not None and hi is not None and lo > hi:
                raise r.fail(f"{where} ends before it starts ({lo_name} {lo} > {hi_name} {hi})",
                             "the file was edited or damaged; write it again with "
                             "Profiler.write_csv")
        # A region's row twice in one report: two exports concatenated, or a copy-paste. Only a
        # region with no time between its edges (boundaries that share a marker) can repeat.
        key = (graph_id, replay_index) + tuple(row[c] for c in header)
        if key in seen and start is not None and end is not None and start < end:
            raise r.fail(f"{where} is the same row as line {seen[key]} (two exports "
                         "concatenated?)", "give each report's rows once: write the CSV again "
                         "with Profiler.write_csv")
        seen.setdefault(key, line)
        duration = None if start is None or end is None else end - start
        shifts = (0, 0)
        # The markers' own times where the CSV has them (written since the marker overhead
        # is taken off start_ns/end_ns); a CSV from before has only the raw ones.
        if start is not None and end is not None and raw_start is not None and \
                raw_end is not None:
            shifts = (start - raw_start, raw_end - end)
            start, end = raw_start, raw_end
        name = row["path"].rsplit("/", 1)[-1]
        region = _Region(row["path"], name, depth, row["lane"],
                         r.int("stream_id", False) or 0, None, None, duration,
                         self_ns=r.int("self_ns", False),
                         start_shift_ns=shifts[0], end_shift_ns=shifts[1])
        grouped.setdefault((graph_id, replay_index), []).append((region, start, end))
    reports = []
    for (graph_id, replay_index), edges in grouped.items():
        times = list(_markers_from_times(edges))
        reports.append(_Report(graph_id, replay_index, [r for r, _, _ in edges], times,
                               _resolution_of(times)))
    return reports


def _resolution_of(times: List[int]) -> int:
    """The marker clock's step as the CSV's times show it (it does not hold the report's
    resolution_ns): their greatest common step, when that is coarser than 1 ns."""
    step = 0
    for t in times[1:]:
        step = math.gcd(step, t - times[0])
    return step if 1 < step <= 1000 else 0  # a step of microseconds or more: regions, not a clock


def _reports_of(source: Any, names: _KernelNames,
                marker_kernels: Optional[MarkerKernels] = None) -> List[_Report]:
    """The reports of `source`; their marker kernels' names go to `names` (`marker_kernels`
    for reports that carry none)."""
    if isinstance(source, (str, os.PathLike)):
        reports = _from_csv(source, names, marker_kernels)
        origin = f"the reports CSV {os.fspath(source)!r}"
    elif isinstance(source, Profiler):
        reports = [_from_replay_report(r, names, marker_kernels) for r in source.reports()]
        origin = ("the profiler: it keeps none when made with keep_reports=0, and holds only "
                  "delivered ones: make it with Profiler(keep_reports=N) and call "
                  "prof.flush() before annotate_trace")
    elif isinstance(source, ReplayReport):
        reports = [_from_replay_report(source, names, marker_kernels)]
        origin = "the report"
    elif isinstance(source, Iterable):
        items = list(source)
        if not all(isinstance(r, ReplayReport) for r in items):
            raise TypeError(f"{_WHAT}: profiler_or_reports must be an accgraph.Profiler, a list "
                            "of accgraph.ReplayReport or the path of a reports CSV")
        reports = [_from_replay_report(r, names, marker_kernels) for r in items]
        origin = "the list of reports"
    else:
        raise TypeError(f"{_WHAT}: profiler_or_reports must be an accgraph.Profiler, a list of "
                        f"accgraph.ReplayReport or the path of a reports CSV (got "
                        f"{type(source).__name__})")
    reports = [r for r in reports if r.times]
    if not reports:
        raise _error(InvalidArgumentError, f"no reports with regions in {origin}")
    return reports


# --- the trace --------------------------------------------------------------------------------


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class _Number:
    """A JSON number of the trace whose value a double would change (Note [Exact numbers]):
    Kineto's absolute microseconds with three decimals, or any number given with more digits
    than a double holds. Kept as its text, written back as that text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __float__(self) -> float:
        return float(self.text)

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Number) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _parse_float(text: str) -> Any:
    """A JSON number with a fraction or an exponent: a float where the float's shortest text
    is the same number (written back as that text), else a _Number."""
    value = float(text)
    if "e" not in text and "E" not in text:
        if len(text) <= 16:
            return value  # at most 15 digits, which a double holds (DBL_DIG)
        if len(text.rstrip("0")) > 19:
            return _Number(text)  # more than 17 digits: more than a double's shortest text
    if repr(value) == text or (math.isfinite(value) and Decimal(repr(value)) == Decimal(text)):
        return value
    return _Number(text)


def _load_trace(trace: Any) -> Dict[str, Any]:
    if isinstance(trace, dict):
        # The caller's dict stays as it was: copied as deep as annotate_trace changes it (the
        # event list, each event and its args), not deeper (a deep copy recurses).
        data: Any = dict(trace)
        if isinstance(data.get("traceEvents"), list):
            data["traceEvents"] = [_own_event(ev) for ev in data["traceEvents"]]
    else:
        path = os.fspath(trace)
        todo = "pass the file torch.profiler's export_chrome_trace wrote"
        try:
            opener = gzip.open if _is_gzip(path) else open
            with opener(path, "rt", encoding="utf-8") as f:
                data = json.load(f, parse_float=_parse_float)
        except OSError as e:  # gzip.BadGzipFile and a bad CRC are OSErrors too
            raise _error(InvalidArgumentError, f"cannot read the trace {path!r}: "
                         f"{e.strerror or e}: {todo}") from None
        except EOFError:
            raise _error(InvalidArgumentError,
                         f"the trace {path!r} is cut short: its gzip stream ends before its end "
                         f"(a copy or an export that did not finish): {todo}, whole") from None
        except zlib.error as e:
            raise _error(InvalidArgumentError, f"the trace {path!r} is a damaged gzip file "
                         f"({e}): {todo}") from None
        except RecursionError:
            raise _error(InvalidArgumentError,
                         f"the trace {path!r} nests JSON arrays or objects deeper than Python's "
                         "JSON reader follows (sys.getrecursionlimit() "
                         f"{sys.getrecursionlimit()}): it is not a torch.profiler "
                         f"trace, which nests a few levels: {todo}") from None
        except ValueError as e:  # json.JSONDecodeError, UnicodeDecodeError
            raise _error(InvalidArgumentError, f"{path!r} is not Chrome trace JSON "
                         f"({_cut(str(e), 200)}): {todo}") from None
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise _error(InvalidArgumentError, "the trace has no traceEvents list: pass the file "
                     "torch.profiler's export_chrome_trace wrote")
    return data


def _own_event(ev: Any) -> Any:
    """A copy of an event of the caller's dict that annotate_trace may change (its args)."""
    if not isinstance(ev, dict):
        return ev
    ev = dict(ev)
    if isinstance(ev.get("args"), dict):
        ev["args"] = dict(ev["args"])
    return ev


_LABELS = ("accgraph_region", "accgraph_replay", "accgraph_marker")


def _is_ours(ev: Any) -> bool:
    """A region slice an earlier annotate_trace added."""
    return isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") == CATEGORY and \
        isinstance(ev.get("args"), dict) and "accgraph_path" in ev["args"]


def _strip_annotations(events: List[Any]) -> int:
    """Takes an earlier annotate_trace's work out of `events` (Note [Trace input checks]): its
    region slices, the names and sort indices of the rows that held only those, the labels of
    kernels. Returns how many slices it took out."""
    ours = [ev for ev in events if type(ev) is dict and ev.get("cat") == CATEGORY and _is_ours(ev)]
    if not ours:
        return 0
    rows = {_row_key(ev) for ev in ours}
    used = {_row_key(ev) for ev in events
            if isinstance(ev, dict) and ev.get("ph") != "M" and not _is_ours(ev)}
    mine = rows - used
    events[:] = [ev for ev in events if not _is_ours(ev) and not (
        isinstance(ev, dict) and ev.get("ph") == "M" and
        ev.get("name") in ("thread_name", "thread_sort_index") and _row_key(ev) in mine)]
    for ev in events:
        if isinstance(ev, dict) and isinstance(ev.get("args"), dict):
            for key in _LABELS:
                ev["args"].pop(key, None)
    return len(ours)


_ID_TYPES = frozenset((str, int, float, bool, type(None)))


def _hashable(value: Any) -> bool:
    """An id (pid, tid, correlation) that can key a dict: a number, a string or null."""
    return type(value) in _ID_TYPES or isinstance(value, (str, int, float, _Number))


def _row_key(ev: Dict[str, Any]) -> Tuple[Any, Any]:
    pid, tid = ev.get("pid"), ev.get("tid")
    return (pid if _hashable(pid) else repr(pid), tid if _hashable(tid) else repr(tid))


# Times a Perfetto trace holds (unsigned 64-bit ns), and that this module computes with: a ts
# or dur beyond is not a time of a trace (1e300 us), and exact arithmetic on it would be slow.
_MAX_NS = 2**63 - 1
# Below 2^43 us a double's spacing is under 1 ns, so the ns nearest to it are the ns of the
# (three-decimal) text it was read from: _ns computes them without Decimal.
_EXACT_DOUBLE_US = float(2**43)


def _ns(value: Any) -> int:
    """Microseconds of the trace (a JSON number) in integer nanoseconds, exactly. ValueError
    for a value that is not a number, not finite or beyond +-_MAX_NS."""
    kind = type(value)
    if kind is float and -_EXACT_DOUBLE_US < value < _EXACT_DOUBLE_US:
        whole = int(value)  # exact, and so is value - whole (Sterbenz)
        return whole * 1000 + round((value - whole) * 1000)
    if kind is _Number:
        text = value.text
    elif kind is float or (isinstance(value, float)):
        text = repr(float(value))
    elif kind is int or (isinstance(value, int) and kind is not bool):
        ns = int(value) * 1000
        if abs(ns) > _MAX_NS:
            raise ValueError(f"out of range: {value!r}")
        return ns
    else:
        raise ValueError(f"not a number: {value!r}")
    # Most times: digits, a point and up to three decimals, read as integers (no Decimal).
    whole, _, fraction = text.partition(".")
    digits = whole[1:] if whole.startswith("-") else whole
    if 0 < len(fraction) <= 3 and fraction.isdigit() and 0 < len(digits) <= 18 and \
            digits.isdigit():
        ns = int(digits) * 1000 + int(fraction) * 10 ** (3 - len(fraction))
        ns = -ns if whole.startswith("-") else ns
    else:
        number = float(text)
        if not math.isfinite(number) or abs(number) > _MAX_NS / 1000:
            raise ValueError(f"out of range: {value!r}")
        ns = round(Decimal(text) * 1000)
    if abs(ns) > _MAX_NS:
        raise ValueError(f"out of range: {value!r}")
    return ns


def _kernels(events: List[Any], names: _KernelNames) -> Tuple[List[_Kernel], int]:
    """The GPU work of the trace in time order, and how many marker kernels were left out (a
    time that is not a number, a row that is neither a number nor a string, args that are not
    an object)."""
    out = []
    unusable = 0
    no_correlation = 0  # marker kernels whose correlation cannot be an id (audit A13)
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        category = ev.get("cat", "")
        category = category.lower() if type(category) is str else str(category).lower()
        if category not in _GPU_WORK:
            continue
        try:
            if not (_hashable(ev.get("pid")) and _hashable(ev.get("tid"))):
                raise ValueError("not a row of the trace: nowhere to put its regions")
            if not isinstance(ev.get("args", {}), dict):
                raise ValueError("args that are not an object: nowhere to put its labels")
            start, dur = _ns(ev["ts"]), _ns(ev.get("dur", 0))
        except (KeyError, ValueError):
            unusable += category == "kernel" and names.kind(str(ev.get("name", ""))) != ""
            continue
        args = ev.get("args", {})
        correlation = args.get("correlation")
        kind = names.kind(str(ev.get("name", ""))) if category == "kernel" else ""
        if not _hashable(correlation):
            no_correlation += kind != ""
            correlation = None
        out.append(_Kernel(ev, start, start + dur, (ev.get("pid"), ev.get("tid")), kind,
                           correlation))
    if no_correlation:
        warnings.warn(f"{_WHAT}: {no_correlation} marker kernel(s) of the trace have a "
                      "correlation that is a list or an object, not an id: it is ignored and "
                      "their replays are found on their stream rows (kernels of a graph on "
                      "several streams may then be missed); pass the trace torch.profiler's "
                      "export_chrome_trace wrote, unedited", RuntimeWarning, stacklevel=4)
    out.sort(key=lambda k: (k.start, k.end))
    return out, unusable


def _sequences(kernels: List[_Kernel]) -> List[_Sequence]:
    """The marker sequences of the trace, in time order (Note [Trace replay matching], 1)."""
    by_correlation: Dict[Any, List[_Kernel]] = {}
    for k in kernels:
        if k.correlation is not None:
            by_correlation.setdefault(k.correlation, []).append(k)
    # Per correlation: its end kernels and record kernels, counted once (a trace whose
    # correlation ids repeat would otherwise be scanned once per end kernel).
    ends_of = {c: sum(k.kind == "end" for k in group) for c, group in by_correlation.items()}
    records_of = {c: [k for k in group if k.kind in ("record", "programmatic")]
                  for c, group in by_correlation.items()}
    claimed = set()
    sequences = []
    pending: List[_Kernel] = []  # ends that need their stream row
    for end in (k for k in kernels if k.kind == "end"):
        c = end.correlation
        if c is not None and ends_of[c] == 1 and records_of[c]:
            claimed.update(id(k) for k in by_correlation[c])
            sequences.append(_Sequence(sorted(records_of[c], key=lambda k: (k.anchor, k.start)),
                                       end, by_correlation[c]))
        else:
            pending.append(end)
    rows: Dict[Any, List[_Kernel]] = {}
    for k in kernels:
        if id(k) not in claimed:
            rows.setdefault(k.row, []).append(k)
    position: Dict[Any, int] = {}
    for end in pending:
        row = rows.get(end.row, [])
        first = position.get(end.row, 0)
        last = next(i for i in range(first, len(row)) if row[i] is end)
        position[end.row] = last + 1
        records = [k for k in row[first:last] if k.kind in ("record", "programmatic")]
        if not records:
            continue
        begin = next(i for i in range(first, last) if row[i] is records[0])
        sequences.append(_Sequence(sorted(records, key=lambda k: (k.anchor, k.start)), end,
                                   row[begin:last + 1]))
    sequences.sort(key=lambda s: s.records[0].anchor)
    return sequences


# --- matching ---------------------------------------------------------------------------------


def _shape_residual(seq: _Sequence, report: _Report) -> Optional[float]:
    """The largest disagreement of a marker's offset from the first (ns), or None when the
    marker counts differ (Note [Trace replay matching], 3)."""
    if len(seq.records) != len(report.times):
        return None
    if report.base is None:
        return 0.0
    anchors = seq.anchors
    first = anchors[report.base]
    return float(max(abs(anchors[j] - first - t) for j, t in report.shape))


def _first_time(report: _Report) -> Optional[int]:
    return next((report.times[i] for i in report.order if report.times[i] is not None), None)


@dataclass
class _Match:
    seq: _Sequence
    report: _Report
    residual_ns: float  # Note [Trace replay matching], 3
    disagreement_ns: float  # between this graph's replays, 4


# Note [Matching cost]: of the r0 of Note [Trace replay matching], 4, a graph with S traced
# replays and R reports has S + R - 1 that pair at least one replay; checking each against every
# pair is quadratic (8,000 replays against 1,024 reports took 75 s). Instead:
# - An r0 is valid when the gaps between consecutive replays agree at every position where
#   both the trace and the reports have them (any one disagreement rules it out). The r0 are
#   tried first at the positions most likely to rule a wrong r0 out: the gaps farthest from
#   their median, on the trace's side and on the reports' (a host's hiccup makes one gap
#   stand out; the one r0 that pairs it with the reports' hiccup survives). Jittery gaps rule a
#   wrong r0 out at its first check, so this costs O(S + R) checks.
# - The pairs an r0 can match are the reports in its window, an upper bound on its score
#   ("fit most often"): r0 are tried by that bound, highest first, and within one bound latest
#   first; the search stops when the bound falls below the best score found (exact).
# - Replays at a fixed period leave many r0 valid, which nothing in the data tells apart (the
#   note's "the replay index may then be off"): after _VALID_R0_COMPARED valid r0 have been
#   compared in full, the best of them wins. Each full comparison is O(min(S, R)), so the
#   whole is O((S + R) log(S + R)) (sorting) plus a constant number of full comparisons.
#   Only gaps that agree at every distinctive position and disagree elsewhere, for many r0,
#   make it slower.
_VALID_R0_COMPARED = 8
_DISTINCTIVE_GAPS = 8


def _distinctive(gaps: Dict[int, int]) -> List[int]:
    """The positions of the _DISTINCTIVE_GAPS gaps farthest from their median."""
    if not gaps:
        return []
    median = sorted(gaps.values())[len(gaps) // 2]
    return sorted(gaps, key=lambda i: -abs(gaps[i] - median))[:_DISTINCTIVE_GAPS]


def _windows(indices: List[int], size: int) -> List[Tuple[int, int, int]]:
    """(count, lo, hi): the r0 in [lo, hi) whose window [r0, r0 + size) holds `count` of the
    sorted `indices` (count > 0), one entry per stretch of equal count."""
    steps: Dict[int, int] = {}
    for j in indices:
        steps[j - size + 1] = steps.get(j - size + 1, 0) + 1
        steps[j + 1] = steps.get(j + 1, 0) - 1
    out = []
    count = 0
    points = sorted(steps)
    for lo, hi in zip(points, points[1:]):
        count += steps[lo]
        if count > 0:
            out.append((count, lo, hi))
    return out


def _align(seqs: List[_Sequence], reports: Dict[int, _Report], tolerance_ns: float
           ) -> List[_Match]:
    """The pairs of the best r0 of Note [Trace replay matching], 4 (none when no r0 fits),
    searched as Note [Matching cost] says."""
    size = len(seqs)
    resolution = max(r.resolution_ns for r in reports.values())
    limit = tolerance_ns + 2 * resolution
    first_time = {j: _first_time(r) for j, r in reports.items()}
    timed = sorted(j for j, t in first_time.items() if t is not None)
    anchors = [s.records[0].anchor for s in seqs]
    # Gap i: between replay i and i + 1 (trace), between replay j and j + 1 (reports); none
    # next to a replay of the trace that lacks a marker (its first anchor may be another's).
    markers = Counter(len(r.times) for r in reports.values()).most_common(1)[0][0]
    whole = [len(s.records) == markers for s in seqs]
    seq_gaps = {i: anchors[i + 1] - anchors[i] for i in range(size - 1)
                if whole[i] and whole[i + 1]}
    report_gaps = {j: first_time[j + 1] - first_time[j] for j in timed  # type: ignore[operator]
                   if first_time.get(j + 1) is not None}
    seq_probes, report_probes = _distinctive(seq_gaps), _distinctive(report_gaps)

    def disagrees(r0: int, i: int) -> bool:
        gap = report_gaps.get(r0 + i)
        return gap is not None and i in seq_gaps and abs(seq_gaps[i] - gap) > limit

    best: Tuple[Tuple[int, float, int], List[_Match]] = ((0, 0.0, 0), [])
    compared = 0
    for count, lo, hi in sorted(_windows(timed, size), key=lambda w: (-w[0], -w[1])):
        if count < best[0][0] or compared >= _VALID_R0_COMPARED:
            break  # no r0 left can match more pairs than the best (Note [Matching cost])
        for r0 in range(hi - 1, lo - 1, -1):
            if any(disagrees(r0, i) for i in seq_probes) or \
                    any(disagrees(r0, j - r0) for j in report_probes):
                continue
            low, high = max(0, timed[0] - r0), min(size - 1, timed[-1] - r0)
            worst = 0.0
            for i in range(low, high):
                gap = report_gaps.get(r0 + i)
                if gap is not None and i in seq_gaps:
                    worst = max(worst, abs(seq_gaps[i] - gap))
                    if worst > limit:
                        break
            if worst > limit:
                continue  # the gaps between replays disagree
            compared += 1
            matches = []
            for i in range(low, high + 1):
                report = reports.get(r0 + i)
                if report is None or first_time[r0 + i] is None:
                    continue
                residual = _shape_residual(seqs[i], report)
                if residual is not None and residual <= tolerance_ns + report.resolution_ns:
                    matches.append(_Match(seqs[i], report, residual, worst))
            key = (len(matches), -worst, r0)
            if matches and key > best[0]:
                best = (key, matches)
            if compared >= _VALID_R0_COMPARED:
                break
    return best[1]


def _match(sequences: List[_Sequence], reports: List[_Report], tolerance_ns: float
           ) -> List[_Match]:
    # Eager region trees (graph 0) are numbered together whatever their regions: grouped by
    # their paths, as a graph's replays are by its id.
    graphs: Dict[Any, Dict[int, _Report]] = {}
    for r in reports:
        key = r.graph_id if r.graph_id else (0, tuple(x.path for x in r.regions))
        graphs.setdefault(key, {}).setdefault(r.replay_index, r)
    probes = {}
    for g, by_index in graphs.items():
        ordered = [by_index[i] for i in sorted(by_index)]
        probes[g] = [ordered[0], ordered[len(ordered) // 2], ordered[-1]]
    assigned: Dict[Any, List[_Sequence]] = {}
    for seq in sequences:
        fits = []
        for g, candidates in probes.items():
            residuals = [x for x in (_shape_residual(seq, r) for r in candidates) if x is not None]
            if residuals:
                fits.append((min(residuals), str(g), g))
        if fits:
            assigned.setdefault(min(fits)[2], []).append(seq)
            continue
        # A sequence that fits no graph (a marker kernel lost: a ts that is not a number) is
        # still a replay of one: with the graph nearest in marker count, where there is one
        # such graph, it keeps its place among that graph's replays (Note [Trace replay
        # matching], 4, numbers them consecutively), and is not matched itself.
        nearest = sorted((abs(len(seq.records) - len(c[0].times)), str(g), g)
                         for g, c in probes.items())
        if nearest and nearest[0][0] <= 2 and (len(nearest) == 1 or
                                               nearest[1][0] > nearest[0][0]):
            assigned.setdefault(nearest[0][2], []).append(seq)
    matches = []
    for g, seqs in assigned.items():
        matches.extend(_align(seqs, graphs[g], tolerance_ns))
    return matches


def _no_match_error(trace: Any, sequences: List[_Sequence], kernels: List[_Kernel],
                    unusable: int, reports: List[_Report], tolerance_ns: float,
                    names: _KernelNames) -> Exception:
    name = "the trace" if isinstance(trace, dict) else f"the trace {os.fspath(trace)!r}"
    if not any(k.kind for k in kernels):
        if unusable:
            return _error(InvalidArgumentError,
                          f"{name} holds {unusable} accgraph marker kernel(s), none usable: their "
                          "ts or dur is not a number, their args not an object, or their pid "
                          "or tid is neither a number nor a string: pass the trace "
                          "torch.profiler's export_chrome_trace wrote, unedited")
        return _error(InvalidArgumentError,
                      f"{name} holds no accgraph marker kernels ({names.describe()}): trace "
                      "the timed replays with torch.profiler's CUDA activity "
                      "(ProfilerActivity.CUDA), on the cuda backend's device_timestamps markers")
    if not sequences:
        return _error(InvalidArgumentError,
                      f"the accgraph marker kernels of {name} form no complete sequence (record "
                      f"kernels followed by {', '.join(names.end)}): trace whole replays")
    trace_counts = sorted({len(s.records) for s in sequences})
    report_counts = sorted({len(r.times) for r in reports})
    if not set(trace_counts) & set(report_counts):
        return _error(InvalidArgumentError,
                      f"the replays of {name} have {trace_counts} markers each, the reports "
                      f"{report_counts}: the reports are not of the replays traced (pass the "
                      "profiler that timed them, or its reports)")
    return _error(InvalidArgumentError,
                  f"no replay of {name} agrees with a report within {tolerance_ns / 1000} us "
                  "(the gaps between marker kernels differ from the gaps between the times their "
                  "markers wrote): the reports are not of the replays traced; if they are, raise "
                  "tolerance_us")


# --- annotating -------------------------------------------------------------------------------


class _Rows:
    """The trace rows (tids) of the region slices: one per (GPU row, lane, depth)."""

    def __init__(self, events: List[Any]) -> None:
        self.events = events
        tids = [ev.get("tid") for ev in events if isinstance(ev, dict)]
        self.next_tid = max([t for t in tids if isinstance(t, int)] + [0]) + 1
        self.sort_index: Dict[Any, Any] = {}
        for ev in events:
            if isinstance(ev, dict) and ev.get("ph") == "M" and ev.get("name") == \
                    "thread_sort_index":
                args = ev.get("args")
                self.sort_index[_row_key(ev)] = \
                    args.get("sort_index") if isinstance(args, dict) else None
        self.rows: Dict[Tuple[Any, Any, str, int], int] = {}
        self.added: List[Dict[str, Any]] = []

    def tid(self, row: Tuple[Any, Any], lane: str, depth: int) -> int:
        key = (row[0], row[1], lane, depth)
        if key not in self.rows:
            tid = self.next_tid
            self.next_tid += 1
            self.rows[key] = tid
            label = f"accgraph {lane or 'regions'} depth {depth} (stream {row[1]})"
            self.added.append({"ph": "M", "name": "thread_name", "pid": row[0], "tid": tid,
                               "args": {"name": label}})
            sort = self.sort_index.get(row, row[1] if isinstance(row[1], int) else 0)
            self.added.append({"ph": "M", "name": "thread_sort_index", "pid": row[0],
                               "tid": tid, "args": {"sort_index": sort}})
        return self.rows[key]


# Note [Exact numbers]: Kineto writes microseconds with three decimals; since the epoch that is
# 19 digits, more than a double holds (a step of 0.25 us). A number a double would change is
# read as a _Number, which keeps its text (_parse_float), and the new slices' edges are made
# _Numbers where a double cannot hold them (_us). json's encoder writes floats through
# float.__repr__ whatever their class, and has no way to write raw text, so a _Number goes
# through `default` as a string placeholder that the text then loses: "<token>", 128 random
# bits drawn per write, and used only when the text holds it exactly as often as there are
# placeholders (else a new token is drawn), so no string of the trace can be taken for one
# (A18); the placeholders are replaced in the order the encoder met the _Numbers, and any
# notation comes back as written (A19). A pure-Python encoder that writes
# the text itself would be 5-10x slower on traces of a million events.


def _us(ns: int) -> Any:
    value = round(ns / 1000, 3)
    if Decimal(repr(value)) * 1000 == ns:
        return value
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return _Number(f"{sign}{ns // 1000}.{ns % 1000:03d}")


def _dumps(value: Any) -> str:
    """`value` as JSON text, each _Number as its text (Note [Exact numbers])."""
    texts: List[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, _Number):
            texts.append(o.text)
            return token
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    while True:
        token = f"@accgraph-exact-{secrets.token_hex(16)}"
        texts.clear()
        text = json.dumps(value, default=default, check_circular=False)
        if text.count(token) == len(texts):
            break
    if not texts:
        return text
    # The encoder writes the placeholders in the order it met the _Numbers.
    parts = text.split(f'"{token}"')
    return parts[0] + "".join(t + part for t, part in zip(texts, parts[1:]))


def _annotate(match: _Match, rows: _Rows, slices: List[Dict[str, Any]]) -> Tuple[int, int]:
    seq, report = match.seq, match.report
    kernel_of = {index: seq.records[rank] for rank, index in enumerate(report.order)}
    replay = f"{report.graph_id}:{report.replay_index}"
    spans = []
    for region in report.regions:
        if region.begin_marker is None or region.end_marker is None or \
                region.duration_ns is None:
            continue
        begin, end = kernel_of[region.begin_marker], kernel_of[region.end_marker]
        spans.append((begin.anchor, max(end.anchor, begin.anchor), region))  # labels by anchors
        lo = begin.anchor + region.start_shift_ns
        hi = max(end.anchor - region.end_shift_ns, lo)
        args = {"accgraph_path": region.path, "graph_id": report.graph_id,
                "replay_index": report.replay_index, "duration_ns": region.duration_ns,
                "lane": region.lane, "stream_id": region.stream_id}
        if region.self_ns is not None:
            args["self_ns"] = region.self_ns
        if region.start_shift_ns or region.end_shift_ns:  # the markers' distance, as read
            args["raw_duration_ns"] = \
                region.duration_ns + region.start_shift_ns + region.end_shift_ns
        for key, value in region.metadata.items():
            args.setdefault(key, value)
        slices.append({"ph": "X", "cat": CATEGORY, "name": region.name, "pid": begin.row[0],
                       "tid": rows.tid(begin.row, region.lane, region.depth),
                       "ts": _us(lo), "dur": _us(hi - lo), "args": args})
    for rank, index in enumerate(report.order):
        seq.records[rank].event.setdefault("args", {})["accgraph_marker"] = index
    seq.end.event.setdefault("args", {})["accgraph_marker"] = "end"
    labelled = 0
    for k in seq.kernels:
        args = k.event.setdefault("args", {})
        args["accgraph_replay"] = replay
        if k.kind:
            continue
        inside = [s for s in spans if s[0] < k.end <= s[1]]
        region = max(inside, key=lambda s: s[2].depth)[2] if inside else None
        args["accgraph_region"] = region.path if region else ""
        labelled += region is not None
    return len(spans), labelled


def _write(data: Dict[str, Any], output: str) -> None:
    try:
        text = _dumps(data)
    except RecursionError:
        raise _error(InvalidArgumentError, "the trace nests JSON arrays or objects deeper than "
                     "Python's JSON writer follows: pass the trace torch.profiler's "
                     "export_chrome_trace wrote") from None
    data_bytes = text.encode("utf-8")
    if output.endswith(".gz"):
        name = os.path.basename(output)[:-3]

        def write(f: IO[bytes]) -> None:
            # zlib's default level: 9 (gzip.open's) took 3x as long for 10% smaller output.
            with gzip.GzipFile(filename=name, mode="wb", fileobj=f, compresslevel=6) as z:
                z.write(data_bytes)
    else:
        def write(f: IO[bytes]) -> None:
            f.write(data_bytes)
    _write_atomically(output, write)


# Note [Atomic output] in accgraph/output_file.hpp, in Python: the .json and .json.gz outputs
# are written as the C++ writers write theirs (the .pftrace is written by them): to
# "<target>.tmp.XXXXXXXX" in the target's directory, flushed, fsync'ed, then renamed over the
# target, which a failed write (a full disk, a quota) leaves as it was (A24, A25). A symbolic
# link is followed and its target replaced; a target that is not a regular file (/dev/...,
# a FIFO) is written in place; an existing file the caller may not write is refused.


def _in_place(output: str) -> bool:
    return output.startswith(("/dev/", "/proc/")) or \
        (os.path.exists(output) and not os.path.isfile(output))


def _create_temp(target: str) -> Tuple[int, str]:
    """A new "<target>.tmp.XXXXXXXX" (mode 0666 less the umask, or the target's mode)."""
    mode = None
    if os.path.exists(target):
        if not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        mode = os.stat(target).st_mode & 0o7777
    for _ in range(100):
        temp = f"{target}.tmp.{secrets.token_hex(4)}"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except OSError:
                os.close(fd)
                os.unlink(temp)
                raise
        return fd, temp
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))


def _cannot_write(output: str, e: OSError, left: str = "") -> Exception:
    return _error(InvalidArgumentError, f"cannot write {output!r}: {e.strerror or e}: "
                  + (f"{left}; free space or choose another path" if left
                     else "choose a writable path"))


def _check_output(output: str) -> None:
    """That `output` can be written, before any work (check_output_file in C++): a temporary
    file is made next to it and removed."""
    try:
        if _in_place(output):
            if os.path.isdir(output):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if os.path.exists(output) and not os.access(output, os.W_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            return
        fd, temp = _create_temp(os.path.realpath(output))
        os.close(fd)
        os.unlink(temp)
    except OSError as e:
        raise _cannot_write(output, e) from None


def _write_atomically(output: str, write: Callable[[IO[bytes]], None]) -> None:
    if _in_place(output):
        try:
            with open(output, "wb") as f:
                write(f)
        except OSError as e:
            raise _cannot_write(output, e, "what reached it is incomplete") from None
        return
    target = os.path.realpath(output)
    try:
        fd, temp = _create_temp(target)
    except OSError as e:
        raise _cannot_write(output, e) from None
    existed = os.path.exists(target)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException as e:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _cannot_write(output, e, "the file was left as it was" if existed
                                else "nothing was written") from None
        raise


# The phases a Perfetto trace of track events holds (accgraph::timing::write_perfetto_events).
_PERFETTO_PHASES = ("X", "i", "I", "M")
_PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")


def _text(value: str) -> str:
    """`value` as UTF-8 can hold it: a lone surrogate (JSON's "\\ud800") becomes U+FFFD."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _json_text(value: Any) -> str:
    """A JSON value's text: a number as the trace wrote it."""
    if isinstance(value, _Number):
        return value.text
    return _text(_dumps(value))


def _id_text(value: Any) -> str:
    """A pid or tid as write_perfetto_events takes it: a string's text, a number's JSON text."""
    return _text(value) if isinstance(value, str) else _json_text(value)


def _perfetto_event(ev: Any) -> Optional[Tuple[Any, ...]]:
    """`ev` as (phase, name, category, pid, tid, ts_ns, dur_ns, args), or None when a Perfetto
    trace of track events has no place for it (flow and counter events). ValueError when its
    time is not one a Perfetto trace holds (negative, not a number, beyond _MAX_NS)."""
    if not isinstance(ev, dict) or ev.get("ph") not in _PERFETTO_PHASES:
        return None
    ts = _ns(ev.get("ts", 0))
    dur = _ns(ev.get("dur", 0)) if ev["ph"] == "X" else 0
    if ts < 0 or dur < 0 or ts + dur > _MAX_NS:
        raise ValueError("negative")
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    return (ev["ph"], _text(str(ev.get("name", ""))), _text(str(ev.get("cat", ""))),
            _id_text(ev.get("pid")), _id_text(ev.get("tid")), ts, dur,
            [(_text(str(k)), _text(v), True) if isinstance(v, str)
             else (_text(str(k)), _json_text(v), False) for k, v in args.items()])


def _write_perfetto(data: Dict[str, Any], output: str) -> None:
    """`data`'s events as a native Perfetto trace, through accgraph::timing::
    write_perfetto_events (Note [Trace events in Perfetto] in timing/export/perfetto/events.cpp).
    Events whose time a Perfetto trace cannot hold are left out with one RuntimeWarning,
    attributed to the line that called annotate_trace."""
    events = []
    left_out = 0
    try:
        for ev in data["traceEvents"]:
            try:
                event = _perfetto_event(ev)
            except ValueError:
                left_out += 1
                continue
            if event is not None:
                events.append(event)
    except RecursionError:
        raise _error(InvalidArgumentError, "an event's args nest deeper than Python's JSON "
                     "writer follows: pass the trace torch.profiler's export_chrome_trace "
                     "wrote") from None
    if left_out:
        warnings.warn(f"{_WHAT}: {left_out} event(s) of the trace left out of {output!r}: "
                      "their ts or dur is negative, not a number or beyond 2^63 ns, which a "
                      "Perfetto trace cannot hold; write .json or .json.gz to keep them as "
                      "they are", RuntimeWarning, stacklevel=4)  # annotate_trace's caller
    try:
        write_perfetto_events(output, events)
    except OSError as e:
        # The C++ writer's message names the file, the reason and what became of it (Note
        # [Atomic output]): "cannot write the Perfetto trace to '...': File too large: the file
        # was left as it was; ...". Wrapped by _cannot_write it said "cannot write" twice.
        raise _error(InvalidArgumentError, e.strerror or str(e)) from e


def _same_file(trace: Any, output: str) -> bool:
    try:
        return os.path.samefile(os.fspath(trace), output)
    except (OSError, TypeError, ValueError):
        return False


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
    the times the markers wrote, within `tolerance_us` (Note [Trace replay matching] in this
    module). Which kernels those are, each report says (ReplayReport.marker_kernels, from the
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
    perfetto = output.endswith(_PERFETTO_SUFFIXES)
    if perfetto and not _accgraph.perfetto_supported():
        raise _error(UnsupportedError,
                     f"writing {output!r}: this accgraph package was built without Perfetto "
                     "support (accgraph::perfetto; libprotobuf-dev and protobuf-compiler were "
                     "missing when it was built): install them (scripts/ensure-packages.sh) and "
                     "reinstall it (pip install .), or write .json or .json.gz, which Perfetto "
                     "opens too")
    if not perfetto and not (output.endswith(".json") or output.endswith(".json.gz")):
        raise _error(InvalidArgumentError,
                     f"output {output!r} must end in .json or .json.gz (Chrome JSON) or "
                     ".pftrace (Perfetto)")
    if isinstance(tolerance_us, bool) or not isinstance(tolerance_us, numbers.Real):
        raise TypeError(f"{_WHAT}: tolerance_us must be a number of microseconds, not "
                        f"{type(tolerance_us).__name__}")
    if not tolerance_us > 0:
        raise _error(InvalidArgumentError, f"tolerance_us must be positive (got {tolerance_us})")
    if not isinstance(trace, dict) and _same_file(trace, output) and not overwrite_input:
        raise _error(InvalidArgumentError,
                     f"output {output!r} is the trace {os.fspath(trace)!r} itself (the same "
                     "file): annotating would replace the torch.profiler trace; write another "
                     "file, or pass overwrite_input=True to replace it (atomically: a failed "
                     "write leaves it as it was)")
    marker_kernels = _marker_kernels_arg(marker_kernels)
    _check_output(output)
    names = _KernelNames()
    reports = _reports_of(profiler_or_reports, names, marker_kernels)
    data = _load_trace(trace)
    events = data["traceEvents"]
    _strip_annotations(events)
    kernels, unusable = _kernels(events, names)
    sequences = _sequences(kernels)
    tolerance_ns = tolerance_us * 1000
    matches = _match(sequences, reports, tolerance_ns)
    if not matches:
        raise _no_match_error(trace, sequences, kernels, unusable, reports, tolerance_ns, names)
    rows = _Rows(events)
    slices: List[Dict[str, Any]] = []
    regions = labelled = 0
    for match in matches:
        r, k = _annotate(match, rows, slices)
        regions += r
        labelled += k
    events.extend(rows.added)
    events.extend(slices)
    if perfetto:
        _write_perfetto(data, output)
    else:
        _write(data, output)
    return {"replays": len(matches), "regions": regions, "kernels_labelled": labelled,
            "unmatched_replays": len(sequences) - len(matches),
            "max_marker_residual_ns": max(m.residual_ns for m in matches),
            "max_replay_disagreement_ns": max(m.disagreement_ns for m in matches)}
