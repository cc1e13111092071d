"""A stand-in for the few parts of torch that accgraph.torch uses, on the host backend, so that
its wrappers run without a GPU (tests/python/test_torch_standin.py; test_torch.py runs the real
thing). A "CUDA stream" is an accgraph host Stream whose native_handle plays the cudaStream_t;
CUDAGraph plays PyTorch's native capture with an accgraph Graph capturing the current stream's
queue, and replays it on the current stream, as torch.cuda.CUDAGraph does with CUDA. nn.Module,
its global forward hooks (torch.nn.modules.module.register_module_forward_pre_hook,
register_module_forward_hook with always_call, register_module_module_registration_hook) and
torch.compiler.is_compiling follow PyTorch's Module._call_impl. For the scripts under bench/ and
examples/ (their --standin mode, tests/python/test_bench_scripts.py) it also has a Tensor that
only tracks its shape and enqueues a tiny op per operation, the few nn layers they build
(Linear, LayerNorm, ...: leaves that do the same), events timed on the host and torch.profiler's
context manager (no kernels recorded): install() puts it in place of torch for the process."""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import math
import sys
import time
import types
import weakref
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import accgraph


class StandinStream:
    """torch.cuda.Stream: `cuda_stream` is the handle of an accgraph host stream's queue."""

    # Every stream made, for torch.cuda.synchronize().
    made: "weakref.WeakSet[StandinStream]" = weakref.WeakSet()

    def __init__(self) -> None:
        self.queue = accgraph.Stream("host")
        self.cuda_stream = self.queue.native_handle
        self.device_index = 0
        StandinStream.made.add(self)

    def wait_stream(self, other: "StandinStream") -> None:
        """The host has no cross-queue waits: `other`'s work is finished first (outside a
        capture, where the scripts call it)."""
        if not other.queue.is_capturing:
            other.synchronize()

    def work(self, seconds: float) -> None:
        """A kernel of `seconds` on this stream."""
        self.queue.delay(seconds)

    def synchronize(self) -> None:
        self.queue.synchronize()


def make_torch(*, cuda_available: bool = True, end_in_two_steps: bool = False,
               lifecycle_hooks: bool = False) -> Any:
    """A new stand-in torch module (a new CUDAGraph class each time: patches do not leak).
    `end_in_two_steps`: capture_end calls capture_end_pre (which ends the native capture)
    then capture_end_post, as recent PyTorch does. `lifecycle_hooks`: that, and PyTorch
    2.14's lifecycle hooks as torch.cuda.graphs calls them (global capture-start, replay-start
    and replay-end hooks whose errors are swallowed, destroy callbacks fired by reset() and at
    destruction)."""
    torch = types.ModuleType("torch_standin")
    torch.__version__ = "0.0+standin"
    torch.version = types.SimpleNamespace(cuda=None if not cuda_available else "standin")
    cuda = types.SimpleNamespace()
    cuda.default_stream = StandinStream()
    cuda.current = cuda.default_stream
    cuda.side_stream = StandinStream()
    cuda.is_available = lambda: cuda_available
    cuda.current_device = lambda: 0
    cuda.current_stream = lambda device=None: cuda.current
    cuda.Stream = StandinStream

    @contextlib.contextmanager
    def stream(s: StandinStream) -> Iterator[None]:
        previous, cuda.current = cuda.current, s
        try:
            yield
        finally:
            cuda.current = previous

    cuda.stream = stream

    def synchronize(device: Any = None) -> None:
        for s in list(StandinStream.made):
            if not s.queue.is_capturing:
                s.synchronize()

    cuda.synchronize = synchronize
    cuda.set_device = lambda device: None
    cuda.device_count = lambda: 1 if cuda_available else 0
    cuda.get_device_name = lambda device=None: "stand-in (accgraph host backend)"

    class Event:
        """torch.cuda.Event timed on the host: record() reads the host clock, synchronize()
        waits for the stream it was recorded on."""

        def __init__(self, enable_timing: bool = False, blocking: bool = False,
                     interprocess: bool = False, external: bool = False) -> None:
            self.stream: Optional[StandinStream] = None
            self.ns = 0

        def record(self, stream: Optional[StandinStream] = None) -> None:
            self.stream = stream or cuda.current
            self.ns = time.perf_counter_ns()

        def synchronize(self) -> None:
            if self.stream is not None and not self.stream.queue.is_capturing:
                self.stream.synchronize()

        def elapsed_time(self, end: "Event") -> float:
            return (end.ns - self.ns) / 1e6

    cuda.Event = Event

    class _CUDAGraph:
        """torch._C._CUDAGraph: the base, whose reset the class below inherits."""

        native: Optional[accgraph.Graph] = None

        def reset(self) -> None:
            self.native = None

    class CUDAGraph(_CUDAGraph):
        """torch.cuda.CUDAGraph on the host: `native` is the captured accgraph Graph.
        `capture_elsewhere` makes the native capture run on another queue than the current
        stream's (a capture accgraph cannot join)."""

        def __init__(self, keep_graph: bool = False) -> None:
            self.native: Optional[accgraph.Graph] = None
            self.capture_elsewhere = False
            self.keep_graph = keep_graph
            self.pool_id: Any = None
            self.debug = False
            self.instantiated = False

        def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
            self.pool_id = tuple(pool) if pool is not None else (next(_pool_ids), 0)
            if self.native is not None:
                raise RuntimeError("This CUDAGraph instance already owns a captured graph")
            if cuda.current is cuda.default_stream:
                raise RuntimeError("CUDA graphs must be captured on a non-default stream")
            queue = StandinStream().queue if self.capture_elsewhere else cuda.current.queue
            self._capture_queue = queue
            self.native = accgraph.Graph("host")
            self.native.capture_begin(queue)

        def capture_end(self) -> None:
            assert self.native is not None
            self.native.capture_end()

        def replay(self) -> None:
            if self.native is None:
                raise RuntimeError("Called CUDAGraph::replay without a preceding successful capture")
            if cuda.current.queue.is_capturing:  # as PyTorch 2.11 refuses it, before launching
                raise RuntimeError("Cannot prepare for replay during capturing stage.")
            self.native.replay(cuda.current.queue)

        def instantiate(self) -> None:
            if self.native is None:
                raise RuntimeError("instantiate: nothing captured")
            self.instantiated = True

        def pool(self) -> Any:
            if self.native is None:
                raise RuntimeError("Called CUDAGraph::pool() without a preceding successful capture.")
            return self.pool_id

        def enable_debug_mode(self) -> None:
            self.debug = True

        def debug_dump(self, path: str) -> None:
            if self.native is None:
                raise RuntimeError("debug_dump: nothing captured")
            # As torch 2.11: capture_end drops the cudaGraph_t unless keep_graph, debug mode or
            # not, and debug_dump then only warns and writes nothing.
            if self.keep_graph:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("digraph standin {}\n")

    class CUDAGraphEndingInTwoSteps(CUDAGraph):
        def capture_end_pre(self) -> None:
            assert self.native is not None
            self.native.capture_end()

        def capture_end_post(self) -> None:
            pass

        def capture_end(self) -> None:
            self.capture_end_pre()
            self.capture_end_post()

    def run_hooks(hooks: Dict[int, Callable[..., None]], *args: Any) -> None:
        for hook in list(hooks.values()):
            try:
                hook(*args)
            except Exception:  # as torch.cuda.graphs._run_global_hooks: swallowed
                pass

    class Handle:
        def __init__(self, table: Dict[int, Any], fn: Any) -> None:
            self.table, self.id = table, next(_handle_ids)
            table[self.id] = fn

        def remove(self) -> None:
            self.table.pop(self.id, None)

    graphs = types.SimpleNamespace(capture_start={}, replay_start={}, replay_end={})
    graphs.register_graph_capture_start_hook = lambda fn: Handle(graphs.capture_start, fn)
    graphs.register_graph_replay_start_hook = lambda fn: Handle(graphs.replay_start, fn)
    graphs.register_graph_replay_end_hook = lambda fn: Handle(graphs.replay_end, fn)

    class CUDAGraphWithHooks(CUDAGraphEndingInTwoSteps):
        """PyTorch 2.14's hook calls: start hooks after the native begin, replay hooks around
        the launch (the end hooks also when it raised), destroy callbacks at reset and death."""

        def __init__(self, keep_graph: bool = False) -> None:
            super().__init__(keep_graph)
            self.destroy_callbacks: Dict[int, Callable[[], None]] = {}
            weakref.finalize(self, run_hooks, self.destroy_callbacks)

        def register_destroy_callback(self, cb: Callable[[], None]) -> Handle:
            return Handle(self.destroy_callbacks, cb)

        def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
            super().capture_begin(pool, capture_error_mode)
            run_hooks(graphs.capture_start, self)

        def replay(self) -> None:
            run_hooks(graphs.replay_start, self)
            try:
                super().replay()
            finally:
                run_hooks(graphs.replay_end, self)

        def reset(self) -> None:
            callbacks = dict(self.destroy_callbacks)
            self.destroy_callbacks.clear()
            run_hooks(callbacks)
            super().reset()

    if lifecycle_hooks:
        cuda.graphs = graphs
        cuda.CUDAGraph = CUDAGraphWithHooks
    else:
        cuda.CUDAGraph = CUDAGraphEndingInTwoSteps if end_in_two_steps else CUDAGraph

    class graph:
        """torch.cuda.graph: the capture on a side stream made current for the block."""

        def __init__(self, cuda_graph: CUDAGraph, pool: Any = None,
                     stream: Optional[StandinStream] = None,
                     capture_error_mode: str = "global") -> None:
            self.cuda_graph = cuda_graph
            self.stream_ctx = cuda.stream(stream or cuda.side_stream)
            self.capture_error_mode = capture_error_mode

        def __enter__(self) -> None:
            self.stream_ctx.__enter__()
            self.cuda_graph.capture_begin(capture_error_mode=self.capture_error_mode)

        def __exit__(self, *exc: Any) -> None:
            self.cuda_graph.capture_end()
            self.stream_ctx.__exit__(*exc)

    cuda.graph = graph
    torch.cuda = cuda
    # torch.compiler.is_compiling(): set `compiling` to play Dynamo tracing.
    torch.compiler = types.SimpleNamespace(compiling=False)
    torch.compiler.is_compiling = lambda: torch.compiler.compiling
    torch.nn = make_nn(torch.compiler.is_compiling)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: cuda.current.cuda_stream)
    add_tensors(torch)
    return torch


_pool_ids = itertools.count(1)
_handle_ids = itertools.count(1)


def install(**options: Any) -> Any:
    """A new stand-in (make_torch(**options)) in place of torch for the rest of the process:
    accgraph.torch's (accgraph.torch.testing.use_torch on the host backend) and `import
    torch`'s. What the --standin mode of the scripts under bench/ and examples/ calls."""
    import accgraph.torch.testing

    torch = make_torch(**options)
    add_distributed(torch)
    # Entered for the rest of the process (left at exit). The block is kept referenced: a
    # generator-based context manager that is collected closes its generator, which leaves
    # the block (accgraph.torch back on the cuda backend and the real torch).
    block = accgraph.torch.testing.use_torch(torch, backend="host")
    block.__enter__()
    _installed.append(block)
    sys.modules["torch"] = torch
    sys.modules["torch.distributed"] = torch.distributed  # `import torch.distributed as dist`
    return torch


_installed: list = []  # install()'s use_torch blocks, entered for the life of the process


class Tensor:
    """A tensor that is only a shape: each operation enqueues a tiny op on the current stream
    (a kernel's place in a capture) and gives a tensor of the shape PyTorch would give."""

    def __init__(self, torch: Any, shape: Tuple[int, ...], dtype: Any = None) -> None:
        self._torch = torch
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype or "float32"
        self.device = "cuda:0 (stand-in)"

    def numel(self) -> int:
        return math.prod(self.shape)

    def element_size(self) -> int:
        return 2 if self.dtype == "bfloat16" else 4

    def fill_(self, value: Any) -> "Tensor":
        self._op()
        return self

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return self._op()


    def sum(self) -> "Tensor":
        return self._op(())

    def _op(self, shape: Optional[Tuple[int, ...]] = None) -> "Tensor":
        self._torch.cuda.current_stream().work(0.0)
        return Tensor(self._torch, self.shape if shape is None else shape)

    def __add__(self, other: Any) -> "Tensor":
        return self._op()

    __radd__ = __sub__ = __mul__ = __add__

    def add_(self, other: Any) -> "Tensor":
        self._op()
        return self

    copy_ = add_

    def float(self) -> "Tensor":
        return self._op()

    abs = contiguous = float

    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        return self

    def split(self, size: int, dim: int = 0) -> Tuple["Tensor", ...]:
        shape = list(self.shape)
        pieces = math.ceil(shape[dim] / size)
        shape[dim] = size
        return tuple(self._op(tuple(shape)) for _ in range(pieces))

    def view(self, *shape: int) -> "Tensor":
        return Tensor(self._torch, shape)

    def transpose(self, a: int, b: int) -> "Tensor":
        shape = list(self.shape)
        shape[a], shape[b] = shape[b], shape[a]
        return Tensor(self._torch, tuple(shape))

    def __getitem__(self, index: Any) -> "Tensor":
        return Tensor(self._torch, self.shape)

    def max(self) -> "Tensor":
        return self._op(())

    def item(self) -> float:
        return 0.0

    def tolist(self) -> list:
        return [0] * (self.shape[0] if self.shape else 1)


def add_tensors(torch: Any) -> None:
    """torch's tensor factories, dtypes, no_grad, torch.profiler and the nn layers the scripts
    under bench/ and examples/ build, on `torch` (a make_torch() module)."""
    def factory(*shape: Any, device: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return Tensor(torch, shape, dtype)

    torch.Tensor = Tensor
    torch.randn = torch.zeros = torch.ones = torch.empty = factory
    torch.randint = lambda low, high, shape, **kwargs: Tensor(torch, shape)
    torch.equal = lambda a, b: a.shape == b.shape
    torch.manual_seed = lambda seed: None
    torch.no_grad = contextlib.nullcontext
    torch.float32, torch.bfloat16 = "float32", "bfloat16"

    class HostView:
        """What from_dlpack gives: indexing reads the memory; `device` names the stand-in."""

        device = "host (stand-in)"

        def __init__(self, array: Any) -> None:
            self.array = array

        def __getitem__(self, index: Any) -> Any:
            return self.array[index]

    def from_dlpack(x: Any) -> Any:
        """The host memory behind `x` through numpy's DLPack import (a Tensor of one element
        where numpy is missing)."""
        x.__dlpack_device__()  # the protocol's first call, as torch makes it
        try:
            import numpy
        except ImportError:
            return Tensor(torch, (1,))
        return HostView(numpy.from_dlpack(x))

    torch.from_dlpack = from_dlpack

    class profile:
        """torch.profiler.profile: records nothing; export_chrome_trace writes a trace with no
        kernels (the host backend runs none)."""

        def __init__(self, activities: Any = None, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> "profile":
            return self

        def __exit__(self, *exc: Any) -> None:
            pass

        def events(self) -> list:
            return []

        def export_chrome_trace(self, path: str) -> None:
            with open(path, "w") as f:
                json.dump({"traceEvents": []}, f)

    torch.profiler = types.SimpleNamespace(
        profile=profile, ProfilerActivity=types.SimpleNamespace(CPU="CPU", CUDA="CUDA"))
    torch.autograd = types.SimpleNamespace(DeviceType=types.SimpleNamespace(CUDA="CUDA"))
    nn = torch.nn
    Module = nn.Module

    class Leaf(Module):
        """A layer: one op on the current stream; `out_features` sets the last dimension."""

        out_features: Optional[int] = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

        def forward(self, x: Tensor, *args: Any, **kwargs: Any) -> Any:
            shape = x.shape if self.out_features is None else x.shape[:-1] + (self.out_features,)
            return x._op(shape)

    class Linear(Leaf):
        def __init__(self, in_features: int, out_features: int, **kwargs: Any) -> None:
            super().__init__()
            self.out_features = out_features

    class MultiheadAttention(Leaf):
        def forward(self, q: Tensor, *args: Any, **kwargs: Any) -> Any:
            return q._op(), None

    class Sequential(nn.ModuleList):
        def __init__(self, *modules: Module) -> None:
            super().__init__(modules)

        def forward(self, x: Any) -> Any:
            for module in self:
                x = module(x)
            return x

    nn.Linear, nn.MultiheadAttention, nn.Sequential = Linear, MultiheadAttention, Sequential
    nn.LayerNorm = type("LayerNorm", (Leaf,), {})
    nn.GELU = type("GELU", (Leaf,), {})
    nn.ReLU = type("ReLU", (Leaf,), {})
    nn.Parameter = lambda tensor: tensor
    nn.functional = types.SimpleNamespace(
        scaled_dot_product_attention=lambda q, k, v, **kwargs: q._op())


def add_distributed(torch: Any) -> None:
    """torch.distributed for one rank in this process (examples/python/nccl_allreduce_torch.py's
    --standin): init_process_group makes the world of one rank; all_reduce is a tiny op on the
    current stream (recorded into a capture as NCCL's kernel is); the object collectives give
    this rank's object back. tests/python/torch_distributed_standin is the multi-process one."""
    state: Dict[str, Any] = {}

    def init_process_group(backend: str = "nccl", init_method: Any = None, rank: int = 0,
                           world_size: int = 1, **kwargs: Any) -> None:
        if state:
            raise RuntimeError("trying to initialize the default process group twice!")
        if world_size != 1 or rank != 0:
            raise NotImplementedError("the stand-in torch.distributed has one rank")
        state.update(backend=backend)

    def initialized() -> Dict[str, Any]:
        if not state:
            raise ValueError("Default process group has not been initialized, please make "
                             "sure to call init_process_group.")
        return state

    def all_reduce(tensor: Tensor, op: Any = None, group: Any = None,
                   async_op: bool = False) -> None:
        initialized()
        tensor._op()

    def all_gather_object(output: list, obj: Any, group: Any = None) -> None:
        initialized()
        output[0] = obj

    def broadcast_object_list(objects: list, src: int = 0, group: Any = None,
                              device: Any = None) -> None:
        initialized()

    torch.distributed = types.SimpleNamespace(
        is_available=lambda: True,
        is_nccl_available=lambda: True,
        is_initialized=lambda: bool(state),
        init_process_group=init_process_group,
        destroy_process_group=lambda group=None: state.clear(),
        get_rank=lambda group=None: (initialized(), 0)[1],
        get_world_size=lambda group=None: (initialized(), 1)[1],
        get_process_group_ranks=lambda group=None: (initialized(), [0])[1],
        get_backend=lambda group=None: initialized()["backend"],
        all_reduce=all_reduce,
        all_gather_object=all_gather_object,
        broadcast_object_list=broadcast_object_list,
        barrier=lambda group=None, async_op=False, device_ids=None: initialized() and None,
    )


class RemovableHandle:
    """torch.utils.hooks.RemovableHandle: removes its id from the dicts it was registered in."""

    _ids = itertools.count()

    def __init__(self, *dicts: Dict[int, Any]) -> None:
        self.id = next(RemovableHandle._ids)
        self.dicts = dicts

    def remove(self) -> None:
        for d in self.dicts:
            d.pop(self.id, None)


def make_nn(is_compiling: Callable[[], bool]) -> Any:
    """torch.nn with Module, ModuleList and the global module hooks of torch.nn.modules.module
    (new dicts per stand-in: hooks do not leak between tests)."""
    hooks = types.SimpleNamespace()
    hooks.pre: Dict[int, Callable[..., Any]] = collections.OrderedDict()
    hooks.post: Dict[int, Callable[..., Any]] = collections.OrderedDict()
    hooks.always: Dict[int, bool] = collections.OrderedDict()
    hooks.registration: Dict[int, Callable[..., Any]] = collections.OrderedDict()

    def register_module_forward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
        handle = RemovableHandle(hooks.pre)
        hooks.pre[handle.id] = hook
        return handle

    def register_module_forward_hook(hook: Callable[..., Any], *, with_kwargs: bool = False,
                                     always_call: bool = False) -> RemovableHandle:
        assert not with_kwargs, "the stand-in has no with_kwargs"
        handle = RemovableHandle(hooks.post, hooks.always)
        hooks.post[handle.id] = hook
        if always_call:
            hooks.always[handle.id] = True
        return handle

    def register_module_module_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
        handle = RemovableHandle(hooks.registration)
        hooks.registration[handle.id] = hook
        return handle

    class Module:
        """nn.Module: submodules registered by attribute assignment; __call__ runs the global
        hooks around forward as Module._call_impl does (the always-called forward hooks also
        when forward raises)."""

        def __init__(self) -> None:
            object.__setattr__(self, "_modules", collections.OrderedDict())

        def __setattr__(self, name: str, value: Any) -> None:
            if isinstance(value, Module):
                for hook in hooks.registration.values():
                    result = hook(self, name, value)
                    if result is not None:
                        value = result
                self._modules[name] = value
            object.__setattr__(self, name, value)

        def add_module(self, name: str, module: "Module") -> None:
            setattr(self, name, module)

        def named_modules(self, memo: Optional[set] = None,
                          prefix: str = "") -> Iterator[Tuple[str, "Module"]]:
            memo = set() if memo is None else memo
            if id(self) in memo:
                return
            memo.add(id(self))
            yield prefix, self
            for name, child in self._modules.items():
                yield from child.named_modules(memo, prefix + ("." if prefix else "") + name)

        def forward(self, *args: Any) -> Any:
            raise NotImplementedError

        def to(self, *args: Any, **kwargs: Any) -> "Module":
            return self

        def cuda(self) -> "Module":
            return self

        def eval(self) -> "Module":
            return self

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if not (hooks.pre or hooks.post):
                return self.forward(*args, **kwargs)
            result = None
            called = set()
            try:
                for hook in list(hooks.pre.values()):
                    changed = hook(self, args)
                    if changed is not None:
                        args = changed if isinstance(changed, tuple) else (changed,)
                result = self.forward(*args, **kwargs)
                for hook_id, hook in list(hooks.post.items()):
                    if hook_id in hooks.always:
                        called.add(hook_id)
                    changed = hook(self, args, result)
                    if changed is not None:
                        result = changed
                return result
            except Exception:
                if is_compiling():
                    raise
                for hook_id, hook in list(hooks.post.items()):
                    if hook_id in hooks.always and hook_id not in called:
                        hook(self, args, result)
                raise

    class ModuleList(Module):
        def __init__(self, modules: Any = ()) -> None:
            super().__init__()
            for module in modules:
                self.append(module)

        def append(self, module: Module) -> None:
            self.add_module(str(len(self._modules)), module)

        def __getitem__(self, index: int) -> Module:
            return list(self._modules.values())[index]

        def __iter__(self) -> Iterator[Module]:
            return iter(list(self._modules.values()))

    module_ns = types.SimpleNamespace(
        register_module_forward_pre_hook=register_module_forward_pre_hook,
        register_module_forward_hook=register_module_forward_hook,
        register_module_module_registration_hook=register_module_module_registration_hook,
        Module=Module,
        hooks=hooks,
    )
    return types.SimpleNamespace(Module=Module, ModuleList=ModuleList,
                                 modules=types.SimpleNamespace(module=module_ns))


def make_gpt(torch: Any, blocks: int = 2, seconds: float = 0.0) -> Any:
    """A GPT-2-like tree of stand-in modules whose leaves each enqueue `seconds` of work on the
    current stream: GPT(h: ModuleList of Block(ln_1, attn(c_attn, c_proj), ln_2, mlp(c_fc,
    c_proj)), ln_f), with the residual adds of GPT-2 as work between the modules."""
    nn = torch.nn

    class Leaf(nn.Module):
        def forward(self, x: Any) -> Any:
            torch.cuda.current_stream().work(seconds)
            return x

    class Linear(Leaf):
        pass

    class LayerNorm(Leaf):
        pass

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = Linear()
            self.c_proj = Linear()

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.c_attn(x))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = Linear()
            self.c_proj = Linear()

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.c_fc(x))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = LayerNorm()
            self.attn = Attention()
            self.ln_2 = LayerNorm()
            self.mlp = MLP()

        def forward(self, x: Any) -> Any:
            x = self.attn(self.ln_1(x))
            torch.cuda.current_stream().work(seconds)  # x = x + attn(...): glue
            x = self.mlp(self.ln_2(x))
            torch.cuda.current_stream().work(seconds)
            return x

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.h = nn.ModuleList([Block() for _ in range(blocks)])
            self.ln_f = LayerNorm()

        def forward(self, x: Any) -> Any:
            for block in self.h:
                x = block(x)
            return self.ln_f(x)

    return GPT()


def gpt_paths(blocks: int = 2) -> list:
    """The region paths of make_gpt's model under modules=True, in call order."""
    paths = ["GPT"]
    for i in range(blocks):
        b = f"GPT/h.{i}"
        paths += [b, f"{b}/ln_1", f"{b}/attn", f"{b}/attn/c_attn", f"{b}/attn/c_proj",
                  f"{b}/ln_2", f"{b}/mlp", f"{b}/mlp/c_fc", f"{b}/mlp/c_proj"]
    return paths + ["GPT/ln_f"]
