"""accgraph.torch's wrappers of torch.cuda.CUDAGraph, run on the host backend against a stand-in
for torch (torch_standin.py), so that they are tested here, without a GPU; and the errors when
PyTorch, CUDA or the cuda backend is missing. test_torch.py runs the same on PyTorch and CUDA."""

import gc
import sys

import pytest

import accgraph
import accgraph.torch
from torch_standin import make_torch

LAYERS = 5
ADD_S, RELU_S = 0.0002, 0.0001


@pytest.fixture
def torch(monkeypatch):
    standin = make_torch()
    monkeypatch.setattr(accgraph.torch, "_load_torch", lambda: standin)
    monkeypatch.setattr(accgraph.torch, "_BACKEND", "host")
    monkeypatch.setattr(accgraph.torch, "_streams", {})
    yield standin
    accgraph.torch.uninstrument()


def model(torch, prof):
    """The blog's model: per layer an add and a relu, each a region with the layer's id."""
    for i in range(LAYERS):
        with prof.region(f"layer{i}", layer=i):
            with prof.region("add"):
                torch.cuda.current_stream().work(ADD_S)
            with prof.region("relu"):
                torch.cuda.current_stream().work(RELU_S)


EXPECTED_PATHS = [p for i in range(LAYERS) for p in (f"layer{i}", f"layer{i}/add", f"layer{i}/relu")]


def captured(torch, prof):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(torch, prof)
    return g


def test_instrument_and_uninstrument_put_back_the_same_functions(torch):
    cls = torch.cuda.CUDAGraph
    before = {name: getattr(cls, name) for name in ("capture_begin", "capture_end", "replay", "reset")}
    assert "reset" not in cls.__dict__  # inherited, like torch._C._CUDAGraph's methods
    provider = accgraph.set_default_stream_provider(None)
    accgraph.torch.instrument(accgraph.Profiler())
    assert accgraph.torch.is_instrumented()
    assert all(getattr(cls, name) is not fn for name, fn in before.items())
    assert cls.replay.__wrapped__ is before["replay"]  # functools.wraps: torch's docs stay
    assert accgraph.set_default_stream_provider(None) is not None  # PyTorch's current stream
    accgraph.torch.uninstrument()
    assert not accgraph.torch.is_instrumented()
    assert all(getattr(cls, name) is fn for name, fn in before.items())
    assert "reset" not in cls.__dict__ and not hasattr(cls, "capture_end_pre")
    assert accgraph.set_default_stream_provider(provider) is None  # the previous one is back
    accgraph.torch.uninstrument()  # a second time: nothing to do


def test_one_report_per_replay_with_the_model_regions(torch):
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        for _ in range(4):
            g.replay()
        foreign = accgraph.torch.foreign_graph(g)
        assert foreign is not None and foreign.replay_count == 4
        prof.flush()
    reports = prof.reports()
    assert len(reports) == 4 and {r.graph_id for r in reports} == {foreign.id}
    for index, report in enumerate(reports):
        assert report.replay_index == index
        assert [r.path for r in report] == EXPECTED_PATHS
        for r in report:
            assert r.metadata == ({"layer": r.path[5]} if r.depth == 0 else {})
            assert r.duration_ns >= {"add": ADD_S, "relu": RELU_S}.get(r.name, ADD_S + RELU_S) * 1e9
        capture_stream = accgraph.torch._streams[(0, torch.cuda.side_stream.cuda_stream)]
        assert {r.stream_id for r in report} == {capture_stream.id}


def test_a_capture_ended_in_two_steps(monkeypatch):
    """Recent PyTorch ends a capture in capture_end_pre (called by capture_end, or directly)."""
    torch = make_torch(end_in_two_steps=True)
    monkeypatch.setattr(accgraph.torch, "_load_torch", lambda: torch)
    monkeypatch.setattr(accgraph.torch, "_BACKEND", "host")
    monkeypatch.setattr(accgraph.torch, "_streams", {})
    prof = accgraph.Profiler()
    original_pre = torch.cuda.CUDAGraph.capture_end_pre
    with accgraph.torch.instrumented(prof):
        assert torch.cuda.CUDAGraph.capture_end_pre is not original_pre
        g = captured(torch, prof)  # capture_end -> capture_end_pre
        h = torch.cuda.CUDAGraph()
        with torch.cuda.stream(torch.cuda.side_stream):
            h.capture_begin()
            model(torch, prof)
            h.capture_end_pre()  # directly
            h.capture_end_post()
        g.replay()
        h.replay()
        prof.flush()
    assert torch.cuda.CUDAGraph.capture_end_pre is original_pre
    assert [[t.path for t in r] for r in prof.reports()] == [EXPECTED_PATHS, EXPECTED_PATHS]
    assert [r.graph_id for r in prof.reports()] == [accgraph.torch.foreign_graph(g).id,
                                                     accgraph.torch.foreign_graph(h).id]


def test_the_same_region_code_is_timed_eagerly_outside_a_capture(torch):
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        with torch.cuda.stream(torch.cuda.side_stream):
            model(torch, prof)
        prof.flush()
    reports = prof.reports()
    assert [r.graph_id for r in reports] == [0] * LAYERS  # one eager report per top-level region
    assert [r.path for report in reports for r in report] == EXPECTED_PATHS
    wrapped = accgraph.torch._streams[(0, torch.cuda.side_stream.cuda_stream)]
    assert {r.stream_id for report in reports for r in report} == {wrapped.id}


def test_one_accgraph_stream_per_native_stream(torch):
    with accgraph.torch.instrumented(accgraph.Profiler()):
        first = accgraph.torch.current_stream()
        assert accgraph.torch.current_stream() is first
        with torch.cuda.stream(torch.cuda.side_stream):
            side = accgraph.torch.current_stream()
        assert side is not first and side.native_handle == torch.cuda.side_stream.cuda_stream
        assert accgraph.default_stream() is first


def test_replays_on_another_stream_are_reported(torch):
    prof = accgraph.Profiler()
    other = torch.cuda.Stream()
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        g.replay()
        with torch.cuda.stream(other):
            g.replay()
            g.replay()
        prof.flush()
    assert [r.replay_index for r in prof.reports()] == [0, 1, 2]
    assert all(len(r) == 3 * LAYERS for r in prof.reports())
    assert (0, other.cuda_stream) in accgraph.torch._streams  # the replay stream was wrapped


def test_many_replays_through_a_small_ring_are_all_delivered(torch):
    prof = accgraph.Profiler(ring_depth=4, keep_reports=0)
    with accgraph.torch.instrumented(prof):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            with prof.region("tiny"):
                torch.cuda.current_stream().work(0)
        for _ in range(2000):
            g.replay()
        prof.flush()
    assert prof.delivered == 2000
    assert [s.count for s in prof.stats()] == [2000]


def test_immediate_delivery_reports_before_replay_returns(torch):
    prof = accgraph.Profiler(delivery="immediate")
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        for i in range(3):
            g.replay()
            assert prof.delivered == i + 1


def test_graphs_captured_before_instrument_pass_through(torch):
    prof = accgraph.Profiler()
    before = torch.cuda.CUDAGraph()
    with torch.cuda.graph(before):
        torch.cuda.current_stream().work(0)
    with accgraph.torch.instrumented(prof):
        before.replay()
        assert accgraph.torch.foreign_graph(before) is None
        g = captured(torch, prof)
        g.replay()
    g.replay()  # after uninstrument: untimed
    torch.cuda.side_stream.synchronize()
    torch.cuda.default_stream.synchronize()
    prof.flush()
    assert prof.delivered == 1
    with accgraph.torch.instrumented(prof):
        g.replay()  # captured in an earlier period: untimed
        prof.flush()
    assert prof.delivered == 1


def test_a_region_in_a_capture_accgraph_was_not_told_about(torch):
    before = torch.cuda.CUDAGraph()
    prof = accgraph.Profiler()
    with torch.cuda.stream(torch.cuda.side_stream):
        before.capture_begin()
        accgraph.torch.instrument(prof)
        with pytest.raises(accgraph.InvalidStateError, match="not told about"):
            with prof.region("inside"):
                pass
        before.capture_end()


def test_reset_and_recapture_deliver_everything(torch):
    prof = accgraph.Profiler(ring_depth=8)
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        foreign = accgraph.torch.foreign_graph(g)
        for _ in range(3):
            g.replay()
        g.reset()  # the pending replays are delivered before the native graph goes
        assert prof.delivered == 3 and foreign.state == accgraph.GraphState.EMPTY
        with pytest.raises(RuntimeError, match="without a preceding successful capture"):
            g.replay()
        with torch.cuda.graph(g):
            with prof.region("again"):
                torch.cuda.current_stream().work(0)
        g.replay()
        assert accgraph.torch.foreign_graph(g) is foreign  # one ForeignGraph per torch graph
        prof.flush()
    assert [(r.replay_index, r[0].path) for r in prof.reports()[3:]] == [(0, "again")]


def test_a_dropped_graph_delivers_its_pending_replays(torch):
    prof = accgraph.Profiler(ring_depth=8)
    seen = []
    prof.add_sink(lambda report: seen.append(report.replay_index))
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        g.replay()
        g.replay()
        del g
        gc.collect()
        assert seen == [0, 1]


def test_a_replay_inside_another_capture_is_refused(torch):
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        outer = torch.cuda.CUDAGraph()
        with torch.cuda.graph(outer, stream=torch.cuda.Stream()):
            with pytest.raises(accgraph.InvalidStateError,
                               match="a timed graph cannot be replayed into another capture"):
                g.replay()
        assert accgraph.torch.foreign_graph(g).replay_count == 0


def test_a_region_left_open_in_the_capture_fails_capture_end_and_drops_the_native_graph(torch):
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(torch.cuda.side_stream):
            g.capture_begin()
            prof.begin(accgraph.torch.current_stream(), "left open")
            with pytest.raises(accgraph.InvalidStateError, match="left open"):
                g.capture_end()
            # The native capture was ended (the stream captures no more) and its graph reset:
            # its markers write into storage the failed capture released.
            assert not accgraph.torch.current_stream().is_capturing
        assert g.native is None
        with torch.cuda.graph(g):  # usable again
            with prof.region("ok"):
                pass
        g.replay()
        prof.flush()
    assert [r[0].path for r in prof.reports()] == ["ok"]


def test_a_capture_accgraph_cannot_join_runs_untimed_with_a_warning(torch):
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = torch.cuda.CUDAGraph()
        g.capture_elsewhere = True  # the native capture is not on the current stream
        with pytest.warns(RuntimeWarning, match="not timed: capture_begin: .*is not capturing"):
            with torch.cuda.graph(g):
                pass
        g.replay()
        prof.flush()
    assert prof.delivered == 0
    foreign = accgraph.torch.foreign_graph(g)
    assert foreign.state == accgraph.GraphState.EMPTY and foreign.replay_count == 0


def test_uninstrument_during_a_capture_is_refused(torch):
    prof = accgraph.Profiler()
    accgraph.torch.instrument(prof)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with pytest.raises(accgraph.InvalidStateError, match="1 CUDA graph capture"):
            accgraph.torch.uninstrument()
    accgraph.torch.uninstrument()
    assert not accgraph.torch.is_instrumented()


def test_instrument_misuse(torch):
    prof = accgraph.Profiler()
    with pytest.raises(TypeError, match="accgraph.Profiler"):
        accgraph.torch.instrument("profiler")
    with pytest.raises(TypeError, match="graph_region"):
        accgraph.torch.instrument(prof, graph_region="")
    with accgraph.torch.instrumented(prof):
        with pytest.raises(accgraph.InvalidStateError, match="already instrumented"):
            accgraph.torch.instrument(accgraph.Profiler())


def test_graph_region_times_each_graph_as_a_whole(torch):
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof, graph_region="graph"):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # code without regions, like a torch.compile graph
            torch.cuda.current_stream().work(ADD_S)
        h = captured(torch, prof)
        g.replay()
        h.replay()
        prof.flush()
    first, second = prof.reports()
    assert [r.path for r in first] == ["graph"] and first[0].duration_ns >= ADD_S * 1e9
    assert [r.path for r in second] == ["graph"] + [f"graph/{p}" for p in EXPECTED_PATHS]


def test_dropping_the_profiler_reference_while_instrumented(torch):
    prof = accgraph.Profiler()
    accgraph.torch.instrument(prof)
    del prof  # the instrumentation keeps it
    gc.collect()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with accgraph.torch._installed.profiler.region("r"):
            pass
    g.replay()
    accgraph.torch.uninstrument()  # flushes it
    del g
    gc.collect()


# --- what is missing ----------------------------------------------------------------------------

def test_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(accgraph.torch.TorchUnavailableError,
                       match=r"PyTorch cannot be imported .*pip install torch") as raised:
        accgraph.torch.instrument(accgraph.Profiler())
    assert isinstance(raised.value, ImportError) and isinstance(raised.value, accgraph.UnavailableError)
    assert raised.value.code == accgraph.ErrorCode.UNAVAILABLE
    with pytest.raises(ImportError, match="PyTorch cannot be imported"):
        accgraph.torch.current_stream()
    assert not accgraph.torch.is_instrumented()


def test_without_a_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", make_torch(cuda_available=False))
    with pytest.raises(accgraph.torch.TorchUnavailableError,
                       match=r"PyTorch 0.0\+standin sees no CUDA device \(torch.version.cuda=None\)"):
        accgraph.torch.instrument(accgraph.Profiler())


def test_without_the_cuda_backend(monkeypatch):
    cuda = {b.name: b for b in accgraph.backends()}.get("cuda")
    if cuda is not None and cuda.available:
        pytest.skip("the cuda backend is available here")
    monkeypatch.setitem(sys.modules, "torch", make_torch())
    with pytest.raises(accgraph.torch.TorchUnavailableError,
                       match=r"accgraph's cuda backend is unavailable \(.+\)"):
        accgraph.torch.instrument(accgraph.Profiler())
