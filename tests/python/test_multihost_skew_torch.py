"""Host clock offsets over torch.distributed: ranks with skewed host clocks
(ACCGRAPH_TEST_HOST_CLOCK_SKEW), offsets measured by accgraph.torch.measure_host_clock_offset over
the process group, traces merged, every skew recovered within the reported uncertainty and the
aligned regions inside rank 0's brackets (multihost_skew_torch.py).

- test_..._over_gloo: a real PyTorch, Gloo on CPU, the host backend. Skips without torch (CI has
  none); runs where torch is installed (the GPU machine; gpu-check's nccl stage runs the script
  on the GPUs too).
- test_..._standin: the same script and accgraph.torch.measure_host_clock_offset, but under a
  stand-in torch whose torch.distributed is send/recv over loopback sockets
  (torch_distributed_standin/): it checks the script and the Python measurement path in CI, not
  Gloo."""

import os
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


def test_host_offsets_over_a_standin_process_group_recover_injected_skews(tmp_path):
    try:
        import perfetto.protos.perfetto.trace.perfetto_trace_pb2  # noqa: F401
    except ImportError as e:
        pytest.skip(f"needs the perfetto package: {e}")
    if not accgraph.perfetto_supported():
        pytest.skip("this accgraph was built without Perfetto support")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).with_name("torch_distributed_standin"))]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    done = subprocess.run([sys.executable, str(SCRIPT), "--spawn", "3", "--pg", "gloo",
                           "--device", "host", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAILED" not in done.stdout
    assert "rank 2: host offset" in done.stdout
    assert "rank 2 round 3:" in done.stdout


def test_measure_host_clock_offset_without_a_process_group_is_an_error():
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist
    import accgraph.torch as atd
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(accgraph.InvalidStateError,
                       match="measure_host_clock_offset: torch.distributed is not initialised"):
        atd.measure_host_clock_offset()
