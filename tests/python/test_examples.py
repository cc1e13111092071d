"""Every example under examples/python runs and exits 0 (on the host backend)."""

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
    result = subprocess.run(args, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()
