"""The workload of run_python_replay.sh: N replays of a host graph of one fill, from Python
(`g.replay()`, `g.replay(stream)`) or from the C++ loop of accgraph.benchmarks.replay_loop_ns.

    python bench/callgrind/python_replay.py {python,stream,cpp} N
"""

import sys

import accgraph
import accgraph.benchmarks


def main() -> int:
    mode, count = sys.argv[1], int(sys.argv[2])
    stream = accgraph.Stream("host")
    buf = accgraph.Buffer(stream, 64)
    graph = accgraph.Graph("host")
    with graph.capture(stream):
        stream.fill(buf, 1)
    graph.replay()  # the first replay's one-time work is not counted
    stream.synchronize()
    replay = graph.replay
    if mode == "python":
        for _ in range(count):
            replay()
    elif mode == "stream":
        for _ in range(count):
            replay(stream)
    elif mode == "cpp":
        accgraph.benchmarks.replay_loop_ns(graph, count)
    else:
        print(f"python_replay.py: unknown mode {mode!r}: python, stream or cpp", file=sys.stderr)
        return 2
    stream.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
