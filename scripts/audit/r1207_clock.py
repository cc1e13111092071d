"""Re-runs the host clock offset cases (K01-K16) and the merge-traces cases (M01-M17) of the
2026-12-07 reliability audit (area (c)), each in its
own process (scripts/audit/_harness.py).

    build/venv/bin/python scripts/audit/r1207_clock.py            # every case
    build/venv/bin/python scripts/audit/r1207_clock.py K13 M14    # some

K cases call accgraph.measure_host_clock_offset with fake transports (queues between two
threads, callbacks that return what the row names); K15 and K16 build a small C++ program
against the source tree's headers (what the install copies) and the release build's
libaccgraph. M cases run the real `accgraph merge-traces` of the release build
(build/bin/accgraph; ACCGRAPH_PROGRAM overrides) on rank traces written by the package
(host backend, Profiler.write_trace with rank, world_size, host and host_clock_offsets), so the
package must be built with Perfetto support. Limits (address space, descriptors) are set with
prlimit(1); the unreadable input of M12 is read as uid 65534.

Choices where a row is vague:
- K10, K11: refused with an accgraph error saying why, or an offset whose uncertainty is not a
  precise one (above 1 s);
- K12: the very exception object the callback raised reaches the caller;
- K13: with a transport that blocks forever, a call with timeout=1 raises TimeoutError within
  10 s, and a call with the defaults in a child process ends on SIGINT within 5 s
  (KeyboardInterrupt);
- M01, M08: the program's output names each rank's offsets (M01) or warns naming rank 1 and
  what to do (M08), exit 0;
- M06, M07: exit 1 within 60 s under `prlimit --as=1 GiB`, naming the file and the claimed
  length (M06) or that it is truncated (M07);
- M14, M15: exit 1 naming the rank's file and the offset, or exit 0 with a warning naming the
  rank and the offset (M15: the offset is what a rank 0 that answered 0 gives, its own clock
  when it measured, taken at the run's start as the review's value was; a warning about
  something else, such as the drift, is not one about the offset);
- M17: exit 1 or 2 (a usage error) with a message naming the output;
- M16: the inputs do not exist: the refusal must be about -o (what is checked first)."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

from _harness import (as_nobody, bad, cases, check, clip, crashed, cxx, device_env,
                      expect_error, main, ok, program, run, short)

# --- K: measure_host_clock_offset ---------------------------------------------------------------


def unused(*args):
    raise AssertionError("the transport was called")


def K01(d):
    import accgraph

    to_rank = [queue.Queue(), queue.Queue()]
    results, errors = [None, None], []

    def rank(k):
        try:
            results[k] = accgraph.measure_host_clock_offset(
                k, 2, lambda peer, value: to_rank[peer].put(value),
                lambda peer: to_rank[k].get(timeout=30), rounds=32)
        except Exception as e:  # noqa: BLE001
            errors.append(short(e))

    threads = [threading.Thread(target=rank, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors or None in results:
        bad(f"errors {errors}")
    r0, r1 = results
    check(r0.offset_ns == 0 and r0.uncertainty_ns == 0 and r1.uncertainty_ns > 0 and
          abs(r1.offset_ns) <= r1.uncertainty_ns,
          f"rank 0: {r0.offset_ns} +- {r0.uncertainty_ns}; rank 1: {r1.offset_ns} +- "
          f"{r1.uncertainty_ns} ns")


def K02(d):
    import accgraph

    r = accgraph.measure_host_clock_offset(0, 1, unused, unused)
    check(r.offset_ns == 0 and r.uncertainty_ns == 0, f"{r.offset_ns} +- {r.uncertainty_ns}")


def K03(d):
    import accgraph

    said = []
    for rank, world in ((2, 2), (-1, 2), (0, 0)):
        said.append(expect_error(lambda: accgraph.measure_host_clock_offset(
            rank, world, unused, unused), ["rank"]))
    ok(" / ".join(clip(s, 60) for s in said))


def K04(d):
    import accgraph

    said = [expect_error(lambda: accgraph.measure_host_clock_offset(
        1, 2, unused, unused, rounds=r), ["rounds", "100000"]) for r in (0, 1_000_000)]
    ok(clip(said[1], 150))


def K05(d):
    import accgraph

    said = [expect_error(lambda: accgraph.measure_host_clock_offset(
        1, 2, unused, unused, rounds=r), ["rounds", "100000"]) for r in (-1, 2**70)]
    ok(clip(said[0], 150))


def K06(d):
    import accgraph

    ok(clip(expect_error(lambda: accgraph.measure_host_clock_offset(
        2**40, 2, unused, unused), ["rank", str(2**40)]), 150))


def returning(value):
    import accgraph

    return lambda: accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: value,
                                                      rounds=4)


def receive_named(value, cls="TypeError"):
    said = expect_error(returning(value), ["receive"], cls)
    if "bad_cast" in said:
        bad(f"{value!r}: {clip(said, 150)}")
    return said


def K07(d):
    ok(clip(receive_named(None), 170))


def K08(d):
    said = [receive_named(v) for v in (b"\x01\x02", "123", 1.5)]
    ok(" / ".join(clip(s, 55) for s in said))


def K09(d):
    said = expect_error(returning(-5), ["receive", "2**64-1"])
    ok(clip(said, 170))


def refused_or_imprecise(receive):
    import accgraph

    try:
        r = accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, receive, rounds=16)
    except accgraph.Error as e:
        ok(f"{type(e).__name__}: {clip(str(e), 150)}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    check(r.uncertainty_ns > 10**9, f"offset {r.offset_ns} ns +- {r.uncertainty_ns} ns")


def K10(d):
    rng = random.Random(10)
    refused_or_imprecise(lambda p: rng.getrandbits(64))


def K11(d):
    refused_or_imprecise(lambda p: 0)


def K12(d):
    import accgraph

    raised = TimeoutError("the peer did not answer within 5 s")

    def receive(peer):
        raise raised

    try:
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, receive)
    except TimeoutError as e:
        check(e is raised, f"the same TimeoutError object: {e is raised}")
    except Exception as e:  # noqa: BLE001
        bad(f"{short(e)}")
    bad("no error")


K13_SCRIPT = """
import threading, accgraph
never = threading.Event()
print("waiting", flush=True)
try:
    accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: never.wait() and 1)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    raise SystemExit(130)
"""


def K13(d):
    import accgraph

    never = threading.Event()
    start = time.monotonic()
    try:
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None,
                                           lambda p: never.wait() and 1, timeout=1)
        bad("timeout=1: returned")
    except TimeoutError:
        timed_out = f"timeout=1: TimeoutError after {time.monotonic() - start:.1f} s"
        if time.monotonic() - start > 10:
            bad(timed_out)
    except Exception as e:  # noqa: BLE001
        bad(f"timeout=1: {short(e)}")
    finally:
        never.set()
    (d / "k13.py").write_text(K13_SCRIPT)
    child = subprocess.Popen([sys.executable, str(d / "k13.py")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    child.stdout.readline()
    time.sleep(2)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = child.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        bad(f"{timed_out}; with the defaults, SIGINT did not end it within 5 s")
    check(child.returncode == 130 and "KeyboardInterrupt" in out,
          f"{timed_out}; defaults + SIGINT: exit {child.returncode} after "
          f"{time.monotonic() - sent:.1f} s")


def K14(d):
    import accgraph

    ok(clip(expect_error(lambda: accgraph.measure_host_clock_offset(
        1, 2, None, lambda p: 1), ["send or receive"]), 160))


CXX_K15 = r"""
#include <accgraph/error.hpp>
#include <accgraph/host_clock.hpp>
#include <cstdint>
#include <cstdio>
using namespace accgraph;
using namespace accgraph::timing;
int check(const char* what, HostClockTransport t, int rank, int world, size_t rounds) {
  try {
    measure_host_clock_offset(rank, world, t, rounds);
    std::printf("%s | no error\n", what);
  } catch (const Error& e) {
    const bool invalid = e.code() == ErrorCode::InvalidArgument;
    std::printf("%s | %s | %s\n", what, invalid ? "invalid" : "other", e.what());
  } catch (const std::exception& e) {
    std::printf("%s | raw | %s\n", what, e.what());
  }
  return 0;
}
int main() {
  HostClockTransport t{[](int, uint64_t) {}, [](int) { return uint64_t{1}; }};
  check("rank 5 of 2", t, 5, 2, 64);
  check("rounds 0", t, 1, 2, 0);
  check("rounds SIZE_MAX", t, 1, 2, SIZE_MAX);
  HostClockTransport no_send{nullptr, t.receive};
  check("no send", no_send, 1, 2, 64);
}
"""


def K15(d):
    (d / "k15.cpp").write_text(CXX_K15)
    exe = cxx(d, [d / "k15.cpp"], "k15")
    done = run([exe])
    lines = [x.split(" | ") for x in done.stdout.splitlines()]
    needles = {"rank 5 of 2": "rank", "rounds 0": "rounds", "rounds SIZE_MAX": "rounds",
               "no send": "send"}
    wrong = [x[0] for x in lines if len(x) != 3 or x[1] != "invalid" or needles[x[0]] not in x[2]]
    check(done.returncode == 0 and len(lines) == 4 and not wrong,
          f"{len(lines)}/4 InvalidArgument{f', wrong: {wrong}' if wrong else ''}: "
          f"{clip(done.stdout.splitlines()[-1] if lines else done.stderr, 120)}")


CXX_K16 = r"""
#include <accgraph/host_clock.hpp>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
using namespace accgraph::timing;
struct Queue {
  std::mutex m;
  std::condition_variable cv;
  std::deque<uint64_t> q;
  void put(uint64_t v) { { std::lock_guard<std::mutex> l(m); q.push_back(v); } cv.notify_one(); }
  uint64_t get() {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return !q.empty(); });
    uint64_t v = q.front(); q.pop_front(); return v;
  }
};
int main() {
  try {
    measure_host_clock_offset(
        1, 2, {[](int, uint64_t) {},
               [](int) -> uint64_t { throw std::runtime_error("link down"); }});
    std::printf("throw | none\n");
  } catch (const std::runtime_error& e) {
    std::printf("throw | %s\n", e.what());
  }
  HostClockOffset one = measure_host_clock_offset(
      0, 1, {[](int, uint64_t) { throw std::logic_error("send called"); },
             [](int) -> uint64_t { throw std::logic_error("receive called"); }});
  std::printf("world1 | %lld %llu\n", (long long)one.offset_ns,
              (unsigned long long)one.uncertainty_ns);
  Queue to[2];
  HostClockOffset got[2];
  std::thread ranks[2];
  for (int k = 0; k < 2; ++k)
    ranks[k] = std::thread([&, k] {
      got[k] = measure_host_clock_offset(
          k, 2,
          {[&](int peer, uint64_t v) { to[peer].put(v); }, [&, k](int) { return to[k].get(); }},
          32);
    });
  for (auto& t : ranks) t.join();
  std::printf("two | %lld %llu | %lld %llu\n", (long long)got[0].offset_ns,
              (unsigned long long)got[0].uncertainty_ns, (long long)got[1].offset_ns,
              (unsigned long long)got[1].uncertainty_ns);
}
"""


def K16(d):
    (d / "k16.cpp").write_text(CXX_K16)
    exe = cxx(d, [d / "k16.cpp"], "k16")
    done = run([exe], timeout=60)
    lines = dict(x.split(" | ", 1) for x in done.stdout.splitlines() if " | " in x)
    if done.returncode != 0 or len(lines) != 3:
        bad(f"exit {done.returncode}: {clip(done.stdout + done.stderr, 150)}")
    r0, r1 = (tuple(map(int, part.split())) for part in lines["two"].split(" | "))
    check(lines["throw"] == "link down" and lines["world1"] == "0 0" and r0 == (0, 0) and
          r1[1] > 0 and abs(r1[0]) <= r1[1],
          f"throw: {lines['throw']!r}; world 1: {lines['world1']}; two ranks: {lines['two']}")


# --- M: accgraph merge-traces ------------------------------------------------------------------


def traces(d, offsets_per_rank, world_size=None, hosts=None, name="rank"):
    """One .pftrace per rank (ranks 0..n-1) of a small host-backend run, each with its host
    ("node<rank>" unless `hosts` says) and host clock offsets (HostClockOffset arguments)."""
    import accgraph

    if not accgraph.perfetto_supported():
        bad("package built without Perfetto support: case not run")
    s = accgraph.Stream("host")
    prof = accgraph.Profiler()
    buf = accgraph.Buffer(s, 64)
    g = accgraph.Graph("host")
    prof.attach(g)
    with g.capture(s):
        with prof.region(s, "step"):
            s.fill(buf, 1)
    for _ in range(3):
        g.replay()
    s.synchronize()
    prof.flush()
    clock = accgraph.calibrate_clock(s)
    paths = []
    for rank, offsets in enumerate(offsets_per_rank):
        path = d / f"{name}{rank}.pftrace"
        prof.write_trace(path, rank=rank, world_size=world_size or len(offsets_per_rank),
                         host=(hosts or [f"node{r}" for r in range(len(offsets_per_rank))])[rank],
                         clocks=[clock],
                         host_clock_offsets=[accgraph.HostClockOffset(*o) for o in offsets])
        paths.append(path)
    return paths


def now():
    import accgraph

    return accgraph.host_clock_ns()


def two_hosts(d, rank1_offsets=None):
    t = now()
    return traces(d, [[(0, 0, t)], rank1_offsets if rank1_offsets is not None else
                      [(300_000, 20, t - 10**8), (300_050, 30, t)]])


def merge(*args, limits=(), prefix=None, timeout=120, cwd=None):
    cmd = [*(["prlimit", *limits, "--"] if limits else []), str(program()), "merge-traces",
           *map(str, args)]
    return run(prefix(cmd) if prefix else cmd, env=device_env(), timeout=timeout, cwd=cwd)


def said(done):
    return f"exit {done.returncode}: {clip(done.stderr or done.stdout, 190)}"


def refused(done, *needles):
    text = done.stderr + done.stdout
    missing = [n for n in needles if n not in text]
    check(done.returncode == 1 and not missing and not crashed(done),
          f"{said(done)}{f' (lacks {missing})' if missing else ''}")


def M01(d):
    paths = two_hosts(d)
    done = merge(*paths, "-o", d / "all.pftrace")
    text = done.stdout + done.stderr
    check(done.returncode == 0 and "300" in text, said(done))


def M02(d):
    a = traces(d, [[], []], name="job_a")[0]
    b = traces(d, [[], [], []], name="job_b")[1]
    refused(merge(a, b, "-o", d / "all.pftrace"), str(a), str(b))


def M03(d):
    a = traces(d, [[], []], name="a")[0]
    b = traces(d, [[], []], name="b")[0]
    refused(merge(a, b, "-o", d / "all.pftrace"), str(a), str(b))


def M04(d):
    paths = two_hosts(d)
    paths[1].write_bytes(b"")
    refused(merge(*paths, "-o", d / "all.pftrace"), str(paths[1]))


def M05(d):
    paths = two_hosts(d)
    raw = paths[1].read_bytes()
    paths[1].write_bytes(raw[: len(raw) // 2])
    done = merge(*paths, "-o", d / "all.pftrace")
    refused(done, str(paths[1]), "byte")


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


GIB = 1 << 30


def M06(d):
    paths = two_hosts(d)
    with open(paths[1], "ab") as f:
        f.write(b"\x0a" + varint(2 * GIB + 5) + b"\x00" * 64)
    done = merge(*paths, "-o", d / "all.pftrace", limits=[f"--as={GIB}"], timeout=60)
    refused(done, str(paths[1]), str(2 * GIB + 5))


def M07(d):
    paths = two_hosts(d)
    p = paths[1]
    p.write_bytes((b"\x0a" + varint(2 * GIB - 1)).ljust(4096, b"\x00"))
    done = merge(*paths, "-o", d / "all.pftrace", limits=[f"--as={GIB}"], timeout=60)
    refused(done, str(p), "truncated")


def M08(d):
    paths = two_hosts(d, [])
    done = merge(*paths, "-o", d / "all.pftrace")
    text = done.stdout + done.stderr
    warning = next((x for x in text.splitlines() if "rank 1" in x), "")
    check(done.returncode == 0 and warning and "measure" in text,
          f"exit {done.returncode}: {clip(warning or text, 190)}")


def M09(d):
    paths = traces(d, [[] for _ in range(40)], hosts=["node0"] * 40)
    done = merge(*paths, "-o", d / "all.pftrace", limits=["--nofile=12"])
    text = done.stdout + done.stderr
    check((done.returncode == 0 and (d / "all.pftrace").exists()) or
          (done.returncode == 1 and "limit" in text), said(done))


def M10(d):
    paths = two_hosts(d)
    before = paths[0].read_bytes()
    spelled = merge("rank0.pftrace", "rank1.pftrace", "-o", "./rank0.pftrace", cwd=d)
    os.link(paths[0], d / "hard.pftrace")
    linked = merge(*paths, "-o", d / "hard.pftrace")
    kept = paths[0].read_bytes() == before
    check(spelled.returncode == 1 and linked.returncode == 1 and kept and
          "output" in spelled.stderr and "output" in linked.stderr,
          f"./rank0: {said(spelled)}; hard link: exit {linked.returncode}; input kept {kept}")


def M11(d):
    paths = two_hosts(d)
    folder = d / "dir.pftrace"
    folder.mkdir()
    refused(merge(paths[0], folder, "-o", d / "all.pftrace"), str(folder), "directory")


def M12(d):
    paths = two_hosts(d)
    missing = merge(paths[0], d / "nosuch.pftrace", "-o", d / "all.pftrace")
    if not (missing.returncode == 1 and str(d / "nosuch.pftrace") in missing.stderr and
            "No such file" in missing.stderr):
        bad(f"missing: {said(missing)}")
    d.chmod(0o777)
    for p in paths:
        p.chmod(0o644)
    paths[1].chmod(0o000)
    locked = merge(*paths, "-o", d / "all.pftrace", prefix=as_nobody)
    check(locked.returncode == 1 and str(paths[1]) in locked.stderr and
          "Permission denied" in locked.stderr,
          f"missing: {clip(missing.stderr, 70)}; unreadable: {said(locked)}")


def M13(d):
    import json

    paths = two_hosts(d)
    paths[1].write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2,
                                                     "pid": 1, "tid": 1}]}))
    refused(merge(*paths, "-o", d / "all.pftrace"), str(paths[1]), "not a Perfetto trace")


def refused_or_warned(d, offset, uncertainty):
    paths = two_hosts(d, [(offset, uncertainty, now())])
    done = merge(*paths, "-o", d / "all.pftrace")
    text = done.stdout + done.stderr
    if done.returncode == 1:
        check(str(paths[1]) in text and str(abs(offset)) in text, said(done))
    warned = [x for x in text.splitlines() if "rank 1" in x and "warning" in x.lower() and
              str(offset) in x.replace("+", "")]
    check(done.returncode == 0 and warned, f"exit {done.returncode}: "
          f"{clip(warned[0] if warned else text, 190)}")


def M14(d):
    refused_or_warned(d, -(2**63 - 1), 50)


def M15(d):
    refused_or_warned(d, now(), 50)


def M16(d):
    out = d / "missing" / "all.pftrace"
    done = merge(d / "nosuch0.pftrace", d / "nosuch1.pftrace", "-o", out)
    check(done.returncode == 1 and str(out) in done.stderr and "nosuch" not in done.stderr,
          said(done))


def M17(d):
    paths = two_hosts(d)
    out = d / "rank_all.pftrace"
    first = merge(*paths, "-o", out)
    if first.returncode != 0:
        bad(f"the first merge: {said(first)}")
    before = out.read_bytes()
    globbed = sorted(d.glob("rank*.pftrace"))
    done = merge(*globbed, "-o", out)
    kept = out.read_bytes() == before
    check(done.returncode in (1, 2) and kept and str(out) in done.stderr and
          "output" in done.stderr and not crashed(done),
          f"{said(done)}; the earlier merge kept {kept}")


if __name__ == "__main__":
    sys.exit(main("clock offsets and merge-traces (K, M)", cases(globals()), __file__))
