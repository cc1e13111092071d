"""Re-runs every case of the 2026-11-28 reliability audit (shared/reviews/
reliability-2026-11-28.md: 139 cases in six surfaces), each in its own process, and prints each
surface's `N / M handled` and the total `handled / 139`. Exit 0 only when every case was handled.

    build/venv/bin/python scripts/audit/run_all.py                # all six surfaces
    build/venv/bin/python scripts/audit/run_all.py --skip-heavy   # without A42 (1M events)

What it needs: scripts/audit/README.md."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
SURFACES = ["annotate_trace_cases.py", "torch_cli_cases.py", "vulkan_cases.py",
            "budget_cases.py", "program_cases.py", "threads_cases.py"]
EXPECTED = 139
COUNT = re.compile(r"^(.*): (\d+) / (\d+) handled$")


def main() -> int:
    extra = [a for a in sys.argv[1:] if a == "--skip-heavy"]
    if len(extra) != len(sys.argv[1:]):
        print("usage: run_all.py [--skip-heavy]", file=sys.stderr)
        return 2
    handled = tried = 0
    counts = []
    start = time.monotonic()
    for name in SURFACES:
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
    complete = "" if tried == EXPECTED else f" (only {tried} of the audit's {EXPECTED} run)"
    print(f"all: {handled} / {EXPECTED} handled{complete} in {time.monotonic() - start:.0f} s")
    return 0 if handled == EXPECTED else 1


if __name__ == "__main__":
    sys.exit(main())
