"""The module-graph wrappers of accgraph.torch: how instrument() follows torch.cuda.CUDAGraph
(Note [Wrapping CUDAGraph], Note [Lifecycle hooks]): the wrapped methods, the ForeignGraph each
captured graph carries, the cycle collector paused during captures, the graphs' capture sites.
accgraph.torch (__init__.py) installs and removes them."""

from __future__ import annotations

import functools
import gc
import os
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional

from .._accgraph import ForeignGraph, GraphState, Profiler, Stream
from .._errors import Error, UnavailableError, make_error
from .._native import OwnerReplay
from . import _runtime
from ._modules import ModuleTiming

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
#   instrumentation code runs on its replays at all (no host cost per replay()). The
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
METHODS = ("capture_begin", "capture_end_pre", "capture_end", "replay", "reset",
            "register_generator_state")
# The instance attribute holding a graph's GraphTiming.
ATTRIBUTE = "_accgraph_timing"
# The instance attribute set when a generator was registered with the graph (Note [Untimed
# torch replays]).
GENERATORS = "_accgraph_generators"


class Installation:
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
            name: getattr(cls, name) for name in METHODS if hasattr(cls, name)
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
        # Whether this period is in effect: from instrument() installing it to uninstrument()
        # (a wrapper of an earlier period, still bound somewhere, passes straight through).
        self.active = False
        # id(torch graph) -> torch graph, while it captures (weak: a graph dropped in the middle
        # of its capture does not block uninstrument()).
        self.capturing: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        # id(torch graph) of the captures that paused the cycle collector (Note [No collection
        # inside captures]), until their capture ends or is reset.
        self.gc_paused: Dict[int, bool] = {}
        self.patches: Dict[str, Callable[..., Any]] = {}
        # graph -> its own timed replay (Note [Wrapping CUDAGraph]); set by make_patches.
        self.timed_replay: Callable[[Any, GraphTiming], Callable[..., Any]] = (
            lambda graph, timing: None)


class GraphTiming:
    """What an instrumented torch graph carries: its ForeignGraph and where it was captured."""

    __slots__ = ("installation", "foreign", "device", "stream", "ready", "graph_region_open",
                 "rng_probe")

    def __init__(self, installation: Installation) -> None:
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
# that capture, whose next kernel then fails (CUBLAS_STATUS_INTERNAL_ERROR in
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


def pause_gc(installation: "Installation", graph: Any) -> None:
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if id(graph) in installation.gc_paused:
            return
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
        installation.gc_paused[id(graph)] = True


def resume_gc(installation: "Installation", graph_id: Optional[int]) -> None:
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


lock = threading.RLock()
# Every torch graph that has carried a GraphTiming (Note [Clean exit]).
timed_graphs: "weakref.WeakSet[Any]" = weakref.WeakSet()

def stream_of(installation: Installation, device: int) -> Stream:
    """The cached accgraph Stream of PyTorch's current stream on `device` (one raw-stream read
    and one dict look-up once the stream is known). Timed replays find it natively (Note [Owner
    replay]); their fallback and capture_begin come here."""
    stream = _runtime.streams.get((device, installation.raw_stream(device)))
    return stream if stream is not None else _runtime.wrap_current(installation.torch, device)


def timing_of(graph: Any) -> Optional[GraphTiming]:
    try:
        return graph.__dict__.get(ATTRIBUTE)
    except AttributeError:  # an instance without a __dict__ cannot carry one
        return None


# Note [Graph labels]: a graph's statistics are kept apart by its id (Note [Stats contexts] in
# timing/model/stats.cpp); what a reader sees is its capture site (the first frame of the user's
# code under capture_begin: "train.py:42") or the label given by label_graph(). Both are kept by id
# for the life of the process (a few per graph), so the table printed after uninstrument() still
# names them.
sites: Dict[int, str] = {}
user_labels: Dict[int, str] = {}


def capture_site(installation: Installation) -> str:
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


def warn_untimed(why: str) -> None:
    warnings.warn(f"accgraph.torch: this CUDA graph is not timed: {why}", RuntimeWarning,
                  stacklevel=4)


def begin_capture(installation: Installation, graph: Any, stream: Stream, device: int) -> None:
    """After the native capture began: the ForeignGraph joins it. A failure leaves the graph
    untimed (with a warning): the owner's capture must go on."""
    timing = timing_of(graph)
    try:
        if timing is None or timing.installation is not installation:
            timing = GraphTiming(installation)
            installation.profiler.attach(timing.foreign)
            # Replaces (drops) the ForeignGraph of an earlier period, whose native graph was
            # reset: PyTorch begins a capture only on an empty graph.
            setattr(graph, ATTRIBUTE, timing)
            timed_graphs.add(graph)
        elif timing.foreign.state != GraphState.EMPTY:
            timing.foreign.reset()
        set_ready(graph, timing, False)
        timing.graph_region_open = False
        timing.foreign.capture_begin(stream)
    except Error as e:
        warn_untimed(f"capture_begin: {e}")
        return
    with lock:
        if timing.foreign.id not in user_labels:
            sites[timing.foreign.id] = capture_site(installation)
    timing.device, timing.stream = device, stream
    installation.capturing[id(graph)] = graph
    if installation.graph_region:
        try:
            installation.profiler.begin(stream, installation.graph_region)
            timing.graph_region_open = True
        except Error as e:
            warnings.warn(f"accgraph.torch: the graph region could not be opened: {e}",
                          RuntimeWarning, stacklevel=3)


def end_capture(installation: Installation, graph: Any, end_native: Callable[..., Any],
         reset_native: Callable[..., Any]) -> None:
    """Before the native capture ends: the ForeignGraph records its last markers. When that
    fails, the markers already in the native capture write into storage the failed capture
    released: the native capture is ended and its graph reset (it must never run), and the
    accgraph error is raised."""
    timing = timing_of(graph)
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
    set_ready(graph, timing, timing.foreign.replay_hooks > 0)


# The name of the per-instance replay (Note [Wrapping CUDAGraph]).
REPLAY = "replay"


def set_ready(graph: Any, timing: GraphTiming, ready: bool) -> None:
    """Whether `graph`'s replays are launched through its ForeignGraph: the instance gets or
    loses its own timed `replay` (Note [Wrapping CUDAGraph])."""
    timing.ready = ready
    if ready and timing.installation.route == "patch":
        replay = timing.installation.timed_replay(graph, timing)
        # Note [Untimed torch replays]: the first replay goes through `fallback`, which probes.
        replay.enabled = not timing.rng_probe
        graph.__dict__[REPLAY] = replay
    else:
        drop_timed_replay(graph)


def drop_timed_replay(graph: Any) -> None:
    try:
        replay = graph.__dict__.get(REPLAY)
        if isinstance(replay, OwnerReplay):
            replay.enabled = False  # a reference kept elsewhere now goes to PyTorch's replay
            del graph.__dict__[REPLAY]
    except AttributeError:  # an instance without a __dict__ never got one
        pass


def release_timing(installation: Installation, graph_id: int,
                    timing: Optional[GraphTiming]) -> None:
    """Before the native graph of torch graph `graph_id` is reset or destroyed: a capture that
    never ended stops pausing the collector, and the graph's pending reports are delivered (its
    ForeignGraph reset; a failure is warned about, the native graph goes all the same)."""
    resume_gc(installation, graph_id)  # a capture that never ended
    if timing is None:
        return
    installation.capturing.pop(graph_id, None)
    try:
        if timing.foreign.state != GraphState.EMPTY:
            timing.foreign.reset()  # pending reports, before the native graph goes
    except Error as e:
        warnings.warn(f"accgraph.torch: resetting the timing of a CUDA graph failed: {e}",
                      RuntimeWarning, stacklevel=3)


def capture_begin_patch(installation: Installation) -> Callable[..., Any]:
    """CUDAGraph.capture_begin: the current stream wrapped, the collector paused, then the native
    capture, which the ForeignGraph joins (Note [Wrapping CUDAGraph])."""
    torch = installation.torch
    original_begin = installation.originals["capture_begin"]

    @functools.wraps(original_begin)
    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not installation.active:  # a stale bound method after uninstrument()
            return original_begin(self, *args, **kwargs)
        try:
            device = torch.cuda.current_device()
            stream = stream_of(installation, device)  # before the capture: wrapping calls CUDA
        except Error as e:
            warn_untimed(f"wrapping PyTorch's current stream: {e}")
            stream = None
        pause_gc(installation, self)  # Note [No collection inside captures]
        try:
            result = original_begin(self, *args, **kwargs)
        except BaseException:
            resume_gc(installation, id(self))
            raise
        if stream is not None:
            begin_capture(installation, self, stream, device)
        return result

    return capture_begin


def capture_end_patch(installation: Installation, original: Callable[..., Any]
                      ) -> Callable[..., Any]:
    """CUDAGraph.capture_end (or capture_end_pre): the ForeignGraph's last markers, then the
    native end; a failed native end leaves the graph untimed."""
    original_reset = installation.originals["reset"]

    @functools.wraps(original)
    def end(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            end_capture(installation, self, lambda graph: original(graph, *args, **kwargs),
                        original_reset)
            try:
                return original(self, *args, **kwargs)
            except BaseException:
                timing = timing_of(self)
                if timing is not None and timing.installation is installation:
                    set_ready(self, timing, False)
                    timing.foreign.reset()  # the native capture failed: nothing will run
                raise
        finally:
            resume_gc(installation, id(self))  # Note [No collection inside captures]

    return end


def timed_replay_maker(installation: Installation) -> Callable[[Any, GraphTiming],
                                                               Callable[..., Any]]:
    """What gives a graph whose capture recorded regions its own `replay` when that capture
    ended (Installation.timed_replay, Note [Wrapping CUDAGraph])."""
    original_replay = installation.originals["replay"]
    raw_stream = installation.raw_stream
    ref = weakref.ref

    def timed_replay(graph: Any, timing: GraphTiming) -> Callable[..., Any]:
        """A native object (Note [Owner replay] in bindings/python/src/foreign_graph.cpp) whose
        call launches PyTorch's replay through the ForeignGraph, trusted, on PyTorch's current
        stream, and leaves every other case to `fallback`."""
        graph_ref = ref(graph)
        device = timing.device

        def fallback(*args: Any, **kwargs: Any) -> Any:
            # A replay with arguments, of a graph being dropped, after its capture was reset or
            # after uninstrument() (a stale reference): PyTorch's own. Else the current stream
            # is not wrapped yet: wrap it, then launch.
            self = graph_ref()
            if args or kwargs or self is None or not timing.ready or not installation.active:
                return original_replay(self, *args, **kwargs)
            stream = stream_of(installation, device)
            if timing.rng_probe:
                probing_launch(installation, self, timing, stream)
                return None
            # trusted: CUDAGraph.replay launches its executable exactly once or raises before
            # launching, so no fence is needed (Note [Launch fences]: it would cost two kernels),
            # and it refuses a capturing stream itself, so accgraph does not ask the stream
            # (Note [Trusted launches and captures]: a cudaStreamIsCapturing per replay).
            timing.foreign.launch(stream, original_replay, owner=self, trusted=True)
            return None

        return OwnerReplay(timing.foreign, original_replay, graph, raw_stream, device,
                           _runtime.streams, fallback)

    return timed_replay


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
def probing_launch(installation: Installation, graph: Any, timing: GraphTiming,
                   stream: Stream) -> None:
    generators = getattr(installation.torch.cuda, "default_generators", ())
    generator = generators[timing.device] if timing.device < len(generators) else None

    def offset() -> Optional[int]:
        try:
            return None if generator is None else int(generator.get_offset())
        except (RuntimeError, TypeError, ValueError):  # unknown: PyTorch's replay stays
            return None

    before = offset()
    timing.foreign.launch(stream, installation.originals["replay"], owner=graph, trusted=True)
    timing.rng_probe = False
    after = offset()
    drew = before is None or after is None or after != before
    timing.foreign.enable_untimed_launches(not drew and not graph.__dict__.get(GENERATORS))
    replay = graph.__dict__.get(REPLAY)
    if isinstance(replay, OwnerReplay) and timing.ready:
        replay.enabled = True


def register_generator_patch(original_register: Callable[..., Any]) -> Callable[..., Any]:
    """CUDAGraph.register_generator_state: marks the graph as one whose replays move another
    generator (Note [Untimed torch replays])."""

    @functools.wraps(original_register)
    def register_generator_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            self.__dict__[GENERATORS] = True
        except AttributeError:  # no __dict__: no timing attribute either, nothing to probe
            pass
        return original_register(self, *args, **kwargs)

    return register_generator_state


def reset_patch(installation: Installation) -> Callable[..., Any]:
    """CUDAGraph.reset: the graph's timing released before the native graph goes."""
    original_reset = installation.originals["reset"]

    @functools.wraps(original_reset)
    def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        timing = timing_of(self)
        if timing is not None:
            set_ready(self, timing, False)
        release_timing(installation, id(self), timing)
        return original_reset(self, *args, **kwargs)

    return reset


def make_patches(installation: Installation) -> Dict[str, Callable[..., Any]]:
    """The wrappers of the CUDAGraph methods (Note [Wrapping CUDAGraph]); sets the
    installation's timed_replay."""
    originals = installation.originals
    installation.timed_replay = timed_replay_maker(installation)
    patches: Dict[str, Callable[..., Any]] = {}
    if "register_generator_state" in originals:
        patches["register_generator_state"] = register_generator_patch(
            originals["register_generator_state"])
    # The capture end has no hook before the native end (Note [Lifecycle hooks]): patched on
    # both routes.
    patches["capture_end"] = capture_end_patch(installation, originals["capture_end"])
    if "capture_end_pre" in originals:
        patches["capture_end_pre"] = capture_end_patch(installation, originals["capture_end_pre"])
    if installation.route == "hooks":
        return patches  # and instrument() installs the hooks
    patches["capture_begin"] = capture_begin_patch(installation)
    patches["reset"] = reset_patch(installation)
    return patches


# Note [Lifecycle hooks]: PyTorch >= 2.14 calls global lifecycle hooks of torch.cuda.CUDAGraph
# (torch.cuda.graphs.register_graph_capture_start_hook, ..._replay_start_hook, and per graph
# register_destroy_callback). instrument(route="hooks") uses them where they replace a patch:
# - capture begin: the capture-start hook runs right after the native capture began, where the
#   capture_begin wrapper calls begin. The stream is wrapped there, inside the capture (the
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
def hooks_module(torch: Any) -> Any:
    """torch.cuda.graphs when it has the lifecycle hooks (PyTorch >= 2.14), else None."""
    graphs = getattr(torch.cuda, "graphs", None)
    needed = ("register_graph_capture_start_hook", "register_graph_replay_start_hook")
    if graphs is None or not all(hasattr(graphs, name) for name in needed):
        return None
    return graphs


def nothing() -> None:
    pass


def install_lifecycle_hooks(installation: Installation) -> None:
    """route="hooks": PyTorch's global capture-start and replay-start hooks (Note [Lifecycle
    hooks])."""
    torch = installation.torch
    graphs = hooks_module(torch)
    assert graphs is not None  # instrument() checked it

    def capture_started(graph: Any) -> None:
        if not installation.active:
            return
        try:
            device = torch.cuda.current_device()
            stream = stream_of(installation, device)
        except Error as e:
            warn_untimed(f"wrapping PyTorch's current stream: {e}")
            return
        pause_gc(installation, graph)  # Note [No collection inside captures]
        begin_capture(installation, graph, stream, device)
        timing = timing_of(graph)
        if timing is None or timing.installation is not installation:
            return
        graph_id = id(graph)

        def destroyed() -> None:  # holds no reference to the graph (PyTorch's rule)
            timing.ready = False
            release_timing(installation, graph_id, timing)

        graph.register_destroy_callback(destroyed)

    def replay_starting(graph: Any) -> None:
        timing = graph.__dict__.get(ATTRIBUTE)
        if timing is None or not timing.ready or timing.installation is not installation:
            return
        stream = stream_of(installation, timing.device)
        if stream.is_capturing:
            return  # PyTorch refuses the replay itself: nothing to count
        timing.foreign.launch(stream, nothing, trusted=True)

    installation.hook_handles.append(graphs.register_graph_capture_start_hook(capture_started))
    installation.hook_handles.append(graphs.register_graph_replay_start_hook(replay_starting))
