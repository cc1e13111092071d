"""Buffer: allocation, the buffer protocol for host-addressable memory, DLPack for all memory."""

import gc

import pytest

import accgraph
from conftest import host_buffer, read

np = pytest.importorskip("numpy")


def test_buffer_properties(stream):
    b = accgraph.Buffer(stream, 100)
    assert b.nbytes == len(b) == 100
    assert b.kind == accgraph.MemoryKind.DEVICE
    assert b.backend == stream.backend and b.device == 0
    assert b.ptr != 0
    h = accgraph.Buffer(stream, 10, kind=accgraph.MemoryKind.HOST)
    assert h.kind == accgraph.MemoryKind.HOST
    assert "10 bytes" in repr(h)


# Design review item 9 (one API, one shape): Buffer.allocate takes the C++ overloads' shapes,
# Buffer::allocate(stream, bytes, kind) and Buffer::allocate(backend, device, bytes, kind).
def test_allocate_takes_the_shapes_of_the_cpp_overloads(backend, stream):
    b = accgraph.Buffer.allocate(backend, 0, 16, kind="host")
    assert (b.nbytes, b.backend, b.device, b.kind) == (16, backend, 0, accgraph.MemoryKind.HOST)
    d = accgraph.Buffer.allocate(None, 0, 16)
    assert (d.backend, d.kind) == (accgraph.default_backend(), accgraph.MemoryKind.DEVICE)
    s = accgraph.Buffer.allocate(stream, 32, kind=accgraph.MemoryKind.HOST)
    assert (s.nbytes, s.backend, s.device, s.kind) == (32, backend, 0, accgraph.MemoryKind.HOST)
    k = accgraph.Buffer.allocate(stream=stream, nbytes=8)
    assert k.kind == accgraph.MemoryKind.DEVICE
    with pytest.raises(accgraph.InvalidArgumentError, match="Buffer.allocate: nbytes is -1"):
        accgraph.Buffer.allocate(stream, -1)
    with pytest.raises(accgraph.InvalidArgumentError, match="device 7 does not exist"):
        accgraph.Buffer.allocate(backend, 7, 16)
    with pytest.raises(TypeError):
        accgraph.Buffer.allocate(16)  # the old shape, nbytes first
    with pytest.raises(TypeError):
        accgraph.Buffer.allocate(16, backend=backend, kind="host")


def test_bad_sizes_and_kinds(stream):
    with pytest.raises(accgraph.InvalidArgumentError, match="0 bytes"):
        accgraph.Buffer(stream, 0)
    with pytest.raises(accgraph.InvalidArgumentError, match="nbytes is -5"):
        accgraph.Buffer(stream, -5)
    with pytest.raises(accgraph.InvalidArgumentError, match="unknown memory kind 'shared'"):
        accgraph.Buffer(stream, 8, kind="shared")
    with pytest.raises(TypeError):
        accgraph.Buffer("host", 8)


def test_numpy_views_host_memory_without_a_copy(stream):
    b = host_buffer(stream, 16)
    view = np.asarray(b)
    assert view.dtype == np.uint8 and view.shape == (16,)
    assert view.ctypes.data == b.ptr
    stream.fill(b, 7)
    stream.synchronize()
    assert (view == 7).all()
    view[:] = 3  # writable: the device's copy sees it
    other = host_buffer(stream, 16)
    stream.copy(other, b)
    stream.synchronize()
    assert read(other) == b"\x03" * 16


def test_a_view_keeps_the_buffer_alive(stream):
    b = host_buffer(stream, 8)
    stream.fill(b, 1)
    stream.synchronize()
    view = memoryview(b)
    del b
    gc.collect()
    assert bytes(view) == b"\x01" * 8


def test_dlpack_for_host_memory(stream):
    b = host_buffer(stream, 8)
    stream.fill(b, 9)
    stream.synchronize()
    # Pinned host memory of a CUDA backend is kDLCUDAHost (3), other host memory kDLCPU (1):
    # Note [DLPack devices] in include/accgraph/spi/dlpack_device.hpp.
    assert b.__dlpack_device__() == ((3, 0) if stream.backend == "cuda" else (1, 0))
    x = np.from_dlpack(b)
    assert x.ctypes.data == b.ptr
    del b
    gc.collect()
    assert (x == 9).all()  # the DLPack tensor keeps the Buffer


def test_dlpack_versioned_and_legacy_capsules(stream):
    b = host_buffer(stream, 8)
    assert type(b.__dlpack__()).__name__ == "PyCapsule"
    assert type(b.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="copy=True"):
        b.__dlpack__(copy=True)
    with pytest.raises(TypeError, match="unsupported keyword"):
        b.__dlpack__(bogus=1)


def test_device_memory_dlpack_device(backend, stream):
    b = accgraph.Buffer(stream, 8)
    # What each backend states (Note [DLPack devices]): vulkan's device Buffers are kDLVulkan with
    # an opaque address; the toy plugin states none, so its device memory keeps the default,
    # kDLExtDev.
    expected = {"host": (1, 0), "cuda": (2, 0), "level_zero": (14, 0), "toy": (12, 0),
                "vulkan": (7, 0)}
    assert b.__dlpack_device__() == expected[backend]
    if expected[backend][0] != 1:
        with pytest.raises(BufferError, match="not addressable by the CPU"):
            memoryview(b)
    else:
        assert len(memoryview(b)) == 8
