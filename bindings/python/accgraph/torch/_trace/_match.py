"""annotate_trace's matching: which replay of the trace each report is (Note [Trace replay
matching], Note [Matching cost])."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..._errors import InvalidArgumentError
from ._common import error
from ._kineto import MarkerSequence, TraceKernel
from ._sources import KernelNames, Report

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

# --- matching ---------------------------------------------------------------------------------


def shape_residual(seq: MarkerSequence, report: Report) -> Optional[float]:
    """The largest disagreement of a marker's offset from the first (ns), or None when the
    marker counts differ (Note [Trace replay matching], 3)."""
    if len(seq.records) != len(report.times):
        return None
    if report.base is None:
        return 0.0
    anchors = seq.anchors
    first = anchors[report.base]
    return float(max(abs(anchors[j] - first - t) for j, t in report.shape))


def first_marker_time(report: Report) -> Optional[int]:
    return next((report.times[i] for i in report.order if report.times[i] is not None), None)


@dataclass
class Match:
    seq: MarkerSequence
    report: Report
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
#   note's "the replay index may then be off"): after VALID_R0_COMPARED valid r0 have been
#   compared in full, the best of them wins. Each full comparison is O(min(S, R)), so the
#   whole is O((S + R) log(S + R)) (sorting) plus a constant number of full comparisons.
#   Only gaps that agree at every distinctive position and disagree elsewhere, for many r0,
#   make it slower.
VALID_R0_COMPARED = 8
DISTINCTIVE_GAPS = 8


def distinctive(gaps: Dict[int, int]) -> List[int]:
    """The positions of the DISTINCTIVE_GAPS gaps farthest from their median."""
    if not gaps:
        return []
    median = sorted(gaps.values())[len(gaps) // 2]
    return sorted(gaps, key=lambda i: -abs(gaps[i] - median))[:DISTINCTIVE_GAPS]


def windows(indices: List[int], size: int) -> List[Tuple[int, int, int]]:
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


class Alignment:
    """One graph's traced replays and reports, and the gaps between consecutive replays on each
    side: what an r0 of Note [Trace replay matching], 4 is checked against."""

    def __init__(self, seqs: List[MarkerSequence], reports: Dict[int, Report],
                 tolerance_ns: float) -> None:
        self.seqs, self.reports, self.tolerance_ns = seqs, reports, tolerance_ns
        resolution = max(r.resolution_ns for r in reports.values())
        self.limit = tolerance_ns + 2 * resolution
        self.first_time = {j: first_marker_time(r) for j, r in reports.items()}
        self.timed = sorted(j for j, t in self.first_time.items() if t is not None)
        anchors = [s.records[0].anchor for s in seqs]
        # Gap i: between replay i and i + 1 (trace), between replay j and j + 1 (reports); none
        # next to a replay of the trace that lacks a marker (its first anchor may be another's).
        markers = Counter(len(r.times) for r in reports.values()).most_common(1)[0][0]
        whole = [len(s.records) == markers for s in seqs]
        self.seq_gaps = {i: anchors[i + 1] - anchors[i] for i in range(len(seqs) - 1)
                         if whole[i] and whole[i + 1]}
        first = self.first_time
        self.report_gaps = {j: first[j + 1] - first[j]  # type: ignore[operator]
                            for j in self.timed if first.get(j + 1) is not None}
        self.seq_probes = distinctive(self.seq_gaps)
        self.report_probes = distinctive(self.report_gaps)

    def disagrees(self, r0: int, i: int) -> bool:
        gap = self.report_gaps.get(r0 + i)
        return gap is not None and i in self.seq_gaps and abs(self.seq_gaps[i] - gap) > self.limit

    def ruled_out(self, r0: int) -> bool:
        """Whether a gap at a distinctive position disagrees (Note [Matching cost])."""
        return any(self.disagrees(r0, i) for i in self.seq_probes) or \
            any(self.disagrees(r0, j - r0) for j in self.report_probes)

    def span(self, r0: int) -> Tuple[int, int]:
        """The traced replays [low, high] that r0 pairs with a report."""
        return max(0, self.timed[0] - r0), min(len(self.seqs) - 1, self.timed[-1] - r0)

    def disagreement(self, r0: int) -> float:
        """The largest disagreement of the gaps between replays at r0; above `limit` (where the
        comparison stops) when they disagree."""
        low, high = self.span(r0)
        worst = 0.0
        for i in range(low, high):
            gap = self.report_gaps.get(r0 + i)
            if gap is not None and i in self.seq_gaps:
                worst = max(worst, abs(self.seq_gaps[i] - gap))
                if worst > self.limit:
                    break
        return worst

    def pairs(self, r0: int, worst: float) -> List[Match]:
        """The traced replays that fit their report at r0 (Note [Trace replay matching], 3)."""
        low, high = self.span(r0)
        matches = []
        for i in range(low, high + 1):
            report = self.reports.get(r0 + i)
            if report is None or self.first_time[r0 + i] is None:
                continue
            residual = shape_residual(self.seqs[i], report)
            if residual is not None and residual <= self.tolerance_ns + report.resolution_ns:
                matches.append(Match(self.seqs[i], report, residual, worst))
        return matches


def align(seqs: List[MarkerSequence], reports: Dict[int, Report], tolerance_ns: float
          ) -> List[Match]:
    """The pairs of the best r0 of Note [Trace replay matching], 4 (none when no r0 fits),
    searched as Note [Matching cost] says."""
    a = Alignment(seqs, reports, tolerance_ns)
    best: Tuple[Tuple[int, float, int], List[Match]] = ((0, 0.0, 0), [])
    compared = 0
    for count, lo, hi in sorted(windows(a.timed, len(seqs)), key=lambda w: (-w[0], -w[1])):
        if count < best[0][0] or compared >= VALID_R0_COMPARED:
            break  # no r0 left can match more pairs than the best (Note [Matching cost])
        for r0 in range(hi - 1, lo - 1, -1):
            if a.ruled_out(r0):
                continue
            worst = a.disagreement(r0)
            if worst > a.limit:
                continue  # the gaps between replays disagree
            compared += 1
            matches = a.pairs(r0, worst)
            key = (len(matches), -worst, r0)
            if matches and key > best[0]:
                best = (key, matches)
            if compared >= VALID_R0_COMPARED:
                break
    return best[1]


def match_reports(sequences: List[MarkerSequence], reports: List[Report], tolerance_ns: float
                  ) -> List[Match]:
    # Eager region trees (graph 0) are numbered together whatever their regions: grouped by
    # their paths, as a graph's replays are by its id.
    graphs: Dict[Any, Dict[int, Report]] = {}
    for r in reports:
        key = r.graph_id if r.graph_id else (0, tuple(x.path for x in r.regions))
        graphs.setdefault(key, {}).setdefault(r.replay_index, r)
    probes = {}
    for g, by_index in graphs.items():
        ordered = [by_index[i] for i in sorted(by_index)]
        probes[g] = [ordered[0], ordered[len(ordered) // 2], ordered[-1]]
    assigned: Dict[Any, List[MarkerSequence]] = {}
    for seq in sequences:
        fits = []
        for g, candidates in probes.items():
            residuals = [x for x in (shape_residual(seq, r) for r in candidates) if x is not None]
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
        matches.extend(align(seqs, graphs[g], tolerance_ns))
    return matches


def no_match_error(trace: Any, sequences: List[MarkerSequence], kernels: List[TraceKernel],
                    unusable: int, reports: List[Report], tolerance_ns: float,
                    names: KernelNames) -> Exception:
    name = "the trace" if isinstance(trace, dict) else f"the trace {os.fspath(trace)!r}"
    if not any(k.kind for k in kernels):
        if unusable:
            return error(InvalidArgumentError,
                         f"{name} holds {unusable} accgraph marker kernel(s), none usable: their "
                         "ts or dur is not a number, their args not an object, or their pid "
                         "or tid is neither a number nor a string: pass the trace "
                         "torch.profiler's export_chrome_trace wrote, unedited")
        return error(InvalidArgumentError,
                     f"{name} holds no accgraph marker kernels ({names.describe()}): trace "
                     "the timed replays with torch.profiler's CUDA activity "
                     "(ProfilerActivity.CUDA), on the cuda backend's device_timestamps markers")
    if not sequences:
        return error(InvalidArgumentError,
                     f"the accgraph marker kernels of {name} form no complete sequence (record "
                     f"kernels followed by {', '.join(names.end)}): trace whole replays")
    trace_counts = sorted({len(s.records) for s in sequences})
    report_counts = sorted({len(r.times) for r in reports})
    if not set(trace_counts) & set(report_counts):
        return error(InvalidArgumentError,
                     f"the replays of {name} have {trace_counts} markers each, the reports "
                     f"{report_counts}: the reports are not of the replays traced (pass the "
                     "profiler that timed them, or its reports)")
    return error(InvalidArgumentError,
                 f"no replay of {name} agrees with a report within {tolerance_ns / 1000} us "
                 "(the gaps between marker kernels differ from the gaps between the times their "
                 "markers wrote): the reports are not of the replays traced; if they are, raise "
                 "tolerance_us")


