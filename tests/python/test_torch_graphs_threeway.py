"""Module timing changes nothing else PyTorch does (issue 36): what PyTorch's own CUDA-graph
tests check (make_graphed_callables with a shared pool, the allocator's statistics before a
capture and after the graph is deleted, several generators and graphs, RNG in graphs, an
optimizer captured whole, record_stream, out-of-memory in a capture, concurrent replay, and a
graph freed by the cycle collector during another capture) runs three ways, each in a process of
its own (torch_threeway_cases.py): plain, under accgraph.torch.instrument(prof) and under
instrument(prof, modules=True). The three must agree: the same outcome, the same allocator
statistics, the same outputs, bitwise. GPU only: skipped with the reason without torch, a GPU or
accgraph's cuda backend (a failure instead where gpu-check requires cuda)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import require_torch_cuda

torch = require_torch_cuda()

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_threeway_cases import CASES  # noqa: E402

MODES = ("plain", "instrument", "modules")


def run_mode(mode: str) -> dict:
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONHASHSEED="0")
    done = subprocess.run([sys.executable, str(HERE / "torch_threeway_cases.py"), mode],
                          capture_output=True, text=True, timeout=400, env=env, cwd=str(HERE))
    assert done.returncode == 0, (f"{mode}: exit {done.returncode}\nstdout: "
                                  f"{done.stdout[-2000:]}\nstderr: {done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results():
    """{mode: {case: result}}: the three processes run one after another (one GPU)."""
    return {mode: run_mode(mode) for mode in MODES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_plain_instrumented_and_module_timed_agree(results, case):
    plain = results["plain"][case]
    assert plain["outcome"] == "ok" or case == "out_of_memory_in_a_capture", plain
    for mode in ("instrument", "modules"):
        assert results[mode][case] == plain, (
            f"{case} under {mode} differs from plain PyTorch:\n  plain: {plain}\n  {mode}: "
            f"{results[mode][case]}")


def test_the_cases_check_what_they_say(results):
    """The comparisons above are not vacuous: the out-of-memory case raised PyTorch's error,
    module timing delivered reports (its regions were in the captures and eager calls), and the
    cycle case's graph was freed by a collection (in every mode, after the capture)."""
    plain = results["plain"]
    assert plain["out_of_memory_in_a_capture"]["outcome"] == "OutOfMemoryError"
    assert plain["out_of_memory_in_a_capture"]["out_of_memory"] is True
    assert plain["cycle_collection_during_a_capture"]["collections_in_capture"] == 0
    assert results["modules"]["_profiler"]["delivered"] > 0
    assert plain["make_graphed_callables_shared_pool"]["outputs"].count(True) == 6
