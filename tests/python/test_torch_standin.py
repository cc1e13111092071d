"""accgraph.torch's wrappers of torch.cuda.CUDAGraph, run on the host backend against a stand-in
for torch (torch_standin.py), so that they are tested here, without a GPU; and the errors when
PyTorch, CUDA or the cuda backend is missing. test_torch.py runs the same on PyTorch and CUDA."""

import csv as csv_module
import gc
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import pytest

import accgraph
import accgraph.torch
from accgraph.torch import __main__ as cli
from accgraph.torch._html import html_report
from accgraph.torch._modules import UNTIMED_FORK
from torch_standin import gpt_paths, make_gpt, make_torch

LAYERS = 5
ADD_S, RELU_S = 0.0002, 0.0001


@pytest.fixture
def torch(monkeypatch):
    standin = make_torch()
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch", lambda: standin)
    monkeypatch.setattr(accgraph.torch._runtime, "BACKEND", "host")
    monkeypatch.setattr(accgraph.torch._runtime, "streams", {})
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
    assert all(getattr(cls, name) is not fn for name, fn in before.items() if name != "replay")
    assert cls.replay is before["replay"]  # replays are wrapped per timed instance only
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
            assert r.raw_duration_ns >= {"add": ADD_S, "relu": RELU_S}.get(r.name, ADD_S + RELU_S) * 1e9
        capture_stream = accgraph.torch._runtime.streams[(0, torch.cuda.side_stream.cuda_stream)]
        assert {r.stream_id for r in report} == {capture_stream.id}


def test_a_capture_without_regions_replays_natively(torch):
    """Nothing recorded in the capture: no profiler reports its replays (replay_hooks 0), so
    replay() calls PyTorch's directly, without ForeignGraph.launch (its count stays 0); the
    same graph recaptured with regions goes through launch again."""
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.cuda.current_stream().work(0)
        foreign = accgraph.torch.foreign_graph(g)
        assert foreign is not None and foreign.replay_hooks == 0
        for _ in range(3):
            g.replay()
        assert foreign.replay_count == 0
        g.reset()
        with torch.cuda.graph(g):
            model(torch, prof)
        assert accgraph.torch.foreign_graph(g).replay_hooks == 1
        g.replay()
        assert accgraph.torch.foreign_graph(g).replay_count == 1
        prof.flush()
    assert prof.delivered == 1


def test_a_capture_ended_in_two_steps(monkeypatch):
    """Recent PyTorch ends a capture in capture_end_pre (called by capture_end, or directly)."""
    torch = make_torch(end_in_two_steps=True)
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch", lambda: torch)
    monkeypatch.setattr(accgraph.torch._runtime, "BACKEND", "host")
    monkeypatch.setattr(accgraph.torch._runtime, "streams", {})
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
    wrapped = accgraph.torch._runtime.streams[(0, torch.cuda.side_stream.cuda_stream)]
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
    # The replay stream was wrapped.
    assert (0, other.cuda_stream) in accgraph.torch._runtime.streams


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
    # PyTorch's replay refuses a capturing stream itself, so accgraph.torch's trusted launch does
    # not ask the stream (Note [Trusted launches and captures]): the error is PyTorch's, and the
    # refused launch is neither counted nor numbered.
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        g.replay()
        outer = torch.cuda.CUDAGraph()
        with torch.cuda.graph(outer, stream=torch.cuda.Stream()):
            with pytest.raises(RuntimeError, match="during capturing stage"):
                g.replay()
        assert accgraph.torch.foreign_graph(g).replay_count == 1
        outer.replay()  # the outer capture went on
        g.replay()
        prof.flush()
    reports = [r for r in prof.reports() if r.graph_id == accgraph.torch.foreign_graph(g).id]
    assert [r.replay_index for r in reports] == [0, 1]


def test_a_fenced_launch_inside_another_capture_is_refused_by_accgraph(torch):
    # An untrusted owner's launch is not relied on to refuse a capturing stream: accgraph asks.
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        foreign = accgraph.torch.foreign_graph(g)
        outer = torch.cuda.CUDAGraph()
        with torch.cuda.graph(outer, stream=torch.cuda.Stream()):
            with pytest.raises(accgraph.InvalidStateError,
                               match="a timed graph cannot be replayed into another capture"):
                foreign.launch(accgraph.torch.current_stream(), lambda: None)
        assert foreign.replay_count == 0


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
    assert [r.path for r in first] == ["graph"] and first[0].raw_duration_ns >= ADD_S * 1e9
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


# --- module timing (Note [Module regions]) ------------------------------------------------------

def capture_gpt(torch, model):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(None)
    return g


def replayed_paths(torch, prof, model, replays=2):
    """The region paths of each report of `replays` replays of `model` captured now."""
    g = capture_gpt(torch, model)
    for _ in range(replays):
        g.replay()
    prof.flush()
    foreign = accgraph.torch.foreign_graph(g)
    return [[t.path for t in r] for r in prof.reports() if r.graph_id == foreign.id]


def test_every_module_call_is_a_region_named_by_its_qualified_name(torch):
    prof = accgraph.Profiler()
    model = make_gpt(torch)
    with accgraph.torch.instrumented(prof, modules=True):
        reports = replayed_paths(torch, prof, model)
        report = [r for r in prof.reports() if r.graph_id != 0][0]
    assert reports == [gpt_paths(), gpt_paths()]
    classes = {t.path: t.metadata["module"] for t in report}
    assert classes["GPT"] == "GPT" and classes["GPT/h.1"] == "Block"
    assert classes["GPT/h.0/attn/c_proj"] == "Linear" and classes["GPT/ln_f"] == "LayerNorm"
    assert all(set(t.metadata) == {"module"} for t in report)


def test_modules_named_from_the_outermost_module_called(torch):
    """modules=True: a module called on its own is its own root (named by its class); a module
    the root's tree does not hold is named by its class where it is called."""
    prof = accgraph.Profiler()
    model = make_gpt(torch)
    attn, mlp = model.h[1].attn, model.h[0].mlp
    free = type(model.ln_f)()  # in no tree
    attn.forward = lambda x: free(attn.c_proj(attn.c_attn(x)))
    with accgraph.torch.instrumented(prof, modules=True):
        with torch.cuda.stream(torch.cuda.side_stream):
            attn(None)  # eager: one report per top-level call
            mlp(None)
            mlp.gate = type(model.ln_f)()  # a new submodule: the names are resolved again
            mlp.forward = lambda x: mlp.gate(mlp.c_proj(mlp.c_fc(x)))
            mlp(None)
        prof.flush()
    assert [[t.path for t in r] for r in prof.reports()] == [
        ["Attention", "Attention/c_attn", "Attention/c_proj", "Attention/LayerNorm"],
        ["MLP", "MLP/c_fc", "MLP/c_proj"], ["MLP", "MLP/c_fc", "MLP/c_proj", "MLP/gate"]]


def test_modules_made_in_forward_are_named_by_class_and_forgotten(torch):
    prof = accgraph.Profiler()
    model = make_gpt(torch, blocks=1)
    cls = type(model.ln_f)
    model.ln_f.forward = lambda x: cls()(x)  # a new module at every call
    with accgraph.torch.instrumented(prof, modules=True, include="ln_f|LayerNorm"):
        with torch.cuda.stream(torch.cuda.side_stream):
            for _ in range(5):
                model(None)
        timing = accgraph.torch._installed.modules
        names = timing.by_root[id(model)]
        assert len(names.by_id) == len(list(model.named_modules()))  # no dead entries
        with torch.cuda.stream(torch.cuda.side_stream):
            for _ in range(3):
                cls()(None)  # a new root at every call
        assert list(timing.by_root) == [id(model)]
        prof.flush()
    assert [[t.path for t in r] for r in prof.reports()] == ([["ln_f", "ln_f/LayerNorm"]] * 5 +
                                                             [["LayerNorm"]] * 3)


def test_modules_of_one_tree(torch):
    """modules=model: only that tree, named from its root; other modules are not timed."""
    prof = accgraph.Profiler()
    model, other = make_gpt(torch, blocks=1), make_gpt(torch, blocks=1)
    with accgraph.torch.instrumented(prof, modules=model):
        with torch.cuda.stream(torch.cuda.side_stream):
            other(None)
            model.h[0].attn(None)  # a submodule called on its own keeps its qualified name
            model(None)
        prof.flush()
    assert [[t.path for t in r] for r in prof.reports()] == [
        ["h.0.attn", "h.0.attn/c_attn", "h.0.attn/c_proj"], gpt_paths(blocks=1)]


def test_modules_of_a_list_of_trees(torch):
    prof = accgraph.Profiler()
    first, second, other = (make_gpt(torch, blocks=1) for _ in range(3))
    second.h[0].attn = first.h[0].attn  # shared: named from the first root
    with accgraph.torch.instrumented(prof, modules=[first, second]):
        with torch.cuda.stream(torch.cuda.side_stream):
            other(None)
            second.h[0](None)
            first.ln_f(None)
        prof.flush()
    assert [[t.path for t in r] for r in prof.reports()] == [
        ["h.0", "h.0/ln_1", "h.0/attn", "h.0/attn/c_attn", "h.0/attn/c_proj", "h.0/ln_2",
         "h.0/mlp", "h.0/mlp/c_fc", "h.0/mlp/c_proj"], ["ln_f"]]


@pytest.mark.parametrize("options, expected", [
    ({"depth": 0}, ["GPT"]),
    ({"depth": 1}, ["GPT", "GPT/h.0", "GPT/h.1", "GPT/ln_f"]),
    ({"depth": 2}, [p for p in gpt_paths() if p.count("/") <= 2]),
    ({"include": r"\.attn"}, [p for i in range(2) for p in
                              (f"h.{i}.attn", f"h.{i}.attn/c_attn", f"h.{i}.attn/c_proj")]),
    ({"exclude": r"mlp|ln_"}, [p for p in gpt_paths() if "mlp" not in p and "ln_" not in p]),
    ({"exclude": r"^h\.\d+$"},  # the blocks go, their children stay (named from the root)
     [p.replace("GPT/h.0/", "GPT/h.0.").replace("GPT/h.1/", "GPT/h.1.")
      for p in gpt_paths() if p not in ("GPT/h.0", "GPT/h.1")]),
    ({"include": "GPT|ln_f", "depth": 1}, ["GPT", "GPT/ln_f"]),
])
def test_filters(torch, options, expected):
    prof = accgraph.Profiler()
    model = make_gpt(torch)
    with accgraph.torch.instrumented(prof, modules=True, **options):
        reports = replayed_paths(torch, prof, model, replays=1)
    assert reports == [expected]


def test_a_module_called_twice_gets_distinct_paths(torch):
    prof = accgraph.Profiler()
    model = make_gpt(torch)

    def twice(x):  # ln_f applied twice, and the first block's mlp three times
        mlp = model.h[0].mlp
        return model.ln_f(model.ln_f(mlp(mlp(mlp(x)))))

    model.forward = twice
    with accgraph.torch.instrumented(prof, modules=True):
        reports = replayed_paths(torch, prof, model, replays=1)
    mlp = ["mlp", "mlp/c_fc", "mlp/c_proj"]
    assert reports == [["GPT"] + [f"GPT/h.0.{p}" for p in mlp] +
                       [f"GPT/h.0.{p.replace('mlp', 'mlp#2')}" for p in mlp] +
                       [f"GPT/h.0.{p.replace('mlp', 'mlp#3')}" for p in mlp] +
                       ["GPT/ln_f", "GPT/ln_f#2"]]


@pytest.mark.skipif(not hasattr(accgraph.RegionTiming, "self_ns"),
                    reason="needs RegionTiming.self_ns (issue 20's self time)")
def test_the_residual_add_is_in_the_parents_self_time_not_in_the_next_sibling(torch):
    """Issue 20's boundary rule through module hooks: the glue the stand-in block enqueues
    between attn and ln_2 (x = x + attn(...)) belongs to the block's own time, so ln_2 (the same
    work as ln_1) times like ln_1 and the block's self time holds both glue steps."""
    prof = accgraph.Profiler()
    model = make_gpt(torch, blocks=1, seconds=0.002)  # every leaf and each glue step: 2 ms
    with accgraph.torch.instrumented(prof, modules=True):
        g = capture_gpt(torch, model)
        for _ in range(5):
            g.replay()
        prof.flush()
    stats = {s.path: s for s in prof.stats()}
    ln_1, ln_2 = stats["GPT/h.0/ln_1"].p50_ns, stats["GPT/h.0/ln_2"].p50_ns
    assert ln_2 <= 1.25 * ln_1, (ln_1, ln_2)  # before issue 20: ln_2 = 2 x ln_1 (the glue)
    for report in prof.reports():
        block = next(t for t in report if t.path == "GPT/h.0")
        assert block.self_ns >= 1.5 * ln_1, (block.self_ns, ln_1)  # two glue steps
        leaf = next(t for t in report if t.path == "GPT/h.0/attn/c_attn")
        assert leaf.self_ns == leaf.duration_ns


def test_uninstrument_removes_every_hook(torch):
    hooks = torch.nn.modules.module.hooks
    prof = accgraph.Profiler()
    model = make_gpt(torch)
    accgraph.torch.instrument(prof, modules=True)
    assert len(hooks.pre) == 1 and len(hooks.post) == 1 and len(hooks.registration) == 1
    assert list(hooks.always) == list(hooks.post)  # the forward hook is always called
    accgraph.torch.uninstrument()
    assert not hooks.pre and not hooks.post and not hooks.always and not hooks.registration
    with torch.cuda.stream(torch.cuda.side_stream):
        model(None)
    prof.flush()
    assert prof.delivered == 0


def test_eager_module_calls_are_timed_unless_eager_modules_is_false(torch):
    model = make_gpt(torch, blocks=1)
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof, modules=True):
        with torch.cuda.stream(torch.cuda.side_stream):
            model(None)
        prof.flush()
    assert [[t.path for t in r] for r in prof.reports()] == [gpt_paths(blocks=1)]
    assert prof.reports()[0].graph_id == 0
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof, modules=True, eager_modules=False):
        with torch.cuda.stream(torch.cuda.side_stream):
            model(None)
        prof.flush()
        assert prof.delivered == 0
        assert replayed_paths(torch, prof, model, replays=1) == [gpt_paths(blocks=1)]


def test_a_module_that_cannot_be_timed_is_skipped_counted_and_warned_once(torch):
    """A module working on a stream that captures into a graph accgraph was not told about (as
    a stream PyTorch forks inside a capture): skipped, its forward hook ends no one else's
    region, counted per reason, one RuntimeWarning."""
    forked = torch.cuda.Stream()
    native = torch.cuda.CUDAGraph()
    with torch.cuda.stream(forked):
        native.capture_begin()  # before instrument(): accgraph is not told about it
    model = make_gpt(torch)

    def forked_attn(block):
        def forward(x):
            with torch.cuda.stream(forked):
                block.attn.c_attn(x)  # not timed
            return block.attn.c_proj(x)

        block.attn.forward = forward

    for block in model.h:
        forked_attn(block)
    prof = accgraph.Profiler()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accgraph.torch.instrumented(prof, modules=True):
            reports = replayed_paths(torch, prof, model, replays=2)
    with torch.cuda.stream(forked):
        native.capture_end()
    expected = [p for p in gpt_paths() if not p.endswith("attn/c_attn")]
    assert reports == [expected, expected]
    ours = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)
            and "accgraph.torch: module" in str(w.message)]
    assert len(ours) == 1 and "h.0.attn.c_attn is not timed" in ours[0], ours
    untimed = prof.untimed()
    assert [(u.reason, u.count, u.first_name) for u in untimed] == [
        (UNTIMED_FORK, 2, "h.0.attn.c_attn")]
    assert "untimed: 2 call(s) not timed" in prof.stats_table()


def test_untimed_calls_are_counted_by_the_errors_reason_code_not_its_wording(torch):
    # Note [Error reasons]: two messages of one reason are one reason; an error without a reason
    # is counted under its error code, described by the first such message.
    from accgraph.torch._modules import UNTIMED_REASONS, ModuleTiming

    assert set(UNTIMED_REASONS) == set(accgraph.ErrorReason) - {accgraph.ErrorReason.UNSPECIFIED}
    timing = ModuleTiming(torch, accgraph.Profiler(), lambda: None, True, None, None, None, True)

    def error(cls, code, reason, message):
        return cls(f"[x] {message}", code=code, reason=reason, message=message)

    state = accgraph.ErrorCode.INVALID_STATE
    ended = [error(accgraph.InvalidStateError, state, accgraph.ErrorReason.CAPTURE_ENDED, m)
             for m in ("the capture on stream 3 ended", "Region::end: no longer open on 9")]
    assert {timing._reason_of(e) for e in ended} == {
        UNTIMED_REASONS[accgraph.ErrorReason.CAPTURE_ENDED]}
    native = error(accgraph.InvalidStateError, state, accgraph.ErrorReason.NATIVE_CAPTURE,
                   "worded differently from today's message")
    assert timing._reason_of(native) == UNTIMED_FORK
    unavailable = accgraph.ErrorCode.UNAVAILABLE
    first, second = (error(accgraph.UnavailableError, unavailable,
                           accgraph.ErrorReason.UNSPECIFIED, m)
                     for m in ("wrapping stream 4 failed", "wrapping stream 5 failed"))
    assert timing._reason_of(first) == timing._reason_of(second) == "wrapping stream 4 failed"


def test_a_module_on_another_stream_is_named_from_the_root(torch):
    """A child working on another stream (eagerly) opens a top-level region there, named by its
    full qualified name; the regions on the first stream are not disturbed."""
    other = torch.cuda.Stream()
    model = make_gpt(torch, blocks=1)
    attn = model.h[0].attn

    def forward(x):
        with torch.cuda.stream(other):
            attn.c_attn(x)
        return attn.c_proj(x)

    attn.forward = forward
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof, modules=True):
        with torch.cuda.stream(torch.cuda.side_stream):
            model(None)
        prof.flush()
    trees = sorted([t.path for t in r] for r in prof.reports())
    assert trees == sorted([[p for p in gpt_paths(blocks=1) if not p.endswith("c_attn")],
                            ["h.0.attn.c_attn"]])


def test_annotate_trace_is_reexported():
    from accgraph.torch import _trace

    assert accgraph.torch.annotate_trace is _trace.annotate_trace
    assert "annotate_trace" in accgraph.torch.__all__


def test_hooks_record_nothing_while_torch_compile_traces(torch):
    prof = accgraph.Profiler()
    model = make_gpt(torch, blocks=1)
    with accgraph.torch.instrumented(prof, modules=True):
        torch.compiler.compiling = True
        with torch.cuda.stream(torch.cuda.side_stream):
            model(None)
        prof.flush()
        assert prof.delivered == 0
        torch.compiler.compiling = False
        with torch.cuda.stream(torch.cuda.side_stream):
            model(None)  # the thread's stack was left empty
        prof.flush()
    assert [[t.path for t in r] for r in prof.reports()] == [gpt_paths(blocks=1)]


@pytest.mark.parametrize("always_call", [True, False])
def test_a_forward_that_raises_closes_its_regions(torch, monkeypatch, always_call):
    """The forward hook is always called (PyTorch >= 2.1): the regions the failing forward
    opened are ended. Without always_call, the next forward hook below closes them."""
    if not always_call:
        hooks = torch.nn.modules.module
        register = hooks.register_module_forward_hook

        def without_always_call(hook):
            return register(hook)

        monkeypatch.setattr(hooks, "register_module_forward_hook", without_always_call)
    prof = accgraph.Profiler()
    model = make_gpt(torch, blocks=1)
    block = model.h[0]

    def failing(x):
        raise ValueError("boom")

    block.ln_2.forward = failing

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            try:
                self.model(x)
            except ValueError:
                pass
            return x

    wrapper = Wrapper()
    with accgraph.torch.instrumented(prof, modules=True):
        with torch.cuda.stream(torch.cuda.side_stream):
            wrapper(None)
            del block.ln_2.forward
            wrapper(None)
        prof.flush()
    model_paths = [f"Wrapper/model{p[3:]}" for p in gpt_paths(blocks=1)]
    first = ["Wrapper", "Wrapper/model", "Wrapper/model/h.0", "Wrapper/model/h.0/ln_1",
             "Wrapper/model/h.0/attn", "Wrapper/model/h.0/attn/c_attn",
             "Wrapper/model/h.0/attn/c_proj", "Wrapper/model/h.0/ln_2"]
    assert [[t.path for t in r] for r in prof.reports()] == [first, ["Wrapper"] + model_paths]


def test_module_options_misuse(torch):
    prof = accgraph.Profiler()
    with pytest.raises(TypeError, match="pass modules=True"):
        accgraph.torch.instrument(prof, depth=2)
    with pytest.raises(TypeError, match="depth must be an int"):
        accgraph.torch.instrument(prof, modules=True, depth=-1)
    with pytest.raises(ValueError, match="not a valid regular expression"):
        accgraph.torch.instrument(prof, modules=True, include="(")
    with pytest.raises(TypeError, match="modules must be True, an nn.Module"):
        accgraph.torch.instrument(prof, modules=["model"])
    assert not accgraph.torch.is_instrumented()
    assert not torch.nn.modules.module.hooks.pre
    del torch.nn.modules.module.register_module_forward_pre_hook  # a PyTorch without them
    with pytest.raises(accgraph.UnavailableError, match="no global module hooks"):
        accgraph.torch.instrument(prof, modules=True)
    assert not accgraph.torch.is_instrumented()
    accgraph.torch.instrument(prof)  # regions by hand still work


# --- python -m accgraph.torch ---------------------------------------------------------------------

SCRIPT = """
import sys
import torch
from torch_standin import make_gpt

print("script", __name__, sys.argv[1:])
model = make_gpt(torch)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    model(None)
for _ in range(3):
    g.replay()
{tail}
"""


@pytest.fixture
def standin_as_torch(torch, monkeypatch):
    """`import torch` gives the stand-in (for scripts run by the command line)."""
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def run_cli(tmp_path, args, tail=""):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tail=tail))
    return cli.main([a if a != "SCRIPT" else str(script) for a in args])


def test_cli_runs_the_script_and_prints_the_module_table(standin_as_torch, tmp_path, capsys):
    csv, trace = tmp_path / "modules.csv", tmp_path / "trace.json"
    code = run_cli(tmp_path, ["--csv", str(csv), "--trace", str(trace), "--depth", "2", "--flat",
                              "SCRIPT", "--lr", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "script __main__ ['--lr', '3']" in out
    assert "accgraph.torch: 3 report(s)" in out
    table = out.split("accgraph.torch: 3 report(s)")[1]
    for path in [p for p in gpt_paths() if p.count("/") <= 2]:
        assert path in table
    assert "c_attn" not in table  # depth 3
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["name"] for e in events if e.get("ph") == "X"} >= {"GPT", "h.1", "attn"}
    rows = csv.read_text().splitlines()
    assert any(row.startswith("GPT/h.1/attn,") or ",GPT/h.1/attn," in row for row in rows), rows
    assert not accgraph.torch.is_instrumented()


def test_cli_passes_the_scripts_exit_code_and_exception_through(standin_as_torch, tmp_path,
                                                                 capsys):
    # audit 2026-11-28 B12 (the script raises: traceback, table, 1) and B13 (its exit codes).
    assert run_cli(tmp_path, ["SCRIPT"], tail="sys.exit(3)") == 3
    assert "accgraph.torch: 3 report(s)" in capsys.readouterr().out
    assert run_cli(tmp_path, ["SCRIPT"], tail="raise ValueError('boom')") == 1
    out, err = capsys.readouterr()
    assert "accgraph.torch: 3 report(s)" in out and "\n    attn " in out
    assert "ValueError: boom" in err and "train.py" in err and "runpy" not in err
    assert not accgraph.torch.is_instrumented()


def test_cli_runs_a_module(standin_as_torch, tmp_path, capsys, monkeypatch):
    (tmp_path / "trainmod.py").write_text(SCRIPT.format(tail=""))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--include", "attn", "-m", "trainmod", "x"]) == 0
    out = capsys.readouterr().out
    assert "script __main__ ['x']" in out and "\nh.0.attn " in out and "\n  c_proj " in out


def test_cli_usage_errors(standin_as_torch, tmp_path, capsys):
    # audit 2026-11-28 B01 (no arguments), B02 (--help), B03 (a missing script), B08 (--depth x).
    assert cli.main(["--help"]) == 0
    assert "(script.py | -m module) [args...]" in capsys.readouterr().out
    assert cli.main([]) == 2
    assert "give a script" in capsys.readouterr().err
    assert cli.main([str(tmp_path / "missing.py")]) == 2
    assert "can't open file" in capsys.readouterr().err
    assert cli.main(["--depth", "x", "s.py"]) == 2
    assert "invalid int value" in capsys.readouterr().err
    (tmp_path / "s.py").write_text("print('never')\n")
    assert cli.main(["--include", "(", str(tmp_path / "s.py")]) == 2
    out, err = capsys.readouterr()
    assert "not a valid regular expression" in err and "never" not in out


def test_cli_without_torch_says_so_on_one_line_and_exits_2(monkeypatch, tmp_path, capsys):
    # audit 2026-11-28 B04 (no torch installed: one line, exit 2)
    monkeypatch.setitem(sys.modules, "torch", None)
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    assert cli.main([str(script)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "PyTorch cannot be imported" in err


CLI_LAUNCHER = """
import sys
sys.path.insert(0, {tests!r})
import accgraph.torch
from torch_standin import make_torch
sys.modules["torch"] = make_torch()
accgraph.torch._runtime.BACKEND = "host"
from accgraph.torch.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("tail, code", [("", 0), ("sys.exit(4)", 4), ("sys.exit('bye')", 1),
                                        ("sys.exit(None)", 0), ("sys.exit(300)", 44),
                                        ("raise KeyError('boom')", 1)])
def test_cli_in_a_fresh_interpreter(tmp_path, tail, code):
    """The exit code as Python would give it, the table, and nothing else at exit (audit
    2026-11-28 B13: sys.exit(7), ('bye'), (None) and (300) give 7, 1, 0 and 44, as python)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tail=tail))
    launcher = CLI_LAUNCHER.format(tests=str(pathlib.Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", launcher, "--depth", "1", str(script)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == code, done.stderr
    assert "accgraph.torch: 3 report(s)" in done.stdout and "\n  h.1 " in done.stdout
    assert "leaked" not in done.stderr
    expected_err = {"": "", "sys.exit(4)": "", "sys.exit('bye')": "bye\n", "sys.exit(None)": "",
                    "sys.exit(300)": ""}
    if tail in expected_err:
        assert done.stderr == expected_err[tail]
    else:
        assert done.stderr.startswith("Traceback") and "KeyError: 'boom'" in done.stderr


def test_cli_in_a_fresh_interpreter_without_torch(tmp_path):
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed here (test_torch.py runs the command line with it)")
    except ImportError:
        pass
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    done = subprocess.run([sys.executable, "-m", "accgraph.torch", str(script)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "PyTorch cannot be imported" in done.stderr


# --- the 2026-11-28 audit's other command-line rows (scripts/audit/torch_cli_cases.py reruns
# them in fresh processes) ------------------------------------------------------------------------


def test_cli_refuses_wrong_options_before_running_the_script(standin_as_torch, tmp_path, capsys):
    # audit 2026-11-28 B06 (--depth -1), B07 (--include '(' and --exclude '['), B09b (--keep -5),
    # B10 (-m without a module), B11 (an unknown option): exit 2 with a message saying which,
    # and the script never runs.
    script = tmp_path / "s.py"
    script.write_text("print('script ran')\n")
    for args, message in (
            (["--depth", "-1", str(script)], "depth must be an int >= 0"),
            (["--include", "(", str(script)],
             "include='(' is not a valid regular expression"),
            (["--exclude", "[", str(script)],
             "exclude='[' is not a valid regular expression"),
            (["--keep", "-5", str(script)], "Profiler: keep_reports is negative"),
            (["-m"], "argument -m: expected one argument"),
            (["--frobnicate", str(script)], "unrecognized arguments: --frobnicate"),
            (["--sample", "0", str(script)],
             "--sample must be >= 1 (got 0): time 1 replay in N (1: every replay)"),
            (["--sample", "x", str(script)], "argument --sample: invalid int value: 'x'"),
            (["--overhead", "0", str(script)],
             "--overhead must be a percentage above 0 and below 100 (got 0), e.g. 0.5"),
            (["--overhead", "100", str(script)], "below 100 (got 100)"),
            (["--overhead", "nan", str(script)], "below 100 (got nan)"),
            (["--sample", "4", "--overhead", "1", str(script)],
             "argument --overhead: not allowed with argument --sample")):
        assert cli.main(args) == 2, args
        out, err = capsys.readouterr()
        assert "script ran" not in out and message in err, (args, err)
        assert "Traceback" not in err and "incompatible function arguments" not in err
        assert not accgraph.torch.is_instrumented()


def test_cli_without_torch_still_checks_the_options_first(monkeypatch, tmp_path, capsys):
    # audit 2026-11-28 B05: --depth -1 without torch is the option's error, exit 2.
    monkeypatch.setitem(sys.modules, "torch", None)
    script = tmp_path / "s.py"
    script.write_text("print('script ran')\n")
    assert cli.main(["--depth", "-1", str(script)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "depth must be an int >= 0" in err
    assert len(err.strip().splitlines()) == 1, err


def test_cli_a_ring_beyond_the_backends_maximum_is_stated(standin_as_torch, tmp_path, capsys):
    # audit 2026-11-28 B09c: --ring 100000000 runs the script untimed and says why in the table.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_cli(tmp_path, ["--ring", "100000000", "SCRIPT"]) == 0
    out = capsys.readouterr().out
    assert "script __main__" in out
    untimed = [line for line in out.splitlines() if line.startswith("untimed: ")]
    assert untimed and "ring depth 100000000 is larger than the host backend's maximum" in \
        untimed[0], out


def test_cli_keep_0_still_writes_the_trace(standin_as_torch, tmp_path, capsys):
    # audit 2026-11-28 B17: --keep 0 --trace t.pftrace exits 0 and writes the (empty) trace.
    if not accgraph.perfetto_supported():
        if os.environ.get("ACCGRAPH_TEST_REQUIRE_PERFETTO") == "1":
            pytest.fail("ACCGRAPH_TEST_REQUIRE_PERFETTO=1 but the package has no Perfetto support")
        pytest.skip("this accgraph package was built without Perfetto support")
    trace = tmp_path / "t.pftrace"
    assert run_cli(tmp_path, ["--keep", "0", "--trace", str(trace), "SCRIPT"]) == 0
    assert f"accgraph.torch: wrote {trace}" in capsys.readouterr().out
    assert trace.is_file()


def test_cli_a_module_that_does_not_exist(standin_as_torch, tmp_path, capsys, monkeypatch):
    # audit 2026-11-28 B18: -m no_such_module: its ImportError, exit 1.
    monkeypatch.chdir(tmp_path)
    assert cli.main(["-m", "no_such_module_xyz"]) == 1
    err = capsys.readouterr().err
    assert "No module named no_such_module_xyz" in err
    assert not accgraph.torch.is_instrumented()


def test_cli_a_directory_as_the_script_is_refused(standin_as_torch, tmp_path, capsys):
    # audit 2026-11-28 B19: a directory with a __main__.py: refused on one line, exit 2, saying
    # it is a directory (it said "no such file").
    target = tmp_path / "pkgdir"
    target.mkdir()
    (target / "__main__.py").write_text("print('main ran')\n")
    assert cli.main([str(target)]) == 2
    out, err = capsys.readouterr()
    assert "main ran" not in out and len(err.strip().splitlines()) == 1
    assert f"can't open file {str(target)!r}: it is a directory: give the script" in err


def test_cli_a_script_leaving_a_thread_replaying_exits_cleanly(tmp_path):
    # audit 2026-11-28 B20: the script uninstruments itself and leaves a (non-daemon) thread
    # replaying its graph: the table, then exit 0 once the thread ends, nothing on stderr.
    tail = textwrap.dedent("""
        import threading
        import accgraph.torch
        accgraph.torch.uninstrument()
        def loop():
            for _ in range(2000):
                g.replay()
            print("thread done", flush=True)
        threading.Thread(target=loop).start()
        """)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tail=tail))
    launcher = CLI_LAUNCHER.format(tests=str(pathlib.Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", launcher, str(script)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    assert "accgraph.torch: 3 report(s)" in done.stdout and "thread done" in done.stdout
    assert done.stderr == ""


# --- a clean exit (Note [Clean exit]) -------------------------------------------------------------

EXIT_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import accgraph, accgraph.torch
from torch_standin import make_gpt, make_torch
torch = make_torch()
accgraph.torch._runtime.load_torch = lambda: torch
accgraph.torch._runtime.BACKEND = "host"
prof = accgraph.Profiler()
prof.add_sink(lambda report: print("report", len(report)))
accgraph.torch.instrument(prof, modules=True)
model = make_gpt(torch)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    model(None)
for _ in range(3):
    g.replay()
{tail}
print("exiting")
"""


def test_the_exit_handler_delivers_uninstruments_and_releases_everything(torch):
    prof = accgraph.Profiler()
    accgraph.torch.instrument(prof, modules=True)
    g = capture_gpt(torch, make_gpt(torch))
    g.replay()
    g.replay()
    accgraph.torch._at_exit()
    assert prof.delivered == 2 and not accgraph.torch.is_instrumented()
    assert accgraph.torch.foreign_graph(g) is None  # its ForeignGraph (and the profiler) went
    assert not accgraph.torch._runtime.streams and not torch.nn.modules.module.hooks.pre
    g.replay()  # untimed from now on


@pytest.mark.parametrize("tail", ["", "del prof", "holder = [g, prof, model]; del g, prof"])
def test_an_interpreter_exiting_while_instrumented_is_clean(tail):
    tests = str(pathlib.Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT.format(tests=tests, tail=tail)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    assert "leaked" not in done.stderr and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "exiting"  # lazy delivery: the replays are delivered at exit
    assert lines[1:] == [f"report {len(gpt_paths())}"] * 3


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


def test_the_timed_replay_launches_on_the_current_stream_and_leaves_the_rest_to_python(torch):
    # Note [Owner replay] in bindings/python/src/foreign_graph.cpp: the instance's replay is a
    # native object; a stream it has not seen yet, arguments, and a replay kept after its graph
    # was reset go to the Python fallback, which wraps the stream or runs PyTorch's replay.
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        replay = g.__dict__["replay"]
        assert type(replay).__name__ == "_OwnerReplay" and replay.enabled
        g.replay()
        other = torch.cuda.Stream()  # not wrapped yet: the fallback wraps it and launches
        with torch.cuda.stream(other):
            g.replay()
            g.replay()  # now found
        g.replay()  # back on the first stream
        other.synchronize()
        prof.flush()
        assert prof.delivered == 4
        assert [r.replay_index for r in prof.reports()[-4:]] == [0, 1, 2, 3]
        assert accgraph.torch.foreign_graph(g).replay_count == 4
        with pytest.raises(TypeError):  # PyTorch's replay takes no arguments
            g.replay(1)
        with pytest.raises(TypeError):
            g.replay(stream=None)
        assert accgraph.torch.foreign_graph(g).replay_count == 4
        native, g.native = g.native, None  # PyTorch's replay raises: unchanged, nothing counted
        with pytest.raises(RuntimeError, match="without a preceding successful capture"):
            g.replay()
        g.native = native
        assert accgraph.torch.foreign_graph(g).replay_count == 4
        g.replay()
        torch.cuda.current_stream().synchronize()
        prof.flush()
        assert prof.delivered == 5 and prof.reports()[-1].replay_index == 4
        kept = g.replay
        g.reset()
        assert not kept.enabled and "replay" not in g.__dict__
        with pytest.raises(RuntimeError, match="without a preceding successful capture"):
            kept()  # PyTorch's own replay of the reset graph, not a launch
    with pytest.raises(TypeError, match="foreign must be an accgraph.ForeignGraph"):
        accgraph._accgraph._OwnerReplay(1, print, g, print, 0, {}, print)


def test_only_graphs_with_regions_get_a_timed_replay_of_their_own(torch):
    # Note [Wrapping CUDAGraph]: the class's replay stays PyTorch's; a capture that recorded
    # regions gives its instance a timed replay, which goes with reset(), a new capture and
    # uninstrument(), and which does not keep a dropped graph alive.
    import gc
    import weakref

    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof):
        plain = torch.cuda.CUDAGraph()
        with torch.cuda.graph(plain):
            torch.cuda.current_stream().work(0)
        assert "replay" not in plain.__dict__
        assert plain.replay.__func__ is torch.cuda.CUDAGraph.replay
        g = captured(torch, prof)
        assert g.replay.__wrapped__ is torch.cuda.CUDAGraph.replay  # Note [Owner replay]
        g.replay()
        plain.replay()
        prof.flush()
        assert prof.delivered == 1
        g.reset()
        assert "replay" not in g.__dict__
        g = captured(torch, prof)
        assert "replay" in g.__dict__
        with torch.cuda.graph(g := torch.cuda.CUDAGraph()):
            torch.cuda.current_stream().work(0)  # recaptured without regions
        assert "replay" not in g.__dict__
        timed = captured(torch, prof)
        gone = weakref.ref(captured(torch, prof))
        gc.disable()
        try:
            assert gone() is None  # freed without the cycle collector
        finally:
            gc.enable()
    assert "replay" not in timed.__dict__  # uninstrument() took it back
    timed.replay()  # untimed now
    torch.cuda.default_stream.synchronize()
    prof.flush()
    assert prof.delivered == 1


# --- issue 36: module timing changes nothing else PyTorch does ---------------------------------


def test_the_cycle_collector_is_paused_while_an_instrumented_capture_is_in_progress(torch):
    """Note [No collection inside captures]: a torch graph freed by the cycle collector during
    another capture invalidates it (PyTorch 2.11), so no automatic collection runs inside a
    capture begun under instrument(); it is back when the capture ends, however it ends."""
    prof = accgraph.Profiler()
    assert gc.isenabled()
    with accgraph.torch.instrumented(prof, modules=True):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            assert not gc.isenabled()
            inner = torch.cuda.CUDAGraph()  # a second capture at once: counted
            with torch.cuda.graph(inner, stream=torch.cuda.Stream()):
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer capture still runs
        assert gc.isenabled()
        # A native capture_end that raises, a capture_begin that raises, a capture reset
        # without its end, and uninstrument() while a capture is open: each gives it back.
        broken = torch.cuda.CUDAGraph()
        with torch.cuda.stream(torch.cuda.side_stream):
            broken.capture_begin()
            assert not gc.isenabled()
            broken.native.capture_end()  # the native capture is gone: its end raises
            with pytest.raises(accgraph.Error):
                broken.capture_end()
        assert gc.isenabled()
        with pytest.raises(RuntimeError, match="non-default stream"):
            torch.cuda.CUDAGraph().capture_begin()
        assert gc.isenabled()
        abandoned = torch.cuda.CUDAGraph()
        with torch.cuda.stream(torch.cuda.side_stream):
            abandoned.capture_begin()
        assert not gc.isenabled()
        abandoned.native.capture_end()
        abandoned.reset()
        assert gc.isenabled()
    accgraph.torch.instrument(prof)
    open_capture = torch.cuda.CUDAGraph()
    with torch.cuda.stream(torch.cuda.side_stream):
        open_capture.capture_begin()
    with pytest.raises(accgraph.InvalidStateError, match="in progress"):
        accgraph.torch.uninstrument()
    assert not gc.isenabled()
    accgraph.torch.uninstrument(force=True)  # as at interpreter exit
    assert gc.isenabled()
    open_capture.native.capture_end()


def test_a_collector_disabled_by_the_program_stays_disabled(torch):
    gc.disable()
    try:
        with accgraph.torch.instrumented(accgraph.Profiler()):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_no_automatic_collection_runs_inside_an_instrumented_capture(torch):
    """Garbage cycles made and dropped inside the capture, with allocations far past the
    collector's threshold: no collection starts until the capture ended."""
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append(capturing[0])

    capturing = [False]
    gc.callbacks.append(note)
    try:
        with accgraph.torch.instrumented(accgraph.Profiler(), modules=True):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                capturing[0] = True
                for _ in range(20 * gc.get_threshold()[0]):
                    cycle = []
                    cycle.append(cycle)
                capturing[0] = False
            for _ in range(20 * gc.get_threshold()[0]):
                cycle = []
                cycle.append(cycle)
    finally:
        gc.callbacks.remove(note)
    assert True not in collections and False in collections


@pytest.mark.parametrize("options, waits", [
    ({}, 0),
    # The default depth (64 on host) for both rings: replays 65-100 and eager trees 64-100.
    ({"marker_memory": 0}, (100 - 64) + (100 - 64 + 1)),
    ({"ring_depth": 8}, (100 - 8) + (100 - 8 + 1))])
def test_a_loop_of_compiled_module_calls_does_not_wait_for_the_eager_ring(torch, options, waits):
    """Issue 36: under torch.compile(mode="reduce-overhead") each call of the compiled module is
    an eager module region around a CUDA-graph replay; one eager tree per call filled the
    stream's eager ring (the backend's default depth: 16 on cuda, 64 here) and every later call
    counted a ring wait (15 of 30 calls on the H200). Eager rings hold what marker_memory holds
    now (Note [Eager ring depth]); marker_memory=0 keeps the default depth, and an explicit
    ring_depth wins."""
    prof = accgraph.Profiler(**options)
    with accgraph.torch.instrumented(prof, graph_region="graph", modules=True):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.cuda.current_stream().work(0)

        class Compiled(torch.nn.Module):
            def forward(self, x):
                g.replay()  # what cudagraph trees run in the compiled call
                return x

        compiled = Compiled()
        for _ in range(100):
            compiled(None)
        assert prof.ring_waits == waits
        prof.flush()
    assert prof.delivered == 200
    eager = [r for r in prof.reports() if r.graph_id == 0]
    assert len(eager) == 100 and [t.path for t in eager[-1]] == ["Compiled"]


# --- sampled timing (Note [Sampled replays]): PyTorch's graphs are foreign, timed on every replay


def test_a_sampling_profiler_times_every_replay_of_a_torch_graph_and_says_so(torch, tmp_path):
    prof = accgraph.Profiler(sample_every=4)
    with accgraph.torch.instrumented(prof):
        g = captured(torch, prof)
        for _ in range(6):
            g.replay()
    graph_id = accgraph.torch.foreign_graph(g).id
    (counts,) = prof.replay_counts()
    assert (counts.graph_id, counts.run, counts.timed, counts.sample_every, counts.sampled) == (
        graph_id, 6, 6, 4, False)
    assert [r.replay_index for r in prof.reports()] == list(range(6))
    assert {(row.replays_run, row.replays_timed, row.count) for row in prof.stats()} == {(6, 6, 6)}
    assert (f"sampled: graph {graph_id}: 6 of 6 replay(s) timed (every replay timed: its backend "
            "cannot launch it without markers") in prof.stats_table()
    header, note = accgraph.torch.module_table(prof).splitlines()[:2]
    assert header.startswith(f"graph {graph_id}: 6 replays, 6 timed, ")
    assert note == ("every replay timed: sampling was asked for, but this graph cannot be "
                    "launched without its markers (PyTorch's graphs, foreign to accgraph, today)")
    html = html_report(prof)
    assert "6 replays, 6 timed, " in html and "every replay timed: sampling was asked" in html
    # The CSV keeps the counts (not why): its table says how many were timed.
    prof.write_stats_csv(tmp_path / "stats.csv")
    table = accgraph.torch.module_table(str(tmp_path / "stats.csv"))
    assert table.startswith(f"graph {graph_id}: 6 replays, 6 timed, ")
    assert "every replay timed" not in table


def test_instrument_leaves_sampling_to_the_profiler(torch):
    with pytest.raises(TypeError, match="unexpected keyword argument 'sample_every'"):
        accgraph.torch.instrument(accgraph.Profiler(), sample_every=4)
    assert not accgraph.torch.is_instrumented()


@pytest.mark.parametrize("option", [["--sample", "4"], ["--overhead", "0.5"], []])
def test_cli_sampling_options_reach_the_table_and_the_csv(standin_as_torch, tmp_path, capsys,
                                                         option):
    csv = tmp_path / "modules.csv"
    assert run_cli(tmp_path, option + ["--csv", str(csv), "SCRIPT"]) == 0
    out = capsys.readouterr().out
    table = out.split("accgraph.torch: 3 report(s); per module (microseconds):\n")[1]
    lines = table.splitlines()
    assert lines[0].startswith("graph ") and ": 3 replays, 3 timed, " in lines[0]
    # --sample 4: the stand-in's graphs run on the host backend, which cannot copy a capture
    # (Note [Untimed foreign replays]), so the replays left untimed were timed: the table says
    # so. --overhead: 3 replays are all timed before the first reports choose N (1 in 1).
    assert lines[1].startswith("every replay timed: sampling was asked for") == (
        option[:1] == ["--sample"])
    rows = list(csv_module.DictReader(csv.open()))
    graph_rows = [r for r in rows if r["graph_id"] != "0"]
    assert graph_rows and {(r["replays_run"], r["replays_timed"]) for r in graph_rows} == {
        ("3", "3")}
