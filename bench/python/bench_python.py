"""Binding overhead of the Python package (numbers, not pass/fail), each against a baseline
measured in the same run:

  host   Graph.replay() called from Python vs the same replay() in a C++ loop
         (accgraph.benchmarks.replay_loop_ns), on a host graph of one fill
  host   Profiler.region() enter+exit (`with prof.region(s, "r"): pass`) vs the C++ RAII region
         in a C++ loop (accgraph.benchmarks.region_loop_ns), eager regions on a host stream
  cuda   Graph.replay() of a CUDA graph of 10 kernels vs torch.cuda.CUDAGraph.replay() of the
         same 10 kernels, host time of one call after a synchronize (median); needs torch and
         a GPU, skipped with the reason otherwise. The kernels are torch's in-place adds,
         captured into the accgraph graph on an accgraph stream (torch launches them on it).
         Also the same graph's C++ replay() (accgraph.benchmarks.replay_loop_ns(g, 1), one call after a
         synchronize) against torch: what the launch costs without the Python binding.

    python bench/python/bench_python.py [--calls N] [--rounds R] [--skip-cuda]

Prints a table: per-call host time (median over rounds, ns) and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable, List, Optional, Tuple

import accgraph
import accgraph.benchmarks


def median_per_call(run: Callable[[int], int], calls: int, rounds: int) -> float:
    """Median over `rounds` of run(calls) / calls, where run returns nanoseconds."""
    run(max(1, calls // 10))  # warm-up
    return statistics.median(run(calls) / calls for _ in range(rounds))


def bench_host_replay(calls: int, rounds: int) -> Tuple[float, float]:
    stream = accgraph.Stream("host")
    buf = accgraph.Buffer(stream, 64)
    g = accgraph.Graph("host")
    with g.capture(stream):
        stream.fill(buf, 1)

    def python_loop(n: int) -> int:
        replay = g.replay
        start = time.perf_counter_ns()
        for _ in range(n):
            replay()
        took = time.perf_counter_ns() - start
        stream.synchronize()
        return took

    def cpp_loop(n: int) -> int:
        took = accgraph.benchmarks.replay_loop_ns(g, n)
        stream.synchronize()
        return took

    return median_per_call(python_loop, calls, rounds), median_per_call(cpp_loop, calls, rounds)


def bench_host_region(calls: int, rounds: int) -> Tuple[float, float]:
    stream = accgraph.Stream("host")
    prof = accgraph.Profiler(keep_reports=0)

    def python_loop(n: int) -> int:
        region = prof.region(stream, "r")
        start = time.perf_counter_ns()
        for _ in range(n):
            with region:
                pass
        took = time.perf_counter_ns() - start
        prof.flush()
        return took

    def cpp_loop(n: int) -> int:
        took = accgraph.benchmarks.region_loop_ns(prof, stream, "r", n)
        prof.flush()
        return took

    return median_per_call(python_loop, calls, rounds), median_per_call(cpp_loop, calls, rounds)


def bench_cuda_replay(rounds: int) -> Tuple[Optional[Tuple[float, float, float]], str]:
    """(accgraph median ns, torch median ns, accgraph C++ median ns), or None and why it was
    skipped."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    cuda = {i.name: i for i in accgraph.backends()}.get("cuda")
    if cuda is None or not cuda.available:
        return None, f"the cuda backend is unavailable: {cuda.reason if cuda else 'not built'}"
    if not torch.cuda.is_available():
        return None, "torch sees no GPU"

    kernels = 10
    x = torch.zeros(1024, device="cuda")

    def work() -> None:
        for _ in range(kernels):
            x.add_(1.0)

    # accgraph: torch launches its kernels on the accgraph stream while it captures.
    stream = accgraph.Stream("cuda")
    ours = accgraph.Graph("cuda")
    torch_view = torch.cuda.ExternalStream(stream.cuda_stream)
    work()  # torch's lazy initialisation outside any capture
    torch.cuda.synchronize()
    with torch.cuda.stream(torch_view):
        with ours.capture(stream):
            work()

    theirs = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        with torch.cuda.graph(theirs, stream=side):
            work()

    def one_call(replay: Callable[[], None], sync: Callable[[], None]) -> List[int]:
        samples = []
        for _ in range(rounds):
            sync()
            start = time.perf_counter_ns()
            replay()
            samples.append(time.perf_counter_ns() - start)
        sync()
        return samples

    for _ in range(10):  # warm-up of both
        ours.replay()
        theirs.replay()
    torch.cuda.synchronize()
    stream.synchronize()
    before = x[0].item()
    a = one_call(ours.replay, stream.synchronize)
    b = one_call(theirs.replay, torch.cuda.synchronize)
    c = []
    for _ in range(rounds):
        stream.synchronize()
        c.append(accgraph.benchmarks.replay_loop_ns(ours, 1))
    stream.synchronize()
    after = x[0].item()
    expected = before + kernels * 3 * rounds
    if after != expected:
        return None, f"the graphs did not run their kernels (x went from {before} to {after}, " \
                     f"expected {expected})"
    return (statistics.median(a), statistics.median(b), statistics.median(c)), ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per host round")
    parser.add_argument("--rounds", type=int, default=15, help="rounds (cuda: samples x 20)")
    parser.add_argument("--skip-cuda", action="store_true", help="do not run the CUDA part")
    args = parser.parse_args()

    rows = []
    py, cpp = bench_host_replay(args.calls, args.rounds)
    rows.append(("host Graph.replay()", "C++ replay()", py, cpp))
    py, cpp = bench_host_region(args.calls, args.rounds)
    rows.append(("host region enter+exit", "C++ RAII region", py, cpp))
    skipped = ""
    if not args.skip_cuda:
        result, skipped = bench_cuda_replay(args.rounds * 20)
        if result:
            ours, theirs, cpp = result
            rows.append(("cuda Graph.replay(), 10 kernels", "torch CUDAGraph.replay()", ours,
                         theirs))
            rows.append(("cuda C++ replay(), 10 kernels", "torch CUDAGraph.replay()", cpp,
                         theirs))
    else:
        skipped = "--skip-cuda"

    print(f"accgraph {accgraph.__version__}, Python {sys.version.split()[0]}")
    print(f"{'measured':34} {'ns/call':>9}  {'baseline':26} {'ns/call':>9}  {'ratio':>6}")
    for name, base, value, baseline in rows:
        print(f"{name:34} {value:9.0f}  {base:26} {baseline:9.0f}  {value / baseline:6.2f}")
    if skipped:
        print(f"cuda part skipped: {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
