"""Records the fixture of tests/python/test_torch_trace.py on a GPU: a torch.profiler (Kineto,
CUPTI) trace of a few replays of a tiny model captured with torch.cuda.graph and timed by
accgraph (regions per module, glue between modules, nested regions sharing markers), and
accgraph's reports of those replays (and of replays before and after the traced ones) as CSV.

    python tests/python/data/record_torch_trace.py [OUT_DIR]     # default: next to this file

writes OUT_DIR/torch_trace.json.gz (the trace as torch.profiler exported it, gzipped),
OUT_DIR/torch_trace_reports.csv (Profiler.write_csv) and OUT_DIR/torch_trace_meta.json (torch,
CUDA and device versions, replay counts), then annotates the trace and checks it as the test
does, printing the summary. Needs torch with CUDA and accgraph's cuda backend."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import sys
import time
from typing import Any, Dict

import accgraph

WARMUP_REPLAYS = 3  # reported, not traced
AFTER_REPLAYS = 2  # reported after the traced ones, not traced


def _model(torch: Any, prof: accgraph.Profiler) -> Any:
    class Block(torch.nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.name = f"h.{i}"
            self.ln = torch.nn.LayerNorm(64)
            self.fc = torch.nn.Linear(64, 256)
            self.proj = torch.nn.Linear(256, 64)

        def forward(self, x: Any) -> Any:
            with prof.region(self.name, cls="Block"):
                with prof.region(f"{self.name}.ln"):
                    y = self.ln(x)
                with prof.region(f"{self.name}.mlp"):
                    with prof.region(f"{self.name}.mlp.fc"):
                        y = torch.relu(self.fc(y))
                    with prof.region(f"{self.name}.mlp.proj"):
                        y = self.proj(y)
                return x + y  # glue: the residual add, in the block's own time

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(i) for i in range(2)])
            self.head = torch.nn.Linear(64, 16)

        def forward(self, x: Any) -> Any:
            with prof.region("model", cls="Model"):
                for block in self.blocks:
                    x = block(x)
                with prof.region("head"):
                    return self.head(x)

    return Model().cuda().eval()


def record(out_dir: os.PathLike, traced_replays: int = 4) -> Dict[str, Any]:
    """Records into `out_dir`; returns the metadata written, plus the profiler (key
    "profiler", not written)."""
    import torch
    import accgraph.torch as agt
    from torch.profiler import ProfilerActivity, profile

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prof = accgraph.Profiler(keep_reports=None)
    agt.instrument(prof)
    try:
        model = _model(torch, prof)
        x = torch.randn(32, 64, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):  # PyTorch's warm-up before a capture
            for _ in range(2):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g):
            model(x)

        def replay(i: int) -> None:
            g.replay()
            torch.cuda.synchronize()  # distinct gaps between replays (Note [Trace replay
            time.sleep(0.0001 * (1 + i % 3))  # matching], 4), as a real loop's jitter gives

        for i in range(WARMUP_REPLAYS):
            replay(i)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tp:
            for i in range(traced_replays):
                replay(i)
        for i in range(AFTER_REPLAYS):
            replay(i)
        prof.flush()
        raw = out / "torch_trace.json"
        tp.export_chrome_trace(str(raw))
        events = json.loads(raw.read_text())["traceEvents"]
        with open(raw, "rb") as src, gzip.open(out / "torch_trace.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
        prof.write_csv(out / "torch_trace_reports.csv")
        replays = [r for r in prof.reports() if r.graph_id != 0]  # the one graph (0: eager)
        meta = {
            "launched_while_tracing": traced_replays,
            # the replays whose end marker kernel the trace holds
            "traced_replays": sum(e.get("cat") == "kernel" and "marker_end_kernel" in
                                  e.get("name", "") for e in events),
            "reported_replays": len(replays),
            "regions_per_replay": len(replays[0]),
            "marker_strategy": replays[0].marker_strategy,
            "resolution_ns": replays[0].resolution_ns,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(),
            "accgraph": accgraph.__version__,
            "programmatic_markers": os.environ.get("ACCGRAPH_CUDA_PROGRAMMATIC_MARKERS", "1"),
        }
        (out / "torch_trace_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    finally:
        agt.uninstrument()
    meta["profiler"] = prof
    return meta


def _diagnose(trace: pathlib.Path, source: Any, kernels: Any) -> None:
    """What annotate_trace saw, when it found no match: the sequences of marker kernels and how
    closely each fits the reports (rerun with TOLERANCE_US=... if the fits are just over)."""
    from accgraph.torch import _trace as tt

    names = tt._KernelNames()
    reports = tt._reports_of(source, names, kernels)
    sequences = tt._sequences(tt._kernels(tt._load_trace(trace)["traceEvents"], names))
    print(f"diagnosis: {len(sequences)} marker sequences in the trace "
          f"(markers: {sorted({len(q.records) for q in sequences})}; record kernels: "
          f"{sorted({q.records[0].kind for q in sequences})}), {len(reports)} reports "
          f"(markers: {sorted({len(r.times) for r in reports})})")
    for q in sequences:
        fits = [x for x in (tt._shape_residual(q, r) for r in reports) if x is not None]
        print(f"  sequence at {q.records[0].anchor} ns: best fit {min(fits, default=None)} ns")


def main() -> int:
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent
    meta = record(out_dir)
    prof = meta.pop("profiler")
    from accgraph.torch import annotate_trace

    annotated = out_dir / "torch_trace_annotated.json.gz"
    tolerance = float(os.environ.get("TOLERANCE_US", "1.0"))
    # The CSV holds no report source: its marker kernels are those the backend named in the
    # profiler's reports (Note [Marker kernel names]).
    kernels = prof.reports()[0].marker_kernels
    for source in (out_dir / "torch_trace_reports.csv", prof):
        try:
            summary = annotate_trace(out_dir / "torch_trace.json.gz", annotated, source,
                                     tolerance_us=tolerance, marker_kernels=kernels)
        except accgraph.Error:
            _diagnose(out_dir / "torch_trace.json.gz", source, kernels)
            raise
        print(f"annotate_trace from {type(source).__name__}: {summary}")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from test_torch_trace import check_annotated, load

    check_annotated(load(annotated), summary)
    print(json.dumps(meta, indent=1))
    for name in ("torch_trace.json.gz", "torch_trace_reports.csv", "torch_trace_meta.json"):
        print(f"{out_dir / name}: {os.path.getsize(out_dir / name)} bytes")
    annotated.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
