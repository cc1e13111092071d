"""Streams and buffers: the portable operations, host calls, delays, cross-stream waits, and
numpy views of accgraph memory (buffer protocol, DLPack).

    python examples/python/streams_and_buffers.py [BACKEND]
"""

import sys
import threading

import accgraph

try:
    import numpy as np
except ImportError:  # numpy is optional: memoryview shows the same memory
    np = None


def main(backend: str = "host") -> None:
    stream = accgraph.Stream(backend)
    caps = stream.capabilities
    buf = accgraph.Buffer(stream, 256, kind="host")

    stream.fill(buf, 0x11)
    if caps.host_calls:  # Python runs on the backend's thread, with the GIL
        stream.host_call(lambda: print(f"host call on thread {threading.current_thread().name}"))
    if caps.timed_delay:
        stream.delay(0.001)  # or datetime.timedelta(milliseconds=1)
    stream.synchronize()

    # A second stream waits for the first: the copy sees the fill.
    other = accgraph.Stream(backend)
    out = accgraph.Buffer(stream, 256, kind="host")
    stream.fill(buf, 0x22)
    other.wait(stream)
    other.copy(out, buf)
    other.synchronize()

    if np is not None:
        view = np.asarray(out)           # buffer protocol: no copy
        tensor = np.from_dlpack(out)     # DLPack: no copy either
        print(f"numpy sees {view[:4]} (DLPack device {out.__dlpack_device__()}), "
              f"same memory: {view.ctypes.data == tensor.ctypes.data == out.ptr}")
    else:
        print(f"memoryview sees {bytes(memoryview(out)[:4])!r}")

    # Interop: wrap a native queue handle (an int, torch.cuda.Stream, __cuda_stream__ objects).
    wrapped = accgraph.Stream.wrap(backend, 0, stream.native_handle)
    print(f"wrapped {wrapped!r} around {stream!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
