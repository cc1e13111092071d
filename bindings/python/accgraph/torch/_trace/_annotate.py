"""annotate_trace's annotation: a matched replay's regions as slices on rows of their own, its
kernels labelled with their regions."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ._common import CATEGORY
from ._kineto import row_key, to_us
from ._match import Match

# --- annotating -------------------------------------------------------------------------------


class Rows:
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
                self.sort_index[row_key(ev)] = \
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


def annotate_match(match: Match, rows: Rows, slices: List[Dict[str, Any]]) -> Tuple[int, int]:
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
                       "ts": to_us(lo), "dur": to_us(hi - lo), "args": args})
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


