"""Run-to-run comparison of module timing: ``python -m accgraph.torch compare A.csv B.csv`` and
:func:`compare` (Note [Comparing runs])."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._table import (Context, Replays, Row, WIDTH, by_context, context_name, elide,
                     graph_replays, replays_text, rows_of, us)

# Note [Comparing runs]: modules are matched by context and path (Note [Reading tables] in
# _table.py): graph id and first-call flag, so the graphs of two runs of one script match when
# they were captured in the same order. A module's p50 changed, beyond the noise, when each run's
# p50 lies outside the other run's own spread, its [p05, p95] from the statistics (a CSV written
# before p05_ns existed: [min, p95]): the spread is what replays of one run already differ by,
# so a difference within it is not reported. With fewer than MIN_SAMPLES calls in either run the
# spread itself is not known (3 eager calls have p05 = min and p95 = max of three values, and
# two runs of the same script flagged 223 such rows "faster" on the H200): such a module is
# marked "few" and never flagged. The calls counted are the samples, a row's count: with sampled
# timing (Note [Sampled replays]) a graph's timed replays, not the replays it ran (a run of 200
# replays timed 1 in 16 has about 12 samples: few), and the spread is that of the samples; the
# section of a graph says how many replays each run timed of how many it ran, so that a run
# sampled and one timed on every replay are told apart. Only such changes are flagged, and --fail-above
# PCT fails (exit 1) on a flagged slowdown of more than PCT percent of A's p50. Modules timed
# in one run only are listed apart; they neither flag nor fail.

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


def _changed(a: Row, b: Row) -> bool:
    if _few(a, b):
        return False
    a_low, a_high = _spread(a)
    b_low, b_high = _spread(b)
    a50, b50 = float(a["p50_ns"]), float(b["p50_ns"])
    return not (a_low <= b50 <= a_high) and not (b_low <= a50 <= b_high)


class Comparison:
    """What :func:`compare` found: `rows` (one dict per module and context: context, path, a,
    b (the rows, None where the module is in one run only), delta_ns, ratio, changed), the
    text table (:meth:`text`) and the largest flagged slowdown (:attr:`worst_slowdown_pct`)."""

    def __init__(self, rows: List[Dict[str, Any]], names: Dict[Context, str],
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
    def worst_slowdown_pct(self) -> float:
        """The largest flagged slowdown in percent of A's p50 (0 when none)."""
        worst = 0.0
        for r in self.changes:
            a50 = float(r["a"]["p50_ns"])
            if a50 > 0:
                worst = max(worst, 100.0 * r["delta_ns"] / a50)
        return worst

    def text(self, *, changed_only: bool = False, width: int = WIDTH) -> str:
        """The comparison as a table per context, fitting `width` columns."""
        numbers = sum(w + 2 for _, w in COLUMNS)
        name_width = max(width - numbers, 12)
        out: List[str] = []
        for context, name in self.names.items():
            rows = [r for r in self.rows if r["context"] == context and
                    (not changed_only or r["changed"] or r["a"] is None or r["b"] is None)]
            if not rows:
                continue
            out.append(elide(f"{name}: p50 and self p50 (us), A -> B", width))
            if context[0]:
                a_replays, b_replays = (r.get(context[0]) for r in self.replays)
                if a_replays or b_replays:
                    out.append(f"  A: {replays_text(a_replays) or '-'}; "
                               f"B: {replays_text(b_replays) or '-'}")
            out.append(f"{'module (full path)':<{name_width}}" +
                       "".join(f"  {t:>{w}}" for t, w in COLUMNS))
            for r in rows:
                a, b = r["a"], r["b"]
                if a is None or b is None:
                    cells = (us(a["p50_ns"]) if a else "-", us(b["p50_ns"]) if b else "-", "-",
                             "-", us(a["self_p50_ns"]) if a else "-",
                             us(b["self_p50_ns"]) if b else "-",
                             "only A" if b is None else "only B")
                else:
                    delta = r["delta_ns"] / 1000.0
                    ratio = r["ratio"]
                    change = "few" if _few(a, b) else ""
                    if r["changed"]:
                        change = "slower" if delta > 0 else "faster"
                    cells = (us(a["p50_ns"]), us(b["p50_ns"]), f"{delta:+.2f}"[:8],
                             f"{ratio:.3f}" if ratio is not None else "-", us(a["self_p50_ns"]),
                             us(b["self_p50_ns"]), change)
                out.append(f"{elide(r['path'], name_width):<{name_width}}" +
                           "".join(f"  {c:>{w}}" for c, (_, w) in zip(cells, COLUMNS)))
            out.append("")
        changes, only = self.changes, self.one_run_only
        few = sum(1 for r in self.rows if r["a"] is not None and r["b"] is not None and
                  _few(r["a"], r["b"]))
        out.append(f"{len(changes)} change(s) beyond the noise (p50 outside the other run's "
                   f"p05-p95), {len(only)} module(s) in one run only")
        out.append(f"{few} module(s) with fewer than {MIN_SAMPLES} samples (timed replays or "
                   "calls) in a run: not judged (few)")
        return "\n".join(out) + "\n"


def compare(a: Any, b: Any, *, labels: Optional[Mapping[int, str]] = None) -> Comparison:
    """Compares the module timing of two runs: `a` and `b` are stats CSV paths (``--csv``),
    Profilers or rows. Note [Comparing runs] says what is flagged."""
    rows_a, rows_b = rows_of(a), rows_of(b)
    groups_a, groups_b = by_context(rows_a), by_context(rows_b)
    names: Dict[Context, str] = {}
    rows: List[Dict[str, Any]] = []
    for context in list(groups_a) + [c for c in groups_b if c not in groups_a]:
        names[context] = context_name(context, labels)
        in_a = {r["path"]: r for r in groups_a.get(context, [])}
        in_b = {r["path"]: r for r in groups_b.get(context, [])}
        order = [r["path"] for r in groups_b.get(context, [])]
        order += [p for p in (r["path"] for r in groups_a.get(context, [])) if p not in in_b]
        for path in order:
            ra, rb = in_a.get(path), in_b.get(path)
            entry: Dict[str, Any] = {"context": context, "path": path, "a": ra, "b": rb,
                                     "delta_ns": None, "ratio": None, "changed": False}
            if ra is not None and rb is not None:
                a50, b50 = float(ra["p50_ns"]), float(rb["p50_ns"])
                entry["delta_ns"] = b50 - a50
                entry["ratio"] = b50 / a50 if a50 > 0 else None
                entry["changed"] = _changed(ra, rb)
            rows.append(entry)
    # Sections in the order by_context gives (graphs, eager, first calls).
    ordered = by_context([{"graph_id": c[0], "first_call": c[1]} for c in names])
    names = {c: names[c] for c in ordered}
    return Comparison(rows, names, (graph_replays(a, rows_a), graph_replays(b, rows_b)))
