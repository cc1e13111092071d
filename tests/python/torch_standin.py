"""A stand-in for the few parts of torch that accgraph.torch uses, on the host backend, so that
its wrappers run without a GPU (tests/python/test_torch_standin.py; test_torch.py runs the real
thing). A "CUDA stream" is an accgraph host Stream whose native_handle plays the cudaStream_t;
CUDAGraph plays PyTorch's native capture with an accgraph Graph capturing the current stream's
queue, and replays it on the current stream, as torch.cuda.CUDAGraph does with CUDA."""

from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator, Optional

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
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: cuda.current.cuda_stream)
    return torch
