"""Transparent timing of PyTorch CUDA graphs: every ``torch.cuda.CUDAGraph`` captured while
instrumented is timed by an accgraph :class:`~accgraph.Profiler`, per region and per replay,
without changing the code that captures and replays it (``torch.cuda.graph``,
``make_graphed_callables``, ``torch.compile(mode="reduce-overhead")``, or a CUDAGraph used by
hand)::

    import accgraph, accgraph.torch

    prof = accgraph.Profiler()              # delivery="lazy": no synchronisation per replay
    accgraph.torch.instrument(prof)

    class Layer(torch.nn.Module):
        def forward(self, x):
            with prof.region("add", layer=self.layer_id):   # no stream: PyTorch's current one
                x = x + self.offset
            ...

    with torch.cuda.graph(g):               # the execution code is unchanged
        y = model(x)                        # regions record into the capture
    for _ in range(1000):
        g.replay()                          # one report per replay
    model(x)                                # the same regions, timed eagerly
    prof.flush()
    print(prof.stats_table())

``Profiler(delivery="immediate")`` delivers each report right after its replay; the default,
lazy, reads them when a graph's marker ring (sized by ``marker_memory``) is full, on ``flush()``, or
from the background collector. :func:`uninstrument` (or the :func:`instrumented` block) puts
PyTorch back. :func:`collective_metadata` names the collective a region times, and
:func:`measure_host_clock_offset` measures this host's clock against rank 0's over the job's
process group (both in _distributed.py). What it costs per replay and what cannot be timed:
the README's PyTorch section; how the methods are wrapped: Note [Wrapping CUDAGraph] below.

Every ``nn.Module`` call can be a region without changing the model:
``instrument(prof, modules=True)`` (every module of the process) or ``modules=model`` (one
tree), with ``depth``, ``include``, ``exclude`` filters (Note [Module regions] in _modules.py)::

    accgraph.torch.instrument(prof, modules=True, depth=2)
    with torch.cuda.graph(g):
        y = model(x)                        # regions GPT, GPT/h.0, GPT/h.0/attn, ...

``python -m accgraph.torch script.py`` does that for an unmodified script and prints the
per-module table at exit: one section per captured graph, one for the eager calls
(:func:`module_table`, :func:`stats_by_context`; :func:`write_html` writes the HTML report,
:func:`compare` compares two runs, ``html=``: the differential HTML report). :func:`annotate_trace` (_trace/) lays
regions over the kernels of a torch.profiler trace. :func:`register_accelerator_graph` makes
``torch.accelerator.Graph`` (PyTorch >= 2.12) work on CUDA through accgraph, its graphs timed
like every other (Note [Accelerator graph] in _accelerator.py). What the modules of this package
share lives in _runtime.py (Note [One torch package]).
"""

from __future__ import annotations

import atexit
import os
import warnings
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Pattern, Union

from .. import _default_stream
from .._accgraph import ForeignGraph, Profiler, Stream
from .._errors import InvalidStateError, UnavailableError, make_error

from . import _runtime
from ._accelerator import register_accelerator_graph
from ._distributed import collective_metadata, measure_host_clock_offset
from ._graphs import (ATTRIBUTE, Installation, drop_timed_replay, hooks_module,
                      install_lifecycle_hooks, lock, make_patches, resume_gc, sites, stream_of,
                      timed_graphs, timing_of, user_labels)
from ._html import compare, write_html
from ._modules import ModuleTiming
from ._runtime import TorchUnavailableError
from ._table import module_table, stats_by_context
from ._trace import annotate_trace

__all__ = [
    "TorchUnavailableError",
    "annotate_trace",
    "collective_metadata",
    "current_stream",
    "compare",
    "foreign_graph",
    "graph_labels",
    "instrument",
    "instrumented",
    "is_instrumented",
    "label_graph",
    "load_torch",
    "measure_host_clock_offset",
    "module_table",
    "register_accelerator_graph",
    "run_metadata",
    "set_module_filters",
    "stats_by_context",
    "uninstrument",
    "write_html",
]


# The instrumentation in effect (instrument() ... uninstrument()); the graph wrappers and their
# state are _graphs.py's (Note [Wrapping CUDAGraph]).
_lock = lock
_installed: Optional[Installation] = None


def current_stream(device: Optional[int] = None) -> Stream:
    """The accgraph :class:`~accgraph.Stream` wrapping PyTorch's current stream on `device`
    (None: the current device): always the same Stream for the same native stream, so that
    regions opened on it record into an instrumented capture running on it. Needs no
    :func:`instrument`; TorchUnavailableError without PyTorch or a GPU."""
    torch = _runtime.load_torch()
    _runtime.require_backend()
    return _runtime.wrap_current(torch, torch.cuda.current_device() if device is None else device)


def label_graph(graph: Any, label: str) -> None:
    """Names `graph` (a torch CUDAGraph captured while instrumented) `label` in the tables and
    reports, instead of its capture site ("decode, batch 8"). TypeError when it was never
    captured while instrumented."""
    timing = timing_of(graph)
    if timing is None:
        raise TypeError("accgraph.torch.label_graph: the graph was never captured while "
                        "instrumented: label it after its capture")
    if not isinstance(label, str) or not label:
        raise TypeError("accgraph.torch.label_graph: label must be a non-empty str")
    with _lock:
        user_labels[timing.foreign.id] = label


def graph_labels() -> Dict[int, str]:
    """Graph id (ReplayReport.graph_id, RegionStats.graph_id) -> its label (label_graph) or
    capture site, for every graph captured while instrumented in this process (Note [Graph
    labels])."""
    with _lock:
        return {**sites, **user_labels}


def run_metadata() -> Dict[str, str]:
    """What a statistics file should say about this run beyond what the profiler knows
    (``Profiler.write_stats_json(path, metadata=run_metadata())``; ``--json`` writes it):
    python_version, and where PyTorch is loaded torch_version, cuda_runtime (torch.version.cuda),
    device_name; driver (the NVIDIA driver's CUDA version, from libcuda) and marker_placement
    (ACCGRAPH_CUDA_MARKER_PLACEMENT, or the default) where the backend is cuda. Imports nothing
    new: a fact that cannot be read is left out."""
    import platform
    import sys

    metadata = {"python_version": platform.python_version()}
    torch = _runtime.TORCH or sys.modules.get("torch")
    if torch is not None:
        metadata["torch_version"] = str(getattr(torch, "__version__", "?"))
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        if cuda:
            metadata["cuda_runtime"] = str(cuda)
        try:
            if torch.cuda.is_available():
                metadata["device_name"] = str(torch.cuda.get_device_name())
        except Exception:  # noqa: BLE001 - a fact that cannot be read is left out
            pass
    if _runtime.BACKEND == "cuda":
        driver = _cuda_driver_version()
        if driver:
            metadata["driver"] = driver
        metadata["marker_placement"] = (os.environ.get("ACCGRAPH_CUDA_MARKER_PLACEMENT") or
                                        "default (exact on sm_90 and newer, else chained)")
    return metadata


def _cuda_driver_version() -> Optional[str]:
    """The CUDA version the NVIDIA driver supports ("13.0"), or None without libcuda."""
    import ctypes

    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0 or version.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def foreign_graph(graph: Any) -> Optional[ForeignGraph]:
    """The :class:`~accgraph.ForeignGraph` timing the torch graph `graph` (its ``id`` is the
    ``graph_id`` of its reports), or None when `graph` was never captured while
    instrumented."""
    timing = timing_of(graph)
    return timing.foreign if timing is not None else None


ModuleSelection = Union[bool, Any, List[Any], None]


def _check_module_options(modules: ModuleSelection, depth: Optional[int],
                          include: Union[str, Pattern[str], None],
                          exclude: Union[str, Pattern[str], None], eager_modules: bool) -> None:
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise TypeError("accgraph.torch.instrument: depth must be an int >= 0 (the root module "
                        "is depth 0) or None")
    if modules is None or modules is False:
        if depth is not None or include is not None or exclude is not None or not eager_modules:
            raise TypeError("accgraph.torch.instrument: depth, include, exclude and "
                            "eager_modules filter module timing: pass modules=True (every "
                            "module) or modules=model as well")


def _check_instrument_options(profiler: Any, graph_region: Any, route: Any) -> None:
    if not isinstance(profiler, Profiler):
        raise TypeError("accgraph.torch.instrument: profiler must be an accgraph.Profiler")
    if graph_region is not None and (not isinstance(graph_region, str) or not graph_region):
        raise TypeError("accgraph.torch.instrument: graph_region must be a non-empty str or None")
    if route not in ("patch", "hooks"):
        raise TypeError(f"accgraph.torch.instrument: route must be 'patch' or 'hooks' (got "
                        f"{route!r})")


def instrument(profiler: Profiler, *, graph_region: Optional[str] = None,
               modules: ModuleSelection = None, depth: Optional[int] = None,
               include: Union[str, Pattern[str], None] = None,
               exclude: Union[str, Pattern[str], None] = None,
               eager_modules: bool = True, route: str = "patch") -> None:
    """Times every ``torch.cuda.CUDAGraph`` whose capture begins from now on with `profiler`,
    and makes ``profiler.region(name, **metadata)`` without a stream time on PyTorch's current
    stream (inside a capture: into the graph; outside: eagerly). `graph_region`: also time
    each captured graph as a whole, as a top-level region of that name around the regions of
    the code (needed where the code opens none, e.g. ``torch.compile`` graphs).

    `modules`: time ``nn.Module`` calls as regions too, with the module's class as metadata
    ``module`` (Note [Module regions] in accgraph/torch/_modules.py): True for every module of
    the process (named from the outermost module called), a module or a list of modules for
    their trees (named from each root). `depth`: only calls nested at most that deep (the root
    0); `include`/`exclude`: regular expressions searched in the qualified name (the root: its
    class name). `eager_modules=False` times module calls only inside captures. A call that
    cannot be timed runs untimed, counted in the stats table (one RuntimeWarning per reason).
    Under ``torch.compile`` tracing the hooks record nothing.

    Sampled timing is the profiler's own (``Profiler(sample_every=N)`` or ``overhead=``; ``python
    -m accgraph.torch --sample N``), not an argument here: one profiler times every graph it is
    given the same way. A replay it does not time launches a copy of the capture without its
    markers instead of PyTorch's replay, where that changes nothing: a capture that draws no
    random number (PyTorch's replay would move no generator), holding no memory or event record
    node. Other graphs are timed on every replay (``profiler.replay_counts()``:
    ``sampled=False``), and :func:`module_table` says so (Note [Untimed torch replays]).

    `route`: how PyTorch's graphs are followed: "patch" (the default: wrapped methods, Note
    [Wrapping CUDAGraph]) or "hooks" (PyTorch >= 2.14's lifecycle hooks where they replace a
    wrapper, Note [Lifecycle hooks]; UnavailableError on an older PyTorch).

    TorchUnavailableError without PyTorch, a GPU or accgraph's cuda backend; InvalidStateError
    when already instrumented (call :func:`uninstrument` first). Note [Wrapping CUDAGraph] says
    how the methods are wrapped and what that costs. At interpreter exit, a process still
    instrumented is flushed and uninstrumented (Note [Clean exit])."""
    _check_instrument_options(profiler, graph_region, route)
    _check_module_options(modules, depth, include, exclude, eager_modules)
    torch = _runtime.load_torch()
    _runtime.require_backend()
    if route == "hooks" and hooks_module(torch) is None:
        raise make_error(UnavailableError,
                         f"accgraph.torch.instrument: PyTorch {torch.__version__} has no CUDA "
                         "graph lifecycle hooks (torch.cuda.graphs.register_graph_capture_start_"
                         "hook, PyTorch >= 2.14): use route='patch'")
    with _lock:
        if _installed is not None:
            raise make_error(
                InvalidStateError,
                f"accgraph.torch.instrument: already instrumented (with {_installed.profiler!r}): "
                "call accgraph.torch.uninstrument() first",
            )
        installation = Installation(torch, profiler, graph_region, route)
        if modules is not None and modules is not False:
            installation.modules = ModuleTiming(
                torch, profiler, lambda: stream_of(installation, torch.cuda.current_device()),
                modules, depth, include, exclude, eager_modules)
        _install(installation)
        _register_exit_handler()


def _install(installation: Installation) -> None:
    """Puts `installation`'s wrappers, module hooks, lifecycle hooks and stream provider in
    place and makes it the one in effect (under _lock)."""
    global _installed
    torch = installation.torch
    installation.patches = make_patches(installation)
    if installation.modules is not None:
        installation.modules.install()
    cls = torch.cuda.CUDAGraph
    for name, patch in installation.patches.items():
        setattr(cls, name, patch)
    if installation.route == "hooks":
        install_lifecycle_hooks(installation)
    installation.previous_provider = _default_stream.set_default_stream_provider(
        lambda: stream_of(installation, torch.cuda.current_device()))
    installation.active = True
    _installed = installation


# Note [Clean exit]: a process that ends while instrumented must end as quietly as one that
# never was: at exit the module holds the profiler (through the installation, the wrappers and
# the default stream provider) and the wrapped streams, and nanobind reports every instance of
# its classes still alive when it shuts down ("nanobind: leaked N instances"). So the first
# instrument() registers an atexit handler (it runs before accgraph's own, registered at its
# import) that flushes and uninstruments even while a capture is open (the process ends: no
# capture will end), then drops the timing of every torch graph still alive (PyTorch keeps some
# in its own globals to the end: make_graphed_callables closures, torch.compile's CUDA graph
# trees), which delivers their pending replays and frees their marker storage, and drops the
# stream cache. A graph replayed after that, by an atexit handler registered before
# instrument(), would write its markers into freed storage: none of PyTorch's does.
_exit_handler_registered = False


def _register_exit_handler() -> None:
    global _exit_handler_registered
    if not _exit_handler_registered:
        atexit.register(_at_exit)
        _exit_handler_registered = True


def _at_exit() -> None:
    try:
        _uninstrument(force=True)
    except Exception as e:  # noqa: BLE001 - at exit, say it and go on
        warnings.warn(f"accgraph.torch: uninstrumenting at exit failed: {e}", RuntimeWarning)
    for graph in list(timed_graphs):
        try:
            drop_timed_replay(graph)
            graph.__dict__.pop(ATTRIBUTE, None)  # its ForeignGraph goes, as reset() does
        except Exception as e:  # noqa: BLE001 - at exit, say it and go on
            warnings.warn(f"accgraph.torch: releasing a graph's timing at exit failed: {e}",
                          RuntimeWarning)
    timed_graphs.clear()
    _runtime.clear_streams()


def uninstrument(*, force: bool = False) -> None:
    """Puts back the original methods of ``torch.cuda.CUDAGraph`` (the same function objects)
    and the previous default stream provider, and removes the module hooks, after flushing the
    profiler (every pending replay is delivered). Graphs captured while instrumented replay
    untimed from now on. Does nothing when not instrumented; InvalidStateError while an
    instrumented capture is in progress (end it first), unless `force`: then those captures
    end untimed (for the end of a process: ``python -m accgraph.torch`` after the script, and
    the exit handler, Note [Clean exit])."""
    _uninstrument(force)


def _uninstrument(force: bool) -> None:
    global _installed
    with _lock:
        installation = _installed
        if installation is None:
            return
        if installation.capturing and not force:
            raise make_error(
                InvalidStateError,
                f"accgraph.torch.uninstrument: {len(installation.capturing)} CUDA graph "
                "capture(s) timed by it are in progress: end them first (capture_end)",
            )
        cls = installation.torch.cuda.CUDAGraph
        replaced: List[str] = []
        try:
            if installation.modules is not None:
                installation.modules.remove()
            for handle in installation.hook_handles:
                handle.remove()
            installation.hook_handles = []
            installation.profiler.flush()
        finally:
            for name, patch in installation.patches.items():
                if cls.__dict__.get(name) is not patch:
                    replaced.append(name)
                if name in installation.own:
                    setattr(cls, name, installation.originals[name])
                else:
                    delattr(cls, name)
            for graph in list(timed_graphs):  # their replays are PyTorch's own again
                drop_timed_replay(graph)
            resume_gc(installation, None)  # captures still open (force) end untimed
            _default_stream.set_default_stream_provider(installation.previous_provider)
            installation.modules = None
            installation.active = False
            _installed = None
    if replaced:
        warnings.warn(
            "accgraph.torch.uninstrument: torch.cuda.CUDAGraph." + ", .".join(replaced) +
            " had been replaced again after instrument(); the originals are back, that "
            "replacement is gone",
            RuntimeWarning,
            stacklevel=3,
        )


def load_torch() -> Any:
    """The torch module that :func:`instrument` would time: PyTorch with a visible GPU and
    accgraph's backend for its streams (a stand-in under :func:`accgraph.torch.testing.use_torch`).
    TorchUnavailableError saying which is missing and what to install otherwise, as
    :func:`instrument` raises."""
    torch = _runtime.load_torch()
    _runtime.require_backend()
    return torch


def set_module_filters(*, depth: Optional[int] = None,
                       include: Union[str, Pattern[str], None] = None,
                       exclude: Union[str, Pattern[str], None] = None) -> None:
    """Replaces the module filters of the instrumentation in effect (``instrument(...,
    modules=...)``'s `depth`, `include` and `exclude`, the same rules) for the module calls that
    follow: graphs captured from now on time the modules it selects, graphs captured before keep
    theirs. InvalidStateError when not instrumented with modules."""
    _check_module_options(True, depth, include, exclude, True)
    with _lock:
        installation = _installed
        if installation is None or installation.modules is None:
            raise make_error(
                InvalidStateError,
                "accgraph.torch.set_module_filters: module timing is not in effect: call "
                "accgraph.torch.instrument(profiler, modules=...) first",
            )
        installation.modules.set_filters(depth, include, exclude)


def is_instrumented() -> bool:
    """Whether :func:`instrument` is in effect."""
    return _installed is not None


@contextmanager
def instrumented(profiler: Profiler, *, graph_region: Optional[str] = None,
                 modules: ModuleSelection = None, depth: Optional[int] = None,
                 include: Union[str, Pattern[str], None] = None,
                 exclude: Union[str, Pattern[str], None] = None,
                 eager_modules: bool = True, route: str = "patch") -> Iterator[Profiler]:
    """:func:`instrument` for the block (the same arguments), :func:`uninstrument` after it
    (also on an exception); yields `profiler`::

        with accgraph.torch.instrumented(accgraph.Profiler(), modules=model) as prof:
            ...
    """
    instrument(profiler, graph_region=graph_region, modules=modules, depth=depth,
               include=include, exclude=exclude, eager_modules=eager_modules, route=route)
    try:
        yield profiler
    finally:
        uninstrument()
