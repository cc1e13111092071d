"""C++ baselines for benchmarks of the Python package: the work of a Python loop, done by a loop
in C++ with the GIL released, so that a benchmark can say what the binding adds per call
(bench/python/bench_python.py, bench/callgrind/python_replay.py)."""

from __future__ import annotations

from ._accgraph import Graph, Profiler, Stream

__all__ = ["region_loop_ns", "replay_loop_ns"]


def replay_loop_ns(graph: Graph, count: int) -> int:
    """Nanoseconds that `count` calls of the C++ ``graph.replay()`` took, in one C++ loop (the
    replays are enqueued, not waited for: synchronize the stream after)."""
    return graph._replay_loop_ns(count)


def region_loop_ns(profiler: Profiler, stream: Stream, name: str, count: int) -> int:
    """Nanoseconds that `count` eager regions named `name` on `stream` took to open and close,
    in one C++ loop (their reports are pending: flush the profiler after)."""
    return profiler._region_loop_ns(stream, name, count)
