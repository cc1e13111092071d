"""Traces from Python: the format chosen by the file name, native Perfetto traces with a rank and
clock offsets, merge_traces() of several ranks on a common clock, estimate_clock_offset() and
calibrate_clock().

The .pftrace files are decoded by the perfetto PyPI package's own protos (an independent
reader), partly through tests/perfetto/check_trace.py, the checker the C++ tests use. Without the
perfetto package those tests skip, unless ACCGRAPH_TEST_REQUIRE_PERFETTO=1 (scripts/test.sh
installs it and sets that): then they fail.
"""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

import accgraph

CHECK_TRACE = pathlib.Path(__file__).resolve().parents[1] / "perfetto" / "check_trace.py"

try:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent
except ImportError as error:  # reported by needs_decoder
    Trace = None
    _decoder_missing = f"the perfetto package cannot be imported ({error}): pip install perfetto"


def needs_perfetto():
    if not accgraph.perfetto_supported():
        pytest.skip("this accgraph package was built without libprotobuf (no .pftrace support)")


def needs_decoder():
    needs_perfetto()
    if Trace is None:
        if os.environ.get("ACCGRAPH_TEST_REQUIRE_PERFETTO") == "1":
            pytest.fail(f"ACCGRAPH_TEST_REQUIRE_PERFETTO=1 but {_decoder_missing}")
        pytest.skip(_decoder_missing)


def traced_reports(replays=3):
    """A host graph with a stream region, two lanes and metadata, replayed `replays` times."""
    stream = accgraph.Stream("host")
    buf = accgraph.Buffer(stream, 4096)
    prof = accgraph.Profiler(keep_reports=100)
    g = accgraph.Graph("host")
    prof.attach(g)
    with g.capture(stream):
        with prof.region(stream, "step", layer=3):
            with prof.region(stream, "attention", lane="attention"):
                stream.fill(buf, 1)
            with prof.region(stream, "all_reduce", lane="comm", collective="all_reduce",
                             dtype="float32"):
                stream.fill(buf, 2)
    for _ in range(replays):
        g.replay()
    prof.flush()
    return prof, prof.reports()


def process_name(report, rank):
    name = f"{report.backend} device {report.device}"
    if report.device_name:
        name += f" ({report.device_name})"
    return name if rank is None else f"rank {rank}: {name}"


def check_trace(path, expected, tmp_path):
    """tests/perfetto/check_trace.py on `path`: every packet checked, then `expected`."""
    expected_path = tmp_path / (pathlib.Path(path).name + ".expected.json")
    expected_path.write_text(json.dumps(expected))
    run = subprocess.run([sys.executable, str(CHECK_TRACE), str(path), str(expected_path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all as expected" in run.stdout


def decode(path):
    trace = Trace()
    trace.ParseFromString(pathlib.Path(path).read_bytes())
    return trace


def slices_by_process(trace):
    """{process name: [(slice name, begin timestamp, end timestamp)]} in file order."""
    names, parent = {}, {}
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                names[d.uuid] = d.process.process_name
            else:
                parent[d.uuid] = d.parent_uuid
    out, open_ = {}, {}
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            open_.setdefault(e.track_uuid, []).append((e.name, p.timestamp))
        elif e.type == TrackEvent.TYPE_SLICE_END:
            name, begin = open_[e.track_uuid].pop()
            out.setdefault(names[parent[e.track_uuid]], []).append((name, begin, p.timestamp))
    return out


def test_the_file_name_chooses_the_format(tmp_path):
    needs_decoder()
    prof, reports = traced_reports()
    prof.write_trace(tmp_path / "t.json")
    chrome = json.loads((tmp_path / "t.json").read_text())
    assert sorted({e["name"] for e in chrome["traceEvents"] if e["ph"] == "X"}) == [
        "all_reduce", "attention", "step"]
    prof.write_trace(tmp_path / "t.pftrace")
    assert (tmp_path / "t.pftrace").read_bytes()[:1] != b"{"
    process = process_name(reports[0], None)
    check_trace(tmp_path / "t.pftrace", {
        "processes": [process],
        "tracks": {process: [f"stream {reports[0][0].stream_id}", "attention", "comm"]},
        "slice_counts": {"stream": {"step": 3}, "attention": {"attention": 3},
                         "comm": {"all_reduce": 3}},
        "infos": {process: {"rank": ["int", -1], "clock_calibrated": ["bool", False]}},
    }, tmp_path)
    # The module function writes any reports, e.g. those a sink kept.
    accgraph.write_trace(str(tmp_path / "first.pftrace"), reports[:1])
    assert sum(len(v) for v in slices_by_process(decode(tmp_path / "first.pftrace")).values()) == 3


def test_a_rank_and_clock_offsets_reach_the_trace(tmp_path):
    needs_decoder()
    prof, reports = traced_reports()
    clock = accgraph.ClockOffset("host", 0, offset_ns=-8000, uncertainty_ns=700)
    prof.write_trace(tmp_path / "rank1.pftrace", rank=1, world_size=2, host="node-a",
                     host_clock_uncertainty_ns=50, clocks=[clock])
    process = process_name(reports[0], 1)
    check_trace(tmp_path / "rank1.pftrace", {
        "processes": [process],
        "infos": {process: {"rank": ["int", 1], "world_size": ["int", 2],
                            "host": ["string", "node-a"], "backend": ["string", "host"],
                            "clock_calibrated": ["bool", True],
                            "clock_offset_ns": ["int", -8000],
                            "clock_uncertainty_ns": ["int", 700]}},
    }, tmp_path)
    # Metadata arrives as typed annotations: an integer stays one.
    trace = decode(tmp_path / "rank1.pftrace")
    step = next(p.track_event for p in trace.packet
                if p.HasField("track_event") and p.track_event.name == "step")
    layer = next(a for a in step.debug_annotations if a.name == "layer")
    assert layer.WhichOneof("value") == "int_value" and layer.int_value == 3
    # self_ns: the step minus its two lane children, as RegionTiming.self_ns has it.
    self_ns = {a.int_value for p in trace.packet
               if p.HasField("track_event") and p.track_event.name == "step"
               for a in p.track_event.debug_annotations if a.name == "self_ns"}
    assert self_ns == {r[0].self_ns for r in reports}


def test_merge_puts_the_ranks_on_one_clock(tmp_path):
    needs_decoder()
    _, reports = traced_reports()
    offsets = {0: (0, 100), 1: (5000, 300)}  # rank: (offset_ns, uncertainty_ns)
    paths = []
    for rank, (offset, uncertainty) in offsets.items():
        path = tmp_path / f"rank{rank}.pftrace"
        accgraph.write_trace(path, reports, rank=rank, world_size=2,
                             clocks=[accgraph.ClockOffset("host", 0, offset, uncertainty)])
        paths.append(path)
    summary = accgraph.merge_traces(list(reversed(paths)), tmp_path / "all.pftrace")
    assert summary.world_size == 2
    assert [r.rank for r in summary.ranks] == [0, 1]
    assert [r.clocks[0].offset_ns for r in summary.ranks] == [0, 5000]
    assert summary.ranks[1].path == str(paths[1])
    assert summary.alignment_uncertainty_ns == 100 + 300
    assert summary.warnings == []
    assert summary.to_dict()["ranks"][1]["clocks"][0]["offset_ns"] == 5000
    # Both ranks wrote the same device times: once merged, rank 1's events sit 5000 ns earlier.
    merged = slices_by_process(decode(tmp_path / "all.pftrace"))
    rank0, rank1 = (merged[process_name(reports[0], r)] for r in (0, 1))
    assert sorted(s[0] for s in rank0) == sorted(s[0] for s in rank1) and len(rank0) == 9
    assert sorted((n, b - 5000, e - 5000) for n, b, e in rank0) == sorted(rank1)
    original = slices_by_process(decode(paths[0]))[process_name(reports[0], 0)]
    assert sorted(original) == sorted(rank0)
    processes = [process_name(reports[0], r) for r in (0, 1)]
    check_trace(tmp_path / "all.pftrace", {"processes": processes}, tmp_path)


def test_merge_refuses_bad_inputs_and_writes_nothing(tmp_path):
    needs_perfetto()
    _, reports = traced_reports(replays=1)
    rank0 = tmp_path / "rank0.pftrace"
    accgraph.write_trace(rank0, reports, rank=0, world_size=2)
    out = tmp_path / "all.pftrace"
    with pytest.raises(accgraph.InvalidArgumentError, match="give each rank's trace once"):
        accgraph.merge_traces([rank0, rank0], out)
    assert not out.exists()
    unranked = tmp_path / "unranked.pftrace"
    accgraph.write_trace(unranked, reports)
    with pytest.raises(accgraph.InvalidArgumentError, match="unranked.pftrace"):
        accgraph.merge_traces([rank0, unranked], out)
    with pytest.raises(accgraph.InvalidArgumentError, match="not a Perfetto trace"):
        (tmp_path / "text.pftrace").write_text("hello")
        accgraph.merge_traces([tmp_path / "text.pftrace"], out)
    with pytest.raises(accgraph.InvalidArgumentError, match="cannot be read|cannot open|no such"):
        accgraph.merge_traces([tmp_path / "missing.pftrace"], out)
    before = rank0.read_bytes()
    with pytest.raises(accgraph.InvalidArgumentError, match="both an input and the output"):
        accgraph.merge_traces([rank0], rank0)
    assert rank0.read_bytes() == before
    with pytest.raises(accgraph.InvalidArgumentError, match="no input traces"):
        accgraph.merge_traces([], out)
    assert not out.exists()
    with pytest.raises(TypeError):
        accgraph.merge_traces([3], out)


def test_a_refused_write_leaves_the_existing_file_byte_for_byte(tmp_path):
    """Audit 2026-11-25 #24: the options are refused before the file is touched; a successful
    write replaces it; no temporary file is left behind."""
    needs_perfetto()
    prof, reports = traced_reports(replays=1)
    existing = tmp_path / "existing.pftrace"
    existing.write_bytes(b"k" * 800)
    with pytest.raises(accgraph.InvalidArgumentError, match="rank 5 with world_size 2"):
        prof.write_trace(existing, rank=5, world_size=2)
    with pytest.raises(accgraph.InvalidArgumentError, match="rank 5 with world_size 2"):
        accgraph.write_trace(existing, reports, rank=5, world_size=2)
    assert existing.read_bytes() == b"k" * 800
    chrome = tmp_path / "t.json"
    chrome.write_text("an earlier trace")
    with pytest.raises(accgraph.InvalidArgumentError, match=r"\*\.pftrace"):
        prof.write_trace(chrome, rank=0, world_size=1)
    assert chrome.read_text() == "an earlier trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.pftrace", "t.json"]
    prof.write_trace(existing, rank=1, world_size=2)
    assert existing.read_bytes()[:1] == b"\x0a"  # a Perfetto packet now
    prof.write_trace(chrome)
    assert "traceEvents" in chrome.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.pftrace", "t.json"]


def test_write_errors_are_os_errors_naming_the_file(tmp_path):
    prof, _ = traced_reports(replays=1)
    with pytest.raises(FileNotFoundError, match="no-such-dir") as missing:
        prof.write_csv(tmp_path / "no-such-dir" / "r.csv")
    assert missing.value.filename == str(tmp_path / "no-such-dir" / "r.csv")
    if os.path.exists("/dev/full"):
        with pytest.raises(OSError, match="No space left on device") as full:
            prof.write_trace("/dev/full")
        assert full.value.errno == 28 and full.value.filename == "/dev/full"
    # A symbolic link keeps working: the file it names is replaced, the link stays.
    real = tmp_path / "real.csv"
    real.write_text("old")
    (tmp_path / "link.csv").symlink_to("real.csv")
    prof.write_csv(tmp_path / "link.csv")
    assert (tmp_path / "link.csv").is_symlink() and "path" in real.read_text()


def test_merge_refuses_an_output_that_is_an_input_by_another_name(tmp_path, monkeypatch):
    """Audit 2026-11-25 #52: ./r0, an absolute path, a symbolic link, a hard link."""
    needs_perfetto()
    _, reports = traced_reports(replays=1)
    r0, r1 = tmp_path / "r0.pftrace", tmp_path / "r1.pftrace"
    accgraph.write_trace(r0, reports, rank=0, world_size=2)
    accgraph.write_trace(r1, reports, rank=1, world_size=2)
    before = (r0.read_bytes(), r1.read_bytes())
    (tmp_path / "link0.pftrace").symlink_to("r0.pftrace")
    os.link(r1, tmp_path / "hard1.pftrace")
    monkeypatch.chdir(tmp_path)
    for output in ("./r0.pftrace", str(r1), "link0.pftrace", tmp_path / "hard1.pftrace"):
        with pytest.raises(accgraph.InvalidArgumentError,
                           match="both an input and the output: it is the same file"):
            accgraph.merge_traces(["r0.pftrace", "r1.pftrace"], output)
        assert (r0.read_bytes(), r1.read_bytes()) == before
    summary = accgraph.merge_traces(["r0.pftrace", "r1.pftrace"], "all.pftrace")
    assert summary.world_size == 2 and (tmp_path / "all.pftrace").stat().st_size > 0


def test_write_trace_and_annotate_trace_agree_on_what_a_name_asks_for(tmp_path):
    # The library decides which name is which format (trace_format_for): a .perfetto-trace is a
    # native Perfetto trace for write_trace as it is for annotate_trace (write_trace wrote Chrome
    # JSON for it while annotate_trace wrote Perfetto: design review 2.5).
    from accgraph import _native

    assert [_native.trace_format(n) for n in ("a.pftrace", "a.perfetto-trace", "a.json",
                                              "a.speedscope.json", "a.json.gz", "pftrace")] == [
        "perfetto", "perfetto", "chrome", "speedscope", "chrome", "chrome"]
    prof, _ = traced_reports(replays=1)
    if not accgraph.perfetto_supported():
        with pytest.raises(accgraph.UnsupportedError, match="libprotobuf"):
            prof.write_trace(tmp_path / "t.perfetto-trace")
        return
    prof.write_trace(tmp_path / "t.perfetto-trace")
    assert (tmp_path / "t.perfetto-trace").read_bytes()[:1] != b"{"
    needs_decoder()
    assert sum(len(v) for v in slices_by_process(decode(tmp_path / "t.perfetto-trace")).values()) \
        == 3


def test_a_speedscope_name_writes_a_speedscope_profile(tmp_path):
    prof, reports = traced_reports(replays=2)
    prof.write_trace(tmp_path / "t.speedscope.json")
    doc = json.loads((tmp_path / "t.speedscope.json").read_text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = [f["name"] for f in doc["shared"]["frames"]]
    assert sorted(frames) == ["all_reduce", "attention", "step"]
    opened = [frames[e["frame"]] for p in doc["profiles"] for e in p["events"] if e["type"] == "O"]
    assert sorted(opened) == sorted(["step", "attention", "all_reduce"] * 2)
    with pytest.raises(accgraph.InvalidArgumentError, match=r"\*\.pftrace"):
        prof.write_trace(tmp_path / "u.speedscope.json", rank=0, world_size=1)


def test_rank_options_are_refused_for_chrome_json(tmp_path):
    prof, _ = traced_reports(replays=1)
    for options in ({"rank": 0, "world_size": 1}, {"host": "node-a"},
                    {"clocks": [accgraph.ClockOffset("host", 0, 1)]}):
        with pytest.raises(accgraph.InvalidArgumentError, match=r"\*\.pftrace"):
            prof.write_trace(tmp_path / "t.json", **options)
    assert not (tmp_path / "t.json").exists()
    with pytest.raises(OSError):
        prof.write_trace(tmp_path / "no-such-dir" / "t.json")


def test_an_inconsistent_rank_is_refused(tmp_path):
    needs_perfetto()
    prof, _ = traced_reports(replays=1)
    with pytest.raises(accgraph.InvalidArgumentError, match="rank"):
        prof.write_trace(tmp_path / "t.pftrace", rank=2, world_size=2)


def test_without_perfetto_support_the_calls_say_why(tmp_path):
    if accgraph.perfetto_supported():
        pytest.skip("this package has Perfetto support (the unsupported path is not reachable)")
    prof, _ = traced_reports(replays=1)
    with pytest.raises(accgraph.UnsupportedError, match="libprotobuf"):
        prof.write_trace(tmp_path / "t.pftrace")
    with pytest.raises(accgraph.UnsupportedError, match="libprotobuf"):
        accgraph.merge_traces([tmp_path / "a.pftrace"], tmp_path / "b.pftrace")
    prof.write_trace(tmp_path / "t.json")  # Chrome JSON needs nothing more


def test_estimate_clock_offset_takes_the_shortest_round_trip():
    samples = [(1000, 6000, 3000), (10_000, 14_100, 10_200), (20_000, 30_000, 29_000)]
    c = accgraph.estimate_clock_offset(samples, 32, backend="cuda", device=1)
    assert (c.backend, c.device) == ("cuda", 1)
    assert c.offset_ns == 14_100 - 10_100  # device minus the midpoint of the 200 ns sample
    assert c.uncertainty_ns == 100 + 32
    assert "offset 4000 ns" in repr(c)
    behind = accgraph.estimate_clock_offset([(5000, 1000, 5002)])
    assert behind.offset_ns == -4001 and behind.uncertainty_ns == 1
    with pytest.raises(accgraph.InvalidArgumentError, match="no samples"):
        accgraph.estimate_clock_offset([])
    with pytest.raises(accgraph.InvalidArgumentError, match="before"):
        accgraph.estimate_clock_offset([(10, 5, 9)])
    with pytest.raises(TypeError):
        accgraph.estimate_clock_offset([(1, 2)])


def test_calibrate_clock_on_host_is_steady_clock_minus_realtime():
    # The truth, bracketed here: CLOCK_MONOTONIC (the host markers' steady_clock) read between
    # two CLOCK_REALTIME reads.
    before = time.time_ns()
    monotonic = time.monotonic_ns()
    after = time.time_ns()
    c = accgraph.calibrate_clock(accgraph.Stream("host"), samples=50)
    assert (c.backend, c.device) == ("host", 0)
    low, high = monotonic - after, monotonic - before
    # The intervals overlap (1 us of slack for NTP slewing CLOCK_REALTIME in between).
    assert c.offset_ns + c.uncertainty_ns + 1000 >= low
    assert c.offset_ns - c.uncertainty_ns - 1000 <= high
    by_name = accgraph.calibrate_clock("host", 0, samples=10)
    assert abs(by_name.offset_ns - c.offset_ns) <= by_name.uncertainty_ns + c.uncertainty_ns + 1000


def test_calibrated_offsets_put_region_times_on_the_host_clock(tmp_path):
    stream = accgraph.Stream("host")
    clock = accgraph.calibrate_clock(stream)
    prof = accgraph.Profiler(keep_reports=10)
    before = time.time_ns()
    with prof.region(stream, "work"):
        stream.delay(0.001)
    prof.flush()
    after = time.time_ns()
    (region,) = prof.reports()[0]
    slack = clock.uncertainty_ns + 2
    assert region.start_ns - clock.offset_ns + slack >= before
    assert region.end_ns - clock.offset_ns - slack <= after


def test_calibrate_clock_refuses_bad_arguments():
    with pytest.raises(accgraph.InvalidArgumentError, match="0 samples"):
        accgraph.calibrate_clock("host", samples=0)
    with pytest.raises(accgraph.InvalidArgumentError, match="device 3 does not exist"):
        accgraph.calibrate_clock("host", 3)
    with pytest.raises(accgraph.InvalidArgumentError, match="nope"):
        accgraph.calibrate_clock("nope")
    with pytest.raises(TypeError):
        accgraph.calibrate_clock(3.5)


@pytest.mark.parametrize("name", ["level_zero"])
def test_calibrate_clock_is_unsupported_where_the_backend_cannot_sample(name):
    from conftest import require_backend
    require_backend(name)
    with pytest.raises(accgraph.UnsupportedError, match="does not implement accgraph::ClockSampling"):
        accgraph.calibrate_clock(name)


# --- merge_traces on hostile inputs: the 2026-11-28 audit's merge-traces rows (the program's
# `accgraph merge-traces` is this merge; scripts/audit/program_cases.py reruns them on it) ------


def one_rank(tmp_path, rank=0, world_size=1, name=None):
    _, reports = traced_reports(replays=2)
    path = tmp_path / (name or f"rank{rank}.pftrace")
    accgraph.write_trace(path, reports, rank=rank, world_size=world_size)
    return path


@pytest.mark.parametrize("what", ["random bytes", "a directory", "/dev/zero"])
def test_merge_refuses_an_input_that_is_no_trace_at_once(tmp_path, what):
    # audit 2026-11-28 E22 (100 KB of random bytes), E34 (a directory), E35 (/dev/zero: no
    # hang): each an InvalidArgumentError naming the input; nothing written.
    import random

    needs_perfetto()
    if what == "random bytes":
        bad = tmp_path / "random.pftrace"
        bad.write_bytes(random.Random(22).randbytes(100_000))
    elif what == "a directory":
        bad = tmp_path / "adir.pftrace"
        bad.mkdir()
    else:
        bad = pathlib.Path("/dev/zero")
        if not bad.exists():
            pytest.skip("no /dev/zero here")
    out = tmp_path / "out.pftrace"
    start = time.monotonic()
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=f"'{bad}': not a Perfetto trace: "):
        accgraph.merge_traces([bad], out)
    assert time.monotonic() - start < 30 and not out.exists()


def test_merge_of_bit_flipped_traces_merges_or_refuses(tmp_path):
    # audit 2026-11-28 E25: 40 copies of a trace with 8 random bit flips each: merged or an
    # InvalidArgumentError, never another error (or a crash, which would end this test run).
    import random

    needs_perfetto()
    raw = one_rank(tmp_path).read_bytes()
    rng = random.Random(25)
    outcomes = {"merged": 0, "refused": 0}
    for i in range(40):
        flipped = bytearray(raw)
        for _ in range(8):
            bit = rng.randrange(len(raw) * 8)
            flipped[bit // 8] ^= 1 << (bit % 8)
        path = tmp_path / f"flip{i}.pftrace"
        path.write_bytes(bytes(flipped))
        try:
            accgraph.merge_traces([path], tmp_path / f"out{i}.pftrace")
            outcomes["merged"] += 1
        except accgraph.InvalidArgumentError as e:
            assert f"flip{i}.pftrace" in str(e)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0, outcomes


def test_merge_refuses_one_file_given_twice_by_two_spellings(tmp_path):
    # audit 2026-11-28 E28: dir/./file and dir/file.
    needs_perfetto()
    path = one_rank(tmp_path, world_size=2)
    with pytest.raises(accgraph.InvalidArgumentError, match="give each rank's trace once"):
        accgraph.merge_traces([path, f"{tmp_path}/./{path.name}"], tmp_path / "out.pftrace")


def test_merge_keeps_an_existing_output_when_an_input_is_bad(tmp_path):
    # audit 2026-11-28 E31: the old output kept whole, no temporary left.
    needs_perfetto()
    good = one_rank(tmp_path, world_size=2)
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(b"\x0a\x05abc")
    out = tmp_path / "out.pftrace"
    out.write_bytes(b"an earlier merge\n" * 100)
    with pytest.raises(accgraph.InvalidArgumentError, match="bad.pftrace"):
        accgraph.merge_traces([good, bad], out)
    assert out.read_bytes() == b"an earlier merge\n" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.pftrace", "out.pftrace",
                                                           "rank0.pftrace"]


def test_merge_into_a_missing_directory(tmp_path):
    # audit 2026-11-28 E32: an OSError naming the output, before any input is read.
    needs_perfetto()
    out = tmp_path / "missing" / "out.pftrace"
    with pytest.raises(OSError, match=rf"cannot open '{out}'.* for writing: No such file or "
                                      r"directory") as raised:
        accgraph.merge_traces([one_rank(tmp_path)], out)
    assert raised.value.errno == 2
