"""How long accgraph.torch.annotate_trace takes on traces of many replays (issue 36, audit row
A45: 8,000 traced replays against the last 1,024 reports took 71-79 s before Note [Matching
cost]; the target is under 5 s on a 2-core machine).

Each trace is Kineto-shaped (the kernels torch.profiler exports: per replay a record kernel per
marker, work kernels between them, the end kernel, one correlation id per graph launch, ts in
absolute microseconds with three decimals), built from made-up marker times, with the reports
CSV Profiler.write_csv would write for the replays kept. No GPU, no torch, no backend needed:

    build/venv/bin/python bench/python/bench_annotate.py            # 1k, 3k, 8k replays
    build/venv/bin/python bench/python/bench_annotate.py 8000 --keep 1024 --periodic

--periodic: replays back to back at a fixed period (50 ns of jitter), the case where many
replay offsets fit (Note [Matching cost]); default: gaps between replays of 5-60 us drawn at
random (a host's launch jitter). Prints one line per trace: replays, reports kept, replays
annotated, seconds (the median of --repeat runs) and the time per traced replay."""

from __future__ import annotations

import argparse
import gzip
import pathlib
import random
import statistics
import sys
import tempfile
import time

RECORD = "void accgraph::detail::cuda::(anonymous namespace)::marker_record_kernel(unsigned long*)"
END = ("void accgraph::detail::cuda::(anonymous namespace)::marker_end_kernel(unsigned long*, "
       "unsigned long, unsigned long const*, unsigned long*, unsigned long*, unsigned int, "
       "unsigned int, unsigned int)")
BLOCKS = 4


def layout():
    """(path, depth, begin marker, end marker) of a model of BLOCKS blocks, each an attention
    and an MLP with glue between them, and a head: 2 + 3 * BLOCKS regions, shared edges."""
    regions = []
    m = 1
    for b in range(BLOCKS):
        regions += [(f"model/h.{b}", 1, m, m + 3), (f"model/h.{b}/attn", 2, m, m + 1),
                    (f"model/h.{b}/mlp", 2, m + 2, m + 3)]
        m += 3
    regions.append(("model/head", 1, m, m + 1))
    return [("model", 0, 0, m + 1)] + regions, m + 2


def us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def build(replays: int, keep: int, periodic: bool, epoch: bool = False, seed: int = 0):
    """(trace JSON text, reports CSV text). The trace's clock: the recorded fixture's (ts like
    4882595085667.751, 16 digits), or with `epoch` microseconds since the epoch (19 digits,
    more than a double holds: every ts is kept as its text, Note [Exact numbers])."""
    rng = random.Random(seed)
    regions, markers = layout()
    t = 1_000_000_000
    times = []
    for _ in range(replays):
        marks = [t]
        for _ in range(markers - 1):
            marks.append(marks[-1] + rng.randrange(8_000, 30_000))
        times.append(marks)
        t = marks[-1] + (150_000 + rng.randrange(-50, 50) if periodic
                         else rng.randrange(5_000, 60_000))
    offset = (1_790_857_026_000_000_123 if epoch else 4_882_595_085_667_751) - times[0][0]
    events = []

    def kernel(name, start, dur, corr):
        events.append(f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, '
                      f'"ts": {us(start)}, "dur": {us(dur)}, '
                      f'"args": {{"device": 0, "stream": 7, "correlation": {corr}}}}}')

    for n, marks in enumerate(times):
        for i, m in enumerate(marks):
            kernel(RECORD, m + offset, 300, 1000 + n)
            if i + 1 < len(marks):
                kernel("ampere_sgemm_128x64_tn", m + offset + 500, marks[i + 1] - m - 1000,
                       1000 + n)
        kernel(END, marks[-1] + offset + 400, 1200, 1000 + n)
    trace = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + "\n]}\n"
    rows = ["graph_id,replay_index,backend,device,path,depth,stream_id,lane,start_ns,end_ns,"
            "duration_ns,self_ns,metadata"]
    for n in range(replays - keep, replays):
        m = times[n]
        for path, depth, a, b in regions:
            rows.append(f"1,{n},cuda,0,{path},{depth},1,,{m[a]},{m[b]},{m[b] - m[a]},,")
    return trace, "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("replays", nargs="*", type=int, default=[1000, 3000, 8000])
    parser.add_argument("--keep", type=int, default=1024,
                        help="reports kept: the last KEEP replays (default 1024, "
                             "Profiler's default keep_reports; 0: all)")
    parser.add_argument("--periodic", action="store_true",
                        help="replays back to back at a fixed period")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--gz", action="store_true", help="trace and output as .json.gz")
    parser.add_argument("--epoch", action="store_true",
                        help="ts in microseconds since the epoch (19 digits)")
    args = parser.parse_args()
    import accgraph
    from accgraph.torch import annotate_trace

    # The CSV holds no report source: the marker kernels its traces hold (the cuda backend's).
    kernels = accgraph.MarkerKernels(record_at_start=["marker_record_kernel"],
                                     record_at_end=["marker_record_programmatic_kernel",
                                                    "marker_record_placed_kernel"],
                                     end=["marker_end_kernel"])

    print(f"bench_annotate: {len(layout()[0])} regions and {layout()[1]} markers per replay, "
          f"{'periodic' if args.periodic else 'jittered'} gaps between replays, ts "
          f"{'since the epoch' if args.epoch else 'as the recorded fixture'}"
          f"{', .json.gz' if args.gz else ''}")
    print(f"{'replays':>8} {'reports':>8} {'annotated':>10} {'seconds':>8} {'us/replay':>10}")
    with tempfile.TemporaryDirectory() as d:
        directory = pathlib.Path(d)
        for replays in args.replays:
            keep = min(args.keep or replays, replays)
            trace, reports = build(replays, keep, args.periodic, args.epoch)
            src = directory / ("trace.json.gz" if args.gz else "trace.json")
            if args.gz:
                src.write_bytes(gzip.compress(trace.encode(), compresslevel=1))
            else:
                src.write_text(trace)
            (directory / "reports.csv").write_text(reports)
            out = directory / ("out.json.gz" if args.gz else "out.json")
            seconds = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                summary = annotate_trace(src, out, directory / "reports.csv",
                                         marker_kernels=kernels)
                seconds.append(time.perf_counter() - start)
            median = statistics.median(seconds)
            print(f"{replays:>8} {keep:>8} {summary['replays']:>10} {median:>8.2f} "
                  f"{median / replays * 1e6:>10.0f}", flush=True)
            if summary["replays"] != keep:
                print(f"bench_annotate: {summary['replays']} of {keep} reports annotated",
                      file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
