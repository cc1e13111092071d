"""The default stream of Profiler.region(name) without a stream (Note [Default stream] in
bindings/python/src/region.cpp): a provider installed here names it at each region entry."""

from __future__ import annotations

import atexit
import threading
from typing import Any, Callable, Optional

from . import _accgraph
from ._accgraph import Stream
from ._errors import InvalidStateError, make_error

StreamProvider = Callable[[], Stream]

_lock = threading.Lock()
_provider: Optional[StreamProvider] = None


def set_default_stream_provider(provider: Optional[StreamProvider]) -> Optional[StreamProvider]:
    """Installs `provider` (a callable returning an :class:`Stream`, called at each entry of a
    region made without a stream) and returns the one it replaces; None removes it.
    ``accgraph.torch.instrument`` installs PyTorch's current stream and restores the previous
    provider when uninstrumented::

        s = accgraph.Stream("host")
        accgraph.set_default_stream_provider(lambda: s)
        with prof.region("step"):       # on s
            ...
    """
    global _provider
    if provider is not None and not callable(provider):
        raise TypeError("set_default_stream_provider: provider must be callable (or None)")
    with _lock:
        previous, _provider = _provider, provider
        _accgraph._set_default_stream_provider(provider)  # what region entries call
    return previous


# The binding's reference goes at exit, while the interpreter can still free the provider
# (Note [Default stream]); this module's goes with the module.
atexit.register(_accgraph._set_default_stream_provider, None)


def default_stream_provider() -> Optional[StreamProvider]:
    """The installed provider, or None."""
    return _provider


def default_stream(what: str = "the default stream") -> Stream:
    """The stream the installed provider names now. `what` names the caller in the errors:
    InvalidStateError when no provider is installed, TypeError when it returns no Stream."""
    provider = _provider
    if provider is None:
        message = (
            f"{what}: no stream was given and no default stream is installed: pass the "
            "stream (region(stream, name)), or install a default: "
            "accgraph.torch.instrument(profiler) (PyTorch's current stream) or "
            "accgraph.set_default_stream_provider(fn)"
        )
        raise make_error(InvalidStateError, message)
    stream = provider()
    if not isinstance(stream, Stream):
        raise not_a_stream_error(what, provider, stream)
    return stream


def not_a_stream_error(what: str, provider: StreamProvider, returned: Any) -> TypeError:
    """The error for a provider that returned something else than a Stream (also raised by
    region entries, which call the provider from C++)."""
    return TypeError(
        f"{what}: the default stream provider {provider!r} returned "
        f"{type(returned).__name__}, not an accgraph.Stream"
    )
