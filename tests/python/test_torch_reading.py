"""Reading module timing (issue 37): contexts kept apart (each graph's replays, eager calls, the
first eager call), the tree table (sorting, --top, --min-share, --flat, 100 columns), compare,
and the command line's own behaviour around them (output paths checked before the run,
KeyboardInterrupt, a failed report write after the table). On the host backend with the torch
stand-in (torch_standin.py); the HTML report in a browser: test_torch_report_browser.py."""

import sys

import pytest

import accgraph
import accgraph.torch
from accgraph.torch import __main__ as cli
from accgraph.torch._table import elide, module_table, read_stats_csv, us
from conftest import timed_host_graph
from torch_standin import gpt_paths, make_gpt, make_torch

# The statistics CSV's header, as C++ declares it (accgraph::timing::stats_csv_columns).
CSV_HEADER = ",".join(accgraph.stats_csv_columns())
# As it was before the replays_run and replays_timed columns (sampled timing): still read.
OLD_CSV_HEADER = ",".join(accgraph.stats_csv_columns()[:17])


@pytest.fixture
def torch(monkeypatch):
    standin = make_torch()
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch", lambda: standin)
    monkeypatch.setattr(accgraph.torch._runtime, "BACKEND", "host")
    monkeypatch.setattr(accgraph.torch._runtime, "streams", {})
    monkeypatch.setitem(sys.modules, "torch", standin)  # for scripts run by the command line
    yield standin
    accgraph.torch.uninstrument()


def capture(torch, model):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(None)
    return g


# --- contexts ---------------------------------------------------------------------------------

def test_each_graph_the_eager_calls_and_the_first_eager_call_are_apart(torch):
    prof = accgraph.Profiler(first_eager_call="apart")
    with accgraph.torch.instrumented(prof, modules=True):
        model = make_gpt(torch)
        for _ in range(3):
            model(None)  # eager: the first call apart, two after it
        prefill, decode = capture(torch, model), capture(torch, model)  # the same paths
        for _ in range(4):
            prefill.replay()
        for _ in range(6):
            decode.replay()
    accgraph.torch.label_graph(decode, "decode, batch 8")
    ids = [accgraph.torch.foreign_graph(g).id for g in (prefill, decode)]
    rows = [s.to_dict() for s in prof.stats()]
    by_context = {}
    for row in rows:
        by_context.setdefault((row["graph_id"], row["first_call"]), []).append(row)
    assert set(by_context) == {(ids[0], False), (ids[1], False), (0, False), (0, True)}
    for context, count in (((ids[0], False), 4), ((ids[1], False), 6), ((0, False), 2),
                           ((0, True), 1)):
        assert [r["path"] for r in by_context[context]] == gpt_paths(), context
        assert {r["count"] for r in by_context[context]} == {count}, context
    labels = accgraph.torch.graph_labels()
    assert labels[ids[1]] == "decode, batch 8"
    assert labels[ids[0]].startswith("test_torch_reading.py:")  # its capture site
    table = module_table(prof, labels=labels)
    headers = [line for line in table.splitlines() if line.startswith(("graph ", "eager"))]
    assert [h.split("): ")[0].split(": ")[0] for h in headers] == [
        f"graph {ids[0]} ({labels[ids[0]]}", f"graph {ids[1]} (decode, batch 8", "eager",
        "eager, first call"]
    assert "4 replays" in headers[0] and "6 replays" in headers[1] and "2 calls" in headers[2]
    assert "not in the eager rows" in headers[3]
    # The same view from Python.
    view = accgraph.torch.stats_by_context(prof, labels=labels)
    assert list(view) == [h.split(": ")[0] for h in headers]
    assert [r["count"] for r in view["eager, first call"]] == [1] * len(gpt_paths())
    # Only the sections asked for.
    assert module_table(prof, labels=labels, contexts=["eager"]).splitlines()[0].startswith(
        "eager: 2 calls")


def test_profiler_first_eager_call_is_checked():
    with pytest.raises(accgraph.InvalidArgumentError,
                       match="first_eager_call must be 'pooled' or 'apart' \\(got 'first'\\)"):
        accgraph.Profiler(first_eager_call="first")


def test_label_graph_needs_a_timed_graph(torch):
    with pytest.raises(TypeError, match="never captured while instrumented"):
        accgraph.torch.label_graph(torch.cuda.CUDAGraph(), "x")


# --- the table --------------------------------------------------------------------------------

def row(path, depth, p50, self_p50, count=10, graph_id=7):
    return {"path": path, "depth": depth, "count": count, "p50_ns": p50 * 1000.0,
            "p95_ns": p50 * 1100.0, "p05_ns": p50 * 900.0, "self_p50_ns": self_p50 * 1000.0,
            "graph_id": graph_id, "first_call": False}


# In module order: c before a before b. p50: a 600, b 300 (b/x 250), c 100; self: a 600, c 100,
# b 50.
TREE = [row("M", 0, 1000, 0), row("M/c", 1, 100, 100), row("M/a", 1, 600, 600),
        row("M/b", 1, 300, 50), row("M/b/x", 2, 250, 250)]


def body(table):
    """The row lines of a one-section table (after its header lines)."""
    return [line for line in table.splitlines()[2:] if line and not line.startswith("(")]


def names(table):
    return [line.split("  ")[0].strip() if not line.startswith(" ") else
            line.strip().split(" ")[0] for line in body(table)]


def test_the_stats_csv_is_written_and_read_by_the_schema_cpp_declares(tmp_path):
    prof = accgraph.Profiler()
    stream = accgraph.Stream("host")
    with prof.region(stream, "GPT"):
        with prof.region(stream, "h.0"):
            stream.delay(1e-5)
    prof.flush()
    prof.write_stats_csv(tmp_path / "stats.csv")
    header = (tmp_path / "stats.csv").read_text().splitlines()[0]
    assert header.split(",") == accgraph.stats_csv_columns()
    assert {"path", "p50_ns", "graph_id", "first_call"} <= set(accgraph.stats_csv_columns())
    assert [row["path"] for row in read_stats_csv(tmp_path / "stats.csv")] == ["GPT", "GPT/h.0"]


def test_the_tree_indents_by_depth_and_sorts_siblings():
    table = module_table(TREE)
    assert table.splitlines()[0].startswith("graph 7: 10 replays, 1000 us per replay")
    assert table.splitlines()[1].split() == ["module", "count", "p50", "us", "p95", "us", "self",
                                             "p50", "self", "%"]
    lines = body(table)
    assert [line[:8] for line in lines] == ["M       ", "  c     ", "  a     ", "  b     ",
                                            "    x   "]
    assert lines[2].split()[1:] == ["10", "600.0", "660.0", "600.0", "60.0%"]
    assert names(module_table(TREE, sort="total")) == ["M", "a", "b", "x", "c"]
    assert names(module_table(TREE, sort="self")) == ["M", "a", "c", "b", "x"]
    assert names(module_table(TREE, sort="name")) == ["M", "a", "b", "x", "c"]
    assert names(module_table(TREE, sort="order")) == ["M", "c", "a", "b", "x"]
    flat = body(module_table(TREE, flat=True, sort="self"))
    assert [line.split()[0] for line in flat] == ["M/a", "M/b/x", "M/c", "M/b", "M"]
    with pytest.raises(ValueError, match="sort must be one of order, total, self, name"):
        module_table(TREE, sort="mean")


def test_top_and_min_share_keep_the_largest_rows_with_their_parents():
    table = module_table(TREE, top=2, sort="total")
    assert names(table) == ["M", "a"]
    assert "(3 of 5 rows not shown: --top 2)" in table
    assert names(module_table(TREE, top=1, sort="self")) == ["M", "a"]  # a: largest self
    assert names(module_table(TREE, top=1, sort="self", flat=True)) == ["M/a"]
    assert names(module_table(TREE, top=1)) == ["M"]
    table = module_table(TREE, min_share=20)
    assert names(table) == ["M", "a", "b", "x"]  # c: 10% of the graph's time
    assert "(1 of 5 rows not shown: --min-share 20)" in table
    assert names(module_table(TREE, min_share=26)) == ["M", "a", "b"]  # x: 25%


def test_lines_fit_100_columns_with_long_names_elided_in_the_middle():
    long = "transformer.encoder.layers.11.self_attention.query_key_value_projection_" + "x" * 60
    rows = [row("Model", 0, 1234567, 1), row("Model/" + long, 1, 999999, 999999,
                                             count=12345678)]
    table = module_table(rows)
    assert all(len(line) <= 100 for line in table.splitlines()), table
    line = body(table)[1]
    assert line.startswith("  transformer.encoder.la") and "…" in line and "xxxxxxxx  " in line
    assert line.split()[1:] == ["12345678", "999999", "1099999", "999999", "81.0%"]
    flat = module_table(rows, flat=True)
    assert all(len(line) <= 100 for line in flat.splitlines())
    assert elide("abcdefghij", 5) == "ab…ij" and elide("abc", 5) == "abc"
    assert us(1234.0) == "1.23" and us(12345.0) == "12.3" and us(1234567.0) == "1235"


# --- compare ----------------------------------------------------------------------------------

def write_csv(path, rows, count=100, replays=None):
    """rows: (path, depth, p05, p50, p95, self_p50) in us, graph 3, `count` samples each;
    `replays`: (run, timed) in the columns of those names, None: a CSV of before them."""
    lines = [CSV_HEADER if replays else OLD_CSV_HEADER]
    for p, depth, p05, p50, p95, self_p50 in rows:
        ns = [x * 1000 for x in (p05, p50, p95, self_p50)]
        lines.append(f"{p},{depth},{count},{ns[0]},{ns[1]},{ns[1]},{ns[2]},{ns[2]},{count},0,0,"
                     f"{ns[3]},0,0,3,0,{ns[0]}" + (f",{replays[0]},{replays[1]}" if replays else ""))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def two_runs(tmp_path, gpt_after=1200.0):
    a = write_csv(tmp_path / "a.csv", [("GPT", 0, 900, 1000, 1100, 10),
                                       ("GPT/attn", 1, 290, 300, 310, 300),
                                       ("GPT/mlp", 1, 350, 400, 450, 400),
                                       ("GPT/old", 1, 5, 6, 7, 6)])
    b = write_csv(tmp_path / "b.csv", [("GPT", 0, gpt_after - 50, gpt_after, gpt_after + 50, 10),
                                       ("GPT/attn", 1, 295, 305, 315, 305),  # within the noise
                                       ("GPT/mlp", 1, 300, 420, 500, 420),  # inside A's spread
                                       ("GPT/new", 1, 5, 6, 7, 6)])
    return a, b


def test_compare_flags_a_change_above_the_noise_only_and_lists_one_run_modules(tmp_path):
    a, b = two_runs(tmp_path)
    result = accgraph.torch.compare(a, b)
    by_path = {r["path"]: r for r in result.rows}
    assert by_path["GPT"]["changed"] and by_path["GPT"]["delta_ns"] == 200_000
    assert by_path["GPT"]["ratio"] == pytest.approx(1.2)
    assert not by_path["GPT/attn"]["changed"] and not by_path["GPT/mlp"]["changed"]
    assert by_path["GPT/old"]["b"] is None and by_path["GPT/new"]["a"] is None
    assert result.worst_slowdown_pct == pytest.approx(20.0)
    text = result.text()
    assert all(len(line) <= 100 for line in text.splitlines())
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("GPT")}
    assert lines["GPT"].split() == ["GPT", "1000", "1200", "+200.00", "1.200", "10.0", "10.0",
                                    "slower"]
    assert lines["GPT/attn"].split()[-1] == "305.0" and lines["GPT/mlp"].split()[-1] == "420.0"
    assert lines["GPT/old"].split()[-2:] == ["only", "A"] and lines["GPT/new"].split()[-1] == "B"
    assert lines["GPT/old"].split()[2] == "-"
    assert text.splitlines()[-2:] == [
        "1 change(s) beyond the noise (p50 outside the other run's p05-p95), 2 module(s) in one "
        "run only", "0 module(s) with fewer than 20 samples (timed replays or calls) in a run: "
        "not judged (few)"]
    assert [line.split()[0] for line in result.text(changed_only=True).splitlines()
            if line.startswith("GPT")] == ["GPT", "GPT/new", "GPT/old"]


def test_compare_does_not_judge_modules_with_few_calls(tmp_path):
    # Three eager calls: p05 and p95 are the extremes of three values, no spread to judge by
    # (two runs of one script flagged 223 such rows on the H200 before this rule).
    a = write_csv(tmp_path / "a.csv", [("GPT", 0, 900, 1000, 1100, 10)])
    b = write_csv(tmp_path / "b.csv", [("GPT", 0, 1900, 2000, 2100, 10)])
    for path in (a, b):
        text = open(path).read().replace(",100,", ",3,", 1)
        open(path, "w").write(text)
    result = accgraph.torch.compare(a, b)
    (only,) = result.rows
    assert not only["changed"] and only["delta_ns"] == 1_000_000
    line = next(x for x in result.text().splitlines() if x.startswith("GPT"))
    assert line.split()[-1] == "few"
    assert result.text().splitlines()[-1] == ("1 module(s) with fewer than 20 samples (timed "
                                              "replays or calls) in a run: not judged (few)")


def test_compare_on_the_command_line_fails_above_the_given_slowdown(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    assert cli.main(["compare", a, b]) == 0
    assert "slower" in capsys.readouterr().out
    assert cli.main(["compare", a, b, "--fail-above", "10"]) == 1
    out, err = capsys.readouterr()
    assert "slower" in out and "a slowdown of 20.0% is above --fail-above 10%" in err
    assert cli.main(["compare", a, b, "--fail-above", "25"]) == 0
    capsys.readouterr()
    a, b = two_runs(tmp_path, gpt_after=1040.0)  # inside A's spread: noise, no failure
    assert cli.main(["compare", a, b, "--fail-above", "1"]) == 0
    assert "0 change(s) beyond the noise" in capsys.readouterr().out
    assert cli.main(["compare", a, str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n")
    assert cli.main(["compare", a, str(tmp_path / "bad.csv")]) == 2
    assert "not a statistics CSV of accgraph" in capsys.readouterr().err
    assert cli.main(["compare", "--help"]) == 0
    assert "--fail-above PCT" in capsys.readouterr().out


# --- the command line -------------------------------------------------------------------------

SCRIPT = """
import sys
import torch
from torch_standin import make_gpt

print("script ran", sys.argv[1:])
model = make_gpt(torch)
model(None)
model(None)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    model(None)
for _ in range(3):
    g.replay()
{tail}
"""


def run(tmp_path, args, tail=""):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tail=tail))
    return cli.main([a if a != "SCRIPT" else str(script) for a in args])


def test_cli_prints_the_sections_and_its_csv_feeds_compare(torch, tmp_path, capsys):
    csv = tmp_path / "a.csv"
    assert run(tmp_path, ["--csv", str(csv), "SCRIPT"]) == 0
    out = capsys.readouterr().out
    sections = [line for line in out.splitlines() if line.startswith(("graph ", "eager"))]
    assert sections[0].startswith("graph ") and "(train.py:11): 3 replays" in sections[0]
    assert sections[1].startswith("eager: 1 calls") and sections[2].startswith("eager, first call")
    rows = read_stats_csv(csv)
    assert {(r["graph_id"] != 0, r["first_call"]) for r in rows} == {(True, False), (False, False),
                                                                    (False, True)}
    assert run(tmp_path, ["--csv", str(tmp_path / "b.csv"), "SCRIPT"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(csv), str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "0 module(s) in one run only" in out and "GPT/h.1/mlp/c_fc" in out


def test_cli_help_shows_examples(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "compare a.csv b.csv --fail-above 5" in out
    assert "--html FILE" in out and "--min-share PCT" in out


@pytest.mark.parametrize("option", ["--trace", "--csv", "--html"])
@pytest.mark.parametrize("where", ["missing directory", "a directory"])
def test_cli_refuses_an_output_it_cannot_write_before_running_the_script(torch, tmp_path, capsys,
                                                                         option, where):
    # audit 2026-11-28 B15: the script ran to the end, then the file could not be written.
    # B16 (--csv is a directory) too: refused before the run as well.
    path = tmp_path / "no_such_dir" / "out" if where == "missing directory" else tmp_path
    assert run(tmp_path, [option, str(path), "SCRIPT"]) == 2
    out, err = capsys.readouterr()
    assert "script ran" not in out and out == ""
    assert len(err.strip().splitlines()) == 1, err
    reason = "No such file or directory" if where == "missing directory" else "Is a directory"
    assert err.startswith(f"python -m accgraph.torch: {option}: cannot open '{path}' for "
                          f"writing: {reason}: ")
    assert err.rstrip().endswith("(nothing was run)")
    assert not accgraph.torch.is_instrumented()


def test_cli_keyboard_interrupt_exits_130_after_the_table(torch, tmp_path, capsys):
    # audit 2026-11-28 B14: python itself exits 130 on an uncaught KeyboardInterrupt.
    assert run(tmp_path, ["SCRIPT"], tail="raise KeyboardInterrupt") == 130
    out, err = capsys.readouterr()
    assert "5 report(s)" in out and "\n  h.1 " in out
    assert err.startswith("Traceback") and err.rstrip().endswith("KeyboardInterrupt")


def test_cli_a_report_that_cannot_be_written_after_the_run_is_an_error_after_the_table(
        torch, tmp_path, capsys):
    # Issue 37 item 5: the table is never lost; the exit code says a report is missing.
    out_dir = tmp_path / "reports"
    out_dir.mkdir()
    html, csv = out_dir / "r.html", tmp_path / "r.csv"
    tail = f"import shutil; shutil.rmtree({str(out_dir)!r})"  # gone after the check
    assert run(tmp_path, ["--html", str(html), "--csv", str(csv), "SCRIPT"], tail=tail) == 1
    out, err = capsys.readouterr()
    assert "5 report(s)" in out and "\n  h.1 " in out
    assert f"accgraph.torch: wrote {csv}" in out and csv.exists()  # the other file is written
    assert f"{html} could not be written" in err and "No such file or directory" in err
    out_dir.mkdir()
    assert run(tmp_path, ["--html", str(html), "SCRIPT"], tail=tail + "; sys.exit(3)") == 3
    out, err = capsys.readouterr()
    assert "5 report(s)" in out and "could not be written" in err


def test_cli_table_options(torch, tmp_path, capsys):
    assert run(tmp_path, ["--top", "3", "--sort", "total", "SCRIPT"]) == 0
    out = capsys.readouterr().out
    assert f"({len(gpt_paths()) - 3} of {len(gpt_paths())} rows not shown: --top 3)" in out
    assert run(tmp_path, ["--flat", "--min-share", "0", "SCRIPT"]) == 0
    out = capsys.readouterr().out
    assert "\nGPT/h.1/mlp/c_fc " in out
    assert all(len(line) <= 100 for line in out.splitlines() if not line.startswith("accgraph"))
    assert run(tmp_path, ["--top", "-1", "SCRIPT"]) == 2
    assert "--top must be >= 0 (got -1)" in capsys.readouterr().err


# --- sampled timing (Note [Sampled replays]): replays run and timed ----------------------------

def sampled_host_run(tmp_path, replays=40):
    """A host graph timed 1 in 4 (the host backend launches it without markers otherwise)."""
    prof = accgraph.Profiler(sample_every=4, sample_seed=3)
    s, g, _ = timed_host_graph(prof, "GPT")
    for _ in range(replays):
        g.replay(s)
    prof.flush()
    return prof, g


def test_the_table_says_how_many_replays_were_timed_of_how_many_run(tmp_path):
    prof, g = sampled_host_run(tmp_path)
    table = module_table(prof)
    assert table.splitlines()[0].startswith(f"graph {g.id}: 40 replays, 10 timed (1 in 4), ")
    assert "every replay timed" not in table
    assert [r["count"] for r in accgraph.torch.stats_by_context(prof)[f"graph {g.id}"]] == [10]
    # The CSV keeps both counts (the N is the profiler's: not in it).
    prof.write_stats_csv(tmp_path / "stats.csv")
    rows = read_stats_csv(tmp_path / "stats.csv")
    assert [(r["replays_run"], r["replays_timed"], r["count"]) for r in rows] == [(40, 10, 10)]
    assert module_table(str(tmp_path / "stats.csv")).startswith(
        f"graph {g.id}: 40 replays, 10 timed, ")


def test_an_older_csv_without_the_replay_columns_is_read_as_before(tmp_path):
    old = write_csv(tmp_path / "old.csv", [("GPT", 0, 900, 1000, 1100, 10)], count=12)
    assert open(old).readline().strip().endswith(",p05_ns")
    assert module_table(old).startswith("graph 3: 12 replays, 1000 us per replay")
    result = accgraph.torch.compare(old, old)
    assert "A: " not in result.text()


def test_compare_judges_a_sampled_run_by_its_timed_replays(tmp_path):
    # 200 replays timed 1 in 16 give 12 samples: too few to know the spread, not judged.
    a = write_csv(tmp_path / "a.csv", [("GPT", 0, 900, 1000, 1100, 10)], count=200,
                  replays=(200, 200))
    b = write_csv(tmp_path / "b.csv", [("GPT", 0, 1900, 2000, 2100, 10)], count=12,
                  replays=(200, 12))
    result = accgraph.torch.compare(a, b)
    (only,) = result.rows
    assert not only["changed"]
    text = result.text().splitlines()
    assert text[1] == "  A: 200 replays, 200 timed; B: 200 replays, 12 timed"
    assert next(x for x in text if x.startswith("GPT")).split()[-1] == "few"
    # 640 replays timed 1 in 16: 40 samples, judged.
    c = write_csv(tmp_path / "c.csv", [("GPT", 0, 1900, 2000, 2100, 10)], count=40,
                  replays=(640, 40))
    assert accgraph.torch.compare(a, c).rows[0]["changed"]


def test_compare_of_two_profilers_shows_their_sampling(tmp_path):
    (a, g), (b, _) = sampled_host_run(tmp_path), sampled_host_run(tmp_path, replays=80)
    text = accgraph.torch.compare(a, b).text().splitlines()
    # Graph ids differ between the two runs (one process): each run's section is its own.
    assert "  A: 40 replays, 10 timed (1 in 4); B: -" in text


def test_a_long_graph_header_drops_its_explanation_before_its_counts():
    rows = [dict(row("M", 0, 1000, 0), replays_run=20, replays_timed=20)]
    label = "torch_modules.py:123 in decode_step"  # fits only without the explanation
    header = module_table(rows, labels={7: label}).splitlines()[0]
    assert header == f"graph 7 ({label}): 20 replays, 20 timed, 1000 us per replay"
    assert module_table(rows).splitlines()[0] == (
        "graph 7: 20 replays, 20 timed, 1000 us per replay (p50, sum of the top-level rows)")
