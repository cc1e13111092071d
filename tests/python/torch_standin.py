"""A stand-in for the few parts of torch that accgraph.torch uses, on the host backend, so that
its wrappers run without a GPU (tests/python/test_torch_standin.py; test_torch.py runs the real
thing). A "CUDA stream" is an accgraph host Stream whose native_handle plays the cudaStream_t;
CUDAGraph plays PyTorch's native capture with an accgraph Graph capturing the current stream's
queue, and replays it on the current stream, as torch.cuda.CUDAGraph does with CUDA. nn.Module,
its global forward hooks (torch.nn.modules.module.register_module_forward_pre_hook,
register_module_forward_hook with always_call, register_module_module_registration_hook) and
torch.compiler.is_compiling follow PyTorch's Module._call_impl."""

from __future__ import annotations

import collections
import contextlib
import itertools
import types
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import accgraph


class StandinStream:
    """torch.cuda.Stream: `cuda_stream` is the handle of an accgraph host stream's queue."""

    def __init__(self) -> None:
        self.queue = accgraph.Stream("host")
        self.cuda_stream = self.queue.native_handle
        self.device_index = 0

    def work(self, seconds: float) -> None:
        """A kernel of `seconds` on this stream."""
        self.queue.delay(seconds)

    def synchronize(self) -> None:
        self.queue.synchronize()


def make_torch(*, cuda_available: bool = True, end_in_two_steps: bool = False) -> Any:
    """A new stand-in torch module (a new CUDAGraph class each time: patches do not leak).
    `end_in_two_steps`: capture_end calls capture_end_pre (which ends the native capture)
    then capture_end_post, as recent PyTorch does."""
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

    class _CUDAGraph:
        """torch._C._CUDAGraph: the base, whose reset the class below inherits."""

        native: Optional[accgraph.Graph] = None

        def reset(self) -> None:
            self.native = None

    class CUDAGraph(_CUDAGraph):
        """torch.cuda.CUDAGraph on the host: `native` is the captured accgraph Graph.
        `capture_elsewhere` makes the native capture run on another queue than the current
        stream's (a capture accgraph cannot join)."""

        def __init__(self) -> None:
            self.native: Optional[accgraph.Graph] = None
            self.capture_elsewhere = False

        def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
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

    class CUDAGraphEndingInTwoSteps(CUDAGraph):
        def capture_end_pre(self) -> None:
            assert self.native is not None
            self.native.capture_end()

        def capture_end_post(self) -> None:
            pass

        def capture_end(self) -> None:
            self.capture_end_pre()
            self.capture_end_post()

    cuda.CUDAGraph = CUDAGraphEndingInTwoSteps if end_in_two_steps else CUDAGraph

    class graph:
        """torch.cuda.graph: the capture on a side stream made current for the block."""

        def __init__(self, cuda_graph: CUDAGraph, stream: Optional[StandinStream] = None) -> None:
            self.cuda_graph = cuda_graph
            self.stream_ctx = cuda.stream(stream or cuda.side_stream)

        def __enter__(self) -> None:
            self.stream_ctx.__enter__()
            self.cuda_graph.capture_begin(capture_error_mode="global")

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
    return torch


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
