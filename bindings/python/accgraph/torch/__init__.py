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
:func:`compare` compares two runs, ``html=``: the differential HTML report). :func:`annotate_trace` (_trace.py) lays
regions over the kernels of a torch.profiler trace. :func:`register_accelerator_graph` makes
``torch.accelerator.Graph`` (PyTorch >= 2.12) work on CUDA through accgraph, its graphs timed
like every other (Note [Accelerator graph] in _accelerator.py). What the modules of this package
share lives in _runtime.py (Note [One torch package]).
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import threading
import warnings
import weakref
from contextlib import contextmanager
from typing import (Any, Callable, Dict, Iterator, List, Optional, Pattern,
                    Tuple, Union)

from .. import _default_stream
from .._accgraph import ForeignGraph, GraphState, Profiler, Stream
from .._errors import Error, InvalidStateError, UnavailableError, make_error
from .._native import OwnerReplay

from . import _runtime
from ._accelerator import register_accelerator_graph
from ._distributed import collective_metadata, measure_host_clock_offset
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


# Note [Wrapping CUDAGraph]: instrument() replaces methods of torch.cuda.CUDAGraph (class
# attributes, so every instance goes through them, whoever made it) with wrappers that drive an
# accgraph ForeignGraph kept on the instance (Note [Foreign graphs] in
# include/accgraph/foreign_graph.hpp):
#
# - capture_begin: PyTorch's current stream is wrapped (before the capture: wrapping makes CUDA
#   calls), the original begins the native capture on it, then a new ForeignGraph is attached to
#   the profiler and told capture_begin(stream). Wrapped streams are cached per (device,
#   cudaStream_t) for the life of the process: one accgraph Stream per native stream, since the
#   profiler keys regions by accgraph stream (PyTorch's pooled streams are never destroyed; the
#   torch stream object is kept alive as the wrapper's owner).
# - capture_end (and capture_end_pre where the installed PyTorch has it): ForeignGraph.
#   capture_end() first, while the native capture is still open (the last markers go into it),
#   then the original; if the original fails, the ForeignGraph is reset.
# - replay: not wrapped on the class. A capture that recorded regions gives its instance a
#   `replay` attribute of its own (an instance attribute wins over the class's method), which
#   runs ForeignGraph.launch(stream, original replay, owner=graph) on the current stream of the
#   capture device (where PyTorch replays): the marker ring is made ready, the original replay
#   runs inside, and the launch is numbered; one report per replay. The attribute is a native
#   object (Note [Owner replay] in bindings/python/src/foreign_graph.cpp): on the host a replay
#   costs a raw-stream read and one call into C++, which keeps the GIL unless it must wait (Note
#   [Launch callables] there); a replay called with arguments (PyTorch's takes none) goes to
#   PyTorch's method untimed, and a stream not seen yet is wrapped by a Python fallback
#   (timed_replay below). No synchronisation with
#   lazy delivery (a replay waits only when its graph's marker ring, sized by the profiler's
#   marker_memory, is full: Profiler.ring_waits counts it). On the device: the
#   markers recorded into the capture (bench/python/bench_torch.py measures both). Every other
#   graph (a capture in which no region was recorded, whose ForeignGraph.replay_hooks is 0 after
#   its capture_end; a graph captured before instrument()) keeps PyTorch's own method: no
#   instrumentation code runs on its replays at all (issue 20: host cost per replay()). The
#   attribute holds the graph weakly (no reference cycle delays freeing a dropped graph's
#   memory) and goes when the graph is reset, recaptured or uninstrumented.
# - reset: ForeignGraph.reset() (the reports of pending replays are delivered), then the
#   original.
# - destruction: the ForeignGraph is an attribute of the instance, dropped with it before
#   PyTorch frees the native graph; dropping it does what reset() does.
#
# Graphs whose capture began before instrument(), or under an earlier instrument() period, pass
# straight through untimed; a region opened inside such a capture raises InvalidStateError (the
# stream captures into a graph accgraph was not told about). If timing cannot begin on a
# capture (the stream already captures into an accgraph graph, the profiler was dropped) a
# RuntimeWarning says why and the graph runs untimed. If it cannot end (a region left open
# inside the capture), the native capture holds markers whose storage is gone: the graph is
# ended and reset, and capture_end raises that accgraph error. A timed graph replayed inside
# another capture is refused (its reports could not be attributed); a torch graph is replayed
# from one thread at a time (another gets InvalidStateError). uninstrument() flushes the
# profiler and puts back the exact original functions; graphs captured while instrumented keep
# running their markers (untimed) until they are reset or dropped. Regions record only on the
# stream the capture began on (accgraph is not told of PyTorch's native forks), and sibling
# regions share one marker (Note [Native work] in core/stream.cpp): the README's PyTorch section.


# The wrapped methods of torch.cuda.CUDAGraph (capture_end_pre only where PyTorch has it).
_METHODS = ("capture_begin", "capture_end_pre", "capture_end", "replay", "reset",
            "register_generator_state")
# The instance attribute holding a graph's _GraphTiming.
_ATTRIBUTE = "_accgraph_timing"
# The instance attribute set when a generator was registered with the graph (Note [Untimed
# torch replays]).
_GENERATORS = "_accgraph_generators"


class _Installation:
    """One instrument() ... uninstrument() period: the profiler, the original methods, the
    default stream provider it replaced, and the graphs capturing now."""

    def __init__(self, torch: Any, profiler: Profiler, graph_region: Optional[str],
                 route: str = "patch") -> None:
        self.modules: Optional[ModuleTiming] = None  # instrument(modules=...): the module hooks
        self.torch = torch
        self.route = route  # Note [Lifecycle hooks]
        # route="hooks": the handles of PyTorch's global lifecycle hooks (removed at uninstrument).
        self.hook_handles: List[Any] = []
        self.profiler = profiler
        self.graph_region = graph_region
        cls = torch.cuda.CUDAGraph
        # What the class has, defined by itself or inherited (then removing the wrapper puts
        # the inherited one back).
        self.originals: Dict[str, Callable[..., Any]] = {
            name: getattr(cls, name) for name in _METHODS if hasattr(cls, name)
        }
        self.own = {name for name in self.originals if name in cls.__dict__}
        missing = [n for n in ("capture_begin", "capture_end", "replay", "reset")
                   if n not in self.originals]
        if missing:
            raise make_error(
                UnavailableError,
                f"accgraph.torch: torch.cuda.CUDAGraph (PyTorch {torch.__version__}) does not "
                f"define {', '.join(missing)}: this PyTorch is not supported",
            )
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.raw_stream: Callable[[int], int] = (
            raw if raw is not None else lambda device: torch.cuda.current_stream(device).cuda_stream
        )
        self.previous_provider: Optional[Callable[[], Stream]] = None
        # id(torch graph) -> torch graph, while it captures (weak: a graph dropped in the middle
        # of its capture does not block uninstrument()).
        self.capturing: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        # id(torch graph) of the captures that paused the cycle collector (Note [No collection
        # inside captures]), until their capture ends or is reset.
        self.gc_paused: Dict[int, bool] = {}
        self.patches: Dict[str, Callable[..., Any]] = {}
        # graph -> its own timed replay (Note [Wrapping CUDAGraph]); set by _make_patches.
        self.timed_replay: Callable[[Any, _GraphTiming], Callable[..., Any]] = (
            lambda graph, timing: None)


class _GraphTiming:
    """What an instrumented torch graph carries: its ForeignGraph and where it was captured."""

    __slots__ = ("installation", "foreign", "device", "stream", "ready", "graph_region_open",
                 "rng_probe")

    def __init__(self, installation: _Installation) -> None:
        self.installation = installation
        self.foreign = ForeignGraph(_runtime.BACKEND)
        self.device = 0
        self.stream: Optional[Stream] = None
        # A finished capture with regions: replays are launched through the ForeignGraph.
        self.ready = False
        self.graph_region_open = False
        # Note [Untimed torch replays]: the next replay reads the RNG offset around itself.
        self.rng_probe = False


# Note [No collection inside captures]: PyTorch's CUDAGraph frees its executable in its C++
# destructor, and PyTorch 2.11 does it in the thread's own capture mode: a torch graph freed
# while another capture is in progress in Global mode (PyTorch's default) is refused ("CUDA
# warning: operation not permitted when stream is capturing (function reset)") and invalidates
# that capture, whose next kernel then fails (issue 36: CUBLAS_STATUS_INTERNAL_ERROR in
# make_graphed_callables' backward capture in test_graph_make_graphed_callables_same_pool).
# Torch graphs are freed at such moments by Python's cycle collector: every module that
# make_graphed_callables returns references itself (its `forward` is a closure over the module),
# so its two graphs go only when the collector runs, and the collector runs at whichever
# allocation of a container crosses its threshold, on any thread. Plain PyTorch runs the same
# risk, at points fixed by its own allocations; module timing allocates too (a frame per module
# call) and so moves those points, here into a capture. So while a capture begun under
# instrument() is in progress the automatic collector is off (gc.disable(), process-wide): the
# collection that would have run inside the capture runs at the first allocation after it ends
# (an explicit gc.collect() still runs). Paused at capture_begin before the native capture
# begins; resumed after the native capture_end (also when it raises), at reset() of a graph
# whose capture never ended, and at uninstrument(). Nested and concurrent captures count: the
# collector comes back when the last ends, and only if it was on when the first began. Tests:
# test_torch_standin.py (the pause and its ends), test_torch_graphs_threeway.py (on the GPU:
# make_graphed_callables with cyclic garbage holding torch graphs, three ways).
_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


def _pause_gc(installation: "_Installation", graph: Any) -> None:
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if id(graph) in installation.gc_paused:
            return
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
        installation.gc_paused[id(graph)] = True


def _resume_gc(installation: "_Installation", graph_id: Optional[int]) -> None:
    """Ends the pause of graph `graph_id`'s capture (None: of every capture of
    `installation`)."""
    global _gc_pauses
    with _gc_lock:
        if graph_id is None:
            ended = len(installation.gc_paused)
            installation.gc_paused.clear()
        else:
            ended = 1 if installation.gc_paused.pop(graph_id, None) else 0
        if ended == 0 or _gc_pauses == 0:
            return
        _gc_pauses = max(0, _gc_pauses - ended)
        if _gc_pauses == 0 and _gc_was_enabled:
            gc.enable()


_lock = threading.RLock()
_installed: Optional[_Installation] = None
# Every torch graph that has carried a _GraphTiming (Note [Clean exit]).
_timed_graphs: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _current(installation: _Installation, device: int) -> Stream:
    """The cached accgraph Stream of PyTorch's current stream on `device` (one raw-stream read
    and one dict look-up once the stream is known). Timed replays find it natively (Note [Owner
    replay]); their fallback and capture_begin come here."""
    stream = _runtime.streams.get((device, installation.raw_stream(device)))
    return stream if stream is not None else _runtime.wrap_current(installation.torch, device)


def current_stream(device: Optional[int] = None) -> Stream:
    """The accgraph :class:`~accgraph.Stream` wrapping PyTorch's current stream on `device`
    (None: the current device): always the same Stream for the same native stream, so that
    regions opened on it record into an instrumented capture running on it. Needs no
    :func:`instrument`; TorchUnavailableError without PyTorch or a GPU."""
    torch = _runtime.load_torch()
    _runtime.require_backend()
    return _runtime.wrap_current(torch, torch.cuda.current_device() if device is None else device)


def _timing_of(graph: Any) -> Optional[_GraphTiming]:
    try:
        return graph.__dict__.get(_ATTRIBUTE)
    except AttributeError:  # an instance without a __dict__ cannot carry one
        return None


# Note [Graph labels]: a graph's statistics are kept apart by its id (Note [Stats contexts] in
# timing/model/stats.cpp); what a reader sees is its capture site (the first frame of the user's
# code under capture_begin: "train.py:42") or the label given by label_graph(). Both are kept by id
# for the life of the process (a few per graph), so the table printed after uninstrument() still
# names them.
_sites: Dict[int, str] = {}
_user_labels: Dict[int, str] = {}


def _capture_site(installation: _Installation) -> str:
    """file:line of the first frame outside torch, accgraph and contextlib (the stand-in's file
    counts as torch's: it defines CUDAGraph)."""
    import sys

    cls_module = sys.modules.get(getattr(installation.torch.cuda.CUDAGraph, "__module__", ""))
    skip_files = {getattr(cls_module, "__file__", None)}
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "") or ""
        root = name.split(".", 1)[0]
        if root not in ("torch", "accgraph", "contextlib", "runpy") and \
                frame.f_code.co_filename not in skip_files:
            return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def label_graph(graph: Any, label: str) -> None:
    """Names `graph` (a torch CUDAGraph captured while instrumented) `label` in the tables and
    reports, instead of its capture site ("decode, batch 8"). TypeError when it was never
    captured while instrumented."""
    timing = _timing_of(graph)
    if timing is None:
        raise TypeError("accgraph.torch.label_graph: the graph was never captured while "
                        "instrumented: label it after its capture")
    if not isinstance(label, str) or not label:
        raise TypeError("accgraph.torch.label_graph: label must be a non-empty str")
    with _lock:
        _user_labels[timing.foreign.id] = label


def graph_labels() -> Dict[int, str]:
    """Graph id (ReplayReport.graph_id, RegionStats.graph_id) -> its label (label_graph) or
    capture site, for every graph captured while instrumented in this process (Note [Graph
    labels])."""
    with _lock:
        return {**_sites, **_user_labels}


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
    timing = _timing_of(graph)
    return timing.foreign if timing is not None else None


def _warn_untimed(why: str) -> None:
    warnings.warn(f"accgraph.torch: this CUDA graph is not timed: {why}", RuntimeWarning,
                  stacklevel=4)


def _begin(installation: _Installation, graph: Any, stream: Stream, device: int) -> None:
    """After the native capture began: the ForeignGraph joins it. A failure leaves the graph
    untimed (with a warning): the owner's capture must go on."""
    timing = _timing_of(graph)
    try:
        if timing is None or timing.installation is not installation:
            timing = _GraphTiming(installation)
            installation.profiler.attach(timing.foreign)
            # Replaces (drops) the ForeignGraph of an earlier period, whose native graph was
            # reset: PyTorch begins a capture only on an empty graph.
            setattr(graph, _ATTRIBUTE, timing)
            _timed_graphs.add(graph)
        elif timing.foreign.state != GraphState.EMPTY:
            timing.foreign.reset()
        _set_ready(graph, timing, False)
        timing.graph_region_open = False
        timing.foreign.capture_begin(stream)
    except Error as e:
        _warn_untimed(f"capture_begin: {e}")
        return
    with _lock:
        if timing.foreign.id not in _user_labels:
            _sites[timing.foreign.id] = _capture_site(installation)
    timing.device, timing.stream = device, stream
    installation.capturing[id(graph)] = graph
    if installation.graph_region:
        try:
            installation.profiler.begin(stream, installation.graph_region)
            timing.graph_region_open = True
        except Error as e:
            warnings.warn(f"accgraph.torch: the graph region could not be opened: {e}",
                          RuntimeWarning, stacklevel=3)


def _end(installation: _Installation, graph: Any, end_native: Callable[..., Any],
         reset_native: Callable[..., Any]) -> None:
    """Before the native capture ends: the ForeignGraph records its last markers. When that
    fails, the markers already in the native capture write into storage the failed capture
    released: the native capture is ended and its graph reset (it must never run), and the
    accgraph error is raised."""
    timing = _timing_of(graph)
    if timing is None or timing.foreign.state != GraphState.CAPTURING:
        return
    installation.capturing.pop(id(graph), None)
    try:
        if timing.graph_region_open and timing.stream is not None:
            timing.graph_region_open = False
            installation.profiler.end(timing.stream)
        profiler = installation.profiler
        sampling = profiler.sample_every != 1 or profiler.overhead > 0
        timing.foreign.capture_end(untimed_copy=sampling)
    except Error:
        try:
            end_native(graph)
        finally:
            reset_native(graph)
        raise
    timing.rng_probe = timing.foreign.has_untimed_copy
    # A capture that recorded no region gives no profiler anything to report (no marker node,
    # no ring: Note [Deferred ring]): its replays go straight to PyTorch, at no cost.
    _set_ready(graph, timing, timing.foreign.replay_hooks > 0)


# The name of the per-instance replay (Note [Wrapping CUDAGraph]).
_REPLAY = "replay"


def _set_ready(graph: Any, timing: _GraphTiming, ready: bool) -> None:
    """Whether `graph`'s replays are launched through its ForeignGraph: the instance gets or
    loses its own timed `replay` (Note [Wrapping CUDAGraph])."""
    timing.ready = ready
    if ready and timing.installation.route == "patch":
        replay = timing.installation.timed_replay(graph, timing)
        # Note [Untimed torch replays]: the first replay goes through `fallback`, which probes.
        replay.enabled = not timing.rng_probe
        graph.__dict__[_REPLAY] = replay
    else:
        _drop_timed_replay(graph)


def _drop_timed_replay(graph: Any) -> None:
    try:
        replay = graph.__dict__.get(_REPLAY)
        if isinstance(replay, OwnerReplay):
            replay.enabled = False  # a reference kept elsewhere now goes to PyTorch's replay
            del graph.__dict__[_REPLAY]
    except AttributeError:  # an instance without a __dict__ never got one
        pass


def _release_timing(installation: _Installation, graph_id: int,
                    timing: Optional[_GraphTiming]) -> None:
    """Before the native graph of torch graph `graph_id` is reset or destroyed: a capture that
    never ended stops pausing the collector, and the graph's pending reports are delivered (its
    ForeignGraph reset; a failure is warned about, the native graph goes all the same)."""
    _resume_gc(installation, graph_id)  # a capture that never ended
    if timing is None:
        return
    installation.capturing.pop(graph_id, None)
    try:
        if timing.foreign.state != GraphState.EMPTY:
            timing.foreign.reset()  # pending reports, before the native graph goes
    except Error as e:
        warnings.warn(f"accgraph.torch: resetting the timing of a CUDA graph failed: {e}",
                      RuntimeWarning, stacklevel=3)


def _make_patches(installation: _Installation) -> Dict[str, Callable[..., Any]]:
    """The wrappers of the CUDAGraph methods (Note [Wrapping CUDAGraph])."""
    originals = installation.originals
    torch = installation.torch
    original_begin = originals["capture_begin"]
    original_end = originals["capture_end"]
    original_replay = originals["replay"]
    original_reset = originals["reset"]
    patches: Dict[str, Callable[..., Any]] = {}

    @functools.wraps(original_begin)
    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _installed is not installation:  # a stale bound method after uninstrument()
            return original_begin(self, *args, **kwargs)
        try:
            device = torch.cuda.current_device()
            stream = _current(installation, device)  # before the capture: wrapping calls CUDA
        except Error as e:
            _warn_untimed(f"wrapping PyTorch's current stream: {e}")
            stream = None
        _pause_gc(installation, self)  # Note [No collection inside captures]
        try:
            result = original_begin(self, *args, **kwargs)
        except BaseException:
            _resume_gc(installation, id(self))
            raise
        if stream is not None:
            _begin(installation, self, stream, device)
        return result

    def ending(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def end(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                _end(installation, self, lambda graph: original(graph, *args, **kwargs),
                     original_reset)
                try:
                    return original(self, *args, **kwargs)
                except BaseException:
                    timing = _timing_of(self)
                    if timing is not None and timing.installation is installation:
                        _set_ready(self, timing, False)
                        timing.foreign.reset()  # the native capture failed: nothing will run
                    raise
            finally:
                _resume_gc(installation, id(self))  # Note [No collection inside captures]

        return end

    raw_stream = installation.raw_stream
    ref = weakref.ref

    def timed_replay(graph: Any, timing: _GraphTiming) -> Callable[..., Any]:
        """The `replay` of one instance whose capture recorded regions, made when that capture
        ended: a native object (Note [Owner replay] in bindings/python/src/foreign_graph.cpp)
        whose call launches PyTorch's replay through the ForeignGraph, trusted, on PyTorch's
        current stream, and leaves every other case to `fallback`."""
        graph_ref = ref(graph)
        device = timing.device

        def fallback(*args: Any, **kwargs: Any) -> Any:
            # A replay with arguments, of a graph being dropped, after its capture was reset or
            # after uninstrument() (a stale reference): PyTorch's own. Else the current stream
            # is not wrapped yet: wrap it, then launch.
            self = graph_ref()
            if args or kwargs or self is None or not timing.ready or _installed is not installation:
                return original_replay(self, *args, **kwargs)
            stream = _current(installation, device)
            if timing.rng_probe:
                _probing_launch(self, timing, stream)
                return None
            # trusted: CUDAGraph.replay launches its executable exactly once or raises before
            # launching, so no fence is needed (Note [Launch fences]: it would cost two kernels),
            # and it refuses a capturing stream itself, so accgraph does not ask the stream
            # (Note [Trusted launches and captures]: a cudaStreamIsCapturing per replay).
            timing.foreign.launch(stream, original_replay, owner=self, trusted=True)
            return None

        return OwnerReplay(timing.foreign, original_replay, graph, raw_stream, device,
                           _runtime.streams, fallback)

    installation.timed_replay = timed_replay

    # Note [Untimed torch replays]: sampled timing launches the replays it does not time as the
    # copy of the capture without markers (ForeignGraph.capture_end(untimed_copy=True), made
    # only when the profiler samples), instead of PyTorch's replay. That replay runs a prologue
    # first: each generator registered with the graph advances its Philox offset by what the
    # capture drew and writes seed and offset where the graph's kernels read them. Skipping it
    # changes nothing only when the capture drew no random number, so the first replay reads the
    # capture device's default generator's offset (a host value, no synchronisation) around
    # PyTorch's own replay: unchanged, and no other generator registered with the graph
    # (register_generator_state, wrapped), and the copy may stand in for PyTorch's replay from
    # then on (ForeignGraph.enable_untimed_launches). A graph that draws random numbers (dropout
    # in train mode) keeps PyTorch's replay for every launch, all timed (replay_counts():
    # sampled False). A thread drawing random numbers during that first replay makes the check
    # fail the safe way.
    def _probing_launch(graph: Any, timing: _GraphTiming, stream: Stream) -> None:
        generators = getattr(torch.cuda, "default_generators", ())
        generator = generators[timing.device] if timing.device < len(generators) else None

        def offset() -> Optional[int]:
            try:
                return None if generator is None else int(generator.get_offset())
            except (RuntimeError, TypeError, ValueError):  # unknown: PyTorch's replay stays
                return None

        before = offset()
        timing.foreign.launch(stream, original_replay, owner=graph, trusted=True)
        timing.rng_probe = False
        after = offset()
        drew = before is None or after is None or after != before
        timing.foreign.enable_untimed_launches(not drew and not graph.__dict__.get(_GENERATORS))
        replay = graph.__dict__.get(_REPLAY)
        if isinstance(replay, OwnerReplay) and timing.ready:
            replay.enabled = True

    if "register_generator_state" in originals:
        original_register = originals["register_generator_state"]

        @functools.wraps(original_register)
        def register_generator_state(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                self.__dict__[_GENERATORS] = True
            except AttributeError:  # no __dict__: no timing attribute either, nothing to probe
                pass
            return original_register(self, *args, **kwargs)

        patches["register_generator_state"] = register_generator_state

    @functools.wraps(original_reset)
    def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        timing = _timing_of(self)
        if timing is not None:
            _set_ready(self, timing, False)
        _release_timing(installation, id(self), timing)
        return original_reset(self, *args, **kwargs)

    # The capture end has no hook before the native end (Note [Lifecycle hooks]): patched on
    # both routes.
    patches["capture_end"] = ending(original_end)
    if "capture_end_pre" in originals:
        patches["capture_end_pre"] = ending(originals["capture_end_pre"])
    if installation.route == "hooks":
        return patches  # and instrument() installs the hooks
    patches["capture_begin"] = capture_begin
    patches["reset"] = reset
    return patches


# Note [Lifecycle hooks]: PyTorch >= 2.14 calls global lifecycle hooks of torch.cuda.CUDAGraph
# (torch.cuda.graphs.register_graph_capture_start_hook, ..._replay_start_hook, and per graph
# register_destroy_callback). instrument(route="hooks") uses them where they replace a patch:
# - capture begin: the capture-start hook runs right after the native capture began, where the
#   capture_begin wrapper calls _begin. The stream is wrapped there, inside the capture (the
#   wrapper wraps it before), and the cycle collector is paused from there on (Note [No
#   collection inside captures]: the wrapper pauses it before the native begin).
# - reset and destruction: a destroy callback per captured graph, fired by PyTorch's reset() and
#   finalizer before the native graph goes, does what the reset wrapper does.
# - replay: the replay-start hook launches the replay's bookkeeping through ForeignGraph.launch
#   with nothing to launch (trusted) right before PyTorch launches the graph: the marker ring is
#   made ready and the replay numbered. It cannot wrap the launch: a replay PyTorch refuses after
#   the hook (a capturing stream: the hook checks that one first) is counted all the same, and an
#   accgraph error in a hook is swallowed by PyTorch (its global hooks' errors are), so a refused
#   timed replay runs untimed instead of raising.
# - capture end: no hook runs before the native capture ends (the capture-end hook runs after
#   cudaStreamEndCapture), and the last markers must go into the capture: capture_end (and
#   capture_end_pre) stay wrapped.
# The patch route (the default) times replays through the instance's native replay (Note
# [Wrapping CUDAGraph]); bench/python/bench_graph_routes.py compares the two routes' host cost
# per replay() on the installed PyTorch. Sampled timing's untimed copies (Note [Untimed torch
# replays]) stand in for PyTorch's launch, which a hook cannot do: on the hooks route every
# replay is PyTorch's, timed.
def _hooks_module(torch: Any) -> Any:
    """torch.cuda.graphs when it has the lifecycle hooks (PyTorch >= 2.14), else None."""
    graphs = getattr(torch.cuda, "graphs", None)
    needed = ("register_graph_capture_start_hook", "register_graph_replay_start_hook")
    if graphs is None or not all(hasattr(graphs, name) for name in needed):
        return None
    return graphs


def _nothing() -> None:
    pass


def _install_lifecycle_hooks(installation: _Installation) -> None:
    """route="hooks": PyTorch's global capture-start and replay-start hooks (Note [Lifecycle
    hooks])."""
    torch = installation.torch
    graphs = _hooks_module(torch)
    assert graphs is not None  # instrument() checked it

    def capture_started(graph: Any) -> None:
        if _installed is not installation:
            return
        try:
            device = torch.cuda.current_device()
            stream = _current(installation, device)
        except Error as e:
            _warn_untimed(f"wrapping PyTorch's current stream: {e}")
            return
        _pause_gc(installation, graph)  # Note [No collection inside captures]
        _begin(installation, graph, stream, device)
        timing = _timing_of(graph)
        if timing is None or timing.installation is not installation:
            return
        graph_id = id(graph)

        def destroyed() -> None:  # holds no reference to the graph (PyTorch's rule)
            timing.ready = False
            _release_timing(installation, graph_id, timing)

        graph.register_destroy_callback(destroyed)

    def replay_starting(graph: Any) -> None:
        timing = graph.__dict__.get(_ATTRIBUTE)
        if timing is None or not timing.ready or timing.installation is not installation:
            return
        stream = _current(installation, timing.device)
        if stream.is_capturing:
            return  # PyTorch refuses the replay itself: nothing to count
        timing.foreign.launch(stream, _nothing, trusted=True)

    installation.hook_handles.append(graphs.register_graph_capture_start_hook(capture_started))
    installation.hook_handles.append(graphs.register_graph_replay_start_hook(replay_starting))


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
    global _installed
    if not isinstance(profiler, Profiler):
        raise TypeError("accgraph.torch.instrument: profiler must be an accgraph.Profiler")
    if graph_region is not None and (not isinstance(graph_region, str) or not graph_region):
        raise TypeError("accgraph.torch.instrument: graph_region must be a non-empty str or None")
    _check_module_options(modules, depth, include, exclude, eager_modules)
    if route not in ("patch", "hooks"):
        raise TypeError(f"accgraph.torch.instrument: route must be 'patch' or 'hooks' (got "
                        f"{route!r})")
    torch = _runtime.load_torch()
    _runtime.require_backend()
    if route == "hooks" and _hooks_module(torch) is None:
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
        installation = _Installation(torch, profiler, graph_region, route)
        if modules is not None and modules is not False:
            installation.modules = ModuleTiming(
                torch, profiler, lambda: _current(installation, torch.cuda.current_device()),
                modules, depth, include, exclude, eager_modules)
        installation.patches = _make_patches(installation)
        if installation.modules is not None:
            installation.modules.install()
        cls = torch.cuda.CUDAGraph
        for name, patch in installation.patches.items():
            setattr(cls, name, patch)
        if route == "hooks":
            _install_lifecycle_hooks(installation)
        installation.previous_provider = _default_stream.set_default_stream_provider(
            lambda: _current(installation, torch.cuda.current_device()))
        _installed = installation
        _register_exit_handler()


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
    for graph in list(_timed_graphs):
        try:
            _drop_timed_replay(graph)
            graph.__dict__.pop(_ATTRIBUTE, None)  # its ForeignGraph goes, as reset() does
        except Exception as e:  # noqa: BLE001 - at exit, say it and go on
            warnings.warn(f"accgraph.torch: releasing a graph's timing at exit failed: {e}",
                          RuntimeWarning)
    _timed_graphs.clear()
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
            for graph in list(_timed_graphs):  # their replays are PyTorch's own again
                _drop_timed_replay(graph)
            _resume_gc(installation, None)  # captures still open (force) end untimed
            _default_stream.set_default_stream_provider(installation.previous_provider)
            installation.modules = None
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
