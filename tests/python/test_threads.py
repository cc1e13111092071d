"""Threads and the GIL: blocking calls release it, callables C++ keeps run with it on other
threads, and a graph is used by one thread at a time."""

import threading
import time

import pytest

import accgraph
from conftest import require_backend


def test_synchronize_releases_the_gil():
    s = accgraph.Stream("host")
    s.delay(0.2)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    s.synchronize()
    stop.set()
    t.join()
    assert len(ticks) > 10  # the other thread ran while this one waited


def test_host_call_needing_the_gil_while_main_thread_synchronizes():
    s = accgraph.Stream("host")
    g = accgraph.Graph("host")
    seen = []
    with g.capture(s):
        s.host_call(lambda: seen.append(threading.current_thread().name))
    for _ in range(50):
        g.replay()  # runs without the GIL: no deadlock with the worker's host calls
    s.synchronize()
    assert len(seen) == 50


def test_two_python_threads_on_one_graph_get_an_error_not_a_crash():
    s = accgraph.Stream("host")
    g = accgraph.Graph("host")
    with g.capture(s):
        s.host_call(lambda: None)
    errors = []

    # Replays from four threads at once: each call either replays or, when another thread is
    # inside the graph, raises InvalidStateError.
    def hammer():
        for _ in range(200):
            try:
                g.replay()
            except accgraph.InvalidStateError as e:
                assert "in use by another call" in str(e)
                errors.append(e)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.synchronize()
    assert g.replay_count + len(errors) == 800


def test_streams_on_many_threads():
    require_backend("host")
    results = []

    def work(i):
        s = accgraph.Stream("host")
        b = accgraph.Buffer(s, 64, kind="host")
        g = accgraph.Graph("host")
        with g.capture(s):
            s.fill(b, i)
        for _ in range(20):
            g.replay()
        s.synchronize()
        results.append(bytes(memoryview(b)) == bytes([i]) * 64)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 8


def test_closing_a_stream_while_another_thread_synchronizes_it():
    s = accgraph.Stream("host")
    s.delay(0.1)
    done = []
    t = threading.Thread(target=lambda: (s.synchronize(), done.append(True)))
    t.start()
    time.sleep(0.02)  # the other thread is inside synchronize(), without the GIL
    s.close()  # it keeps the queue until it returns
    t.join(10)
    assert done == [True]
    with pytest.raises(accgraph.InvalidStateError, match="closed"):
        s.synchronize()
