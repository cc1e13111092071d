"""annotate_trace's output: Chrome JSON (.json, .json.gz: compressed here, written by the library's
atomic writer) or a native Perfetto trace (accgraph::timing::write_perfetto_events)."""

from __future__ import annotations

import gzip
import io
import os
import warnings
from typing import Any, Dict, Optional, Tuple

from ... import _accgraph
from ..._errors import InvalidArgumentError, UnsupportedError
from ..._native import check_output_file, trace_format, write_bytes_file, write_perfetto_events
from ._common import WHAT, error
from ._kineto import MAX_NS, ExactNumber, dumps, to_ns

# The outputs annotate_trace writes, by the format C++ says a name asks for (accgraph::timing::
# trace_format_for, Note [Trace formats] in timing/export/trace_file.cpp): the format of a name
# is decided there only, so write_trace and annotate_trace cannot disagree on it.
JSON_SUFFIXES = (".json", ".json.gz")


def output_format(output: str) -> str:
    """"chrome" or "perfetto": what annotate_trace writes to `output`. UnsupportedError for a
    Perfetto name in a package without Perfetto support, InvalidArgumentError for a name of
    neither format."""
    # A gzip output is chosen by the name it has once uncompressed.
    kind = trace_format(output[:-3] if output.endswith(".gz") else output)
    if kind == "perfetto" and not output.endswith(".gz"):
        if not _accgraph.perfetto_supported():
            raise error(UnsupportedError,
                        f"writing {output!r}: this accgraph package was built without Perfetto "
                        "support (accgraph::perfetto; libprotobuf-dev and protobuf-compiler were "
                        "missing when it was built): install them (scripts/ensure-packages.sh) "
                        "and reinstall it (pip install .), or write .json or .json.gz, which "
                        "Perfetto opens too")
        return kind
    if kind == "chrome" and output.endswith(JSON_SUFFIXES):
        return kind
    raise error(InvalidArgumentError,
                f"output {output!r} must end in .json or .json.gz (Chrome JSON) or .pftrace or "
                f".perfetto-trace (Perfetto){'' if kind == 'chrome' else f', not a {kind} name'}"
                ": annotate_trace writes the torch.profiler trace's events, which only those "
                "formats hold")


def os_error(output: str, e: OSError) -> Exception:
    """The C++ writer's OSError as annotate_trace's error: its message names the file, the reason
    and what became of it (Note [Atomic output])."""
    return error(InvalidArgumentError, e.strerror or str(e))


def check_output(output: str) -> None:
    """That `output` can be written, before any work (accgraph::timing::check_output_file)."""
    try:
        check_output_file(output)
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else (e.strerror or str(e))
        raise error(InvalidArgumentError,
                    f"cannot write {output!r}: {reason}: choose a writable path") from None


def write_json(data: Dict[str, Any], output: str) -> None:
    """`data` as Chrome JSON, gzip-compressed for a .gz name, written atomically by the library."""
    try:
        text = dumps(data)
    except RecursionError:
        raise error(InvalidArgumentError, "the trace nests JSON arrays or objects deeper than "
                    "Python's JSON writer follows: pass the trace torch.profiler's "
                    "export_chrome_trace wrote") from None
    data_bytes = text.encode("utf-8")
    if output.endswith(".gz"):
        buffer = io.BytesIO()
        # zlib's default level: 9 (gzip.open's) took 3x as long for 10% smaller output.
        with gzip.GzipFile(filename=os.path.basename(output)[:-3], mode="wb", fileobj=buffer,
                           compresslevel=6) as z:
            z.write(data_bytes)
        data_bytes = buffer.getvalue()
    try:
        write_bytes_file(output, "the annotated trace", data_bytes)
    except OSError as e:
        raise os_error(output, e) from e


# The phases a Perfetto trace of track events holds (accgraph::timing::write_perfetto_events).
PERFETTO_PHASES = ("X", "i", "I", "M")


def utf8_text(value: str) -> str:
    """`value` as UTF-8 can hold it: a lone surrogate (JSON's "\\ud800") becomes U+FFFD."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def json_text(value: Any) -> str:
    """A JSON value's text: a number as the trace wrote it."""
    if isinstance(value, ExactNumber):
        return value.text
    return utf8_text(dumps(value))


def id_text(value: Any) -> str:
    """A pid or tid as write_perfetto_events takes it: a string's text, a number's JSON text."""
    return utf8_text(value) if isinstance(value, str) else json_text(value)


def perfetto_event(ev: Any) -> Optional[Tuple[Any, ...]]:
    """`ev` as (phase, name, category, pid, tid, ts_ns, dur_ns, args), or None when a Perfetto
    trace of track events has no place for it (flow and counter events). ValueError when its
    time is not one a Perfetto trace holds (negative, not a number, beyond MAX_NS)."""
    if not isinstance(ev, dict) or ev.get("ph") not in PERFETTO_PHASES:
        return None
    ts = to_ns(ev.get("ts", 0))
    dur = to_ns(ev.get("dur", 0)) if ev["ph"] == "X" else 0
    if ts < 0 or dur < 0 or ts + dur > MAX_NS:
        raise ValueError("negative")
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    return (ev["ph"], utf8_text(str(ev.get("name", ""))), utf8_text(str(ev.get("cat", ""))),
            id_text(ev.get("pid")), id_text(ev.get("tid")), ts, dur,
            [(utf8_text(str(k)), utf8_text(v), True) if isinstance(v, str)
             else (utf8_text(str(k)), json_text(v), False) for k, v in args.items()])


def write_perfetto(data: Dict[str, Any], output: str) -> None:
    """`data`'s events as a native Perfetto trace, through accgraph::timing::
    write_perfetto_events (Note [Trace events in Perfetto] in timing/export/perfetto/events.cpp).
    Events whose time a Perfetto trace cannot hold are left out with one RuntimeWarning,
    attributed to the line that called annotate_trace."""
    events = []
    left_out = 0
    try:
        for ev in data["traceEvents"]:
            try:
                event = perfetto_event(ev)
            except ValueError:
                left_out += 1
                continue
            if event is not None:
                events.append(event)
    except RecursionError:
        raise error(InvalidArgumentError, "an event's args nest deeper than Python's JSON "
                    "writer follows: pass the trace torch.profiler's export_chrome_trace "
                    "wrote") from None
    if left_out:
        warnings.warn(f"{WHAT}: {left_out} event(s) of the trace left out of {output!r}: "
                      "their ts or dur is negative, not a number or beyond 2^63 ns, which a "
                      "Perfetto trace cannot hold; write .json or .json.gz to keep them as "
                      "they are", RuntimeWarning, stacklevel=4)  # annotate_trace's caller
    try:
        write_perfetto_events(output, events)
    except OSError as e:
        raise os_error(output, e) from e


def same_file(trace: Any, output: str) -> bool:
    try:
        return os.path.samefile(os.fspath(trace), output)
    except (OSError, TypeError, ValueError):
        return False


