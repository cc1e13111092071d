"""Re-runs the annotate_trace cases (A01-A45) of the 2026-11-28 reliability audit
(scripts/audit/README.md) against the installed accgraph package, each in its
own process (a crash or a hang is caught: 150 s limit), printing `ID | handled/NOT | evidence`
as the audit did, then a count (scripts/audit/_harness.py). No GPU and no torch needed: reports come from the host backend,
traces are Kineto-shaped (tests/python/test_torch_trace.py's kineto_trace) or the recorded
fixture (tests/python/data).

    build/venv/bin/python scripts/audit/annotate_trace_cases.py          # every case
    build/venv/bin/python scripts/audit/annotate_trace_cases.py A24 A45  # some
    build/venv/bin/python scripts/audit/annotate_trace_cases.py --skip-heavy  # without A42

Verdicts as the audit's (_harness.py)."""

from __future__ import annotations

import gzip
import json
import math
import pathlib
import resource
import shutil
import subprocess
import sys
import time
import warnings

from _harness import ROOT, bad, cases, expect_error, main, ok, short, temporaries

DATA = ROOT / "tests" / "python" / "data"
FIXTURE = DATA / "torch_trace.json.gz"
CSV = DATA / "torch_trace_reports.csv"
HEAVY = {"A42"}


def helpers():
    """tests/python/test_torch_trace.py's trace builders (kineto_trace, timed_model, dumps)."""
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    import test_torch_trace as t

    return t


def annotate(*args, **kwargs):
    """annotate_trace with the cuda backend's marker kernels for reports that name none."""
    return helpers().annotate_trace(*args, **kwargs)


def fixture_text() -> str:
    return gzip.decompress(FIXTURE.read_bytes()).decode()


def fixture_trace() -> dict:
    return json.loads(fixture_text())


def markers(trace):
    return [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"
            and "accgraph" in str(e.get("name", ""))]


def slices(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if isinstance(e, dict) and
                e.get("cat") == "gpu_user_annotation"]


def host_reports(replays: int, keep: int):
    """Reports of `replays` host-backend replays of test_torch_trace's timed_model (all kept),
    and the last `keep` of them."""
    import accgraph

    t = helpers()
    prof = accgraph.Profiler(keep_reports=replays)
    t.timed_model(prof, accgraph.Stream("host"), replays=replays)
    prof.flush()
    reports = prof.reports()
    return reports, reports[-keep:]


SIZE_LIMITED = r"""
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import accgraph
from accgraph.torch import annotate_trace
trace, output, reports, limit = sys.argv[1:5]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
kernels = accgraph.MarkerKernels(record_at_start=["marker_record_kernel"],
                                 record_at_end=["marker_record_programmatic_kernel",
                                                "marker_record_placed_kernel"],
                                 end=["marker_end_kernel"])
try:
    if os.path.exists(output) and os.path.samefile(trace, output):
        annotate_trace(trace, output, reports, overwrite_input=True, marker_kernels=kernels)
    else:
        annotate_trace(trace, output, reports, marker_kernels=kernels)
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(3)
print("written")
"""


def size_limited(d, trace, output, limit):
    script = d / "limited.py"
    script.write_text(SIZE_LIMITED)
    return subprocess.run([sys.executable, str(script), str(trace), str(output), str(CSV),
                           str(limit)], capture_output=True, text=True, timeout=120)


# --- the cases ---------------------------------------------------------------------------------


def A01(d):
    s = annotate(FIXTURE, d / "out.json", CSV)
    if (s["replays"], s["regions"]) == (4, 48) and s["kernels_labelled"] >= 100:
        ok(f"{s['replays']} replays, {s['regions']} regions, {s['kernels_labelled']} kernels "
           "labelled")
    bad(str(s))


def A02(d):
    p = d / "cut.json"
    text = fixture_text()
    p.write_text(text[: len(text) // 2])
    ok(expect_error(lambda: annotate(p, d / "out.json", CSV), [p])[:160])


def A03(d):
    p = d / "cut.json.gz"
    raw = FIXTURE.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])
    ok(expect_error(lambda: annotate(p, d / "out.json", CSV), [p])[:160])


def A04(d):
    p = d / "flipped.json.gz"
    raw = bytearray(FIXTURE.read_bytes())
    for i in range(1000, 1060):
        raw[i] ^= 0xFF
    p.write_bytes(bytes(raw))
    ok(expect_error(lambda: annotate(p, d / "out.json", CSV), [p])[:160])


def A05(d):
    p = d / "crc.json.gz"
    raw = bytearray(FIXTURE.read_bytes())
    for i in range(len(raw) - 8, len(raw) - 4):
        raw[i] ^= 0xFF
    p.write_bytes(bytes(raw))
    ok(expect_error(lambda: annotate(p, d / "out.json", CSV), [p])[:160])


def A06(d):
    p = d / "deep.json"
    p.write_text("[" * 200_000 + "]" * 200_000)
    ok(expect_error(lambda: annotate(p, d / "out.json", CSV), [p])[:160])


def A07(d):
    seen = []
    for i, top in enumerate([42, "x", None, {"traceEvents": {}}, {"traceEvents": None},
                             [1, "x", None]]):
        p = d / f"top{i}.json"
        p.write_text(json.dumps(top))
        seen.append(expect_error(lambda: annotate(p, d / "out.json", CSV))[:50])
    ok("; ".join(sorted(set(seen))))


def A08(d):
    out = []
    for value in ("NaN", "Infinity", "-Infinity"):
        trace = fixture_trace()
        for e in markers(trace):
            e["ts"] = "@V@"
        p = d / f"{value}.json"
        p.write_text(json.dumps(trace).replace('"@V@"', value))
        out.append(expect_error(lambda: annotate(p, d / "out.json", CSV), [p])[:70])
    ok(out[0])


def A09(d):
    trace = fixture_trace()
    records = [e for e in markers(trace) if "record" in e["name"]]
    records[len(records) // 2]["ts"] = "@V@"
    p = d / "nan.json"
    p.write_text(json.dumps(trace).replace('"@V@"', "NaN"))
    s = annotate(p, d / "out.json", CSV)
    if s["replays"] == 3 and s["unmatched_replays"] == 1:
        ok(f"{s['replays']} of 4 replays, unmatched_replays {s['unmatched_replays']}")
    bad(str(s))


def A10(d):
    trace = fixture_trace()
    extra = [{"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": -5.5,
              "dur": 1.0},
             {"ph": "X", "cat": "cpu_op", "name": "huge", "pid": 1, "tid": 1, "ts": 1e300,
              "dur": 1e300},
             {"ph": "X", "cat": "kernel", "name": "abc", "pid": 1, "tid": 1, "ts": "abc",
              "dur": 1.0},
             {"ph": "X", "cat": "kernel", "name": "negdur", "pid": 1, "tid": 1, "ts": 5.0,
              "dur": -3}]
    trace["traceEvents"] += extra
    p = d / "extra.json"
    p.write_text(json.dumps(trace))
    annotate(p, d / "out.json", CSV)
    got = {e.get("name"): e for e in json.loads((d / "out.json").read_text())["traceEvents"]
           if isinstance(e, dict) and e.get("pid") == 1}
    if all(got.get(e["name"], {}).get("ts") == e["ts"] and got[e["name"]].get("dur") == e["dur"]
           for e in extra):
        ok("kept as given")
    bad(f"changed: {got}")


def pftrace_with(d, event):
    import accgraph

    if not accgraph.perfetto_supported():
        bad("package built without Perfetto support: case not run")
    trace = fixture_trace()
    trace["traceEvents"].append(event)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            annotate(trace, d / "out.pftrace", CSV)
        except accgraph.InvalidArgumentError as e:
            ok(f"InvalidArgumentError: {str(e)[:120]}")
        except Exception as e:  # noqa: BLE001
            bad(f"raw {short(e)}")
    mine = [str(w.message) for w in caught if "left out" in str(w.message)]
    if mine:
        ok(f"written, warning: {mine[0][:150]}")
    bad("left out without a word")


def A11(d):
    pftrace_with(d, {"ph": "X", "cat": "cpu_op", "name": "far", "pid": 1, "tid": 1,
                     "ts": 1e300, "dur": 1.0})


def A12(d):
    pftrace_with(d, {"ph": "X", "cat": "cpu_op", "name": "before", "pid": 1, "tid": 1,
                     "ts": -2.0, "dur": 1.0})


def unhashable(d, field, value):
    import accgraph

    trace = fixture_trace()
    for e in markers(trace):
        if field == "correlation":
            e.setdefault("args", {})["correlation"] = value
        else:
            e[field] = value
    try:
        s = annotate(trace, d / "out.json", CSV)
        ok(f"annotated: {s['replays']} replays")
    except accgraph.InvalidArgumentError as e:
        ok(f"InvalidArgumentError: {str(e)[:140]}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")


def A13(d):
    unhashable(d, "correlation", [1, 2])


def A14(d):
    unhashable(d, "tid", {"a": 1})


def A15(d):
    trace = fixture_trace()
    for e in trace["traceEvents"]:
        if isinstance(e, dict) and isinstance(e.get("args"), dict) and "correlation" in e["args"]:
            e["args"]["correlation"] = 1
    s = annotate(trace, d / "out.json", CSV)
    if s["replays"] == 4:
        ok("4 of 4 replays matched")
    bad(str(s))


def A16(d):
    import accgraph

    trace = fixture_trace()
    ms = markers(trace)
    for e, key in zip(ms[:4], ("ts", "ph", "args", "dur")):
        e.pop(key, None)
    trace["traceEvents"] += [{}, {"ph": "X"}]
    try:
        s = annotate(trace, d / "out.json", CSV)
        ok(f"{s['replays']} of 4 replays, {s['unmatched_replays']} unmatched, no crash")
    except accgraph.InvalidArgumentError as e:
        ok(f"InvalidArgumentError: {str(e)[:120]}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")


def A17(d):
    trace = fixture_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if "accgraph" not in
                            str(e.get("name", ""))]
    ok(expect_error(lambda: annotate(trace, d / "out.json", CSV), ["no accgraph marker"])[:150])


def A18(d):
    trace = fixture_trace()
    trace["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "@accgraph-exact:12.5",
                                 "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0,
                                 "args": {"a": "@accgraph-exact:3.25"}})
    annotate(trace, d / "out.json", CSV)
    ev = next(e for e in json.loads((d / "out.json").read_text())["traceEvents"]
              if isinstance(e, dict) and e.get("pid") == 1 and e.get("cat") == "cpu_op")
    if ev["name"] == "@accgraph-exact:12.5" and ev["args"]["a"] == "@accgraph-exact:3.25":
        ok("strings kept")
    bad(f"written as {ev['name']!r}, {ev['args']!r}")


def A19(d):
    from decimal import Decimal

    text = "4.8825950881304571234e12"
    trace = fixture_trace()
    trace["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "exp", "pid": 1,
                                 "tid": 1, "ts": "@V@", "dur": 1.0})
    p = d / "exp.json"
    p.write_text(json.dumps(trace).replace('"@V@"', text))
    annotate(p, d / "out.json", CSV)
    ev = next(e for e in json.loads((d / "out.json").read_text(), parse_float=Decimal)
              ["traceEvents"] if isinstance(e, dict) and e.get("name") == "exp")
    if isinstance(ev["ts"], Decimal) and ev["ts"] == Decimal(text):
        ok(f"number kept: {ev['ts']}")
    bad(f"written as {ev['ts']!r}")


def A20(d):
    p = d / "trace.json.gz"
    shutil.copy(FIXTURE, p)
    annotate(p, p, CSV, overwrite_input=True)
    first = len(slices(p))
    annotate(p, p, CSV, overwrite_input=True)
    second = len(slices(p))
    if first == second == 48:
        ok(f"{first} region slices, then {second}: the earlier annotation replaced")
    bad(f"{first} region slices, then {second}")


def A21(d):
    ok(expect_error(lambda: annotate(FIXTURE, d / "missing" / "out.json", CSV),
                    ["No such file or directory"])[:150])


def A22(d):
    (d / "dir.json").mkdir()
    ok(expect_error(lambda: annotate(FIXTURE, d / "dir.json", CSV), ["Is a directory"])[:150])


def A23(d):
    ok(expect_error(lambda: annotate(FIXTURE, d / "out.txt", CSV), [".json"])[:150])


def A24(d):
    out = d / "out.json"
    old = b"old content\n" * 10_000
    out.write_bytes(old)
    done = size_limited(d, FIXTURE, out, 64 * 1024)
    if done.returncode == 3 and out.read_bytes() == old and not temporaries(d):
        ok(f"error, old file kept, no temporary: {done.stdout.strip()[:140]}")
    bad(f"rc {done.returncode}, old file {'kept' if out.read_bytes() == old else 'LOST'}, "
        f"temporaries {temporaries(d)}: {done.stdout.strip()[:100]}")


def A25(d):
    p = d / "trace.json.gz"
    shutil.copy(FIXTURE, p)
    refused = expect_error(lambda: annotate(p, p, CSV), ["overwrite_input=True"])
    done = size_limited(d, p, p, 2048)
    if done.returncode == 3 and p.read_bytes() == FIXTURE.read_bytes() and not temporaries(d):
        ok(f"refused unless overwrite_input=True ({refused[40:110]}...); with it, the failed "
           "write left the input as it was, no temporary")
    bad(f"rc {done.returncode}, input "
        f"{'kept' if p.read_bytes() == FIXTURE.read_bytes() else 'LOST'}: {done.stdout[:100]}")


def A26(d):
    import accgraph

    if not accgraph.perfetto_supported():
        bad("package built without Perfetto support: case not run")
    annotate(FIXTURE, d / "out.pftrace", CSV)
    msg = expect_error(lambda: annotate(FIXTURE, d / "missing" / "out.pftrace", CSV),
                       ["No such file or directory"])
    ok(f"written ({(d / 'out.pftrace').stat().st_size} bytes); {msg[:100]}")


def A27(d):
    out = d / "out.pftrace"
    old = b"old\n" * 10_000
    out.write_bytes(old)
    done = size_limited(d, FIXTURE, out, 48 * 1024)
    if done.returncode == 3 and out.read_bytes() == old and not temporaries(d):
        ok(f"error, old file kept, no temporary: {done.stdout.strip()[:120]}")
    bad(f"rc {done.returncode}: {done.stdout[:120]}")


def edited_csv(d, edit, name="edited.csv"):
    lines = CSV.read_text().splitlines(keepends=True)
    header = lines[0].strip().split(",")
    lines = edit(lines, header)
    p = d / name
    p.write_text("".join(lines))
    return p


def csv_error(d, edit, names=()):
    p = edited_csv(d, edit)
    ok(expect_error(lambda: annotate(FIXTURE, d / "out.json", p), [p, *names])[:170])


def set_field(column, value, line=3):
    def edit(lines, header):
        row = lines[line].rstrip("\n").split(",")
        row[header.index(column)] = value
        lines[line] = ",".join(row) + "\n"
        return lines
    return edit


def A30(d):
    csv_error(d, set_field("depth", "deep"), ["line 4", "depth"])


def A31(d):
    def edit(lines, header):
        lines[3] = ",".join(lines[3].split(",")[:4]) + "\n"
        return lines
    csv_error(d, edit, ["line 4"])


def A32(d):
    p = edited_csv(d, lambda lines, header: lines[:1])
    ok(expect_error(lambda: annotate(FIXTURE, d / "out.json", p), ["no reports"])[:150])


def A33(d):
    ok(expect_error(lambda: annotate(FIXTURE, d / "out.json", FIXTURE), [FIXTURE])[:170])


def A34(d):
    p = edited_csv(d, set_field("metadata", "x" * 300_000))
    s = annotate(FIXTURE, d / "out.json", p)
    ok(f"accepted: {s['replays']} replays, {s['regions']} regions")


def A35(d):
    def edit(lines, header):
        row = lines[5].rstrip("\n").split(",")
        s, e = header.index("start_ns"), header.index("end_ns")
        row[s], row[e] = row[e], row[s]
        lines[5] = ",".join(row) + "\n"
        return lines
    csv_error(d, edit, ["line 6", "ends before it starts"])


def A36(d):
    csv_error(d, lambda lines, header: [lines[0]] + [x for x in lines[1:] for _ in (0, 1)],
              ["line 3", "same row as line 2"])


def A37(d):
    (d / "dir.csv").mkdir()
    a = expect_error(lambda: annotate(FIXTURE, d / "out.json", d / "dir.csv"),
                     ["Is a directory"])
    b = expect_error(lambda: annotate(FIXTURE, d / "out.json", d / "none.csv"),
                     ["No such file"])
    ok(f"{a[40:100]} / {b[40:100]}")


def A38(d):
    # The row: errors for 0, -1 and nan (InvalidArgumentError naming tolerance_us), inf
    # accepted; "1" a TypeError, which must name tolerance_us too (a bare "'>' not supported"
    # names nothing).
    for value in (0, -1, math.nan):
        expect_error(lambda: annotate(FIXTURE, d / "out.json", CSV, tolerance_us=value),
                     ["tolerance_us"])
    annotate(FIXTURE, d / "out.json", CSV, tolerance_us=math.inf)
    message = expect_error(lambda: annotate(FIXTURE, d / "out.json", CSV, tolerance_us="1"),
                           ["tolerance_us"], "TypeError")
    ok(f"InvalidArgumentError x3, inf accepted, '1': TypeError {message[:80]}")


def A39(d):
    kernels = helpers().MARKER_KERNELS  # the CSV holds no report source
    code = ("import sys, accgraph, accgraph.torch\n"
            f"accgraph.torch.annotate_trace({str(FIXTURE)!r}, {str(d / 'o.json')!r}, "
            f"{str(CSV)!r}, marker_kernels=accgraph.MarkerKernels(**{kernels!r}))\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    if done.returncode == 0 and done.stdout.strip() == "False":
        ok("torch not imported; works without torch")
    bad(f"rc {done.returncode}: {done.stdout.strip()} {done.stderr[-200:]}")


def many(d, replays, keep_every=None, keep_last=None):
    t = helpers()
    reports, _ = host_reports(replays, replays)
    src = d / "trace.json"
    src.write_text(t.dumps(t.kineto_trace(reports)))
    kept = reports[::keep_every] if keep_every else reports[-keep_last:] if keep_last else \
        reports
    start = time.perf_counter()
    s = annotate(src, d / "out.json", kept)
    return s, time.perf_counter() - start, len(kept)


def A40(d):
    s, seconds, kept = many(d, 3000)
    if s["replays"] == kept == 3000:
        ok(f"3,000 annotated in {seconds:.1f} s")
    bad(f"{s} in {seconds:.1f} s")


def A41(d):
    s, seconds, kept = many(d, 2000, keep_every=10)
    if s["replays"] == kept == 200:
        ok(f"{s['replays']} annotated, {s['unmatched_replays']} unmatched, {seconds:.1f} s")
    bad(f"{s} in {seconds:.1f} s")


def A42(d):
    trace = fixture_trace()
    trace["traceEvents"] += [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1,
                              "tid": 1, "ts": 4882595085667.751 + i, "dur": 1.5,
                              "args": {"i": i}} for i in range(1_000_000)]
    src = d / "big.json.gz"
    with gzip.open(src, "wt", compresslevel=1) as f:
        json.dump(trace, f)
    del trace
    start = time.perf_counter()
    s = annotate(src, d / "out.json.gz", CSV)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024
    if s["replays"] == 4:
        ok(f"{seconds:.1f} s, max RSS {rss:.1f} GiB")
    bad(str(s))


def A43(d):
    trace = fixture_trace()
    trace["traceEvents"].append({"ph": "i", "name": "b", "pid": 1, "tid": 1, "ts": 1.0,
                                 "args": {"b": b"bytes"}})
    try:
        annotate(trace, d / "out.json", CSV)
    except TypeError as e:
        ok(f"TypeError: {e}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad("no error")


def A44(d):
    import accgraph

    t = helpers()
    prof = accgraph.Profiler(keep_reports=0)
    t.timed_model(prof, accgraph.Stream("host"), replays=2)
    prof.flush()
    ok(expect_error(lambda: annotate(FIXTURE, d / "out.json", prof), ["keep_reports"])[:150])


def A45(d):
    s, seconds, kept = many(d, 8000, keep_last=1024)
    if s["replays"] == kept == 1024 and seconds < 5:
        ok(f"1,024 annotated in {seconds:.1f} s")
    bad(f"{s['replays']} of {kept} annotated in {seconds:.1f} s")


if __name__ == "__main__":
    sys.exit(main("annotate_trace", cases(globals()), __file__, heavy=HEAVY))
