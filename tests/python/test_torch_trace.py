"""accgraph.torch.annotate_trace: accgraph's regions laid over a torch.profiler (Kineto)
trace, aligned on accgraph's own marker kernels (Note [Trace replay matching]).

Everywhere: traces shaped like Kineto's, built here from real reports of the host backend (its
markers' times become the marker kernels' times, shifted by a clock offset the code does not
know). With the recorded fixture (tests/python/data/torch_trace.json.gz, written on a GPU by
tests/python/data/record_torch_trace.py): the real CUPTI trace. With torch and a GPU: a trace
recorded in the test. Those two check the issue's promise: every kernel of each timed replay
lies inside exactly one innermost region, and region edges are within 0.1 us of their marker
kernels."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import re
from collections import Counter
from decimal import Decimal

import pytest

import accgraph
import accgraph.torch

DATA = pathlib.Path(__file__).parent / "data"
FIXTURE_TRACE = DATA / "torch_trace.json.gz"
FIXTURE_REPORTS = DATA / "torch_trace_reports.csv"

RECORD = "void accgraph::detail::cuda::(anonymous namespace)::marker_record_kernel(unsigned long*)"
PROGRAMMATIC = ("void accgraph::detail::cuda::(anonymous namespace)::"
                "marker_record_programmatic_kernel(unsigned long*)")
END = ("void accgraph::detail::cuda::(anonymous namespace)::marker_end_kernel(unsigned long*, "
       "unsigned long, unsigned long const*, unsigned long*, unsigned long*, unsigned int, "
       "unsigned int, unsigned int)")
# The cuda backend's marker kernels, as its reports name them (ReplayReport.marker_kernels, from
# backends/cuda/kernels.cu: test_the_stand_in_marker_kernels_are_the_cuda_backends): the kernels
# the traces built here hold, and what the host backend's reports (whose markers are not
# kernels) and the CSVs (which hold no report source) stand in for.
MARKER_KERNELS = dict(record_at_start=["marker_record_kernel"],
                      record_at_end=["marker_record_programmatic_kernel",
                                     "marker_record_placed_kernel"],
                      end=["marker_end_kernel"])
PID, TID = 0, 7


def annotate_trace(*args, **kwargs):
    """accgraph.torch.annotate_trace, with the cuda backend's marker kernels for the reports that
    name none (the host backend's, a reports CSV)."""
    kwargs.setdefault("marker_kernels", accgraph.MarkerKernels(**MARKER_KERNELS))
    return accgraph.torch.annotate_trace(*args, **kwargs)
TRACE_START_NS = 3_000_000_017  # where the first marker lies on the trace's clock


# --- reports on the host backend ----------------------------------------------------------------


def timed_model(prof, stream, replays=6, gaps=True, blocks=2, scale=1.0):
    """A graph shaped like a module tree: nested regions (shared edges), glue between sibling
    modules, a lane. Between replays, eager delays of different lengths make the gaps between
    replays distinct (as a host's launch jitter does)."""
    g = accgraph.Graph(stream.backend)
    prof.attach(g)
    with g.capture(stream):
        with prof.region(stream, "model", cls="GPT"):
            for b in range(blocks):
                with prof.region(stream, f"h.{b}"):
                    with prof.region(stream, f"h.{b}.attn"):
                        stream.delay(20e-6 * scale)
                    stream.delay(10e-6 * scale)  # the residual add: in h.{b}'s own time
                    with prof.region(stream, f"h.{b}.mlp"):
                        stream.delay(20e-6 * scale)
            with prof.region(stream, "head", lane="side"):
                stream.delay(10e-6 * scale)
    for i in range(replays):
        g.replay()
        if gaps:
            stream.delay((1 + i % 5) * 7e-6)
    stream.synchronize()
    return g


@pytest.fixture
def host():
    return accgraph.Stream("host")


@pytest.fixture
def reports(host):
    prof = accgraph.Profiler()
    timed_model(prof, host)
    prof.flush()
    out = prof.reports()
    assert len(out) == 6
    return out



def leaf_slices(got):
    """The region slices of `got` with no region slice of theirs inside them."""
    paths = {s["args"]["accgraph_path"] for s in got}
    return [s for s in got
            if not any(p.startswith(s["args"]["accgraph_path"] + "/") for p in paths)]

def test_the_stand_in_marker_kernels_are_the_cuda_backends():
    # The cuda backend names them itself (device_timestamp_marker_kernels in kernels.cu, from
    # the kernels' own symbols); the stand-ins of these tests must be those kernels.
    source = pathlib.Path(__file__).resolve().parents[2] / "backends" / "cuda" / "kernels.cu"
    if not source.exists():
        pytest.skip(f"{source} is not here (tests run outside the source tree)")
    kernels_cu = source.read_text()
    for kind, names in MARKER_KERNELS.items():
        for name in names:
            assert re.search(r"__global__ void " + name + r"\(", kernels_cu), name
            assert f"ACCGRAPH_KERNEL_NAME({name})" in kernels_cu, (kind, name)


def test_the_csv_reader_reads_columns_of_the_writers_schema(tmp_path, host):
    # The reports CSV's header is declared once, in C++ (reports_csv_columns()); the reader
    # finds by name the columns it reads, each one of those.
    from accgraph.torch._trace import _sources

    prof = accgraph.Profiler()
    timed_model(prof, host, replays=1)
    prof.flush()
    prof.write_csv(tmp_path / "reports.csv")
    header = (tmp_path / "reports.csv").read_text().splitlines()[0].split(",")
    assert header == accgraph.reports_csv_columns()
    assert set(_sources.CSV_NEEDED + _sources.CSV_OPTIONAL) <= set(header)
    edited = tmp_path / "edited.csv"
    edited.write_text((tmp_path / "reports.csv").read_text().replace("start_ns", "begin_ns", 1))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"is not accgraph's reports CSV \(it lacks the columns \['start_ns'\] "
                             r"of graph_id,replay_index,backend,"):
        annotate_trace(tmp_path / "trace.json", tmp_path / "out.json", edited)


def test_reports_whose_markers_are_not_kernels_are_refused(tmp_path, reports):
    # The host backend's markers read steady_clock: its reports name no marker kernels.
    assert not reports[0].marker_kernels
    assert reports[0].marker_kernels.record_at_start == []
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(kineto_trace(reports)))
    with pytest.raises(accgraph.UnsupportedError,
                       match=r"annotate_trace: graph \d+ was timed with the 'steady_clock' markers "
                             r"of the host backend, which are not kernels \(its reports name no "
                             r"marker kernels: ReplayReport.marker_kernels\)"):
        accgraph.torch.annotate_trace(src, tmp_path / "out.json", reports)


def test_a_reports_csv_needs_the_marker_kernels(tmp_path, host):
    prof = accgraph.Profiler()
    timed_model(prof, host)
    prof.flush()
    prof.write_csv(tmp_path / "reports.csv")
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(kineto_trace(prof.reports())))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"the reports CSV '.*reports.csv' does not say which kernels its "
                             r"markers are \(its marker_kernels column is missing or empty: .*\): "
                             r"pass marker_kernels="):
        accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "reports.csv")
    kernels = accgraph.MarkerKernels(**MARKER_KERNELS)
    assert kernels.end == ["marker_end_kernel"] and bool(kernels)
    summary = accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "reports.csv",
                                            marker_kernels=kernels)
    assert summary["replays"] == len(prof.reports())


# Issue 44 item 5: a reports CSV carries its reports' marker kernels (the marker_kernels column),
# so a GPU run's CSV is annotated without marker_kernels=. The host backend's CSV has the column
# empty; here it is filled as the cuda backend's reports fill it.
def test_a_reports_csv_carries_its_marker_kernels(tmp_path, host):
    import csv as csv_module

    prof = accgraph.Profiler()
    timed_model(prof, host)
    prof.flush()
    prof.write_csv(tmp_path / "reports.csv")
    with open(tmp_path / "reports.csv", newline="") as f:
        rows = list(csv_module.DictReader(f))
    assert "marker_kernels" in rows[0] and rows[0]["marker_kernels"] == ""
    cuda = ("record_at_start=marker_record_kernel;record_at_end=marker_record_programmatic_kernel|"
            "marker_record_placed_kernel;end=marker_end_kernel")
    with open(tmp_path / "gpu.csv", "w", newline="") as f:
        writer = csv_module.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow(dict(row, marker_kernels=cuda))
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(kineto_trace(prof.reports())))
    summary = accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "gpu.csv")
    assert summary["replays"] == len(prof.reports())
    rows[0]["marker_kernels"] = "marker_record_kernel"  # damaged: no kind
    with open(tmp_path / "bad.csv", "w", newline="") as f:
        writer = csv_module.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"bad.csv.*its marker_kernels 'marker_record_kernel' is not "
                             r"record_at_start=A\|B;record_at_end=C;end=D"):
        accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "bad.csv")


# Audit T03-T05: marker_kernels of another type is named (its to_dict() is taken); T06: an
# empty MarkerKernels is not "pass marker_kernels=", which was passed.
@pytest.mark.parametrize("value, shown", [
    ("marker_record_kernel", r"not str \('marker_record_kernel'\)"),
    (["marker_record_kernel", "marker_end_kernel"], r"not list \(\['marker_record_kernel'"),
    ({"kernels": ["x"]}, r"not dict \(\{'kernels'"),
    (5, r"not int \(5\)")])
def test_marker_kernels_of_another_type_is_named(tmp_path, host, value, shown):
    prof = accgraph.Profiler()
    timed_model(prof, host)
    prof.flush()
    prof.write_csv(tmp_path / "reports.csv")
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(kineto_trace(prof.reports())))
    with pytest.raises(TypeError, match=r"annotate_trace: marker_kernels must be an "
                                        r"accgraph.MarkerKernels \(or a dict of its fields\), "
                       + shown):
        accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "reports.csv",
                                      marker_kernels=value)
    assert not (tmp_path / "out.json").exists()


def test_marker_kernels_as_its_dict_is_taken(tmp_path, host):
    prof = accgraph.Profiler()
    timed_model(prof, host)
    prof.flush()
    prof.write_csv(tmp_path / "reports.csv")
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(kineto_trace(prof.reports())))
    as_dict = dict(MARKER_KERNELS)  # as ReplayReport.to_dict()["marker_kernels"] gives it
    summary = accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "reports.csv",
                                            marker_kernels=as_dict)
    assert summary["replays"] == len(prof.reports())


def test_an_empty_marker_kernels_is_named_as_naming_no_kernel(tmp_path, host):
    prof = accgraph.Profiler()
    timed_model(prof, host)
    prof.flush()
    prof.write_csv(tmp_path / "reports.csv")
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(kineto_trace(prof.reports())))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"the given marker_kernels names no kernel \(.*\), so the markers "
                             r"of the reports CSV '.*reports.csv' cannot be found"):
        accgraph.torch.annotate_trace(src, tmp_path / "out.json", tmp_path / "reports.csv",
                                      marker_kernels=accgraph.MarkerKernels())


def test_regions_name_their_markers(host):
    prof = accgraph.Profiler()
    g = accgraph.Graph("host")
    prof.attach(g)
    with g.capture(host):
        with prof.region(host, "a"):
            with prof.region(host, "b"):
                host.delay(1e-5)
            with prof.region(host, "c"):
                host.delay(1e-5)
    g.replay()
    prof.flush()
    a, b, c = prof.reports()[0]
    if not hasattr(a, "begin_marker"):
        pytest.skip("the extension predates RegionTiming.begin_marker")
    assert b.end_marker == c.begin_marker  # adjacent siblings share a marker
    times = {}
    for t in (a, b, c):
        for marker, time in ((t.begin_marker, t.raw_start_ns), (t.end_marker, t.raw_end_ns)):
            assert times.setdefault(marker, time) == time
    assert sorted(times) == list(range(len(times)))


# --- a Kineto-shaped trace built from reports ---------------------------------------------------


def marker_times(report):
    """Marker index -> time, from the regions (what the layout holds)."""
    if hasattr(report[0], "begin_marker"):
        times = {}
        for t in report:  # what the markers wrote (start_ns/end_ns have the overhead off)
            times[t.begin_marker] = t.raw_start_ns
            times[t.end_marker] = t.raw_end_ns
        return [times[i] for i in sorted(times)]
    return sorted({x for t in report for x in (t.start_ns, t.end_ns)})


def us(ns):
    """Kineto's microseconds with three decimals; as text (through dumps()) when a double
    cannot hold them."""
    return round(ns / 1000, 3) if abs(ns) < 2**50 else f"@{ns // 1000}.{ns % 1000:03d}@"


def dumps(trace):
    return re.sub(r'"@([0-9.]+)@"', r"\1", json.dumps(trace))


def kernel(name, start_ns, dur_ns, correlation=None, tid=TID):
    args = {"device": PID, "stream": tid}
    if correlation is not None:
        args["correlation"] = correlation
    return {"ph": "X", "cat": "kernel", "name": name, "pid": PID, "tid": tid,
            "ts": us(start_ns), "dur": us(dur_ns), "args": args}


def offset_of(trace):
    """The trace's clock minus the markers' (the code is not told it)."""
    return trace["test_offset_ns"]


def kineto_trace(reports, programmatic=False, correlation=True, foreign=True,
                 start_ns=TRACE_START_NS, rows=(TID,)):
    """What Kineto exports for these replays: per replay, a record kernel per marker (times in
    the trace's clock, the first at `start_ns`), a work kernel between consecutive markers, the
    end kernel; the kernels of one replay share the graph launch's correlation id
    (`correlation` True; "each": every kernel its own, as eager launches have; False: none).
    `rows`: the stream rows the replay's kernels take in turn (a graph's branches on several
    streams). `foreign`: a kernel of other work between replays."""
    offset = start_ns - marker_times(reports[0])[0]
    events = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": TID,
         "args": {"sort_index": TID}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1234, "tid": 1234,
         "ts": us(start_ns), "dur": 5.0, "args": {}},
    ]
    ids = iter(range(10_000, 10**9))
    for n, report in enumerate(reports):
        corr = 1000 + n if correlation is True else None
        times = [t + offset for t in marker_times(report)]
        mine = []
        for i, t in enumerate(times):
            if programmatic:  # starts early, stores just before it ends
                mine.append(kernel(PROGRAMMATIC, t - 1500, 1500, corr))
            else:
                mine.append(kernel(RECORD, t, 300, corr))
            if i + 1 < len(times) and times[i + 1] - t > 2000:
                mine.append(kernel(f"work_{n}_{i}", t + 500, times[i + 1] - t - 1000, corr))
                if i == 0:  # a graph's fill node: labelled as kernels are
                    mine[-1]["cat"] = "gpu_memset"
        # A record kernel and the work after it take one row, the next pair the next row, so
        # both kernel kinds land on every row whatever markers the regions share.
        for i, e in enumerate(mine):
            e["tid"] = e["args"]["stream"] = rows[(i // 2) % len(rows)]
        mine.append(kernel(END, times[-1] + 400, 1200, corr))
        for e in mine:
            if correlation == "each":
                e["args"]["correlation"] = next(ids)
        events.extend(mine)
        if foreign:
            events.append(kernel("elementwise_kernel", times[-1] + 2000, 500, 5000 + n))
    return {"schemaVersion": 1, "traceEvents": events, "test_offset_ns": offset}


def load(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def slices(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "gpu_user_annotation"]


def kernels(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset")]


def innermost(report, start, end):
    """The deepest region of `report` whose times contain [start, end] (the oracle: the
    report's own times, no markers)."""
    inside = [t for t in report if t.start_ns <= start and end <= t.end_ns]
    return max(inside, key=lambda t: t.depth).path if inside else ""


# --- the synthetic traces -----------------------------------------------------------------------


@pytest.mark.parametrize("programmatic", [False, True])
def test_regions_lie_on_their_marker_kernels(tmp_path, reports, programmatic):
    src = tmp_path / "trace.json"
    built = kineto_trace(reports, programmatic=programmatic)
    src.write_text(dumps(built))
    out = tmp_path / "annotated.json"
    summary = annotate_trace(src, out, reports)
    assert summary["replays"] == 6 and summary["unmatched_replays"] == 0
    trace = load(out)
    got = slices(trace)
    assert len(got) == sum(len(r) for r in reports) == summary["regions"]
    by_key = {(s["args"]["replay_index"], s["args"]["accgraph_path"]): s for s in got}
    for r in reports:
        for t in r:
            s = by_key[(r.replay_index, t.path)]
            # The edges are the marker kernels' stores: the report's times on the trace's clock.
            assert round(s["ts"] * 1000) == t.start_ns + offset_of(built)
            assert abs(s["dur"] * 1000 - t.span_ns) <= 1  # the slice: its edges
            assert s["name"] == t.name and s["args"]["graph_id"] == r.graph_id
            assert s["args"]["duration_ns"] == t.duration_ns
    assert by_key[(0, "model")]["args"]["cls"] == "GPT"
    # One row per (lane, depth), each named, none of them the stream's own row.
    rows = {(s["args"]["lane"], s["args"]["accgraph_path"].count("/")): s["tid"] for s in got}
    assert len(set(rows.values())) == len(rows) == 4  # model, h.b, h.b.x, and the side lane
    assert TID not in rows.values()
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("name") == "thread_name"}
    assert all("accgraph" in names[tid] for tid in rows.values())


def test_every_kernel_gets_its_innermost_region(tmp_path, reports):
    src = tmp_path / "trace.json"
    built = kineto_trace(reports)
    src.write_text(dumps(built))
    out = tmp_path / "annotated.json"
    summary = annotate_trace(src, out, reports)
    by_replay = {f"{r.graph_id}:{r.replay_index}": r for r in reports}
    work = [k for k in kernels(load(out)) if k["name"].startswith("work_")]
    assert len(work) == summary["kernels_labelled"] > 6 * 5
    seen = set()
    for k in work:
        r = by_replay[k["args"]["accgraph_replay"]]
        start = round(k["ts"] * 1000) - offset_of(built)
        end = start + round(k["dur"] * 1000)
        assert k["args"]["accgraph_region"] == innermost(r, start, end), k["name"]
        seen.add(k["args"]["accgraph_region"])
    assert {"h.0", "h.0/h.0.attn", "h.1/h.1.mlp"} <= {p.split("model/")[-1] for p in seen}
    assert any(p.endswith("model/h.0") for p in seen)  # the glue lands in the parent
    marks = [k for k in kernels(load(out)) if "accgraph" in k["name"]]
    assert all("accgraph_marker" in k["args"] for k in marks)
    assert {k["args"]["accgraph_marker"] for k in marks if END in k["name"]} == {"end"}
    # Other work is left as it was.
    foreign = [k for k in kernels(load(out)) if k["name"] == "elementwise_kernel"]
    assert foreign and all(set(k["args"]) == {"device", "stream", "correlation"} for k in foreign)


@pytest.mark.parametrize("correlation", [True, False])
def test_a_trace_of_some_replays_finds_which(tmp_path, reports, correlation):
    # The profiler kept replays 0-5, the trace saw 2-4: the gaps between replays say which.
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports[2:5], correlation=correlation)))
    out = tmp_path / "annotated.json"
    assert annotate_trace(src, out, reports)["replays"] == 3
    indices = {s["args"]["replay_index"] for s in slices(load(out))}
    assert indices == {2, 3, 4}
    # A region with no region inside it: its slice is its duration (a parent's also holds the
    # marker transitions between its children, Note [Marker transitions]).
    assert all(abs(s["dur"] * 1000 - s["args"]["duration_ns"]) <= 1
               for s in leaf_slices(slices(load(out))))
    for k in kernels(load(out)):
        if k["name"].startswith("work_"):
            n = int(k["name"].split("_")[1])
            assert k["args"]["accgraph_replay"] == f"{reports[0].graph_id}:{n + 2}"


def test_a_graph_on_several_streams(tmp_path, reports):
    # CUDA runs a graph's branches on streams of its choosing: the launch's correlation id
    # still gathers the replay.
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports, rows=(TID, 13))))
    out = tmp_path / "annotated.json"
    summary = annotate_trace(src, out, reports)
    assert (summary["replays"], summary["regions"]) == (6, 6 * len(reports[0]))
    work = [k for k in kernels(load(out)) if k["name"].startswith("work_")]
    assert {k["tid"] for k in work} == {TID, 13}
    assert all(k["args"]["accgraph_region"] for k in work)


def test_eager_region_trees(tmp_path, host):
    prof = accgraph.Profiler()
    for i in range(4):
        with prof.region(host, "step"):
            with prof.region(host, "forward"):
                host.delay(20e-6)
            host.delay(5e-6 * (1 + i))
            with prof.region(host, "backward"):
                host.delay(30e-6)
        host.synchronize()
    prof.flush()
    reports = prof.reports()
    assert [r.graph_id for r in reports] == [0] * 4
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports[1:], correlation="each")))
    out = tmp_path / "annotated.json"
    assert annotate_trace(src, out, reports)["replays"] == 3
    got = slices(load(out))
    assert sorted({s["args"]["replay_index"] for s in got}) == \
        [r.replay_index for r in reports[1:]]
    # Each slice paired with its own tree's report: the trace's span is the report's duration
    # (steps differ by 5 us from one to the next).
    assert all(abs(s["dur"] * 1000 - s["args"]["duration_ns"]) <= 1 for s in leaf_slices(got))


def test_a_report_missing_for_a_traced_replay(tmp_path, reports):
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports)))
    out = tmp_path / "annotated.json"
    kept = reports[:2] + reports[3:]
    summary = annotate_trace(src, out, kept)
    assert (summary["replays"], summary["unmatched_replays"]) == (5, 1)
    assert {s["args"]["replay_index"] for s in slices(load(out))} == {0, 1, 3, 4, 5}


@pytest.mark.parametrize("blocks, scale", [(3, 1.0), (1, 3.0)])
def test_two_graphs_each_get_their_own_replays(tmp_path, host, blocks, scale):
    # b has more markers than a, or as many with other gaps.
    prof = accgraph.Profiler()
    a = timed_model(prof, host, replays=3, blocks=1)
    b = timed_model(prof, host, replays=3, blocks=blocks, scale=scale)
    prof.flush()
    reports = prof.reports()
    src = tmp_path / "trace.json"
    trace = kineto_trace(reports)
    src.write_text(json.dumps(trace))
    out = tmp_path / "annotated.json"
    assert annotate_trace(src, out, list(reversed(reports)))["replays"] == 6
    got = slices(load(out))
    assert sum(s["args"]["graph_id"] == a.id for s in got) == 3 * len(reports[0])
    assert sum(s["args"]["graph_id"] == b.id for s in got) == 3 * len(reports[-1])
    for s in got:  # each slice lasts as long as its own graph's region did
        report = next(r for r in reports if (r.graph_id, r.replay_index) ==
                      (s["args"]["graph_id"], s["args"]["replay_index"]))
        region = next(t for t in report if t.path == s["args"]["accgraph_path"])
        assert abs(s["dur"] * 1000 - region.span_ns) <= 1


def test_absolute_microseconds_keep_their_nanoseconds(tmp_path, reports):
    # Microseconds since the epoch with three decimals: more digits than a double holds.
    start = 1_764_000_000_000_000_123
    built = kineto_trace(reports, start_ns=start)
    src = tmp_path / "trace.json"
    src.write_text(dumps(built))
    assert "1764000000000000.123" in src.read_text()
    annotate_trace(src, tmp_path / "annotated.json", reports)
    text = (tmp_path / "annotated.json").read_text()
    model = [s for s in slices(json.loads(text, parse_float=str))
             if s["args"]["accgraph_path"] == "model" and s["args"]["replay_index"] == 0]
    # The slice starts where the first marker wrote, moved in by the overhead taken off there.
    first = next(t for t in reports[0] if t.path == "model")
    assert first.raw_start_ns == marker_times(reports[0])[0]
    ts = start + first.start_ns - first.raw_start_ns
    assert model[0]["ts"] == f"{ts // 1000}.{ts % 1000:03d}"


def test_gzip_in_and_out_and_a_dict(tmp_path, reports):
    trace = kineto_trace(reports)
    src = tmp_path / "trace.json.gz"
    with gzip.open(src, "wt") as f:
        json.dump(trace, f)
    out = tmp_path / "annotated.json.gz"
    annotate_trace(src, out, reports)
    from_file = load(out)
    annotate_trace(trace, tmp_path / "from_dict.json", reports)
    assert load(tmp_path / "from_dict.json") == from_file
    assert "accgraph_region" not in json.dumps(trace)  # the caller's dict is left alone


def test_the_reports_csv_gives_the_same_slices(tmp_path, host):
    prof = accgraph.Profiler()
    timed_model(prof, host, replays=4)
    prof.flush()
    reports = prof.reports()
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports)))
    prof.write_csv(tmp_path / "reports.csv")
    annotate_trace(src, tmp_path / "from_csv.json", tmp_path / "reports.csv")
    annotate_trace(src, tmp_path / "from_profiler.json", prof)

    def key(trace):
        return sorted((s["args"]["replay_index"], s["args"]["accgraph_path"], s["ts"], s["dur"])
                      for s in slices(trace))

    assert key(load(tmp_path / "from_csv.json")) == key(load(tmp_path / "from_profiler.json"))
    assert len(key(load(tmp_path / "from_csv.json"))) == 4 * len(reports[0])


# --- errors -------------------------------------------------------------------------------------


def test_a_trace_without_marker_kernels(tmp_path, reports):
    # audit 2026-11-28 A17: a trace of another program (no marker kernels).
    trace = kineto_trace(reports)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if "accgraph" not in e.get("name", "")]
    with pytest.raises(accgraph.InvalidArgumentError, match="no accgraph marker kernels"):
        annotate_trace(trace, tmp_path / "out.json", reports)
    assert not (tmp_path / "out.json").exists()


def test_reports_of_another_graph(tmp_path, host, reports):
    prof = accgraph.Profiler()
    timed_model(prof, host, replays=2, blocks=3)
    prof.flush()
    with pytest.raises(accgraph.InvalidArgumentError, match=r"markers each"):
        annotate_trace(kineto_trace(reports), tmp_path / "out.json", prof)


def test_gaps_that_disagree(tmp_path, reports):
    trace = kineto_trace(reports)
    for e in trace["traceEvents"]:  # the trace's clock runs twice as fast as the markers'
        if e.get("cat") == "kernel":
            e["ts"] = round(2 * e["ts"] - TRACE_START_NS / 1000, 3)
    with pytest.raises(accgraph.InvalidArgumentError, match="agrees with a report"):
        annotate_trace(trace, tmp_path / "out.json", reports)


def test_no_reports(tmp_path, host, reports):
    # audit 2026-11-28 A44: Profiler(keep_reports=0) says it keeps none.
    prof = accgraph.Profiler(keep_reports=0)
    timed_model(prof, host, replays=2)
    prof.flush()
    with pytest.raises(accgraph.InvalidArgumentError, match="keep_reports"):
        annotate_trace(kineto_trace(reports), tmp_path / "out.json", prof)
    with pytest.raises(accgraph.InvalidArgumentError, match="no reports"):
        annotate_trace(kineto_trace(reports), tmp_path / "out.json", [])
    with pytest.raises(TypeError, match="profiler_or_reports"):
        annotate_trace(kineto_trace(reports), tmp_path / "out.json", 42)


def test_outputs_it_does_not_write(tmp_path, reports, monkeypatch):
    # audit 2026-11-28 A23 (output out.txt) and A02 (a JSON trace cut in half).
    with pytest.raises(accgraph.InvalidArgumentError, match=r"\.json or \.json\.gz"):
        annotate_trace(kineto_trace(reports), tmp_path / "out.txt", reports)
    # The library names the format (trace_format_for): a speedscope name is not a trace of
    # events, and a gzip Perfetto name is no name of either.
    for name in ("out.speedscope.json", "out.pftrace.gz"):
        with pytest.raises(accgraph.InvalidArgumentError, match=r"\.pftrace or \.perfetto-trace"):
            annotate_trace(kineto_trace(reports), tmp_path / name, reports)
    text = dumps(kineto_trace(reports))
    (tmp_path / "half.json").write_text(text[: len(text) // 2])
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"'.*half.json' is not Chrome trace JSON \(.+\): pass the file "
                             r"torch.profiler's export_chrome_trace wrote"):
        annotate_trace(tmp_path / "half.json", tmp_path / "out.json", reports)
    with pytest.raises(accgraph.InvalidArgumentError, match="not Chrome trace JSON"):
        (tmp_path / "bad.json").write_text("{")
        annotate_trace(tmp_path / "bad.json", tmp_path / "out.json", reports)
    # A package built without accgraph::perfetto says so, and writes nothing.
    monkeypatch.setattr(accgraph._accgraph, "perfetto_supported", lambda: False)
    for name in ("out.pftrace", "out.perfetto-trace"):
        with pytest.raises(accgraph.UnsupportedError, match="built without Perfetto support"):
            annotate_trace(kineto_trace(reports), tmp_path / name, reports)
        assert not (tmp_path / name).exists()


# --- .pftrace output, read back with the perfetto package's own protos ---------------------------


def needs_pftrace():
    """The .pftrace tests decode with the perfetto package (as tests/python/test_perfetto.py
    does): skipped without it or without accgraph::perfetto, unless required."""
    if not accgraph.perfetto_supported():
        pytest.skip("this accgraph package was built without libprotobuf (no .pftrace support)")
    try:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    except ImportError as error:
        if os.environ.get("ACCGRAPH_TEST_REQUIRE_PERFETTO") == "1":
            pytest.fail(f"ACCGRAPH_TEST_REQUIRE_PERFETTO=1 but the perfetto package cannot be "
                        f"imported ({error})")
        pytest.skip(f"the perfetto package cannot be imported ({error}): pip install perfetto")
    return Trace


def annotation_value(a):
    if a.array_values:
        return [annotation_value(v) for v in a.array_values]
    kind = a.WhichOneof("value")
    return getattr(a, kind) if kind else None


def decode_pftrace(path):
    """The slices of a .pftrace as (name, category, start_ns, end_ns, args, track), each from
    its begin and end packets on one track (which must nest), and the track descriptors."""
    Trace = needs_pftrace()
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

    trace = Trace()
    trace.ParseFromString(pathlib.Path(path).read_bytes())
    tracks, open_, done = {}, {}, []
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
            continue
        e = p.track_event
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            args = {a.name: annotation_value(a) for a in e.debug_annotations}
            open_.setdefault(e.track_uuid, []).append(
                [e.name, tuple(e.categories), p.timestamp, None, args, e.track_uuid])
        elif e.type == TrackEvent.TYPE_SLICE_END:
            begun = open_[e.track_uuid].pop()
            begun[3] = p.timestamp
            done.append(tuple(begun))
    assert not any(open_.values())
    return done, tracks


def exact_ns(text):
    return int(Decimal(text) * 1000)


def json_slices(path):
    """The 'X' events of a Chrome JSON output, times in exact ns (read as text)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f, parse_float=str)
    out = []
    for e in trace["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "X":
            start = exact_ns(e["ts"])
            out.append((e["name"], e.get("cat", ""), start, start + exact_ns(e.get("dur", "0")),
                        e.get("args", {})))
    return out


def check_pftrace_matches_json(pftrace, json_path):
    """Every slice of the JSON output is in the .pftrace with the same ns times; each annotated
    slice with its path, each kernel of a timed replay with its accgraph_region."""
    got, tracks = decode_pftrace(pftrace)
    want = json_slices(json_path)
    assert Counter((n, (c,) if c else (), s, e) for n, c, s, e, _ in want) == \
        Counter(g[:4] for g in got)
    annotated = Counter((n, s, e, a["accgraph_path"], a["replay_index"])
                        for n, c, s, e, a in want if c == "gpu_user_annotation")
    assert annotated
    assert annotated == Counter((n, s, e, a["accgraph_path"], a["replay_index"])
                                for n, c, s, e, a, _ in got if c == ("gpu_user_annotation",))
    labelled = Counter((n, s, e, a["accgraph_region"]) for n, c, s, e, a in want
                       if "accgraph_region" in a)
    assert labelled
    assert labelled == Counter((n, s, e, a["accgraph_region"]) for n, c, s, e, a, _ in got
                               if "accgraph_region" in a)
    return got, tracks


def test_pftrace_holds_the_json_outputs_slices_to_the_ns(tmp_path, reports):
    needs_pftrace()
    start = 1_764_000_000_000_000_123  # microseconds since the epoch: more than a double holds
    built = kineto_trace(reports, start_ns=start)
    src = tmp_path / "trace.json"
    src.write_text(dumps(built))
    json_summary = annotate_trace(src, tmp_path / "annotated.json", reports)
    summary = annotate_trace(src, tmp_path / "annotated.pftrace", reports)
    assert summary == json_summary
    got, tracks = check_pftrace_matches_json(tmp_path / "annotated.pftrace",
                                             tmp_path / "annotated.json")
    model = [g for g in got if g[4].get("accgraph_path") == "model" and
             g[4]["replay_index"] == 0]
    first = next(t for t in reports[0] if t.path == "model")
    assert model[0][2] == start + first.start_ns - first.raw_start_ns  # moved in by the overhead
    # The rows as the JSON names them: the stream's, and accgraph's rows under it.
    names = {tracks[g[5]].name for g in got}
    assert "accgraph regions depth 0 (stream 7)" in names
    assert "accgraph side depth 1 (stream 7)" in names


@pytest.mark.skipif(not (FIXTURE_TRACE.exists() and FIXTURE_REPORTS.exists()),
                    reason="the recorded fixture is not there yet: run "
                           "tests/python/data/record_torch_trace.py on a GPU")
def test_pftrace_of_the_recorded_torch_profiler_trace(tmp_path):
    # audit 2026-11-28 A26: .pftrace output written.
    needs_pftrace()
    json_summary = annotate_trace(FIXTURE_TRACE, tmp_path / "annotated.json", FIXTURE_REPORTS)
    summary = annotate_trace(FIXTURE_TRACE, tmp_path / "annotated.pftrace", FIXTURE_REPORTS)
    assert summary == json_summary
    got, tracks = check_pftrace_matches_json(tmp_path / "annotated.pftrace",
                                             tmp_path / "annotated.json")
    # Programmatic marker kernels start while the kernel before them runs: a stream row whose
    # slices overlap without nesting, which shows on backing tracks of one merge key.
    by_row = {}
    for g in got:
        by_row.setdefault(tracks[g[5]].sibling_merge_key, set()).add(g[5])
    assert any(len(uuids) > 1 for uuids in by_row.values())
    processes = [t for t in tracks.values() if t.HasField("process")]
    gpu = [t for t in processes if t.process.pid == PID]
    assert gpu and gpu[0].process.process_labels == ["GPU 0"]
    assert gpu[0].process.legacy_sort_index == 5000000


# --- real CUPTI traces: the recorded fixture, and one recorded here on a GPU ----------------------


def check_annotated(trace, summary, tolerance_ns=100):
    """The issue's promise on a real trace, checked from the slices' times (not from the labels
    annotate_trace gave): region edges are within 0.1 us of a marker kernel of their replay;
    every other kernel of each timed replay lies inside exactly one innermost region, which is
    its label: it ends inside that region and starts no earlier than the region's begin marker
    kernel (a kernel launched as a programmatic dependent may start while the marker runs)."""
    assert summary["replays"] > 0
    regions = {}  # replay -> [(start, end, depth, path)]
    for s in slices(trace):
        replay = f"{s['args']['graph_id']}:{s['args']['replay_index']}"
        start = round(s["ts"] * 1000)
        end = start + round(s["dur"] * 1000)
        # A slice moved in by the marker overhead (half at each edge, RegionTiming's rule)
        # says how far apart its markers were: its edges on the marker kernels are those.
        taken = s["args"].get("raw_duration_ns", s["args"]["duration_ns"]) - \
            s["args"]["duration_ns"]
        start, end = start - taken // 2, end + (taken - taken // 2)
        regions.setdefault(replay, []).append(
            (start, end, s["args"]["accgraph_path"].count("/"), s["args"]["accgraph_path"]))
    marks = {}  # replay -> [(start, end)] of its marker kernels
    work = {}
    for k in kernels(trace):
        replay = k.get("args", {}).get("accgraph_replay")
        if replay is None:
            continue
        start = round(k["ts"] * 1000)
        end = start + round(k["dur"] * 1000)
        if "accgraph_marker" in k["args"]:
            marks.setdefault(replay, []).append((start, end))
        else:
            work.setdefault(replay, []).append((start, end, k["args"]["accgraph_region"]))
    assert set(regions) == set(work) and len(regions) == summary["replays"]
    for replay, spans in regions.items():

        def marker_at(edge):
            near = [m for m in marks[replay]
                    if min(abs(edge - m[0]), abs(edge - m[1])) <= tolerance_ns]
            assert near, (replay, edge)
            return near[0]

        for start, end, _, path in spans:
            marker_at(start)
            marker_at(end)
        for start, end, label in work[replay]:
            inside = [s for s in spans if s[0] < end <= s[1]]
            assert inside, (replay, start, end, label)
            deepest = max(s[2] for s in inside)
            innermost_ = [s for s in inside if s[2] == deepest]
            assert len(innermost_) == 1, (replay, start, innermost_)
            assert innermost_[0][3] == label
            assert start >= marker_at(innermost_[0][0])[0], (replay, start, label)


@pytest.mark.skipif(not (FIXTURE_TRACE.exists() and FIXTURE_REPORTS.exists()),
                    reason="the recorded fixture is not there yet: run "
                           "tests/python/data/record_torch_trace.py on a GPU")
def test_the_recorded_torch_profiler_trace(tmp_path):
    # audit 2026-11-28 A01: the recorded fixture and its reports CSV, annotated.
    out = tmp_path / "annotated.json.gz"
    summary = annotate_trace(FIXTURE_TRACE, out, FIXTURE_REPORTS)
    meta = json.loads((DATA / "torch_trace_meta.json").read_text())
    assert summary["replays"] == meta["traced_replays"]
    assert summary["unmatched_replays"] == 0
    check_annotated(load(out), summary)


def test_a_trace_recorded_here_on_the_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    from conftest import UNAVAILABLE

    if UNAVAILABLE.get("cuda"):
        reason = f"backend cuda unavailable: {UNAVAILABLE['cuda']}"
        if "cuda" in os.environ.get("ACCGRAPH_TEST_REQUIRE_BACKENDS", "").split(","):
            pytest.fail(f"{reason}, but it is required (ACCGRAPH_TEST_REQUIRE_BACKENDS) and "
                        "torch sees a GPU", pytrace=False)
        pytest.skip(reason)
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_torch_trace",
                                                  DATA / "record_torch_trace.py")
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    meta = record.record(tmp_path, traced_replays=4)
    # The backend names its marker kernels in every report (Note [Marker kernel names]).
    kernels = meta["profiler"].reports()[0].marker_kernels
    assert (kernels.record_at_start, kernels.record_at_end, kernels.end) == (
        MARKER_KERNELS["record_at_start"], MARKER_KERNELS["record_at_end"],
        MARKER_KERNELS["end"])
    out = tmp_path / "annotated.json"
    summary = accgraph.torch.annotate_trace(tmp_path / "torch_trace.json.gz", out,
                                            tmp_path / "torch_trace_reports.csv",
                                            marker_kernels=kernels)
    assert meta["traced_replays"] == meta["launched_while_tracing"] == 4  # CUPTI saw them all
    assert summary["replays"] == 4 and summary["unmatched_replays"] == 0
    check_annotated(load(out), summary)
    # From the profiler's reports too (markers by index, not recovered from times).
    summary = accgraph.torch.annotate_trace(tmp_path / "torch_trace.json.gz", out,
                                            meta["profiler"])
    assert summary["replays"] == 4
    check_annotated(load(out), summary)


# --- the rows of the 2026-11-28 reliability audit (kept outside the repository): one test each ----

needs_fixture = pytest.mark.skipif(
    not (FIXTURE_TRACE.exists() and FIXTURE_REPORTS.exists()),
    reason="the recorded fixture is not there: run tests/python/data/record_torch_trace.py on a "
           "GPU")


def fixture_events():
    return load(FIXTURE_TRACE)


def write_gz(path, trace):
    with gzip.open(path, "wt") as f:
        json.dump(trace, f)
    return path


def no_temporaries(directory):
    return [p.name for p in pathlib.Path(directory).iterdir() if ".tmp." in p.name]


SIZE_LIMITED_WRITE = r"""
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
import accgraph
from accgraph.torch import annotate_trace
trace, output, reports, limit = sys.argv[1:5]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
kernels = accgraph.MarkerKernels(record_at_start=["marker_record_kernel"],
                                 record_at_end=["marker_record_programmatic_kernel",
                                                "marker_record_placed_kernel"],
                                 end=["marker_end_kernel"])
try:
    if os.path.samefile(trace, output):
        annotate_trace(trace, output, reports, overwrite_input=True, marker_kernels=kernels)
    else:
        annotate_trace(trace, output, reports, marker_kernels=kernels)
except accgraph.InvalidArgumentError as e:
    print("ERROR", e)
    sys.exit(3)
print("WRITTEN")
"""


def run_size_limited(tmp_path, trace, output, limit):
    import subprocess
    import sys

    script = tmp_path / "limited.py"
    script.write_text(SIZE_LIMITED_WRITE)
    return subprocess.run([sys.executable, str(script), str(trace), str(output),
                           str(FIXTURE_REPORTS), str(limit)], capture_output=True, text=True,
                          timeout=120)


@needs_fixture
@pytest.mark.parametrize("suffix, limit", [(".json", 8192), (".json.gz", 1024),
                                           (".pftrace", 8192)])
def test_a_failed_write_leaves_the_old_output(tmp_path, suffix, limit):
    # A24: the disk fills part-way (RLIMIT_FSIZE, in a subprocess): the old file is kept whole.
    # A27: the same for .pftrace (written by accgraph::perfetto's atomic writer).
    if suffix == ".pftrace" and not accgraph.perfetto_supported():
        needs_pftrace()
    out = tmp_path / ("out" + suffix)
    old = b"the old output, which must survive\n" * 100
    out.write_bytes(old)
    done = run_size_limited(tmp_path, FIXTURE_TRACE, out, limit)
    assert done.returncode == 3, done.stdout + done.stderr
    assert out.read_bytes() == old
    assert no_temporaries(tmp_path) == []
    assert f"'{out}': File too large: the file was left as it was; free space or choose another" \
        in done.stdout, done.stdout
    assert done.stdout.count("cannot write") == 1, done.stdout  # .pftrace: once, not twice


@needs_fixture
def test_a_failed_write_in_place_leaves_the_trace(tmp_path):
    # A25: annotating in place (asked for), the write fails: the input trace is kept whole.
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes(FIXTURE_TRACE.read_bytes())
    done = run_size_limited(tmp_path, trace, trace, 4096)
    assert done.returncode == 3, done.stdout + done.stderr
    assert trace.read_bytes() == FIXTURE_TRACE.read_bytes()
    assert no_temporaries(tmp_path) == []
    # Without the limit, it is replaced by the annotated trace.
    done = run_size_limited(tmp_path, trace, trace, 1 << 30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(slices(load(trace))) == 48 and no_temporaries(tmp_path) == []


def test_output_is_the_input_only_when_asked(tmp_path, reports):
    # A25: the same file, also under another spelling or through a symbolic link, is refused.
    src = tmp_path / "trace.json"
    text = dumps(kineto_trace(reports))
    src.write_text(text)
    link = tmp_path / "link.json"
    link.symlink_to(src)
    (tmp_path / "sub").mkdir()
    for output in (src, tmp_path / "sub" / ".." / "trace.json", link):
        with pytest.raises(accgraph.InvalidArgumentError,
                           match=r"is the trace .* itself \(the same file\).*overwrite_input=True"):
            annotate_trace(src, output, reports)
        assert src.read_text() == text
    summary = annotate_trace(src, link, reports, overwrite_input=True)
    assert summary["replays"] == 6 and link.is_symlink()  # the link's target was replaced
    assert len(slices(load(src))) == 6 * len(reports[0])
    assert no_temporaries(tmp_path) == []


def test_the_output_is_checked_before_the_work(tmp_path, reports, monkeypatch):
    # A missing directory is named before the trace is read (check_output_file in C++): audit
    # 2026-11-28 A21 (.json), A26 (.pftrace); A22: the output is a directory.
    from accgraph.torch import _trace as torch_trace

    monkeypatch.setattr(torch_trace, "load_trace", lambda trace: pytest.fail("read first"))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"cannot write '.*missing/out.json': No such file or directory"):
        annotate_trace(tmp_path / "trace.json", tmp_path / "missing" / "out.json", reports)
    if accgraph.perfetto_supported():
        with pytest.raises(accgraph.InvalidArgumentError,
                           match=r"cannot write '.*missing/out.pftrace': No such file or "
                                 r"directory"):
            annotate_trace(tmp_path / "trace.json", tmp_path / "missing" / "out.pftrace",
                           reports)
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"cannot write '.*dir.json': Is a directory"):
        annotate_trace(tmp_path / "trace.json", tmp_path / "dir.json", reports)
    assert no_temporaries(tmp_path) == []


def test_a_replaced_output_keeps_its_permissions(tmp_path, reports):
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports)))
    out = tmp_path / "out.json"
    out.write_text("old")
    out.chmod(0o640)
    annotate_trace(src, out, reports)
    assert (out.stat().st_mode & 0o777) == 0o640 and slices(load(out))


def exact_load(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def test_strings_that_look_like_the_old_placeholder_stay_strings(tmp_path, reports):
    # A18: strings of the trace are never taken for numbers.
    trace = kineto_trace(reports)
    trace["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "@accgraph-exact:12.5",
                                 "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0,
                                 "args": {"x": "@accgraph-exact:3.25", "y": "@accgraph-exact:"}})
    out = tmp_path / "out.json"
    annotate_trace(trace, out, reports)
    ev = next(e for e in load(out)["traceEvents"] if e.get("pid") == 1)
    assert ev["name"] == "@accgraph-exact:12.5"
    assert ev["args"] == {"x": "@accgraph-exact:3.25", "y": "@accgraph-exact:"}


def test_a_string_holding_the_token_is_never_replaced(tmp_path, reports, monkeypatch):
    # Note [Exact numbers]: should a string hold the very token drawn, another is drawn.
    import secrets

    tokens = iter(["0" * 32, "1" * 32])
    monkeypatch.setattr(secrets, "token_hex",
                        lambda n: next(tokens) if n == 16 else "abcd1234")
    trace = kineto_trace(reports, start_ns=1_764_000_000_000_000_123)  # exact numbers to write
    trap = f"@accgraph-exact-{'0' * 32}:0"
    trace["traceEvents"].append({"ph": "i", "name": trap, "pid": 1, "tid": 1, "ts": 1.0,
                                 "args": {trap: trap}})
    out = tmp_path / "out.json"
    src = tmp_path / "trace.json"
    src.write_text(dumps(trace))
    annotate_trace(src, out, reports)
    ev = next(e for e in load(out)["traceEvents"] if e.get("pid") == 1)
    assert ev["name"] == trap and ev["args"] == {trap: trap}
    assert "@accgraph-exact" not in (tmp_path / "out.json").read_text().replace(trap, "")


@pytest.mark.parametrize("text", ["4.8825950881304571234e12", "4882595088130.4571234",
                                  "1E3", "-2.50e-7", "0.100000000000000000000001",
                                  "1.7976931348623157e309"])
def test_numbers_of_any_notation_come_back_as_the_same_numbers(tmp_path, reports, text):
    # A19: a ts (and an arg) in exponent notation or with more digits than a double holds.
    trace = kineto_trace(reports)
    trace["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "exact", "pid": 1, "tid": 1,
                                 "ts": "@TS@", "dur": 1.0, "args": {"v": "@TS@", "l": ["@TS@"]}})
    src = tmp_path / "trace.json"
    src.write_text(dumps(trace).replace('"@TS@"', text))
    out = tmp_path / "out.json"
    annotate_trace(src, out, reports)
    ev = next(e for e in exact_load(out)["traceEvents"] if e.get("name") == "exact")
    want = Decimal(text)
    assert ev["ts"] == want and ev["args"] == {"v": want, "l": [want]}
    assert "@accgraph-exact" not in out.read_text()


def test_annotating_an_annotated_trace_replaces_its_annotation(tmp_path, reports):
    # A20: the earlier slices and labels are replaced, not doubled: the same output as from
    # the original trace.
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(reports)))
    once, twice = tmp_path / "once.json", tmp_path / "twice.json"
    first = annotate_trace(src, once, reports)
    second = annotate_trace(once, twice, reports)
    assert first == second
    assert load(once) == load(twice)
    assert len(slices(load(twice))) == 6 * len(reports[0])
    # In place, as the audit did it.
    annotate_trace(once, once, reports[2:], overwrite_input=True)
    assert len(slices(load(once))) == 4 * len(reports[0])
    assert {s["args"]["replay_index"] for s in slices(load(once))} == {2, 3, 4, 5}
    labelled = [k for k in kernels(load(once)) if "accgraph_replay" in k["args"]]
    assert {k["args"]["accgraph_replay"].split(":")[1] for k in labelled} == {"2", "3", "4", "5"}


def csv_lines(path):
    return pathlib.Path(path).read_text().splitlines(keepends=True)


def edited_csv(tmp_path, lines, name="edited.csv"):
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


@needs_fixture
def test_a_region_that_ends_before_it_starts(tmp_path):
    # A35: start_ns and end_ns swapped in one row.
    lines = csv_lines(FIXTURE_REPORTS)
    header = lines[0].strip().split(",")
    row = lines[5].rstrip("\n").split(",")
    s, e = header.index("start_ns"), header.index("end_ns")
    row[s], row[e] = row[e], row[s]
    lines[5] = ",".join(row) + "\n"
    path = edited_csv(tmp_path, lines)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"the reports CSV '{re.escape(str(path))}', line 6: region "
                             rf"'{re.escape(row[header.index('path')])}' of graph 0 replay \d+ "
                             r"ends before it starts \(start_ns \d+ > end_ns \d+\): the file "
                             r"was edited or damaged; write it again with Profiler.write_csv"):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", path)
    assert not (tmp_path / "out.json").exists()


@needs_fixture
def test_rows_given_twice(tmp_path):
    # A36: two exports concatenated (without the second header), or every row twice.
    lines = csv_lines(FIXTURE_REPORTS)
    for name, edited in (("twice.csv", lines + lines[1:]),
                         ("each.csv", [lines[0]] + [x for x in lines[1:] for _ in (0, 1)])):
        path = edited_csv(tmp_path, edited, name)
        with pytest.raises(accgraph.InvalidArgumentError,
                           match=rf"'{re.escape(str(path))}', line \d+: region 'model' of graph "
                                 r"0 replay 0 is the same row as line 2 \(two exports "
                                 r"concatenated\?\): give each report's rows once"):
            annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", path)


@needs_fixture
@pytest.mark.parametrize("case, message", [
    ("depth", r"line 4: column 'depth' is 'deep', not a whole number: write it again"),  # A30
    ("short", r"line 4: the row has 4 fields, the header 13 \(the file is cut short\?\)"),  # A31
    ("long", r"line 4: the row has 15 fields, the header 13: the file is damaged"),
    ("graph", r"line 4: column 'graph_id' is 'x', not a whole number"),
])
def test_a_damaged_reports_csv_names_the_line(tmp_path, case, message):
    lines = csv_lines(FIXTURE_REPORTS)
    header = lines[0].strip().split(",")
    row = lines[3].rstrip("\n").split(",")
    if case == "depth":
        row[header.index("depth")] = "deep"
    elif case == "graph":
        row[header.index("graph_id")] = "x"
    elif case == "short":
        row = row[:4]
    elif case == "long":
        row += ["a", "b"]
    lines[3] = ",".join(row) + "\n"
    path = edited_csv(tmp_path, lines)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"the reports CSV '{re.escape(str(path))}', " + message):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", path)


@needs_fixture
def test_the_trace_given_as_the_reports_csv(tmp_path):
    # A33: the .json.gz, and a file of other bytes.
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"the reports CSV '.*torch_trace.json.gz' is a gzip file \(the "
                             r"trace\?\), not the CSV Profiler.write_csv wrote: pass that CSV"):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", FIXTURE_TRACE)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(FIXTURE_REPORTS.read_bytes() + "caf\u00e9".encode("latin-1"))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"'.*latin.csv' is not UTF-8 text \(byte 0xe9 at offset \d+\)"):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", latin)


@needs_fixture
def test_a_long_metadata_field_is_read(tmp_path):
    # A34: a region's metadata longer than csv.field_size_limit(); the limit is restored.
    import csv

    lines = csv_lines(FIXTURE_REPORTS)
    lines[3] = lines[3].rstrip("\n") + "x" * 300_000 + "\n"
    path = edited_csv(tmp_path, lines)
    limit = csv.field_size_limit()
    summary = annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", path)
    assert summary["replays"] == 4 and csv.field_size_limit() == limit


def test_extra_csv_columns_are_ignored(tmp_path, host):
    # Columns are read by name: a later version's (e.g. a "context" column) changes nothing.
    import csv

    prof = accgraph.Profiler()
    timed_model(prof, host, replays=3)
    prof.flush()
    src = tmp_path / "trace.json"
    src.write_text(dumps(kineto_trace(prof.reports())))
    prof.write_csv(tmp_path / "reports.csv")
    with open(tmp_path / "reports.csv", newline="") as f:
        rows = list(csv.reader(f))
    with open(tmp_path / "wider.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["context"] + rows[0][::-1])
        for row in rows[1:]:
            w.writerow(["a, \"quoted\" context"] + row[::-1])
    a = annotate_trace(src, tmp_path / "a.json", tmp_path / "reports.csv")
    b = annotate_trace(src, tmp_path / "b.json", tmp_path / "wider.csv")
    assert a == b and load(tmp_path / "a.json") == load(tmp_path / "b.json")


@needs_fixture
def test_a_damaged_or_cut_short_gzip_trace(tmp_path):
    raw = FIXTURE_TRACE.read_bytes()
    crc = bytearray(raw)  # A05: a wrong CRC trailer
    for i in range(len(raw) - 8, len(raw) - 4):
        crc[i] ^= 0xFF
    wrong = tmp_path / "crc.json.gz"
    wrong.write_bytes(bytes(crc))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"'{re.escape(str(wrong))}'.*CRC check failed"):
        annotate_trace(wrong, tmp_path / "out.json", FIXTURE_REPORTS)
    cut = tmp_path / "cut.json.gz"  # A03
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"the trace '{re.escape(str(cut))}' is cut short: its gzip stream "
                             r"ends before its end .*export_chrome_trace wrote, whole"):
        annotate_trace(cut, tmp_path / "out.json", FIXTURE_REPORTS)
    flipped = bytearray(raw)  # A04: 60 bytes of the deflate stream flipped
    for i in range(1000, 1060):
        flipped[i] ^= 0xFF
    bad = tmp_path / "flipped.json.gz"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"'{re.escape(str(bad))}' (is a damaged gzip file|is not Chrome "
                             r"trace JSON|cannot read the trace)"):
        annotate_trace(bad, tmp_path / "out.json", FIXTURE_REPORTS)
    with pytest.raises(accgraph.InvalidArgumentError, match="is a damaged gzip file"):
        import zlib

        body = zlib.compress(b"x" * 5000)[2:-4]  # raw deflate, then damaged
        broken = bytearray(gzip.compress(b"{}")[:10]) + bytearray(body)
        broken[12] ^= 0x40
        (tmp_path / "b.json.gz").write_bytes(bytes(broken) + b"\0" * 8)
        annotate_trace(tmp_path / "b.json.gz", tmp_path / "out.json", FIXTURE_REPORTS)
    assert not (tmp_path / "out.json").exists()


def test_a_trace_nested_too_deep(tmp_path, reports):
    # A06: 200,000 arrays deep; and a dict given with an arg nested deeper than the writer goes.
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"the trace '{re.escape(str(deep))}' nests JSON arrays or objects "
                             r"deeper than Python's JSON reader follows"):
        annotate_trace(deep, tmp_path / "out.json", reports)
    trace = kineto_trace(reports)
    nested = []
    for _ in range(100_000):
        nested = [nested]
    trace["traceEvents"].append({"ph": "i", "name": "deep", "pid": 1, "tid": 1, "ts": 1.0,
                                 "args": {"deep": nested}})
    with pytest.raises(accgraph.InvalidArgumentError, match="nests JSON arrays or objects "
                       "deeper than Python's JSON writer follows"):
        annotate_trace(trace, tmp_path / "out.json", reports)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}])
def test_marker_kernels_with_unhashable_ids(tmp_path, reports, value):
    # A13: a correlation that is a list or an object is no correlation: the replays are found
    # on their stream rows. A14: a tid or pid that is one is no row: the kernel is left out, and
    # when that leaves none, the error says so.
    trace = kineto_trace(reports)
    marks = [e for e in trace["traceEvents"] if "accgraph" in e.get("name", "")]
    for e in marks:
        e["args"]["correlation"] = value
    # Issue 44 item 5: not without a word.
    with pytest.warns(RuntimeWarning, match=rf"{len(marks)} marker kernel\(s\) of the trace "
                                            r"have a correlation that is a list or an object") \
            as caught:
        assert annotate_trace(trace, tmp_path / "out.json", reports)["replays"] == 6
    assert [w.filename for w in caught] == [__file__]
    for field in ("tid", "pid"):
        for e in marks:
            e[field] = value
        with pytest.raises(accgraph.InvalidArgumentError,
                           match=rf"the trace holds {len(marks)} accgraph marker kernel\(s\), "
                                 r"none usable: .* or their pid or tid is neither a number nor "
                                 r"a string: pass the trace torch.profiler's export_chrome_trace "
                                 r"wrote, unedited"):
            annotate_trace(trace, tmp_path / "out.json", reports)


def test_pftrace_leaves_out_times_it_cannot_hold_with_a_warning(tmp_path, reports):
    # A11 (ts 1e300), A12 (ts -2 us): left out of the .pftrace, counted in a warning; the .json
    # keeps them.
    needs_pftrace()
    trace = kineto_trace(reports)
    extra = [{"ph": "X", "cat": "cpu_op", "name": "far", "pid": 1, "tid": 1, "ts": 1e300,
              "dur": 1.0},
             {"ph": "X", "cat": "cpu_op", "name": "before", "pid": 1, "tid": 1, "ts": -2.0,
              "dur": 1.0},
             {"ph": "X", "cat": "cpu_op", "name": "text", "pid": 1, "tid": 1, "ts": "abc"},
             {"ph": "i", "name": "\ud800 lone surrogate", "pid": 1, "tid": "\udfff",
              "ts": 5.0, "args": {"\ud800": "\udc00"}}]
    trace["traceEvents"].extend(extra)
    with pytest.warns(RuntimeWarning,
                      match=r"annotate_trace: 3 event\(s\) of the trace left out of "
                            r"'.*out.pftrace': their ts or dur is negative, not a number or "
                            r"beyond 2\^63 ns.*write .json or .json.gz to keep them") as caught:
        annotate_trace(trace, tmp_path / "out.pftrace", reports)
    # Issue 44 item 5: the warning is the caller's, on the line that called annotate_trace (it
    # named a line inside accgraph, where a filter for the caller's warnings missed it).
    assert [w.filename for w in caught] == [__file__]
    got, _ = decode_pftrace(tmp_path / "out.pftrace")
    names = {g[0] for g in got}
    assert not names & {"far", "before", "text"}
    annotate_trace(trace, tmp_path / "out.json", reports)
    kept = {e["name"] for e in load(tmp_path / "out.json")["traceEvents"] if e.get("pid") == 1}
    assert {"far", "before", "text"} <= kept


def test_no_warning_when_every_event_fits(tmp_path, reports):
    needs_pftrace()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        annotate_trace(kineto_trace(reports), tmp_path / "out.pftrace", reports)


# --- A45: matching in O(n log n) ------------------------------------------------------------------


def synthetic(replays, kept, seed=0, period_us=None):
    """A Kineto-shaped trace of `replays` replays of one graph and the reports CSV of the last
    `kept`, built from made-up marker times (no backend): 6 markers, regions model, a, b and b/c
    with shared edges; gaps between replays drawn at random (a host's jitter) or, with `period_us`,
    a fixed period (back-to-back replays) with 50 ns of jitter."""
    import random

    rng = random.Random(seed)
    t = 1_000_000_000
    times = []
    for n in range(replays):
        marks = [t]
        for _ in range(5):
            marks.append(marks[-1] + rng.randrange(20_000, 22_000))
        times.append(marks)
        t = marks[-1] + (rng.randrange(5_000, 60_000) if period_us is None
                         else round(period_us * 1000) + rng.randrange(-50, 50))
    offset = 4_882_595_085_667_751 - times[0][0]
    events = []
    for n, marks in enumerate(times):
        for i, m in enumerate(marks):
            events.append(kernel(RECORD, m + offset, 300, 1000 + n))
            if i + 1 < len(marks):
                events.append(kernel(f"work_{n}_{i}", m + offset + 500, 10_000, 1000 + n))
        events.append(kernel(END, marks[-1] + offset + 400, 1200, 1000 + n))
    rows = ["graph_id,replay_index,path,depth,lane,start_ns,end_ns"]
    for n in range(replays - kept, replays):
        m = times[n]
        for path, depth, a, b in (("model", 0, 0, 5), ("model/a", 1, 1, 2),
                                  ("model/b", 1, 2, 4), ("model/b/c", 2, 3, 4)):
            rows.append(f"1,{n},{path},{depth},,{m[a]},{m[b]}")
    return {"traceEvents": events}, "\n".join(rows) + "\n"


def annotate_synthetic(tmp_path, replays, kept, **kwargs):
    import time

    trace, text = synthetic(replays, kept, **kwargs)
    src = tmp_path / f"s{replays}.json"
    src.write_text(dumps(trace))
    csv_path = tmp_path / f"s{replays}.csv"
    csv_path.write_text(text)
    start = time.perf_counter()
    summary = annotate_trace(src, tmp_path / "out.json", csv_path)
    return summary, time.perf_counter() - start


def test_many_replays_against_the_last_reports(tmp_path):
    # audit 2026-11-28 A40: a load of 3,000 traced replays (the last 512 reports kept).
    # Each traced replay is annotated with its own report: the work kernels name their replay.
    summary, _ = annotate_synthetic(tmp_path, 3000, 512)
    assert (summary["replays"], summary["unmatched_replays"]) == (512, 2488)
    for k in kernels(load(tmp_path / "out.json")):
        if k["name"].startswith("work_") and "accgraph_replay" in k["args"]:
            assert k["args"]["accgraph_replay"] == f"1:{k['name'].split('_')[1]}"


def test_matching_is_not_quadratic(tmp_path):
    # A45: 8x the replays and reports take far less than 64x the time (8-10x here; the old
    # search took 30x and more, parsing being linear).
    small = min(annotate_synthetic(tmp_path, 250, 64)[1] for _ in range(3))
    runs = [annotate_synthetic(tmp_path, 2000, 512) for _ in range(2)]
    summary, large = runs[0][0], min(r[1] for r in runs)
    assert summary["replays"] == 512
    assert large < 20 * small, (small, large)


def test_replays_at_a_fixed_period_are_matched_in_bounded_time(tmp_path):
    # Back-to-back replays leave many replay offsets valid (Note [Matching cost]): the search
    # compares a few in full; every kept report still lands on a traced replay's markers.
    small = min(annotate_synthetic(tmp_path, 250, 64, period_us=120)[1] for _ in range(3))
    runs = [annotate_synthetic(tmp_path, 2000, 512, period_us=120) for _ in range(2)]
    summary, large = runs[0][0], min(r[1] for r in runs)
    assert summary["replays"] == 512 and summary["unmatched_replays"] == 1488
    assert large < 20 * small, (small, large)


def test_a_doubles_nanoseconds_are_its_texts():
    # to_ns reads a double below 2^43 us without Decimal: the same ns as the three-decimal text.
    import random

    from accgraph.torch._trace import _kineto

    rng = random.Random(7)
    for _ in range(20_000):
        n = rng.choice([rng.randrange(-2**53, 2**53), rng.randrange(2**52, 2**53),
                        rng.randrange(-10**6, 10**6)])
        text = f"{'-' if n < 0 else ''}{abs(n) // 1000}.{abs(n) % 1000:03d}"
        value = _kineto.parse_float(text)
        assert _kineto.to_ns(value) == n, text


@pytest.mark.parametrize("which", [0, 2])
def test_a_replay_that_lost_a_marker_keeps_its_place(tmp_path, reports, which):
    # A09 in the middle of the trace: one marker kernel of replay 2 has a ts that is not a
    # number (its first, or another). That replay is not matched; the others still are, each
    # to its own report.
    trace = kineto_trace(reports)
    marks = [e for e in trace["traceEvents"] if RECORD in e.get("name", "") and
             e["args"].get("correlation") == 1002]
    marks[which]["ts"] = "not a number"
    summary = annotate_trace(trace, tmp_path / "out.json", reports)
    assert (summary["replays"], summary["unmatched_replays"]) == (5, 1)
    assert {s["args"]["replay_index"] for s in slices(load(tmp_path / "out.json"))} == \
        {0, 1, 3, 4, 5}


# --- the 2026-11-28 audit's other rows (scripts/audit/annotate_trace_cases.py reruns them all on
# the recorded fixture) ------------------------------------------------------------------------


@pytest.mark.parametrize("top", [42, "x", None, {"traceEvents": {}}, {"traceEvents": None},
                                 [1, "x", None]])
def test_a_trace_that_is_no_trace_events_list(tmp_path, reports, top):
    # audit 2026-11-28 A07: the top level 42, "x", null, traceEvents a dict or null, a bare list
    # of junk.
    path = tmp_path / "top.json"
    path.write_text(json.dumps(top))
    message = "no accgraph marker kernels" if isinstance(top, list) else "has no traceEvents list"
    with pytest.raises(accgraph.InvalidArgumentError, match=message):
        annotate_trace(path, tmp_path / "out.json", reports)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_marker_kernels_whose_times_are_not_finite(tmp_path, reports, value):
    # audit 2026-11-28 A08: every marker kernel's ts NaN, Infinity or -Infinity.
    trace = kineto_trace(reports)
    for e in trace["traceEvents"]:
        if "accgraph" in e.get("name", ""):
            e["ts"] = "@V@"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace).replace('"@V@"', value))
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=rf"the trace '{re.escape(str(path))}' holds \d+ accgraph marker "
                             r"kernel\(s\), none usable: their ts or dur is not a number"):
        annotate_trace(path, tmp_path / "out.json", reports)


def test_other_events_are_kept_as_given(tmp_path, reports):
    # audit 2026-11-28 A10: odd times on events that are not markers stay as they were.
    trace = kineto_trace(reports)
    extra = [{"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": -5.5,
              "dur": 1.0},
             {"ph": "X", "cat": "cpu_op", "name": "huge", "pid": 1, "tid": 1, "ts": 1e300,
              "dur": 1e300},
             {"ph": "X", "cat": "kernel", "name": "abc", "pid": 1, "tid": 1, "ts": "abc",
              "dur": 1.0},
             {"ph": "X", "cat": "kernel", "name": "negdur", "pid": 1, "tid": 1, "ts": 5.0,
              "dur": -3}]
    trace["traceEvents"] += extra
    annotate_trace(trace, tmp_path / "out.json", reports)
    got = {e["name"]: e for e in load(tmp_path / "out.json")["traceEvents"]
           if e.get("pid") == 1}
    for e in extra:
        assert (got[e["name"]]["ts"], got[e["name"]]["dur"]) == (e["ts"], e["dur"])


def test_duplicate_correlation_ids_fall_back_to_the_stream_rows(tmp_path, reports):
    # audit 2026-11-28 A15: every correlation id 1.
    trace = kineto_trace(reports)
    for e in trace["traceEvents"]:
        if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
            e["args"]["correlation"] = 1
    assert annotate_trace(trace, tmp_path / "out.json", reports)["replays"] == len(reports)


def test_marker_kernels_missing_fields_are_skipped(tmp_path, reports):
    # audit 2026-11-28 A16: marker kernels without ts, ph, args or dur; events {} and {"ph":"X"}.
    trace = kineto_trace(reports)
    marks = [e for e in trace["traceEvents"] if RECORD in e.get("name", "")]
    for e, key in zip(marks[:4], ("ts", "ph", "args", "dur")):
        del e[key]
    trace["traceEvents"] += [{}, {"ph": "X"}]
    summary = annotate_trace(trace, tmp_path / "out.json", reports)
    assert 1 <= summary["replays"] < len(reports)
    assert summary["replays"] + summary["unmatched_replays"] == len(reports)


@needs_fixture
def test_reports_csv_without_rows_or_unreadable(tmp_path):
    # audit 2026-11-28 A32 (the header only), A37 (a directory, a missing file).
    header = tmp_path / "header.csv"
    header.write_text(csv_lines(FIXTURE_REPORTS)[0])
    with pytest.raises(accgraph.InvalidArgumentError, match="no reports with regions in the "
                       "reports CSV"):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", header)
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"cannot read the reports CSV '.*dir.csv': Is a directory"):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", tmp_path / "dir.csv")
    with pytest.raises(accgraph.InvalidArgumentError,
                       match=r"cannot read the reports CSV '.*none.csv': No such file"):
        annotate_trace(FIXTURE_TRACE, tmp_path / "out.json", tmp_path / "none.csv")


def test_tolerance_us_is_checked(tmp_path, reports):
    # audit 2026-11-28 A38: 0, -1 and nan refused naming the argument; inf accepted; "1" a
    # TypeError.
    import math

    trace = kineto_trace(reports)
    for value in (0, -1, math.nan):
        with pytest.raises(accgraph.InvalidArgumentError, match="tolerance_us"):
            annotate_trace(trace, tmp_path / "out.json", reports, tolerance_us=value)
    assert annotate_trace(trace, tmp_path / "out.json", reports,
                          tolerance_us=math.inf)["replays"] == len(reports)
    for value in ("1", None, True):  # was "'>' not supported between 'str' and 'int'"
        with pytest.raises(TypeError, match=r"^annotate_trace: tolerance_us must be a number of "
                           "microseconds, not (str|NoneType|bool)$"):
            annotate_trace(trace, tmp_path / "out.json", reports, tolerance_us=value)


@needs_fixture
def test_annotate_trace_does_not_import_torch(tmp_path):
    # audit 2026-11-28 A39: accgraph.torch.annotate_trace works without torch, importing none.
    import subprocess
    import sys

    code = ("import sys, accgraph, accgraph.torch\n"
            f"kernels = accgraph.MarkerKernels(**{MARKER_KERNELS!r})\n"
            f"accgraph.torch.annotate_trace({str(FIXTURE_TRACE)!r}, {str(tmp_path / 'o.json')!r}, "
            f"{str(FIXTURE_REPORTS)!r}, marker_kernels=kernels)\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_csv_keeping_every_tenth_report(tmp_path):
    # audit 2026-11-28 A41: the kept reports are annotated, the others counted unmatched.
    trace, text = synthetic(500, 500)
    lines = text.splitlines(keepends=True)
    kept = [lines[0]] + [x for x in lines[1:] if int(x.split(",")[1]) % 10 == 0]
    (tmp_path / "t.json").write_text(dumps(trace))
    (tmp_path / "kept.csv").write_text("".join(kept))
    summary = annotate_trace(tmp_path / "t.json", tmp_path / "out.json", tmp_path / "kept.csv")
    assert (summary["replays"], summary["unmatched_replays"]) == (50, 450)
    replays = {s["args"]["replay_index"] for s in slices(load(tmp_path / "out.json"))}
    assert replays == set(range(0, 500, 10))


@needs_fixture
def test_many_extra_events_in_and_out_of_gzip(tmp_path):
    # audit 2026-11-28 A42 (1,000,000 extra events, 12-14 s there), scaled to 100,000: every
    # event is written back.
    trace = json.loads(gzip.decompress(FIXTURE_TRACE.read_bytes()))
    trace["traceEvents"] += [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1,
                              "tid": 1, "ts": 4882595085667.751 + i, "dur": 1.5,
                              "args": {"i": i}} for i in range(100_000)]
    src = tmp_path / "big.json.gz"
    with gzip.open(src, "wt", compresslevel=1) as f:
        json.dump(trace, f)
    summary = annotate_trace(src, tmp_path / "out.json.gz", FIXTURE_REPORTS)
    assert summary["replays"] == 4
    ops = [e for e in load(tmp_path / "out.json.gz")["traceEvents"] if e.get("pid") == 1 and
           e.get("name", "").startswith("op")]
    assert len(ops) == 100_000 and ops[-1]["args"] == {"i": 99_999}


def test_a_dict_trace_holding_bytes_is_a_type_error(tmp_path, reports):
    # audit 2026-11-28 A43: what JSON cannot hold is json's TypeError, and nothing is written.
    trace = kineto_trace(reports)
    trace["traceEvents"].append({"ph": "i", "name": "b", "pid": 1, "tid": 1, "ts": 1.0,
                                 "args": {"b": b"bytes"}})
    with pytest.raises(TypeError, match="bytes is not JSON serializable"):
        annotate_trace(trace, tmp_path / "out.json", reports)
    assert not (tmp_path / "out.json").exists()
