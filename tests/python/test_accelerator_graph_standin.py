"""accgraph.torch's torch.accelerator.Graph adapter (GraphAdapter) and the lifecycle-hook route of
instrument(), on the host backend against the torch stand-in (torch_standin.py), without a GPU:
the adapter's graphs are torch.cuda.CUDAGraphs, timed per replay with their modules by the same
code as every other; the hooks route (PyTorch 2.14's hooks, as the stand-in calls them) reports
what the patch route reports. test_accelerator_graph.py runs the adapter on PyTorch and CUDA,
test_accelerator_graph_registry.py the registry on a real torch >= 2.12."""

import pytest

import accgraph
import accgraph.torch
from accgraph.torch._accelerator import GraphAdapter, register_graph
from torch_standin import gpt_paths, make_gpt, make_torch


def use(monkeypatch, standin):
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch", lambda: standin)
    monkeypatch.setattr(accgraph.torch._runtime, "TORCH", standin)
    monkeypatch.setattr(accgraph.torch._runtime, "BACKEND", "host")
    monkeypatch.setattr(accgraph.torch._runtime, "streams", {})
    return standin


@pytest.fixture
def torch(monkeypatch):
    yield use(monkeypatch, make_torch())
    accgraph.torch.uninstrument()


@pytest.fixture
def hooked_torch(monkeypatch):
    yield use(monkeypatch, make_torch(lifecycle_hooks=True))
    accgraph.torch.uninstrument()


def adapter_capture(torch, model, **kwargs):
    """The registry's calls for ``with stream, torch.accelerator.Graph(): model(None)``."""
    adapter = GraphAdapter(**kwargs)
    with torch.cuda.stream(torch.cuda.side_stream):
        adapter.capture_begin((0, 0), "default")
        model(None)
        adapter.capture_end()
    return adapter


def test_the_adapter_composes_a_cuda_graph_timed_with_its_modules(torch):
    prof = accgraph.Profiler()
    model = make_gpt(torch)
    with accgraph.torch.instrumented(prof, modules=True):
        adapter = adapter_capture(torch, model)
        assert isinstance(adapter.graph, torch.cuda.CUDAGraph)
        for _ in range(3):
            adapter.replay()
        foreign = accgraph.torch.foreign_graph(adapter.graph)
        assert foreign is not None and foreign.replay_count == 3
        prof.flush()
    reports = [[t.path for t in r] for r in prof.reports() if r.graph_id == foreign.id]
    assert reports == [gpt_paths()] * 3


def test_the_adapter_passes_its_arguments_through(torch, tmp_path):
    adapter = GraphAdapter(keep_graph=True)
    assert adapter.graph is None  # made at the first capture: construction needs no device
    adapter.enable_debug_mode()
    with torch.cuda.stream(torch.cuda.side_stream):
        adapter.capture_begin((0, 9), "relaxed")
        adapter.capture_end()
    graph = adapter.graph
    assert graph.keep_graph and graph.debug and graph.pool_id == (0, 9)
    assert adapter.pool() == (0, 9)
    assert not graph.instantiated  # keep_graph: the caller instantiates
    adapter.instantiate()
    assert graph.instantiated
    adapter.debug_dump(str(tmp_path / "kept.dot"))
    assert (tmp_path / "kept.dot").stat().st_size > 0
    adapter.reset()
    assert graph.native is None
    with torch.cuda.stream(torch.cuda.side_stream):  # recaptured on the same torch graph
        adapter.capture_begin((0, 0), "default")
        adapter.capture_end()
    assert adapter.graph is graph and graph.pool_id[0] > 0  # a new private pool


def test_adapter_errors(torch):
    adapter = GraphAdapter()
    for method in (adapter.capture_end, adapter.replay, adapter.instantiate, adapter.pool):
        with pytest.raises(accgraph.InvalidStateError, match="nothing was captured"):
            method()
    with pytest.raises(accgraph.InvalidArgumentError, match="capture mode 'eager'"):
        adapter.capture_begin((0, 0), "eager")
    with pytest.raises(RuntimeError, match="non-default stream"):  # torch's own check
        adapter.capture_begin((0, 0), "default")


def test_a_torch_without_accelerator_graph_says_so(torch):
    assert not hasattr(torch, "accelerator")
    with pytest.raises(accgraph.UnavailableError, match=r"has no torch.accelerator.Graph \(it "
                       r"came with PyTorch 2.12\)"):
        register_graph("CUDA", GraphAdapter)
    with pytest.raises(accgraph.UnavailableError, match="no torch.accelerator.Graph"):
        accgraph.torch.register_accelerator_graph()


# --- the lifecycle-hook route (Note [Lifecycle hooks]) ------------------------------------------

def test_the_hooks_route_reports_what_the_patch_route_reports(hooked_torch):
    torch = hooked_torch
    model = make_gpt(torch)
    paths = {}
    cls = torch.cuda.CUDAGraph
    own = {name: cls.__dict__[name] for name in ("capture_begin", "reset")}
    assert "capture_end_pre" not in cls.__dict__  # inherited
    for route in ("patch", "hooks"):
        prof = accgraph.Profiler()
        with accgraph.torch.instrumented(prof, modules=True, route=route):
            # The hooks route leaves capture_begin and reset to PyTorch's hooks; no hook runs
            # before the native end, so capture_end_pre is wrapped on both.
            for name in ("capture_begin", "reset"):
                assert (cls.__dict__[name] is own[name]) == (route == "hooks"), (route, name)
            assert "capture_end_pre" in cls.__dict__
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(None)
            assert ("replay" in g.__dict__) == (route == "patch")
            for _ in range(5):
                g.replay()
            foreign = accgraph.torch.foreign_graph(g)
            assert foreign.replay_count == 5
            g.reset()  # the destroy callback (hooks) or the wrapper (patch) delivers them
            prof.flush()
        paths[route] = [[t.path for t in r] for r in prof.reports() if r.graph_id == foreign.id]
    assert paths["patch"] == paths["hooks"] == [gpt_paths()] * 5
    assert not any(torch.cuda.graphs.capture_start.values())  # uninstrument removed them
    assert not torch.cuda.graphs.replay_start


def test_the_hooks_route_delivers_a_dropped_graphs_replays(hooked_torch):
    torch = hooked_torch
    prof = accgraph.Profiler()
    with accgraph.torch.instrumented(prof, modules=True, route="hooks"):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            make_gpt(torch)(None)
        for _ in range(3):
            g.replay()
        del g  # the destroy callback runs at destruction
        prof.flush()
    assert len([r for r in prof.reports() if r.graph_id != 0]) == 3


def test_the_hooks_route_needs_the_hooks(torch):
    with pytest.raises(accgraph.UnavailableError, match="no CUDA graph lifecycle hooks"):
        accgraph.torch.instrument(accgraph.Profiler(), route="hooks")
    with pytest.raises(TypeError, match="route must be 'patch' or 'hooks'"):
        accgraph.torch.instrument(accgraph.Profiler(), route="wrap")
    assert not accgraph.torch.is_instrumented()


def test_debug_mode_keeps_the_graph_for_debug_dump_and_instantiates_it(torch, tmp_path):
    """Note [Debug dumps]: torch's CUDAGraph writes a debug dump only of a graph it kept, so the
    adapter keeps the graph in debug mode and instantiates it at capture_end (as a graph without
    keep_graph is), and debug_dump writes the file."""
    adapter = GraphAdapter()
    adapter.enable_debug_mode()
    with torch.cuda.stream(torch.cuda.side_stream):
        adapter.capture_begin((0, 0), "default")
        adapter.capture_end()
    assert adapter.graph.keep_graph and adapter.graph.debug and adapter.graph.instantiated
    adapter.debug_dump(str(tmp_path / "graph.dot"))
    assert (tmp_path / "graph.dot").stat().st_size > 0
    plain = GraphAdapter()  # without debug mode: torch's own behaviour, nothing kept
    with torch.cuda.stream(torch.cuda.side_stream):
        plain.capture_begin((0, 0), "default")
        plain.capture_end()
    assert not plain.graph.keep_graph and not plain.graph.instantiated
