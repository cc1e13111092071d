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
Only the cuda backend's ``device_timestamps`` markers are kernels; ``external_events`` markers
(CUDA events) leave nothing in the trace to align with.
"""

from __future__ import annotations

import copy
import csv
import gzip
import json
import math
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _accgraph
from ._accgraph import Profiler, ReplayReport
from ._errors import InvalidArgumentError, UnsupportedError, make_error

__all__ = ["annotate_trace"]

_WHAT = "annotate_trace"
CATEGORY = "gpu_user_annotation"
# The kernels of backends/cuda/kernels.cu that accgraph's device_timestamps markers launch: one
# record kernel per marker (the programmatic one on sm_90+, Note [Programmatic markers]) and
# one end kernel per sequence (Note [Device timestamp ring]).
RECORD_KERNEL = "marker_record_kernel"
PROGRAMMATIC_RECORD_KERNEL = "marker_record_programmatic_kernel"
END_KERNEL = "marker_end_kernel"
UNSUPPORTED_STRATEGIES = ("external_events",)
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
#    overhead, Note [Marker overhead] in timing/marker_overhead.cpp; kernels are still labelled
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
    # [Marker overhead] in timing/marker_overhead.cpp): the slice moves in as much (5).
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

    def __post_init__(self) -> None:
        if any(t is None for t in self.times):
            self.order = list(range(len(self.times)))
        else:
            self.order = sorted(range(len(self.times)), key=lambda i: (self.times[i], i))


@dataclass(eq=False)
class _Kernel:
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


def _from_replay_report(report: Any) -> _Report:
    strategy = getattr(report, "marker_strategy", "")
    if strategy in UNSUPPORTED_STRATEGIES:
        raise _error(UnsupportedError,
                     f"graph {report.graph_id} was timed with the '{strategy}' marker strategy, "
                     "whose markers are CUDA events, not kernels, so a CUPTI trace holds nothing "
                     "to align them with: time it with marker_strategy='device_timestamps'")
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


def _int_or_none(text: str) -> Optional[int]:
    return int(text) if text not in ("", None) else None


def _from_csv(path: Union[str, os.PathLike]) -> List[_Report]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise _error(InvalidArgumentError, f"cannot read the reports CSV {os.fspath(path)!r}: "
                     f"{e.strerror or e}: pass the file Profiler.write_csv wrote") from e
    needed = {"graph_id", "replay_index", "path", "depth", "lane", "start_ns", "end_ns"}
    if rows and not needed <= set(rows[0]):
        raise _error(InvalidArgumentError,
                     f"{os.fspath(path)!r} is not accgraph's reports CSV (it lacks the columns "
                     f"{sorted(needed - set(rows[0]))}): pass the file Profiler."
                     "write_csv wrote, or the reports themselves")
    grouped: Dict[Tuple[int, int], List[Tuple[_Region, Optional[int], Optional[int]]]] = {}
    for row in rows:
        start, end = _int_or_none(row["start_ns"]), _int_or_none(row["end_ns"])
        duration = None if start is None or end is None else end - start
        shifts = (0, 0)
        # The markers' own times where the CSV has them (written since the marker overhead
        # is taken off start_ns/end_ns); a CSV from before has only the raw ones.
        if start is not None and end is not None and row.get("raw_start_ns") and \
                row.get("raw_end_ns"):
            raw_start, raw_end = int(row["raw_start_ns"]), int(row["raw_end_ns"])
            shifts = (start - raw_start, raw_end - end)
            start, end = raw_start, raw_end
        name = row["path"].rsplit("/", 1)[-1]
        region = _Region(row["path"], name, int(row["depth"]), row["lane"],
                         int(row.get("stream_id") or 0), None, None, duration,
                         self_ns=_int_or_none(row.get("self_ns", "")),
                         start_shift_ns=shifts[0], end_shift_ns=shifts[1])
        key = (int(row["graph_id"]), int(row["replay_index"]))
        grouped.setdefault(key, []).append((region, start, end))
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


def _reports_of(source: Any) -> List[_Report]:
    if isinstance(source, (str, os.PathLike)):
        reports = _from_csv(source)
        origin = f"the reports CSV {os.fspath(source)!r}"
    elif isinstance(source, Profiler):
        reports = [_from_replay_report(r) for r in source.reports()]
        origin = ("the profiler: it keeps none when made with keep_reports=0, and holds only "
                  "delivered ones: make it with Profiler(keep_reports=N) and call "
                  "prof.flush() before annotate_trace")
    elif isinstance(source, ReplayReport):
        reports = [_from_replay_report(source)]
        origin = "the report"
    elif isinstance(source, Iterable):
        items = list(source)
        if not all(isinstance(r, ReplayReport) for r in items):
            raise TypeError(f"{_WHAT}: profiler_or_reports must be an accgraph.Profiler, a list "
                            "of accgraph.ReplayReport or the path of a reports CSV")
        reports = [_from_replay_report(r) for r in items]
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


def _load_trace(trace: Any) -> Dict[str, Any]:
    if isinstance(trace, dict):
        data: Any = copy.deepcopy(trace)
    else:
        path = os.fspath(trace)
        try:
            opener = gzip.open if _is_gzip(path) else open
            with opener(path, "rt", encoding="utf-8") as f:
                data = json.load(f, parse_float=_Number)
        except OSError as e:
            raise _error(InvalidArgumentError, f"cannot read the trace {path!r}: "
                         f"{e.strerror or e}: pass the file torch.profiler's "
                         "export_chrome_trace wrote") from e
        except ValueError as e:
            raise _error(InvalidArgumentError, f"{path!r} is not Chrome trace JSON ({e}): pass "
                         "the file torch.profiler's export_chrome_trace wrote") from e
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise _error(InvalidArgumentError, "the trace has no traceEvents list: pass the file "
                     "torch.profiler's export_chrome_trace wrote")
    return data


def _kernel_kind(name: str) -> str:
    if "accgraph" not in name:
        return ""
    if PROGRAMMATIC_RECORD_KERNEL in name:
        return "programmatic"
    if RECORD_KERNEL in name:
        return "record"
    return "end" if END_KERNEL in name else ""


class _Number(float):
    """A JSON number that keeps its text: Kineto's microseconds with three decimals can hold
    more digits than a double (absolute times), and anchors need every nanosecond."""

    text: str

    def __new__(cls, text: str) -> "_Number":
        number = super().__new__(cls, text)
        number.text = text
        return number


def _ns(value: Any) -> int:
    """Microseconds of the trace (a JSON number) in integer nanoseconds, exactly."""
    if isinstance(value, _Number):
        return round(Decimal(value.text) * 1000)
    if isinstance(value, str) and value.startswith(_EXACT):  # a new slice's edge (_us)
        return round(Decimal(value[len(_EXACT):]) * 1000)
    if isinstance(value, int):
        return value * 1000
    return round(Decimal(repr(float(value))) * 1000)


def _kernels(events: List[Any]) -> List[_Kernel]:
    out = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        if str(ev.get("cat", "")).lower() not in _GPU_WORK:
            continue
        try:
            start, dur = _ns(ev["ts"]), _ns(ev.get("dur", 0))
        except (KeyError, TypeError, ValueError, ArithmeticError):
            continue
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        kind = _kernel_kind(str(ev.get("name", ""))) if ev["cat"].lower() == "kernel" else ""
        out.append(_Kernel(ev, start, start + dur, (ev.get("pid"), ev.get("tid")), kind,
                           args.get("correlation")))
    out.sort(key=lambda k: (k.start, k.end))
    return out


def _sequences(kernels: List[_Kernel]) -> List[_Sequence]:
    """The marker sequences of the trace, in time order (Note [Trace replay matching], 1)."""
    by_correlation: Dict[Any, List[_Kernel]] = {}
    for k in kernels:
        if k.correlation is not None:
            by_correlation.setdefault(k.correlation, []).append(k)
    claimed = set()
    sequences = []
    pending: List[_Kernel] = []  # ends that need their stream row
    for end in (k for k in kernels if k.kind == "end"):
        group = by_correlation.get(end.correlation, []) if end.correlation is not None else []
        ends = [k for k in group if k.kind == "end"]
        records = [k for k in group if k.kind in ("record", "programmatic")]
        if len(ends) == 1 and records:
            claimed.update(id(k) for k in group)
            sequences.append(_Sequence(sorted(records, key=lambda k: (k.anchor, k.start)), end,
                                       group))
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
    anchors = [k.anchor for k in seq.records]
    times = [report.times[i] for i in report.order]
    worst = 0.0
    base = next((j for j, t in enumerate(times) if t is not None), None)
    if base is None:
        return 0.0
    for j, t in enumerate(times):
        if t is not None:
            worst = max(worst, abs((anchors[j] - anchors[base]) - (t - times[base])))
    return worst


def _first_time(report: _Report) -> Optional[int]:
    return next((report.times[i] for i in report.order if report.times[i] is not None), None)


@dataclass
class _Match:
    seq: _Sequence
    report: _Report
    residual_ns: float  # Note [Trace replay matching], 3
    disagreement_ns: float  # between this graph's replays, 4


def _align(seqs: List[_Sequence], reports: Dict[int, _Report], tolerance_ns: float
           ) -> List[_Match]:
    """The pairs of the best r0 of Note [Trace replay matching], 4 (none when no r0 fits)."""
    first, last = min(reports), max(reports)
    if last - first < 4 * len(reports):
        candidates: Iterable[int] = range(first - len(seqs) + 1, last + 1)
    else:  # sparse replay indices
        candidates = sorted({j - i for j in reports for i in range(len(seqs))})
    resolution = max(r.resolution_ns for r in reports.values())
    best: Tuple[Tuple[int, float, int], List[_Match]] = ((0, 0.0, 0), [])
    for r0 in candidates:
        pairs = [(seq, reports.get(r0 + i)) for i, seq in enumerate(seqs)]
        offsets = [None if r is None or _first_time(r) is None
                   else seq.records[0].anchor - _first_time(r) for seq, r in pairs]
        worst = max((abs(b - a) for a, b in zip(offsets, offsets[1:])
                     if a is not None and b is not None), default=0.0)
        if worst > tolerance_ns + 2 * resolution or all(o is None for o in offsets):
            continue  # the gaps between replays disagree (cheap: checked first)
        matches = []
        for (seq, report), offset in zip(pairs, offsets):
            residual = _shape_residual(seq, report) if offset is not None else None
            if residual is not None and residual <= tolerance_ns + report.resolution_ns:
                matches.append(_Match(seq, report, residual, worst))
        key = (len(matches), -worst, r0)
        if matches and key > best[0]:
            best = (key, matches)
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
    matches = []
    for g, seqs in assigned.items():
        matches.extend(_align(seqs, graphs[g], tolerance_ns))
    return matches


def _no_match_error(sequences: List[_Sequence], kernels: List[_Kernel], reports: List[_Report],
                    tolerance_ns: float) -> Exception:
    if not any(k.kind for k in kernels):
        return _error(InvalidArgumentError,
                      "the trace holds no accgraph marker kernels "
                      f"({RECORD_KERNEL}, {PROGRAMMATIC_RECORD_KERNEL}, {END_KERNEL}): trace "
                      "the timed replays with torch.profiler's CUDA activity "
                      "(ProfilerActivity.CUDA), on the cuda backend's device_timestamps markers")
    if not sequences:
        return _error(InvalidArgumentError,
                      "the trace's accgraph marker kernels form no complete sequence (record "
                      f"kernels followed by {END_KERNEL}): trace whole replays")
    trace_counts = sorted({len(s.records) for s in sequences})
    report_counts = sorted({len(r.times) for r in reports})
    if not set(trace_counts) & set(report_counts):
        return _error(InvalidArgumentError,
                      f"the trace's replays have {trace_counts} markers each, the reports "
                      f"{report_counts}: the reports are not of the replays traced (pass the "
                      "profiler that timed them, or its reports)")
    return _error(InvalidArgumentError,
                  f"no replay of the trace agrees with a report within {tolerance_ns / 1000} us "
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
                self.sort_index[(ev.get("pid"), ev.get("tid"))] = \
                    (ev.get("args") or {}).get("sort_index")
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


# Note [Exact microseconds]: Kineto writes microseconds with three decimals; since the epoch
# that is 19 digits, more than a double holds (a step of 0.25 us). Numbers are read keeping
# their text (_Number) and ts/dur that a double would change are written back from it, as are
# the new slices' edges, through a placeholder replaced in the JSON text.
_EXACT = "@accgraph-exact:"
_EXACT_PATTERN = re.compile('"' + _EXACT + r'([-0-9.]+)"')


def _us(ns: int) -> Any:
    value = round(ns / 1000, 3)
    if Decimal(repr(value)) * 1000 == ns:
        return value
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{_EXACT}{sign}{ns // 1000}.{ns % 1000:03d}"


def _keep_exact(events: List[Any]) -> None:
    for ev in events:
        if not isinstance(ev, dict):
            continue
        for key in ("ts", "dur"):
            value = ev.get(key)
            if isinstance(value, _Number) and Decimal(repr(float(value))) != Decimal(value.text):
                ev[key] = _EXACT + value.text


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
    _keep_exact(data["traceEvents"])
    text = _EXACT_PATTERN.sub(r"\1", json.dumps(data))
    opener = gzip.open if output.endswith(".gz") else open
    try:
        with opener(output, "wt", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise _error(InvalidArgumentError, f"cannot write {output!r}: {e.strerror or e}: "
                     "choose a writable path") from e


# The phases a Perfetto trace of track events holds (accgraph::timing::write_perfetto_events).
_PERFETTO_PHASES = ("X", "i", "I", "M")
_PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")


def _json_text(value: Any) -> str:
    """A JSON value's text: a number as the trace wrote it."""
    if isinstance(value, _Number):
        return value.text
    return json.dumps(value, default=str)


def _id_text(value: Any) -> str:
    """A pid or tid as write_perfetto_events takes it: a string's text, a number's JSON text."""
    return value if isinstance(value, str) else _json_text(value)


def _perfetto_event(ev: Any) -> Optional[Tuple[Any, ...]]:
    """`ev` as (phase, name, category, pid, tid, ts_ns, dur_ns, args), or None when a Perfetto
    trace of track events has no place for it (flow and counter events, no time)."""
    if not isinstance(ev, dict) or ev.get("ph") not in _PERFETTO_PHASES:
        return None
    try:
        ts = _ns(ev.get("ts", 0))
        dur = _ns(ev.get("dur", 0)) if ev["ph"] == "X" else 0
    except (TypeError, ValueError, ArithmeticError):
        return None
    if ts < 0 or dur < 0:
        return None
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    return (ev["ph"], str(ev.get("name", "")), str(ev.get("cat", "")), _id_text(ev.get("pid")),
            _id_text(ev.get("tid")), ts, dur,
            [(str(k), v, True) if isinstance(v, str) else (str(k), _json_text(v), False)
             for k, v in args.items()])


def _write_perfetto(data: Dict[str, Any], output: str) -> None:
    """`data`'s events as a native Perfetto trace, through accgraph::timing::
    write_perfetto_events (Note [Trace events in Perfetto] in timing/perfetto/events.cpp)."""
    events = [e for e in map(_perfetto_event, data["traceEvents"]) if e is not None]
    try:
        _accgraph._write_perfetto_events(output, events)
    except OSError as e:
        raise _error(InvalidArgumentError, f"cannot write {output!r}: {e.strerror or e}: "
                     "choose a writable path") from e


def annotate_trace(trace: Union[str, os.PathLike, Dict[str, Any]],
                   output: Union[str, os.PathLike],
                   profiler_or_reports: Union[Any, Sequence[Any], str, os.PathLike],
                   *, tolerance_us: float = 1.0) -> Dict[str, Any]:
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
    module). Returns a summary: replays annotated, regions, kernels labelled, replays of the
    trace left unmatched, and how closely they matched (the largest disagreement of a marker's
    offset within a replay, and of the gaps between replays, in ns).

    InvalidArgumentError when no replay of the trace matches a report, saying why (no marker
    kernels, marker counts that differ, gaps that disagree, no reports); UnsupportedError for
    reports of the external_events marker strategy, or a ``.pftrace`` output from a package
    built without Perfetto support (accgraph.perfetto_supported())."""
    output = os.fspath(output)
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
    if not tolerance_us > 0:
        raise _error(InvalidArgumentError, f"tolerance_us must be positive (got {tolerance_us})")
    reports = _reports_of(profiler_or_reports)
    data = _load_trace(trace)
    events = data["traceEvents"]
    kernels = _kernels(events)
    sequences = _sequences(kernels)
    tolerance_ns = tolerance_us * 1000
    matches = _match(sequences, reports, tolerance_ns)
    if not matches:
        raise _no_match_error(sequences, kernels, reports, tolerance_ns)
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
