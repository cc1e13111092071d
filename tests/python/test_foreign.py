"""ForeignGraph: a graph its owner captures and launches natively, timed by a Profiler. On the host
backend the owner is played by an accgraph Graph capturing the queue of one Stream, while the
ForeignGraph is told about it through a second Stream wrapping the same queue (what accgraph
sees of a framework's native capture): the whole life cycle runs without a GPU."""

import gc
import inspect
import sys
import threading

import pytest

import accgraph
from conftest import UNAVAILABLE


class NativeOwner:
    """A framework's native capture and launch, on the queue of `owner`; `wrapped` is the
    accgraph Stream wrapping that queue, the one the ForeignGraph and the regions use."""

    def __init__(self):
        self.owner = accgraph.Stream("host")
        self.wrapped = accgraph.Stream.wrap("host", 0, self.owner.native_handle)
        self.graph = accgraph.Graph("host")

    def begin_capture(self):
        self.graph.capture_begin(self.owner)

    def end_capture(self):
        self.graph.capture_end()

    def launch(self):
        self.graph.replay(self.owner)


def capture_timed(prof, foreign, owner, work_s=0.0002, **metadata):
    """The owner captures two regions' work; the ForeignGraph joins the capture."""
    owner.begin_capture()
    foreign.capture_begin(owner.wrapped)
    with prof.region(owner.wrapped, "step", **metadata):
        with prof.region(owner.wrapped, "a"):
            owner.wrapped.delay(work_s)
        with prof.region(owner.wrapped, "b"):
            owner.wrapped.delay(work_s / 2)
    foreign.capture_end()
    owner.end_capture()


def timed_foreign(prof, **kwargs):
    """A ForeignGraph attached to `prof` that joined the owner's capture (capture_timed)."""
    owner = NativeOwner()
    foreign = accgraph.ForeignGraph("host")
    prof.attach(foreign)
    capture_timed(prof, foreign, owner, **kwargs)
    return owner, foreign


def test_one_report_per_launch_with_the_regions_of_the_capture():
    prof = accgraph.Profiler(ring_depth=2)
    owner, foreign = timed_foreign(prof, kind="foreign")
    assert foreign.state == accgraph.GraphState.INSTANTIATED
    for _ in range(5):
        foreign.launch(owner.wrapped, owner.launch)
    assert foreign.replay_count == 5
    prof.flush()
    reports = prof.reports()
    assert [r.replay_index for r in reports] == [0, 1, 2, 3, 4]
    for report in reports:
        assert report.graph_id == foreign.id == foreign.graph_id
        assert [r.path for r in report] == ["step", "step/a", "step/b"]
        step, a, b = report.regions
        assert step.metadata == {"kind": "foreign"}
        assert a.raw_duration_ns >= 200_000 and b.raw_duration_ns >= 100_000
        # The wrapped queue is native and the host backend has no CaptureTail: a's end and b's
        # begin are separate markers (Note [Boundary sharing] in timing/engine/region_recorder.cpp).
        assert a.end_ns <= b.start_ns
        assert step.duration_ns >= a.duration_ns + b.duration_ns
        assert step.stream_id == owner.wrapped.id
    # Launches follow each other on the queue.
    for earlier, later in zip(reports, reports[1:]):
        assert later[0].start_ns >= earlier[0].end_ns


def test_capture_begin_on_a_stream_that_is_not_capturing():
    stream = accgraph.Stream("host")
    foreign = accgraph.ForeignGraph("host")
    with pytest.raises(accgraph.InvalidStateError,
                       match=r"foreign graph \d+: stream \d+ is not capturing: begin the native "
                             r"capture on the queue it wraps first") as raised:
        foreign.capture_begin(stream)
    assert raised.value.code == accgraph.ErrorCode.INVALID_STATE and raised.value.backend == "host"
    assert foreign.state == accgraph.GraphState.EMPTY


def test_launch_before_a_capture():
    stream = accgraph.Stream("host")
    foreign = accgraph.ForeignGraph("host")
    with pytest.raises(accgraph.InvalidStateError, match="has no finished capture"):
        foreign.launch(stream, lambda: None)
    assert foreign.replay_count == 0


def test_capture_end_without_a_capture():
    foreign = accgraph.ForeignGraph("host")
    with pytest.raises(accgraph.InvalidStateError, match="is not capturing"):
        foreign.capture_end()


def test_a_stream_capturing_into_an_accgraph_graph_is_refused():
    stream = accgraph.Stream("host")
    g = accgraph.Graph("host")
    foreign = accgraph.ForeignGraph("host")
    with g.capture(stream):
        with pytest.raises(accgraph.InvalidStateError,
                           match=f"already capturing into graph {g.id}: a stream captures into "
                                 "one graph at a time"):
            foreign.capture_begin(stream)
    assert foreign.state == accgraph.GraphState.EMPTY


@pytest.mark.parametrize("other", ["level_zero", "toy", "cuda"])
def test_a_stream_of_another_backend_is_refused(other):
    if UNAVAILABLE.get(other):
        pytest.skip(f"backend {other} unavailable: {UNAVAILABLE[other]}")
    foreign = accgraph.ForeignGraph("host")
    stream = accgraph.Stream(other)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=f"the stream belongs to backend '{other}' but graph {foreign.id} is a "
                             "'host' graph"):
        foreign.capture_begin(stream)


def test_an_unknown_or_unusable_backend_is_refused():
    with pytest.raises(accgraph.Error, match="no_such_backend"):
        accgraph.ForeignGraph("no_such_backend")
    if UNAVAILABLE.get("cuda"):
        with pytest.raises(accgraph.UnavailableError):
            accgraph.ForeignGraph("cuda")


def test_the_graph_the_hooks_see_is_not_an_accgraph_graph():
    prof = accgraph.Profiler()
    with pytest.raises(TypeError, match="accgraph.Graph or an accgraph.ForeignGraph"):
        prof.attach("graph")
    owner = NativeOwner()
    foreign = accgraph.ForeignGraph("host")
    owner.begin_capture()
    foreign.capture_begin(owner.wrapped)
    with pytest.raises(accgraph.InvalidStateError, match="already capturing"):
        prof.attach(foreign)  # too late for this capture
    foreign.capture_end()
    owner.end_capture()
    foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    assert prof.delivered == 0  # not attached: launched, not timed
    assert foreign.replay_count == 1


def test_a_region_in_a_native_capture_accgraph_was_not_told_about():
    prof = accgraph.Profiler()
    owner = NativeOwner()
    owner.begin_capture()
    with pytest.raises(accgraph.InvalidStateError,
                       match=r"begin\('lost'\): stream \d+ is capturing into a graph accgraph was "
                             "not told about.*time it through a ForeignGraph") as info:
        with prof.region(owner.wrapped, "lost"):
            pass
    # The case as data (Note [Error reasons]): what module timing decides by.
    assert info.value.reason == accgraph.ErrorReason.NATIVE_CAPTURE
    owner.end_capture()


def test_launch_takes_its_arguments_positional_or_keyword_and_names_what_is_wrong():
    # ForeignGraph.launch is a plain CPython method (Note [Launch method] in
    # bindings/python/src/foreign_graph.cpp): the arguments and errors of the nanobind version.
    prof = accgraph.Profiler()
    owner, foreign = timed_foreign(prof)
    foreign.launch(owner.wrapped, owner.launch)
    foreign.launch(stream=owner.wrapped, fn=owner.launch)
    foreign.launch(owner.wrapped, fn=owner.launch, trusted=False)
    foreign.launch(owner.wrapped, owner.launch, trusted=True)
    # fn(owner): the owner's unbound launch and its object (accgraph.torch's replay)
    foreign.launch(owner.wrapped, NativeOwner.launch, owner=owner, trusted=True)
    foreign.launch(owner.wrapped, owner.launch, owner=None)  # None: fn()
    called_with = []
    foreign.launch(owner.wrapped, lambda o: (called_with.append(o), owner.launch()), owner=7)
    assert called_with == [7]
    # Keyword names made at run time are not interned: found by their text.
    built = {"".join(["own", "er"]): None, "".join(["trus", "ted"]): True}
    assert not any(name is sys.intern(name) for name in built)
    foreign.launch(owner.wrapped, owner.launch, **built)
    assert foreign.replay_count == 8
    wrong = [
        ((owner.wrapped, owner.launch, True), {}, r"takes 2 positional arguments .* 3 were given"),
        ((owner.wrapped, owner.launch), {"fence": True}, "unexpected keyword argument 'fence'"),
        ((owner.wrapped, owner.launch), {"fn": owner.launch}, "multiple values for argument 'fn'"),
        ((owner.wrapped, owner.launch), {"owner": 1, "owner2": 2},
         "unexpected keyword argument 'owner2'"),
        ((owner.wrapped,), {}, "missing required argument 'fn'"),
        ((), {"fn": owner.launch}, "missing required argument 'stream'"),
        ((3, owner.launch), {}, "stream must be an accgraph.Stream, not int"),
        ((None, owner.launch), {}, "stream must be an accgraph.Stream, not NoneType"),
        ((owner.wrapped, 3), {}, "fn must be callable, not int"),
        ((owner.wrapped, owner.launch), {"trusted": 1}, "trusted must be True or False, not int"),
    ]
    for args, kwargs, message in wrong:
        with pytest.raises(TypeError, match=message):
            foreign.launch(*args, **kwargs)
    with pytest.raises(TypeError):
        accgraph.ForeignGraph.launch(owner.wrapped, owner.wrapped, owner.launch)  # not a graph
    assert foreign.replay_count == 8  # nothing launched, and the graph is not left busy
    foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    assert [r.replay_index for r in prof.reports()] == list(range(9))
    assert list(inspect.signature(accgraph.ForeignGraph.launch).parameters) == [
        "self", "stream", "fn", "owner", "trusted"]
    assert "counts no launch" in accgraph.ForeignGraph.launch.__doc__


def test_what_the_launch_callable_raises_propagates_and_counts_no_launch():
    class OwnerFailure(Exception):
        pass

    prof = accgraph.Profiler()
    owner, foreign = timed_foreign(prof)
    failure = OwnerFailure("cudaGraphLaunch failed")

    def failing_launch():
        raise failure

    with pytest.raises(OwnerFailure) as raised:
        foreign.launch(owner.wrapped, failing_launch)
    assert raised.value is failure  # the same exception object, not a copy of its text
    assert foreign.replay_count == 0
    with pytest.raises(TypeError):
        foreign.launch(owner.wrapped, 42)
    foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    assert [r.replay_index for r in prof.reports()] == [0]


def test_a_launch_callable_using_the_same_graph_gets_an_error():
    prof = accgraph.Profiler()
    owner, foreign = timed_foreign(prof)

    def reentrant():
        foreign.reset()

    with pytest.raises(accgraph.InvalidStateError,
                       match="ForeignGraph.reset: the graph is in use by another call"):
        foreign.launch(owner.wrapped, reentrant)
    assert foreign.state == accgraph.GraphState.INSTANTIATED and foreign.replay_count == 0


@pytest.mark.parametrize("trusted", [False, True])
def test_background_collector_with_a_python_sink_and_a_small_ring(trusted):
    """The launch holds the GIL while the collector thread's sink needs it too; the ring of 2
    makes launches wait for the oldest, and a launch gives the GIL up for that wait (Note
    [Launch callables]): neither may wait for the other forever."""
    prof = accgraph.Profiler(ring_depth=2, background_collector=True, collector_period=0.001,
                             keep_reports=0)
    seen = []
    prof.add_sink(lambda report: seen.append(report.replay_index))
    owner, foreign = timed_foreign(prof, work_s=0.00002)
    launched = []

    def launch_all():
        for _ in range(200):
            foreign.launch(owner.wrapped, lambda: (launched.append(1), owner.launch()),
                           trusted=trusted)

    worker = threading.Thread(target=launch_all)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "launches did not finish: a deadlock"
    prof.flush()
    assert len(launched) == 200 and prof.delivered == 200
    assert seen == list(range(200))


def test_immediate_delivery_reports_each_launch_before_launch_returns():
    prof = accgraph.Profiler(delivery="immediate")
    owner, foreign = timed_foreign(prof, work_s=0.00002)
    for i in range(3):
        foreign.launch(owner.wrapped, owner.launch)
        assert prof.delivered == i + 1


def test_reset_delivers_pending_launches_and_allows_a_new_capture():
    prof = accgraph.Profiler(ring_depth=4)
    owner, foreign = timed_foreign(prof, work_s=0.00002)
    for _ in range(3):
        foreign.launch(owner.wrapped, owner.launch)
    foreign.reset()  # before the owner drops its graph
    assert prof.delivered == 3
    assert foreign.state == accgraph.GraphState.EMPTY and foreign.replay_count == 0
    owner.graph.reset()
    capture_timed(prof, foreign, owner, work_s=0.00002)
    foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    assert prof.delivered == 4
    assert prof.reports()[-1].replay_index == 0  # numbered from the new capture


def test_repr_shows_the_state():
    owner = NativeOwner()
    foreign = accgraph.ForeignGraph("host")
    assert repr(foreign) == f"<accgraph.ForeignGraph {foreign.id} backend='host' state=empty launches=0>"
    assert foreign.backend == "host" and foreign.device == -1
    owner.begin_capture()
    foreign.capture_begin(owner.wrapped)
    assert "state=capturing" in repr(foreign)
    foreign.capture_end()
    owner.end_capture()
    foreign.launch(owner.wrapped, owner.launch)
    assert repr(foreign).endswith("state=instantiated launches=1>")
    assert foreign.device == 0
    assert accgraph.ForeignGraph().backend == accgraph.default_backend()


def test_dropping_the_profiler_first_is_safe():
    prof = accgraph.Profiler()
    owner, foreign = timed_foreign(prof, work_s=0.00002)
    foreign.launch(owner.wrapped, owner.launch)
    del prof  # flushes; the graph keeps the capture's markers
    gc.collect()
    for _ in range(3):
        foreign.launch(owner.wrapped, owner.launch)  # not timed any more, no crash
    owner.owner.synchronize()
    assert foreign.replay_count == 4
    foreign.reset()


def test_dropping_the_streams_first_is_safe():
    prof = accgraph.Profiler()
    delivered = []
    prof.add_sink(lambda report: delivered.append(report.replay_index))
    owner, foreign = timed_foreign(prof, work_s=0.00002)
    foreign.launch(owner.wrapped, owner.launch)
    del owner  # the wrapped stream, the owner's stream and graph
    gc.collect()
    del foreign  # delivers the pending launch
    gc.collect()
    assert delivered == [0]


def test_dropping_the_stream_during_a_capture_aborts_it():
    owner = NativeOwner()
    foreign = accgraph.ForeignGraph("host")
    owner.begin_capture()
    foreign.capture_begin(owner.wrapped)
    wrapped = owner.wrapped
    owner.wrapped = None
    del wrapped
    gc.collect()
    assert foreign.state == accgraph.GraphState.EMPTY
    with pytest.raises(accgraph.InvalidStateError, match="was destroyed before capture_end"):
        foreign.capture_end()
    owner.end_capture()


# --- owners that break the launch contract (audit 2026-11-25 #29, #31, #33) ---------------------
# Note [Launch fences] in timing/engine/marker_ring.cpp: such a launch is reported unmeasurable,
# never with another launch's times; flush, reset and interpreter exit return; later launches are
# reported again.


def _measured(report):
    (region,) = [r for r in report.regions if r.path == "step/a"]
    return region.measurable and region.raw_duration_ns >= 200_000


def test_a_launch_that_launches_nothing_is_unmeasurable_and_flush_returns():  # audit #29
    prof = accgraph.Profiler(ring_depth=4)
    owner, foreign = timed_foreign(prof)
    foreign.launch(owner.wrapped, lambda: None)
    done = threading.Event()
    flusher = threading.Thread(target=lambda: (prof.flush(), done.set()), daemon=True)
    flusher.start()
    assert done.wait(20), "flush() did not return after a launch that launched nothing"
    for _ in range(3):
        foreign.launch(owner.wrapped, owner.launch)
    foreign.launch(owner.wrapped, lambda: None)
    foreign.reset()  # collects the pending launches, the last one of nothing included
    reports = prof.reports()
    assert len(reports) == 5
    assert [all(r.measurable for r in rep.regions) for rep in reports] == [
        False, True, True, True, False]
    assert all(_measured(rep) for rep in reports[1:4])


def test_a_launch_that_launches_twice_is_unmeasurable_and_later_ones_are_reported():  # #31
    prof = accgraph.Profiler(ring_depth=2)
    owner, foreign = timed_foreign(prof)

    def twice():
        owner.launch()
        owner.launch()

    foreign.launch(owner.wrapped, owner.launch)
    prof.flush()  # else the second execution may overwrite its slot: then it is unmeasurable
    foreign.launch(owner.wrapped, twice)
    prof.flush()
    for _ in range(5):
        foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    reports = prof.reports()
    assert [rep.replay_index for rep in reports] == list(range(7))
    assert _measured(reports[0])
    assert not any(r.measurable for r in reports[1].regions)
    assert all(_measured(rep) for rep in reports[2:])


def test_a_launch_that_launches_then_raises_loses_no_later_report():  # audit #33
    prof = accgraph.Profiler(ring_depth=2)
    owner, foreign = timed_foreign(prof)

    def launch_then_raise():
        owner.launch()
        raise ValueError("after launching")

    with pytest.raises(ValueError, match="after launching"):
        foreign.launch(owner.wrapped, launch_then_raise)
    for _ in range(3):
        foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    assert foreign.replay_count == 3
    reports = prof.reports()
    assert [rep.replay_index for rep in reports] == [0, 1, 2]
    assert all(_measured(rep) for rep in reports)


def test_interpreter_exit_with_a_launch_of_nothing_pending_returns(tmp_path):  # audit #29
    script = tmp_path / "exit_pending.py"
    script.write_text(
        "import accgraph\n"
        "prof = accgraph.Profiler()\n"
        "owner = accgraph.Stream('host')\n"
        "wrapped = accgraph.Stream.wrap('host', 0, owner.native_handle)\n"
        "graph = accgraph.Graph('host')\n"
        "foreign = accgraph.ForeignGraph('host')\n"
        "prof.attach(foreign)\n"
        "graph.capture_begin(owner)\n"
        "foreign.capture_begin(wrapped)\n"
        "with prof.region(wrapped, 'a'):\n"
        "    wrapped.delay(0.0001)\n"
        "foreign.capture_end()\n"
        "graph.capture_end()\n"
        "foreign.launch(wrapped, lambda: None)\n"
        "print('launched')\n")
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "launched" in result.stdout


def test_a_trusted_launch_is_reported_like_a_checked_one():
    prof = accgraph.Profiler(ring_depth=2)
    owner, foreign = timed_foreign(prof)
    for _ in range(3):
        foreign.launch(owner.wrapped, owner.launch, trusted=True)
    foreign.launch(owner.wrapped, owner.launch)
    prof.flush()
    reports = prof.reports()
    assert [rep.replay_index for rep in reports] == [0, 1, 2, 3]
    assert all(_measured(rep) for rep in reports)


def test_a_sampled_foreign_graph_without_a_copy_runs_the_owners_launch_every_time():
    """Note [Untimed foreign replays]: the host backend cannot copy a capture under way, so
    capture_end(untimed_copy=True) makes none, the owner's consent changes nothing, and every
    launch is the owner's and timed (sampled False)."""
    prof = accgraph.Profiler(sample_every=4, ring_depth=2)
    assert prof.sample_every == 4 and prof.overhead == 0
    owner = NativeOwner()
    foreign = accgraph.ForeignGraph("host")
    prof.attach(foreign)
    owner.begin_capture()
    foreign.capture_begin(owner.wrapped)
    with prof.region(owner.wrapped, "step"):
        owner.wrapped.delay(0.0001)
    foreign.capture_end(untimed_copy=True)
    owner.end_capture()
    assert not foreign.has_untimed_copy
    foreign.enable_untimed_launches(True)
    launches = []
    for _ in range(12):
        foreign.launch(owner.wrapped, lambda: (launches.append(1), owner.launch()))
    prof.flush()
    (counts,) = prof.replay_counts()
    assert len(launches) == 12 and prof.delivered == 12
    assert counts.run == 12 and counts.timed == 12 and not counts.sampled
