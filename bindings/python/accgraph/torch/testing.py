"""Running accgraph.torch without a GPU: :func:`use_torch` puts a module that stands in for
torch (the tree's tests/python/torch_standin.py, on the host backend) in place of PyTorch, so
that code written against accgraph.torch's public API (the benchmarks under bench/, the
examples) runs its accgraph side on a machine with no GPU, as CI does."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from .._accgraph import backends
from .._errors import InvalidArgumentError, InvalidStateError, make_error
from . import _runtime

__all__ = ["use_torch"]


@contextmanager
def use_torch(module: Any, *, backend: str = "host") -> Iterator[Any]:
    """For the block, accgraph.torch uses `module` as torch (``load_torch()``, ``instrument()``)
    and wraps its streams, whose ``cuda_stream`` must then be native handles of `backend`'s
    streams, on `backend`; yields `module`. InvalidStateError while instrumented (uninstrument
    first) or inside another use_torch block; InvalidArgumentError for a backend that is not
    available here."""
    from . import is_instrumented

    info = {b.name: b for b in backends()}.get(backend)
    if info is None or not info.available:
        raise make_error(
            InvalidArgumentError,
            f"accgraph.torch.testing.use_torch: backend {backend!r} is not available here "
            f"({info.reason if info is not None else 'not built'}): use one that "
            "accgraph.backends() lists as available",
        )
    if _runtime.TORCH is not None or is_instrumented():
        raise make_error(
            InvalidStateError,
            "accgraph.torch.testing.use_torch: accgraph.torch is instrumented or already uses "
            "a stand-in: uninstrument() and leave the other use_torch block first",
        )
    previous = _runtime.BACKEND
    _runtime.TORCH, _runtime.BACKEND = module, backend
    try:
        yield module
    finally:
        _runtime.clear_streams()  # streams of the stand-in's backend
        _runtime.TORCH, _runtime.BACKEND = None, previous
