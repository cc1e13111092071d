"""Re-runs the Vulkan cases (C01-C18) of the 2026-11-28 reliability audit on Mesa's lavapipe,
each in its own process (scripts/audit/_harness.py): the `accgraph` program of the release build
(build/bin/accgraph; ACCGRAPH_PROGRAM overrides) for C01-C09, the Python package for C10-C18.

    build/venv/bin/python scripts/audit/vulkan_cases.py            # every case
    build/venv/bin/python scripts/audit/vulkan_cases.py C14 C15    # some

Needs lavapipe (mesa-vulkan-drivers; VK_DRIVER_FILES defaults to its ICD, as scripts/test.sh
sets it). Choices where a row is vague:
- C02-C05 ("unavailable with reason"): `accgraph demo --backend vulkan` exits 1 with a message
  that names the Vulkan driver problem and VK_DRIVER_FILES (what to set);
- C06 ("the default still works"): the demo without --backend and without ZE_ENABLE_ALT_DRIVERS
  (so the default is the host backend, as the auditor's was) exits 0 with its data check;
- C14: the refusal is an accgraph error naming the limit and what to do, and a graph of 8,000
  regions captured afterwards, in the same process, reports all 8,000;
- C15: every name comes back unchanged from the reports, the Chrome JSON, the reports CSV and
  the .pftrace (its UTF-8 bytes); a lone surrogate (not encodable) may be refused with a
  TypeError/ValueError, never a crash;
- C16: each of the four lifetimes delivers every replay made before it (a sink counts), and the
  objects left stay usable or refuse with an accgraph error."""

from __future__ import annotations

import csv
import gc
import json
import os
import pathlib
import sys

from _harness import (LAVAPIPE, bad, cases, check, clip, crashed, device_env, expect_error,
                      main, ok, program, run, short)


def demo(*args: object, env=None):
    return run([program(), "demo", *args], env=env or device_env(), timeout=140)


def broken_driver(manifest: pathlib.Path):
    env = device_env()
    env["VK_DRIVER_FILES"] = str(manifest)
    done = demo("--backend", "vulkan", "--replays", "2", env=env)
    check(done.returncode == 1 and "VK_DRIVER_FILES" in done.stderr and "vulkan" in
          done.stderr and not crashed(done),
          f"exit {done.returncode}: {clip(done.stderr, 200)}")


def manifest(d: pathlib.Path, library: str) -> pathlib.Path:
    p = d / "icd.json"
    p.write_text(json.dumps({"file_format_version": "1.0.0",
                             "ICD": {"library_path": library, "api_version": "1.3.0"}}))
    return p


def C01(d):
    trace, stats = d / "t.json", d / "s.csv"
    done = demo("--backend", "vulkan", "--replays", "200", "--trace", trace, "--csv", stats)
    if done.returncode != 0:
        bad(f"exit {done.returncode}: {clip(done.stderr)}")
    events = json.loads(trace.read_text())["traceEvents"]
    layer0 = [e for e in events if e.get("name") == "layer0" and e.get("ph") == "X"]
    rows = list(csv.reader(stats.read_text().splitlines()))
    check("200 reports" in done.stdout and "every layer's destination holds the expected bytes"
          in done.stdout and len(layer0) == 200 and len(rows) > 1,
          f"200 reports, {len(layer0)} layer0 slices in the trace, {len(rows) - 1} CSV rows, "
          "data check passed")


def C02(d):
    broken_driver(d / "missing.json")


def C03(d):
    p = d / "truncated.json"
    text = pathlib.Path(LAVAPIPE).read_text()
    p.write_text(text[: len(text) // 2])
    broken_driver(p)


def C04(d):
    broken_driver(manifest(d, str(d / "libvulkan_missing.so")))


def C05(d):
    broken_driver(manifest(d, "libz.so.1"))


def C06(d):
    env = device_env()
    env["VK_DRIVER_FILES"] = str(d / "missing.json")
    env.pop("ZE_ENABLE_ALT_DRIVERS", None)
    env.pop("ACCGRAPH_BACKEND", None)
    done = demo("--replays", "5", env=env)
    first = done.stdout.splitlines()[0] if done.stdout else ""
    check(done.returncode == 0 and "data check: every layer" in done.stdout,
          f"exit {done.returncode}: {clip(first or done.stderr, 120)}")


def device_variable(value: str, *needles: str):
    env = device_env()
    env["ACCGRAPH_VULKAN_DEVICE"] = value
    done = demo("--backend", "vulkan", "--replays", "2", env=env)
    missing = [n for n in needles if n not in done.stderr]
    check(done.returncode == 1 and not missing and not crashed(done),
          f"exit {done.returncode}{f', lacks {missing}' if missing else ''}: "
          f"{clip(done.stderr, 200)}")


def C07(d):
    device_variable("7", "ACCGRAPH_VULKAN_DEVICE=7", "physical device")


def C08(d):
    device_variable("-1x", "ACCGRAPH_VULKAN_DEVICE", "-1x", "is not a device index", "unset")


def C09(d):
    done = demo("--backend", "vulkan", "--ring", "1", "--replays", "2000", "--delay-us", "0")
    layer0 = next((line.split() for line in done.stdout.splitlines()
                   if line.startswith("layer0 ")), [])
    check(done.returncode == 0 and "2000 reports" in done.stdout and layer0[1:2] == ["2000"] and
          "every layer's destination holds the expected bytes" in done.stdout,
          f"exit {done.returncode}, layer0 count {layer0[1:2]}: {clip(done.stderr, 100)}")


# --- the Python package on vulkan ------------------------------------------------------------


def vk():
    import accgraph

    info = {b.name: b for b in accgraph.backends()}.get("vulkan")
    if info is None or not info.available:
        bad(f"the vulkan backend is not available: {info.reason if info else 'not built'}")
    return accgraph


def timed(accgraph, prof, s, buf, name="r", value=1):
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with g.capture(s):
        with prof.region(s, name):
            s.fill(buf, value)
    return g


def C10(d):
    accgraph = vk()
    msg = expect_error(lambda: accgraph.Graph("vulkan").capture_end(), ["capture_begin"],
                       "InvalidStateError")
    ok(clip(msg, 150))


def C11(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    buf = accgraph.Buffer(s, 4096)
    prof = accgraph.Profiler()
    inner = timed(accgraph, prof, s, buf)
    outer = accgraph.Graph("vulkan")
    outer.capture_begin(s)
    msg = expect_error(lambda: inner.replay(s), ["another capture"], "InvalidStateError")
    s.fill(buf, 2)
    outer.capture_end()
    outer.replay()
    inner.replay()
    s.synchronize()
    prof.flush()
    check(prof.delivered == 1, f"{clip(msg, 100)}; later replays: {prof.delivered} delivered")


def C12(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    dst = accgraph.Buffer(s, 4096, kind="host")
    inner = accgraph.Graph("vulkan")
    with inner.capture(s):
        s.fill(dst, 0x5A)
    s.fill(dst, 0)
    s.synchronize()
    outer = accgraph.Graph("vulkan")
    with outer.capture(s):
        inner.replay(s)
    s.fill(dst, 0)
    s.synchronize()
    before = bytes(memoryview(dst))
    outer.replay()
    s.synchronize()
    after = bytes(memoryview(dst))
    check(before == bytes(4096) and after == b"\x5a" * 4096,
          "the outer graph's replay writes the inner graph's bytes"
          if after == b"\x5a" * 4096 else f"after the outer replay: {after[:8]!r}...")


def C13(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    g = accgraph.Graph("vulkan")
    g.capture_begin(s)
    a = expect_error(lambda: g.capture_begin(s), ["already capturing"], "InvalidStateError")
    other = accgraph.Graph("vulkan")
    b = expect_error(lambda: other.capture_begin(s), ["already capturing"],
                     "InvalidStateError")
    g.capture_end()
    with other.capture(s):  # both still usable
        pass
    ok(f"{clip(a, 70)} / {clip(b, 70)}")


def C14(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    prof = accgraph.Profiler()
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    try:
        with g.capture(s):
            for i in range(30_000):
                with prof.region(s, f"r{i}"):
                    pass
        bad("30,000 regions accepted without an error (check they are reported)")
    except accgraph.Error as e:
        message = str(e)
        if not any(n in message for n in ("16384", "16,384")) or "fewer regions" not in message:
            bad(f"unclear: {short(e)}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    g2 = accgraph.Graph("vulkan")
    prof.attach(g2)
    with g2.capture(s):
        for i in range(8_000):
            with prof.region(s, f"r{i}"):
                pass
    g2.replay()
    s.synchronize()
    prof.flush()
    regions = len(prof.reports()[-1]) if prof.reports() else 0
    check(regions == 8000, f"{clip(message, 110)}; then 8,000 regions: {regions} reported")


NAMES = ["emoji \U0001f680\U0001f468\u200d\U0001f469", "nul\x00byte", "rtl \u202eevil\u202c",
         "a/b", "quo\"te's", "new\nline", "x" * 100_000]


def C15(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    buf = accgraph.Buffer(s, 64)
    prof = accgraph.Profiler()
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with g.capture(s):
        for name in NAMES:
            with prof.region(s, name):
                s.fill(buf, 1)
    g.replay()
    s.synchronize()
    prof.flush()
    got = [t.name for t in prof.reports()[-1]]
    if got != NAMES:
        bad(f"reports: {[n[:20] for n in got]}")
    prof.write_chrome_trace(d / "t.json")
    names = {e.get("name") for e in json.loads((d / "t.json").read_text(encoding="utf-8"))
             ["traceEvents"]}
    lost = [n[:20] for n in NAMES if n not in names]
    if lost:
        bad(f"Chrome JSON lost {lost}")
    prof.write_csv(d / "t.csv")
    with open(d / "t.csv", newline="", encoding="utf-8") as f:
        fields = {x for row in csv.reader(f) for x in row}
    lost = [n[:20] for n in NAMES if not any(n == x or x.endswith("/" + n) or x == n
                                               for x in fields)]
    if lost:
        bad(f"CSV lost {lost}")
    where = "JSON, CSV"
    if accgraph.perfetto_supported():
        prof.write_trace(d / "t.pftrace")
        raw = (d / "t.pftrace").read_bytes()
        lost = [n[:20] for n in NAMES if n.encode() not in raw]
        if lost:
            bad(f".pftrace lost {lost}")
        where += ", .pftrace"
    try:
        with prof.region(s, "lone \ud800"):
            pass
        surrogate = "accepted"
    except (TypeError, ValueError) as e:
        surrogate = short(e, 60)
    ok(f"all {len(NAMES)} kept in reports, {where}; lone surrogate: {surrogate}")


def C16(d):
    accgraph = vk()
    seen = []

    def profiler():
        prof = accgraph.Profiler()
        prof.add_sink(lambda report: seen.append(report.graph_id))
        return prof

    # The profiler dropped before its graph: the replays made are delivered, the graph replays.
    s = accgraph.Stream("vulkan")
    buf = accgraph.Buffer(s, 4096)
    prof = profiler()
    g = timed(accgraph, prof, s, buf)
    for _ in range(3):
        g.replay()
    del prof
    gc.collect()
    g.replay()
    s.synchronize()
    a = len(seen)
    # The stream dropped before the graph.
    prof = profiler()
    s2 = accgraph.Stream("vulkan")
    g2 = timed(accgraph, prof, s2, accgraph.Buffer(s2, 4096))
    g2.replay()
    g2.replay()
    del s2
    gc.collect()
    try:
        g2.replay()
        after_drop = "replayed"
    except accgraph.InvalidStateError as e:
        after_drop = "InvalidStateError"
        if "stream" not in str(e):
            bad(f"unclear: {short(e)}")
    prof.flush()
    b = len(seen) - a
    # The graph dropped with replays pending.
    g3 = timed(accgraph, prof, s, buf)
    for _ in range(5):
        g3.replay()
    del g3
    gc.collect()
    prof.flush()
    c = len(seen) - a - b
    # stream.close() during a capture: an error or an ended capture, never a crash.
    s4 = accgraph.Stream("vulkan")
    g4 = accgraph.Graph("vulkan")
    g4.capture_begin(s4)
    s4.fill(accgraph.Buffer(s4, 64), 1)
    s4.close()
    try:
        g4.capture_end()
        closed = "capture_end accepted"
    except accgraph.Error as e:
        closed = short(e, 80)
    del g4
    gc.collect()
    check((a, b, c) == (3, 2 + (after_drop == "replayed"), 5),
          f"profiler first: {a}/3 delivered; stream first: {b} delivered, replay after: "
          f"{after_drop}; graph with 5 pending: {c}/5; close during capture: {closed}")


def C17(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    buf = accgraph.Buffer(s, 64)
    prof = accgraph.Profiler(marker_memory=8, keep_reports=None)
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with g.capture(s):
        for i in range(64):
            with prof.region(s, f"r{i}"):
                s.fill(buf, 1)
    for _ in range(500):
        g.replay()
    s.synchronize()
    prof.flush()
    indices = [r.replay_index for r in prof.reports()]
    check(prof.delivered == 500 and indices == list(range(500)) and prof.ring_waits > 0,
          f"{prof.delivered}/500, contiguous {indices == list(range(500))}, ring_waits "
          f"{prof.ring_waits}")


def C18(d):
    accgraph = vk()
    s = accgraph.Stream("vulkan")
    buf = accgraph.Buffer(s, 64)
    prof = accgraph.Profiler(keep_reports=None)
    for _ in range(200):
        with prof.region(s, "a"):
            with prof.region(s, "b"):
                s.fill(buf, 1)
                with prof.region(s, "c"):
                    s.fill(buf, 2)
    s.synchronize()
    prof.flush()
    paths = {tuple(t.path for t in r) for r in prof.reports()}
    check(prof.delivered == 200 and paths == {("a", "a/b", "a/b/c")},
          f"{prof.delivered}/200, region paths {sorted(paths)[:2]}")


if __name__ == "__main__":
    sys.exit(main("Vulkan on lavapipe", cases(globals()), __file__))
