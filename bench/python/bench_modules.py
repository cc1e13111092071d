"""Module timing (accgraph.torch.instrument(prof, modules=...)) on a GPT-2-small-like model (12
blocks, d_model 768, 12 heads, bf16, eval) captured with torch.cuda.graph at two shapes: prefill
(batch 8, seq 256) and decode (batch 8, seq 1: a serving engine's decode step, hundreds of 1-5 us
kernels, where every marker shows) (numbers, not pass/fail; every figure against the untimed
graph of the same shape measured in the same run). Needs torch and a GPU; says why and exits 0
without them. The marker placement is the backend's default (exact on sm_90+;
ACCGRAPH_CUDA_MARKER_PLACEMENT=chained for the old one, to compare). Then the same for Hugging
Face transformers' GPT-2 (GPT2Model from its config, random weights, no download; the same
sizes, token ids in) where transformers is installed (--models picks).

Four graphs of the same forward: untimed (captured before instrument()), every module timed
(the stack: 122 regions), depth <= 2 (the model, blocks, ln_1, attn, ln_2, mlp, ln_f: 62) and
the blocks only (12), all timed by one Profiler (lazy delivery) and replayed in interleaved
rounds:

  1. device  device time per replay (CUDA events around --replays back-to-back replays, the
             order of the four graphs rotated each round; median over --rounds of each
             graph's time over the untimed graph's in the same round). Targets (issue 35), at
             both shapes: all <= 1.03x, depth <= 2 <= 1.02x, blocks <= 1.01x.
  2. host    host time per replay() call, --host-replays calls back to back after a
             synchronize (median over rounds), timed (every module) and untimed, and the
             difference (target: <= 1 us); the same in bursts of 4 calls (SHORT_BURST).
  3. check   each timed graph's output bitwise equal to the untimed graph's, and the regions per
             report.
  4. sampled every module timed by a sampling Profiler (Note [Untimed torch replays]), each in
             an instrument() period of its own: overhead=0.005 (the N each graph's first
             reports choose), sample_every=16, and sample_every=2**20 (all but the first
             replays untimed: what an untimed replay of a sampled graph costs); device time
             against the untimed graph (amortized over the replays run), host time per replay()
             against it, the outputs, and, for 1 in 16, how many modules `compare` flags
             against part 1's every-replay timing of the same modules (target: none).

    python bench/python/bench_modules.py [--shape prefill|decode|both] [--replays N]
        [--rounds R] [--host-replays K] [--models gpt,hf] [--standin]

--standin: without torch or a GPU, as CI runs it: the model's modules and tensors are the torch
stand-in's (tests/python/torch_standin.py: a tiny host op each) on accgraph's host backend; the
figures mean nothing, every accgraph.torch call runs as on the GPU.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import accgraph
import accgraph.torch
from bench_torch import load_torch  # this folder, the script's, is on sys.path

BLOCKS, D_MODEL, HEADS = 12, 768, 12
SHAPES = {"prefill": (8, 256), "decode": (8, 1)}  # (batch, sequence)
# name -> (depth, include): the filters of each timed graph.
CONFIGS: Dict[str, Tuple[Any, Any]] = {
    "all modules": (None, None),
    "depth <= 2": (2, None),
    "blocks": (None, r"^h\.\d+$"),
}
TARGETS = {"all modules": 1.03, "depth <= 2": 1.02, "blocks": 1.01}
MODELS = {"gpt": "GPT-2-small-like stack", "hf": "transformers GPT-2"}
# Part 2 also times bursts this short: if a timed replay() costs more host time in a long burst
# than in a short one, the launches wait for room in the GPU's queue, which the timed graph's
# marker nodes fill sooner, rather than for accgraph's own work.
SHORT_BURST = 4


def make_model(torch: Any) -> Any:
    """The GPT-2-like model of examples/python/torch_modules.py (its one definition), with
    BLOCKS blocks, bf16, eval."""
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "torch_modules.py"
    spec = importlib.util.spec_from_file_location("accgraph_example_torch_modules", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert (example.D_MODEL, example.HEADS) == (D_MODEL, HEADS), "the example's model changed"
    return example.GPT(BLOCKS).to(device="cuda", dtype=torch.bfloat16).eval()


def make_hf_model(torch: Any) -> Optional[Any]:
    """Hugging Face transformers' GPT-2 (12 layers, d_model 768, 12 heads, sdpa attention) from
    its config with random weights (no download), bf16, eval; None (said) without transformers."""
    try:
        from transformers import GPT2Config, GPT2Model
    except ImportError:
        print("  transformers is not installed: the Hugging Face GPT-2 part is skipped")
        return None
    config = GPT2Config(n_layer=BLOCKS, n_embd=D_MODEL, n_head=HEADS, n_positions=1024)
    config._attn_implementation = "sdpa"
    return GPT2Model(config).to(device="cuda", dtype=torch.bfloat16).eval()


def model_input(torch: Any, which: str, shape: str) -> Any:
    """The input of `which` ("gpt": hidden states; "hf": token ids) at `shape`."""
    batch, seq = SHAPES[shape]
    if which == "gpt":
        return torch.randn(batch, seq, D_MODEL, device="cuda", dtype=torch.bfloat16)
    return torch.randint(0, 50257, (batch, seq), device="cuda")


def forward_of(model: Any, which: str) -> Callable[[Any], Any]:
    """The call that gives `which`'s output tensor from its input."""
    if which == "gpt":
        return model
    return lambda x: model(input_ids=x).last_hidden_state


def capture(torch: Any, forward: Callable[[Any], Any], x: Any) -> Tuple[Any, Any]:
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        y = forward(x)
    torch.cuda.synchronize()
    return graph, y


def device_ms(torch: Any, graph: Any, replays: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / replays


def host_us(torch: Any, graph: Any, replays: int) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter_ns()
    for _ in range(replays):
        graph.replay()
    elapsed = time.perf_counter_ns() - t
    torch.cuda.synchronize()
    return elapsed / replays / 1e3


def ratios_against(torch: Any, graph: Any, untimed: Any, args: Any) -> Tuple[float, float]:
    """Median over --rounds of graph's device time over the untimed graph's (interleaved), and
    of the host time per replay() difference."""
    device: List[float] = []
    host: List[float] = []
    for r in range(args.rounds):
        pair = (graph, untimed) if r % 2 == 0 else (untimed, graph)
        ms = {id(g): device_ms(torch, g, args.replays) for g in pair}
        device.append(ms[id(graph)] / ms[id(untimed)])
        us = {id(g): host_us(torch, g, args.host_replays) for g in pair}
        host.append(us[id(graph)] - us[id(untimed)])
    return statistics.median(device), statistics.median(host)


def sampled_part(torch: Any, forward: Any, x: Any, untimed: Tuple[Any, Any], every_prof: Any,
                 shape: str, args: Any) -> bool:
    """Part 4; True when every sampled graph's output is bitwise the untimed graph's."""
    print(f"\n4. sampled timing, every module ({shape}; device time per replay over the untimed "
          f"graph's, amortized over the replays run, and host time per replay() minus the "
          f"untimed graph's, median of {args.rounds} rounds)")
    ok = True
    for name, options in (("overhead 0.5%", {"overhead": 0.005}),
                          ("1 in 16", {"sample_every": 16}),
                          ("untimed replays (1 in 2**20)", {"sample_every": 1 << 20})):
        prof = accgraph.Profiler(ring_depth=max(64, 2 * args.host_replays), keep_reports=4,
                                 **options)
        accgraph.torch.instrument(prof, modules=True, eager_modules=False)
        try:
            graph, y = capture(torch, forward, x)
            for _ in range(16):  # the probe, and the reports overhead= chooses N from
                graph.replay()
            torch.cuda.synchronize()
            prof.flush()
            device, host = ratios_against(torch, graph, untimed[0], args)
            prof.flush()
            foreign = accgraph.torch.foreign_graph(graph)
            counts = [c for c in prof.replay_counts() if foreign and c.graph_id == foreign.id]
            equal = bool(torch.equal(y, untimed[1]))
            ok = ok and equal
            said = (f"1 in {counts[0].sample_every}, {counts[0].timed} of {counts[0].run} timed, "
                    f"sampled {counts[0].sampled}") if counts else "not timed"
            print(f"  {name:<29} {device:7.3f}x  host {host:+6.2f} us  ({said}; outputs "
                  f"{'equal' if equal else 'NOT EQUAL'})")
            if options.get("sample_every") == 16:
                result = accgraph.torch.compare(every_prof, prof,
                                                labels=accgraph.torch.graph_labels())
                flagged = [c for c in result.changes]
                print(f"    compare, every replay timed (part 1) vs 1 in 16: {len(flagged)} "
                      f"module(s) flagged (target 0)")
                for c in flagged[:8]:  # what a flag is made of: each run's p50 and spread
                    a, b = c["a"], c["b"]
                    print(f"      {c['path']}: p50 {a['p50_ns'] / 1e3:.2f} -> "
                          f"{b['p50_ns'] / 1e3:.2f} us, spread [{a['p05_ns'] / 1e3:.2f}, "
                          f"{a['p95_ns'] / 1e3:.2f}] -> [{b['p05_ns'] / 1e3:.2f}, "
                          f"{b['p95_ns'] / 1e3:.2f}], samples {a['count']} -> {b['count']}")
        finally:
            accgraph.torch.uninstrument()
    return ok


def run_shape(torch: Any, which: str, forward: Any, shape: str, args: Any) -> bool:
    """Parts 1-4 of model `which` at one shape; True when every timed graph's output is
    bitwise equal."""
    batch, seq = SHAPES[shape]
    print(f"\n=== {MODELS[which]}, {shape} shape (batch {batch}, seq {seq}) ===")
    x = model_input(torch, which, shape)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):  # cuBLAS and attention kernels initialised outside the captures
            forward(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graphs: Dict[str, Tuple[Any, Any]] = {"untimed": capture(torch, forward, x)}
    # Enough ring for part 2's back-to-back calls not to wait for the device.
    prof = accgraph.Profiler(ring_depth=max(64, 2 * args.host_replays), keep_reports=4)
    accgraph.torch.instrument(prof, modules=True, eager_modules=False)
    try:
        print("regions per report of each timed graph:")
        for name, (depth, include) in CONFIGS.items():  # one graph per filter, one profiler
            accgraph.torch.set_module_filters(depth=depth, include=include)
            graphs[name] = capture(torch, forward, x)
            graphs[name][0].replay()
            torch.cuda.synchronize()
            prof.flush()
            regions = len(prof.reports()[-1])
            print(f"  {name:<12} {regions:4d} regions per report")
        names = list(graphs)
        ratios: Dict[str, List[float]] = {n: [] for n in names}
        per_replay: Dict[str, List[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            ms = {n: device_ms(torch, graphs[n][0], args.replays) for n in order}
            for n in names:
                per_replay[n].append(ms[n])
                ratios[n].append(ms[n] / ms["untimed"])
        host: Dict[Tuple[str, int], List[float]] = {}
        for r in range(args.rounds):
            for n in (("untimed", "all modules") if r % 2 == 0 else ("all modules", "untimed")):
                for calls in sorted({args.host_replays, SHORT_BURST}):
                    host.setdefault((n, calls), []).append(
                        host_us(torch, graphs[n][0], calls))
                    prof.flush()  # the next round's replays find their ring slots free
        prof.flush()
        y0 = graphs["untimed"][1]
        equal = {n: bool(torch.equal(graphs[n][1], y0)) for n in names}
        delivered = prof.delivered
        overhead = prof.reports()[-1].marker_overhead_ns if prof.reports() else 0
        resolution = prof.reports()[-1].resolution_ns if prof.reports() else 0
    finally:
        accgraph.torch.uninstrument()

    print(f"\n1. device time per replay ({shape}; {args.replays} replays x {args.rounds} rounds, "
          f"median; marker overhead {overhead} ns per transition, timer step {resolution} ns)")
    print(f"  {'graph':<12} {'ms/replay':>10} {'vs untimed':>11} {'target':>8}")
    for n in names:
        target = f"<= {TARGETS[n]:.2f}x" if n in TARGETS else ""
        print(f"  {n:<12} {statistics.median(per_replay[n]):10.3f} "
              f"{statistics.median(ratios[n]):10.3f}x {target:>8}")
    print(f"\n2. host time per replay() ({shape}; calls back to back after a synchronize x "
          f"{args.rounds} rounds, median)")
    for calls in (args.host_replays, SHORT_BURST):
        timed_us = statistics.median(host[("all modules", calls)])
        untimed_us = statistics.median(host[("untimed", calls)])
        print(f"  {calls:3d} calls: untimed {untimed_us:.2f} us, timed (every module) "
              f"{timed_us:.2f} us, difference {timed_us - untimed_us:+.2f} us"
              f"{' (target <= 1 us)' if calls == args.host_replays else ''}")
    print(f"\n3. outputs bitwise equal to the untimed graph's ({shape}): "
          + ", ".join(f"{n}: {'yes' if equal[n] else 'NO'}" for n in names if n != "untimed")
          + f"; {delivered} reports delivered")
    sampled_ok = sampled_part(torch, forward, x, graphs["untimed"], prof, shape, args)
    return all(equal.values()) and sampled_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("prefill", "decode", "both"), default="both",
                        help="which shapes (default: both, prefill first)")
    parser.add_argument("--replays", type=int, default=50, help="replays per round (part 1)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds (parts 1 and 2)")
    parser.add_argument("--host-replays", type=int, default=20,
                        help="back-to-back replay() calls per round (part 2)")
    parser.add_argument("--models", default="gpt,hf",
                        help="comma-separated: gpt (the stack), hf (transformers' GPT-2, where "
                             "transformers is installed)")
    parser.add_argument("--standin", action="store_true",
                        help="no torch or GPU: the torch stand-in on the host backend (CI)")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models: {', '.join(unknown)} unknown: give gpt, hf or gpt,hf")
    torch = load_torch("bench_modules", args.standin)
    if torch is None:
        return 0
    shapes = ["prefill", "decode"] if args.shape == "both" else [args.shape]
    ok = []
    for which in models:
        if which == "hf" and args.standin:
            print("\n(--standin: transformers' GPT-2 needs the real torch: skipped)")
            continue
        torch.manual_seed(0)
        model = make_model(torch) if which == "gpt" else make_hf_model(torch)
        if model is None:
            continue
        ok += [run_shape(torch, which, forward_of(model, which), shape, args)
               for shape in shapes]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
