"""CUDA specifics: the CUDA stream protocol, torch interop (stream wrapping, DLPack, torch kernels
captured into an accgraph graph). Skipped, with the reason, without a GPU (and without torch
for the torch cases)."""

import pytest

import accgraph
from conftest import require_backend


@pytest.fixture
def cuda_stream():
    require_backend("cuda")
    return accgraph.Stream("cuda")


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


def test_cuda_stream_protocol(cuda_stream):
    assert cuda_stream.cuda_stream == cuda_stream.native_handle != 0
    assert cuda_stream.__cuda_stream__() == (0, cuda_stream.native_handle)
    wrapped = accgraph.Stream.wrap("cuda", 0, cuda_stream)  # via __cuda_stream__
    assert wrapped.native_handle == cuda_stream.native_handle


def test_device_buffer_dlpack_device(cuda_stream):
    buf = accgraph.Buffer(cuda_stream, 64)
    assert buf.__dlpack_device__() == (2, 0)
    with pytest.raises(BufferError, match="not addressable by the CPU"):
        memoryview(buf)
    pinned = accgraph.Buffer(cuda_stream, 64, kind="host")
    assert pinned.__dlpack_device__() == (3, 0)
    assert len(memoryview(pinned)) == 64


def test_torch_stream_wrap_and_dlpack(cuda_stream, torch):
    ts = torch.cuda.Stream()
    s = accgraph.Stream.wrap("cuda", 0, ts)
    assert s.native_handle == ts.cuda_stream
    buf = accgraph.Buffer(s, 256)
    s.fill(buf, 7)
    s.synchronize()
    t = torch.from_dlpack(buf)
    assert t.device.type == "cuda" and t.dtype == torch.uint8
    assert int(t.sum()) == 7 * 256


def test_torch_kernels_captured_into_an_accgraph_graph(cuda_stream, torch):
    x = torch.zeros(1024, device="cuda")
    x.add_(0)  # torch's lazy initialisation, outside the capture
    torch.cuda.synchronize()
    g = accgraph.Graph("cuda")
    with torch.cuda.stream(torch.cuda.ExternalStream(cuda_stream.cuda_stream)):
        with g.capture(cuda_stream):
            for _ in range(10):
                x.add_(1)
    assert float(x[0]) == 0  # recorded, not run
    for _ in range(3):
        g.replay()
    cuda_stream.synchronize()
    assert float(x[0]) == 30


def test_profiler_times_a_cuda_graph(cuda_stream):
    prof = accgraph.Profiler()
    buf = accgraph.Buffer(cuda_stream, 1 << 20)
    g = accgraph.Graph("cuda")
    prof.attach(g)
    with g.capture(cuda_stream):
        with prof.region(cuda_stream, "fill"):
            cuda_stream.fill(buf, 1)
    for _ in range(5):
        g.replay()
    prof.flush()
    reports = prof.reports()
    assert len(reports) == 5 and all(r[0].measurable for r in reports)
    assert reports[0].backend == "cuda"
