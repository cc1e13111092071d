"""Helpers the extension calls back into: the decorator form of Profiler.region()."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def region_decorator(region: Any, fn: F) -> F:
    """Wraps `fn` so that each call runs inside `region` (a context manager), keeping `fn`'s
    name, docstring and signature (functools.wraps)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with region:
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
