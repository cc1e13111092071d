"""Re-runs the threads / exit / exporters cases (F01-F11) of the 2026-11-28 reliability audit,
each in its own process (scripts/audit/_harness.py), on the host backend (F11: vulkan on
lavapipe). The exit cases (F03, F04) and the ones judged by what reaches stderr or by a
hang of their own (F06, F08, F10) run a script in a fresh interpreter.

    build/venv/bin/python scripts/audit/threads_cases.py            # every case
    build/venv/bin/python scripts/audit/threads_cases.py F04 F06    # some

Choices where a row is vague:
- F01: 4 threads replay a graph each (500 replays) while a fifth loops flush/stats/reports;
  every replay is delivered, and per graph in replay order 0..499;
- F02: the graph's replays wait for the device (ring_depth=1, an 8 MiB fill), so the two
  threads overlap: at least one replay is refused with InvalidStateError, no other error, and
  what is delivered is exactly the replays that succeeded;
- F04: three runs, each exits 0 with no terminate/fatal error (the crash came on every run);
- F05 / F06: the sink's call either works or is refused (InvalidStateError, logged); flush()
  returns, and every replay made before the last flush is delivered;
- F07: each path gives an OSError of the right kind (or InvalidArgumentError) whose message
  names the path and says what to do ('' included);
- F09: the row expected every entry timed; since then the semantics of one stream's regions
  from several threads were decided (issue 44 item 3, Note [Regions out of order]): an entry
  while another thread's region is open on the stream raises REGION_ORDER. The case checks
  that rule: every entry is timed once or refused so, none is lost and nothing else is raised;
- F10: the sink's exception is logged (its message reaches stderr) and delivery goes on."""

from __future__ import annotations

import errno
import sys
import threading

from _harness import bad, cases, check, clip, crashed, in_threads, main, ok, python, short


def script(d, text, *args, timeout=60):
    p = d / "script.py"
    p.write_text(text)
    return python(p, *args, timeout=timeout)


def timed_graph(accgraph, prof, s, nbytes=64, regions=1):
    buf = accgraph.Buffer(s, nbytes)
    g = accgraph.Graph(s.backend)
    prof.attach(g)
    with g.capture(s):
        for i in range(regions):
            with prof.region(s, f"r{i}"):
                s.fill(buf, 1)
    return g



def F01(d):
    import accgraph

    prof = accgraph.Profiler(keep_reports=None)
    order = {}
    prof.add_sink(lambda r: order.setdefault(r.graph_id, []).append(r.replay_index))
    pairs = []
    for _ in range(4):
        s = accgraph.Stream("host")
        pairs.append((s, timed_graph(accgraph, prof, s)))
    done = threading.Event()

    def replayer(s, g):
        def run():
            for _ in range(500):
                g.replay()
            s.synchronize()
        return run

    def reader():
        while not done.is_set():
            prof.flush()
            prof.stats()
            prof.reports()

    threads, errors = in_threads([replayer(*p) for p in pairs])
    readers, reader_errors = in_threads([reader])
    for t in threads:
        t.join()
    done.set()
    readers[0].join()
    prof.flush()
    contiguous = len(order) == 4 and all(v == list(range(500)) for v in order.values())
    problems = [short(e) for e in errors + reader_errors]
    check(not problems and prof.delivered == 2000 and contiguous,
          f"{prof.delivered}/2000, contiguous per graph {contiguous}"
          f"{', errors ' + str(problems[:2]) if problems else ''}")


def F02(d):
    import accgraph

    prof = accgraph.Profiler(ring_depth=1, keep_reports=None)
    s = accgraph.Stream("host")
    g = timed_graph(accgraph, prof, s, nbytes=8 << 20)
    succeeded, refused, other = [0, 0], [], []
    start = threading.Barrier(2)

    def replayer(k):
        def run():
            start.wait()
            for _ in range(100):
                try:
                    g.replay()
                    succeeded[k] += 1
                except accgraph.InvalidStateError as e:
                    refused.append(str(e))
                except Exception as e:  # noqa: BLE001
                    other.append(short(e))
        return run

    threads, errors = in_threads([replayer(0), replayer(1)])
    for t in threads:
        t.join()
    s.synchronize()
    prof.flush()
    total = sum(succeeded)
    check(not errors and not other and refused and prof.delivered == total,
          f"{len(refused)} refused ({clip(refused[0], 80) if refused else '-'}), delivered "
          f"{prof.delivered} == successful replays {total}"
          f"{', other errors ' + str(other[:2]) if other else ''}")


F03_SCRIPT = """
import accgraph
prof = accgraph.Profiler()
prof.add_sink(lambda report: print("report", report.replay_index))
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 64)
g = accgraph.Graph("host")
prof.attach(g)
with g.capture(s):
    with prof.region(s, "r"):
        s.fill(buf, 1)
for _ in range(300):
    g.replay()
print("exiting", flush=True)
"""


def F03(d):
    done = script(d, F03_SCRIPT)
    lines = done.stdout.splitlines()
    reports = [x for x in lines if x.startswith("report ")]
    check(done.returncode == 0 and reports == [f"report {i}" for i in range(300)] and
          not crashed(done), f"exit {done.returncode}, the sink saw {len(reports)}/300 at exit"
          f"{', stderr ' + clip(done.stderr, 80) if done.stderr else ''}")


F04_SCRIPT = """
import threading, time
import accgraph
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 8 << 20)  # each fill takes a while: the replays wait for the ring
prof = accgraph.Profiler(ring_depth=1)
g = accgraph.Graph("host")
prof.attach(g)
with g.capture(s):
    with prof.region(s, "r"):
        s.fill(buf, 1)
started = threading.Event()
def loop():
    started.set()
    while True:
        g.replay()
threading.Thread(target=loop, daemon=True).start()
started.wait()
time.sleep(0.05)
print("exiting", flush=True)
"""


def F04(d):
    for run in range(3):
        done = script(d, F04_SCRIPT)
        if done.returncode != 0 or crashed(done) or done.stdout != "exiting\n":
            bad(f"run {run + 1}: exit {done.returncode}: {clip(done.stderr, 150)}")
    ok("3 runs: exit 0, nothing on stderr about a terminate")


def F05(d):
    import accgraph

    prof = accgraph.Profiler()
    outcomes = []

    def sink(report):
        try:
            prof.flush()
            outcomes.append("flushed")
        except accgraph.InvalidStateError as e:
            outcomes.append(f"refused: {e}")

    prof.add_sink(sink)
    s = accgraph.Stream("host")
    g = timed_graph(accgraph, prof, s)
    for _ in range(50):
        g.replay()
    s.synchronize()
    prof.flush()
    check(prof.delivered == 50 and len(outcomes) == 50,
          f"{prof.delivered}/50, the sink's flush: {clip(outcomes[0], 90) if outcomes else '-'}")


F06_SCRIPT = """
import accgraph
prof = accgraph.Profiler()
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 64)
g = accgraph.Graph("host")
prof.attach(g)
with g.capture(s):
    with prof.region(s, "r"):
        s.fill(buf, 1)
outcomes = []
def sink(report):
    try:
        g.replay()  # the graph whose report this is, from inside flush()
        outcomes.append("replayed")
    except accgraph.InvalidStateError as e:
        outcomes.append("refused: " + str(e))
prof.add_sink(sink)
g.replay()
for _ in range(3):
    prof.flush()
print("delivered", prof.delivered, "replays", g.replay_count, flush=True)
print(outcomes[0] if outcomes else "-", flush=True)
"""


def F06(d):
    done = script(d, F06_SCRIPT, timeout=60)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines:
        bad(f"exit {done.returncode}: {clip(done.stderr, 150)}")
    words = lines[0].split()
    delivered, replays = int(words[1]), int(words[3])
    # Every replay made before the last flush() began is delivered: all but the sink's last.
    check(delivered >= 1 and replays - delivered <= 1,
          f"flush() returned: delivered {delivered} of {replays} replays; the sink's replay: "
          f"{clip(lines[1] if len(lines) > 1 else '', 90)}")


def F07(d):
    import accgraph

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    g = timed_graph(accgraph, prof, s)
    g.replay()
    s.synchronize()
    prof.flush()
    got, messages = [], []
    for path, kind in ((d / "missing" / "r.csv", errno.ENOENT), (d, errno.EISDIR),
                       ("", errno.ENOENT), ("/dev/full", errno.ENOSPC)):
        try:
            prof.write_csv(path)
            bad(f"{path!r}: no error")
        except OSError as e:
            if e.errno != kind or f"'{path}'" not in str(e) or len(str(e)) < 40:
                bad(f"{path!r}: {short(e)}")
            got.append(type(e).__name__)
            messages.append(str(e))
        except accgraph.InvalidArgumentError as e:
            if f"'{path}'" not in str(e):
                bad(f"{path!r}: {short(e)}")
            got.append("InvalidArgumentError")
            messages.append(str(e))
        except Exception as e:  # noqa: BLE001
            bad(f"{path!r}: raw {short(e)}")
    ok(" / ".join(got) + f", e.g. {clip(messages[2], 110)}")


F08_SCRIPT = """
import os, resource, signal, sys
import accgraph
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
out_dir = sys.argv[1]
prof = accgraph.Profiler(keep_reports=None)
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 64)
g = accgraph.Graph("host")
prof.attach(g)
with g.capture(s):
    for i in range(10):
        with prof.region(s, "r%d" % i):
            s.fill(buf, 1)
for _ in range(500):
    g.replay()
s.synchronize()
prof.flush()
old = b"old content\\n" * 100
for name in ("r.csv", "t.json"):
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(old)
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
for name, write in (("r.csv", prof.write_csv), ("t.json", prof.write_chrome_trace)):
    path = os.path.join(out_dir, name)
    try:
        write(path)
        print(name, "written")
    except Exception as e:
        with open(path, "rb") as f:
            kept = f.read() == old
        print(name, type(e).__name__, "kept" if kept else "LOST", str(e))
"""


def F08(d):
    out = d / "out"
    out.mkdir()
    done = script(d, F08_SCRIPT, out)
    lines = done.stdout.splitlines()
    left = [p.name for p in out.iterdir() if p.name not in ("r.csv", "t.json")]
    good = len(lines) == 2 and all(x.split()[2] == "kept" and "left as it was" in x
                                   for x in lines if len(x.split()) > 2)
    check(done.returncode == 0 and good and not left,
          f"{'; '.join(clip(x, 90) for x in lines) or clip(done.stderr)}; left behind {left}")


def F09(d):
    import accgraph

    s = accgraph.Stream("host")
    prof = accgraph.Profiler(keep_reports=None)
    shared = prof.region(s, "shared")
    buf = accgraph.Buffer(s, 64)
    timed, refused, other = [], [], []

    def work():
        for i in range(200):
            try:
                with shared:
                    s.fill(buf, i % 256)
                timed.append(1)
            except accgraph.Error as e:
                (refused if e.reason.name == "REGION_ORDER" and "another thread" in str(e)
                 else other).append(e)

    threads, errors = in_threads([work] * 4)
    for t in threads:
        t.join()
    s.synchronize()
    prof.flush()
    timings = [t for r in prof.reports() for t in r]
    problems = [short(e) for e in errors + other]
    check(not problems and len(timed) + len(refused) == 800 and len(timings) == len(timed) and
          all(t.name == "shared" for t in timings),
          f"{len(timings)} region timings in {len(prof.reports())} reports for {len(timed)} "
          f"entries that did not raise, {len(refused)} refused (REGION_ORDER, another thread)"
          f"{', errors ' + str(problems[:2]) if problems else ''}")


F10_SCRIPT = """
import accgraph
prof = accgraph.Profiler()
calls = [0]
def sink(report):
    calls[0] += 1
    raise ValueError("the sink fails on purpose")
prof.add_sink(sink)
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 64)
g = accgraph.Graph("host")
prof.attach(g)
with g.capture(s):
    with prof.region(s, "r"):
        s.fill(buf, 1)
for _ in range(30):
    g.replay()
s.synchronize()
prof.flush()
print(calls[0], prof.delivered, flush=True)
"""


def F10(d):
    done = script(d, F10_SCRIPT)
    logged = done.stderr.count("the sink fails on purpose")
    check(done.returncode == 0 and done.stdout.split() == ["30", "30"] and logged >= 1,
          f"exit {done.returncode}, called/delivered {done.stdout.split()}, logged {logged} "
          f"time(s): {clip(done.stderr, 80)}")


def F11(d):
    import accgraph

    info = {b.name: b for b in accgraph.backends()}.get("vulkan")
    if info is None or not info.available:
        bad(f"the vulkan backend is not available: {info.reason if info else 'not built'}")
    prof = accgraph.Profiler(keep_reports=None)
    order = []
    prof.add_sink(lambda r: order.append(r.replay_index))
    s = accgraph.Stream("vulkan")
    g = timed_graph(accgraph, prof, s)
    done = threading.Event()

    def flusher():
        while not done.is_set():
            prof.flush()

    threads, errors = in_threads([flusher])
    for _ in range(1000):
        g.replay()
    s.synchronize()
    done.set()
    threads[0].join()
    prof.flush()
    check(not errors and prof.delivered == 1000 and order == list(range(1000)),
          f"{prof.delivered}/1000, contiguous {order == list(range(1000))}"
          f"{', errors ' + str([short(e) for e in errors[:2]]) if errors else ''}")


if __name__ == "__main__":
    sys.exit(main("threads, exit, exporters", cases(globals()), __file__))
