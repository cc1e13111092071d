"""Host clock offsets over torch.distributed (Gloo on CPU, the host backend): two ranks with
skewed host clocks (ACCGRAPH_TEST_HOST_CLOCK_SKEW), their traces merged, every skew recovered
within the reported uncertainty (multihost_skew_torch.py). Needs a real PyTorch with
torch.distributed and the perfetto package, so it skips in CI (no torch there; the same
measurement and merge run without torch in tests/perfetto/multihost_skew.cpp) and runs where
torch is installed (the GPU machine; gpu-check's nccl stage runs the script on the GPUs)."""

import subprocess
import sys
from pathlib import Path

import pytest

import accgraph

SCRIPT = Path(__file__).with_name("multihost_skew_torch.py")


def test_host_offsets_over_gloo_recover_injected_skews(tmp_path):
    try:
        import torch.distributed as dist  # noqa: F401 - a real torch, not the stand-in
        import perfetto.protos.perfetto.trace.perfetto_trace_pb2  # noqa: F401
    except ImportError as e:
        pytest.skip(f"needs PyTorch with torch.distributed and the perfetto package: {e}")
    if not accgraph.perfetto_supported():
        pytest.skip("this accgraph was built without Perfetto support")
    done = subprocess.run([sys.executable, str(SCRIPT), "--spawn", "2", "--pg", "gloo",
                           "--device", "host", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAILED" not in done.stdout
    assert "rank 1: host offset" in done.stdout


def test_measure_host_clock_offset_without_a_process_group_is_an_error():
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist
    import accgraph.torch_distributed as atd
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(accgraph.InvalidStateError,
                       match="measure_host_clock_offset: torch.distributed is not initialised"):
        atd.measure_host_clock_offset()
