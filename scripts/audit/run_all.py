"""Re-runs every case of a reliability audit, each in its own process, and prints each surface's
`N / M handled` and the total `handled / <the audit's cases>`. Exit 0 only when every case was
handled. The audits: 2026-11-28 (139 cases in six
surfaces, the *_cases.py scripts; the default) and 2026-12-07 (130
cases in eight surfaces, the r1207_*.py scripts).

    build/venv/bin/python scripts/audit/run_all.py                      # 2026-11-28
    build/venv/bin/python scripts/audit/run_all.py --skip-heavy         # without A42 (1M events)
    build/venv/bin/python scripts/audit/run_all.py --audit 2026-12-07   # the 130 cases

What it needs: scripts/audit/README.md."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
# audit -> (its surfaces' scripts, its number of cases)
AUDITS = {
    "2026-11-28": (["annotate_trace_cases.py", "torch_cli_cases.py", "vulkan_cases.py",
                    "budget_cases.py", "program_cases.py", "threads_cases.py"], 139),
    "2026-12-07": (["r1207_compare.py", "r1207_html.py", "r1207_clock.py", "r1207_reasons.py",
                    "r1207_deprecated.py", "r1207_annotate.py", "r1207_plugins.py",
                    "r1207_threads.py"], 130),
}
USAGE = f"usage: run_all.py [--audit {{{','.join(AUDITS)}}}] [--skip-heavy]"
COUNT = re.compile(r"^(.*): (\d+) / (\d+) handled$")


def main() -> int:
    args = sys.argv[1:]
    audit = "2026-11-28"
    if "--audit" in args:
        at = args.index("--audit")
        audit = args[at + 1] if at + 1 < len(args) else ""
        del args[at:at + 2]
    extra = [a for a in args if a == "--skip-heavy"]
    if len(extra) != len(args) or audit not in AUDITS:
        print(USAGE, file=sys.stderr)
        return 2
    surfaces, expected = AUDITS[audit]
    handled = tried = 0
    counts = []
    start = time.monotonic()
    for name in surfaces:
        print(f"==== {name}", flush=True)
        proc = subprocess.Popen([sys.executable, str(HERE / name), *extra],
                                stdout=subprocess.PIPE, text=True, errors="replace")
        last = None
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            match = COUNT.match(line.rstrip("\n"))
            if match:
                last = match
        proc.wait()
        if last is None:
            print(f"{name}: ended (exit {proc.returncode}) without its count", flush=True)
            counts.append(f"{name}: no count")
            continue
        handled += int(last.group(2))
        tried += int(last.group(3))
        counts.append(last.group(0))
    print("==== summary")
    for line in counts:
        print(line)
    complete = "" if tried == expected else f" (only {tried} of the audit's {expected} run)"
    print(f"all ({audit}): {handled} / {expected} handled{complete} in "
          f"{time.monotonic() - start:.0f} s")
    return 0 if handled == expected else 1


if __name__ == "__main__":
    sys.exit(main())
