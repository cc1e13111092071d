"""An NCCL all-reduce captured into a PyTorch CUDA graph with torch.distributed on every rank (one
process per GPU), timed by accgraph.torch per replay: each step is a fill standing in for compute
on a "compute" lane, then the all-reduce on a "comm" lane with the metadata eager traces show
(accgraph.torch.collective_metadata). Each rank writes rank<N>.pftrace with its GPU's clock
offset; rank 0 merges them into all.pftrace and prints how well the ranks' all-reduce ends line
up. The Python counterpart of examples/nccl_allreduce/nccl_allreduce.cpp. Needs torch with NCCL
and a GPU per rank.

    torchrun --nproc-per-node N examples/python/nccl_allreduce_torch.py [options]
    python examples/python/nccl_allreduce_torch.py [--spawn N] [options]   (N: every GPU)

    options: [--replays R] [--elements E] [--out DIR] [--allow-skip] [--standin]

Without torch, CUDA, NCCL or accgraph's cuda backend it says why and exits 1, or 0 with
--allow-skip. With one GPU it runs one rank (the alignment figure needs two).
--standin runs one rank without torch, NCCL or a GPU, as CI does: the torch stand-in of
tests/python/torch_standin.py (its one-rank torch.distributed, the all-reduce a tiny op) on
accgraph's host backend. It checks the calls, not the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import socket
import sys
import tempfile
import time
from typing import Any, List, Optional, Sequence, Tuple

import accgraph
import accgraph.torch

# NVLink multicast (NVLS) off: the GPU machines this runs on require it (set before NCCL starts;
# the ranks inherit it).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

NAME = "nccl_allreduce_torch"
CLOCK_SAMPLES = 200
WARMUP_REPLAYS = 10  # replays of each graph before its timed batch


def cannot_run_reason() -> Optional[str]:
    """Why this cannot run here (None: it can). Touches no GPU beyond counting them."""
    try:
        import torch
    except ImportError as e:
        return f"PyTorch cannot be imported ({e}): install a CUDA build of PyTorch"
    if not torch.cuda.is_available():
        return (f"PyTorch {torch.__version__} sees no CUDA device "
                f"(torch.version.cuda={torch.version.cuda})")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        return f"PyTorch {torch.__version__} was built without NCCL (torch.distributed)"
    cuda = {b.name: b for b in accgraph.backends()}.get("cuda")
    if cuda is None or not cuda.available:
        reason = cuda.reason if cuda is not None else "not built into this accgraph"
        return f"accgraph's cuda backend is unavailable ({reason})"
    if not accgraph.perfetto_supported():
        return "this accgraph was built without libprotobuf: it cannot write .pftrace traces"
    return None


def percentile(values: Sequence[float], p: float) -> float:
    """As the C++ example: the element at p * n of the sorted values (0 when none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else 0.0


def step(torch: Any, dist: Any, tensor: Any, rank: int,
         profiler: Optional[accgraph.Profiler]) -> None:
    """One step: a fill standing in for compute (it produces the all-reduce's input, rank + 1 in
    every element, so each replay reduces the same values), then the all-reduce. With a profiler
    each is a region on PyTorch's current stream (inside a capture: recorded into the graph)."""
    if profiler is None:
        tensor.fill_(float(rank + 1))
        dist.all_reduce(tensor)
        return
    with profiler.region("step"):
        with profiler.region("compute", lane="compute",
                             bytes=tensor.numel() * tensor.element_size()):
            tensor.fill_(float(rank + 1))
        md = accgraph.torch.collective_metadata("all_reduce", tensor)
        with profiler.region("all_reduce", lane="comm", **md):
            dist.all_reduce(tensor)


def measure(torch: Any, graph: Any, replays: int) -> Tuple[float, float]:
    """Per replay, in microseconds: host time of the launch loop (time.perf_counter) and device
    time (CUDA events around it), after WARMUP_REPLAYS replays."""
    for _ in range(WARMUP_REPLAYS):
        graph.replay()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    t1 = time.perf_counter()
    stop.record()
    stop.synchronize()
    return (t1 - t0) * 1e6 / replays, start.elapsed_time(stop) * 1e3 / replays


def all_reduce_ends(reports: Sequence[accgraph.ReplayReport], graph_id: int, replays: int,
                    offset_ns: int) -> List[Optional[Tuple[int, int]]]:
    """Per timed replay k: the all_reduce region's end, raw (this GPU's clock) and on the host
    clock (end_ns - offset_ns); None where the report is missing or not measurable."""
    ends: List[Optional[Tuple[int, int]]] = [None] * replays
    for report in reports:
        k = report.replay_index - WARMUP_REPLAYS
        if report.graph_id != graph_id or not 0 <= k < replays:
            continue
        for region in report:
            if region.name == "all_reduce" and region.measurable:
                ends[k] = (region.end_ns, region.end_ns - offset_ns)
    return ends


def print_alignment(gathered: Sequence[List[Optional[Tuple[int, int]]]], replays: int) -> None:
    """Rank 0: the spread (latest minus earliest end) of the all-reduce's end across ranks."""
    if len(gathered) < 2:
        print(f"all-reduce end spread across ranks: needs 2 ranks or more (this run has "
              f"{len(gathered)})", flush=True)
        return
    raw_spread: List[float] = []
    aligned_spread: List[float] = []
    for k in range(replays):
        ends = [rank_ends[k] for rank_ends in gathered]
        if any(e is None for e in ends):
            continue
        raw = [e[0] for e in ends if e is not None]
        host = [e[1] for e in ends if e is not None]
        raw_spread.append((max(raw) - min(raw)) / 1000.0)
        aligned_spread.append((max(host) - min(host)) / 1000.0)
    print(f"all-reduce end spread across ranks over {len(aligned_spread)} replays: raw median "
          f"{percentile(raw_spread, 0.5):.2f} us (p95 {percentile(raw_spread, 0.95):.2f}), "
          f"clock-aligned median {percentile(aligned_spread, 0.5):.2f} us "
          f"(p95 {percentile(aligned_spread, 0.95):.2f})", flush=True)


def run_rank(rank: int, world: int, device: int, init_method: str, args: argparse.Namespace,
             out: Optional[pathlib.Path]) -> int:
    """One rank on GPU `device`; 0 when its all-reduce result and its reports are right."""
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=world)
    graphs: List[Any] = []
    try:
        if out is None:  # torchrun without --out: rank 0's temporary directory, for every rank
            shared = [str(pathlib.Path(tempfile.mkdtemp(prefix="accgraph-nccl-"))) if rank == 0
                      else None]
            dist.broadcast_object_list(shared, src=0)
            out = pathlib.Path(str(shared[0]))
        tensor = torch.empty(args.elements, dtype=torch.float32, device="cuda")

        # Eager warm-up: NCCL sets up its connections on the first collective, not in a capture
        # (on a side stream, as PyTorch's CUDA graph notes advise before a capture).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step(torch, dist, tensor, rank, None)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()

        # This GPU's clock against CLOCK_REALTIME, when profiling starts: before instrument()
        # and any capture (it runs work on the device).
        clock = accgraph.calibrate_clock(accgraph.torch.current_stream(), samples=CLOCK_SAMPLES)

        # The same step twice: untimed (captured before instrument(): the cost baseline) and
        # timed. Thread-local capture: NCCL's and PyTorch's watchdog threads make CUDA calls
        # while we capture.
        untimed = torch.cuda.CUDAGraph()
        graphs.append(untimed)
        with torch.cuda.graph(untimed, capture_error_mode="thread_local"):
            step(torch, dist, tensor, rank, None)

        # Every timed replay's report is kept: the warm-ups, then the timed batch.
        profiler = accgraph.Profiler(keep_reports=args.replays + WARMUP_REPLAYS + 16)
        accgraph.torch.instrument(profiler)  # every CUDA graph captured from now on is timed
        timed = torch.cuda.CUDAGraph()
        graphs.append(timed)
        with torch.cuda.graph(timed, capture_error_mode="thread_local"):
            step(torch, dist, tensor, rank, profiler)
        foreign = accgraph.torch.foreign_graph(timed)
        if foreign is None:
            raise RuntimeError("the timed graph was not captured by accgraph.torch")

        untimed_host, untimed_device = measure(torch, untimed, args.replays)
        timed_host, timed_device = measure(torch, timed, args.replays)
        profiler.flush()
        torch.cuda.synchronize()

        # The result of the last replay: every element is 1 + 2 + ... + world.
        expected = world * (world + 1) / 2.0
        wrong = int((tensor != expected).sum().item())

        reports = profiler.reports()
        trace = out / f"rank{rank}.pftrace"
        profiler.write_trace(trace, rank=rank, world_size=world, host=socket.gethostname(),
                             clocks=[clock])
        ends = all_reduce_ends(reports, foreign.id, args.replays, clock.offset_ns)
        timed_reports = sum(1 for e in ends if e is not None)
        print(f"rank {rank}: GPU {device}, clock offset {clock.offset_ns} ns +- "
              f"{clock.uncertainty_ns} ns ({CLOCK_SAMPLES} samples), {timed_reports} of "
              f"{args.replays} timed replays reported, {wrong} wrong elements, trace {trace}",
              flush=True)
        print(f"rank {rank}: per replay: untimed host {untimed_host:.2f} us, device "
              f"{untimed_device:.2f} us; timed host {timed_host:.2f} us, device "
              f"{timed_device:.2f} us", flush=True)

        # Every rank's ends, gathered after every rank wrote its trace.
        gathered: List[Any] = [None] * world
        dist.all_gather_object(gathered, ends)
        if rank == 0:
            print_alignment(gathered, args.replays)
        dist.barrier(device_ids=[device])
        if rank == 0:
            merged = out / "all.pftrace"
            summary = accgraph.merge_traces([out / f"rank{r}.pftrace" for r in range(world)],
                                            merged)
            print(f"merged {len(summary.ranks)} rank traces into {merged} (alignment "
                  f"uncertainty +- {summary.alignment_uncertainty_ns} ns)", flush=True)
            for merged_rank in summary.ranks:
                clocks = ", ".join(f"{c.backend} device {c.device}: offset {c.offset_ns} ns +- "
                                   f"{c.uncertainty_ns} ns" for c in merged_rank.clocks)
                uncalibrated = (f"; uncalibrated: {', '.join(merged_rank.uncalibrated)}"
                                if merged_rank.uncalibrated else "")
                print(f"  rank {merged_rank.rank} on {merged_rank.host}: {clocks}{uncalibrated}",
                      flush=True)
            for warning in summary.warnings:
                print(f"warning: {warning}", flush=True)
        if wrong != 0 or timed_reports != args.replays:
            print(f"{NAME}: rank {rank}: expected every element {expected} and "
                  f"{args.replays} reports", flush=True)
            return 1
        return 0
    finally:
        # The graphs go before the communicator their NCCL kernels use; reset() while
        # instrumented also delivers the timed graph's pending reports.
        for graph in graphs:
            graph.reset()
        accgraph.torch.uninstrument()
        dist.destroy_process_group()


def spawned_rank(rank: int, world: int, init_method: str, args: argparse.Namespace,
                 out: str) -> None:
    """A rank started by torch.multiprocessing.spawn (rank r on GPU r)."""
    code = run_rank(rank, world, rank, init_method, args, pathlib.Path(out))
    if code != 0:
        sys.exit(code)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawn", type=int, default=None, metavar="N",
                        help="start N ranks here, rank r on GPU r (default: every GPU; not under "
                        "torchrun)")
    parser.add_argument("--replays", type=int, default=1000, help="timed replays per graph")
    parser.add_argument("--elements", type=int, default=1 << 20,
                        help="float32 elements all-reduced")
    parser.add_argument("--out", default="", help="directory for the traces (default: a new "
                        "temporary one)")
    parser.add_argument("--allow-skip", action="store_true",
                        help="exit 0 where torch, CUDA, NCCL or the cuda backend is missing")
    parser.add_argument("--standin", action="store_true",
                        help="one rank, no torch or GPU: the torch stand-in on the host backend "
                        "(CI)")
    args = parser.parse_args()
    if args.replays < 1 or args.elements < 1:
        parser.error("--replays and --elements must be at least 1")
    under_torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if under_torchrun and args.spawn is not None:
        parser.error("--spawn starts the ranks itself: do not combine it with torchrun")

    if args.standin:
        if not accgraph.perfetto_supported():
            print(f"{NAME}: cannot run here: this accgraph was built without libprotobuf")
            return 0 if args.allow_skip else 1
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "python"))
        import torch_standin

        torch_standin.install()  # `import torch` and torch.distributed below get it too
        out = pathlib.Path(args.out) if args.out else pathlib.Path(
            tempfile.mkdtemp(prefix="accgraph-nccl-"))
        out.mkdir(parents=True, exist_ok=True)
        print(f"{NAME}: 1 rank (stand-in), {args.replays} replays of {args.elements} float32 "
              f"elements, traces in {out}", flush=True)
        return run_rank(0, 1, 0, "standin://", args, out)

    reason = cannot_run_reason()
    if reason is not None:
        print(f"{NAME}: cannot run here: {reason}")
        return 0 if args.allow_skip else 1
    import torch
    import torch.multiprocessing

    gpus = torch.cuda.device_count()
    out = pathlib.Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    if under_torchrun:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        if local_rank >= gpus:
            print(f"{NAME}: rank {rank}: LOCAL_RANK {local_rank} but {gpus} GPU(s) visible: "
                  "start at most one rank per GPU (--nproc-per-node)")
            return 1
        return run_rank(rank, world, local_rank, "env://", args, out)

    world = gpus if args.spawn is None else args.spawn
    if not 1 <= world <= gpus:
        parser.error(f"--spawn {world}: {gpus} GPU(s) visible, one rank per GPU")
    if out is None:
        out = pathlib.Path(tempfile.mkdtemp(prefix="accgraph-nccl-"))
    init_method = f"tcp://127.0.0.1:{free_port()}"
    print(f"{NAME}: {world} rank(s), {args.replays} replays of {args.elements} float32 "
          f"elements, traces in {out}", flush=True)
    try:
        # On a failure in one rank the others are terminated and the failure is raised here.
        torch.multiprocessing.spawn(spawned_rank, args=(world, init_method, args, str(out)),
                                    nprocs=world, join=True)
    except Exception as e:  # ProcessRaisedException, ProcessExitedException
        print(f"{NAME}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
