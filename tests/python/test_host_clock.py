"""accgraph.measure_host_clock_offset and HostClockOffset (accgraph/host_clock.hpp): the
ping-pong over a transport of two Python callbacks, here two threads of one process (one host:
the offset is 0 within the uncertainty), and the offsets written into a trace and merged."""

import queue
import threading

import pytest

import accgraph


def test_two_ranks_on_one_host_measure_zero_within_the_uncertainty():
    # One queue per direction: to_rank[k] carries what rank 1-k sends to rank k.
    to_rank = [queue.Queue(), queue.Queue()]
    results = [None, None]

    def rank(k):
        results[k] = accgraph.measure_host_clock_offset(
            k, 2, lambda peer, value: to_rank[peer].put(value),
            lambda peer: to_rank[k].get(timeout=30), rounds=32)

    threads = [threading.Thread(target=rank, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results[0].offset_ns == 0 and results[0].uncertainty_ns == 0
    one = results[1]
    assert one.uncertainty_ns > 0
    assert abs(one.offset_ns) <= one.uncertainty_ns
    assert abs(one.measured_at_ns - accgraph.host_clock_ns()) < 60 * 10**9
    assert "HostClockOffset" in repr(one)


def test_bad_arguments_are_errors():
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"measure_host_clock_offset: rank 2 of a world of 2"):
        accgraph.measure_host_clock_offset(2, 2, lambda p, v: None, lambda p: 0)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"rounds is 0: give a whole number from 1 to 100000"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: 0, rounds=0)


# Audit K05, K06, K14: what nanobind refused with its signature dump, named as the other integer
# arguments are (Note [Integer arguments]) and as the C++ library says it.
@pytest.mark.parametrize("args, message", [
    (dict(rounds=-1), r"rounds is -1: give a whole number from 1 to 100000"),
    (dict(rounds=2**70), r"rounds is 1180591620717411303424: give a whole number from 1 to"),
    (dict(rank=2**40), r"measure_host_clock_offset: rank is 1099511627776: give a whole number"),
    (dict(send=None), r"the transport lacks send or receive: give both callbacks \(send is "
                      r"NoneType"),
    (dict(receive=5), r"the transport lacks send or receive: give both callbacks .*receive is int"),
])
def test_bad_arguments_are_named_not_a_signature_dump(args, message):
    call = dict(rank=1, world_size=2, send=lambda p, v: None, receive=lambda p: 1)
    call.update(args)
    with pytest.raises(accgraph.InvalidArgumentError, match=message):
        accgraph.measure_host_clock_offset(**call)


# Audit K07, K08: a receive that returns no int (a forgotten return, a truncated message).
@pytest.mark.parametrize("value, shown", [
    (None, r"None \(NoneType\)"), (b"\x01\x02", r"b'\\x01\\x02' \(bytes\)"),
    ("123", r"'123' \(str\)"), (1.5, r"1.5 \(float\)")])
def test_a_receive_returning_no_int_is_named(value, shown):
    with pytest.raises(TypeError, match=r"measure_host_clock_offset: receive\(0\) returned "
                                        + shown + r", not an int: it must return the int"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: value)


# Audit K09: a signed int64 transport hands back a negative int.
def test_a_receive_returning_a_negative_int_is_named_with_the_range():
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"receive\(0\) returned -5, outside 0 to 2\*\*64-1: .*value % 2\*\*64"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: -5)


# Audit K10: a peer answering random 64-bit values is no clock.
def test_garbage_answers_are_refused_saying_why():
    import random
    rng = random.Random(7)
    with pytest.raises(accgraph.BackendError,
                       match=r"rank 0's answers are not its clock: round 2 answered .* while "
                             r".* passed here"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None,
                                           lambda p: rng.getrandbits(64), rounds=8)


# Audit K11: a peer answering 0 (an unfilled receive buffer), not an offset of 56 years.
def test_zero_answers_are_refused_saying_why():
    with pytest.raises(accgraph.BackendError,
                       match=r"round 1 answered 0, which no clock reads \(an unfilled receive "
                             r"buffer\?\)"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: 0, rounds=8)


# Audit K13: a peer that never answers, over a transport without a timeout of its own.
def test_a_peer_that_never_answers_times_out():
    never = threading.Event()
    try:
        with pytest.raises(TimeoutError, match=r"rank 1 of 2 got no answer within 0.5 s: check "
                                               r"that every rank"):
            accgraph.measure_host_clock_offset(1, 2, lambda p, v: None,
                                               lambda p: never.wait() and 1, timeout=0.5)
    finally:
        never.set()  # lets the abandoned receive end
    with pytest.raises(accgraph.InvalidArgumentError, match=r"timeout is 0: give a number of "
                                                            r"seconds above 0, or None"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: 1, timeout=0)


def test_callback_errors_propagate():
    def broken(peer, value):
        raise RuntimeError("the link is down")

    with pytest.raises(RuntimeError, match="the link is down"):
        accgraph.measure_host_clock_offset(1, 2, broken, lambda p: 0)
    with pytest.raises(RuntimeError, match="the link is down"):  # on this thread as well
        accgraph.measure_host_clock_offset(1, 2, broken, lambda p: 0, timeout=None)


@pytest.mark.skipif(not accgraph.perfetto_supported(), reason="built without Perfetto support")
def test_written_offsets_are_applied_by_the_merge(tmp_path):
    stream = accgraph.Stream("host")
    prof = accgraph.Profiler()
    buf = accgraph.Buffer(stream, 64)
    with prof.region(stream, "step"):
        stream.fill(buf, 1)
    stream.synchronize()
    prof.flush()
    clock = accgraph.calibrate_clock(stream)
    now = accgraph.host_clock_ns()
    paths = []
    for rank, offsets in enumerate([[accgraph.HostClockOffset(0, 0, now)],
                                    [accgraph.HostClockOffset(300_000, 20, now),
                                     accgraph.HostClockOffset(300_050, 30, now + 10**9)]]):
        path = tmp_path / f"rank{rank}.pftrace"
        prof.write_trace(path, rank=rank, world_size=2, host=f"node{rank}", clocks=[clock],
                         host_clock_offsets=offsets)
        paths.append(path)
    summary = accgraph.merge_traces(paths, tmp_path / "merged.pftrace")
    assert summary.warnings == []
    offsets = summary.ranks[1].host_clock_offsets
    assert [(h.offset_ns, h.uncertainty_ns) for h in offsets] == [(300_000, 20), (300_050, 30)]
    assert summary.ranks[1].to_dict()["host_clock_offsets"][1]["offset_ns"] == 300_050
    with pytest.raises(accgraph.InvalidArgumentError, match="host_clock_offsets are recorded in "
                                                            "native Perfetto traces only"):
        prof.write_trace(tmp_path / "r.json", host_clock_offsets=offsets)
