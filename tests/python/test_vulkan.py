"""The vulkan backend from Python on Mesa's lavapipe (VK_DRIVER_FILES, as scripts/test.sh sets
it): the rows of the 2026-11-28 reliability audit that are the Vulkan backend's own (misuse of
captures, nested graphs, the marker limit per sequence, region names, lifetimes, a small marker
budget, eager trees, a concurrent flush). scripts/audit/vulkan_cases.py reruns the audit's
cases as the auditor ran them; these are their regular tests."""

from __future__ import annotations

import csv
import gc
import json
import threading

import pytest

import accgraph
from conftest import require_backend


@pytest.fixture
def s():
    require_backend("vulkan")
    return accgraph.Stream("vulkan")


def timed(prof, s, buf, name="r"):
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with g.capture(s):
        with prof.region(s, name):
            s.fill(buf, 1)
    return g


def test_capture_end_without_capture_begin(s):
    # audit 2026-11-28 C10
    with pytest.raises(accgraph.InvalidStateError,
                       match=r"capture_end: graph \d+ is not capturing \(empty\): call "
                             r"capture_begin\(stream\) first"):
        accgraph.Graph("vulkan").capture_end()


def test_a_timed_graph_replayed_into_another_capture_is_refused(s):
    # audit 2026-11-28 C11: refused; both graphs stay usable and the later replay is reported.
    buf = accgraph.Buffer(s, 4096)
    prof = accgraph.Profiler()
    inner = timed(prof, s, buf)
    outer = accgraph.Graph("vulkan")
    outer.capture_begin(s)
    with pytest.raises(accgraph.InvalidStateError, match="is timed by a profiler and stream"):
        inner.replay(s)
    s.fill(buf, 2)
    outer.capture_end()
    outer.replay()
    inner.replay()
    s.synchronize()
    prof.flush()
    assert prof.delivered == 1


def test_an_untimed_graph_replayed_into_a_capture_is_recorded(s):
    # audit 2026-11-28 C12: the outer graph's replay writes the inner graph's bytes.
    dst = accgraph.Buffer(s, 4096, kind="host")
    inner = accgraph.Graph("vulkan")
    with inner.capture(s):
        s.fill(dst, 0x5A)
    outer = accgraph.Graph("vulkan")
    with outer.capture(s):
        inner.replay(s)
    s.fill(dst, 0)
    s.synchronize()
    assert bytes(memoryview(dst)) == bytes(4096)
    outer.replay()
    s.synchronize()
    assert bytes(memoryview(dst)) == b"\x5a" * 4096


def test_capturing_twice_and_a_second_graph_on_a_capturing_stream(s):
    # audit 2026-11-28 C13
    g, other = accgraph.Graph("vulkan"), accgraph.Graph("vulkan")
    g.capture_begin(s)
    with pytest.raises(accgraph.InvalidStateError, match=r"graph \d+ is already capturing"):
        g.capture_begin(s)
    with pytest.raises(accgraph.InvalidStateError, match="the stream is already capturing"):
        other.capture_begin(s)
    g.capture_end()
    with other.capture(s):
        pass


def test_more_regions_than_a_sequence_holds_is_a_clear_error(s):
    # audit 2026-11-28 C14: 30,000 regions in one capture; 8,000 afterwards work.
    prof = accgraph.Profiler()
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"marker 16384 is beyond the 16384 markers a vulkan sequence can "
                             r"hold: time fewer regions"):
        with g.capture(s):
            for i in range(30_000):
                with prof.region(s, f"r{i}"):
                    pass
    assert not s.is_capturing
    g2 = accgraph.Graph("vulkan")
    prof.attach(g2)
    with g2.capture(s):
        for i in range(8_000):
            with prof.region(s, f"r{i}"):
                pass
    g2.replay()
    s.synchronize()
    prof.flush()
    assert len(prof.reports()[-1]) == 8000


NAMES = ["emoji \U0001f680\U0001f468\u200d\U0001f469", "nul\x00byte", "rtl \u202eevil\u202c",
         "a/b", "quo\"te's", "new\nline", "x" * 100_000]


def test_region_names_are_kept_everywhere(s, tmp_path):
    # audit 2026-11-28 C15: in the reports, the Chrome JSON, the CSV and the .pftrace.
    buf = accgraph.Buffer(s, 64)
    prof = accgraph.Profiler()
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with g.capture(s):
        for name in NAMES:
            with prof.region(s, name):
                s.fill(buf, 1)
    g.replay()
    s.synchronize()
    prof.flush()
    assert [t.name for t in prof.reports()[-1]] == NAMES
    prof.write_chrome_trace(tmp_path / "t.json")
    names = {e.get("name") for e in json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
             ["traceEvents"]}
    assert set(NAMES) <= names
    prof.write_csv(tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as f:
        fields = {x for row in csv.reader(f) for x in row}
    assert set(NAMES) <= fields
    if accgraph.perfetto_supported():
        prof.write_trace(tmp_path / "t.pftrace")
        raw = (tmp_path / "t.pftrace").read_bytes()
        assert all(n.encode() in raw for n in NAMES)
    with pytest.raises(TypeError):  # a lone surrogate cannot be UTF-8: refused, no crash
        prof.region(s, "lone \ud800")


def test_lifetimes_keep_the_reports(s):
    # audit 2026-11-28 C16: the profiler dropped before its graph, the stream before its graph,
    # a graph dropped with replays pending, stream.close() during a capture.
    seen = []

    def profiler():
        prof = accgraph.Profiler()
        prof.add_sink(lambda report: seen.append(report.replay_index))
        return prof

    buf = accgraph.Buffer(s, 4096)
    prof = profiler()
    g = timed(prof, s, buf)
    for _ in range(3):
        g.replay()
    del prof
    gc.collect()
    g.replay()  # untimed now
    s.synchronize()
    assert len(seen) == 3
    prof = profiler()
    s2 = accgraph.Stream("vulkan")
    g2 = timed(prof, s2, accgraph.Buffer(s2, 4096))
    g2.replay()
    g2.replay()
    del s2
    gc.collect()
    with pytest.raises(accgraph.InvalidStateError, match="stream"):
        g2.replay()
    prof.flush()
    assert len(seen) == 5
    g3 = timed(prof, s, buf)
    for _ in range(5):
        g3.replay()
    del g3
    gc.collect()
    prof.flush()
    assert len(seen) == 10
    s4 = accgraph.Stream("vulkan")
    g4 = accgraph.Graph("vulkan")
    g4.capture_begin(s4)
    s4.fill(accgraph.Buffer(s4, 64), 1)
    s4.close()
    with pytest.raises(accgraph.InvalidStateError, match="capture_end"):
        g4.capture_end()


def test_a_marker_budget_of_8_bytes_delivers_every_replay(s):
    # audit 2026-11-28 C17: marker_memory=8, 64 regions, 500 replays; the waits are counted.
    buf = accgraph.Buffer(s, 64)
    prof = accgraph.Profiler(marker_memory=8, keep_reports=None)
    g = accgraph.Graph("vulkan")
    prof.attach(g)
    with g.capture(s):
        for i in range(64):
            with prof.region(s, f"r{i}"):
                s.fill(buf, 1)
    for _ in range(500):
        g.replay()
    s.synchronize()
    prof.flush()
    assert [r.replay_index for r in prof.reports()] == list(range(500))
    assert all(len(r) == 64 for r in prof.reports())
    assert prof.ring_waits > 0


def test_nested_eager_region_trees(s):
    # audit 2026-11-28 C18: 200 trees of three nested eager regions, each one report.
    buf = accgraph.Buffer(s, 64)
    prof = accgraph.Profiler(keep_reports=None)
    for _ in range(200):
        with prof.region(s, "a"):
            with prof.region(s, "b"):
                s.fill(buf, 1)
                with prof.region(s, "c"):
                    s.fill(buf, 2)
    s.synchronize()
    prof.flush()
    assert prof.delivered == 200
    assert {tuple(t.path for t in r) for r in prof.reports()} == {("a", "a/b", "a/b/c")}


def test_flush_looping_on_another_thread_during_replays(s):
    # audit 2026-11-28 F11: every replay delivered, in order.
    prof = accgraph.Profiler(keep_reports=None)
    order = []
    prof.add_sink(lambda r: order.append(r.replay_index))
    g = timed(prof, s, accgraph.Buffer(s, 64))
    done = threading.Event()
    errors = []

    def flusher():
        try:
            while not done.is_set():
                prof.flush()
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    for _ in range(1000):
        g.replay()
    s.synchronize()
    done.set()
    t.join()
    prof.flush()
    assert errors == [] and order == list(range(1000))
