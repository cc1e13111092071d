"""Re-runs the deprecated-path cases (D01-D06) of the 2026-12-07 reliability audit
(area (e)), each in its own process
(scripts/audit/_harness.py). Each case runs a user's script in a fresh interpreter, with the
default warning filters (or -W error::DeprecationWarning where the row says), and a `torch`
whose import fails as a missing one does (so the cases hold where torch is installed too).

    build/venv/bin/python scripts/audit/r1207_deprecated.py            # every case
    build/venv/bin/python scripts/audit/r1207_deprecated.py D04 D05    # some

Choices where a row is vague:
- D01, D02: exactly one DeprecationWarning on stderr, on the user script's line (file:line),
  naming the new home; the names are the same objects as accgraph.torch's;
- D05: each of CATEGORY and RECORD_KERNEL is still there (with a warning saying where that
  knowledge lives now), or the error names where it went."""

from __future__ import annotations

import sys

from _harness import bad, cases, check, clip, main, python, without_torch


def user_script(d, text, *flags):
    """`text` as the user's script user.py run in a fresh interpreter without torch; the
    CompletedProcess."""
    (d / "user.py").write_text(text)
    env = without_torch(d)
    env.pop("PYTHONWARNINGS", None)
    return python(*flags, d / "user.py", env=env, cwd=d)


def one_warning(done, line, *needles):
    warnings = [x for x in done.stderr.splitlines() if "DeprecationWarning" in x]
    if done.returncode != 0 or len(warnings) != 1:
        bad(f"exit {done.returncode}, {len(warnings)} warnings: {clip(done.stderr, 150)}")
    where = f"user.py:{line}:"
    missing = [n for n in needles if n not in warnings[0]]
    if where not in warnings[0] or missing:
        bad(f"not at {where} or lacking {missing}: {clip(warnings[0], 150)}")
    return warnings[0]


def D01(d):
    done = user_script(d, "import accgraph.torch\nimport accgraph.torch_trace\n"
                          "print(accgraph.torch_trace.annotate_trace is "
                          "accgraph.torch.annotate_trace)\n")
    warning = one_warning(done, 2, "accgraph.torch.annotate_trace")
    check(done.stdout.strip() == "True", f"same object {done.stdout.strip()}; "
          f"{clip(warning, 130)}")


def D02(d):
    done = user_script(d, "import accgraph.torch\n"
                          "from accgraph.torch_distributed import measure_host_clock_offset, "
                          "collective_metadata\n"
                          "print(measure_host_clock_offset is "
                          "accgraph.torch.measure_host_clock_offset, collective_metadata is "
                          "accgraph.torch.collective_metadata)\n")
    warning = one_warning(done, 2, "accgraph.torch.measure_host_clock_offset",
                          "accgraph.torch.collective_metadata")
    check(done.stdout.split() == ["True", "True"], f"same objects {done.stdout.split()}; "
          f"{clip(warning, 120)}")


def D03(d):
    done = user_script(d, "import sys, accgraph.torch\nprint('torch' in sys.modules)\n"
                          "import warnings\nwarnings.simplefilter('ignore')\n"
                          "import accgraph.torch_trace, accgraph.torch_distributed\n"
                          "print('torch' in sys.modules)\n", "-W", "error::DeprecationWarning")
    check(done.returncode == 0 and done.stdout.split() == ["False", "False"],
          f"exit {done.returncode}, torch imported {done.stdout.split()}: "
          f"{clip(done.stderr, 120)}")


def D04(d):
    done = user_script(d, "import sys\nfor attempt in (1, 2):\n"
                          "    try:\n        import accgraph.torch_trace\n"
                          "        print(attempt, 'imported')\n"
                          "    except DeprecationWarning as e:\n"
                          "        print(attempt, 'DeprecationWarning', e)\n",
                       "-W", "error::DeprecationWarning")
    lines = done.stdout.splitlines()
    check(done.returncode == 0 and len(lines) == 2 and
          all(x.split()[1] == "DeprecationWarning" and "accgraph.torch.annotate_trace" in x
              for x in lines),
          f"exit {done.returncode}: {clip(' / '.join(lines) or done.stderr, 190)}")


D05_SCRIPT = """
import warnings
warnings.simplefilter("always")
import accgraph.torch_trace as old
for name in ("CATEGORY", "RECORD_KERNEL"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = getattr(old, name)
            print(name, "=", repr(value), "|", "; ".join(str(w.message) for w in caught))
        except (ImportError, AttributeError) as e:
            print(name, "error", "|", e)
"""


def D05(d):
    done = user_script(d, D05_SCRIPT)
    lines = done.stdout.splitlines()
    good = len(lines) == 2 and all(
        (" = " in x and "deprecated" in x) or (" error " in x and "accgraph.torch" in x)
        for x in lines)
    check(done.returncode == 0 and good, clip(" / ".join(lines) or done.stderr, 190))


D06_SCRIPT = """
import warnings
warnings.simplefilter("ignore")
import accgraph.torch_distributed as old
try:
    old.measure_host_clock_offset()
    print("no error")
except Exception as e:
    print(type(e).__name__, "|", e)
"""


def D06(d):
    done = user_script(d, D06_SCRIPT)
    out = done.stdout.strip()
    check(out.startswith("TorchUnavailableError |") and
          "accgraph.torch.measure_host_clock_offset" in out and "install" in out,
          clip(out or done.stderr, 190))


if __name__ == "__main__":
    sys.exit(main("deprecated paths (D)", cases(globals()), __file__))
