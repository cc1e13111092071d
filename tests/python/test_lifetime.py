"""Reference counting and lifetimes: objects dropped while others still use them give errors
or are safe, never crashes."""

import gc

import pytest

import accgraph
from conftest import host_buffer, read


def test_replay_after_the_capture_stream_was_dropped_is_an_invalid_state(stream):
    capture = accgraph.Stream(stream.backend)
    buf = host_buffer(stream, 8)
    g = accgraph.Graph(stream.backend)
    with g.capture(capture):
        capture.fill(buf, 1)
    del capture
    gc.collect()
    with pytest.raises(accgraph.InvalidStateError, match="destroyed"):
        g.replay()
    g.replay(stream)  # another stream still works
    stream.synchronize()
    assert read(buf) == b"\x01" * 8


def test_dropping_the_stream_during_a_capture_aborts_it(stream):
    capture = accgraph.Stream(stream.backend)
    g = accgraph.Graph(stream.backend)
    g.capture_begin(capture)
    del capture
    gc.collect()
    with pytest.raises(accgraph.InvalidStateError, match="destroyed"):
        g.capture_end()
    assert g.state == accgraph.GraphState.EMPTY
    with g.capture(stream):
        pass


def test_a_graph_keeps_the_buffers_of_its_capture(stream):
    out = host_buffer(stream, 8)
    g = accgraph.Graph(stream.backend)
    # Allocated before the capture: a synchronous allocation (pinned memory on cuda) is not
    # allowed while a stream captures in the default mode.
    tmp = accgraph.Buffer(stream, 8, kind="host")
    with g.capture(stream):
        stream.fill(tmp, 4)
        stream.copy(out, tmp)
    del tmp
    gc.collect()
    for _ in range(3):
        g.replay()
    stream.synchronize()
    assert read(out) == b"\x04" * 8


def test_dropping_a_graph_in_the_middle_of_a_capture_ends_it(stream):
    g = accgraph.Graph(stream.backend)
    g.capture_begin(stream)
    del g
    gc.collect()
    assert not stream.is_capturing
    stream.synchronize()


def test_dropping_everything_with_work_in_flight_is_safe(stream, caps):
    buf = host_buffer(stream, 1 << 16)
    g = accgraph.Graph(stream.backend)
    with g.capture(stream):
        for i in range(8):
            stream.fill(buf, i)
    for _ in range(20):
        g.replay()
    del g, stream, buf
    gc.collect()


def test_a_host_call_holding_the_last_reference_to_its_stream(caps, backend):
    if not caps.host_calls:
        pytest.skip(f"{backend} has no host calls")
    s = accgraph.Stream(backend)
    s.host_call(lambda: s)  # the closure refers to the stream itself
    del s
    gc.collect()


def test_a_wrapping_stream_keeps_the_object_it_wraps():
    host = accgraph.Stream("host")

    class Holder:
        cuda_stream = host.native_handle

    holder = Holder()
    wrapped = accgraph.Stream.wrap("host", 0, holder)
    import sys

    assert sys.getrefcount(holder) >= 3  # the local, the argument, and the Stream's reference
    del wrapped


EXIT_SCRIPT = """
import os, sys, time
import accgraph
backend = sys.argv[1]
if backend == "toy":
    accgraph.load_plugin(os.environ["ACCGRAPH_TEST_TOY_PLUGIN"])
s = accgraph.Stream(backend)
prof = accgraph.Profiler()
prof.add_sink(lambda r: print("report", r.replay_index, flush=True))
g = accgraph.Graph(backend)
prof.attach(g)
buf = accgraph.Buffer(s, 1 << 16)
with g.capture(s):
    with prof.region(s, "r"):
        s.fill(buf, 1)
        if s.capabilities.host_calls:
            s.host_call(lambda: time.sleep(0.005))
for _ in range(20):
    g.replay()
print("exiting", flush=True)
"""


def test_interpreter_exit_with_work_in_flight_and_a_sink_cycle(backend, tmp_path):
    # audit 2026-11-28 F03: replays pending at exit, lazy delivery, no flush: delivered at exit.
    import subprocess
    import sys

    script = tmp_path / "exit_script.py"
    script.write_text(EXIT_SCRIPT)
    result = subprocess.run([sys.executable, str(script), backend], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Fatal" not in result.stderr
    assert "leaked" not in result.stderr  # nanobind's report of instances never freed
    lines = result.stdout.splitlines()
    assert "exiting" in lines
    # Every report reached the sink: during the replays (a full ring) or at exit (the profiler,
    # in a cycle with its sink through the module's globals, is collected and flushed).
    assert sorted(line for line in lines if line != "exiting") == sorted(
        f"report {i}" for i in range(20))


def test_a_graph_in_a_cycle_through_its_host_call_is_collected(backend, caps):
    if not caps.host_calls:
        pytest.skip(f"{backend} has no host calls")
    import weakref

    class Sentinel:
        pass

    def make():
        s = accgraph.Stream(backend)
        g = accgraph.Graph(backend)
        sentinel = Sentinel()
        with g.capture(s):
            s.host_call(lambda: (g, sentinel))  # the closure refers to the graph itself
        g.replay()
        s.synchronize()
        return weakref.ref(sentinel), s

    alive, stream = make()
    gc.collect()
    assert alive() is None  # the graph, its host call and the closure were freed
    stream.synchronize()
