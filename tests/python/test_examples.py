"""Every example under examples/python runs and exits 0 (on the host backend; the PyTorch one
where torch and a GPU are, and says why it cannot elsewhere)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import accgraph

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples" / "python").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(example, tmp_path):
    args = [sys.executable, str(example)]
    if example.stem == "profiling":
        args += ["host", str(tmp_path)]
    elif example.stem == "backends":
        # A file that is no plugin: load_plugin's PluginError path runs too.
        (tmp_path / "not-a-plugin.so").write_text("junk")
        args += [str(tmp_path / "not-a-plugin.so")]
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
    if example.stem == "backends":
        assert "rejected: [plugin error]" in result.stdout, result.stdout


# The torch examples again without torch or a GPU (--standin: the torch stand-in of
# torch_standin.py on the host backend), so that an API break fails CI and not only gpu-check.
STANDIN_LAUNCHER = """
import runpy, sys
sys.path.insert(0, {tests!r})
import torch_standin
torch_standin.install()
sys.argv = ["accgraph.torch", *sys.argv[1:]]
runpy.run_module("accgraph.torch", run_name="__main__")
"""


@pytest.mark.parametrize("example, args, expected", [
    ("transparent_profiling", ["--replays", "3"],
     ["--- Replay Iteration 2 ---", "[replay 2] [Layer 4] relu took",
      "reports (3 replays, the rest eager)", "transparent_profiling.json"]),
    ("cuda_interop", [], ["torch sees [7, 7, 7, 7] on host (stand-in)"]),
])
def test_torch_example_on_the_standin(example, args, expected, tmp_path):
    path = EXAMPLES[0].parent / f"{example}.py"
    if example == "transparent_profiling":
        args = args + ["--out", str(tmp_path)]
    if example == "cuda_interop":
        pytest.importorskip("numpy", reason="the stand-in reads the buffer through numpy")
    result = subprocess.run([sys.executable, str(path), "--standin", *args], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    for line in expected:
        assert line in result.stdout, (line, result.stdout)


def test_torch_modules_under_the_cli_on_the_standin():
    """torch_modules.py is a plain PyTorch script (no --standin of its own): python -m
    accgraph.torch runs it with the stand-in as torch and prints the per-module table."""
    launcher = STANDIN_LAUNCHER.format(tests=str(pathlib.Path(__file__).parent))
    result = subprocess.run([sys.executable, "-c", launcher,
                             str(EXAMPLES[0].parent / "torch_modules.py"), "--replays", "3",
                             "--decode"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "torch_modules.py: 3 replays; max |graph - eager| = 0" in out, out
    assert re.search(r"^graph \d+ \(torch_modules\.py:\d+\): 3 replays", out, re.M), out
    # The per-module table is a tree (two spaces a level): GPT/h.0/attn/c_attn, GPT/h.1/mlp/c_proj
    # and GPT/ln_f, each timed in the 3 replays.
    for row in ("GPT", "      c_attn", "      c_proj", "  ln_f"):
        assert re.search(rf"^{row} +3 ", out, re.M), (row, out)


def test_nccl_allreduce_torch_on_the_standin(tmp_path):
    """nccl_allreduce_torch.py --standin: one rank through the stand-in's torch.distributed on
    the host backend; every timed replay reported, the trace written and merged."""
    if not accgraph.perfetto_supported():
        pytest.skip("this accgraph was built without libprotobuf (no .pftrace)")
    result = subprocess.run([sys.executable, str(EXAMPLES[0].parent / "nccl_allreduce_torch.py"),
                             "--standin", "--replays", "5", "--elements", "16", "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "5 of 5 timed replays reported, 0 wrong elements" in out, out
    assert "per replay: untimed host" in out and "merged 1 rank traces into" in out, out
    assert (tmp_path / "rank0.pftrace").stat().st_size > 0, out
    assert (tmp_path / "all.pftrace").stat().st_size > 0, out
