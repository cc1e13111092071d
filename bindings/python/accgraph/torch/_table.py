"""Reading module timing: the statistics of a run kept apart by context (each graph's replays,
the eager calls, the first eager call of each module), as a tree or flat table that fits 100
columns (``python -m accgraph.torch`` prints it; :func:`module_table` from Python).

The statistics are accgraph's own (Profiler.stats(), or the CSV of write_stats_csv or the JSON
of write_stats_json, whose ``graph_id``/``first_call`` fields name the context: Note [Stats
contexts] in timing/model/stats.cpp): this module only reads (Note [Reading files]), groups,
orders and formats them (Note [Reading tables])."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

from .._accgraph import library_version, stats_schema_version
from .._errors import InvalidArgumentError, make_error
from .._native import table_text

# Note [Reading tables]: what the table, the HTML report and compare share.
#
# - A row is a dict with RegionStats' keys (path, depth, count, p50_ns, p95_ns, p05_ns,
#   self_p50_ns, graph_id, first_call, ...), from Profiler.stats() or read back from the CSV.
# - A context is (graph_id, first_call): a graph's replays ("graph 3", with its capture site or
#   label where the run knew it), the eager calls ("eager") and, with
#   Profiler(first_eager_call="apart"), the first eager call of each module ("eager, first
#   call": warm-up, compilation, library start-up), never pooled with the calls after it. A CSV
#   without those columns (written before they existed) is one context, "all reports".
# - The context's time is the sum of its top-level rows' p50: one replay of a graph, one call
#   of the eager root(s). "self %" is a row's self p50 over it; the share --min-share filters
#   on is its p50 (total) over it, which only falls down the tree, so a kept row's ancestors
#   are kept too.
# - The tree: a row's parent is the row of its context one level up whose path is a prefix of
#   its own (paths join names with "/"; a name may hold "/" itself, so the depth decides).
#   Siblings are ordered by --sort (order: as first seen, i.e. module order); --top N keeps the
#   N largest rows by the sort key (p50 for order and name) with their ancestors.
# - A graph's replays (Note [Sampled replays] in include/accgraph/spi/untimed_replay.hpp): its
#   rows carry replays_run and replays_timed (Profiler.stats(), the CSV's columns of those
#   names), and a row's count is over the timed replays only. The section header says both
#   ("520 replays, 32 timed (1 in 16)"); from a Profiler, Profiler.replay_counts() also gives
#   the N and whether sampling applied: a graph that could not be sampled (its backend cannot
#   launch it without markers: PyTorch's graphs, foreign to accgraph, today) has every replay
#   timed, and its section says so on a line of its own. A CSV written before those columns
#   existed gives the replays as the largest top-level count, as before.

EAGER, FIRST = "eager", "eager, first call"
SORTS = ("order", "total", "self", "name")
WIDTH = 100
NUMBER_FIELDS = ("count", "unmeasurable", "depth", "self_count", "replays_run", "replays_timed",
                 "schema_version")
TEXT_FIELDS = ("path", "graph_label")
# What the tables and compare read of every row (Note [Reading files]).
REQUIRED = ("path", "count", "p50_ns", "p95_ns", "self_p50_ns")
WHERE_FROM = ("give a file written by --csv or --json, Profiler.write_stats_csv or "
              "Profiler.write_stats_json")

Row = Dict[str, Any]
Context = Tuple[Optional[int], bool]
# Per graph id: run, timed, and where a Profiler counted them, sample_every and sampled
# (Note [Reading tables]).
Replays = Dict[int, Dict[str, Any]]

# Note [Reading files]: a statistics file is refused, naming the file and the line (CSV) or the
# entry (JSON) and what to give instead, rather than read wrong: a file of a newer schema
# (stats_schema_version(), Note [Stats schema] in timing/export/text_exporters.cpp), bytes that
# are not UTF-8, a missing column the tables read (REQUIRED), a value that is not a number, a
# duration that is NaN, infinite or negative (accgraph writes none: an edited or damaged file),
# and one region's row given twice in one context (two exports concatenated). A UTF-8 byte-order
# mark (a spreadsheet's) is skipped, and a field longer than csv's default limit (a deep path of
# long names) is read. Rows given directly (dicts, RegionStats) are checked the same way.


def _invalid(message: str) -> Exception:
    return make_error(InvalidArgumentError, message)


@contextlib.contextmanager
def wide_csv_fields() -> Iterator[None]:
    """Reads fields of any length (a region path or metadata value longer than csv's default
    128 KiB limit) while the block runs, then puts the limit back."""
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, 2**31 - 1))
    try:
        yield
    finally:
        csv.field_size_limit(limit)


def rows_of(source: Any, what: str = "source") -> List[Row]:
    """The rows of `source`: a Profiler (its stats()), a path to a statistics CSV or JSON file,
    or rows already (RegionStats objects or dicts). TypeError naming `what` for anything else;
    InvalidArgumentError for rows that are not statistics (Note [Reading files])."""
    if isinstance(source, (str, os.PathLike)):
        return read_stats(source)
    stats = source.stats() if callable(getattr(source, "stats", None)) else source
    if isinstance(stats, (str, bytes, Mapping)) or not isinstance(stats, Iterable):
        raise TypeError(f"{what} must be a path to a statistics CSV or JSON file, a Profiler, "
                        f"or rows (RegionStats or dicts); got {type(source).__name__}")
    rows: List[Row] = []
    for index, s in enumerate(stats):
        if hasattr(s, "to_dict"):
            rows.append(dict(s.to_dict()))
        elif isinstance(s, Mapping):
            rows.append(dict(s))
        else:
            raise TypeError(f"{what}: row {index} is a {type(s).__name__}: give RegionStats "
                            "objects or dicts of their fields")
    return check_rows(rows, lambda index: f"{what}: row {index}")


def check_rows(rows: List[Row], where: Callable[[int], str]) -> List[Row]:
    """`rows`, checked as Note [Reading files] says; `where(index)` names a row in errors."""
    seen: Dict[Tuple[Context, str], int] = {}
    for index, row in enumerate(rows):
        missing = [key for key in REQUIRED if key not in row]
        if missing:
            raise _invalid(f"{where(index)}: no {', '.join(missing)}: a statistics row has "
                           f"{', '.join(REQUIRED)}; {WHERE_FROM}")
        for key, value in row.items():
            if key in TEXT_FIELDS or key == "first_call" or value is None:
                continue
            if key in NUMBER_FIELDS or key == "graph_id" or key.endswith("_ns"):
                try:
                    number = float(value)
                except (TypeError, ValueError):
                    raise _invalid(f"{where(index)}: {key} is {value!r}, not a number; "
                                   f"{WHERE_FROM}") from None
                if not math.isfinite(number) or number < 0:
                    raise _invalid(f"{where(index)}: {key} is {value!r}: accgraph writes no "
                                   "NaN, infinite or negative values (an edited or damaged "
                                   f"file?); {WHERE_FROM}")
        if not isinstance(row["path"], str):
            raise _invalid(f"{where(index)}: path is {row['path']!r}, not a str")
        row.setdefault("graph_id", None)
        row.setdefault("first_call", False)
        key = (context_of(row), row["path"])
        if key in seen:
            raise _invalid(f"{where(index)}: the row of {row['path']!r} in "
                           f"{context_name(key[0])} is given twice ({where(seen[key])} too): "
                           "two exports put together? Keep one run's rows")
        seen[key] = index
    return rows


def read_stats(path: Union[str, "os.PathLike[str]"]) -> List[Row]:
    """The rows of a statistics file: the CSV of Profiler.write_stats_csv or the JSON of
    Profiler.write_stats_json (told apart by the content). InvalidArgumentError naming the file
    and the line or entry when it is not one (Note [Reading files]); OSError when it cannot be
    read."""
    name = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _invalid(f"{name}:{line}: not UTF-8 text (byte {data[e.start]:#04x} at offset "
                       f"{e.start}): not a statistics file of accgraph; {WHERE_FROM}") from None
    if text.lstrip().startswith("{"):
        return _read_json(name, text)
    return _read_csv(name, text)


def read_stats_csv(path: Union[str, "os.PathLike[str]"]) -> List[Row]:
    """The rows of a CSV written by Profiler.write_stats_csv (as read_stats)."""
    return read_stats(path)


def _check_version(where: str, value: Any) -> None:
    try:
        version = int(value)
    except (TypeError, ValueError):
        raise _invalid(f"{where}: schema_version is {value!r}, not a whole number; "
                       f"{WHERE_FROM}") from None
    known = stats_schema_version()
    if version > known:
        raise _invalid(f"{where}: written by a newer accgraph (statistics schema {version}; this "
                       f"accgraph, {library_text()}, reads schemas up to {known}): read it with "
                       "the accgraph that wrote it, or update this one")


def library_text() -> str:
    return "{}.{}.{}".format(*library_version())


def _check_header_and_versions(name: str, fields: Sequence[str],
                               raw_rows: List[Tuple[int, Dict[Any, Any]]]) -> None:
    """No row is a second header, and every row's schema_version is one this reader knows."""
    for line, raw in raw_rows:
        if [raw.get(key) for key in fields] == list(fields):
            raise _invalid(f"{name}:{line}: a second header line (two files put together?): "
                           f"give each run's file on its own; {WHERE_FROM}")
        # A row cut short is the field check's in _csv_row (it names the line and the cause).
        if "schema_version" in fields and None not in raw and None not in raw.values():
            _check_version(f"{name}:{line}", raw.get("schema_version"))


def _read_csv(name: str, text: str) -> List[Row]:
    with wide_csv_fields():
        try:
            reader = csv.DictReader(io.StringIO(text, newline=""))
            raw_rows = [(reader.line_num, raw) for raw in reader]
        except csv.Error as e:
            raise _invalid(f"{name}:{reader.line_num}: {e}: not a statistics CSV of accgraph; "
                           f"{WHERE_FROM}") from None
    fields = reader.fieldnames
    if fields is None or "path" not in fields or "p50_ns" not in fields:
        raise _invalid(f"{name}: not a statistics CSV of accgraph (no path and p50_ns "
                       f"columns): {WHERE_FROM}")
    _check_header_and_versions(name, fields, raw_rows)
    missing = [key for key in REQUIRED if key not in fields]
    if missing:
        raise _invalid(f"{name}: no {', '.join(missing)} column(s): a statistics CSV of accgraph "
                       f"has {', '.join(REQUIRED)} (and more); {WHERE_FROM}")
    rows: List[Row] = []
    lines: List[int] = []
    for line, raw in raw_rows:
        try:
            row = _csv_row(raw)
        except ValueError as e:
            raise _invalid(f"{name}:{line}: {e}: the file is not a statistics CSV of accgraph "
                           "(or it was cut short)") from None
        rows.append(row)
        lines.append(line)
    return check_rows(rows, lambda index: f"{name}:{lines[index]}")


def _csv_row(raw: Dict[Any, Any]) -> Row:
    """One row of a statistics CSV with its fields typed; ValueError for a field that is not
    of its type, or a row of another number of fields than the header."""
    row: Row = {}
    for key, value in raw.items():
        if key is None or value is None:
            raise ValueError("wrong number of fields")
        if key in TEXT_FIELDS:
            row[key] = value
        elif key in NUMBER_FIELDS or key == "graph_id":
            row[key] = int(value)
        elif key == "first_call":
            row[key] = value in ("1", "true", "True")
        else:
            row[key] = float(value)
    if not row.get("graph_label"):
        row.pop("graph_label", None)
    return row


def _read_json(name: str, text: str) -> List[Row]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _invalid(f"{name}: not JSON ({e}): not a statistics file of accgraph; "
                       f"{WHERE_FROM}") from None
    if not isinstance(document, dict) or document.get("schema") != "accgraph.stats":
        raise _invalid(f"{name}: not a statistics JSON of accgraph (no \"schema\": "
                       f"\"accgraph.stats\"): {WHERE_FROM}")
    _check_version(name, document.get("schema_version"))
    graphs, regions = document.get("graphs", []), document.get("regions")
    if not isinstance(regions, list) or not isinstance(graphs, list) or \
            not all(isinstance(x, dict) for x in regions + graphs):
        raise _invalid(f"{name}: its \"regions\" and \"graphs\" are not lists of objects: the "
                       f"file was edited or damaged; {WHERE_FROM}")
    labels = {g.get("graph_id"): g["label"] for g in graphs if isinstance(g.get("label"), str)}
    rows: List[Row] = []
    for region in regions:
        row = dict(region)
        label = labels.get(row.get("graph_id"))
        if label:
            row["graph_label"] = label
        rows.append(row)
    return check_rows(rows, lambda index: f"{name}: regions[{index}]")


def graph_replays(source: Any, rows: Sequence[Row]) -> Replays:
    """The replays of each graph of `source`: from Profiler.replay_counts() when `source` is a
    Profiler, else from `rows` (its rows: replays_run, replays_timed; graphs whose rows lack
    them, as in an older CSV, are left out)."""
    counts = getattr(source, "replay_counts", None)
    if callable(counts):
        return {g.graph_id: {"run": g.run, "timed": g.timed, "sample_every": g.sample_every,
                             "sampled": g.sampled} for g in counts()}
    replays: Replays = {}
    for row in rows:
        graph_id, run = row.get("graph_id"), row.get("replays_run")
        if graph_id and run:
            replays.setdefault(int(graph_id), {"run": int(run),
                                               "timed": int(row.get("replays_timed") or 0)})
    return replays


def context_of(row: Row) -> Context:
    return row.get("graph_id"), bool(row.get("first_call"))


def context_name(context: Context, labels: Optional[Mapping[int, str]] = None) -> str:
    """ "graph 3 (train.py:12)", "eager", "eager, first call" or "all reports" (a label's
    control characters shown as the statistics table shows them: table_text)."""
    graph_id, first = context
    if graph_id is None:
        return "all reports"
    if graph_id == 0:
        return FIRST if first else EAGER
    label = (labels or {}).get(graph_id)
    return f"graph {graph_id} ({table_text(label)})" if label else f"graph {graph_id}"


def labels_of(rows: Iterable[Row], labels: Optional[Mapping[int, str]] = None) -> Dict[int, str]:
    """Graph id -> label: the rows' own (a file's graph_label), else `labels`'."""
    found = dict(labels or {})
    for row in rows:
        if row.get("graph_label") and row.get("graph_id"):
            found[int(row["graph_id"])] = row["graph_label"]
    return found


def by_context(rows: Iterable[Row]) -> Dict[Context, List[Row]]:
    """The rows of each context, in first-seen order within it; graphs first (by id), then the
    eager calls, then their first calls (Note [Reading tables])."""
    groups: Dict[Context, List[Row]] = {}
    for row in rows:
        groups.setdefault(context_of(row), []).append(row)

    def rank(context: Context) -> Tuple[int, int]:
        graph_id, first = context
        if graph_id is None:
            return 0, 0
        return (0, graph_id) if graph_id else (1 + int(first), 0)

    return {c: groups[c] for c in sorted(groups, key=rank)}


def stats_by_context(source: Any, *,
                     labels: Optional[Mapping[int, str]] = None) -> Dict[str, List[Row]]:
    """The rows of `source` (a Profiler, a stats CSV path or rows) by context name, in the
    table's order: {"graph 3 (train.py:42)": [...], "eager": [...], "eager, first call": [...]}
    (Note [Reading tables]); each row a dict of RegionStats' fields. `labels`: graph id ->
    capture site or label (accgraph.torch.graph_labels())."""
    rows = rows_of(source, "stats_by_context: source")
    labels = labels_of(rows, labels)
    return {context_name(c, labels): rows for c, rows in by_context(rows).items()}


class Tree:
    """The rows of one context as a tree (Note [Reading tables])."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = list(rows)
        self.parent: List[int] = []
        self.children: List[List[int]] = [[] for _ in self.rows]
        self.roots: List[int] = []
        by_path: Dict[str, int] = {}
        for index, row in enumerate(self.rows):
            by_path.setdefault(row["path"], index)
        for index, row in enumerate(self.rows):
            parent = -1
            path, depth = row["path"], int(row.get("depth", 0))
            if depth > 0:
                cut = len(path)
                while True:
                    cut = path.rfind("/", 0, cut)
                    if cut <= 0:
                        break
                    candidate = by_path.get(path[:cut])
                    if candidate is not None and int(self.rows[candidate].get("depth", 0)) == depth - 1:
                        parent = candidate
                        break
            self.parent.append(parent)
            if parent >= 0:
                self.children[parent].append(index)
            else:
                self.roots.append(index)
        self.total_ns = sum(float(self.rows[i]["p50_ns"]) for i in self.roots)

    def name(self, index: int) -> str:
        """The row's name relative to its parent (the full path for a root)."""
        parent = self.parent[index]
        path = self.rows[index]["path"]
        return path if parent < 0 else path[len(self.rows[parent]["path"]) + 1:]

    def share(self, index: int, field: str = "p50_ns") -> float:
        """The row's `field` in percent of the context's time."""
        return 100.0 * float(self.rows[index][field]) / self.total_ns if self.total_ns > 0 else 0.0

    def replays(self) -> int:
        return max((int(self.rows[i]["count"]) for i in self.roots), default=0)


def _sort_key(sort: str) -> Any:
    if sort == "total":
        return lambda row: -float(row["p50_ns"])
    if sort == "self":
        return lambda row: -float(row["self_p50_ns"])
    if sort == "name":
        return lambda row: row["path"]
    return None


def ordered(tree: Tree, *, sort: str = "order", flat: bool = False, top: Optional[int] = None,
            min_share: Optional[float] = None) -> Tuple[List[int], int]:
    """The rows to show, in order, and how many were left out by `top` and `min_share`."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)} (got {sort!r})")
    keep = set(range(len(tree.rows)))
    if min_share is not None:
        keep = {i for i in keep if tree.share(i) >= min_share}
    if top is not None:
        field = "self_p50_ns" if sort == "self" else "p50_ns"
        largest = sorted(keep, key=lambda i: (-float(tree.rows[i][field]), i))[:max(top, 0)]
        keep = set(largest)
        if not flat:  # with their ancestors, so that the tree reads
            for i in largest:
                parent = tree.parent[i]
                while parent >= 0:
                    keep.add(parent)
                    parent = tree.parent[parent]
    key = _sort_key(sort)
    if flat:
        shown = sorted(keep) if key is None else sorted(keep, key=lambda i: key(tree.rows[i]))
        return shown, len(tree.rows) - len(shown)

    def in_order(indices: List[int]) -> List[int]:
        return indices if key is None else sorted(indices, key=lambda i: key(tree.rows[i]))

    # Depth first with a stack of its own: a tree may nest deeper than Python's recursion limit.
    shown: List[int] = []
    pending = in_order(tree.roots)[::-1]
    while pending:
        i = pending.pop()
        if i in keep:
            shown.append(i)
            pending.extend(in_order(tree.children[i])[::-1])
    return shown, len(tree.rows) - len(shown)


def elide(text: str, width: int) -> str:
    """`text` cut to `width` columns in the middle ("h.0/attn/c_…/dropout")."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals, halves away from zero, computed as the HTML report's
    script computes it (the same double operations), so both show the same text."""
    scale = 10.0 ** digits
    return f"{math.floor(value * scale + 0.5) / scale:.{digits}f}"


def us(ns: float) -> str:
    """Microseconds in at most 9 columns."""
    v = float(ns) / 1000.0
    if v >= 1e7:
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    if v >= 1000:
        return fixed(v, 0)
    if v >= 10:
        return fixed(v, 1)
    return fixed(v, 2)


COLUMNS = (("count", 8), ("p50 us", 9), ("p95 us", 9), ("self p50", 9), ("self %", 6))


def replays_text(replays: Optional[Mapping[str, Any]]) -> str:
    """ "520 replays, 520 timed" or "520 replays, 32 timed (1 in 16)" (Note [Reading tables])."""
    if not replays:
        return ""
    text = f"{replays['run']} replays, {replays['timed']} timed"
    every = replays.get("sample_every")
    if replays.get("sampled") and every and every > 1:
        text += f" (1 in {every})"
    return text


def sampling_note(replays: Optional[Mapping[str, Any]]) -> str:
    """The line a graph that could not be sampled gets ("" for the others)."""
    if not replays or replays.get("sampled") is not False:
        return ""
    return ("every replay timed: sampling was asked for, but this graph cannot be launched "
            "without its markers (PyTorch's graphs, foreign to accgraph, today)")


HOW = "(p50, sum of the top-level rows)"  # what a section's time is


def section_header(tree: Tree, name: str, replays: Optional[Mapping[str, Any]] = None) -> str:
    """The section's first line; `replays`: the graph's entry of graph_replays()."""
    graph = name.startswith("graph") or name == "all reports"
    what = "replays" if graph else "calls"
    per = "replay" if graph else "call"
    counted = replays_text(replays) if graph else ""
    line = (f"{name}: {counted or f'{tree.replays()} {what}'}, {us(tree.total_ns).strip()} us "
            f"per {per} {HOW}")
    if name == FIRST:
        line = (f"{name}: the first eager call of each module (warm-up, compilation), not in "
                "the eager rows")
    return line


def format_section(tree: Tree, name: str, *, sort: str = "order", flat: bool = False,
                   top: Optional[int] = None, min_share: Optional[float] = None,
                   width: int = WIDTH, replays: Optional[Mapping[str, Any]] = None) -> List[str]:
    """The lines of one context's table; `replays`: the graph's entry of graph_replays()."""
    shown, left_out = ordered(tree, sort=sort, flat=flat, top=top, min_share=min_share)
    numbers = sum(w + 2 for _, w in COLUMNS)
    name_width = max(width - numbers, 12)
    header = section_header(tree, name, replays)
    if len(header) > width:  # the counts before the explanation: it goes first
        header = header.replace(f" {HOW}", "")
    lines = [elide(header, width)]
    note = sampling_note(replays)
    if note:
        lines.append(note)
    head = "region (full path)" if flat else "module"
    lines.append(f"{head:<{name_width}}" + "".join(f"  {t:>{w}}" for t, w in COLUMNS))
    base = min((int(tree.rows[i].get("depth", 0)) for i in shown), default=0)
    for i in shown:
        row = tree.rows[i]
        if flat:
            label = table_text(row["path"])
        else:
            label = "  " * max(int(row.get("depth", 0)) - base, 0) + table_text(tree.name(i))
        cells = (str(int(row["count"])), us(row["p50_ns"]), us(row["p95_ns"]),
                 us(row["self_p50_ns"]), fixed(tree.share(i, 'self_p50_ns'), 1) + "%")
        lines.append(f"{elide(label, name_width):<{name_width}}" +
                     "".join(f"  {c:>{w}}" for c, (_, w) in zip(cells, COLUMNS)))
    if left_out:
        why = []
        if top is not None:
            why.append(f"--top {top}")
        if min_share is not None:
            why.append(f"--min-share {min_share:g}")
        lines.append(f"({left_out} of {len(tree.rows)} rows not shown: {', '.join(why)})")
    return lines


def module_table(source: Any, *, labels: Optional[Mapping[int, str]] = None,
                 sort: str = "order", flat: bool = False, top: Optional[int] = None,
                 min_share: Optional[float] = None, width: int = WIDTH,
                 contexts: Optional[Sequence[str]] = None) -> str:
    """The per-context table of `source` (a Profiler, a stats CSV path or rows), one section per
    graph, then the eager calls and their first calls (Note [Reading tables]). `labels`: graph
    id -> capture site or label (accgraph.torch.graph_labels()). `sort`: order (module order),
    total (p50), self (self p50) or name; `flat`: full paths, sorted over the whole section;
    `top`: the N largest rows (with their ancestors in the tree); `min_share`: rows whose p50 is
    at least that percent of the context's time; `contexts`: only the sections of these names
    ("graph 3", "eager", "eager, first call"). Lines fit `width` columns."""
    sections: List[str] = []
    all_rows = rows_of(source, "module_table: source")
    replays = graph_replays(source, all_rows)
    labels = labels_of(all_rows, labels)
    for context, rows in by_context(all_rows).items():
        name = context_name(context, labels)
        if contexts is not None and not any(name == c or name.startswith(c + " (")
                                            for c in contexts):
            continue
        lines = format_section(Tree(rows), name, sort=sort, flat=flat, top=top,
                               min_share=min_share, width=width,
                               replays=replays.get(context[0]) if context[0] else None)
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections) if sections else "(no timed regions)\n"
