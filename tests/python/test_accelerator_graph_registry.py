"""accgraph's torch.accelerator.Graph in PyTorch's GraphImplRegistry, on a real torch >= 2.12
without a GPU (scripts/test.sh's torch part: torch 2.15 from PyPI): every case of
accelerator_graph_cases.py in its own process. Registration at FALLBACK (torch's own, simulated,
replaces it or is kept, and nothing exits), arguments through a fake PrivateUse1 device, the
implementation made under "CUDA" on the CUDA wheel, errors where no device is. Skipped without
such a torch, unless ACCGRAPH_TEST_REQUIRE_TORCH_REGISTRY=1 (then that fails)."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
CASES = ["fallback_yields", "torch_first", "second_fallback", "construct_cuda",
         "fake_device_arguments", "fake_device_errors", "driver"]


def _why_not() -> str:
    """Why the cases cannot run here ('' when they can)."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "torch is not installed"
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match or (int(match[1]), int(match[2])) < (2, 12):
        return f"torch {version} has no torch.accelerator.Graph (PyTorch >= 2.12)"
    return ""


WHY_NOT = _why_not()
if WHY_NOT:
    if os.environ.get("ACCGRAPH_TEST_REQUIRE_TORCH_REGISTRY") == "1":
        pytest.fail(f"{WHY_NOT}, but ACCGRAPH_TEST_REQUIRE_TORCH_REGISTRY=1", pytrace=False)
    pytest.skip(WHY_NOT, allow_module_level=True)


def test_cases_are_all_listed():
    """Every case of the script runs here (a new one cannot be forgotten)."""
    text = (HERE / "accelerator_graph_cases.py").read_text()
    assert sorted(re.findall(r"^def case_(\w+)\(", text, re.M)) == sorted(CASES)


@pytest.mark.parametrize("case", CASES)
def test_case(case):
    done = subprocess.run([sys.executable, str(HERE / "accelerator_graph_cases.py"), case],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"case {case}: ok" in done.stdout, output
    # c10::Registry's line for a duplicate at the same priority (then it exits).
    assert "Key already registered" not in output, output
