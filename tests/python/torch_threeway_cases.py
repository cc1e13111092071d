"""What PyTorch's own CUDA-graph tests check, as cases that test_torch_graphs_threeway.py runs
three ways, each in a process of its own: plain, under accgraph.torch.instrument(prof) and under
instrument(prof, modules=True). Module timing must change nothing else PyTorch does (issue 36),
so every case returns what can be compared: its outcome (the exception type, or "ok"), the
allocator's statistics around its steps (deltas), and its outputs (bitwise, as digests).

    python torch_threeway_cases.py MODE [CASE ...]   # MODE: plain, instrument or modules;
                                                      # prints one JSON object {case: result}

Every case seeds what it draws and runs its tensors through nn.Modules where that is natural, so
that module timing has regions to record (inside the captures: into the graphs)."""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import sys
import threading
from typing import Any, Callable, Dict, List

import torch

STATS = ("segment", "reserved_bytes", "active", "active_bytes", "allocated_bytes")
POOLS = ("small_pool", "large_pool")


def settle() -> None:
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()


def stats() -> Dict[str, int]:
    s = torch.cuda.memory_stats()
    return {f"{k}.{p}": int(s.get(f"{k}.{p}.current", 0)) for k in STATS for p in POOLS}


def delta(after: Dict[str, int], before: Dict[str, int]) -> Dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def digest(t: Any) -> str:
    if t is None:
        return "None"
    data = t.detach().contiguous().cpu()
    raw = bytes(data.reshape(-1).view(torch.uint8).tolist()) if data.numel() else b""
    return f"{tuple(data.shape)}:{data.dtype}:{hashlib.sha256(raw).hexdigest()[:32]}"


class Scale(torch.nn.Module):
    """x * 1.5 + 0.25: elementwise kernels only (nothing to initialise in a capture)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1.5 + 0.25


class AddOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone() + 1


class Rand(torch.nn.Module):
    def forward(self, n: int) -> torch.Tensor:
        return torch.rand(n, device="cuda")


def mlp(width_in: int = 32, hidden: int = 128, width_out: int = 128) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(width_in, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, width_out)).cuda()


# --- the cases ---------------------------------------------------------------------------------


def case_make_graphed_callables_shared_pool() -> Dict[str, Any]:
    """PyTorch's test_graph_make_graphed_callables_same_pool: three models graphed one by one
    into one pool (forward and backward captures), then run and differentiated; the statistics
    once the graphed models are dropped."""
    torch.manual_seed(5)
    torch.cuda.manual_seed(5)
    models = [mlp() for _ in range(3)]
    settle()
    before = stats()
    pool = torch.cuda.graph_pool_handle()
    graphed = []
    for model in models:
        x = torch.randn(64, 32, device="cuda")
        graphed.append(torch.cuda.make_graphed_callables(copy.deepcopy(model), (x,), pool=pool))
    result: Dict[str, Any] = {"after_capture": delta(stats(), before)}
    outputs = []
    for _ in range(2):  # twice: the second run replays over the first's pool memory
        for model, graphed_model in zip(models, graphed):
            x = torch.randn(64, 32, device="cuda")
            y, yg = model(x), graphed_model(x)
            y.norm().backward()
            yg.norm().backward()
            outputs.append(digest(yg))
            outputs += [digest(p.grad) for p in graphed_model.parameters()]
            outputs.append(bool(torch.equal(y, yg)))
    result["outputs"] = outputs
    del graphed, model, graphed_model, y, yg, x
    settle()
    result["after_delete"] = delta(stats(), before)
    return result


def case_cycle_collection_during_a_capture() -> Dict[str, Any]:
    """A captured torch graph held only by a garbage cycle while another capture runs the first
    call of a model of 1,500 modules: where the cycle collector runs inside that capture, it
    frees the graph there, which PyTorch 2.11 refuses and which invalidates the capture ("CUDA
    warning: operation not permitted when stream is capturing (function reset)": the same_pool
    failure of issue 36). Plain PyTorch allocates almost nothing in that capture, module timing
    names 1,500 modules in it (Note [No collection inside captures])."""
    scale = Scale()
    x = torch.ones(256, device="cuda")
    scale(x)  # the kernels load outside any capture
    torch.cuda.synchronize()
    big = torch.nn.Sequential(*[Scale() for _ in range(1500)])
    old = torch.cuda.CUDAGraph()
    with torch.cuda.graph(old):
        y_old = scale(x)
    old.replay()
    gc.collect()  # what is alive now is old; the cycle below is the young generation
    holder: List[Any] = [old, y_old]
    holder.append(holder)
    del old, holder
    collected_in_capture = []

    def note(phase: str, info: Dict[str, Any]) -> None:
        if phase == "start" and torch.cuda.is_current_stream_capturing():
            collected_in_capture.append(info.get("generation"))

    gc.callbacks.append(note)
    result: Dict[str, Any] = {}
    try:
        # capture_begin itself, not torch.cuda.graph: that may collect before it begins
        # (torch.compiler.config.force_cudagraph_gc), which would leave nothing to test.
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            g.capture_begin()
            y = big(x)
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        g.replay()
        torch.cuda.synchronize()
        result["output"] = digest(y)
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        result["outcome"] = type(e).__name__
    finally:
        gc.callbacks.remove(note)
    result["collections_in_capture"] = len(collected_in_capture)
    settle()
    return result


def case_memory_stats_after_graph_deletion() -> Dict[str, Any]:
    """PyTorch's test_graph_memory_stats_and_use_result_after_destroy_graph: the statistics
    before the capture, after it, and after the graph was deleted (its result still used)."""
    result: Dict[str, Any] = {}
    s = torch.cuda.Stream()
    add_one = AddOne()
    for numel in (512 // 4, (1 << 20) // 4, ((1 << 20) + 512) // 4, ((10 << 20) + 512) // 4):
        settle()
        g = torch.cuda.CUDAGraph()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            a = torch.ones((numel,), device="cuda")
            pre = stats()
            g.capture_begin()
            b = a.clone()
            for _ in range(5):
                b = add_one(b)
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        gc.collect()
        result[f"{numel}.capture"] = delta(stats(), pre)
        g.replay()
        result[f"{numel}.sum"] = b.sum().item()
        del g
        gc.collect()
        torch.cuda.empty_cache()
        result[f"{numel}.delete"] = delta(stats(), pre)
        result[f"{numel}.sum_after_delete"] = b.sum().item()
        del a, b
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return result


def case_generators_and_graphs() -> Dict[str, Any]:
    """PyTorch's test_memory_stats_of_multiple_generators_and_graphs: graphs registered with
    several generator states; the statistics after the tasks and after cleanup."""
    result: Dict[str, Any] = {}
    rand = Rand()
    for num_graphs, num_generators in ((1, 1), (3, 2), (10, 20)):
        settle()
        baseline = stats()
        graphs = [torch.cuda.CUDAGraph() for _ in range(num_graphs)]
        default_generator = torch.cuda.default_generators[0]
        generators = [default_generator.graphsafe_get_state()]
        for _ in range(1, num_generators):
            generators.append(default_generator.clone_state())
        outputs = []
        for graph in graphs:
            for state in generators:
                graph.register_generator_state(state)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                graph.capture_begin()
                out = rand(1)
                graph.capture_end()
            torch.cuda.current_stream().wait_stream(s)
            graph.replay()
            outputs.append(out)
        key = f"{num_graphs}x{num_generators}"
        result[f"{key}.tasks"] = delta(stats(), baseline)
        result[f"{key}.outputs"] = [digest(o) for o in outputs]
        del outputs, out
        while graphs:
            graph = graphs.pop()
            del graph
        settle()
        result[f"{key}.cleanup"] = delta(stats(), baseline)
    return result


def case_rng_in_graphs() -> Dict[str, Any]:
    """PyTorch's test_graph_rng_functional: dropout captured, replayed between eager calls and
    under new seeds; each replay draws fresh numbers."""
    result: Dict[str, Any] = {}
    dropout = torch.nn.Dropout(p=0.3)
    a = torch.randn(10000, device="cuda")
    graph_in = a.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda.manual_seed(5)
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        graph_out = dropout(dropout(graph_in))
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    outputs = []
    g.replay()
    outputs.append(digest(graph_out))
    eager = dropout(graph_out)
    graph_in.copy_(eager)
    g.replay()
    outputs.append(digest(graph_out))
    for seed in (6, 128, 9999):
        torch.cuda.manual_seed(seed)
        graph_in.copy_(a)
        for _ in range(3):
            g.replay()
            outputs.append(digest(graph_out))
    result["outputs"] = outputs
    torch.cuda.synchronize()
    return result


def case_optimizer_captured_whole() -> Dict[str, Any]:
    """Whole-network capture (PyTorch's CUDA-graph docs, TestCudaOptims): forward, backward and
    a capturable Adam step in one graph, replayed on new data."""
    torch.manual_seed(7)
    torch.cuda.manual_seed(7)
    model = mlp(16, 32, 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, capturable=True)
    loss_fn = torch.nn.MSELoss()
    static_in = torch.randn(8, 16, device="cuda")
    static_target = torch.randn(8, 4, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_in), static_target).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = loss_fn(model(static_in), static_target)
        static_loss.backward()
        opt.step()
    losses = []
    for _ in range(5):
        static_in.copy_(torch.randn(8, 16, device="cuda"))
        static_target.copy_(torch.randn(8, 4, device="cuda"))
        g.replay()
        losses.append(digest(static_loss))
    torch.cuda.synchronize()
    return {"losses": losses, "parameters": [digest(p) for p in model.parameters()]}


def case_record_stream() -> Dict[str, Any]:
    """PyTorch's test_graph_record_stream: a capture defers reclaiming memory used across
    streams (a cudaEventQuery of an end-of-life event would break the capture)."""
    torch.cuda.empty_cache()
    scale = Scale()
    potential_problem = torch.zeros((3,), device="cuda")
    a = torch.zeros((3,), device="cuda")
    s0, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.stream(s0):
        potential_problem.record_stream(s0)
        torch.cuda._sleep(50_000_000)
        potential_problem.fill_(1.0)
    del potential_problem
    with torch.cuda.stream(s1):
        g.capture_begin()
        b = scale(a)
        s2.wait_stream(s1)
        with torch.cuda.stream(s2):
            b.fill_(1.0)
            b.record_stream(s2)
            del b
        s1.wait_stream(s2)
        c = scale(a)
        g.capture_end()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    d = torch.zeros((3,), device="cuda")  # process_events reclaims b now
    return {"output": digest(c), "after": digest(d)}


def case_concurrent_replay() -> Dict[str, Any]:
    """Two graphs replayed concurrently on two streams, then from two threads at once (each
    graph from one thread at a time)."""
    torch.manual_seed(3)
    size = 1 << 20
    a = torch.randn(size, device="cuda")
    scale = Scale()
    graphs, outs = [], []
    for _ in range(2):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = a
            for _ in range(8):
                y = scale(y)
        graphs.append(g)
        outs.append(y)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    s2.wait_stream(torch.cuda.current_stream())
    for _ in range(5):
        with torch.cuda.stream(s1):
            graphs[0].replay()
        with torch.cuda.stream(s2):
            graphs[1].replay()
    torch.cuda.synchronize()
    result: Dict[str, Any] = {"streams": [digest(o) for o in outs]}
    errors: List[str] = []

    def replay(index: int, stream: Any) -> None:
        try:
            with torch.cuda.stream(stream):
                for _ in range(20):
                    graphs[index].replay()
            stream.synchronize()
        except Exception as e:  # noqa: BLE001 - the outcome is what is compared
            errors.append(type(e).__name__)

    threads = [threading.Thread(target=replay, args=(i, s)) for i, s in enumerate((s1, s2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    result["threads"] = [digest(o) for o in outs]
    result["thread_errors"] = sorted(errors)
    return result


class Huge(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(2**40, device="cuda") + x.sum()


def case_out_of_memory_in_a_capture() -> Dict[str, Any]:
    """PyTorch's test_graph_capture_oom: an allocation past the device's memory inside a
    capture raises torch.cuda.OutOfMemoryError; a capture after it works."""
    settle()
    before = stats()
    result: Dict[str, Any] = {}
    x = torch.ones(4, device="cuda")
    try:
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            Huge()(x)
        result["outcome"] = "ok"
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        result["outcome"] = type(e).__name__
        result["out_of_memory"] = isinstance(e, torch.cuda.OutOfMemoryError)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = Scale()(x)
    g.replay()
    torch.cuda.synchronize()
    result["after"] = digest(y)
    del g, y
    settle()
    result["cleanup"] = delta(stats(), before)
    return result


CASES: Dict[str, Callable[[], Dict[str, Any]]] = {
    name[len("case_"):]: fn for name, fn in list(globals().items()) if name.startswith("case_")
}


def run(mode: str, names: List[str]) -> Dict[str, Any]:
    """Runs the cases `names` (all when empty) in `mode`; {case: result}."""
    import accgraph
    import accgraph.torch

    prof = accgraph.Profiler()
    if mode == "instrument":
        accgraph.torch.instrument(prof)
    elif mode == "modules":
        accgraph.torch.instrument(prof, modules=True)
    elif mode != "plain":
        raise SystemExit(f"torch_threeway_cases.py: unknown mode {mode!r} (plain, instrument, "
                         "modules)")
    results: Dict[str, Any] = {}
    for name in names or list(CASES):
        try:
            result = CASES[name]()
            result.setdefault("outcome", "ok")
        except Exception as e:  # noqa: BLE001 - the outcome is what is compared
            result = {"outcome": f"{type(e).__name__}: {e}"[:300]}
        results[name] = result
    if mode != "plain":
        accgraph.torch.uninstrument()
    results["_profiler"] = {"delivered": prof.delivered}
    return results


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2:])))
