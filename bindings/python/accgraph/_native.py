"""The extension's internal entry points that the rest of the package calls, under names of
their own. Only the modules that wrap the extension (accgraph/__init__.py, _default_stream.py
and this one) use its private names (Note [One torch package] in torch/_runtime.py);
accgraph.torch imports these instead."""

from __future__ import annotations

from ._accgraph import _check_output_file as check_output_file
from ._accgraph import _measure_host_clock_offset as measure_host_clock_offset
from ._accgraph import _OwnerReplay as OwnerReplay
from ._accgraph import _table_text as table_text
from ._accgraph import _trace_format as trace_format
from ._accgraph import _write_bytes_file as write_bytes_file
from ._accgraph import _write_perfetto_events as write_perfetto_events
from ._accgraph import _write_text_file as write_text_file

__all__ = ["OwnerReplay", "check_output_file", "measure_host_clock_offset", "table_text",
           "trace_format", "write_bytes_file", "write_perfetto_events", "write_text_file"]
