"""The timing layer: Profiler, regions (context manager, decorator, begin/end), sinks, reports,
statistics, exporters, on every backend; misuse and lifetimes give errors, never crashes."""

import csv
import functools
import gc
import json
import math
import pathlib
import threading
import time

import pytest

import accgraph
from conftest import host_buffer, timed_host_graph


def timed_graph(prof, stream, replays=5, **metadata):
    buf = accgraph.Buffer(stream, 4096)
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    with g.capture(stream):
        with prof.region(stream, "outer", **metadata):
            with prof.region(stream, "fill"):
                stream.fill(buf, 1)
            with prof.region(stream, "fill2", lane="side"):
                stream.fill(buf, 2)
    for _ in range(replays):
        g.replay()
    return g, buf


def test_reports_and_regions(stream):
    prof = accgraph.Profiler()
    g, _ = timed_graph(prof, stream, replays=3, bytes=4096)
    prof.flush()
    reports = prof.reports()
    assert [r.replay_index for r in reports] == [0, 1, 2]
    assert prof.delivered == 3
    r = reports[-1]
    assert (r.graph_id, r.backend, r.device) == (g.id, stream.backend, 0)
    assert r.marker_strategy in stream.capabilities.marker_strategies
    assert len(r) == 3
    assert [t.path for t in r] == ["outer", "outer/fill", "outer/fill2"]
    outer, fill, fill2 = r.regions
    assert (outer.depth, outer.parent, fill.parent) == (0, -1, 0)
    assert outer.metadata == {"bytes": "4096"}
    assert fill2.lane == "side" and fill.lane == ""
    assert outer.stream_id == stream.id
    assert fill.measurable and fill.end_ns >= fill.start_ns
    # A region with no region inside it: its edges, or 0 when its markers read no more than a
    # marker transition costs (Note [Marker transitions] in timing/model/report.cpp).
    assert fill.span_ns == fill.end_ns - fill.start_ns
    assert fill.duration_ns == (fill.span_ns if fill.raw_duration_ns > r.marker_overhead_ns else 0)
    assert outer.raw_start_ns <= fill.raw_start_ns and fill2.raw_end_ns <= outer.raw_end_ns
    assert r[-1].path == "outer/fill2"
    with pytest.raises(IndexError):
        r[3]
    d = r.to_dict()
    assert d["graph_id"] == g.id and d["regions"][0]["metadata"] == {"bytes": "4096"}
    assert outer.to_dict()["path"] == "outer"
    assert "3 regions" in repr(r)


def test_a_region_outlives_its_report(stream):
    prof = accgraph.Profiler()
    timed_graph(prof, stream, replays=1)
    prof.flush()
    region = prof.reports()[0][1]
    del prof
    gc.collect()
    assert region.path == "outer/fill"  # keeps the report's layout


def test_stats(stream):
    prof = accgraph.Profiler(stats_mode="exact")
    timed_graph(prof, stream, replays=10)
    prof.flush()
    stats = {s.path: s for s in prof.stats()}
    assert set(stats) == {"outer", "outer/fill", "outer/fill2"}
    s = stats["outer/fill"]
    assert s.count + s.unmeasurable == 10 and s.depth == 1
    assert s.min_ns <= s.p50_ns <= s.p95_ns <= s.max_ns
    assert s.to_dict()["count"] == s.count
    assert s.self_count == s.count  # no children: self = duration
    assert (s.self_min_ns, s.self_p50_ns, s.self_max_ns) == (s.min_ns, s.p50_ns, s.max_ns)
    assert s.to_dict()["self_p50_ns"] == s.self_p50_ns
    table = prof.stats_table()
    assert "outer/fill" in table and "p95" in table and "self_p50_us" in table.splitlines()[0]
    assert "untimed" not in table


def self_time_capture(prof, stream, gap_s):
    """A parent with two children and a delay (glue) between them, captured and replayed."""
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    with g.capture(stream):
        with prof.region(stream, "parent"):
            with prof.region(stream, "a"):
                stream.delay(0.0001)
            stream.delay(gap_s)
            with prof.region(stream, "b"):
                stream.delay(0.0001)
    return g


def test_self_time_holds_the_gap_between_children(stream):
    if not stream.capabilities.timed_delay:
        pytest.skip("the backend has no timed delay")
    prof = accgraph.Profiler(stats_mode="exact")
    g = self_time_capture(prof, stream, gap_s=0.002)
    for _ in range(3):
        g.replay()
    prof.flush()
    reports = prof.reports()
    assert len(reports) == 3
    for r in reports:
        parent, a, b = r
        assert parent.measurable and a.measurable and b.measurable
        assert parent.self_measurable and a.self_measurable
        assert parent.self_ns == parent.duration_ns - a.duration_ns - b.duration_ns
        # The gap is one marker transition (Note [Marker transitions]): what the markers read
        # around it less that transition's cost; the delay lasts >= 2 ms.
        assert b.raw_start_ns - a.raw_end_ns >= 2_000_000
        assert parent.self_ns == b.raw_start_ns - a.raw_end_ns - r.marker_overhead_ns
        assert a.self_ns == a.duration_ns
        assert parent.to_dict()["self_ns"] == parent.self_ns
        assert parent.to_dict()["self_measurable"] is True
    stats = {s.path: s for s in prof.stats()}
    selves = sorted(r[0].self_ns for r in reports)
    assert stats["parent"].self_count == 3
    assert stats["parent"].self_p50_ns == selves[1]
    assert stats["parent"].self_max_ns == selves[2]
    assert stats["parent"].self_p50_ns < stats["parent"].p50_ns


def test_self_time_in_the_exporters(stream, tmp_path):
    if not stream.capabilities.timed_delay:
        pytest.skip("the backend has no timed delay")
    prof = accgraph.Profiler()
    self_time_capture(prof, stream, gap_s=0.001).replay()
    prof.flush()
    parent = prof.reports()[0][0]
    prof.write_csv(tmp_path / "r.csv")
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert int(rows[0]["self_ns"]) == parent.self_ns
    prof.write_stats_csv(tmp_path / "s.csv")
    stats_rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert float(stats_rows[0]["self_p50_ns"]) == prof.stats()[0].self_p50_ns
    prof.write_chrome_trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    parent_event = next(e for e in events if e.get("ph") == "X" and e["name"] == "parent")
    assert parent_event["args"]["self_us"] == pytest.approx(parent.self_ns / 1000)


def test_note_untimed_counts_by_reason_and_ends_the_table():
    prof = accgraph.Profiler()
    assert prof.untimed() == []
    prof.note_untimed("layer1", "outside a capture")
    prof.note_untimed("layer2", "outside a capture")
    prof.note_untimed(name="head", reason="no stream")
    untimed = prof.untimed()
    assert [(u.reason, u.count, u.first_name) for u in untimed] == [
        ("outside a capture", 2, "layer1"), ("no stream", 1, "head")]
    assert isinstance(untimed[0], accgraph.UntimedCalls)
    with pytest.raises(AttributeError):
        untimed[0].count = 5  # read-only
    assert "count=2" in repr(untimed[0])
    lines = prof.stats_table().splitlines()
    assert lines[-2:] == [
        "untimed: 2 call(s) not timed: outside a capture (first: layer1)",
        "untimed: 1 call(s) not timed: no stream (first: head)",
    ]
    with pytest.raises(TypeError):
        prof.note_untimed("x")


def test_note_untimed_from_threads_loses_no_count():
    prof = accgraph.Profiler()

    def note(i):
        for _ in range(500):
            prof.note_untimed(f"t{i}", "busy")

    threads = [threading.Thread(target=note, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (only,) = prof.untimed()
    assert only.count == 2000 and only.first_name.startswith("t")


def test_exporters(stream, tmp_path):
    prof = accgraph.Profiler()
    timed_graph(prof, stream, replays=2)
    prof.flush()
    prof.write_chrome_trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X") == 6
    prof.write_csv(tmp_path / "r.csv")
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(rows) == 6 and rows[0]["path"] == "outer"
    prof.write_stats_csv(str(tmp_path / "s.csv"))
    assert "outer/fill" in (tmp_path / "s.csv").read_text()
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        prof.write_csv(tmp_path / "no_such_dir" / "r.csv")
    with pytest.raises(TypeError):
        prof.write_csv(42)


def test_eager_regions_and_the_decorator(stream):
    prof = accgraph.Profiler()
    buf = accgraph.Buffer(stream, 64)

    @prof.region(stream, "step", kind="eager")
    def step(value):
        """Fills."""
        stream.fill(buf, value)
        return value

    assert step.__name__ == "step" and step.__doc__ == "Fills."
    assert [step(i) for i in range(3)] == [0, 1, 2]
    prof.begin(stream, "manual", note=1)
    stream.fill(buf, 9)
    prof.end(stream)
    prof.flush()
    paths = [r[0].path for r in prof.reports()]
    assert paths == ["step", "step", "step", "manual"]
    assert all(r.graph_id == 0 for r in prof.reports())
    assert prof.reports()[-1][0].metadata == {"note": "1"}


# audit 2026-11-25 #15 (generators) and #16 (coroutines): the decorator timed only the creation
# of the generator or coroutine object (46 us reported for 37 ms of work), silently. It refuses
# them now, saying what to do.
def test_the_decorator_refuses_generator_and_coroutine_functions(stream):
    prof = accgraph.Profiler()
    region = prof.region(stream, "gen")

    def gen():
        yield 1

    async def coro():
        return 1

    async def agen():
        yield 1

    with pytest.raises(accgraph.InvalidArgumentError) as e:
        region(gen)
    assert str(e.value) == (
        "[invalid argument] Profiler.region('gen') cannot decorate the generator function "
        "'test_the_decorator_refuses_generator_and_coroutine_functions.<locals>.gen': the region "
        "would end when the generator object is created, before any item is produced; open the "
        "region inside the function body (`with prof.region(...):`) or around the loop that "
        "consumes it")
    assert e.value.code == accgraph.ErrorCode.INVALID_ARGUMENT
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"cannot decorate the coroutine function '.*coro': the region would "
                             r"end when the coroutine object is created, before it runs; use "
                             r"`with prof.region\(\.\.\.\):` inside the async function"):
        region(coro)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="cannot decorate the async generator function '.*agen': the region "
                             "would end when the async generator object is created"):
        region(agen)
    with pytest.raises(accgraph.InvalidArgumentError, match="generator function '.*gen'"):
        region(functools.partial(gen))  # inspect sees through partial
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        prof.region("coro")(coro)

    # A plain function returning a generator it made is decorated (it is what it is), and a
    # plain function still works.
    region(lambda: gen())
    assert region(lambda: 3)() == 3
    assert repr(region) == "<accgraph.Region 'gen' open=0>"


def test_sink_gets_every_report_with_the_gil(stream):
    prof = accgraph.Profiler()
    seen = []
    prof.add_sink(lambda report: seen.append((report.replay_index, len(report))))
    timed_graph(prof, stream, replays=4)
    prof.flush()
    assert seen == [(i, 3) for i in range(4)]


def test_a_sink_exception_is_logged_and_delivery_goes_on(stream, capfd):
    # audit 2026-11-28 F10 (a sink that raises every time: logged, delivery goes on).
    prof = accgraph.Profiler()
    seen = []

    def bad(report):
        raise KeyError("sink failure")

    prof.add_sink(bad)
    prof.add_sink(lambda report: seen.append(report.replay_index))
    timed_graph(prof, stream, replays=2)
    prof.flush()
    assert seen == [0, 1]
    err = capfd.readouterr().err
    assert err.count("a report sink threw") == 2
    assert "KeyError" in err and "sink failure" in err


def test_immediate_delivery_and_reentrant_use_of_the_graph(stream, capfd):
    prof = accgraph.Profiler(delivery="immediate")
    results = []
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    with g.capture(stream):
        with prof.region(stream, "r"):
            pass

    def sink(report):
        results.append(report.replay_index)
        g.replay()  # inside this graph's replay(): an error, not a deadlock nor a crash

    prof.add_sink(sink)
    g.replay()
    g.replay()
    assert results == [0, 1]  # delivered inside replay()
    err = capfd.readouterr().err
    assert err.count("in use by another call") == 2


def test_background_collector_with_a_thread_in_flush(stream):
    prof = accgraph.Profiler(background_collector=True, collector_period=0.0002)
    threads = set()
    prof.add_sink(lambda report: threads.add(threading.get_ident()))
    timed_graph(prof, stream, replays=50)
    flusher = threading.Thread(target=prof.flush)
    flusher.start()
    prof.flush()
    flusher.join(30)
    assert not flusher.is_alive()
    assert prof.delivered == 50


def run_ahead(stream, replays=200, delay=0.001, **options):
    """Replays back to back of a graph whose replay takes `delay` s of device time, then flush."""
    prof = accgraph.Profiler(**options)
    indices = []
    prof.add_sink(lambda r: indices.append(r.replay_index))
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    with g.capture(stream):
        with prof.region(stream, "step"):
            stream.delay(delay)
    for _ in range(replays):
        g.replay()
    prof.flush()
    assert indices == list(range(replays))  # no report lost, in order
    return prof


def test_replay_with_a_python_sink_on_the_background_collector_and_a_small_ring(stream):
    """Graph.replay holds the GIL while the collector thread's sink (run_ahead's) needs it too;
    the ring of 2 makes every replay wait for the oldest, and a replay gives the GIL up for that
    wait (Note [Replay waits] in core/graph.cpp): neither may wait for the other forever."""
    if not stream.capabilities.timed_delay:
        pytest.skip("the backend has no timed delay")
    done = []
    worker = threading.Thread(target=lambda: done.append(run_ahead(
        stream, replays=1000, delay=0.00002, ring_depth=2, background_collector=True,
        collector_period=0.0001, keep_reports=0)))
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "replays did not finish: a deadlock"
    assert len(done) == 1 and done[0].delivered == 1000  # run_ahead checked the indices


def test_ring_waits_count_launches_that_found_the_marker_ring_full(stream):
    """Note [Marker budget]: a ring sized by marker_memory holds a loop that runs ahead of the
    device (no wait, no table line); a small one makes it wait, counted, and the table says so."""
    if not stream.capabilities.timed_delay:
        pytest.skip("the backend has no timed delay")
    small = run_ahead(stream, ring_depth=2)  # an explicit depth wins over the memory budget
    assert small.ring_waits == 198  # every launch once two replays were unread
    assert isinstance(small.ring_wait_time, float)
    assert small.ring_wait_time > 0.0
    assert "ring waits: 198 launch(es) waited" in small.stats_table().splitlines()[-1]
    ample = run_ahead(stream, marker_memory=1 << 20, ring_depth=0)
    if stream.backend != "host":
        return  # other backends may keep a fixed ring (marker.budget is optional)
    assert ample.ring_waits == 0
    assert ample.ring_wait_time == 0.0
    assert "ring waits:" not in ample.stats_table()
    assert accgraph.Profiler(marker_memory=0).ring_waits == 0
    with pytest.raises(accgraph.InvalidArgumentError, match="Profiler: marker_memory is -1"):
        accgraph.Profiler(marker_memory=-1)  # test_errors.py: every integer argument's range


def test_bad_options():
    with pytest.raises(accgraph.InvalidArgumentError, match="unknown delivery 'soon'"):
        accgraph.Profiler(delivery="soon")
    with pytest.raises(accgraph.InvalidArgumentError, match="unknown stats mode"):
        accgraph.Profiler(stats_mode="approximate")
    with pytest.raises(accgraph.InvalidArgumentError, match="collector_period"):
        accgraph.Profiler(collector_period=-1)
    with pytest.raises(TypeError):
        accgraph.Profiler(ring_depth="deep")


def test_unknown_marker_strategy_is_unsupported(stream):
    prof = accgraph.Profiler(marker_strategy="sundial")
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    with pytest.raises(accgraph.UnsupportedError, match="sundial"):
        with g.capture(stream):
            with prof.region(stream, "r"):
                pass


def test_keep_reports_is_a_count(stream):
    prof = accgraph.Profiler(keep_reports=2)
    timed_graph(prof, stream, replays=5)
    prof.flush()
    assert [r.replay_index for r in prof.reports()] == [3, 4]
    assert prof.delivered == 5
    none = accgraph.Profiler(keep_reports=0)
    timed_graph(none, stream, replays=2)
    none.flush()
    assert none.reports() == [] and none.delivered == 2


def test_capture_end_with_an_open_region_resets_the_graph(stream):
    prof = accgraph.Profiler()
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    g.capture_begin(stream)
    prof.begin(stream, "left open")
    with pytest.raises(accgraph.InvalidStateError, match="left open"):
        g.capture_end()
    assert g.state == accgraph.GraphState.EMPTY
    with g.capture(stream):
        with prof.region(stream, "ok"):
            pass


def test_region_misuse(stream):
    prof = accgraph.Profiler()
    region = prof.region(stream, "r")
    with pytest.raises(accgraph.InvalidStateError, match="__exit__ without __enter__"):
        region.__exit__(None, None, None)
    with pytest.raises(TypeError, match="accgraph.Stream"):
        prof.region("stream", "r")
    with pytest.raises(TypeError):
        prof.attach("graph")
    with pytest.raises(accgraph.InvalidStateError):
        prof.end(stream)  # nothing open
    outer = prof.region(stream, "outer")
    inner = prof.region(stream, "inner")
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(accgraph.InvalidStateError, match="'outer' is dropped and not reported"):
        outer.__exit__(None, None, None)  # the inner one is still open
    # Dropped (Note [Regions out of order]): nothing left to end.
    assert repr(outer) == "<accgraph.Region 'outer' open=0>"
    inner.__exit__(None, None, None)
    with pytest.raises(accgraph.InvalidStateError, match="__exit__ without __enter__"):
        outer.__exit__(None, None, None)


def test_attach_while_capturing_is_an_invalid_state(stream):
    prof = accgraph.Profiler()
    g = accgraph.Graph(stream.backend)
    with g.capture(stream):
        with pytest.raises(accgraph.InvalidStateError):
            prof.attach(g)


def test_profiler_dropped_while_a_graph_uses_it(stream):
    prof = accgraph.Profiler()
    g, _ = timed_graph(prof, stream, replays=2)
    del prof
    gc.collect()
    for _ in range(3):
        g.replay()  # no reports any more, and no crash
    stream.synchronize()
    g.reset()
    with g.capture(stream):
        pass
    g.replay()


def test_region_ended_after_its_stream_was_closed(stream):
    prof = accgraph.Profiler()
    s = accgraph.Stream(stream.backend)
    prof.begin(s, "r")
    s.close()
    with pytest.raises(accgraph.InvalidStateError, match="closed"):
        prof.end(s)
    prof.flush()


# Note [Region entries]: an entry whose region can never end (its stream closed) goes with the
# error; one refused for being out of order stays (test_region_misuse).
def test_a_region_entry_that_can_never_end_goes_with_its_error(stream):
    prof = accgraph.Profiler()
    s = accgraph.Stream(stream.backend)
    region = prof.region(s, "r")
    region.__enter__()
    s.close()
    with pytest.raises(accgraph.InvalidStateError,
                       match="the stream this region was opened on was destroyed"):
        region.__exit__(None, None, None)
    assert repr(region) == "<accgraph.Region 'r' open=0>"
    with pytest.raises(accgraph.InvalidStateError, match="__exit__ without __enter__"):
        region.__exit__(None, None, None)


# Note [Region entries]: the per-stream lock is recursive, so a sink that enters the same Region
# object from inside the end() that delivers to it (immediate delivery) does not deadlock.
def test_a_sink_may_enter_the_region_whose_end_delivers_to_it(stream):
    prof = accgraph.Profiler(delivery="immediate")
    region = prof.region(stream, "step")
    buf = accgraph.Buffer(stream, 64)
    seen = []

    def sink(report):
        seen.append(report[0].path)
        if len(seen) < 3:
            with region:
                stream.fill(buf, 1)

    prof.add_sink(sink)

    def run():
        with region:
            stream.fill(buf, 2)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "deadlocked"
    assert seen == ["step"] * 3
    assert repr(region) == "<accgraph.Region 'step' open=0>"
    # The sink's closure holds the Region, which holds the profiler: a cycle through C++ that the
    # collector cannot see (a Region does not traverse its profiler), broken here.
    region = None


def test_a_region_object_left_open_is_ended_when_dropped(stream):
    prof = accgraph.Profiler()
    region = prof.region(stream, "dangling")
    region.__enter__()
    del region
    gc.collect()
    prof.flush()
    assert [r[0].path for r in prof.reports()] == ["dangling"]


def test_attach_all_times_graphs_created_later(stream):
    prof = accgraph.Profiler()
    prof.attach_all()
    g = accgraph.Graph(stream.backend)
    with g.capture(stream):
        with prof.region(stream, "auto"):
            pass
    g.replay()
    prof.detach()
    prof.flush()
    assert prof.delivered == 1


def test_a_profiler_in_a_cycle_through_its_sink_is_collected_and_flushed(stream):
    delivered = []

    def make():
        prof = accgraph.Profiler()
        prof.add_sink(lambda report: delivered.append((report.replay_index, prof.delivered)))
        g = accgraph.Graph(stream.backend)
        prof.attach(g)
        with g.capture(stream):
            with prof.region(stream, "r"):
                pass
        g.replay()
        g.replay()
        return g

    g = make()  # the profiler is only reachable from its own sink now
    gc.collect()
    assert [index for index, _ in delivered] == [0, 1]  # flushed when collected
    g.replay()  # its profiler is gone: no report, no crash
    stream.synchronize()


@pytest.mark.parametrize("stats_thread", [True, False])
def test_stats_thread_on_or_off_gives_the_statistics_of_every_report(stream, stats_thread):
    # 40 replays: the first folded at once, two stages of 16 handed over (to the statistics
    # thread, or folded on the flushing thread), 7 left staged: stats() must cover all of them.
    prof = accgraph.Profiler(stats_mode="exact", stats_thread=stats_thread)
    timed_graph(prof, stream, replays=40)
    prof.flush()
    reports = prof.reports()
    assert len(reports) == 40
    stats = prof.stats()
    assert [s.path for s in stats] == ["outer", "outer/fill", "outer/fill2"]
    for i, s in enumerate(stats):
        durations = sorted(r[i].duration_ns for r in reports if r[i].measurable)
        assert s.count == len(durations) and s.unmeasurable == 40 - len(durations)
        if durations:
            assert (s.min_ns, s.max_ns) == (durations[0], durations[-1])
            assert s.p50_ns == durations[math.ceil(0.5 * len(durations)) - 1]
            assert s.p95_ns == durations[math.ceil(0.95 * len(durations)) - 1]


def test_collect_stats_off_leaves_stats_empty(stream):
    prof = accgraph.Profiler(collect_stats=False)
    timed_graph(prof, stream, replays=3)
    prof.flush()
    assert prof.stats() == [] and prof.delivered == 3 and len(prof.reports()) == 3


def test_a_region_without_a_stream_times_on_the_default_stream(stream):
    prof = accgraph.Profiler()
    previous = accgraph.set_default_stream_provider(None)
    try:
        with pytest.raises(accgraph.InvalidStateError,
                           match=r"Profiler.region\('step'\): no stream was given and no default "
                                 r"stream is installed: .*accgraph.torch.instrument\(profiler\)"):
            with prof.region("step"):
                pass
        other = accgraph.Stream(stream.backend)
        current = [stream]
        assert accgraph.set_default_stream_provider(lambda: current[0]) is None
        assert accgraph.default_stream() is stream

        @prof.region("call", n=1)  # the stream is looked up at each call, not here
        def call():
            return 7

        assert call() == 7
        current[0] = other
        assert call() == 7
        current[0] = stream
        buf = accgraph.Buffer(stream, 64)
        g = accgraph.Graph(stream.backend)
        prof.attach(g)
        with g.capture(stream):
            with prof.region("captured", layer=3):  # the same code records into the capture
                stream.fill(buf, 1)
        g.replay()
        g.replay()
        prof.flush()
        seen = [(r.graph_id, r[0].path, r[0].stream_id, r[0].metadata) for r in prof.reports()]
        assert seen == [
            (0, "call", stream.id, {"n": "1"}),
            (0, "call", other.id, {"n": "1"}),
            (g.id, "captured", stream.id, {"layer": "3"}),
            (g.id, "captured", stream.id, {"layer": "3"}),
        ]
        accgraph.set_default_stream_provider(lambda: "not a stream")
        with pytest.raises(TypeError, match="returned str, not an accgraph.Stream"):
            with prof.region("bad"):
                pass
    finally:
        accgraph.set_default_stream_provider(previous)


def test_the_default_stream_provider_is_called_once_per_entry_and_its_errors_propagate():
    # Note [Default stream]: the extension calls the installed provider itself at each entry.
    stream = accgraph.Stream("host")
    prof = accgraph.Profiler()
    calls = []

    def provider():
        calls.append(1)
        return stream

    previous = accgraph.set_default_stream_provider(provider)
    try:
        region = prof.region("step")
        for _ in range(3):
            with region:
                pass
        assert len(calls) == 3
        other = accgraph.Stream("host")
        assert accgraph.set_default_stream_provider(lambda: other) is provider
        with region:
            pass
        assert len(calls) == 3

        def failing():
            raise KeyError("no stream here")

        accgraph.set_default_stream_provider(failing)
        with pytest.raises(KeyError, match="no stream here"):
            with region:
                pass
        accgraph.set_default_stream_provider(lambda: None)
        with pytest.raises(TypeError, match=r"Profiler.region\('step'\): the default stream "
                                            r"provider .* returned NoneType, not an "
                                            r"accgraph.Stream"):
            with region:
                pass
        assert region.__repr__() == "<accgraph.Region 'step' open=0>"
        prof.flush()
        assert [(r[0].path, r[0].stream_id) for r in prof.reports()] == [
            ("step", stream.id)] * 3 + [("step", other.id)]
    finally:
        accgraph.set_default_stream_provider(previous)


def test_region_arguments_with_and_without_a_stream(stream):
    prof = accgraph.Profiler()
    with pytest.raises(TypeError, match=r"give the region's name: region\(stream, name"):
        prof.region(stream)
    with pytest.raises(TypeError, match="stream must be an accgraph.Stream, or give the name alone"):
        prof.region(42)
    with pytest.raises(TypeError, match="provider must be callable"):
        accgraph.set_default_stream_provider(42)
    region = prof.region("no stream yet", lane="side")  # made without a provider: looked up later
    assert region.name == "no stream yet" and region.lane == "side"


def test_marker_overhead_taken_off_and_raw_kept(stream):
    # Note [Marker overhead]: measured once per device, taken off every region longer than it.
    prof = accgraph.Profiler()
    timed_graph(prof, stream, replays=3)
    prof.flush()
    reports = prof.reports()
    overhead = reports[0].marker_overhead_ns
    if stream.backend == "host":
        assert overhead > 0
    for r in reports:
        assert r.marker_overhead_ns == overhead == r.to_dict()["marker_overhead_ns"]
        regions = list(r)
        for t in regions:
            assert t.raw_duration_ns == t.raw_end_ns - t.raw_start_ns
            if t.raw_duration_ns > overhead:
                assert t.start_ns == t.raw_start_ns + overhead // 2
                assert t.end_ns == t.raw_end_ns - (overhead - overhead // 2)
            else:  # as read (never negative), inside its parent (Note [Edges inside the parent])
                start, end = t.raw_start_ns, t.raw_end_ns
                a = t.parent
                while a >= 0 and regions[a].stream_id == t.stream_id:
                    if regions[a].raw_duration_ns > overhead:  # moved in: its edges hold t's
                        start = min(max(start, regions[a].start_ns), regions[a].end_ns)
                        end = min(max(end, start), regions[a].end_ns)
                        break
                    a = regions[a].parent
                assert (t.start_ns, t.end_ns) == (start, end)
            if t.parent >= 0 and regions[t.parent].stream_id == t.stream_id:
                assert regions[t.parent].start_ns <= t.start_ns <= t.end_ns
                assert t.end_ns <= regions[t.parent].end_ns
            assert t.to_dict()["raw_duration_ns"] == t.raw_duration_ns
    raw = accgraph.Profiler(subtract_marker_overhead=False)
    timed_graph(raw, stream, replays=2)
    raw.flush()
    for r in raw.reports():
        assert r.marker_overhead_ns == 0
        assert all(t.duration_ns == t.raw_duration_ns for t in r)


# --- the marker budget and the ring: the 2026-11-28 audit's rows (scripts/audit/budget_cases.py
# reruns them as the auditor ran them) --------------------------------------------------------


def budget_run(backend, replays, regions=1, **options):
    """`replays` replays of a graph of `regions` regions under Profiler(**options), flushed: the
    profiler and, per report, (replay_index, regions, all measured) as a sink saw them."""
    prof = accgraph.Profiler(**{"keep_reports": None, **options})
    seen = []
    prof.add_sink(lambda r: seen.append((r.replay_index, len(r), all(t.measurable for t in r))))
    s = accgraph.Stream(backend)
    buf = accgraph.Buffer(s, 64)
    g = accgraph.Graph(backend)
    prof.attach(g)
    with g.capture(s):
        for i in range(regions):
            with prof.region(s, f"r{i}"):
                s.fill(buf, i % 256)
    for _ in range(replays):
        g.replay()
    s.synchronize()
    prof.flush()
    assert seen == [(i, regions, True) for i in range(replays)]
    assert prof.delivered == replays
    return prof


def test_a_marker_budget_of_0_uses_the_default_depth_and_delivers_every_replay():
    # audit 2026-11-28 D01
    prof = budget_run("host", 300, marker_memory=0)
    assert prof.ring_waits > 0  # 300 replays ahead of collection, the default depth of 16


def test_the_largest_marker_budget_is_capped(tmp_path):
    # audit 2026-11-28 D03: marker_memory=2^64-1 is capped at the backend's maximum depth (a
    # fresh process: its peak RSS stays far from what the budget would allocate). Bounded
    # against a child with the default budget run here: the process's own footprint (52 MiB in
    # CI, 865 MiB on a GPU machine, where the cuda backend loads the driver) cancels out.
    import subprocess
    import sys

    def peak_rss_mib(budget: str) -> int:
        script = tmp_path / "budget.py"
        script.write_text(
            "import resource, sys\n"
            f"sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})\n"
            "from test_timing import budget_run\n"
            f"budget_run('host', 100{budget})\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n")
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    baseline = peak_rss_mib("")
    capped = peak_rss_mib(", marker_memory=2**64 - 1")
    # The cap (65,536 replays of markers) is a few MiB; 256 MiB is far below any budget that
    # the uncapped 2^64-1 would try to allocate.
    assert capped - baseline < 256, (baseline, capped)


def test_a_ring_depth_beyond_the_backends_maximum_is_refused_at_the_first_region():
    # audit 2026-11-28 D06: the error names the depth and the maximum; the capture is closed.
    prof = accgraph.Profiler(ring_depth=10**9)
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, 64)
    g = accgraph.Graph("host")
    prof.attach(g)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"ring depth 1000000000 is larger than the host backend's maximum "
                             r"of 65536"):
        with g.capture(s):
            with prof.region(s, "r"):
                s.fill(buf, 1)
    assert not s.is_capturing


def test_a_one_byte_budget_with_500_regions_keeps_the_last_reports():
    # audit 2026-11-28 D07: marker_memory=1, 500 regions, 3,000 replays, keep_reports=10.
    prof = budget_run("host", 3000, regions=500, marker_memory=1, keep_reports=10)
    assert [r.replay_index for r in prof.reports()] == list(range(2990, 3000))
    assert prof.ring_waits == 2999


def test_replays_far_ahead_of_collection_are_all_kept_in_order():
    # audit 2026-11-28 D08: 20,000 replays, a budget of 64 bytes, every report kept.
    prof = budget_run("host", 20_000, marker_memory=64)
    assert [r.replay_index for r in prof.reports()] == list(range(20_000))


def test_a_small_budget_on_level_zero():
    # audit 2026-11-28 D09: level_zero (the CPU driver), marker_memory=8, 400 replays.
    from conftest import require_backend

    require_backend("level_zero")
    budget_run("level_zero", 400, marker_memory=8)


def test_a_ring_of_1_with_the_background_collector_and_three_replaying_threads():
    # audit 2026-11-28 D10: 3 threads x 1,000 replays, each of its own graph.
    prof = accgraph.Profiler(ring_depth=1, background_collector=True, keep_reports=None)
    graphs = []
    for _ in range(3):
        s, g, buf = timed_host_graph(prof)
        graphs.append((s, g))
    errors = []

    def replay(s, g):
        try:
            for _ in range(1000):
                g.replay()
            s.synchronize()
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=replay, args=pair) for pair in graphs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    prof.flush()
    assert errors == [] and prof.delivered == 3000
    per_graph = {}
    for r in prof.reports():
        per_graph.setdefault(r.graph_id, []).append(r.replay_index)
    assert sorted(per_graph.values()) == [list(range(1000))] * 3


def test_immediate_delivery_with_a_small_budget_needs_no_flush():
    # audit 2026-11-28 D11: delivery='immediate', marker_memory=8, 500 replays.
    prof = accgraph.Profiler(delivery="immediate", marker_memory=8, keep_reports=None)
    s, g, buf = timed_host_graph(prof)
    for _ in range(500):
        g.replay()
    s.synchronize()
    deadline = time.monotonic() + 30
    while prof.delivered < 500 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert prof.delivered == 500


# --- sampled timing (Note [Sampled replays] in include/accgraph/spi/untimed_replay.hpp) ---------

def test_sampled_profiler_times_exactly_the_scheduled_replays(stream):
    prof = accgraph.Profiler(sample_every=4, sample_seed=7)
    g, _ = timed_graph(prof, stream, replays=40)
    prof.flush()
    (counts,) = prof.replay_counts()
    assert (counts.graph_id, counts.run, counts.sample_every) == (g.id, 40, 4)
    if stream.backend == "host":
        assert counts.sampled  # the host graph launches without its markers
    scheduled = [i for i in range(40) if accgraph.is_sampled_replay(i, 4, 7, g.id)]
    expected = scheduled if counts.sampled else list(range(40))  # a fallback times every one
    assert len(scheduled) == 10
    # Reports number every replay, timed or not.
    assert [r.replay_index for r in prof.reports()] == expected
    assert counts.timed == len(expected)
    for row in prof.stats():
        assert (row.graph_id, row.replays_run, row.replays_timed, row.count) == (
            g.id, 40, len(expected), len(expected)), row.path
        assert row.to_dict()["replays_run"] == 40
    table = prof.stats_table()
    line = f"sampled: graph {g.id}: {len(expected)} of 40 replay(s) timed"
    assert (line + " (1 in 4)" if counts.sampled else line + " (every replay timed") in table


def test_every_replay_is_timed_by_default():
    prof = accgraph.Profiler()
    s, g, _ = timed_host_graph(prof)
    for _ in range(5):
        g.replay(s)
    prof.flush()
    (counts,) = prof.replay_counts()
    assert (counts.run, counts.timed, counts.sample_every, counts.sampled) == (5, 5, 1, True)
    assert repr(counts) == (f"GraphReplays(graph_id={g.id}, run=5, timed=5, sample_every=1, "
                            "sampled=True)")
    assert [r.replay_index for r in prof.reports()] == [0, 1, 2, 3, 4]
    assert "sampled:" not in prof.stats_table()
    (row,) = prof.stats()
    assert (row.replays_run, row.replays_timed) == (5, 5)


def test_eager_rows_have_no_replays():
    prof = accgraph.Profiler(sample_every=3)
    s = accgraph.Stream("host")
    with prof.region(s, "eager"):
        s.delay(1e-6)
    prof.flush()
    (row,) = prof.stats()
    assert (row.graph_id, row.replays_run, row.replays_timed, row.count) == (0, 0, 0, 1)
    assert prof.replay_counts() == []


def test_is_sampled_replay_picks_one_replay_per_window():
    for every in (0, 1):
        assert all(accgraph.is_sampled_replay(i, every, 3, 9) for i in range(20))
    for every, seed, graph_id in ((5, 0, 1), (16, 42, 7), (3, 1, 2**64 - 1)):
        picked = [i for i in range(every * 50) if accgraph.is_sampled_replay(i, every, seed,
                                                                              graph_id)]
        assert [i // every for i in picked] == list(range(50))  # one in each window
        # A random phase: not the same offset in every window (no aliasing with a period N).
        assert len({i % every for i in picked}) > 1
        # Deterministic.
        assert picked == [i for i in range(every * 50)
                          if accgraph.is_sampled_replay(i, every, seed, graph_id)]
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="is_sampled_replay: replay is -1: give a whole number from 0"):
        accgraph.is_sampled_replay(-1, 4, 0, 1)


@pytest.mark.parametrize("options, message", [
    ({"sample_every": 0}, "Profiler: sample_every is 0: give N >= 1 to time 1 replay in N "
                          "(1: every replay), or an overhead budget instead"),
    ({"overhead": 1.0}, "Profiler: overhead 1 is not a fraction in [0, 1): give the share of a "
                        "graph's device time its markers may cost on average, e.g. 0.005 for "
                        "0.5% (0: off)"),
    ({"overhead": -0.1}, "Profiler: overhead -0.1 is not a fraction in [0, 1)"),
    ({"overhead": math.nan}, "Profiler: overhead nan is not a fraction in [0, 1)"),
    ({"sample_every": 4, "overhead": 0.01},
     "Profiler: both sample_every (4) and overhead (0.01) are set: give one (overhead chooses "
     "each graph's N itself)"),
    ({"sample_every": -2}, "Profiler: sample_every is -2: give a whole number from 0 to"),
    ({"sample_seed": 2**64}, "Profiler: sample_seed is 18446744073709551616: give a whole "
                             "number from 0 to"),
])
def test_bad_sampling_options_raise_invalid_argument(options, message):
    with pytest.raises(accgraph.InvalidArgumentError) as e:
        accgraph.Profiler(**options)
    assert str(e.value).startswith("[invalid argument] " + message), str(e.value)
    assert e.value.code == accgraph.ErrorCode.INVALID_ARGUMENT
    assert isinstance(e.value, ValueError)


def test_overhead_budget_times_every_replay_until_the_first_reports():
    prof = accgraph.Profiler(overhead=0.5)
    s, g, _ = timed_host_graph(prof)
    for _ in range(4):
        g.replay(s)
    (counts,) = prof.replay_counts()
    assert (counts.run, counts.timed, counts.sample_every, counts.sampled) == (4, 4, 1, True)
    prof.flush()
    for _ in range(20):
        g.replay(s)
    prof.flush()
    (counts,) = prof.replay_counts()
    assert counts.run == 24 and counts.sample_every >= 1 and counts.sampled
    assert counts.timed == len(prof.reports())
