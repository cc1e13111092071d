"""The loop run_foreign_launch.sh counts: N launches of a host graph, on the launching thread,
either by its owner alone or through a timed ForeignGraph.launch the way accgraph.torch launches
a torch graph (Note [Wrapping CUDAGraph]). The owner is an accgraph Graph
whose replay stands in for torch's CUDAGraph.replay (a Python function calling a bound native
method). Usage: python foreign_launch.py MODE N, MODE one of
  owner     owner_replay(graph) N times: the untimed launch
  owner-arg foreign.launch(stream, owner_replay, owner=graph, trusted=True): the launch
            accgraph.torch's native replay makes (Note [Owner replay])
  method    foreign.launch(stream, owner_replay.__get__(graph), trusted=True): a bound method
            per launch, as accgraph.torch passed before the sixth 2026-11-27 session
  torch-untimed, torch-timed
            g.replay() of a graph captured through accgraph.torch with the torch stand-in of
            tests/python/torch_standin.py (CUDAGraph.replay a Python method over a host Graph):
            without regions (PyTorch's method runs alone), and with one region (accgraph.torch's
            native replay, then ForeignGraph.launch): the whole per-replay path of bench_torch
            part 5, on the host
Setup, one flush at the end and exit cancel out between two counts (run_foreign_launch.sh)."""

import pathlib
import sys

import accgraph

mode, count = sys.argv[1], int(sys.argv[2])
if mode not in ("owner", "owner-arg", "method", "torch-untimed", "torch-timed"):
    sys.exit(f"foreign_launch.py: MODE is owner, owner-arg, method, torch-untimed or "
             f"torch-timed, not {mode!r}")
if mode.startswith("torch"):
    import accgraph.torch
    import accgraph.torch.testing

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "python"))
    from torch_standin import make_torch

    torch = make_torch()
    # Entered for the process; `standin` keeps the block referenced (a collected
    # generator-based context manager would leave it at once).
    standin = accgraph.torch.testing.use_torch(torch, backend="host")
    standin.__enter__()
    prof = accgraph.Profiler(keep_reports=0)
    accgraph.torch.instrument(prof)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        if mode == "torch-timed":
            with prof.region("work"):
                torch.cuda.current_stream().work(1e-6)
        else:
            torch.cuda.current_stream().work(1e-6)
    replay = g.replay
    for _ in range(count):
        replay()
    torch.cuda.current_stream().synchronize()
    prof.flush()
    sys.exit(0)
queue = accgraph.Stream("host")
wrapped = accgraph.Stream.wrap("host", 0, queue.native_handle)  # what accgraph sees of it
graph = accgraph.Graph("host")
buffer = accgraph.Buffer(queue, 64)
profiler = accgraph.Profiler(keep_reports=0)
foreign = accgraph.ForeignGraph("host")
profiler.attach(foreign)
graph.capture_begin(queue)
foreign.capture_begin(wrapped)
with profiler.region(wrapped, "fill"):
    wrapped.fill(buffer, 1)
foreign.capture_end()
graph.capture_end()


class Owner:
    """Stands in for torch.cuda.CUDAGraph: replay() is a Python method over a native launch."""

    def replay(self) -> None:
        graph.replay(queue)


owner = Owner()
owner_replay = Owner.replay
launch = foreign.launch
if mode == "owner":
    for _ in range(count):
        owner_replay(owner)
elif mode == "method":
    bind = owner_replay.__get__
    for _ in range(count):
        launch(wrapped, bind(owner), trusted=True)
else:
    for _ in range(count):
        launch(wrapped, owner_replay, owner=owner, trusted=True)
queue.synchronize()
profiler.flush()
