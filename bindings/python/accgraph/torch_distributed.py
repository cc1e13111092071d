"""Deprecated, removed in accgraph 0.3: ``collective_metadata`` and
``measure_host_clock_offset`` moved into :mod:`accgraph.torch` (``accgraph.torch.
collective_metadata``, ``accgraph.torch.measure_host_clock_offset``; the code is
accgraph/torch/_distributed.py). This module re-exports them, with a DeprecationWarning at
import (Note [One torch package] in accgraph/torch/_runtime.py)."""

from __future__ import annotations

import warnings

from .torch import collective_metadata, measure_host_clock_offset

__all__ = ["collective_metadata", "measure_host_clock_offset"]

warnings.warn("accgraph.torch_distributed is deprecated and goes in accgraph 0.3: use "
              "accgraph.torch.collective_metadata and accgraph.torch.measure_host_clock_offset",
              DeprecationWarning, stacklevel=2)
