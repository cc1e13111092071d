"""Helpers the extension calls back into: the decorator form of Profiler.region()."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from ._errors import InvalidArgumentError, make_error

F = TypeVar("F", bound=Callable[..., Any])


def _refusal(region: Any, fn: Callable[..., Any]) -> str:
    """Why `fn` cannot be decorated (a call returns before its body runs), or ''. inspect sees
    through functools.partial and bound methods; a function that only wraps one
    (functools.wraps) is taken as what it is, since it may consume what the wrapped one makes."""
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    what = f"Profiler.region('{region.name}') cannot decorate the"
    name = getattr(target, "__qualname__", None) or repr(fn)
    if inspect.isasyncgenfunction(fn):
        return (
            f"{what} async generator function '{name}': the region would end when the "
            "async generator object is created, before any item is produced; open the region "
            "inside the function body (`with prof.region(...):`) or around the loop that "
            "consumes it"
        )
    if inspect.isgeneratorfunction(fn):
        return (
            f"{what} generator function '{name}': the region would end when the generator "
            "object is created, before any item is produced; open the region inside the "
            "function body (`with prof.region(...):`) or around the loop that consumes it"
        )
    if inspect.iscoroutinefunction(fn):
        return (
            f"{what} coroutine function '{name}': the region would end when the coroutine "
            "object is created, before it runs; use `with prof.region(...):` inside the async "
            "function"
        )
    return ""


def region_decorator(region: Any, fn: F) -> F:
    """Wraps `fn` so that each call runs inside `region` (a context manager), keeping `fn`'s
    name, docstring and signature (functools.wraps). Generator, async generator and coroutine
    functions are refused (InvalidArgumentError): a call only creates their object, so the
    region would time that and not the work."""
    refusal = _refusal(region, fn)
    if refusal:
        raise make_error(InvalidArgumentError, refusal)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with region:
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
