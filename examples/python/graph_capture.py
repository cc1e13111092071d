"""Capture work into a graph once and replay it many times, PyTorch style.

    python examples/python/graph_capture.py [BACKEND]
"""

import sys

import accgraph


def main(backend: str = "host") -> None:
    stream = accgraph.Stream(backend)
    src = accgraph.Buffer(stream, 1 << 16, kind="host")
    dst = accgraph.Buffer(stream, 1 << 16, kind="host")

    # 1. The context manager of a graph: the block's work is recorded, not run.
    g = accgraph.Graph(backend)
    with g.capture(stream):
        stream.fill(src, 0x2A)
        stream.copy(dst, src)
    for _ in range(10):
        g.replay()
    stream.synchronize()
    assert bytes(memoryview(dst)[:4]) == b"\x2a" * 4
    print(f"{g!r}: 10 replays")

    # 2. accgraph.graph(), like torch.cuda.graph: captures on a stream the graph keeps.
    g2 = accgraph.Graph(backend)
    with accgraph.graph(g2, pool=g.pool() if stream.capabilities.pool_sharing else None) as s:
        s.fill(dst, 7)
    g2.replay()
    g2.capture_stream.synchronize()
    print(f"{g2!r}: shares pool {g2.pool()}")

    # 3. An exception inside the block aborts the capture; the graph stays usable.
    g3 = accgraph.Graph(backend)
    try:
        with g3.capture(stream):
            stream.fill(dst, 1)
            raise RuntimeError("changed my mind")
    except RuntimeError:
        pass
    print(f"after an aborted capture: {g3.state}")

    # 4. keep_graph: capture now, instantiate later.
    g4 = accgraph.Graph(backend, keep_graph=True)
    g4.capture_begin(stream)
    stream.fill(dst, 3)
    g4.capture_end()
    print(f"keep_graph: {g4.state} -> ", end="")
    g4.instantiate()
    print(g4.state)


if __name__ == "__main__":
    main(*sys.argv[1:])
