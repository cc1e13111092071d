"""The blog "Transparent Profiling for PyTorch CUDA Graphs", done with accgraph: the model times
its operations with profiler.region (no stream: PyTorch's current one, like the blog's
profiler.time), the execution code captures and replays a torch.cuda.CUDAGraph without knowing
about it, and accgraph.torch times every replay. Prints each report, per-layer statistics, and
writes a trace that Perfetto (ui.perfetto.dev) and chrome://tracing load. Needs torch and a GPU.

    python examples/python/transparent_profiling.py [--replays N] [--out DIR] [--allow-skip]
        [--standin]

Without torch, a GPU or accgraph's cuda backend it says why and exits 1, or 0 with --allow-skip.
--standin runs it without them, as CI does: the torch stand-in of tests/python/torch_standin.py
(tensors and layers that are tiny host ops) on accgraph's host backend.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
from typing import Any

import accgraph
import accgraph.torch

# --- profiler setup (the blog's `profiler = Profiler(dump_fn)`) ---------------------------------
# Lazy delivery: replays are not synchronised one by one; reports arrive on flush() (or when the
# ring of unread replays is full). Profiler(delivery="immediate") reports after every replay.
profiler = accgraph.Profiler()


def dump(report: accgraph.ReplayReport) -> None:
    """The blog's dump_fn, one line per operation of a report."""
    origin = f"replay {report.replay_index}" if report.graph_id else "eager"
    for region in report:
        if region.depth == 1:
            layer = report[region.parent].metadata["layer"]
            print(f"[{origin}] [Layer {layer}] {region.name} took {region.duration_ns / 1e6:.3f} ms")


def define_model(torch: Any) -> Any:
    """model.py: the blog's model; each layer times its add and relu (its only change)."""

    class Layer(torch.nn.Module):
        def __init__(self, layer_id: int) -> None:
            super().__init__()
            self.layer_id = layer_id
            self.offset = torch.nn.Parameter(torch.randn(1000, 1000))
            self.relu = torch.nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with profiler.region(f"layer{self.layer_id}", layer=self.layer_id):
                with profiler.region("add"):
                    x = x + self.offset
                with profiler.region("relu"):
                    x = self.relu(x)
            return x

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([Layer(i) for i in range(5)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    return Model


def execution(torch: Any, Model: Any, replays: int) -> None:
    """execution.py: the blog's execution loop, which knows nothing of the profiling."""
    model = Model().cuda()
    static_input = torch.randn(1000, 1000, device="cuda")
    _ = model(static_input)  # eager: the same regions are timed without a graph
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _ = model(static_input)

    for i in range(replays):
        print(f"--- Replay Iteration {i} ---")
        static_input.copy_(torch.randn(1000, 1000, device="cuda"))
        graph.replay()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=3, help="graph replays (the blog's 3)")
    parser.add_argument("--out", default="", help="directory for the trace (default: a new "
                        "temporary one)")
    parser.add_argument("--allow-skip", action="store_true",
                        help="exit 0 where torch, a GPU or the cuda backend is missing")
    parser.add_argument("--standin", action="store_true",
                        help="no torch or GPU: the torch stand-in on the host backend (CI)")
    args = parser.parse_args()
    if args.standin:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "python"))
        import torch_standin

        torch_standin.install()  # `import torch` below gets it too

    try:
        accgraph.torch.instrument(profiler)  # every CUDA graph captured from now on is timed
    except accgraph.torch.TorchUnavailableError as e:
        print(f"transparent_profiling: cannot run here: {e.message}")
        return 0 if args.allow_skip else 1
    import torch

    profiler.add_sink(dump)
    try:
        execution(torch, define_model(torch), args.replays)
        profiler.flush()  # the reports of the last replays
    finally:
        accgraph.torch.uninstrument()

    replays = sum(1 for r in profiler.reports() if r.graph_id)
    print(f"\n{profiler.delivered} reports ({replays} replays, the rest eager); per region, "
          "in microseconds:")
    print(profiler.stats_table())
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="accgraph-torch-"))
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "transparent_profiling.json"
    profiler.write_chrome_trace(trace)
    print(f"wrote {trace} (open it in ui.perfetto.dev)")
    if replays != args.replays:
        print(f"transparent_profiling: expected {args.replays} replay reports, got {replays}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
