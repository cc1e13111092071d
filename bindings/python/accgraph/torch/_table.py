"""Reading module timing: the statistics of a run kept apart by context (each graph's replays,
the eager calls, the first eager call of each module), as a tree or flat table that fits 100
columns (``python -m accgraph.torch`` prints it; :func:`module_table` from Python).

The statistics are accgraph's own (Profiler.stats(), or the CSV of write_stats_csv, whose
``graph_id``/``first_call`` columns name the context: Note [Stats contexts] in
timing/model/stats.cpp): this module only groups, orders and formats them (Note [Reading tables])."""

from __future__ import annotations

import csv
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

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
NUMBER_FIELDS = ("count", "unmeasurable", "depth", "self_count", "replays_run", "replays_timed")

Row = Dict[str, Any]
Context = Tuple[Optional[int], bool]
# Per graph id: run, timed, and where a Profiler counted them, sample_every and sampled
# (Note [Reading tables]).
Replays = Dict[int, Dict[str, Any]]


def rows_of(source: Any) -> List[Row]:
    """The rows of `source`: a Profiler (its stats()), a path to a stats CSV, or rows already
    (RegionStats objects or dicts)."""
    if isinstance(source, (str, os.PathLike)):
        return read_stats_csv(source)
    stats = source.stats() if hasattr(source, "stats") and callable(source.stats) else source
    rows: List[Row] = []
    for s in stats:
        rows.append(dict(s.to_dict()) if hasattr(s, "to_dict") else dict(s))
    return rows


def read_stats_csv(path: Union[str, "os.PathLike[str]"]) -> List[Row]:
    """The rows of a CSV written by Profiler.write_stats_csv (ValueError naming the file and
    line when it is not one)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or "path" not in reader.fieldnames or \
                "p50_ns" not in reader.fieldnames:
            raise ValueError(f"{os.fspath(path)}: not a statistics CSV of accgraph (no path and "
                             "p50_ns columns): give a file written by --csv or "
                             "Profiler.write_stats_csv")
        rows: List[Row] = []
        for line, raw in enumerate(reader, start=2):
            try:
                row: Row = {}
                for key, value in raw.items():
                    if key is None or value is None:
                        raise ValueError("wrong number of fields")
                    if key == "path":
                        row[key] = value
                    elif key in NUMBER_FIELDS or key == "graph_id":
                        row[key] = int(value)
                    elif key == "first_call":
                        row[key] = value in ("1", "true", "True")
                    else:
                        row[key] = float(value)
            except ValueError as e:
                raise ValueError(f"{os.fspath(path)}:{line}: {e}: the file is not a statistics "
                                 "CSV of accgraph (or it was cut short)") from None
            row.setdefault("graph_id", None)
            row.setdefault("first_call", False)
            rows.append(row)
    return rows


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
    """ "graph 3 (train.py:12)", "eager", "eager, first call" or "all reports"."""
    graph_id, first = context
    if graph_id is None:
        return "all reports"
    if graph_id == 0:
        return FIRST if first else EAGER
    label = (labels or {}).get(graph_id)
    return f"graph {graph_id} ({label})" if label else f"graph {graph_id}"


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
    return {context_name(c, labels): rows for c, rows in by_context(rows_of(source)).items()}


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
    shown: List[int] = []

    def walk(indices: List[int]) -> None:
        if key is not None:
            indices = sorted(indices, key=lambda i: key(tree.rows[i]))
        for i in indices:
            if i in keep:
                shown.append(i)
                walk(tree.children[i])

    walk(tree.roots)
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
            label = row["path"]
        else:
            label = "  " * max(int(row.get("depth", 0)) - base, 0) + tree.name(i)
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
    all_rows = rows_of(source)
    replays = graph_replays(source, all_rows)
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
