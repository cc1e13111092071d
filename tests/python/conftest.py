"""Fixtures of the Python tests: the backends to run on (host, level_zero through the CPU test
driver, the out-of-tree toy plugin, cuda, vulkan), each skipped with the reason where it cannot
run.

Environment (scripts/test.sh sets these):
  ZE_ENABLE_ALT_DRIVERS           the CPU Level Zero driver (build/lib/libze_accgraph_cpu.so)
  VK_DRIVER_FILES                 Mesa's lavapipe ICD (/usr/share/vulkan/icd.d/lvp_icd.x86_64.json)
  ACCGRAPH_TEST_TOY_PLUGIN        the toy plugin library (examples/out_of_tree_backend built)
  ACCGRAPH_TEST_REQUIRE_BACKENDS  comma-separated backends that must run: a skip is a failure
"""

from __future__ import annotations

import os
from typing import Dict, List

import pytest

import accgraph

ALL_BACKENDS = ["host", "level_zero", "toy", "cuda", "vulkan"]

_toy_error = None
_toy_path = os.environ.get("ACCGRAPH_TEST_TOY_PLUGIN")
if _toy_path:
    try:
        accgraph.load_plugin(_toy_path)
    except accgraph.Error as e:  # reported by the toy fixture
        _toy_error = str(e)


def _required() -> List[str]:
    value = os.environ.get("ACCGRAPH_TEST_REQUIRE_BACKENDS", "")
    return [name for name in value.split(",") if name]


def _unavailable() -> Dict[str, str]:
    """Why each backend of ALL_BACKENDS cannot run here ('' when it can)."""
    status = {info.name: info for info in accgraph.backends()}
    reasons = {}
    for name in ALL_BACKENDS:
        info = status.get(name)
        if name == "toy" and info is None:
            reasons[name] = (
                f"the toy plugin failed to load: {_toy_error}"
                if _toy_error
                else "ACCGRAPH_TEST_TOY_PLUGIN is not set (scripts/test.sh builds the toy plugin "
                "and sets it)"
            )
        elif info is None:
            reasons[name] = f"{name} is not registered"
        elif not info.available:
            reasons[name] = info.reason
        else:
            reasons[name] = ""
    return reasons


UNAVAILABLE = _unavailable()


def require_torch_cuda():
    """torch, for a test module that needs it and a GPU: called at module level, it skips the
    module without them (fails it where cuda is required and torch sees a GPU)."""
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"torch is not importable: {e}", allow_module_level=True)
    if not torch.cuda.is_available():  # pragma: no cover
        pytest.skip(f"torch {torch.__version__} sees no CUDA device (torch.version.cuda="
                    f"{torch.version.cuda})", allow_module_level=True)
    if UNAVAILABLE.get("cuda"):  # pragma: no cover
        reason = f"backend cuda unavailable: {UNAVAILABLE['cuda']}"
        if "cuda" in os.environ.get("ACCGRAPH_TEST_REQUIRE_BACKENDS", "").split(","):
            pytest.fail(f"{reason}, but it is required (ACCGRAPH_TEST_REQUIRE_BACKENDS) and torch "
                        "sees a GPU", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return torch


def require_backend(name: str) -> None:
    reason = UNAVAILABLE.get(name, "")
    if reason:
        if name in _required():
            pytest.fail(f"backend {name} is required (ACCGRAPH_TEST_REQUIRE_BACKENDS) but "
                        f"unavailable: {reason}")
        pytest.skip(f"backend {name} unavailable: {reason}")


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn (skipped, with the reason, where it cannot run)."""
    require_backend(request.param)
    return request.param


@pytest.fixture
def stream(backend: str) -> accgraph.Stream:
    return accgraph.Stream(backend)


@pytest.fixture
def caps(stream: accgraph.Stream) -> accgraph.Capabilities:
    return stream.capabilities


def host_buffer(stream: accgraph.Stream, nbytes: int) -> accgraph.Buffer:
    """A buffer the CPU can read on any backend (kind='host')."""
    return accgraph.Buffer(stream, nbytes, kind="host")


def read(buf: accgraph.Buffer) -> bytes:
    return bytes(memoryview(buf))


def timed_host_graph(prof: accgraph.Profiler, region: str = "r"):
    """A host stream and graph attached to `prof`, the graph capturing one fill of a 64-byte
    buffer inside region `region`: (stream, graph, buffer), the buffer kept while the graph
    replays."""
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, 64)
    g = accgraph.Graph("host")
    prof.attach(g)
    with g.capture(s):
        with prof.region(s, region):
            s.fill(buf, 1)
    return s, g, buf
