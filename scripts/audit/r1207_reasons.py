"""Re-runs the error reason cases (R01-R12) of the 2026-12-07 reliability audit
(area (d)), each in its own process
(scripts/audit/_harness.py), on the host backend. R09 runs in a fresh interpreter where
`import torch` fails as a missing torch does; R11 builds a small C++ program against the
source tree's headers (what the install copies) and the release build's libaccgraph.

    build/venv/bin/python scripts/audit/r1207_reasons.py            # every case
    build/venv/bin/python scripts/audit/r1207_reasons.py R07 R12    # some

Choices where a row is vague:
- "readable str" (R01): the str is "[invalid state] ..." and says what to do next (names
  begin);
- R02: the message names both regions, 'a' and 'b' (by its path, 'a/b');
- R03: the message says to attach; R04: it says the capture was aborted;
- R12: the review's program (REGION_ORDER caught, then 100 regions 'c'): every region 'c' is
  counted in stats() (or each raised)."""

from __future__ import annotations

import pickle
import sys

from _harness import bad, cases, check, clip, cxx, main, ok, python, run, short, without_torch


def host():
    import accgraph

    return accgraph, accgraph.Profiler(), accgraph.Stream("host")


def reason_of(call, reason, cls="InvalidStateError", names=()):
    """The error `call` raises: accgraph's `cls` with ErrorReason `reason`, its message naming
    `names`; bad() otherwise."""
    import accgraph

    try:
        call()
    except accgraph.Error as e:
        got = f"{type(e).__name__} {e.reason.name}: {clip(str(e), 150)}"
        missing = [n for n in names if n not in str(e)]
        if type(e).__name__ != cls or e.reason.name != reason or missing:
            bad(got + (f" (lacks {missing})" if missing else ""))
        return e
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad("no error")


def R01(d):
    accgraph, prof, s = host()
    e = reason_of(lambda: prof.end(s), "REGION_ORDER", names=["begin"])
    check(str(e).startswith("[invalid state]"), f"REGION_ORDER: {clip(str(e), 160)}")


def R02(d):
    accgraph, prof, s = host()
    a, b = prof.region(s, "a"), prof.region(s, "b")
    a.__enter__()
    b.__enter__()
    e = reason_of(lambda: a.__exit__(None, None, None), "REGION_ORDER", names=["'a'", "'a/b'"])
    ok(f"REGION_ORDER: {clip(str(e), 160)}")


def R03(d):
    accgraph, prof, s = host()
    g = accgraph.Graph("host")
    g.capture_begin(s)
    e = reason_of(lambda: prof.begin(s, "r"), "UNATTACHED_CAPTURE", names=["attach"])
    ok(f"UNATTACHED_CAPTURE: {clip(str(e), 150)}")


def R04(d):
    accgraph, prof, s = host()
    g = accgraph.Graph("host")
    prof.attach(g)
    g.capture_begin(s)
    prof.begin(s, "open")
    e = reason_of(g.capture_end, "REGION_ORDER", names=["abort"])
    ok(f"REGION_ORDER: {clip(str(e), 150)}")


def R05(d):
    accgraph, prof, s = host()
    g = accgraph.Graph("host")
    prof.attach(g)
    prof.begin(s, "eager")
    e = reason_of(lambda: g.capture_begin(s), "REGION_ORDER")
    ok(f"REGION_ORDER: {clip(str(e), 150)}")


def R06(d):
    accgraph, prof, s = host()
    g = accgraph.Graph("host")
    prof.attach(g)
    region = prof.region(s, "r")
    try:
        with g.capture(s):
            region.__enter__()
            raise KeyError("the user's error")
    except KeyError:
        pass
    e = reason_of(lambda: region.__exit__(None, None, None), "CAPTURE_ENDED")
    ok(f"CAPTURE_ENDED: {clip(str(e), 150)}")


def R07(d):
    accgraph, prof, s = host()
    g = accgraph.Graph("host")
    prof.attach(g)
    g.capture_begin(s)
    prof.begin(s, "y")
    g.reset()
    e = reason_of(lambda: prof.end(s), "CAPTURE_ENDED", names=["reset"])
    ok(f"CAPTURE_ENDED: {clip(str(e), 150)}")


def R08(d):
    import accgraph

    e = reason_of(lambda: accgraph.Graph("no_such"), "UNSPECIFIED", "InvalidArgumentError",
                  names=["no_such", "host"])
    ok(f"UNSPECIFIED: {clip(str(e), 150)}")


R09_SCRIPT = """
import accgraph, accgraph.torch
try:
    accgraph.torch.instrument(accgraph.Profiler())
    print("no error")
except accgraph.Error as e:
    print(type(e).__name__, e.code.name, e.reason.name, str(e))
"""


def R09(d):
    (d / "r09.py").write_text(R09_SCRIPT)
    done = python(d / "r09.py", env=without_torch(d))
    words = done.stdout.split(" ", 3)
    check(words[:3] == ["TorchUnavailableError", "UNAVAILABLE", "UNSPECIFIED"] and
          words[3].startswith("[unavailable] "), clip(done.stdout or done.stderr, 190))


def R10(d):
    accgraph, prof, s = host()
    e = reason_of(lambda: prof.end(s), "REGION_ORDER")
    back = pickle.loads(pickle.dumps(e))
    same = (type(back) is type(e) and back.code == e.code and back.reason == e.reason and
            back.message == e.message and back.backend == e.backend and str(back) == str(e))
    check(same, f"{type(back).__name__} {back.code.name} {back.reason.name} "
          f"backend {back.backend!r}: {'the same' if same else 'CHANGED'}")


CXX_R11 = r"""
#include <accgraph/accgraph.hpp>
#include <cstdio>
using namespace accgraph;
using timing::Profiler;
void show(const char* what, void (*call)()) {
  try {
    call();
    std::printf("%s | none\n", what);
  } catch (const Error& e) {
    std::printf("%s | %s | %s\n", what, to_string(e.reason()), e.what());
  }
}
int main() {
  show("end", [] {
    Profiler prof;
    Stream s = Stream::create("host");
    prof.end(s);
  });
  show("unattached", [] {
    Profiler prof;
    Stream s = Stream::create("host");
    AcceleratorGraph g("host");
    g.capture_begin(s);
    try {
      prof.begin(s, "r");
    } catch (...) {
      g.capture_end();
      throw;
    }
  });
  show("backend", [] { AcceleratorGraph g("no_such"); });
}
"""


def R11(d):
    (d / "r11.cpp").write_text(CXX_R11)
    exe = cxx(d, [d / "r11.cpp"], "r11")
    done = run([exe])
    got = {x.split(" | ")[0]: x.split(" | ")[1] for x in done.stdout.splitlines() if " | " in x}
    want = {"end": "region order", "unattached": "unattached capture", "backend": "unspecified"}
    check(done.returncode == 0 and got == want, f"{got}" if got else
          f"exit {done.returncode}: {clip(done.stderr, 150)}")


def R12(d):
    accgraph, prof, s = host()
    a, b = prof.region(s, "a"), prof.region(s, "b")
    a.__enter__()
    b.__enter__()
    try:
        a.__exit__(None, None, None)
    except accgraph.Error as e:
        first = e.reason.name
    b.__exit__(None, None, None)
    raised = 0
    for _ in range(100):
        try:
            with prof.region(s, "c"):
                pass
        except accgraph.Error:
            raised += 1
    prof.flush()
    counted = sum(r.count for r in prof.stats() if r.path.endswith("c"))
    check(counted + raised == 100,
          f"a.__exit__: {first}; regions c: {counted} counted, {raised} raised of 100")


if __name__ == "__main__":
    sys.exit(main("error reasons (R)", cases(globals()), __file__))
