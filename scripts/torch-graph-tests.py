"""Runs the CUDA-graph cases of PyTorch's own test/test_cuda.py three ways, each in a pytest
process of its own: plain, under accgraph.torch.instrument(prof) and under
instrument(prof, modules=True), and lists every test whose outcome differs from plain (issue 36:
module timing must change nothing else PyTorch does).

    python scripts/torch-graph-tests.py PATH/TO/test_cuda.py [-k EXPR] [--timeout S]

test_cuda.py is not part of PyTorch's wheels: take it from the PyTorch source of the installed
version (git checkout v2.11.0, test/test_cuda.py) and run it next to its test/ directory (it
imports torch.testing._internal, which the wheel has). Exit code: 0 when the three agree, 1 when
a test differs, 2 when test_cuda.py is missing or a run could not start (the reason on stderr).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from typing import Dict

# The graph cases: TestCuda's graph tests, TestBlockStateAbsorption, TestMemPool, the caching
# host allocator's graph cases and TestCudaOptims' graph cases.
DEFAULT_K = ("graph or Graph or BlockStateAbsorption or MemPool or memory_stats_of_multiple or "
             "capturable")

RUNNER = """
import sys
mode = sys.argv[1]
if mode != "plain":
    import accgraph, accgraph.torch
    prof = accgraph.Profiler()
    accgraph.torch.instrument(prof, modules=(mode == "modules"))
import pytest
sys.exit(pytest.main(sys.argv[2:]))
"""


def outcomes(mode: str, path: str, k: str, timeout: int) -> Dict[str, str]:
    args = [sys.executable, "-c", RUNNER, mode, path, "-k", k, "-p", "no:cacheprovider", "-q",
            "-rA", "--no-header"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                          cwd=os.path.dirname(os.path.abspath(path)))
    found: Dict[str, str] = {}
    for line in done.stdout.splitlines():
        m = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+)", line)
        if m:
            found[m.group(2)] = m.group(1)
    if not found:
        raise RuntimeError(f"{mode}: no test outcome in pytest's output (exit {done.returncode})"
                           f":\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_cuda")
    parser.add_argument("-k", default=DEFAULT_K)
    parser.add_argument("--timeout", type=int, default=1800)
    options = parser.parse_args()
    if not os.path.isfile(options.test_cuda):
        print(f"torch-graph-tests: {options.test_cuda} does not exist: take test/test_cuda.py "
              "from the PyTorch source of the installed version", file=sys.stderr)
        return 2
    try:
        runs = {mode: outcomes(mode, options.test_cuda, options.k, options.timeout)
                for mode in ("plain", "instrument", "modules")}
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"torch-graph-tests: {e}", file=sys.stderr)
        return 2
    plain = runs["plain"]
    differ = 0
    for mode in ("instrument", "modules"):
        passed = sum(1 for o in runs[mode].values() if o == "PASSED")
        print(f"{mode}: {passed} passed of {len(runs[mode])} (plain: "
              f"{sum(1 for o in plain.values() if o == 'PASSED')} of {len(plain)})")
        for test in sorted(set(plain) | set(runs[mode])):
            if plain.get(test) != runs[mode].get(test):
                differ += 1
                print(f"  {test}: plain {plain.get(test, 'not run')}, {mode} "
                      f"{runs[mode].get(test, 'not run')}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
