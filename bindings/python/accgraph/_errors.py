"""The exception hierarchy: one class per accgraph::ErrorCode, each also deriving from the
built-in exception a Python user would catch for that kind of failure."""

from __future__ import annotations

from typing import Optional

from ._accgraph import ErrorCode, ErrorReason

__all__ = [
    "Error",
    "InvalidArgumentError",
    "InvalidStateError",
    "UnavailableError",
    "UnsupportedError",
    "BackendError",
    "PluginError",
]


class Error(Exception):
    """Every error accgraph raises (accgraph::Error).

    ``str(error)`` is the full C++ message, ``"[code] backend: message"``; the attributes give
    its parts: ``code`` (an :class:`ErrorCode`), ``reason`` (an :class:`ErrorReason`: why, for
    the failures a caller tells apart; decide by it, never by the message's wording, Note [Error
    reasons] in core/error.cpp), ``message`` (without the prefix), ``backend``
    (``"host"``, ``"cuda"``, ... or ``""`` for core errors), ``native_call`` and ``native_code``
    (the failing native call and its result's name, ``""`` when none).
    """

    code: Optional[ErrorCode]
    reason: ErrorReason
    message: str
    backend: str
    native_call: str
    native_code: str

    def __init__(
        self,
        what: str,
        *,
        code: Optional[ErrorCode] = None,
        reason: ErrorReason = ErrorReason.UNSPECIFIED,
        message: Optional[str] = None,
        backend: str = "",
        native_call: str = "",
        native_code: str = "",
    ) -> None:
        super().__init__(what)
        self.code = code
        self.reason = reason
        self.message = what if message is None else message
        self.backend = backend
        self.native_call = native_call
        self.native_code = native_code

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(Error, ValueError):
    """A bad value from the caller: an unknown backend, a stream of another backend, a bad size
    (``ErrorCode.INVALID_ARGUMENT``)."""


class InvalidStateError(Error, RuntimeError):
    """A call in the wrong order: replay before capture, synchronize while capturing
    (``ErrorCode.INVALID_STATE``)."""


class UnavailableError(Error, RuntimeError):
    """A backend or device that exists but cannot be used here, e.g. no driver
    (``ErrorCode.UNAVAILABLE``)."""


class UnsupportedError(Error, NotImplementedError):
    """A request the backend does not implement: a capture mode, host calls
    (``ErrorCode.UNSUPPORTED``)."""


class BackendError(Error, RuntimeError):
    """A native call failed; ``native_call`` and ``native_code`` say which and how
    (``ErrorCode.BACKEND_ERROR``)."""


class PluginError(Error, ImportError):
    """A plugin library was rejected; the message names the file and the reason
    (``ErrorCode.PLUGIN_ERROR``)."""


_CODES = {
    InvalidArgumentError: (ErrorCode.INVALID_ARGUMENT, "invalid argument"),
    InvalidStateError: (ErrorCode.INVALID_STATE, "invalid state"),
    UnavailableError: (ErrorCode.UNAVAILABLE, "unavailable"),
    UnsupportedError: (ErrorCode.UNSUPPORTED, "unsupported"),
}


def make_error(cls: type, message: str, backend: str = "") -> Error:
    """An error raised by the Python package itself, its attributes and ``str()`` as the C++
    library would make them (``"[invalid state] backend: message"``). `cls` is one of the
    classes above or a subclass of one."""
    code, name = next(value for base, value in _CODES.items() if issubclass(cls, base))
    what = f"[{name}] " + (f"{backend}: " if backend else "") + message
    return cls(what, code=code, message=message, backend=backend)

