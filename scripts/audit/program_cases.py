"""Re-runs the `accgraph` program cases (E01-E35: demo, plugins, merge-traces) of the
2026-11-28 reliability audit, each in its own process (scripts/audit/_harness.py), against the
release build's program (build/bin/accgraph; ACCGRAPH_PROGRAM overrides).

    build/venv/bin/python scripts/audit/program_cases.py            # every case
    build/venv/bin/python scripts/audit/program_cases.py E18 E26    # some

The ranked .pftrace inputs of merge-traces are written by the Python package (host backend,
Profiler.write_trace(rank=, world_size=)), so it needs Perfetto support, as the audit's build had.
Choices where a row is vague:
- E01-E09 are the row's nine demo arguments in its order: --layers 0, 65, -1, 10^23, 1e3,
  --replays 0, 100001, --delay-us -5, --ring 0; each must exit 2 before running, with the
  option's range and the value given;
- E15-E18 run `accgraph backends` with ACCGRAPH_PLUGIN_PATH naming the file (or directory): the
  file must be rejected on a line naming it and the reason, and the built-in backends still
  listed (exit 0);
- E21-E24, E33-E35: the bad input is merge-traces' only input; exit 1 with a message naming it;
- E25: 40 copies of a good trace with 8 random bit flips each (seeded), each merged alone: exit
  0 or 1 only (no signal, no sanitizer, no hang);
- E26: exit 1 within 30 s, a message naming the packet length, and the child's peak RSS under
  200 MiB ("no huge allocation")."""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time

from _harness import (bad, cases, check, clip, crashed, device_env, main, ok, program, run,
                      temporaries)


def accgraph_run(*args, env=None, timeout=120):
    return run([program(), *args], env=env or device_env(), timeout=timeout)


def summary(done) -> str:
    return f"exit {done.returncode}: {clip(done.stderr or done.stdout, 170)}"


def expect(done, code, *needles, stdout_lacks=()):
    text = done.stderr + done.stdout
    missing = [n for n in needles if n not in text]
    present = [n for n in stdout_lacks if n in done.stdout]
    check(done.returncode == code and not missing and not present and not crashed(done),
          f"{summary(done)}{f' (lacks {missing})' if missing else ''}"
          f"{f' (but printed {present})' if present else ''}")


def demo_refused(option, value, low, high):
    done = accgraph_run("demo", option, value)
    expect(done, 2, f"{option} expects a whole number from {low} to {high}, got '{value}'",
           "usage: accgraph demo", stdout_lacks=("data check",))


def E01(d):
    demo_refused("--layers", "0", 1, 64)


def E02(d):
    demo_refused("--layers", "65", 1, 64)


def E03(d):
    demo_refused("--layers", "-1", 1, 64)


def E04(d):
    demo_refused("--layers", str(10**23), 1, 64)


def E05(d):
    demo_refused("--layers", "1e3", 1, 64)


def E06(d):
    demo_refused("--replays", "0", 1, 100000)


def E07(d):
    demo_refused("--replays", "100001", 1, 100000)


def E08(d):
    demo_refused("--delay-us", "-5", 0, 1000000)


def E09(d):
    demo_refused("--ring", "0", 1, 65536)


def E10(d):
    expect(accgraph_run("demo", "--backend", "vulkan", "--ring", "2000"), 1,
           "ring depth 2000 is larger than the vulkan backend's maximum of 1024",
           stdout_lacks=("data check",))


def E11(d):
    expect(accgraph_run("demo", "--layers", "64", "--replays", "1000", "--trace", d / "t.json"),
           2, "--layers times --replays must be at most 50000 with --trace",
           "64 * 1000 = 64000", stdout_lacks=("data check",))


def E12(d):
    expect(accgraph_run("demo", "--backend", "host", "--replays", "2", "--trace", "/dev/full"),
           1, "'/dev/full' (--trace)", "No space left on device")


def E13(d):
    path = d / "missing" / "t.json"
    expect(accgraph_run("demo", "--backend", "host", "--trace", path), 1,
           f"cannot open '{path}' (--trace) for writing: No such file or directory",
           stdout_lacks=("data check", "replays in"))


def E14(d):
    expect(accgraph_run("demo", "--backend", "nosuch"), 1,
           "unknown backend 'nosuch': registered backends are:", "host")


def plugin_rejected(path, *needles, env_value=None):
    env = device_env()
    env["ACCGRAPH_PLUGIN_PATH"] = str(env_value or path)
    done = accgraph_run("backends", env=env, timeout=100)
    text = done.stdout + done.stderr
    lines = [x for x in text.splitlines() if str(path) in x]
    missing = [n for n in needles if not any(n in x for x in lines)]
    check(done.returncode == 0 and lines and not missing and "host (priority 0" in text and
          not crashed(done), f"exit {done.returncode}: {clip(lines[0] if lines else text, 190)}"
          f"{f' (lacks {missing})' if missing else ''}")


def E15(d):
    p = d / "libfake.so"
    p.write_text("this is not a library\n" * 20)
    plugin_rejected(p, "not an ELF shared library")


def E16(d):
    import ctypes.util

    name = ctypes.util.find_library("z") or "libz.so.1"
    path = next((os.path.join(x, name) for x in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                                  "/lib64", "/usr/lib64", "/lib", "/usr/lib")
                 if os.path.exists(os.path.join(x, name))), None)
    if path is None:
        bad(f"no {name} on this machine: case not run")
    plugin_rejected(path, "accgraph_plugin_entry")


def E17(d):
    plugin_rejected("/bin/ls", "rejected")


def E18(d):
    rng = random.Random(18)
    plugins = d / "plugins"
    plugins.mkdir()
    names = []
    for i in range(50):
        p = plugins / f"librandom{i:02d}.so"
        p.write_bytes(rng.randbytes(rng.randrange(1, 64 * 1024)))
        names.append(p.name)
    os.symlink(plugins / "libloop.so", plugins / "libloop.so")
    os.mkfifo(plugins / "libfifo.so")
    names += ["libloop.so", "libfifo.so"]
    env = device_env()
    env["ACCGRAPH_PLUGIN_PATH"] = str(plugins)
    start = time.monotonic()
    done = accgraph_run("backends", env=env, timeout=100)
    seconds = time.monotonic() - start
    text = done.stdout + done.stderr
    rejected = [x for x in text.splitlines() if "rejected" in x]
    unnamed = [n for n in names if not any(n in x for x in rejected)]
    fifo = next((x for x in rejected if "libfifo.so" in x), "")
    check(done.returncode == 0 and not unnamed and "not a regular file" in fifo and
          "host (priority 0" in text,
          f"exit {done.returncode} in {seconds:.1f} s, {len(rejected)} rejection lines, "
          f"{len(names) - len(unnamed)}/{len(names)} files named; FIFO: {clip(fifo, 60)}")


# --- merge-traces ------------------------------------------------------------------------------


def ranked(d, count, world_size=None, name="rank"):
    """`count` ranked .pftrace files (ranks 0..count-1) of a small host-backend run each."""
    import accgraph

    if not accgraph.perfetto_supported():
        bad("package built without Perfetto support: case not run")
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, 64)
    paths = []
    for rank in range(count):
        prof = accgraph.Profiler()
        g = accgraph.Graph("host")
        prof.attach(g)
        with g.capture(s):
            with prof.region(s, "step"):
                with prof.region(s, "fill"):
                    s.fill(buf, rank % 256)
        for _ in range(3):
            g.replay()
        s.synchronize()
        prof.flush()
        p = d / f"{name}{rank}.pftrace"
        prof.write_trace(p, rank=rank, world_size=world_size or count)
        paths.append(p)
    return paths


def merge(*args, timeout=120):
    return accgraph_run("merge-traces", *args, timeout=timeout)


def E20(d):
    a, b = ranked(d, 2)
    out = d / "merged.pftrace"
    done = merge(a, b, "-o", out)
    check(done.returncode == 0 and out.is_file() and out.stat().st_size > 0 and
          "merged 2 trace(s)" in done.stdout + done.stderr,
          f"{summary(done)}; output {out.stat().st_size if out.exists() else 'MISSING'} bytes")


def bad_input(d, path, *needles, timeout=120):
    done = merge(path, "-o", d / "out.pftrace", timeout=timeout)
    expect(done, 1, str(path), *needles)


def E21(d):
    p = d / "empty.pftrace"
    p.write_bytes(b"")
    bad_input(d, p, "accgraph trace info")


def E22(d):
    p = d / "random.pftrace"
    p.write_bytes(random.Random(22).randbytes(100_000))
    bad_input(d, p, "not a Perfetto trace")


def E23(d):
    p = d / "chrome.pftrace"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2,
                                              "pid": 1, "tid": 1}]}))
    bad_input(d, p, "not a Perfetto trace")


def E24(d):
    (p,) = ranked(d, 1)
    raw = p.read_bytes()
    cut = d / "cut.pftrace"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    bad_input(d, cut, "truncated")


def E25(d):
    (p,) = ranked(d, 1)
    raw = p.read_bytes()
    rng = random.Random(25)
    codes = {}
    for i in range(40):
        flipped = bytearray(raw)
        for _ in range(8):
            bit = rng.randrange(len(raw) * 8)
            flipped[bit // 8] ^= 1 << (bit % 8)
        q = d / f"flip{i}.pftrace"
        q.write_bytes(bytes(flipped))
        done = merge(q, "-o", d / f"out{i}.pftrace", timeout=60)
        codes[done.returncode] = codes.get(done.returncode, 0) + 1
        if done.returncode not in (0, 1) or crashed(done):
            bad(f"flip{i}: {summary(done)}")
    ok(f"40 runs: exit codes {dict(sorted(codes.items()))}")


def E26(d):
    p = d / "huge.pftrace"
    length = 2**62
    varint = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    p.write_bytes(b"\x0a" + bytes(varint) + b"\x00" * 64)
    start = time.monotonic()
    done = merge(p, "-o", d / "out.pftrace", timeout=60)
    seconds = time.monotonic() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    # The message must say what is wrong: the packet's length (it once read the length's low
    # 32 bits, an empty packet, and blamed the bytes after it).
    check(done.returncode == 1 and str(p) in done.stderr and "packet length of "
          f"{2**62}" in done.stderr and seconds < 30 and rss < 200,
          f"{summary(done)}; {seconds:.1f} s, child max RSS {rss:.0f} MiB")


def E27(d):
    (p,) = ranked(d, 1, world_size=2)
    expect(merge(p, p, "-o", d / "out.pftrace"), 1, "give each rank's trace once")


def E28(d):
    (p,) = ranked(d, 1, world_size=2)
    other = d / "." / p.name
    expect(merge(p, str(d) + "/./" + p.name, "-o", d / "out.pftrace"), 1,
           "give each rank's trace once", str(other).replace("/./", "/./")[:0])


def E29(d):
    paths = ranked(d, 200)
    out = d / "merged.pftrace"
    done = merge(*paths, "-o", out)
    check(done.returncode == 0 and "merged 200 trace(s)" in done.stdout + done.stderr and
          out.is_file(), summary(done))


def E30(d):
    a, b = ranked(d, 2)
    before = a.read_bytes()
    link = d / "link.pftrace"
    os.symlink(a, link)
    done = merge(a, b, "-o", link)
    kept = a.read_bytes() == before
    check(done.returncode == 1 and "is both an input and the output" in done.stderr and kept,
          f"{summary(done)}; input {'intact' if kept else 'CHANGED'}")


def E31(d):
    (a,) = ranked(d, 1)
    out = d / "out.pftrace"
    old = b"old output\n" * 1000
    out.write_bytes(old)
    broken = d / "broken.pftrace"
    broken.write_bytes(random.Random(31).randbytes(5000))
    done = merge(a, broken, "-o", out)
    kept = out.read_bytes() == old
    check(done.returncode == 1 and kept and not temporaries(d),
          f"{summary(done)}; old file {'kept' if kept else 'LOST'}, temporaries "
          f"{temporaries(d)}")


def E32(d):
    (a,) = ranked(d, 1)
    out = d / "missing" / "out.pftrace"
    expect(merge(a, "-o", out), 1,
           f"cannot open '{out}' (-o) for writing: No such file or directory")


def E33(d):
    bad_input(d, d / "missing.pftrace", "No such file or directory")


def E34(d):
    sub = d / "adir.pftrace"
    sub.mkdir()
    bad_input(d, sub)


def E35(d):
    start = time.monotonic()
    done = merge("/dev/zero", "-o", d / "out.pftrace", timeout=60)
    seconds = time.monotonic() - start
    check(done.returncode == 1 and "/dev/zero" in done.stderr and seconds < 30,
          f"{summary(done)}; {seconds:.1f} s")


if __name__ == "__main__":
    sys.exit(main("the accgraph program (demo, plugins, merge-traces)", cases(globals()),
                  __file__))
