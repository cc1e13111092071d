"""accgraph.torch on PyTorch and a GPU: the blog's model (five layers of add + relu on 1000x1000)
captured with torch.cuda.graph and replayed, one report per replay with its regions; the same
region code timed eagerly; replays on another stream; 10,000 replays through a ring of 4;
make_graphed_callables and torch.compile(mode="reduce-overhead"); instrument/uninstrument leave
torch.cuda.CUDAGraph as it was. Skipped, with the reason, without torch, a GPU or accgraph's cuda
backend (test_torch_standin.py runs the wrappers on the host backend everywhere)."""

import os
import warnings

import pytest

import accgraph
from conftest import UNAVAILABLE

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"torch is not importable: {e}", allow_module_level=True)
if not torch.cuda.is_available():  # pragma: no cover
    pytest.skip(f"torch {torch.__version__} sees no CUDA device (torch.version.cuda="
                f"{torch.version.cuda})", allow_module_level=True)
if UNAVAILABLE.get("cuda"):  # pragma: no cover
    reason = f"backend cuda unavailable: {UNAVAILABLE['cuda']}"
    if "cuda" in os.environ.get("ACCGRAPH_TEST_REQUIRE_BACKENDS", "").split(","):
        pytest.fail(f"{reason}, but it is required (ACCGRAPH_TEST_REQUIRE_BACKENDS) and torch "
                    "sees a GPU", pytrace=False)
    pytest.skip(reason, allow_module_level=True)

import accgraph.torch  # noqa: E402

LAYERS = 5
SIZE = 1000
PATHS = [p for i in range(LAYERS) for p in (f"layer{i}", f"layer{i}/add", f"layer{i}/relu")]
METHODS = ("capture_begin", "capture_end_pre", "capture_end", "replay", "reset")


class Layer(torch.nn.Module):
    def __init__(self, layer_id: int, prof: accgraph.Profiler) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.offset = torch.nn.Parameter(torch.randn(SIZE, SIZE))
        self.relu = torch.nn.ReLU()
        self.prof = prof

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.prof.region(f"layer{self.layer_id}", layer=self.layer_id):
            with self.prof.region("add"):
                x = x + self.offset
            with self.prof.region("relu"):
                x = self.relu(x)
        return x


class Model(torch.nn.Module):
    def __init__(self, prof: accgraph.Profiler) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(i, prof) for i in range(LAYERS)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.fixture(autouse=True)
def clean_instrumentation():
    yield
    accgraph.torch.uninstrument()


def graph_reports(prof, graph):
    foreign = accgraph.torch.foreign_graph(graph)
    assert foreign is not None, "the graph was captured untimed"
    return [r for r in prof.reports() if r.graph_id == foreign.id]


def check_model_report(report):
    assert [r.path for r in report] == PATHS
    for r in report:
        assert r.measurable and r.duration_ns > 0, r
        assert r.metadata == ({"layer": r.name[5:]} if r.depth == 0 else {})
    for i in range(LAYERS):
        layer, add, relu = report[3 * i], report[3 * i + 1], report[3 * i + 2]
        assert layer.start_ns <= add.start_ns and add.end_ns == relu.start_ns <= relu.end_ns
        assert relu.end_ns <= layer.end_ns


def capture_model(prof):
    model = Model(prof).cuda()
    static_input = torch.randn(SIZE, SIZE, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_output = model(static_input)
    return model, g, static_input, static_output


def test_the_blog_model_one_report_per_replay():
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        model, g, static_input, static_output = capture_model(prof)
        for _ in range(3):
            static_input.copy_(torch.randn(SIZE, SIZE, device="cuda"))
            g.replay()
        expected = static_input.clone()
        for layer in model.layers:  # the reference, without regions
            expected = torch.relu(expected + layer.offset)
        torch.cuda.synchronize()
        prof.flush()
    torch.testing.assert_close(static_output, expected)  # the markers left the results alone
    reports = graph_reports(prof, g)
    assert [r.replay_index for r in reports] == [0, 1, 2]
    for report in reports:
        assert report.backend == "cuda" and report.device == torch.cuda.current_device()
        check_model_report(report)
    assert accgraph.torch.foreign_graph(g).replay_count == 3


def test_the_same_region_code_is_timed_eagerly():
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        model = Model(prof).cuda()
        x = torch.randn(SIZE, SIZE, device="cuda")
        model(x)
        prof.flush()
    reports = prof.reports()
    assert [r.graph_id for r in reports] == [0] * LAYERS  # one eager tree per layer
    assert [t.path for r in reports for t in r] == PATHS
    assert all(t.duration_ns > 0 for r in reports for t in r)
    current = accgraph.torch.current_stream()
    assert current.native_handle == torch.cuda.current_stream().cuda_stream
    assert {t.stream_id for r in reports for t in r} == {current.id}


def test_replays_on_another_stream_are_reported():
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        _, g, _, _ = capture_model(prof)
        s2 = torch.cuda.Stream()
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            for _ in range(3):
                g.replay()
        torch.cuda.current_stream().wait_stream(s2)
        prof.flush()
        assert (torch.cuda.current_device(), s2.cuda_stream) in accgraph.torch._streams
    reports = graph_reports(prof, g)
    assert [r.replay_index for r in reports] == [0, 1, 2]
    for report in reports:
        check_model_report(report)


def test_ten_thousand_replays_through_a_ring_of_four_are_all_delivered():
    prof = accgraph.Profiler(ring_depth=4, keep_reports=8)
    with accgraph.torch.instrumented(prof):
        _, g, _, _ = capture_model(prof)
        for _ in range(10_000):
            g.replay()
        prof.flush()
    assert prof.delivered == 10_000
    stats = {s.path: s for s in prof.stats()}
    assert set(stats) == set(PATHS)
    assert all(s.count + s.unmeasurable == 10_000 and s.unmeasurable == 0 for s in stats.values())
    assert all(s.min_ns > 0 for s in stats.values())


def test_a_dropped_graph_delivers_its_pending_replays():
    prof = accgraph.Profiler(ring_depth=16)
    seen = []
    prof.add_sink(lambda report: seen.append(report.graph_id) if report.graph_id else None)
    with accgraph.torch.instrumented(prof):
        _, g, _, _ = capture_model(prof)
        graph_id = accgraph.torch.foreign_graph(g).id
        for _ in range(5):
            g.replay()
        del g  # the ForeignGraph goes first and collects the five replays
        assert seen == [graph_id] * 5


def test_make_graphed_callables_is_timed():
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        model = Model(prof).cuda()
        x = torch.randn(SIZE, SIZE, device="cuda")
        graphed = torch.cuda.make_graphed_callables(model, (x,))
        prof.flush()
        before = prof.delivered
        for _ in range(4):
            y = graphed(x)
        torch.cuda.synchronize()
        prof.flush()
    timed = [r for r in prof.reports()[-(prof.delivered - before):] if r.graph_id != 0]
    assert len(timed) == 4, [(r.graph_id, len(r)) for r in prof.reports()]
    assert len({r.graph_id for r in timed}) == 1  # the forward graph
    for report in timed:
        check_model_report(report)
    expected = x
    for layer in model.layers:
        expected = torch.relu(expected + layer.offset)
    torch.testing.assert_close(y, expected)


def test_torch_compile_reduce_overhead_is_timed():
    prof = accgraph.Profiler()

    def step(x, y):
        return torch.relu(x + y) * 2  # no regions: Dynamo would break the graph on them

    x = torch.randn(SIZE, SIZE, device="cuda")
    y = torch.randn(SIZE, SIZE, device="cuda")
    calls = 8
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accgraph.torch.instrumented(prof, graph_region="compiled"):
            compiled = torch.compile(step, mode="reduce-overhead")
            try:
                out = compiled(x, y)  # compiles: may fail where Inductor cannot work
            except accgraph.Error:
                raise
            except Exception as e:  # noqa: BLE001 - the reason is the test's skip message
                first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
                pytest.skip(f"torch.compile(mode='reduce-overhead') cannot work here: "
                            f"{type(e).__name__}: {first_line}")
            for _ in range(calls - 1):
                out = compiled(x, y)
            torch.cuda.synchronize()
            prof.flush()
    ours = [str(w.message) for w in caught if str(w.message).startswith("accgraph.torch")]
    assert ours == []
    torch.testing.assert_close(out, step(x, y))
    timed = [r for r in prof.reports() if r.graph_id != 0]
    # CUDA graph trees: a warm-up call, a recording call (captured, then replayed once), then
    # one replay per call.
    assert len(timed) >= calls - 2, f"{len(timed)} timed replays of {calls} calls"
    assert all([t.path for t in r] == ["compiled"] and r[0].duration_ns > 0 for r in timed)


def test_instrument_and_uninstrument_leave_cudagraph_as_it_was():
    cls = torch.cuda.CUDAGraph
    before = {name: cls.__dict__[name] for name in METHODS if name in cls.__dict__}
    original_replay = torch.cuda.CUDAGraph.replay
    accgraph.torch.instrument(accgraph.Profiler())
    assert torch.cuda.CUDAGraph.replay is not original_replay
    assert all(cls.__dict__[name] is not fn for name, fn in before.items())
    accgraph.torch.uninstrument()
    assert torch.cuda.CUDAGraph.replay is original_replay
    assert torch.cuda.CUDAGraph.capture_begin is before["capture_begin"]
    assert torch.cuda.CUDAGraph.capture_end is before["capture_end"]
    assert torch.cuda.CUDAGraph.reset is before["reset"]
    assert {name: cls.__dict__[name] for name in before} == before
    assert all(cls.__dict__[name] is fn for name, fn in before.items())


def test_a_graph_captured_before_instrument_passes_through():
    prof = accgraph.Profiler()
    x = torch.zeros(SIZE, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
    with accgraph.torch.instrumented(prof):
        g.replay()
        torch.cuda.synchronize()
        prof.flush()
    assert accgraph.torch.foreign_graph(g) is None and prof.delivered == 0
    assert float(x[0]) == 1


def test_torch_imports_after_accgraph_in_a_fresh_interpreter():
    # Note [Static C++ runtime] in scripts/gpu-check.sh: built with a g++ that links libstdc++
    # statically, `import accgraph` then `import torch` aborted with "free(): invalid pointer".
    import subprocess
    import sys

    code = ("import accgraph; names = [b.name for b in accgraph.backends()]; import torch; "
            "t = torch.ones(4, device='cuda'); print('ok', 'cuda' in names, float(t.sum()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "True", "4.0"]
