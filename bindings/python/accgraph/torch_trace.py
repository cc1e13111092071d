"""Deprecated, removed in accgraph 0.3: ``annotate_trace`` moved into :mod:`accgraph.torch`
(``accgraph.torch.annotate_trace``; the code is accgraph/torch/_trace/). This module
re-exports it, with a DeprecationWarning at import (Note [One torch package] in
accgraph/torch/_runtime.py). The constants of 0.2's module (CATEGORY, RECORD_KERNEL, ...: scripts
filtered traces with them) stay, each with a DeprecationWarning where it is used."""

from __future__ import annotations

import warnings

from typing import Any

from .torch import annotate_trace

__all__ = ["annotate_trace"]

warnings.warn("accgraph.torch_trace is deprecated and goes in accgraph 0.3: use "
              "accgraph.torch.annotate_trace", DeprecationWarning, stacklevel=2)

# 0.2's public constants: their values then, and where that knowledge lives now.
_MARKERS = "ReplayReport.marker_kernels names the marker kernels of the backend that timed it"
_REMOVED = {
    "CATEGORY": ("gpu_user_annotation", "the category of annotate_trace's region slices"),
    "RECORD_KERNEL": ("marker_record_kernel", _MARKERS),
    "PROGRAMMATIC_RECORD_KERNEL": ("marker_record_programmatic_kernel", _MARKERS),
    "PLACED_RECORD_KERNEL": ("marker_record_placed_kernel", _MARKERS),
    "END_KERNEL": ("marker_end_kernel", _MARKERS),
    "UNSUPPORTED_STRATEGIES": (("external_events",), "the marker strategies annotate_trace "
                               "cannot align (it says so itself)"),
}


def __getattr__(name: str) -> Any:
    if name not in _REMOVED:
        raise AttributeError(f"module 'accgraph.torch_trace' has no attribute {name!r}: it "
                             "re-exports annotate_trace only (accgraph.torch.annotate_trace)")
    value, where = _REMOVED[name]
    warnings.warn(f"accgraph.torch_trace.{name} is deprecated and goes in accgraph 0.3: "
                  f"{where}; write its value {value!r} where you need it",
                  DeprecationWarning, stacklevel=2)
    return value
