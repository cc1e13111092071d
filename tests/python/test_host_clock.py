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
    with pytest.raises(accgraph.InvalidArgumentError, match=r"0 rounds: take from 1 to 100000"):
        accgraph.measure_host_clock_offset(1, 2, lambda p, v: None, lambda p: 0, rounds=0)


def test_callback_errors_propagate():
    def broken(peer, value):
        raise RuntimeError("the link is down")

    with pytest.raises(RuntimeError, match="the link is down"):
        accgraph.measure_host_clock_offset(1, 2, broken, lambda p: 0)


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
