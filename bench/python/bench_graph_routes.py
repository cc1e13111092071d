"""Host cost per replay() of a timed torch.cuda.CUDAGraph on accgraph.torch's two routes (Note
[Lifecycle hooks] in accgraph/torch/_graphs.py), against the same graph untimed, measured in the
same run (numbers, not pass/fail):

  untimed  captured without instrument(): PyTorch's replay() alone
  patch    instrument(route="patch"), the default: the instance's native timed replay
  hooks    instrument(route="hooks"): PyTorch >= 2.14's replay-start hook (skipped, with the
           reason, on an older PyTorch)

The graph: --kernels small element-wise kernels, --regions regions around them. Each round times
--replays back-to-back replay() calls per route (host time of the loop, divided), then
synchronizes (or flushes) outside the timing; rounds interleave the routes; medians. It prints
each route's microseconds per replay, the extra cost over untimed, and hooks minus patch, with
the rule of issue 46: keep the hooks only where they are cheaper than the patch, never when they
cost more than 0.2 us per replay over it.

    python bench/python/bench_graph_routes.py [--replays N] [--rounds R] [--kernels K]
        [--regions G] [--standin]

--standin: without torch or a GPU, as CI runs it (tests/python/test_bench_scripts.py): the torch
stand-in of tests/python/torch_standin.py with PyTorch 2.14's lifecycle hooks, on accgraph's host
backend; the figures mean nothing there, every accgraph call runs as on the GPU.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from typing import Any, Dict, List

import accgraph
import accgraph.torch
from bench_torch import load_torch  # this folder, the script's, is on sys.path

THRESHOLD_US = 0.2  # hooks may cost at most this much more than the patch per replay


def capture(torch: Any, prof: Any, kernels: int, regions: int, x: Any) -> Any:
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.graph(graph, stream=stream):
        per_region = max(1, kernels // max(1, regions))
        done = 0
        for r in range(regions):
            with prof.region(f"r{r}"):
                for _ in range(per_region):
                    x.add_(1)
                    done += 1
        for _ in range(kernels - done):
            x.add_(1)
    torch.cuda.synchronize()
    return graph


def per_replay_us(torch: Any, graph: Any, replays: int, prof: Any = None) -> float:
    start = time.perf_counter_ns()
    for _ in range(replays):
        graph.replay()
    took = time.perf_counter_ns() - start
    if prof is not None:
        prof.flush()
    torch.cuda.synchronize()
    return took / replays / 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=2000, help="replay() calls per round")
    parser.add_argument("--rounds", type=int, default=15, help="rounds (medians)")
    parser.add_argument("--kernels", type=int, default=10, help="kernels in the graph")
    parser.add_argument("--regions", type=int, default=3, help="regions around them")
    parser.add_argument("--standin", action="store_true",
                        help="the torch stand-in on the host backend (CI, no GPU)")
    args = parser.parse_args()
    if args.standin:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "python"))
        import torch_standin

        torch_standin.install(lifecycle_hooks=True)
    torch = load_torch("bench_graph_routes")
    if torch is None:
        return 0
    x = torch.zeros(1024, device="cuda")
    untimed = capture(torch, accgraph.Profiler(), args.kernels, 0, x)  # the same kernels
    # A graph is timed only while the instrumentation it was captured under is in effect, so
    # each route gets its own period: its graph captured, then rounds that time the untimed
    # graph and the route's graph in turn.
    times: Dict[str, List[float]] = {"untimed": []}
    timed: Dict[str, str] = {}
    for route in ("patch", "hooks"):
        prof = accgraph.Profiler()
        try:
            accgraph.torch.instrument(prof, route=route)
        except accgraph.UnavailableError as e:
            print(f"route {route}: skipped: {e.message}")
            continue
        try:
            graph = capture(torch, prof, args.kernels, args.regions, x)
            times[route] = []
            for _ in range(args.rounds):
                times["untimed"].append(per_replay_us(torch, untimed, args.replays))
                times[route].append(per_replay_us(torch, graph, args.replays, prof))
            count = accgraph.torch.foreign_graph(graph).replay_count
            timed[route] = (f"{route}: {count} replays timed, {len(prof.reports())} reports "
                            "delivered")
        finally:
            accgraph.torch.uninstrument()
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"graph: {args.kernels} kernels, {args.regions} regions; {args.rounds} rounds of "
          f"{args.replays} replay() calls, medians")
    print(f"{'route':<8} {'us/replay':>10} {'over untimed':>13}")
    for name, value in medians.items():
        print(f"{name:<8} {value:>10.3f} {value - medians['untimed']:>+13.3f}")
    for line in timed.values():
        print(line)
    if "hooks" in medians and "patch" in medians:
        delta = medians["hooks"] - medians["patch"]
        keep = "hooks" if delta < 0 else "patch"
        if delta > THRESHOLD_US:
            keep = "patch"
        print(f"hooks - patch: {delta:+.3f} us per replay (threshold +{THRESHOLD_US} us): keep "
              f"the {keep} route")
    return 0


if __name__ == "__main__":
    sys.exit(main())
