"""Kineto's Chrome JSON as annotate_trace reads and writes it: the trace loaded with its numbers
exact (Note [Exact numbers]), an earlier annotation taken out, the GPU work and the marker
sequences found in it."""

from __future__ import annotations

import gzip
import json
import math
import os
import secrets
import sys
import warnings
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Dict, List, Set, Tuple

from ..._errors import InvalidArgumentError
from ._common import CATEGORY, WHAT, cut, error
from ._sources import KernelNames

GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")

# The kinds of marker kernels that write a marker's time (KernelNames.kind).
RECORD_KINDS = ("record", "programmatic")


@dataclass(eq=False)
class TraceKernel:
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
class MarkerSequence:
    records: List[TraceKernel]  # sorted by anchor
    end: TraceKernel
    kernels: List[TraceKernel]
    anchors: List[int] = field(init=False)  # the records' (matching compares them often)

    def __post_init__(self) -> None:
        self.anchors = [k.anchor for k in self.records]


# --- the trace --------------------------------------------------------------------------------


def is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class ExactNumber:
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
        return isinstance(other, ExactNumber) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def parse_float(text: str) -> Any:
    """A JSON number with a fraction or an exponent: a float where the float's shortest text
    is the same number (written back as that text), else a ExactNumber."""
    value = float(text)
    if "e" not in text and "E" not in text:
        if len(text) <= 16:
            return value  # at most 15 digits, which a double holds (DBL_DIG)
        if len(text.rstrip("0")) > 19:
            return ExactNumber(text)  # more than 17 digits: more than a double's shortest text
    if repr(value) == text or (math.isfinite(value) and Decimal(repr(value)) == Decimal(text)):
        return value
    return ExactNumber(text)


def load_trace(trace: Any) -> Dict[str, Any]:
    if isinstance(trace, dict):
        # The caller's dict stays as it was: copied as deep as annotate_trace changes it (the
        # event list, each event and its args), not deeper (a deep copy recurses).
        data: Any = dict(trace)
        if isinstance(data.get("traceEvents"), list):
            data["traceEvents"] = [own_event(ev) for ev in data["traceEvents"]]
    else:
        path = os.fspath(trace)
        todo = "pass the file torch.profiler's export_chrome_trace wrote"
        try:
            opener = gzip.open if is_gzip(path) else open
            with opener(path, "rt", encoding="utf-8") as f:
                data = json.load(f, parse_float=parse_float)
        except OSError as e:  # gzip.BadGzipFile and a bad CRC are OSErrors too
            raise error(InvalidArgumentError, f"cannot read the trace {path!r}: "
                        f"{e.strerror or e}: {todo}") from None
        except EOFError:
            raise error(InvalidArgumentError,
                        f"the trace {path!r} is cut short: its gzip stream ends before its end "
                        f"(a copy or an export that did not finish): {todo}, whole") from None
        except zlib.error as e:
            raise error(InvalidArgumentError, f"the trace {path!r} is a damaged gzip file "
                        f"({e}): {todo}") from None
        except RecursionError:
            raise error(InvalidArgumentError,
                        f"the trace {path!r} nests JSON arrays or objects deeper than Python's "
                        "JSON reader follows (sys.getrecursionlimit() "
                        f"{sys.getrecursionlimit()}): it is not a torch.profiler "
                        f"trace, which nests a few levels: {todo}") from None
        except ValueError as e:  # json.JSONDecodeError, UnicodeDecodeError
            raise error(InvalidArgumentError, f"{path!r} is not Chrome trace JSON "
                        f"({cut(str(e), 200)}): {todo}") from None
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise error(InvalidArgumentError, "the trace has no traceEvents list: pass the file "
                    "torch.profiler's export_chrome_trace wrote")
    return data


def own_event(ev: Any) -> Any:
    """A copy of an event of the caller's dict that annotate_trace may change (its args)."""
    if not isinstance(ev, dict):
        return ev
    ev = dict(ev)
    if isinstance(ev.get("args"), dict):
        ev["args"] = dict(ev["args"])
    return ev


LABELS = ("accgraph_region", "accgraph_replay", "accgraph_marker")


def is_ours(ev: Any) -> bool:
    """A region slice an earlier annotate_trace added."""
    return isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") == CATEGORY and \
        isinstance(ev.get("args"), dict) and "accgraph_path" in ev["args"]


def strip_annotations(events: List[Any]) -> int:
    """Takes an earlier annotate_trace's work out of `events` (Note [Trace input checks]): its
    region slices, the names and sort indices of the rows that held only those, the labels of
    kernels. Returns how many slices it took out."""
    ours = [ev for ev in events if type(ev) is dict and ev.get("cat") == CATEGORY and is_ours(ev)]
    if not ours:
        return 0
    rows = {row_key(ev) for ev in ours}
    used = {row_key(ev) for ev in events
            if isinstance(ev, dict) and ev.get("ph") != "M" and not is_ours(ev)}
    mine = rows - used
    events[:] = [ev for ev in events if not is_ours(ev) and not names_row_of(ev, mine)]
    for ev in events:
        if isinstance(ev, dict) and isinstance(ev.get("args"), dict):
            for key in LABELS:
                ev["args"].pop(key, None)
    return len(ours)


def names_row_of(ev: Any, rows: Set[Tuple[Any, Any]]) -> bool:
    """Whether `ev` names or orders one of `rows` (a thread_name or thread_sort_index)."""
    return isinstance(ev, dict) and ev.get("ph") == "M" and \
        ev.get("name") in ("thread_name", "thread_sort_index") and row_key(ev) in rows


ID_TYPES = frozenset((str, int, float, bool, type(None)))


def hashable(value: Any) -> bool:
    """An id (pid, tid, correlation) that can key a dict: a number, a string or null."""
    return type(value) in ID_TYPES or isinstance(value, (str, int, float, ExactNumber))


def row_key(ev: Dict[str, Any]) -> Tuple[Any, Any]:
    pid, tid = ev.get("pid"), ev.get("tid")
    return (pid if hashable(pid) else repr(pid), tid if hashable(tid) else repr(tid))


# Times a Perfetto trace holds (unsigned 64-bit ns), and that this module computes with: a ts
# or dur beyond is not a time of a trace (1e300 us), and exact arithmetic on it would be slow.
MAX_NS = 2**63 - 1
# Below 2^43 us a double's spacing is under 1 ns, so the ns nearest to it are the ns of the
# (three-decimal) text it was read from: to_ns computes them without Decimal.
EXACT_DOUBLE_US = float(2**43)


def to_ns(value: Any) -> int:
    """Microseconds of the trace (a JSON number) in integer nanoseconds, exactly. ValueError
    for a value that is not a number, not finite or beyond +-MAX_NS."""
    kind = type(value)
    if kind is float and -EXACT_DOUBLE_US < value < EXACT_DOUBLE_US:
        whole = int(value)  # exact, and so is value - whole (Sterbenz)
        return whole * 1000 + round((value - whole) * 1000)
    if kind is ExactNumber:
        text = value.text
    elif kind is float or (isinstance(value, float)):
        text = repr(float(value))
    elif kind is int or (isinstance(value, int) and kind is not bool):
        ns = int(value) * 1000
        if abs(ns) > MAX_NS:
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
        if not math.isfinite(number) or abs(number) > MAX_NS / 1000:
            raise ValueError(f"out of range: {value!r}")
        ns = round(Decimal(text) * 1000)
    if abs(ns) > MAX_NS:
        raise ValueError(f"out of range: {value!r}")
    return ns


def trace_kernels(events: List[Any], names: KernelNames) -> Tuple[List[TraceKernel], int]:
    """The GPU work of the trace in time order, and how many marker kernels were left out (a
    time that is not a number, a row that is neither a number nor a string, args that are not
    an object)."""
    out = []
    unusable = 0
    no_correlation = 0  # marker kernels whose correlation cannot be an id
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        category = ev.get("cat", "")
        category = category.lower() if type(category) is str else str(category).lower()
        if category not in GPU_WORK:
            continue
        try:
            if not (hashable(ev.get("pid")) and hashable(ev.get("tid"))):
                raise ValueError("not a row of the trace: nowhere to put its regions")
            if not isinstance(ev.get("args", {}), dict):
                raise ValueError("args that are not an object: nowhere to put its labels")
            start, dur = to_ns(ev["ts"]), to_ns(ev.get("dur", 0))
        except (KeyError, ValueError):
            unusable += category == "kernel" and names.kind(str(ev.get("name", ""))) != ""
            continue
        args = ev.get("args", {})
        correlation = args.get("correlation")
        kind = names.kind(str(ev.get("name", ""))) if category == "kernel" else ""
        if not hashable(correlation):
            no_correlation += kind != ""
            correlation = None
        out.append(TraceKernel(ev, start, start + dur, (ev.get("pid"), ev.get("tid")), kind,
                           correlation))
    if no_correlation:
        warnings.warn(f"{WHAT}: {no_correlation} marker kernel(s) of the trace have a "
                      "correlation that is a list or an object, not an id: it is ignored and "
                      "their replays are found on their stream rows (kernels of a graph on "
                      "several streams may then be missed); pass the trace torch.profiler's "
                      "export_chrome_trace wrote, unedited", RuntimeWarning, stacklevel=4)
    out.sort(key=lambda k: (k.start, k.end))
    return out, unusable


def by_anchor(records: List[TraceKernel]) -> List[TraceKernel]:
    return sorted(records, key=lambda k: (k.anchor, k.start))


def correlated_sequences(kernels: List[TraceKernel]
                         ) -> Tuple[List[MarkerSequence], List[TraceKernel], Set[int]]:
    """The sequences of graph launches, each an end kernel alone under its correlation with its
    record kernels (Note [Trace replay matching], 1); the end kernels left, which need their
    stream row; the ids of the kernels taken."""
    by_correlation: Dict[Any, List[TraceKernel]] = {}
    for k in kernels:
        if k.correlation is not None:
            by_correlation.setdefault(k.correlation, []).append(k)
    # Per correlation: its end kernels and record kernels, counted once (a trace whose
    # correlation ids repeat would otherwise be scanned once per end kernel).
    ends_of = {c: sum(k.kind == "end" for k in group) for c, group in by_correlation.items()}
    records_of = {c: [k for k in group if k.kind in RECORD_KINDS]
                  for c, group in by_correlation.items()}
    claimed: Set[int] = set()
    sequences = []
    pending: List[TraceKernel] = []
    for end in (k for k in kernels if k.kind == "end"):
        c = end.correlation
        if c is not None and ends_of[c] == 1 and records_of[c]:
            claimed.update(id(k) for k in by_correlation[c])
            sequences.append(MarkerSequence(by_anchor(records_of[c]), end, by_correlation[c]))
        else:
            pending.append(end)
    return sequences, pending, claimed


def row_sequences(kernels: List[TraceKernel], pending: List[TraceKernel], claimed: Set[int]
                  ) -> List[MarkerSequence]:
    """The sequences of the `pending` end kernels: each takes the record kernels of its own
    stream row since that row's previous end kernel (Note [Trace replay matching], 1)."""
    rows: Dict[Any, List[TraceKernel]] = {}
    for k in kernels:
        if id(k) not in claimed:
            rows.setdefault(k.row, []).append(k)
    position: Dict[Any, int] = {}
    sequences = []
    for end in pending:
        row = rows.get(end.row, [])
        first = position.get(end.row, 0)
        last = next(i for i in range(first, len(row)) if row[i] is end)
        position[end.row] = last + 1
        records = [k for k in row[first:last] if k.kind in RECORD_KINDS]
        if not records:
            continue
        begin = next(i for i in range(first, last) if row[i] is records[0])
        sequences.append(MarkerSequence(by_anchor(records), end, row[begin:last + 1]))
    return sequences


def marker_sequences(kernels: List[TraceKernel]) -> List[MarkerSequence]:
    """The marker sequences of the trace, in time order (Note [Trace replay matching], 1)."""
    sequences, pending, claimed = correlated_sequences(kernels)
    sequences += row_sequences(kernels, pending, claimed)
    sequences.sort(key=lambda s: s.records[0].anchor)
    return sequences


# Note [Exact numbers]: Kineto writes microseconds with three decimals; since the epoch that is
# 19 digits, more than a double holds (a step of 0.25 us). A number a double would change is
# read as an ExactNumber, which keeps its text (parse_float), and the new slices' edges are made
# ExactNumbers where a double cannot hold them (to_us). json's encoder writes floats through
# float.__repr__ whatever their class, and has no way to write raw text, so an ExactNumber goes
# through `default` as a string placeholder that the text then loses: "<token>", 128 random
# bits drawn per write, and used only when the text holds it exactly as often as there are
# placeholders (else a new token is drawn), so no string of the trace can be taken for one;
# the placeholders are replaced in the order the encoder met the ExactNumbers, and any
# notation comes back as written. A pure-Python encoder that writes
# the text itself would be 5-10x slower on traces of a million events.


def to_us(ns: int) -> Any:
    value = round(ns / 1000, 3)
    if Decimal(repr(value)) * 1000 == ns:
        return value
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return ExactNumber(f"{sign}{ns // 1000}.{ns % 1000:03d}")


def dumps(value: Any) -> str:
    """`value` as JSON text, each ExactNumber as its text (Note [Exact numbers])."""
    texts: List[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, ExactNumber):
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
    # The encoder writes the placeholders in the order it met the ExactNumbers.
    parts = text.split(f'"{token}"')
    return parts[0] + "".join(t + part for t, part in zip(texts, parts[1:]))


