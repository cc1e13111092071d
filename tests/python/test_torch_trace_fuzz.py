"""A fuzzer for accgraph.torch.annotate_trace (issue 36: "add annotate_trace input to the
fuzzers"): seeded random mutations of the recorded fixture's trace and reports CSV (cut short,
bits flipped, bytes dropped or repeated, JSON values swapped for values of other types, deep
nesting, huge and oddly written numbers, gzip damage, CSV fields and rows edited), each given to
annotate_trace with a .json, .json.gz or .pftrace output. Every case must either annotate or
raise InvalidArgumentError, within a time bound: any other exception, or a case that runs past
it, fails the test, naming the seed that reproduces it.

libFuzzer (tests/fuzz/) drives C++ entry points; annotate_trace is Python, so it is fuzzed here
with Python's own random mutations, a fixed number of cases per run:

    ACCGRAPH_FUZZ_TRACE_CASES=300     cases (CI's python part: the default)
    ACCGRAPH_FUZZ_TRACE_SEED=1        first seed (default 0: the same cases every run);
                                      scripts/fuzz.sh passes a random one
    ACCGRAPH_FUZZ_TRACE_SECONDS=60    stop after this long instead (scripts/fuzz.sh)
    ACCGRAPH_FUZZ_TRACE_KEEP=dir      keep each failing case's files there

One case: build/venv/bin/python -m pytest tests/python/test_torch_trace_fuzz.py -k one
with ACCGRAPH_FUZZ_TRACE_SEED=<seed> ACCGRAPH_FUZZ_TRACE_CASES=1."""

from __future__ import annotations

import gzip
import json
import math
import os
import pathlib
import random
import shutil
import signal
import time
import warnings

import pytest

import accgraph
from test_torch_trace import annotate_trace  # with the cuda backend's marker kernels

DATA = pathlib.Path(__file__).parent / "data"
FIXTURE_TRACE = DATA / "torch_trace.json.gz"
FIXTURE_REPORTS = DATA / "torch_trace_reports.csv"
CASE_SECONDS = 20  # far above a case's 30-50 ms: only a hang reaches it

pytestmark = pytest.mark.skipif(
    not (FIXTURE_TRACE.exists() and FIXTURE_REPORTS.exists()),
    reason="the recorded fixture is not there: run tests/python/data/record_torch_trace.py on a "
           "GPU")

ODD_VALUES = [None, True, False, 0, -1, 2**64, 10**400, 1e300, -1e300, float("nan"),
              float("inf"), "", "x", "@accgraph-exact:1.5", "\ud800", "1e3", [], {}, [1, [2]],
              {"a": {"b": []}}, "marker_end_kernel accgraph", 4.8825950881304571234e12]
ODD_NUMBER_TEXTS = ["1e999999", "-0", "0e0", "4.8825950881304571234e12", "1" * 5000,
                    "1." + "0" * 400 + "1", "-1e-400", "123456789012345678901234567890.5"]


class Hang(Exception):
    pass


def mutate_bytes(rng, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        if not data:
            break
        i = rng.randrange(len(data))
        if op == 0:  # cut short
            del data[i:]
        elif op == 1:  # flip bits
            for _ in range(rng.randint(1, 8)):
                j = rng.randrange(len(data))
                data[j] ^= 1 << rng.randrange(8)
        elif op == 2:  # drop a range
            del data[i:i + rng.randint(1, 200)]
        elif op == 3:  # repeat a range
            data[i:i] = data[i:i + rng.randint(1, 200)]
        else:  # insert random bytes
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(data)


def deep(rng):
    value = 0
    for _ in range(rng.choice([10, 500, 5000, 100_000])):
        value = [value]
    return value


def mutate_json(rng, trace):
    """Type swaps and odd values in the events, the top level's shape, deep nesting."""
    events = trace["traceEvents"]
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(7)
        ev = rng.choice(events) if events else {}
        if not isinstance(ev, dict):
            continue
        marker = [e for e in events if isinstance(e, dict) and "accgraph" in
                  str(e.get("name", ""))]
        if op <= 1 and marker:  # a marker kernel's field, most often
            ev = rng.choice(marker)
        elif op == 2 and rng.random() < 0.5:  # or a row's name, or a region slice
            ev = rng.choice([e for e in events if isinstance(e, dict) and
                             (e.get("ph") == "M" or e.get("cat") == "gpu_user_annotation")]
                            or [ev])
        if op <= 2:
            key = rng.choice(["ts", "dur", "ph", "cat", "name", "pid", "tid", "args"])
            ev[key] = rng.choice(ODD_VALUES)
        elif op == 3 and isinstance(ev.get("args"), dict):
            ev["args"][rng.choice(["correlation", "stream", "accgraph_path", "x"])] = \
                rng.choice(ODD_VALUES)
        elif op == 4:
            ev.setdefault("args", {})
            if isinstance(ev["args"], dict):
                ev["args"]["deep"] = deep(rng)
        elif op == 5:
            del events[rng.randrange(len(events)):][: rng.randint(1, 50)]
        else:
            events.insert(rng.randrange(len(events) + 1), rng.choice(ODD_VALUES))
    if rng.random() < 0.05:
        trace = rng.choice([events, {"traceEvents": rng.choice(ODD_VALUES)}, 42, "x", None])
    return trace


def to_text(rng, trace) -> str:
    try:
        text = json.dumps(trace)
    except (RecursionError, ValueError):
        return "[" * 10_000
    # Numbers written as no encoder writes them, in place of some marker kernels' ts.
    for _ in range(rng.randint(0, 3)):
        at = text.find('"ts": ', rng.randrange(len(text)))
        if at >= 0:
            end = at + 6
            while end < len(text) and text[end] in "-+.0123456789eE":
                end += 1
            text = text[:at + 6] + rng.choice(ODD_NUMBER_TEXTS) + text[end:]
    return text


def mutate_csv(rng, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(7)
        i = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
        fields = lines[i].rstrip("\n").split(",")
        if op == 0:  # a field swapped for another value
            fields[rng.randrange(len(fields))] = rng.choice(
                ["", "deep", "-1", str(2**70), "1e3", "x" * rng.choice([10, 200_000]), '"',
                 "\0", "9" * 40])
            lines[i] = ",".join(fields) + "\n"
        elif op == 1:  # start and end swapped
            if len(fields) > 9:
                fields[8], fields[9] = fields[9], fields[8]
                lines[i] = ",".join(fields) + "\n"
        elif op == 2:  # a row cut short
            lines[i] = ",".join(fields[:rng.randrange(len(fields))]) + "\n"
        elif op == 3:  # rows repeated
            lines[i:i] = lines[i:i + rng.randint(1, 20)]
        elif op == 4:  # rows dropped
            del lines[i:i + rng.randint(1, 20)]
        elif op == 5:  # a column more, or the header renamed
            lines[0] = rng.choice(["context,", "x"]) + lines[0]
        else:
            rng.shuffle(lines)
    return "".join(lines)


_BASES: dict = {}


def base_trace(rng, directory: pathlib.Path):
    """The fixture's trace, or (one case in five) the fixture annotated once: annotating it
    again takes the earlier annotation out first (Note [Trace input checks])."""
    if "plain" not in _BASES:
        _BASES["plain"] = gzip.decompress(FIXTURE_TRACE.read_bytes())
        annotated = directory / "annotated.json"
        annotate_trace(FIXTURE_TRACE, annotated, FIXTURE_REPORTS)
        _BASES["annotated"] = annotated.read_bytes()
        annotated.unlink()
    return json.loads(_BASES["annotated" if rng.random() < 0.2 else "plain"])


def make_case(rng, directory: pathlib.Path):
    """The files of one case: (trace path, reports CSV path, output path)."""
    trace = base_trace(rng, directory)
    csv_text = FIXTURE_REPORTS.read_text()
    target = rng.randrange(10)
    if target < 4:
        text = to_text(rng, mutate_json(rng, trace))
    else:
        text = json.dumps(trace)
    raw = text.encode("utf-8", "surrogatepass")
    gz = rng.random() < 0.5
    if gz:
        raw = gzip.compress(raw, compresslevel=1)
    if 4 <= target < 7:
        raw = mutate_bytes(rng, raw)
    if target >= 7:
        csv_text = mutate_csv(rng, csv_text)
    if rng.random() < 0.1:  # both, now and then
        csv_text = mutate_csv(rng, csv_text)
    trace_path = directory / ("trace.json.gz" if gz else "trace.json")
    trace_path.write_bytes(raw)
    csv_path = directory / "reports.csv"
    if rng.random() < 0.03:
        csv_path.write_bytes(mutate_bytes(rng, gzip.compress(csv_text.encode())))
    else:
        csv_path.write_text(csv_text, encoding="utf-8", errors="surrogatepass")
    suffixes = [".json", ".json.gz"] + ([".pftrace"] if accgraph.perfetto_supported() else [])
    return trace_path, csv_path, directory / ("out" + rng.choice(suffixes))


def run_case(seed: int, directory: pathlib.Path) -> str:
    """One case: 'annotated' or 'refused'; raises what annotate_trace raised otherwise."""
    rng = random.Random(seed)
    trace, reports, output = make_case(rng, directory)

    def alarm(signum, frame):
        raise Hang(f"seed {seed} ran past {CASE_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # events a .pftrace leaves out
            annotate_trace(trace, output, reports)
        return "annotated"
    except accgraph.InvalidArgumentError as e:
        assert str(e).startswith("[invalid argument] annotate_trace: "), e
        return "refused"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_annotate_trace_fuzz(tmp_path):
    cases = int(os.environ.get("ACCGRAPH_FUZZ_TRACE_CASES", "300"))
    first = int(os.environ.get("ACCGRAPH_FUZZ_TRACE_SEED", "0"))
    seconds = float(os.environ.get("ACCGRAPH_FUZZ_TRACE_SECONDS", "inf"))
    keep = os.environ.get("ACCGRAPH_FUZZ_TRACE_KEEP")
    deadline = time.monotonic() + seconds
    outcomes = {"annotated": 0, "refused": 0}
    failures = []
    seed = first
    while (seed - first < cases if math.isinf(seconds) else time.monotonic() < deadline):
        directory = tmp_path / f"case{seed}"
        directory.mkdir()
        try:
            outcomes[run_case(seed, directory)] += 1
            shutil.rmtree(directory)
        except Exception as e:  # noqa: BLE001 - every other exception is a finding
            failures.append(f"seed {seed}: {type(e).__name__}: {str(e)[:300]}")
            if keep:
                shutil.copytree(directory, pathlib.Path(keep) / f"case{seed}")
        seed += 1
    print(f"annotate_trace fuzz: seeds {first}..{seed - 1}: {outcomes['annotated']} annotated, "
          f"{outcomes['refused']} refused with InvalidArgumentError, {len(failures)} failed")
    assert not failures, "\n".join(failures[:20])
    if seed - first >= 100:  # both sides of the fuzz are reached
        assert outcomes["annotated"] and outcomes["refused"], outcomes
