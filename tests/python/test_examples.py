"""Every example under examples/python runs and exits 0 (on the host backend; the PyTorch one
where torch and a GPU are, and says why it cannot elsewhere)."""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples" / "python").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(example, tmp_path):
    args = [sys.executable, str(example)]
    if example.stem == "profiling":
        args += ["host", str(tmp_path)]
    elif example.stem == "nccl_allreduce_torch":
        # Runs where torch, NCCL and GPUs are (gpu-check.sh runs it without --allow-skip).
        args += ["--allow-skip", "--replays", "20", "--out", str(tmp_path)]
    elif example.stem == "transparent_profiling":
        # Runs where torch and a GPU are; says why not and exits 0 elsewhere (gpu-check.sh runs
        # it without --allow-skip, where a skip fails).
        args += ["--allow-skip", "--out", str(tmp_path)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()
