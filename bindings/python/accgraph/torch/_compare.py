"""Run-to-run comparison of module timing: ``python -m accgraph.torch compare A.csv B.csv`` and
:func:`compare` (Note [Comparing runs])."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from .._errors import InvalidArgumentError, make_error
from .._native import table_text
from ._table import (Context, Replays, Row, WIDTH, by_context, context_name, elide,
                     graph_replays, labels_of, replays_text, rows_of, us)

# Note [Comparing runs]: modules are matched by section and path. A section pairs a context of
# A with one of B (Note [Matching contexts]): the eager calls with the eager calls, the first
# calls with the first calls, and each graph with the graph of the other run that is the same
# graph. A module's p50 changed, beyond the noise, when each run's p50 lies outside the other
# run's own spread, its [p05, p95] from the statistics (a CSV written before p05_ns existed:
# [min, p95]): the spread is what replays of one run already differ by, so a difference within
# it is not reported. With fewer than MIN_SAMPLES calls in either run the spread itself is not
# known (3 eager calls have p05 = min and p95 = max of three values, and two runs of the same
# script flagged 223 such rows "faster" on the H200): such a module is marked "few" and never
# flagged. The calls counted are the samples, a row's count: with sampled timing (Note [Sampled
# replays]) a graph's timed replays, not the replays it ran (a run of 200 replays timed 1 in 16
# has about 12 samples: few), and the spread is that of the samples; the section of a graph says
# how many replays each run timed of how many it ran, so that a run sampled and one timed on
# every replay are told apart. Only such changes are flagged, and --fail-above PCT fails (exit 1)
# on a flagged slowdown of more than PCT percent of A's p50. Modules timed in one run only are
# listed apart; they neither flag nor fail. A section of A that matches no section of B, or two
# runs with no module in common, is what a gate cannot judge: the table says so
# (Comparison.not_compared) and --fail-above fails on it too.
#
# Note [Matching contexts]: a graph's id is the order of its capture in its process, so one extra
# capture in run B shifts every id after it; ids say nothing across runs. A graph is matched by
# what it is: its label (the capture site, "train.py:42", or the name given with label_graph;
# the stats file's graph_label) and the module paths it holds. In turn, each pairing graphs in
# capture order among those left: the same label and the same paths; the same label (modules
# added or removed); the same paths (a label that moved with an edit above the capture, or a
# file without labels); the most paths in common, at least half of the two graphs' paths
# together (modules added or removed, and no label to tell). Two graphs captured at one site
# with the same modules (prefill and decode) pair by their order. A file written before the
# context columns existed (graph_id/first_call: one context, "all reports", pooling graphs and
# eager calls) is matched only to a run of one context, and otherwise refused: its rows cannot
# be told apart.

MIN_SAMPLES = 20  # calls in each run before a change is judged (Note [Comparing runs])

COLUMNS = (("A p50", 8), ("B p50", 8), ("delta", 8), ("ratio", 6), ("A self", 8), ("B self", 8),
           ("change", 7))


def _spread(row: Row) -> Tuple[float, float]:
    low = row.get("p05_ns")
    if low is None:
        low = row.get("min_ns", row["p50_ns"])
    return float(low), float(row["p95_ns"])


def _few(a: Row, b: Row) -> bool:
    return min(int(float(a.get("count", 0))), int(float(b.get("count", 0)))) < MIN_SAMPLES


def verdict(row: Mapping[str, Any]) -> str:
    """compare's word for a row of Comparison.rows, the text table's change column: "slower",
    "faster" (flagged), "few", "" (within the noise), "only A", "only B". The HTML view colours
    by it too."""
    a, b = row["a"], row["b"]
    if a is None or b is None:
        return "only B" if a is None else "only A"
    if row["changed"]:
        return "slower" if row["delta_ns"] > 0 else "faster"
    return "few" if _few(a, b) else ""


def _cells(r: Dict[str, Any]) -> Tuple[str, ...]:
    """A compared row's cells, in COLUMNS' order ("-" where a run lacks the module)."""
    a, b = r["a"], r["b"]
    if a is None or b is None:
        return (us(a["p50_ns"]) if a else "-", us(b["p50_ns"]) if b else "-", "-", "-",
                us(a["self_p50_ns"]) if a else "-", us(b["self_p50_ns"]) if b else "-",
                verdict(r))
    ratio = r["ratio"]
    return (us(a["p50_ns"]), us(b["p50_ns"]), f"{r['delta_ns'] / 1000.0:+.2f}"[:8],
            f"{ratio:.3f}" if ratio is not None else "-", us(a["self_p50_ns"]),
            us(b["self_p50_ns"]), verdict(r))


def _changed(a: Row, b: Row) -> bool:
    if _few(a, b):
        return False
    a_low, a_high = _spread(a)
    b_low, b_high = _spread(b)
    a50, b50 = float(a["p50_ns"]), float(b["p50_ns"])
    return not (a_low <= b50 <= a_high) and not (b_low <= a50 <= b_high)


class Section(NamedTuple):
    """One section of a comparison: the context of A and of B it pairs (None where it is in
    one run only). graph_id and first_call are B's context where the section is in B, else
    A's (as the contexts of one run: Note [Reading tables])."""

    graph_id: Optional[int]
    first_call: bool
    a: Optional[Context]
    b: Optional[Context]


class Comparison:
    """What :func:`compare` found: `rows` (one dict per module and section: context (its
    :class:`Section`), path, a, b (the rows, None where the module is in one run only), delta_ns,
    ratio, changed), `names` (Section -> its title), the text table (:meth:`text`), the largest
    flagged slowdown (:attr:`worst_slowdown_pct`) and what could not be compared
    (:attr:`not_compared`)."""

    def __init__(self, rows: List[Dict[str, Any]], names: Dict[Any, str],
                 replays: Tuple[Replays, Replays] = ({}, {})) -> None:
        self.rows = rows
        self.names = names
        self.replays = replays  # each run's graph_replays() (Note [Comparing runs])

    @property
    def changes(self) -> List[Dict[str, Any]]:
        return [r for r in self.rows if r["changed"]]

    @property
    def one_run_only(self) -> List[Dict[str, Any]]:
        return [r for r in self.rows if r["a"] is None or r["b"] is None]

    @property
    def sections_only_a(self) -> List[Section]:
        """A's sections that match none of B (Note [Matching contexts])."""
        return [s for s in self.names if isinstance(s, Section) and s.b is None]

    @property
    def sections_only_b(self) -> List[Section]:
        return [s for s in self.names if isinstance(s, Section) and s.a is None]

    @property
    def not_compared(self) -> Optional[str]:
        """Why a gate cannot judge B against A, or None: no module is in both runs, or a section
        of A matches none of B (Note [Comparing runs])."""
        if not any(r["a"] is not None and r["b"] is not None for r in self.rows):
            return "nothing was compared: no module is in both runs"
        only_a = self.sections_only_a
        if only_a:
            return (f"{len(only_a)} section(s) of A match no section of B: "
                    f"{'; '.join(self.names[s] for s in only_a)}")
        return None

    @property
    def worst_slowdown_pct(self) -> float:
        """The largest flagged slowdown in percent of A's p50 (0 when none)."""
        worst = 0.0
        for r in self.changes:
            a50 = float(r["a"]["p50_ns"])
            if a50 > 0:
                worst = max(worst, 100.0 * r["delta_ns"] / a50)
        return worst

    def _replays_line(self, section: Any) -> Optional[str]:
        sides = (section.a, section.b) if isinstance(section, Section) else (section, section)
        a_replays, b_replays = (run.get(side[0]) if side and side[0] else None
                                for run, side in zip(self.replays, sides))
        if not (a_replays or b_replays):
            return None
        return (f"  A: {replays_text(a_replays) or '-'}; "
                f"B: {replays_text(b_replays) or '-'}")

    def text(self, *, changed_only: bool = False, width: int = WIDTH) -> str:
        """The comparison as a table per section, fitting `width` columns (names' control
        characters shown as the statistics table shows them)."""
        numbers = sum(w + 2 for _, w in COLUMNS)
        name_width = max(width - numbers, 12)
        out: List[str] = []
        for context, name in self.names.items():
            rows = [r for r in self.rows if r["context"] == context and
                    (not changed_only or r["changed"] or r["a"] is None or r["b"] is None)]
            if not rows:
                continue
            out.append(elide(f"{name}: p50 and self p50 (us), A -> B", width))
            replays = self._replays_line(context)
            if replays:
                out.append(replays)
            out.append(f"{'module (full path)':<{name_width}}" +
                       "".join(f"  {t:>{w}}" for t, w in COLUMNS))
            for r in rows:
                out.append(f"{elide(table_text(r['path']), name_width):<{name_width}}" +
                           "".join(f"  {c:>{w}}" for c, (_, w) in zip(_cells(r), COLUMNS)))
            out.append("")
        out += self._summary()
        return "\n".join(out) + "\n"

    def _summary(self) -> List[str]:
        """The lines under the tables: changes, modules of one run, few samples, not compared."""
        out: List[str] = []
        changes, only = self.changes, self.one_run_only
        few = sum(1 for r in self.rows if r["a"] is not None and r["b"] is not None and
                  _few(r["a"], r["b"]))
        out.append(f"{len(changes)} change(s) beyond the noise (p50 outside the other run's "
                   f"p05-p95), {len(only)} module(s) in one run only")
        out.append(f"{few} module(s) with fewer than {MIN_SAMPLES} samples (timed replays or "
                   "calls) in a run: not judged (few)")
        not_compared = self.not_compared
        if not_compared:
            out.append(f"not compared: {not_compared}")
        return out


class _Graph(NamedTuple):
    """A graph context of one run as Note [Matching contexts] matches it."""

    context: Context
    label: Optional[str]
    paths: frozenset


def _pair(only_a: List[_Graph], only_b: List[_Graph], key: Callable[[_Graph], Any],
          pairs: List[Tuple[Context, Context]]) -> None:
    """Pairs, in capture order, the graphs left in `only_a` and `only_b` whose key is equal (a
    key of None pairs nothing), taking them out of both."""
    waiting: Dict[Any, List[_Graph]] = {}
    for graph in only_b:
        if key(graph) is not None:
            waiting.setdefault(key(graph), []).append(graph)
    for graph in list(only_a):
        match = waiting.get(key(graph)) if key(graph) is not None else None
        if match:
            other = match.pop(0)
            pairs.append((graph.context, other.context))
            only_a.remove(graph)
            only_b.remove(other)


def _pair_alike(only_a: List[_Graph], only_b: List[_Graph],
                pairs: List[Tuple[Context, Context]]) -> None:
    """Pairs each graph left in `only_a`, in capture order, with the graph left in `only_b` that
    shares the largest part of their module paths, at least half of them together (modules
    added or removed, and no label to match by); takes them out of both."""
    for graph in list(only_a):
        best, best_share = None, 0.5
        for other in only_b:
            share = len(graph.paths & other.paths) / len(graph.paths | other.paths)
            if share >= best_share and (best is None or share > best_share):
                best, best_share = other, share
        if best is not None:
            pairs.append((graph.context, best.context))
            only_a.remove(graph)
            only_b.remove(best)


def _graphs(groups: Mapping[Context, List[Row]], labels: Mapping[int, str]) -> List[_Graph]:
    return [_Graph(c, labels.get(c[0]) if c[0] else None,
                   frozenset(r["path"] for r in rows)) for c, rows in groups.items() if c[0]]


def match_sections(groups_a: Mapping[Context, List[Row]], groups_b: Mapping[Context, List[Row]],
                   labels_a: Mapping[int, str], labels_b: Mapping[int, str],
                   names: Tuple[str, str] = ("A", "B")) -> List[Section]:
    """The sections of a comparison: each context of A paired with the same context of B
    (Note [Matching contexts]), then those of one run only. InvalidArgumentError when one run has
    no context columns and the other more than one context; `names` name the runs in it."""
    pairs: List[Tuple[Optional[Context], Optional[Context]]] = []
    old_a, old_b = (None, False) in groups_a, (None, False) in groups_b
    if old_a != old_b:
        old, other = (names[0], groups_b) if old_a else (names[1], groups_a)
        if len(other) != 1:
            raise make_error(
                InvalidArgumentError,
                f"{old} has no graph_id and first_call columns (written by an accgraph before "
                "they existed): its rows pool every graph's replays and the eager calls, so they "
                f"cannot be matched to the {len(other)} contexts of the other run; write it again "
                "with this accgraph (or compare it with another file of its kind)")
        pairs.append((next(iter(groups_a)), next(iter(groups_b))))
    else:
        for context in ((None, False), (0, False), (0, True)):
            if context in groups_a and context in groups_b:
                pairs.append((context, context))
        only_a, only_b = _graphs(groups_a, labels_a), _graphs(groups_b, labels_b)
        graph_pairs: List[Tuple[Context, Context]] = []
        _pair(only_a, only_b, lambda g: (g.label, g.paths) if g.label else None, graph_pairs)
        _pair(only_a, only_b, lambda g: g.label, graph_pairs)
        _pair(only_a, only_b, lambda g: g.paths, graph_pairs)
        _pair_alike(only_a, only_b, graph_pairs)
        pairs += graph_pairs
    paired_a = {a for a, _ in pairs}
    paired_b = {b for _, b in pairs}
    pairs += [(c, None) for c in groups_a if c not in paired_a]
    pairs += [(None, c) for c in groups_b if c not in paired_b]

    def rank(pair: Tuple[Optional[Context], Optional[Context]]) -> Tuple[int, int, int]:
        graph_id, first = pair[1] or pair[0]  # type: ignore[misc]
        in_b = 0 if pair[1] is not None else 1
        if graph_id is None:
            return 0, 0, in_b
        return (0, graph_id, in_b) if graph_id else (1 + int(first), 0, in_b)

    pairs.sort(key=rank)
    return [Section(*(b or a), a, b) for a, b in pairs]  # type: ignore[misc]


def section_name(section: Section, labels_a: Mapping[int, str],
                 labels_b: Mapping[int, str]) -> str:
    """ "graph 4 (train.py:42)", "graph 4 (train.py:42; graph 3 in A)", "graph 5 (x.py:3), in B
    only", "eager", ..."""
    a, b = section.a, section.b
    if a is not None and b is not None:
        name = context_name(b, {**labels_a, **labels_b})
        if a != b:
            in_a = context_name(a)
            name = name[:-1] + f"; {in_a} in A)" if name.endswith(")") else f"{name} ({in_a} in A)"
        return name
    if a is not None:
        return f"{context_name(a, labels_a)}, in A only"
    return f"{context_name(b, labels_b)}, in B only"  # type: ignore[arg-type]


def _source_name(source: Any, run: str) -> str:
    return f"{run} ({os.fspath(source)})" if isinstance(source, (str, os.PathLike)) else run


def compare(a: Any, b: Any, *, labels: Optional[Mapping[int, str]] = None) -> Comparison:
    """Compares the module timing of two runs: `a` and `b` are statistics files (CSV or JSON:
    ``--csv``, ``--json``), Profilers or rows; `labels` (graph id -> label: graph_labels())
    names the graphs whose rows carry no label (Profilers of this process). Graphs are matched
    across the runs by what they are, not by id (Note [Matching contexts]); Note [Comparing
    runs] says what is flagged. TypeError for what is not a run; InvalidArgumentError for a
    file that is not a statistics file of accgraph, naming it."""
    rows_a, rows_b = rows_of(a, "compare: a"), rows_of(b, "compare: b")
    groups_a, groups_b = by_context(rows_a), by_context(rows_b)
    labels_a, labels_b = labels_of(rows_a, labels), labels_of(rows_b, labels)
    sections = match_sections(groups_a, groups_b, labels_a, labels_b,
                              (_source_name(a, "A"), _source_name(b, "B")))
    names: Dict[Any, str] = {}
    rows: List[Dict[str, Any]] = []
    for section in sections:
        names[section] = section_name(section, labels_a, labels_b)
        in_a_rows = groups_a.get(section.a, []) if section.a is not None else []
        in_b_rows = groups_b.get(section.b, []) if section.b is not None else []
        in_a = {r["path"]: r for r in in_a_rows}
        in_b = {r["path"]: r for r in in_b_rows}
        order = [r["path"] for r in in_b_rows]
        order += [r["path"] for r in in_a_rows if r["path"] not in in_b]
        for path in order:
            ra, rb = in_a.get(path), in_b.get(path)
            entry: Dict[str, Any] = {"context": section, "path": path, "a": ra, "b": rb,
                                     "delta_ns": None, "ratio": None, "changed": False}
            if ra is not None and rb is not None:
                a50, b50 = float(ra["p50_ns"]), float(rb["p50_ns"])
                entry["delta_ns"] = b50 - a50
                entry["ratio"] = b50 / a50 if a50 > 0 else None
                entry["changed"] = _changed(ra, rb)
            rows.append(entry)
    return Comparison(rows, names, (graph_replays(a, rows_a), graph_replays(b, rows_b)))
