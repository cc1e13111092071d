"""Stream: creation, wrapping native handles, the portable operations, host calls, delays, waits,
on every backend."""

import datetime
import threading
import time

import pytest

import accgraph
from conftest import host_buffer, read, require_backend


def test_stream_properties(backend, stream):
    assert stream.backend == backend
    assert stream.device == 0
    assert stream.id > 0
    assert not stream.is_capturing
    assert isinstance(stream.native_handle, int)
    assert f"backend='{backend}'" in repr(stream)


def test_default_backend_stream():
    s = accgraph.Stream()
    assert s.backend == accgraph.default_backend()


def test_fill_and_copy(stream):
    a = host_buffer(stream, 64)
    b = host_buffer(stream, 64)
    stream.fill(a, 0x2A)
    stream.copy(b, a)
    stream.synchronize()
    assert read(b) == b"\x2a" * 64


def test_fill_and_copy_with_addresses(stream):
    a = host_buffer(stream, 64)
    b = host_buffer(stream, 64)
    stream.fill(a.ptr, 1, 64)
    stream.fill(a.ptr, 2, 16)
    stream.copy(b.ptr, a.ptr, 64)
    stream.synchronize()
    assert read(b) == b"\x02" * 16 + b"\x01" * 48


def test_fill_value_must_be_a_byte(stream):
    a = host_buffer(stream, 8)
    with pytest.raises(accgraph.InvalidArgumentError, match="value 256 is not a byte"):
        stream.fill(a, 256)
    with pytest.raises(accgraph.InvalidArgumentError, match="value -1 is not a byte"):
        stream.fill(a, -1)


def test_copy_needs_nbytes_with_addresses(stream):
    a = host_buffer(stream, 8)
    with pytest.raises(accgraph.InvalidArgumentError, match="nbytes is required"):
        stream.copy(a.ptr, a)
    with pytest.raises(accgraph.InvalidArgumentError, match="nbytes is -1"):
        stream.copy(a, a, -1)


def test_copy_into_a_smaller_buffer_is_an_invalid_argument(stream):
    small = host_buffer(stream, 8)
    big = host_buffer(stream, 16)
    with pytest.raises(accgraph.InvalidArgumentError):
        stream.copy(small, big)


# audit 2026-11-25 #3: an explicit nbytes past a Buffer was a heap overflow in the host worker.
def test_nbytes_past_a_buffer_is_an_invalid_argument_naming_both_sizes(stream):
    small = host_buffer(stream, 16)
    other = host_buffer(stream, 16)
    big = host_buffer(stream, 4096)
    stream.fill(big, 0)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="fill of 4096 bytes but the destination Buffer holds 16 bytes: "
                             "pass nbytes <= the Buffer's size"):
        stream.fill(small, 0x2A, nbytes=4096)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="copy of 4096 bytes but the destination Buffer holds 16 bytes"):
        stream.copy(small, other, nbytes=4096)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="copy of 4096 bytes but the source Buffer holds 16 bytes"):
        stream.copy(big, small, nbytes=4096)
    # A Buffer next to an int address is checked too; the address is the caller's to answer for.
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="copy of 17 bytes but the destination Buffer holds 16 bytes"):
        stream.copy(small, big.ptr, 17)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="copy of 17 bytes but the source Buffer holds 16 bytes"):
        stream.copy(big.ptr, small, 17)
    stream.fill(small, 7, nbytes=16)  # up to the size is fine
    stream.copy(big, small, nbytes=8)
    stream.copy(big.ptr + 8, small, 4)
    stream.synchronize()
    assert read(big)[:16] == b"\x07" * 12 + b"\x00" * 4


def test_wrong_argument_types_are_type_errors(stream):
    with pytest.raises(TypeError, match="accgraph.Buffer or an int"):
        stream.fill("not a buffer", 1, 4)
    with pytest.raises(TypeError):
        stream.wait("not a stream")
    with pytest.raises(TypeError):
        stream.host_call(42)
    with pytest.raises(TypeError):
        accgraph.Stream(42)


def test_host_call_runs_in_order(stream, caps):
    if not caps.host_calls:
        with pytest.raises(accgraph.UnsupportedError, match="host_call is not supported"):
            stream.host_call(lambda: None)
        return
    seen = []
    buf = host_buffer(stream, 4)
    stream.fill(buf, 5)
    stream.host_call(lambda: seen.append(read(buf)))
    stream.synchronize()
    assert seen == [b"\x05" * 4]


def test_host_call_runs_on_another_thread_with_the_gil(stream, caps):
    if not caps.host_calls:
        pytest.skip(f"{stream.backend} has no host calls")
    threads = []
    stream.host_call(lambda: threads.append(threading.get_ident()))
    stream.synchronize()  # without the GIL: the call can take it, on whichever thread runs it
    assert len(threads) == 1
    if stream.backend == "host":  # a worker thread per stream (the toy runs work in synchronize)
        assert threads[0] != threading.get_ident()


def test_host_call_exception_is_reported_by_synchronize(stream, caps):
    if not caps.host_calls:
        pytest.skip(f"{stream.backend} has no host calls")

    def fails():
        raise KeyError("from the host call")

    stream.host_call(fails)
    with pytest.raises(accgraph.BackendError, match="KeyError.*from the host call"):
        stream.synchronize()
    stream.synchronize()  # reported once; the stream keeps working


def test_delay_takes_seconds_or_timedelta(stream, caps):
    if not caps.timed_delay:
        with pytest.raises(accgraph.UnsupportedError):
            stream.delay(0.001)
        return
    start = time.monotonic()
    stream.delay(0.002)
    stream.delay(datetime.timedelta(milliseconds=2))
    stream.synchronize()
    assert time.monotonic() - start >= 0.004


def test_delay_rejects_bad_durations(stream, caps):
    if not caps.timed_delay:
        pytest.skip(f"{stream.backend} has no timed delay")
    with pytest.raises(accgraph.InvalidArgumentError, match="must not be negative"):
        stream.delay(-1)
    with pytest.raises(accgraph.InvalidArgumentError, match="24 hours"):
        stream.delay(datetime.timedelta(days=2))
    with pytest.raises(accgraph.InvalidArgumentError, match="24 hours"):
        stream.delay(1e300)
    with pytest.raises(accgraph.InvalidArgumentError, match="NaN"):
        stream.delay(float("nan"))
    with pytest.raises(TypeError, match="seconds"):
        stream.delay("1s")


def test_wait_orders_two_streams(stream, caps):
    other = accgraph.Stream(stream.backend)
    a = host_buffer(stream, 32)
    b = host_buffer(stream, 32)
    if caps.timed_delay:
        other.delay(0.005)
    other.fill(a, 9)
    stream.wait(other)
    stream.copy(b, a)
    stream.synchronize()
    assert read(b) == b"\x09" * 32


def test_wait_on_a_stream_of_another_backend_is_an_invalid_argument(stream):
    other_backend = "host" if stream.backend != "host" else None
    if other_backend is None:
        for info in accgraph.backends():
            if info.available and info.name != "host":
                other_backend = info.name
                break
    if other_backend is None:
        pytest.skip("only the host backend is available")
    with pytest.raises(accgraph.InvalidArgumentError):
        stream.wait(accgraph.Stream(other_backend))


def test_synchronize_while_capturing_is_an_invalid_state(stream):
    g = accgraph.Graph(stream.backend)
    with g.capture(stream):
        with pytest.raises(accgraph.InvalidStateError, match="while the stream is capturing"):
            stream.synchronize()


def test_wrap_takes_an_int_handle(stream):
    wrapped = accgraph.Stream.wrap(stream.backend, 0, stream.native_handle)
    assert wrapped.native_handle == stream.native_handle
    buf = host_buffer(stream, 8)
    wrapped.fill(buf, 3)
    wrapped.synchronize()
    assert read(buf) == b"\x03" * 8


class _TorchLikeStream:
    def __init__(self, handle):
        self.cuda_stream = handle


class _ProtocolStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_wrap_takes_cuda_stream_attribute_and_protocol():
    host = accgraph.Stream("host")
    for source in (_TorchLikeStream(host.native_handle), _ProtocolStream(host.native_handle)):
        wrapped = accgraph.Stream.wrap("host", 0, source)
        assert wrapped.native_handle == host.native_handle


def test_wrap_rejects_bad_handles():
    with pytest.raises(accgraph.InvalidArgumentError, match="not a live host queue"):
        accgraph.Stream.wrap("host", 0, 12345)
    with pytest.raises(accgraph.InvalidArgumentError, match="not an address"):
        accgraph.Stream.wrap("host", 0, -1)
    with pytest.raises(TypeError, match="cuda_stream"):
        accgraph.Stream.wrap("host", 0, "handle")
    with pytest.raises(TypeError, match="__cuda_stream__"):
        accgraph.Stream.wrap("host", 0, _BadProtocol())


class _BadProtocol:
    def __cuda_stream__(self):
        return 5


def test_cuda_stream_attributes_are_for_cuda_only():
    s = accgraph.Stream("host")
    with pytest.raises(AttributeError, match="cuda backend"):
        s.cuda_stream
    with pytest.raises(accgraph.InvalidArgumentError, match="only cuda streams"):
        s.__cuda_stream__()


def test_closed_stream_is_an_invalid_state():
    s = accgraph.Stream("host")
    s.close()
    with pytest.raises(accgraph.InvalidStateError, match="closed"):
        s.synchronize()
    assert "closed" in repr(s)
