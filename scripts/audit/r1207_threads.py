"""Re-runs the threads / fork / exit cases (X01-X10) of the 2026-12-07 reliability audit
(area (h)), each in its own process
(scripts/audit/_harness.py), on the host backend. The exit, signal and fork cases (X03-X07,
X09, X10) run a script in a fresh interpreter and judge it by its exit status, its stderr (a
C++ terminate, a fatal Python error) and what it wrote.

    build/venv/bin/python scripts/audit/r1207_threads.py            # every case
    build/venv/bin/python scripts/audit/r1207_threads.py X03 X06    # some

Choices where a row is vague:
- X01: 4 threads x 2,000 iterations of an outer region around an inner one, each thread on its
  stream; the fifth thread's last stats CSV reads back (module_table) and its last HTML report
  ends with </html>;
- X02: every region whose exit raised nothing is counted in stats() (by its name, wherever it
  nests); regions refused with an accgraph error are allowed;
- X03: the stats thread is a daemon thread looping prof.stats(); 3 runs;
- X04: the files left on disk after the exit are whole (the HTML ends with </html>, the CSV
  reads back); temporaries a killed writer left are listed in the evidence, not judged;
- X06: the issue allowed "a clear error in the child" (Note [Profiler after fork]): each of
  20 children ends within 10 s, and the inherited Profiler either times, flushes and writes
  the CSV, or refuses at once with an InvalidStateError saying to make a new Profiler in the
  child, after which a new Profiler there does it; a hang or another error is NOT;
- X09: SIGINT after 3 s; the program catches KeyboardInterrupt and calls sys.exit(130), as the
  audit's did: exit 130 within 15 s, no abort."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from _harness import (bad, cases, check, clip, crashed, in_threads, main, ok, python, short,
                      temporaries)


def script(d, text, *args, timeout=60):
    p = d / "script.py"
    p.write_text(text)
    return python(p, *args, timeout=timeout, cwd=d)



def X01(d):
    import accgraph
    import accgraph.torch

    prof = accgraph.Profiler()
    done = threading.Event()
    written = []

    def timer(k):
        def run():
            s = accgraph.Stream("host")
            for _ in range(2000):
                with prof.region(s, f"t{k}"):
                    with prof.region(s, "inner"):
                        pass
        return run

    def reader():
        i = 0
        while not done.is_set():
            prof.flush()
            prof.write_stats_csv(d / "s.csv")
            prof.write_csv(d / "r.csv")
            accgraph.torch.write_html(prof, d / "r.html")
            accgraph.torch.compare(prof, d / "s.csv")
            accgraph.torch.module_table(prof)
            i += 1
        written.append(i)

    timers, errors = in_threads([timer(k) for k in range(4)])
    readers, reader_errors = in_threads([reader])
    for t in timers:
        t.join()
    done.set()
    readers[0].join()
    prof.flush()
    counts = {r.path: r.count for r in prof.stats()}
    want = {**{f"t{k}": 2000 for k in range(4)}, **{f"t{k}/inner": 2000 for k in range(4)}}
    whole = (d / "r.html").read_text().rstrip().endswith("</html>")
    try:
        accgraph.torch.module_table(d / "s.csv")
        csv_whole = True
    except Exception as e:  # noqa: BLE001
        csv_whole = short(e)
    problems = [short(e) for e in errors + reader_errors]
    check(not problems and counts == want and whole and csv_whole is True,
          f"counts as timed {counts == want}, {written} rounds of the fifth thread, last HTML "
          f"whole {whole}, last CSV {csv_whole}{f', errors {problems[:2]}' if problems else ''}")


def X02(d):
    import accgraph

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    done = threading.Event()
    exited, refused = [0] * 4, []

    def worker(k):
        def run():
            for _ in range(1500):
                region = prof.region(s, f"w{k}")
                try:
                    with region:
                        sum(range(50))
                    exited[k] += 1
                except accgraph.Error as e:
                    refused.append(f"{e.reason.name}: {e}")
        return run

    def flusher():
        while not done.is_set():
            prof.flush()

    workers, errors = in_threads([worker(k) for k in range(4)])
    flushers, flush_errors = in_threads([flusher])
    for t in workers:
        t.join()
    done.set()
    flushers[0].join()
    s.synchronize()
    prof.flush()
    counted = {f"w{k}": 0 for k in range(4)}
    for r in prof.stats():
        name = r.path.rsplit("/", 1)[-1]
        if name in counted:
            counted[name] += r.count
    lost = {f"w{k}": exited[k] - counted[f"w{k}"] for k in range(4)}
    problems = [short(e) for e in errors + flush_errors]
    check(not problems and all(v == 0 for v in lost.values()),
          f"{sum(exited)} exited without an error, {sum(counted.values())} counted, "
          f"{len(refused)} refused{f' ({clip(refused[0], 60)})' if refused else ''}"
          f"{f', errors {problems[:2]}' if problems else ''}")


def exits_cleanly(d, text, runs=1, timeout=60, expect_stdout=None):
    """Runs `text` `runs` times: each exits 0 within `timeout` with no terminate or fatal error
    (bad() otherwise); the evidence: how many runs printed nanobind's leak report (objects a
    daemon thread still held at exit: not an error the rows name)."""
    leaks = 0
    for run in range(runs):
        done = script(d, text, timeout=timeout)
        if done.returncode != 0 or crashed(done) or (
                expect_stdout is not None and done.stdout != expect_stdout):
            bad(f"run {run + 1}: exit {done.returncode}: {clip(done.stderr or done.stdout, 160)}")
        leaks += "nanobind: leaked" in done.stderr
    return f"{runs} run(s): exit 0, no terminate, no abort ({leaks} with nanobind's leak report)"


X03_SCRIPT = """
import accgraph, threading, time
prof = accgraph.Profiler()
def work():
    s = accgraph.Stream("host")
    while True:
        with prof.region(s, "step"):
            with prof.region(s, "inner"):
                sum(range(20000))
def stats():
    while True:
        prof.stats()
for _ in range(3):
    threading.Thread(target=work, daemon=True).start()
threading.Thread(target=stats, daemon=True).start()
time.sleep(0.3)
print("exiting", flush=True)
"""


def X03(d):
    ok(exits_cleanly(d, X03_SCRIPT, runs=3, expect_stdout="exiting\n"))


X04_SCRIPT = """
import accgraph, accgraph.torch, threading, time
prof = accgraph.Profiler()
s = accgraph.Stream("host")
with prof.region(s, "root"):
    for i in range(3000):
        with prof.region(s, "m%d" % i):
            pass
prof.flush()
started = threading.Event()
def write():
    while True:
        accgraph.torch.write_html(prof, "r.html")
        prof.write_stats_csv("s.csv")
        started.set()
threading.Thread(target=write, daemon=True).start()
started.wait()
time.sleep(0.2)
print("exiting", flush=True)
"""


def X04(d):
    import accgraph.torch

    ran = exits_cleanly(d, X04_SCRIPT, expect_stdout="exiting\n")
    whole = (d / "r.html").read_text().rstrip().endswith("</html>")
    try:
        rows = accgraph.torch.stats_by_context(d / "s.csv")
        csv_whole = sum(len(v) for v in rows.values()) == 3001
    except Exception as e:  # noqa: BLE001
        csv_whole = short(e)
    check(whole and csv_whole is True, f"{ran}; HTML whole {whole}, CSV whole {csv_whole}; "
          f"temporaries left {temporaries(d)}")


X05_SCRIPT = """
import accgraph, threading, time
prof = accgraph.Profiler(background_collector=True)
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 1 << 20)
g = accgraph.Graph("host")
prof.attach(g)
with g.capture(s):
    with prof.region(s, "r"):
        s.fill(buf, 1)
started = threading.Event()
def replay():
    started.set()
    while True:
        g.replay()
def flush():
    while True:
        prof.flush()
threading.Thread(target=replay, daemon=True).start()
threading.Thread(target=flush, daemon=True).start()
started.wait()
time.sleep(0.3)
print("exiting", flush=True)
"""


def X05(d):
    ok(exits_cleanly(d, X05_SCRIPT, runs=3, timeout=30, expect_stdout="exiting\n"))


X06_SCRIPT = r'''
import os, sys, time, accgraph
prof = accgraph.Profiler()
s = accgraph.Stream("host")
buf = accgraph.Buffer(s, 64)
with prof.region(s, "parent"):
    s.fill(buf, 1)
prof.flush()
outcomes = []
for i in range(20):
    with prof.region(s, "busy"):  # the stream's worker runs while the parent forks
        s.fill(buf, 1)
        pid = os.fork()
        if pid == 0:
            code = 9
            try:
                child = accgraph.Stream("host")
                try:
                    with prof.region(child, "inherited"):
                        child.fill(accgraph.Buffer(child, 64), 2)
                    prof.flush()
                    prof.write_csv("child%d.csv" % i)
                    code = 0  # the inherited Profiler works
                except accgraph.InvalidStateError as e:
                    if "fork" in str(e) and "new Profiler" in str(e):
                        fresh = accgraph.Profiler()
                        with fresh.region(child, "own"):
                            child.fill(accgraph.Buffer(child, 64), 2)
                        fresh.flush()
                        fresh.write_csv("child%d.csv" % i)
                        code = 1  # refused clearly; a new Profiler works
                    else:
                        print("unclear:", e, flush=True)
                        code = 2
            finally:
                os._exit(code)
        deadline = time.monotonic() + 10
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                outcomes.append(os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                outcomes.append("hung")
                break
            time.sleep(0.01)
print(" ".join(map(str, outcomes)), flush=True)
'''


def X06(d):
    done = script(d, X06_SCRIPT, timeout=300)
    outcomes = done.stdout.split()[-20:]
    written = len(list(d.glob("child*.csv")))
    worked, refused = outcomes.count("0"), outcomes.count("1")
    check(done.returncode == 0 and worked + refused == 20 and written == 20,
          f"20 forks: {worked} timed with the inherited Profiler, {refused} refused clearly and "
          f"timed with a new one, {outcomes.count('hung')} hung, others "
          f"{[o for o in outcomes if o not in ('0', '1')]}; {written} CSVs"
          f"{f'; {clip(done.stderr, 80)}' if done.returncode else ''}")


X07_SCRIPT = """
import accgraph, gc, threading
prof = accgraph.Profiler()
s = accgraph.Stream("host")
opened, dropped = threading.Event(), threading.Event()
outcome = []
def work():
    region = prof.region(s, "open")
    region.__enter__()
    opened.set()
    dropped.wait()
    try:
        region.__exit__(None, None, None)
        outcome.append("ended")
    except accgraph.Error as e:
        outcome.append("accgraph error: " + str(e))
    except Exception as e:
        outcome.append("other: %s: %s" % (type(e).__name__, e))
t = threading.Thread(target=work)
t.start()
opened.wait()
del prof
gc.collect()
dropped.set()
t.join()
print(outcome[0], flush=True)
"""


def X07(d):
    done = script(d, X07_SCRIPT)
    out = done.stdout.strip()
    check(done.returncode == 0 and not crashed(done) and
          (out == "ended" or out.startswith("accgraph error:")),
          f"exit {done.returncode}: {clip(out or done.stderr, 170)}")


def X08(d):
    import accgraph

    path = d / "shared.csv"
    header = ",".join(accgraph.stats_csv_columns())
    done = threading.Event()
    writes = [0] * 8
    profs = []
    for k in range(8):
        prof = accgraph.Profiler()
        s = accgraph.Stream("host")
        for i in range(50 + k):
            with prof.region(s, f"writer{k}_{i}"):
                pass
        prof.flush()
        profs.append(prof)

    def writer(k):
        def run():
            for _ in range(100):
                profs[k].write_stats_csv(path)
                writes[k] += 1
        return run

    reads, torn = [0], []

    def reader():
        while not done.is_set():
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            reads[0] += 1
            lines = text.split("\n")
            owners = {x.split(",")[0].split("_")[0] for x in lines[1:] if x}
            k = int(next(iter(owners))[6:]) if len(owners) == 1 else -1
            if (lines[0] != header or lines[-1] != "" or len(owners) != 1 or
                    len(lines) != 50 + k + 2):
                torn.append(text[:60])

    writers, errors = in_threads([writer(k) for k in range(8)])
    readers, reader_errors = in_threads([reader])
    for t in writers:
        t.join()
    done.set()
    readers[0].join()
    problems = [short(e) for e in errors + reader_errors]
    check(not problems and not torn and reads[0] > 0 and not temporaries(d),
          f"{sum(writes)} writes, {reads[0]} reads, {len(torn)} not whole, temporaries "
          f"{temporaries(d)}{f', errors {problems[:2]}' if problems else ''}")


X09_SCRIPT = """
import accgraph, accgraph.torch, sys, threading
prof = accgraph.Profiler()
def work():
    s = accgraph.Stream("host")
    while True:
        with prof.region(s, "step"):
            sum(range(5000))
for _ in range(4):
    threading.Thread(target=work, daemon=True).start()
print("running", flush=True)
try:
    while True:
        prof.flush()
        accgraph.torch.write_html(prof, "r.html")
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    sys.exit(130)
"""


def X09(d):
    (d / "x09.py").write_text(X09_SCRIPT)
    child = subprocess.Popen([sys.executable, str(d / "x09.py")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=d)
    child.stdout.readline()
    time.sleep(3)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = child.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        bad("SIGINT: still running after 15 s")
    seconds = time.monotonic() - sent
    aborted = "terminate called" in err or "Fatal Python error" in err
    check(child.returncode == 130 and "INTERRUPTED" in out and not aborted,
          f"exit {child.returncode} {seconds:.1f} s after SIGINT"
          f"{f': {clip(err, 120)}' if child.returncode != 130 or aborted else ''}")


X10_SCRIPT = """
import accgraph, threading, time
prof = accgraph.Profiler()
def work():
    s = accgraph.Stream("host")
    n = 0
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        with prof.region(s, "step"):
            pass
        n += 1
    prof.flush()
    prof.write_stats_csv("s.csv")
    print("timed", n, flush=True)
threading.Thread(target=work).start()
"""


def X10(d):
    import accgraph.torch

    done = script(d, X10_SCRIPT)
    words = done.stdout.split()
    if done.returncode != 0 or crashed(done) or len(words) != 2:
        bad(f"exit {done.returncode}: {clip(done.stderr or done.stdout, 160)}")
    counted = sum(r["count"] for rows in accgraph.torch.stats_by_context(d / "s.csv").values()
                  for r in rows if r["path"] == "step")
    check(counted == int(words[1]), f"exit 0; {counted} of {words[1]} regions in the CSV")


if __name__ == "__main__":
    sys.exit(main("threads, fork, exit (X)", cases(globals()), __file__))
