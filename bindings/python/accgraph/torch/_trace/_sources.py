"""annotate_trace's report sources: a Profiler's kept reports, a list of ReplayReport or the
reports CSV of Profiler.write_csv, as the markers and times that matching needs."""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from ..._accgraph import MarkerKernels, Profiler, ReplayReport, reports_csv_columns
from ..._errors import InvalidArgumentError, UnsupportedError
from .._table import wide_csv_fields
from ._common import WHAT, cut, error

# The reports CSV's columns this reader cannot do without, and those it reads where a CSV has
# them (an earlier version's lacks the raw_* ones). Each is a column of the writer's schema,
# reports_csv_columns() (accgraph::timing::reports_csv_columns): the CSV's header is declared
# once, in C++; tests/python/test_torch_trace.py checks that these are among its columns.
CSV_NEEDED = ("graph_id", "replay_index", "path", "depth", "lane", "start_ns", "end_ns")
CSV_OPTIONAL = ("stream_id", "self_ns", "raw_start_ns", "raw_end_ns")
# Note [Trace input checks]: what annotate_trace refuses and what it takes
# (tests/python/test_torch_trace.py has a test for each check):
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
class Region:
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
class Report:
    graph_id: int
    replay_index: int
    regions: List[Region]
    times: List[Optional[int]]  # per marker index; None: not measured
    resolution_ns: int = 0
    order: List[int] = field(default_factory=list)  # marker indices sorted by time
    # In that order, (rank, time - the first measured marker's time) of each measured marker,
    # and the rank of that first one (None: none measured): what shape_residual compares.
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


# --- reports ----------------------------------------------------------------------------------


def markers_from_times(regions: List[Tuple[Region, Optional[int], Optional[int]]]) -> List[int]:
    """Gives each region markers from its edge times (distinct times = markers); the times."""
    times = sorted({t for _, a, b in regions for t in (a, b) if t is not None})
    index = {t: i for i, t in enumerate(times)}
    for region, start, end in regions:
        region.begin_marker = index.get(start) if start is not None else None
        region.end_marker = index.get(end) if end is not None else None
    return times


class KernelNames:
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


def from_replay_report(report: Any, names: KernelNames,
                        fallback: Optional[MarkerKernels]) -> Report:
    kernels = report.marker_kernels
    if not kernels:
        kernels = fallback
    if not kernels:
        raise error(UnsupportedError,
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
        region = Region(t.path, t.name, t.depth, t.lane, t.stream_id, None, None,
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
        times = list(markers_from_times(edges))
    return Report(report.graph_id, report.replay_index, regions, times,
                   getattr(report, "resolution_ns", 0))


class CsvRow:
    """One row of the reports CSV, its errors naming the file and line."""

    def __init__(self, path: str, line: int, row: Dict[Any, Any]) -> None:
        self.path, self.line, self.row = path, line, row

    def fail(self, problem: str, todo: str = "write it again with Profiler.write_csv") -> Exception:
        return error(InvalidArgumentError,
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
            raise self.fail(f"column {column!r} is {cut(text)!r}, not a whole number") from None


def csv_rows(path: str) -> Tuple[List[str], List[Tuple[int, Dict[Any, Any]]]]:
    """The header and (line, row) of every row. A field longer than csv.field_size_limit() is
    read (a region's metadata may be long): the limit is raised while this file is read."""
    with open(path, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            raise error(InvalidArgumentError,
                        f"the reports CSV {path!r} is a gzip file (the trace?), not the CSV "
                        "Profiler.write_csv wrote: pass that CSV")
    try:
        with wide_csv_fields(), open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = [(reader.line_num, row) for row in reader]
            return list(reader.fieldnames or []), rows
    except UnicodeDecodeError as e:
        raise error(InvalidArgumentError,
                    f"the reports CSV {path!r} is not UTF-8 text (byte {e.object[e.start]:#04x} "
                    f"at offset {e.start}): pass the CSV Profiler.write_csv wrote") from None
    except csv.Error as e:
        raise error(InvalidArgumentError,
                    f"the reports CSV {path!r}, line {reader.line_num}: {e}: the file is "
                    "damaged; write it again with Profiler.write_csv") from None


def marker_kernels_arg(value: Any) -> Optional[MarkerKernels]:
    """annotate_trace's `marker_kernels`: None or a MarkerKernels; a dict of its fields (as
    ReplayReport.to_dict() gives it: the three lists of names) is taken as the same; anything
    else is a TypeError naming it (a str, a list of names)."""
    if value is None or isinstance(value, MarkerKernels):
        return value
    fields = ("record_at_start", "record_at_end", "end")
    if isinstance(value, dict) and set(value) <= set(fields) and all(
            isinstance(v, (list, tuple)) and all(isinstance(n, str) for n in v)
            for v in value.values()):
        return MarkerKernels(**{k: list(v) for k, v in value.items()})
    raise TypeError(f"{WHAT}: marker_kernels must be an accgraph.MarkerKernels (or a dict "
                    f"of its fields), not {type(value).__name__} ({cut(repr(value), 80)}): give "
                    "the ReplayReport.marker_kernels of a report timed on that backend, or "
                    "accgraph.MarkerKernels(record_at_start=[...], record_at_end=[...], "
                    "end=[...])")


def csv_marker_kernels(path: str, rows: List[Tuple[int, Dict[str, Any]]]
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
                raise CsvRow(path, line, row).fail(
                    f"its marker_kernels {cut(text, 80)!r} is not "
                    "record_at_start=A|B;record_at_end=C;end=D",
                    "write the CSV again with Profiler.write_csv, or pass marker_kernels=")
            fields[kind].extend(n for n in listed.split("|") if n and n not in fields[kind])
    if not any(fields.values()):
        return None
    return MarkerKernels(**fields)


def csv_kernels(path: str, rows: List[Tuple[int, Dict[str, Any]]],
                marker_kernels: Optional[MarkerKernels]) -> MarkerKernels:
    """The marker kernels of the reports CSV: `marker_kernels` where given, else those its rows
    name; InvalidArgumentError when neither names any."""
    if marker_kernels is not None and not marker_kernels:
        raise error(InvalidArgumentError,
                    f"the given marker_kernels names no kernel ({marker_kernels!r}), so the "
                    f"markers of the reports CSV {path!r} cannot be found in the trace: give "
                    "the ReplayReport.marker_kernels of a report timed on the backend that "
                    "wrote the CSV (the cuda backend's, for a GPU run)")
    if marker_kernels is None:
        marker_kernels = csv_marker_kernels(path, rows)
    if not marker_kernels:
        raise error(InvalidArgumentError,
                    f"the reports CSV {path!r} does not say which kernels its markers are (its "
                    "marker_kernels column is missing or empty: written before accgraph wrote "
                    "it, or by a backend whose markers are not kernels): pass marker_kernels= "
                    "(the ReplayReport.marker_kernels of a report timed on that backend), or "
                    "the reports themselves (the Profiler)")
    return marker_kernels


def check_fields(r: CsvRow, header: List[str]) -> None:
    """A row with as many fields as the header, or the error naming its line."""
    if None in r.row:
        raise r.fail(f"the row has {len(header) + len(r.row[None])} fields, the header "
                     f"{len(header)}", "the file is damaged; write it again with "
                     "Profiler.write_csv")
    if any(r.row.get(c) is None for c in header):
        raise r.fail(f"the row has {sum(v is not None for v in r.row.values())} fields, the "
                     f"header {len(header)} (the file is cut short?)",
                     "write it again with Profiler.write_csv")


def check_edges(r: CsvRow, where: str, edges: Tuple[Optional[int], ...]) -> None:
    """That neither the region's edges nor its markers' end before they start."""
    start, end, raw_start, raw_end = edges
    for lo, hi, lo_name, hi_name in ((start, end, "start_ns", "end_ns"),
                                     (raw_start, raw_end, "raw_start_ns", "raw_end_ns")):
        if lo is not None and hi is not None and lo > hi:
            raise r.fail(f"{where} ends before it starts ({lo_name} {lo} > {hi_name} {hi})",
                         "the file was edited or damaged; write it again with "
                         "Profiler.write_csv")


def csv_region(r: CsvRow, header: List[str], seen: Dict[Tuple[Any, ...], int]
               ) -> Tuple[Tuple[int, int], Region, Optional[int], Optional[int]]:
    """One row as ((graph_id, replay_index), its region, its markers' start and end times),
    checked as Note [Trace input checks] says; `seen` holds the rows read before."""
    check_fields(r, header)
    row = r.row
    graph_id, replay_index = r.int("graph_id"), r.int("replay_index")
    depth = r.int("depth")
    start, end = r.int("start_ns", False), r.int("end_ns", False)
    raw_start, raw_end = r.int("raw_start_ns", False), r.int("raw_end_ns", False)
    where = f"region {cut(row['path'], 80)!r} of graph {graph_id} replay {replay_index}"
    check_edges(r, where, (start, end, raw_start, raw_end))
    # A region's row twice in one report: two exports concatenated, or a copy-paste. Only a
    # region with no time between its edges (boundaries that share a marker) can repeat.
    key = (graph_id, replay_index) + tuple(row[c] for c in header)
    if key in seen and start is not None and end is not None and start < end:
        raise r.fail(f"{where} is the same row as line {seen[key]} (two exports "
                     "concatenated?)", "give each report's rows once: write the CSV again "
                     "with Profiler.write_csv")
    seen.setdefault(key, r.line)
    duration = None if start is None or end is None else end - start
    shifts = (0, 0)
    # The markers' own times where the CSV has them (written since the marker overhead is
    # taken off start_ns/end_ns); a CSV from before has only the raw ones.
    if None not in (start, end, raw_start, raw_end):
        shifts = (start - raw_start, raw_end - end)  # type: ignore[operator]
        start, end = raw_start, raw_end
    region = Region(row["path"], row["path"].rsplit("/", 1)[-1], depth, row["lane"],
                    r.int("stream_id", False) or 0, None, None, duration,
                    self_ns=r.int("self_ns", False),
                    start_shift_ns=shifts[0], end_shift_ns=shifts[1])
    return (graph_id, replay_index), region, start, end  # type: ignore[return-value]


def from_csv(path: Union[str, os.PathLike], names: KernelNames,
             marker_kernels: Optional[MarkerKernels]) -> List[Report]:
    """The reports of Profiler.write_csv's file. Columns are found by name: others (added by a
    later version) are ignored. A row cut short, a field that is not a number, a region that
    ends before it starts and a row given twice are refused, naming the line (Note [Trace
    input checks])."""
    path = os.fspath(path)
    try:
        header, rows = csv_rows(path)
    except OSError as e:
        raise error(InvalidArgumentError, f"cannot read the reports CSV {path!r}: "
                    f"{e.strerror or e}: pass the file Profiler.write_csv wrote") from e
    names.add(csv_kernels(path, rows, marker_kernels))
    needed = set(CSV_NEEDED)
    if rows and not needed <= set(header):
        raise error(InvalidArgumentError,
                    f"{path!r} is not accgraph's reports CSV (it lacks the columns "
                    f"{sorted(needed - set(header))} of {','.join(reports_csv_columns())}): "
                    "pass the file Profiler.write_csv wrote, or the reports themselves")
    grouped: Dict[Tuple[int, int], List[Tuple[Region, Optional[int], Optional[int]]]] = {}
    seen: Dict[Tuple[Any, ...], int] = {}
    for line, row in rows:
        replay, region, start, end = csv_region(CsvRow(path, line, row), header, seen)
        grouped.setdefault(replay, []).append((region, start, end))
    reports = []
    for (graph_id, replay_index), edges in grouped.items():
        times = list(markers_from_times(edges))
        reports.append(Report(graph_id, replay_index, [r for r, _, _ in edges], times,
                              resolution_of(times)))
    return reports


def resolution_of(times: List[int]) -> int:
    """The marker clock's step as the CSV's times show it (it does not hold the report's
    resolution_ns): their greatest common step, when that is coarser than 1 ns."""
    step = 0
    for t in times[1:]:
        step = math.gcd(step, t - times[0])
    return step if 1 < step <= 1000 else 0  # a step of microseconds or more: regions, not a clock


def reports_of(source: Any, names: KernelNames,
                marker_kernels: Optional[MarkerKernels] = None) -> List[Report]:
    """The reports of `source`; their marker kernels' names go to `names` (`marker_kernels`
    for reports that carry none)."""
    if isinstance(source, (str, os.PathLike)):
        reports = from_csv(source, names, marker_kernels)
        origin = f"the reports CSV {os.fspath(source)!r}"
    elif isinstance(source, Profiler):
        reports = [from_replay_report(r, names, marker_kernels) for r in source.reports()]
        origin = ("the profiler: it keeps none when made with keep_reports=0, and holds only "
                  "delivered ones: make it with Profiler(keep_reports=N) and call "
                  "prof.flush() before annotate_trace")
    elif isinstance(source, ReplayReport):
        reports = [from_replay_report(source, names, marker_kernels)]
        origin = "the report"
    elif isinstance(source, Iterable):
        items = list(source)
        if not all(isinstance(r, ReplayReport) for r in items):
            raise TypeError(f"{WHAT}: profiler_or_reports must be an accgraph.Profiler, a list "
                            "of accgraph.ReplayReport or the path of a reports CSV")
        reports = [from_replay_report(r, names, marker_kernels) for r in items]
        origin = "the list of reports"
    else:
        raise TypeError(f"{WHAT}: profiler_or_reports must be an accgraph.Profiler, a list of "
                        f"accgraph.ReplayReport or the path of a reports CSV (got "
                        f"{type(source).__name__})")
    reports = [r for r in reports if r.times]
    if not reports:
        raise error(InvalidArgumentError, f"no reports with regions in {origin}")
    return reports


