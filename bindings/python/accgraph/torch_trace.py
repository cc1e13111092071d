"""Deprecated, removed in accgraph 0.3: ``annotate_trace`` moved into :mod:`accgraph.torch`
(``accgraph.torch.annotate_trace``; the code is accgraph/torch/_trace.py). This module
re-exports it, with a DeprecationWarning at import (Note [One torch package] in
accgraph/torch/_runtime.py)."""

from __future__ import annotations

import warnings

from .torch import annotate_trace

__all__ = ["annotate_trace"]

warnings.warn("accgraph.torch_trace is deprecated and goes in accgraph 0.3: use "
              "accgraph.torch.annotate_trace", DeprecationWarning, stacklevel=2)
