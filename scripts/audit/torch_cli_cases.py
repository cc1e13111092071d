"""Re-runs the `python -m accgraph.torch` cases (B01-B20, B09b, B09c) of the 2026-11-28
reliability audit, each in its own process (scripts/audit/_harness.py).

    build/venv/bin/python scripts/audit/torch_cli_cases.py            # every case
    build/venv/bin/python scripts/audit/torch_cli_cases.py B14 B15    # some

No GPU and no torch needed, as the auditor ran them:
- "no torch" cases run `python -m accgraph.torch` with a `torch` package on PYTHONPATH whose
  import fails as a missing one does (so they hold where torch is installed too);
- the cases that run a script use the project's stand-in (tests/python/torch_standin.py) on the
  host backend, through the launcher tests/python/test_torch_standin.py's fresh-interpreter
  tests use (the stand-in as `torch`, accgraph.torch on the host backend, then the command
  line's main()).
Every refused case also checks that the script did not run (it prints SCRIPT_RAN first)."""

from __future__ import annotations

import pathlib
import sys
import time

from _harness import TESTS, bad, cases, check, clip, crashed, main, ok, python, without_torch

SCRIPT_RAN = "script ran"

SCRIPT = """
import sys
import torch
from torch_standin import make_gpt

print("script ran", flush=True)
model = make_gpt(torch)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    model(None)
for _ in range(3):
    g.replay()
{tail}
"""

LAUNCHER = """
import sys
sys.path.insert(0, {tests!r})
import accgraph.torch
from torch_standin import make_torch
sys.modules["torch"] = make_torch()
accgraph.torch._runtime.BACKEND = "host"
from accgraph.torch.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def script(d: pathlib.Path, tail: str = "", name: str = "train.py") -> pathlib.Path:
    p = d / name
    p.write_text(SCRIPT.format(tail=tail))
    return p


def standin(d: pathlib.Path, *args: object):
    """`python -m accgraph.torch ARGS` with the stand-in as torch, on the host backend."""
    launcher = d / "launch_standin.py"
    launcher.write_text(LAUNCHER.format(tests=str(TESTS)))
    return python(launcher, *args, cwd=d)


def no_torch(d: pathlib.Path, *args: object):
    """`python -m accgraph.torch ARGS` where `import torch` fails as a missing torch does."""
    env = without_torch(d)
    return python("-m", "accgraph.torch", *args, env=env, cwd=d)


def never(d: pathlib.Path) -> pathlib.Path:
    p = d / "never.py"
    p.write_text(f"print({SCRIPT_RAN!r})\n")
    return p


def summary(done) -> str:
    return f"exit {done.returncode}: {clip(done.stderr or done.stdout, 150)}"


def refused(done, *needles: str, code: int = 2, one_line: bool = True) -> None:
    """handled when the command line exited `code` before running the script, with a message
    on stderr (one line, when `one_line`) holding every needle."""
    lines = done.stderr.strip().splitlines()
    problems = []
    if done.returncode != code:
        problems.append(f"exit {done.returncode}, not {code}")
    if SCRIPT_RAN in done.stdout:
        problems.append("the script ran")
    if one_line and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr")
    missing = [n for n in needles if n not in done.stderr]
    if missing:
        problems.append(f"the message lacks {missing}")
    if "incompatible function arguments" in done.stderr or "Traceback" in done.stderr:
        problems.append("a raw dump")
    if problems:
        bad(f"{'; '.join(problems)}: {clip(done.stderr, 200)}")
    ok(f"{code}, {clip(lines[-1] if lines else '', 150)}")


def B01(d):
    done = no_torch(d)
    refused(done, "give a script", "usage:", one_line=False)


def B02(d):
    done = no_torch(d, "--help")
    check(done.returncode == 0 and "usage:" in done.stdout and "--trace" in done.stdout,
          f"exit {done.returncode}, usage {'printed' if 'usage:' in done.stdout else 'MISSING'}")


def B03(d):
    missing = d / "missing.py"
    refused(no_torch(d, missing), "can't open file", str(missing))


def B04(d):
    refused(no_torch(d, never(d)), "PyTorch cannot be imported", "install")


def B05(d):
    refused(no_torch(d, "--depth", "-1", never(d)), "depth", ">= 0")


def B06(d):
    refused(standin(d, "--depth", "-1", script(d)), "depth must be", ">= 0")


def B07(d):
    # Both options of the row, each in its own run; each message names the option's pattern.
    a = standin(d, "--include", "(", script(d))
    b = standin(d, "--exclude", "[", script(d))
    for done, needle in ((a, "include='('"), (b, "exclude='['")):
        if not (done.returncode == 2 and SCRIPT_RAN not in done.stdout and needle in done.stderr
                and "not a valid regular expression" in done.stderr
                and "fix the pattern" in done.stderr):
            bad(summary(done))
    ok(f"2 and 2: {clip(a.stderr, 120)}")


def B08(d):
    refused(standin(d, "--depth", "x", script(d)), "--depth", "invalid int value: 'x'",
            one_line=False)


def B09(d):
    refused(standin(d, "--ring", "-1", script(d)), "ring_depth", "-1", "give a whole number")


def B09b(d):
    refused(standin(d, "--keep", "-5", script(d)), "keep_reports", "negative")


def B09c(d):
    # "refused or stated": refused with exit 2 naming the ring, or run with the untimed calls
    # stated in the output (how many, the depth asked, the backend's maximum).
    done = standin(d, "--ring", "100000000", script(d))
    if done.returncode == 2 and SCRIPT_RAN not in done.stdout and "100000000" in done.stderr:
        ok(f"refused: {clip(done.stderr)}")
    line = next((x for x in done.stdout.splitlines() if x.startswith("untimed:")), "")
    check(done.returncode == 0 and "100000000" in line and "maximum" in line,
          f"exit {done.returncode}, stated: {clip(line or done.stderr, 170)}")


def B10(d):
    refused(no_torch(d, "-m"), "argument -m: expected one argument", one_line=False)


def B11(d):
    refused(no_torch(d, "--frobnicate", never(d)), "unrecognized arguments: --frobnicate",
            one_line=False)


def B12(d):
    done = standin(d, script(d, "raise ValueError('boom')"))
    check(done.returncode == 1 and "Traceback" in done.stderr and "ValueError: boom" in
          done.stderr and "accgraph.torch: 3 report(s)" in done.stdout and
          "runpy" not in done.stderr,
          f"exit {done.returncode}, traceback "
          f"{'printed' if 'ValueError: boom' in done.stderr else 'MISSING'}, table "
          f"{'printed' if '3 report(s)' in done.stdout else 'MISSING'}")


def B13(d):
    got = []
    for tail, code in (("sys.exit(7)", 7), ("sys.exit('bye')", 1), ("sys.exit(None)", 0),
                       ("sys.exit(300)", 44)):
        done = standin(d, script(d, tail))
        got.append(done.returncode)
        if done.returncode != code or "3 report(s)" not in done.stdout:
            bad(f"{tail}: exit {done.returncode}, not {code}: {clip(done.stderr)}")
        if tail == "sys.exit('bye')" and done.stderr.strip() != "bye":
            bad(f"{tail}: stderr {clip(done.stderr)!r}, not 'bye'")
    ok(", ".join(map(str, got)))


def B14(d):
    done = standin(d, script(d, "raise KeyboardInterrupt"))
    check(done.returncode == 130 and "KeyboardInterrupt" in done.stderr and
          "3 report(s)" in done.stdout, f"exit {done.returncode}, table "
          f"{'printed' if '3 report(s)' in done.stdout else 'MISSING'}")


def B15(d):
    # The script "runs for a while" (2 s after printing SCRIPT_RAN): refused before it runs.
    trace = d / "missing" / "t.json"
    start = time.monotonic()
    done = standin(d, "--trace", trace, script(d, "import time; time.sleep(2)"))
    seconds = time.monotonic() - start
    if seconds > 30:
        bad(f"took {seconds:.0f} s")
    refused(done, "--trace", str(trace), "No such file or directory")


def B16(d):
    # The audit expected an error and exit 1 (it came after the run); refused before the run
    # (exit 2, as B15's fix does for every output) is as good. Either way the message names
    # the path and says it is a directory, and the exit code is not 0.
    done = standin(d, "--csv", d, script(d))
    check(done.returncode in (1, 2) and str(d) in done.stderr and "Is a directory" in
          done.stderr and not crashed(done), summary(done))


def B17(d):
    # "works": exit 0 and the trace written. With --keep 0 no report is kept, so the trace holds
    # none: a 0-byte file is an empty Perfetto trace (a Trace message without packets).
    import accgraph

    if not accgraph.perfetto_supported():
        bad("package built without Perfetto support: case not run")
    trace = d / "t.pftrace"
    done = standin(d, "--keep", "0", "--trace", trace, script(d))
    check(done.returncode == 0 and trace.is_file() and f"wrote {trace}" in done.stdout,
          f"exit {done.returncode}, file "
          f"{f'{trace.stat().st_size} bytes' if trace.exists() else 'MISSING'}: "
          f"{clip(done.stderr)}")


def B18(d):
    done = standin(d, "-m", "no_such_module_xyz")
    check(done.returncode == 1 and "No module named" in done.stderr and "no_such_module_xyz" in
          done.stderr and not crashed(done), summary(done))


def B19(d):
    # "run or refuse": a directory with a __main__.py runs (as python runs it), or is refused
    # with exit 2 and one line naming it and saying it is a directory (the audit noted "no such
    # file" as slightly off); anything else (a traceback, exit 1) is not handled.
    target = d / "pkgdir"
    target.mkdir()
    (target / "__main__.py").write_text("print('main ran')\n")
    done = standin(d, target)
    if done.returncode == 0 and "main ran" in done.stdout:
        ok("run")
    lines = done.stderr.strip().splitlines()
    check(done.returncode == 2 and len(lines) == 1 and str(target) in lines[0] and
          "is a directory" in lines[0] and "main ran" not in done.stdout,
          f"refused: {summary(done)}")


def B20(d):
    tail = """
import threading
import accgraph.torch
accgraph.torch.uninstrument()
def loop():
    for _ in range(3000):
        g.replay()
    print("thread done", flush=True)
threading.Thread(target=loop).start()  # not a daemon: still replaying when the script ends
"""
    done = standin(d, script(d, tail))
    check(done.returncode == 0 and "3 report(s)" in done.stdout and "thread done" in
          done.stdout and "leaked" not in done.stderr and not crashed(done),
          f"exit {done.returncode}, table "
          f"{'printed' if '3 report(s)' in done.stdout else 'MISSING'}, stderr "
          f"{clip(done.stderr, 100)!r}")


if __name__ == "__main__":
    sys.exit(main("python -m accgraph.torch", cases(globals()), __file__))
