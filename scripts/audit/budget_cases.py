"""Re-runs the marker budget / ring cases (D01-D11) of the 2026-11-28 reliability audit, each in
its own process (scripts/audit/_harness.py), on the host backend (D09: level_zero on the in-tree
CPU driver, ZE_ENABLE_ALT_DRIVERS as scripts/test.sh sets it).

    build/venv/bin/python scripts/audit/budget_cases.py            # every case
    build/venv/bin/python scripts/audit/budget_cases.py D02 D04    # some

"Every report" means: every replay delivered (Profiler.delivered and a sink's count), in order
and contiguous (replay_index 0..N-1 per graph), each report with all its regions measured.
Choices where a row is vague: D03's "capped" is judged by the run working and its peak RSS
staying under 512 MiB (the audit saw 52 MiB); D06's error must be an accgraph error naming the
depth asked and the backend's maximum, raised where the ring is made (the first region of the
capture) and leaving the graph's capture closed; D07 keeps the last 10 reports, as the audit's
"last kept indices 2990-2999" says."""

from __future__ import annotations

import resource
import sys
import threading
import time

from _harness import bad, cases, check, clip, expect_error, main, ok, short

U64_MAX = 2**64 - 1


def graph(accgraph, prof, s, regions=1, nbytes=64):
    buf = accgraph.Buffer(s, nbytes)
    g = accgraph.Graph(s.backend)
    prof.attach(g)
    with g.capture(s):
        for i in range(regions):
            with prof.region(s, f"r{i}"):
                s.fill(buf, i % 256)
    return g


def replays_delivered(replays, regions=1, backend="host", **options):
    """`replays` replays of a graph of `regions` regions under Profiler(**options), flushed:
    (profiler, what a sink saw, the problems found)."""
    import accgraph

    prof = accgraph.Profiler(keep_reports=None, **options)
    seen = []
    prof.add_sink(lambda r: seen.append((r.replay_index, len(r),
                                         all(t.measurable for t in r))))
    s = accgraph.Stream(backend)
    g = graph(accgraph, prof, s, regions)
    for _ in range(replays):
        g.replay()
    s.synchronize()
    prof.flush()
    problems = []
    if prof.delivered != replays or len(seen) != replays:
        problems.append(f"delivered {prof.delivered}, the sink saw {len(seen)} of {replays}")
    if [i for i, _, _ in seen] != list(range(len(seen))):
        problems.append("not contiguous")
    if any(n != regions or not measured for _, n, measured in seen):
        problems.append("regions missing or unmeasurable")
    return prof, seen, problems


def D01(d):
    prof, seen, problems = replays_delivered(300, marker_memory=0)
    check(not problems, f"{len(seen)}/300, ring_waits {prof.ring_waits}"
          f"{': ' + '; '.join(problems) if problems else ''}")


def out_of_range(option, value):
    import accgraph

    msg = expect_error(lambda: accgraph.Profiler(**{option: value}),
                       [f"Profiler: {option}", str(value), "give a whole number"])
    if "\n" in msg:
        bad(f"a multi-line message: {clip(msg)}")
    ok(clip(msg, 150))


def D02(d):
    out_of_range("marker_memory", -1)


def D03(d):
    prof, seen, problems = replays_delivered(100, marker_memory=U64_MAX)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    check(not problems and rss < 512, f"{len(seen)}/100, max RSS {rss:.0f} MiB"
          f"{': ' + '; '.join(problems) if problems else ''}")


def D04(d):
    out_of_range("marker_memory", 2**64)


def D05(d):
    out_of_range("ring_depth", -1)


def D06(d):
    import accgraph

    prof = accgraph.Profiler(ring_depth=10**9)
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, 64)
    g = accgraph.Graph("host")
    prof.attach(g)
    try:
        with g.capture(s):
            with prof.region(s, "r"):
                s.fill(buf, 1)
        bad("ring_depth 10^9 accepted")
    except accgraph.Error as e:
        message = str(e)
        if "1000000000" not in message or "maximum" not in message:
            bad(f"unclear: {short(e)}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    check(not s.is_capturing, f"{clip(message, 170)}"
          f"{'' if not s.is_capturing else '; the stream is still capturing'}")


def D07(d):
    import accgraph

    prof = accgraph.Profiler(marker_memory=1, keep_reports=10)
    count = [0]
    prof.add_sink(lambda r: count.__setitem__(0, count[0] + (len(r) == 500)))
    s = accgraph.Stream("host")
    g = graph(accgraph, prof, s, regions=500)
    for _ in range(3000):
        g.replay()
    s.synchronize()
    prof.flush()
    kept = [r.replay_index for r in prof.reports()]
    check(prof.delivered == count[0] == 3000 and kept == list(range(2990, 3000)),
          f"{prof.delivered}/3000 ({count[0]} with 500 regions), ring_waits {prof.ring_waits}, "
          f"last kept indices {kept[0] if kept else None}-{kept[-1] if kept else None}")


def D08(d):
    # "far ahead of collection": 20,000 replays, no flush until the end, every report kept.
    prof, seen, problems = replays_delivered(20_000, marker_memory=64)
    kept = [r.replay_index for r in prof.reports()]
    if kept != list(range(20_000)):
        problems.append(f"reports() kept {len(kept)}, contiguous {kept == sorted(kept)}")
    check(not problems, f"{len(seen)}/20000, contiguous, ring_waits {prof.ring_waits}"
          f"{': ' + '; '.join(problems) if problems else ''}")


def D09(d):
    import accgraph

    info = {b.name: b for b in accgraph.backends()}.get("level_zero")
    if info is None or not info.available:
        bad(f"level_zero unavailable: {info.reason if info else 'not built'} (set "
            "ZE_ENABLE_ALT_DRIVERS to build/lib/libze_accgraph_cpu.so)")
    prof, seen, problems = replays_delivered(400, backend="level_zero", marker_memory=8)
    check(not problems, f"{len(seen)}/400 on level_zero, ring_waits {prof.ring_waits}"
          f"{': ' + '; '.join(problems) if problems else ''}")


def D10(d):
    import accgraph

    prof = accgraph.Profiler(ring_depth=1, background_collector=True, keep_reports=None)
    graphs, errors = [], []
    for _ in range(3):
        s = accgraph.Stream("host")
        graphs.append((s, graph(accgraph, prof, s)))

    def replay(s, g):
        try:
            for _ in range(1000):
                g.replay()
            s.synchronize()
        except Exception as e:  # noqa: BLE001
            errors.append(short(e))

    threads = [threading.Thread(target=replay, args=pair) for pair in graphs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    prof.flush()
    per_graph = {}
    for r in prof.reports():
        per_graph.setdefault(r.graph_id, []).append(r.replay_index)
    contiguous = all(v == list(range(1000)) for v in per_graph.values()) and len(per_graph) == 3
    check(not errors and prof.delivered == 3000 and contiguous,
          f"{prof.delivered}/3000, contiguous per graph {contiguous}"
          f"{', errors ' + str(errors[:2]) if errors else ''}")


def D11(d):
    import accgraph

    prof = accgraph.Profiler(delivery="immediate", marker_memory=8, keep_reports=None)
    s = accgraph.Stream("host")
    g = graph(accgraph, prof, s)
    for _ in range(500):
        g.replay()
    s.synchronize()
    deadline = time.monotonic() + 10
    while prof.delivered < 500 and time.monotonic() < deadline:
        time.sleep(0.01)
    check(prof.delivered == 500, f"{prof.delivered}/500 without flush")


if __name__ == "__main__":
    sys.exit(main("marker budget / ring", cases(globals()), __file__))
