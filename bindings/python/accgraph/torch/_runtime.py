"""What every module of accgraph.torch needs and none of them owns: loading torch, the backend
that wraps its streams, and the cache of wrapped streams. It imports no other module of
accgraph.torch, so every one of them imports it and no import cycle can form (Note [One torch
package])."""

from __future__ import annotations

import threading
from typing import Any, Dict, Tuple

from .._accgraph import Stream, backends
from .._errors import UnavailableError, make_error

__all__ = ["BACKEND", "TORCH", "TorchUnavailableError", "clear_streams", "load_torch", "require_backend",
           "streams", "wrap_current"]

# Note [One torch package]: the PyTorch integration is one package, accgraph.torch: the graph
# wrappers (__init__), module timing (_modules), the tables and reports (_table, _compare,
# _html), trace annotation (_trace), torch.distributed helpers (_distributed) and the command
# line (__main__). What several of them need lives here, in a module that imports none of
# them. A module uses another's public names only: a name with a leading underscore is private
# to its module (a private module itself may be imported). Only the modules that wrap the
# extension (accgraph/__init__.py, _default_stream.py, _native.py) use its private entry points;
# _native.py gives the rest of the package the ones it needs under names of its own.
# tests/python/test_package_rules.py checks both rules with an AST walk.
# accgraph.torch_trace and accgraph.torch_distributed, the old homes of _trace and
# _distributed, re-export their names with a DeprecationWarning for one release.


class TorchUnavailableError(UnavailableError, ImportError):
    """PyTorch, a CUDA build of it with a visible GPU, or accgraph's cuda backend is missing;
    the message says which and what to install (an :class:`~accgraph.UnavailableError` that is
    also an ``ImportError``)."""


TorchUnavailableError.__module__ = "accgraph.torch"  # where users find it

# The backend of the wrapped streams and foreign graphs. Only tests change it: they run the
# wrappers on the host backend with a stand-in for torch (tests/python/test_torch_standin.py).
# Read it at each use (_runtime.BACKEND), never copy it at import.
BACKEND = "cuda"
# A module standing in for torch (accgraph.torch.testing.use_torch), or None: the real one.
TORCH: Any = None


def load_torch() -> Any:
    """The torch module, checked: TorchUnavailableError saying what to install otherwise."""
    if TORCH is not None:
        return TORCH
    try:
        import torch
    except ImportError as e:
        raise make_error(
            TorchUnavailableError,
            f"accgraph.torch: PyTorch cannot be imported ({e}): install a CUDA build of "
            "PyTorch (pip install torch) in this environment",
        ) from e
    if not torch.cuda.is_available():
        raise make_error(
            TorchUnavailableError,
            f"accgraph.torch: PyTorch {torch.__version__} sees no CUDA device "
            f"(torch.version.cuda={torch.version.cuda}): install a CUDA build of PyTorch and run "
            "where a GPU is visible",
        )
    return torch


def require_backend() -> None:
    """TorchUnavailableError when accgraph's backend for torch's streams is unavailable."""
    info = {b.name: b for b in backends()}.get(BACKEND)
    if info is None or not info.available:
        reason = info.reason if info is not None else "not built into this accgraph"
        raise make_error(
            TorchUnavailableError,
            f"accgraph.torch: accgraph's {BACKEND} backend is unavailable ({reason}): install "
            "an accgraph built where the CUDA toolkit was found",
        )


# (device, cudaStream_t) -> the accgraph Stream wrapping it, for the life of the process (Note
# [Wrapping CUDAGraph] in _graphs.py). Read without the lock (a dict look-up is atomic), and
# natively by timed replays (Note [Owner replay] in bindings/python/src/foreign_graph.cpp).
streams: Dict[Tuple[int, int], Stream] = {}
_streams_lock = threading.Lock()


def wrap_current(torch: Any, device: int) -> Stream:
    """The accgraph Stream of PyTorch's current stream on `device`, wrapped on first use."""
    torch_stream = torch.cuda.current_stream(device)
    key = (device, int(torch_stream.cuda_stream))
    with _streams_lock:
        stream = streams.get(key)
        if stream is None:
            stream = Stream.wrap(BACKEND, device, torch_stream)  # keeps torch_stream alive
            streams[key] = stream
    return stream


def clear_streams() -> None:
    """Drops every wrapped stream (at exit: Note [Clean exit] in __init__.py)."""
    with _streams_lock:
        streams.clear()
