"""``torch.accelerator.Graph`` on CUDA through accgraph: an implementation of PyTorch's
``at::GraphImplInterface`` registered in its ``GraphImplRegistry`` under ``"CUDA"`` at
``c10::REGISTRY_FALLBACK`` (:func:`register_accelerator_graph`), whose calls go to a
:class:`GraphAdapter` composing ``torch.cuda.CUDAGraph`` (Note [Accelerator graph])."""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from .._errors import InvalidArgumentError, InvalidStateError, UnavailableError, make_error
from . import _runtime
from ._runtime import TorchUnavailableError

__all__ = ["GraphAdapter", "accelerator_graph_build_seconds", "load_extension",
           "register_accelerator_graph"]

# Note [Accelerator graph]: PyTorch >= 2.12 ships the RFC's registry as at::GraphImplInterface,
# GraphImplRegistry and at::accelerator::Graph (torch.accelerator.Graph in Python), and registers
# no CUDA implementation (2.12 to 2.15). register_accelerator_graph() registers accgraph's:
#
# - The C++ part (_accelerator_graph.cpp) is a thin GraphImplInterface subclass whose every call
#   takes the GIL and calls the GraphAdapter of the same graph (a Python exception goes through
#   unchanged), and the registration. PyTorch's headers are no stable ABI, so it is compiled on
#   first use against the installed torch (torch.utils.cpp_extension.load: a C++ compiler and
#   ninja; the build is cached per Python and torch version, README: first-import cost).
# - GraphAdapter is the logic: it composes torch.cuda.CUDAGraph (at::cuda::CUDAGraph: pools, the
#   caching allocator, the RNG state are torch's own), so a graph captured through
#   torch.accelerator.Graph is a torch.cuda.CUDAGraph to instrument(): timed exactly as every
#   other, module timing included, by the same code (Note [Wrapping CUDAGraph] in _graphs.py).
# - Registration at FALLBACK, and only when the registry holds no "CUDA" entry yet: PyTorch's own
#   implementation, on the day it lands, wins (a higher priority replaces ours; ours is skipped
#   when it is there first), and a second registration at the same priority, which
#   c10::Registry answers with std::exit(1), never happens.
# - The capture runs on the current stream, as torch.accelerator.Graph documents: on CUDA not
#   the default stream (torch's "CUDA graphs must be captured on a non-default stream"), so
#   ``with stream, graph:``. The torch.cuda.CUDAGraph is made at the first capture_begin (making
#   one needs a device; torch.accelerator.Graph() needs none).
#
# The torch-2.11 build of the same source has no subclass and no registration; its Driver makes
# the registry's calls on a GraphAdapter from C++ with the GIL released, which is how the GPU
# tests run this path where torch has no registry (tests/python/test_accelerator_graph.py).

# at::GraphCaptureMode -> torch.cuda.CUDAGraph's capture_error_mode ("default": the one
# torch.cuda.graph and CUDAGraph.capture_begin default to).
CAPTURE_MODES: Dict[str, str] = {"default": "global", "global": "global",
                                 "thread_local": "thread_local", "relaxed": "relaxed"}
# The registry key of CUDA (c10::DeviceTypeName(kCUDA, /*lower_case=*/false)).
CUDA_KEY = "CUDA"


class GraphAdapter:
    """What accgraph's GraphImplInterface does for one torch.accelerator.Graph: each method is
    the interface's method of the same name (`pool` a pair of ints, `mode` at::GraphCaptureMode's
    name). `graph_class`: the graph class composed (None: torch.cuda.CUDAGraph of
    accgraph.torch's torch, read at the first capture)."""

    __slots__ = ("keep_graph", "graph", "graph_class", "debug", "kept_for_debug")

    def __init__(self, keep_graph: bool = False, graph_class: Optional[Callable[..., Any]] = None
                 ) -> None:
        self.keep_graph = bool(keep_graph)
        self.graph: Any = None  # made at the first capture_begin
        self.graph_class = graph_class
        self.debug = False
        self.kept_for_debug = False  # Note [Debug dumps]

    def __repr__(self) -> str:
        return (f"GraphAdapter(keep_graph={self.keep_graph}, graph={self.graph!r}, "
                f"debug={self.debug})")

    def capture_begin(self, pool: Tuple[int, int], mode: str) -> None:
        cuda_mode = CAPTURE_MODES.get(mode)
        if cuda_mode is None:
            raise make_error(InvalidArgumentError,
                             f"torch.accelerator.Graph.capture_begin: capture mode {mode!r} is "
                             f"not one of {', '.join(CAPTURE_MODES)}")
        if self.graph is None:
            graph_class = self.graph_class
            if graph_class is None:
                graph_class = _runtime.load_torch().cuda.CUDAGraph  # says why without a GPU
            # Note [Debug dumps]: torch's CUDAGraph drops its cudaGraph_t at capture_end unless
            # keep_graph is set, debug mode or not (torch 2.11: debug_dump then only warns
            # "DEBUG: calling debug_dump()" and writes nothing). So a graph in debug mode keeps
            # its graph, and capture_end instantiates it when the caller did not ask keep_graph:
            # replays behave as without debug mode, and debug_dump has a graph to write.
            self.kept_for_debug = self.debug and not self.keep_graph
            self.graph = graph_class(keep_graph=self.keep_graph or self.debug)
            if self.debug:
                self.graph.enable_debug_mode()
        # {0, 0}: a new private pool, as CUDAGraph's pool=None.
        pool_id = None if tuple(pool) == (0, 0) else (int(pool[0]), int(pool[1]))
        self.graph.capture_begin(pool=pool_id, capture_error_mode=cuda_mode)

    def capture_end(self) -> None:
        graph = self._captured("capture_end")
        graph.capture_end()
        if self.kept_for_debug:
            graph.instantiate()  # Note [Debug dumps]

    def instantiate(self) -> None:
        self._captured("instantiate").instantiate()

    def replay(self) -> None:
        self._captured("replay").replay()

    def reset(self) -> None:
        if self.graph is not None:
            self.graph.reset()

    def pool(self) -> Tuple[int, int]:
        first, second = self._captured("pool").pool()
        return int(first), int(second)

    def enable_debug_mode(self) -> None:
        self.debug = True
        if self.graph is not None:
            self.graph.enable_debug_mode()

    def debug_dump(self, path: str) -> None:
        self._captured("debug_dump").debug_dump(path)

    def _captured(self, method: str) -> Any:
        if self.graph is None:
            raise make_error(InvalidStateError,
                             f"torch.accelerator.Graph.{method}: nothing was captured: call "
                             "capture_begin() and capture_end() first (or use the graph as a "
                             "context manager)")
        return self.graph


# --- the extension ---------------------------------------------------------------------------

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_accelerator_graph.cpp")
_extension_lock = threading.Lock()
_extension: Any = None
_build_seconds: Optional[float] = None


def _cache_directory(torch: Any) -> str:
    """Where the extension is built for this Python and torch: ACCGRAPH_TORCH_EXTENSIONS_DIR, else
    ~/.cache/accgraph/torch-extensions (XDG_CACHE_HOME), one folder per version pair."""
    root = os.environ.get("ACCGRAPH_TORCH_EXTENSIONS_DIR")
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(cache, "accgraph", "torch-extensions")
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__}"
    return os.path.join(root, re.sub(r"[^A-Za-z0-9._-]", "_", tag))


def load_extension(torch: Any = None) -> Any:
    """The C++ part, built for the installed torch on first use and cached (a later process
    loads the cached build). UnavailableError saying what to install when it cannot be built."""
    global _extension, _build_seconds
    with _extension_lock:
        if _extension is not None:
            return _extension
        if torch is None:
            torch = _import_torch()
        try:
            from torch.utils import cpp_extension
        except ImportError as e:  # pragma: no cover - every torch >= 1.0 has it
            raise make_error(UnavailableError,
                             f"accgraph.torch: torch.utils.cpp_extension cannot be imported ({e})"
                             ) from e
        directory = _cache_directory(torch)
        os.makedirs(directory, exist_ok=True)
        name = "accgraph_torch_graph_" + re.sub(r"[^A-Za-z0-9]", "_", torch.__version__)
        _put_ninja_on_path()
        start = time.perf_counter()
        try:
            module = cpp_extension.load(name=name, sources=[_SOURCE], build_directory=directory,
                                        extra_cflags=["-O2"], with_cuda=False, verbose=False)
        except Exception as e:
            raise make_error(
                UnavailableError,
                f"accgraph.torch: building accgraph's torch.accelerator.Graph implementation for "
                f"PyTorch {torch.__version__} in {directory} failed ({type(e).__name__}: {e}): it "
                "needs a C++17 compiler (CXX, else c++) and ninja (pip install ninja) on this "
                "machine",
            ) from e
        _build_seconds = time.perf_counter() - start
        _extension = module
        return module


def _put_ninja_on_path() -> None:
    """torch.utils.cpp_extension runs `ninja` from PATH: where it is not there but the ninja
    package is installed (a virtual environment whose bin/ is not on PATH), its binary is used."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja  # type: ignore[import-not-found]
    except ImportError:
        return  # cpp_extension says that ninja is missing
    os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


def accelerator_graph_build_seconds() -> Optional[float]:
    """Seconds the C++ part took to build or load in this process (None: not loaded yet)."""
    return _build_seconds


def _import_torch() -> Any:
    """torch, without requiring a GPU (registration and construction need none)."""
    if _runtime.TORCH is not None:
        return _runtime.TORCH
    try:
        import torch
    except ImportError as e:
        raise make_error(
            TorchUnavailableError,
            f"accgraph.torch: PyTorch cannot be imported ({e}): install PyTorch >= 2.12 (pip "
            "install torch) in this environment",
        ) from e
    return torch


def has_accelerator_graph(torch: Any) -> bool:
    """Whether `torch` has torch.accelerator.Graph (PyTorch >= 2.12)."""
    return getattr(getattr(torch, "accelerator", None), "Graph", None) is not None


def register_graph(key: str, factory: Callable[[bool], Any]) -> bool:
    """Registers `factory` (keep_graph -> GraphAdapter) under registry key `key` at
    REGISTRY_FALLBACK; False when the registry already holds the key (kept as it is)."""
    torch = _import_torch()
    if not has_accelerator_graph(torch):
        raise make_error(
            UnavailableError,
            f"accgraph.torch.register_accelerator_graph: PyTorch {torch.__version__} has no "
            "torch.accelerator.Graph (it came with PyTorch 2.12): use torch.cuda.CUDAGraph, "
            "which accgraph.torch.instrument() times as before, or install PyTorch >= 2.12",
        )
    extension = load_extension(torch)
    if not extension.HAS_GRAPH_REGISTRY:
        raise make_error(
            UnavailableError,
            f"accgraph.torch.register_accelerator_graph: PyTorch {torch.__version__} has "
            "torch.accelerator.Graph but its headers have no ATen/core/GraphImplInterface.h: "
            "this torch is not supported",
        )
    return extension.register_graph(key, factory, extension.REGISTRY_FALLBACK) == "registered"


_registered_lock = threading.Lock()
_registered: Optional[bool] = None


def register_accelerator_graph() -> bool:
    """Makes ``torch.accelerator.Graph`` work on CUDA through accgraph: registers accgraph's
    implementation (a :class:`GraphAdapter` over ``torch.cuda.CUDAGraph`` per graph) in
    PyTorch's ``GraphImplRegistry`` under ``"CUDA"`` at ``c10::REGISTRY_FALLBACK``. The first call
    in a process builds the C++ part for the installed torch, or loads the cached build (README:
    what that costs). Returns True when accgraph's implementation is registered, False when the
    registry already had one for CUDA (PyTorch's own, or another's), which stays; later calls
    return the first call's answer. Graphs captured through it are timed by :func:`instrument`
    like every ``torch.cuda.CUDAGraph``.

    UnavailableError on a PyTorch without ``torch.accelerator.Graph`` (< 2.12; module timing
    works there as before) or where the C++ part cannot be built (it says what to install)."""
    global _registered
    with _registered_lock:
        if _registered is None:
            _registered = register_graph(CUDA_KEY, GraphAdapter)
        return _registered
