"""Ranks "on several hosts" over torch.distributed: N processes (torchrun's variables, started
here), each reading a host clock skewed by its own offset and drift (ACCGRAPH_TEST_HOST_CLOCK_SKEW,
Note [Host clock skew hook]), measure their host offsets with
accgraph.torch.measure_host_clock_offset over the job's process group, time a
barrier-aligned region, and write their traces; the parent merges them and checks that every
skew is recovered within the reported uncertainty and that each rank's region lands, on the
merged timeline, inside the bracket [go sent, ack received] that rank 0 recorded, within it.
tests/perfetto/multihost_skew.cpp is the same check on loopback sockets, without torch.

    python tests/python/multihost_skew_torch.py --spawn 2                    # Gloo, host backend
    python tests/python/multihost_skew_torch.py --spawn 2 --pg nccl --device cuda   # 1 GPU/rank
    python tests/python/multihost_skew_torch.py --spawn 2 --pg gloo --device cuda   # GPUs shared

--device cuda times the region on the CUDA backend (GPU rank % GPUs, its clock calibrated);
--pg nccl needs one GPU per rank (NCCL refuses two ranks on one GPU): with one GPU, use gloo.
Exit status 0 when every check passed, 1 otherwise, 2 when it cannot run (the reason printed).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

# (ns, ppm) per rank: hundreds of microseconds, some drifting 50 ppm; up to 8 ranks.
SKEWS = [(100_000, 0.0), (-350_000, 50.0), (800_000, -50.0), (250_000, 0.0),
         (-600_000, -50.0), (450_000, 50.0), (-150_000, 0.0), (700_000, 20.0)]
ROUNDS = 4
DRIFT_SECONDS = 0.8


def skew_at(skew, t, anchor):
    offset, ppm = skew
    return offset + ppm * 1e-6 * (t - anchor)


def run_rank(args):
    import torch
    import torch.distributed as dist

    import accgraph
    import accgraph.torch as atd

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out = Path(args.out)
    if args.device == "cuda":
        gpu = rank % torch.cuda.device_count()
        torch.cuda.set_device(gpu)
    dist.init_process_group(args.pg, rank=rank, world_size=world)
    tensor_device = "cuda" if args.pg == "nccl" else "cpu"
    token = torch.zeros(1, dtype=torch.int64, device=tensor_device)
    start = atd.measure_host_clock_offset(rounds=64)
    time.sleep(DRIFT_SECONDS)
    if args.device == "cuda":
        stream = accgraph.Stream("cuda", gpu)
    else:
        stream = accgraph.Stream("host")
    clock = accgraph.calibrate_clock(stream, samples=200)
    profiler = accgraph.Profiler(keep_reports=100)
    scratch = accgraph.Buffer(stream, 4096)

    def aligned():
        with profiler.region(stream, "aligned"):
            stream.fill(scratch, 1)
        stream.synchronize()

    brackets = []
    for rnd in range(ROUNDS):
        if rank != 0:
            dist.recv(token, src=0)
            aligned()
            dist.send(token, dst=0)
            continue
        for k in range(world):
            go = accgraph.host_clock_ns()
            if k == 0:
                aligned()
            else:
                dist.send(token, dst=k)
                dist.recv(token, src=k)
            brackets.append((rnd, k, go, accgraph.host_clock_ns()))
    profiler.flush()
    time.sleep(DRIFT_SECONDS)
    end = atd.measure_host_clock_offset(rounds=64)
    profiler.write_trace(str(out / f"rank{rank}.pftrace"), rank=rank, world_size=world,
                         host=f"simulated-host-{rank}", clocks=[clock],
                         host_clock_offsets=[start, end])
    if rank == 0:
        (out / "brackets.json").write_text(json.dumps(brackets))
    dist.barrier()
    dist.destroy_process_group()
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(out, world, anchor):
    import accgraph

    paths = [out / f"rank{r}.pftrace" for r in range(world)]
    summary = accgraph.merge_traces(paths, out / "merged.pftrace")
    failures = []
    uncertainty = []
    for k, merged in enumerate(summary.ranks):
        host_u = 0
        if len(merged.host_clock_offsets) != 2:
            failures.append(f"rank {k}: {len(merged.host_clock_offsets)} host offsets, not 2")
            uncertainty.append(0)
            continue
        for h in merged.host_clock_offsets:
            t = h.measured_at_ns - skew_at(SKEWS[k], h.measured_at_ns, anchor)
            expected = skew_at(SKEWS[k], t, anchor) - skew_at(SKEWS[0], t, anchor)
            error = h.offset_ns - expected
            print(f"rank {k}: host offset {h.offset_ns} ns, injected {expected:.0f} ns, error "
                  f"{error:.0f} ns, uncertainty +-{h.uncertainty_ns} ns")
            if abs(error) > h.uncertainty_ns:
                failures.append(f"rank {k}: host offset off by {error:.0f} ns, more than its "
                                f"uncertainty {h.uncertainty_ns} ns")
            host_u = max(host_u, h.uncertainty_ns)
        uncertainty.append(merged.clocks[0].uncertainty_ns + host_u)
    begins = aligned_begins(out / "merged.pftrace")
    brackets = json.loads((out / "brackets.json").read_text())
    for rnd, k, go, ack in brackets:
        ranks_begins = sorted(begins.get(k, []))
        if len(ranks_begins) != ROUNDS:
            failures.append(f"rank {k}: {len(ranks_begins)} aligned regions, not {ROUNDS}")
            continue
        b, u = ranks_begins[rnd], uncertainty[k]
        print(f"rank {k} round {rnd}: begin - go {b - go} ns, ack - go {ack - go} ns, +-{u} ns")
        if b < go - u or b > ack + u:
            failures.append(f"rank {k} round {rnd}: merged begin {b} outside [{go}, {ack}] by "
                            f"more than +-{u} ns")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


def aligned_begins(path):
    """Per rank, the merged begin times of the "aligned" slices (decoded with the perfetto
    package's protos when present, else a minimal reader of accgraph's own format is not
    available: the check needs `perfetto`)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace  # type: ignore

    trace = Trace()
    trace.ParseFromString(Path(path).read_bytes())
    rank_of, parent = {}, {}
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                rank_of[d.uuid] = int(d.process.process_name.split(":")[0].split()[1])
            if d.HasField("parent_uuid"):
                parent[d.uuid] = d.parent_uuid
    begins = {}
    for p in trace.packet:
        if (p.HasField("track_event") and p.track_event.type == 1  # TYPE_SLICE_BEGIN
                and p.track_event.name == "aligned"):
            track = p.track_event.track_uuid
            while track not in rank_of:
                track = parent[track]
            begins.setdefault(rank_of[track], []).append(p.timestamp)
    return begins


def cannot_run_reason(args):
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        return f"torch is not importable: {e}"
    if not dist.is_available():
        return "this PyTorch has no torch.distributed"
    if args.pg == "nccl" and (not dist.is_nccl_available()
                              or torch.cuda.device_count() < max(2, args.spawn)):
        return "--pg nccl needs NCCL and one GPU per rank (use --pg gloo with one GPU)"
    if args.device == "cuda" and not torch.cuda.is_available():
        return "--device cuda: torch sees no GPU"
    try:
        import perfetto.protos.perfetto.trace.perfetto_trace_pb2  # noqa: F401
    except ImportError as e:
        return f"the perfetto package is not importable ({e}): pip install perfetto protobuf"
    import accgraph
    if not accgraph.perfetto_supported():
        return "this accgraph was built without Perfetto support"
    cuda = {b.name: b for b in accgraph.backends()}.get("cuda")
    if args.device == "cuda" and (cuda is None or not cuda.available):
        return f"--device cuda: accgraph's cuda backend is unavailable ({cuda and cuda.reason})"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spawn", type=int, default=2, help="ranks (2 to 8)")
    parser.add_argument("--pg", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--device", choices=["host", "cuda"], default="host")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if "RANK" in os.environ and "ACCGRAPH_TEST_HOST_CLOCK_SKEW" in os.environ:
        return run_rank(args)
    reason = cannot_run_reason(args)
    if reason:
        print(f"SKIPPED: {reason}")
        return 2
    world = max(2, min(args.spawn, len(SKEWS)))
    out = Path(args.out or f"/tmp/accgraph-skew-torch-{os.getpid()}")
    out.mkdir(parents=True, exist_ok=True)
    anchor = time.time_ns()
    port = free_port()
    children = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   ACCGRAPH_TEST_HOST_CLOCK_SKEW=f"{SKEWS[rank][0]},{SKEWS[rank][1]},{anchor}")
        children.append(subprocess.Popen(
            [sys.executable, __file__, "--pg", args.pg, "--device", args.device, "--out",
             str(out)], env=env))
    codes = []
    for child in children:
        try:
            codes.append(child.wait(timeout=240))
        except subprocess.TimeoutExpired:
            for c in children:
                c.kill()
            print("FAILED: a rank did not finish within 240 s")
            return 1
    if any(codes):
        print(f"FAILED: rank exit codes {codes}")
        return 1
    print(f"{world} ranks, process group {args.pg}, device clock {args.device}")
    return check(out, world, anchor)


if __name__ == "__main__":
    sys.exit(main())
