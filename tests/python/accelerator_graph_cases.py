"""The registry cases of accgraph's torch.accelerator.Graph on a real torch >= 2.12 without a GPU,
one per process (a PrivateUse1 name, once set, holds for the process; a duplicate registration
at the same priority ends it): ``python accelerator_graph_cases.py CASE``. Prints "case CASE:
ok" and exits 0, or raises. test_accelerator_graph_registry.py runs every case."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any, Callable, Dict, List, Tuple

import torch

import accgraph
import accgraph.torch
from accgraph.torch import _accelerator

HERE = pathlib.Path(__file__).resolve().parent
FAKE = "accgraphfake"  # the fake PrivateUse1 device's name; its registry key is FAKE.upper()


def fake_module() -> Any:
    """The fake device's extension, built for this torch next to accgraph's (same cache)."""
    from torch.utils import cpp_extension

    directory = os.path.join(_accelerator._cache_directory(torch), "fake_privateuse1")
    os.makedirs(directory, exist_ok=True)
    return cpp_extension.load(name="accgraph_fake_privateuse1",
                              sources=[str(HERE / "data" / "fake_privateuse1.cpp")],
                              build_directory=directory, with_cuda=False, verbose=False)


def install_fake_device() -> Any:
    """PrivateUse1 named FAKE, made the accelerator: the C++ guard (registered when the module
    loads: torch's Python one is then kept out) and allocator, torch's Python hooks and device
    module for a Python backend."""
    fake = fake_module()
    fake.install_allocator()
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(rename=FAKE)
    assert str(torch.accelerator.current_accelerator()) == FAKE, torch.accelerator.current_accelerator()
    return fake


class RecordingGraph:
    """Stands in for torch.cuda.CUDAGraph: records every call with its arguments."""

    calls: List[Tuple[Any, ...]] = []

    def __init__(self, keep_graph: bool = False) -> None:
        RecordingGraph.calls.append(("init", keep_graph))
        self.pool_id = (0, 0)

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        RecordingGraph.calls.append(("capture_begin", pool, capture_error_mode))
        self.pool_id = pool if pool is not None else (5, 0)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def method(*args: Any) -> Any:
            RecordingGraph.calls.append((name, *args))
            return self.pool_id if name == "pool" else None

        return method


def register_fake(graph_class: Any = RecordingGraph) -> None:
    registered = _accelerator.register_graph(
        FAKE.upper(), lambda keep_graph: _accelerator.GraphAdapter(keep_graph, graph_class))
    assert registered


# --- cases -------------------------------------------------------------------------------------


def case_fallback_yields() -> None:
    """accgraph registers first; torch's own (simulated) at the default priority then replaces it,
    without exiting; torch.accelerator.Graph() is torch's."""
    assert accgraph.torch.register_accelerator_graph() is True
    extension = _accelerator.load_extension()
    assert extension.registered("CUDA") == "accgraph"
    fake = fake_module()
    fake.register_other("CUDA", extension.REGISTRY_DEFAULT)  # exits(1) if ours were DEFAULT
    torch.accelerator.Graph()
    assert fake.other_created() >= 1 and extension.registered("CUDA") == ""
    assert accgraph.torch.register_accelerator_graph() is True  # the first call's answer


def case_torch_first() -> None:
    """torch's own (simulated) is registered first: accgraph keeps it, says so, no exit."""
    fake = fake_module()
    extension = _accelerator.load_extension()
    fake.register_other("CUDA", extension.REGISTRY_DEFAULT)
    assert accgraph.torch.register_accelerator_graph() is False
    torch.accelerator.Graph()
    assert fake.other_created() == 1


def case_second_fallback() -> None:
    """Another registration at FALLBACK (a second copy of accgraph) is there: kept, no exit."""
    fake = fake_module()
    extension = _accelerator.load_extension()
    fake.register_other("CUDA", extension.REGISTRY_FALLBACK)
    assert accgraph.torch.register_accelerator_graph() is False
    assert extension.registered("CUDA") == ""


def case_construct_cuda() -> None:
    """On the CUDA wheel without a GPU: torch.accelerator.Graph() is accgraph's, under "CUDA";
    what cannot run without a device says so."""
    assert str(torch.accelerator.current_accelerator()) == "cuda"
    assert not torch.cuda.is_available()
    try:
        torch.accelerator.Graph()
        raise AssertionError("torch.accelerator.Graph() on CUDA before registration")
    except RuntimeError as e:
        assert "Graph is not supported on device type: cuda" in str(e), e
    assert accgraph.torch.register_accelerator_graph() is True
    extension = _accelerator.load_extension()
    assert "CUDA" in extension.keys() and extension.registered("CUDA") == "accgraph"
    graph = torch.accelerator.Graph(keep_graph=True, pool=(0, 3), capture_error_mode="relaxed")
    expect_error(graph.capture_begin, accgraph.torch.TorchUnavailableError,
                 "sees no CUDA device")
    for method in (graph.capture_end, graph.replay, graph.instantiate, graph.pool):
        expect_error(method, accgraph.InvalidStateError, "nothing was captured")
    graph.reset()  # nothing to reset: no error
    # The context manager synchronizes first: torch's own error, before accgraph runs.
    expect_error(lambda: torch.accelerator.Graph().__enter__(), RuntimeError, "NVIDIA driver")


def case_fake_device_arguments() -> None:
    """``with torch.accelerator.Graph(...)`` on a fake PrivateUse1 device: every argument reaches
    the composed graph through torch's binding and accgraph's C++ layer."""
    install_fake_device()
    register_fake()
    calls = RecordingGraph.calls
    graph = torch.accelerator.Graph(keep_graph=True, pool=(0, 7), capture_error_mode="thread_local")
    assert calls == [], calls  # made at the first capture
    with graph:
        pass
    assert calls == [("init", True), ("capture_begin", (0, 7), "thread_local"),
                     ("capture_end",)], calls
    graph.instantiate()
    graph.replay()
    assert graph.pool() == (0, 7)
    graph.enable_debug_mode()
    graph.debug_dump("graph.dot")
    graph.reset()
    assert calls[3:] == [("instantiate",), ("replay",), ("pool",), ("enable_debug_mode",),
                         ("debug_dump", "graph.dot"), ("reset",)], calls
    expected = {"default": "global", "global": "global", "thread_local": "thread_local",
                "relaxed": "relaxed"}
    for mode, cuda_mode in expected.items():
        del calls[:]
        with torch.accelerator.Graph(capture_error_mode=mode):
            pass
        assert calls == [("init", False), ("capture_begin", None, cuda_mode), ("capture_end",)], \
            (mode, calls)
    del calls[:]
    debug = torch.accelerator.Graph()
    debug.enable_debug_mode()  # before the composed graph exists: applied when it is made
    with debug:
        pass
    # Note [Debug dumps]: the graph is kept for debug_dump and instantiated at capture_end.
    assert calls == [("init", True), ("enable_debug_mode",), ("capture_begin", None, "global"),
                     ("capture_end",), ("instantiate",)], calls
    expect_error(lambda: torch.accelerator.Graph(capture_error_mode="eager").capture_begin(),
                 RuntimeError, "Unknown capture error mode")


class FailingGraph(RecordingGraph):
    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        raise accgraph.UnsupportedError("FailingGraph cannot capture: by design")


def case_fake_device_errors() -> None:
    """A Python error of the composed graph reaches the caller unchanged, through C++ and back."""
    install_fake_device()
    register_fake(FailingGraph)
    graph = torch.accelerator.Graph()
    expect_error(lambda: graph.__enter__(), accgraph.UnsupportedError, "by design")
    expect_error(torch.accelerator.Graph().replay, accgraph.InvalidStateError,
                 "nothing was captured")


def case_driver() -> None:
    """The C++ layer the registry calls, driven from Python with the GIL released (how the GPU
    tests run it where torch has no registry): arguments, results and errors; also on torch
    < 2.12, where the module builds without the subclass."""
    extension = _accelerator.load_extension()
    assert extension.HAS_GRAPH_REGISTRY == hasattr(torch.accelerator, "Graph")
    calls = RecordingGraph.calls
    driver = extension.Driver(_accelerator.GraphAdapter(True, RecordingGraph))
    driver.capture_begin(0, 7, 2)  # at::GraphCaptureMode::ThreadLocal
    driver.capture_end()
    driver.instantiate()
    driver.replay()
    assert driver.pool() == (0, 7)
    driver.enable_debug_mode()
    driver.debug_dump("graph.dot")
    driver.reset()
    assert calls == [("init", True), ("capture_begin", (0, 7), "thread_local"), ("capture_end",),
                     ("instantiate",), ("replay",), ("pool",), ("enable_debug_mode",),
                     ("debug_dump", "graph.dot"), ("reset",)], calls
    expect_error(lambda: driver.capture_begin(0, 0, 9), ValueError, "capture mode 9")
    failing = extension.Driver(_accelerator.GraphAdapter(False, FailingGraph))
    expect_error(lambda: failing.capture_begin(0, 0, 0), accgraph.UnsupportedError, "by design")


def expect_error(call: Callable[[], Any], kind: type, text: str) -> None:
    try:
        call()
    except kind as e:
        assert text in str(e), (kind, text, str(e))
        print(f"  expected {type(e).__name__}: {str(e)[:160]}")
        return
    raise AssertionError(f"{call} did not raise {kind.__name__} ({text!r})")


CASES: Dict[str, Callable[[], None]] = {
    name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} CASE   CASE: {', '.join(CASES)}")
    CASES[sys.argv[1]]()
    print(f"case {sys.argv[1]}: ok")
