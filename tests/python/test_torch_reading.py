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
from accgraph.torch._table import elide, module_table, read_stats, read_stats_csv, us
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

def write_csv(path, rows, count=100, replays=None, graph=3, label=None):
    """rows: (path, depth, p05, p50, p95, self_p50) in us, graph `graph` (labelled `label`),
    `count` samples each; `replays`: (run, timed) in the columns of those names, None: a CSV of
    before them (and before the label and schema columns)."""
    lines = [CSV_HEADER if replays else OLD_CSV_HEADER]
    for p, depth, p05, p50, p95, self_p50 in rows:
        ns = [x * 1000 for x in (p05, p50, p95, self_p50)]
        tail = (f",{replays[0]},{replays[1]},{label or ''},{accgraph.stats_schema_version()}"
                if replays else "")
        lines.append(f"{p},{depth},{count},{ns[0]},{ns[1]},{ns[1]},{ns[2]},{ns[2]},{count},0,0,"
                     f"{ns[3]},0,0,{graph},0,{ns[0]}" + tail)
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
    (a, g), (b, h) = sampled_host_run(tmp_path), sampled_host_run(tmp_path, replays=80)
    text = accgraph.torch.compare(a, b).text().splitlines()
    # Graph ids differ between the two runs (one process); the graphs match by what they hold
    # (Note [Matching contexts]), and each side's replays are its own.
    assert h.id != g.id
    assert text[0].startswith(f"graph {h.id} (graph {g.id} in A): ")
    assert "  A: 40 replays, 10 timed (1 in 4); B: 80 replays, 20 timed (1 in 4)" in text


def test_a_long_graph_header_drops_its_explanation_before_its_counts():
    rows = [dict(row("M", 0, 1000, 0), replays_run=20, replays_timed=20)]
    label = "torch_modules.py:123 in decode_step"  # fits only without the explanation
    header = module_table(rows, labels={7: label}).splitlines()[0]
    assert header == f"graph 7 ({label}): 20 replays, 20 timed, 1000 us per replay"
    assert module_table(rows).splitlines()[0] == (
        "graph 7: 20 replays, 20 timed, 1000 us per replay (p50, sum of the top-level rows)")


# --- compare's input checks (the reliability audit's C rows) -----------------------------------

def refused(capsys, *args):
    """compare's exit code 2 and its one line on stderr, never a traceback."""
    assert cli.main(["compare", *map(str, args)]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_c08_a_cut_down_csv_is_refused_naming_the_missing_columns(tmp_path, capsys):
    cut = tmp_path / "cut.csv"
    cut.write_text("path,depth,count,p50_ns\nM,0,100,1000\n")
    err = refused(capsys, cut, cut)
    assert "cut.csv: no p95_ns, self_p50_ns column(s)" in err
    with pytest.raises(accgraph.InvalidArgumentError, match="row 0: no p95_ns, self_p50_ns"):
        accgraph.torch.compare([{"path": "M", "count": 1, "p50_ns": 1.0}], [])


def test_c11_c22_a_cut_row_and_a_second_header_are_named_as_such(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    lines = open(b).read().splitlines()
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[:2] + [lines[2][: len(lines[2]) // 2]]) + "\n")
    err = refused(capsys, a, cut)
    assert "cut.csv:3: wrong number of fields" in err and "cut short" in err, err
    joined = tmp_path / "joined.csv"
    joined.write_text("\n".join(lines + lines) + "\n")
    err = refused(capsys, a, joined)
    assert f"joined.csv:{len(lines) + 1}: a second header line" in err, err


@pytest.mark.parametrize("row_id, field, value", [("C12", "p50", "nan"), ("C13", "p50", "inf"),
                                                  ("C13", "p95", "inf"), ("C14", "p50", "-9000"),
                                                  ("C14", "p05", "-12000")])
def test_c12_c13_c14_nan_inf_and_negative_durations_are_refused(tmp_path, capsys, row_id, field,
                                                                value):
    a, b = two_runs(tmp_path)
    lines = open(b).read().splitlines()
    columns = lines[0].split(",")
    fields = lines[2].split(",")  # GPT/attn, line 3
    fields[columns.index(f"{field}_ns")] = value
    lines[2] = ",".join(fields)
    open(b, "w").write("\n".join(lines) + "\n")
    err = refused(capsys, a, b)
    assert f"b.csv:3: {field}_ns is" in err and "NaN, infinite or negative" in err
    with pytest.raises(accgraph.InvalidArgumentError, match=f"{field}_ns is"):
        module_table(b)


def test_c16_terminal_escapes_in_names_are_shown_as_the_stats_table_shows_them(tmp_path, capsys):
    prof = accgraph.Profiler()
    stream = accgraph.Stream("host")
    names = ["clear\x1b[2J\x1b[31m", "title\x1b]0;pwned\x07", "two\nlines", "c1\u0085"]
    for name in names:
        with prof.region(stream, name):
            pass
    prof.flush()

    def shown_escaped(text):
        assert not any(c in text for c in "\x1b\x07\u0085"), text
        assert "clear\\x1b[2J\\x1b[31m" in text and "title\\x1b]0;pwned\\x07" in text
        assert "two\\x0alines" in text and "c1\\u0085" in text

    shown_escaped(module_table(prof))
    shown_escaped(accgraph.torch.compare(prof, prof).text())
    prof.write_stats_csv(tmp_path / "a.csv")
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "a.csv")]) == 0
    out = capsys.readouterr().out
    shown_escaped(out)
    # The same escapes as accgraph's own table (one rule: accgraph::timing::table_text).
    assert "clear\\x1b[2J\\x1b[31m" in prof.stats_table()
    assert "0 module(s) in one run only" in out


@pytest.mark.parametrize("row_id, pct", [("C18", "nan"), ("C19", "-1"), ("C19", "-inf")])
def test_c18_c19_a_fail_above_that_is_not_a_percentage_is_refused(tmp_path, capsys, row_id, pct):
    a, b = two_runs(tmp_path)
    err = refused(capsys, a, a, f"--fail-above={pct}")
    assert f"--fail-above must be a percentage >= 0 (got {float(pct):g})" in err


def test_c21_a_modules_row_given_twice_is_refused_naming_both_lines(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    lines = open(b).read().splitlines()
    lines.append(lines[2].replace(",305000.0,", ",9000000.0,"))  # attn again, 9 ms
    open(b, "w").write("\n".join(lines) + "\n")
    err = refused(capsys, a, b)
    assert "b.csv:6: the row of 'GPT/attn' in graph 3 is given twice (" in err
    assert "b.csv:3 too): two exports put together?" in err


def test_c25_bytes_that_are_not_utf8_are_refused_naming_the_file_and_line(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    data = open(b, "rb").read().replace(b"GPT/new", b"GPT/n\xffw")
    open(b, "wb").write(data)
    err = refused(capsys, a, b)
    assert "b.csv:5: not UTF-8 text (byte 0xff at offset" in err


def test_c26_a_csv_with_a_byte_order_mark_is_read(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    data = open(b, "rb").read()
    open(b, "wb").write(b"\xef\xbb\xbf" + data)
    assert cli.main(["compare", a, b]) == 0
    assert "1 change(s) beyond the noise" in capsys.readouterr().out


@pytest.mark.parametrize("a, b, which, got", [(5, None, "a", "int"), ([], None, "b", "NoneType"),
                                              ({"path": "M"}, [], "a", "dict")])
def test_c27_compare_of_what_is_not_a_run_is_a_type_error_saying_what_it_takes(a, b, which, got):
    with pytest.raises(TypeError, match=f"compare: {which} must be a path to a statistics CSV "
                                        f"or JSON file, a Profiler, or rows .*; got {got}"):
        accgraph.torch.compare(a, b)
    with pytest.raises(TypeError, match="row 0 is a int: give RegionStats objects or dicts"):
        accgraph.torch.compare([5], [])


def test_c28_a_200000_character_path_written_by_accgraph_is_read_back(tmp_path, capsys):
    prof = accgraph.Profiler()
    stream = accgraph.Stream("host")
    with prof.region(stream, "x" * 200_000):
        pass
    prof.flush()
    prof.write_stats_csv(tmp_path / "long.csv")
    assert cli.main(["compare", str(tmp_path / "long.csv"), str(tmp_path / "long.csv")]) == 0
    assert "0 module(s) in one run only" in capsys.readouterr().out
    assert [len(r["path"]) for r in read_stats_csv(tmp_path / "long.csv")] == [200_000]
    import csv
    assert csv.field_size_limit() == 131072  # put back after reading


def test_h10_a_thousand_nested_regions_print_as_a_table(tmp_path):
    rows, path = [], ""
    for depth in range(1000):
        path = f"{path}/r{depth}" if path else "r0"
        rows.append(row(path, depth, 1000 - depth, 1))
    table = module_table(rows)
    assert len(body(table)) == 1000
    assert len(body(module_table(rows, sort="total"))) == 1000


# --- contexts matched across runs (Note [Matching contexts]) -----------------------------------

def graph_rows(graph, modules, p50=1000.0, label=None):
    """The rows of one graph holding `modules` (GPT and its children), p50 in us."""
    out = [dict(row("GPT", 0, p50, 1, count=100), graph_id=graph)]
    out += [dict(row(f"GPT/{m}", 1, p50 / 2, p50 / 2, count=100), graph_id=graph)
            for m in modules]
    if label:
        for r in out:
            r["graph_label"] = label
    return out


def test_c24_graphs_match_when_run_b_captures_an_extra_graph_first(tmp_path, capsys):
    # A: prefill (graph 3) and decode (graph 4) at one site. B: a warm-up graph of other modules
    # at another site captured first shifts the ids (4, 5), and decode is 2x slower.
    for labelled in (True, False):
        site = "serve.py:40" if labelled else None
        a = graph_rows(3, ["attn", "mlp"], label=site) + graph_rows(4, ["attn", "mlp"], label=site)
        b = (graph_rows(3, ["warm"], label="serve.py:12" if labelled else None) +
             graph_rows(4, ["attn", "mlp"], label=site) +
             graph_rows(5, ["attn", "mlp"], p50=2000.0, label=site))
        result = accgraph.torch.compare(a, b)
        sections = {s: name for s, name in result.names.items()}
        # In B's capture order: its extra graph first.
        assert [(s.a, s.b) for s in sections] == [(None, (3, False)),
                                                   ((3, False), (4, False)),
                                                   ((4, False), (5, False))]
        slower = [(r["context"].a, r["path"]) for r in result.changes]
        assert slower == [((4, False), "GPT"), ((4, False), "GPT/attn"), ((4, False), "GPT/mlp")]
        assert result.worst_slowdown_pct == pytest.approx(100.0)
        assert result.not_compared is None  # B's extra graph is new work, not a gap in A
        assert list(sections.values())[0].endswith(", in B only")
        if labelled:
            assert list(sections.values())[1] == "graph 4 (serve.py:40; graph 3 in A)"
    # Through the files: the CSV carries each graph's label, the gate trips on the slowdown.
    write_csv(tmp_path / "a.csv", [("GPT", 0, 900, 1000, 1100, 10)], replays=(100, 100),
              graph=3, label="serve.py:40")
    b_lines = open(write_csv(tmp_path / "b.csv", [("GPT", 0, 1900, 2000, 2100, 10)],
                             replays=(100, 100), graph=4, label="serve.py:40")).read()
    extra = write_csv(tmp_path / "x.csv", [("GPT/warm", 0, 9, 10, 11, 10)], replays=(100, 100),
                      graph=3, label="serve.py:12")
    open(tmp_path / "b.csv", "w").write(b_lines + open(extra).read().split("\n", 1)[1])
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                     "--fail-above", "5"]) == 1
    out, err = capsys.readouterr()
    assert "graph 4 (serve.py:40; graph 3 in A)" in out and "a slowdown of 100.0%" in err


def test_c24_a_gate_that_compared_nothing_fails_and_says_so(tmp_path, capsys):
    a = write_csv(tmp_path / "a.csv", [("GPT", 0, 900, 1000, 1100, 10)], replays=(100, 100),
                  label="a.py:1")
    b = write_csv(tmp_path / "b.csv", [("Other", 0, 1900, 2000, 2100, 10)], replays=(100, 100),
                  label="b.py:1")
    assert cli.main(["compare", a, b]) == 0  # without a gate: the table says it
    out = capsys.readouterr().out
    assert "not compared: nothing was compared: no module is in both runs" in out
    assert cli.main(["compare", a, b, "--fail-above", "5"]) == 1
    assert "--fail-above 5% cannot pass: nothing was compared" in capsys.readouterr().err
    # A graph of A that matches none of B: the gate cannot vouch for it either.
    two = graph_rows(3, ["attn"], label="a.py:1") + graph_rows(4, ["mlp"], label="a.py:9")
    result = accgraph.torch.compare(two, graph_rows(7, ["attn"], label="a.py:1"))
    assert result.not_compared == ("1 section(s) of A match no section of B: graph 4 (a.py:9), "
                                   "in A only")


def test_c23_a_baseline_without_context_columns_is_matched_or_refused(tmp_path, capsys):
    old_header = ",".join(accgraph.stats_csv_columns()[:14])
    old = tmp_path / "old.csv"
    old.write_text(old_header + "\n" + "GPT,0,100,900000,1000000,1000000,1100000,1100000,100,0,"
                   "0,10000,0,0\n")
    b = write_csv(tmp_path / "b.csv", [("GPT", 0, 1900, 2000, 2100, 10)], replays=(100, 100))
    # One context in B: matched, and the 2x slowdown trips the gate.
    assert cli.main(["compare", str(old), b, "--fail-above", "5"]) == 1
    out, err = capsys.readouterr()
    assert "graph 3 (all reports in A)" in out and "a slowdown of 100.0%" in err
    # Several contexts in B (graph and eager): its rows cannot be told apart: refused.
    lines = open(b).read().splitlines()
    lines.append(lines[1].replace(",3,0,", ",0,0,"))  # the same module eagerly
    open(b, "w").write("\n".join(lines) + "\n")
    err = refused(capsys, old, b, "--fail-above", "5")
    assert ("A (" in err and "old.csv) has no graph_id and first_call columns" in err and
            "cannot be matched to the 2 contexts of the other run" in err)


def test_a_stats_file_of_a_newer_schema_is_refused(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    newer = accgraph.stats_schema_version() + 1
    c = write_csv(tmp_path / "c.csv", [("GPT", 0, 900, 1000, 1100, 10)], replays=(1, 1))
    text = open(c).read()
    open(c, "w").write(text.replace(f",{newer - 1}\n", f",{newer}\n"))
    err = refused(capsys, a, c)
    assert f"c.csv:2: written by a newer accgraph (statistics schema {newer}; " in err


# --- statistics as JSON (README: "Statistics as JSON") ------------------------------------------

def readme_stats_schema():
    """The JSON document the README's "Statistics as JSON" shows."""
    import json
    import pathlib
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Statistics as JSON", 1)[1]
    block = section.split("```json\n", 1)[1].split("```", 1)[0]
    return json.loads(block)


def test_the_stats_json_holds_the_schema_the_readme_documents(tmp_path):
    import json
    prof, g = sampled_host_run(tmp_path)
    stream = accgraph.Stream("host")
    with prof.region(stream, "eager"):
        pass
    prof.flush()
    prof.write_stats_json(tmp_path / "s.json", graph_labels={g.id: "train.py:7"},
                          metadata={"torch_version": "2.11.0"})
    document = json.loads((tmp_path / "s.json").read_text())
    documented = readme_stats_schema()

    def same_keys(got, want, where):
        assert set(got) == set(want), where
        for key, value in want.items():
            assert type(got[key]) in ((int, float) if type(value) in (int, float) else
                                      (type(value), type(None))), f"{where}.{key}"

    same_keys(document, documented, "document")
    same_keys(document["run"], documented["run"], "run")
    same_keys(document["run"]["devices"][0], documented["run"]["devices"][0], "devices[0]")
    same_keys(document["graphs"][0], documented["graphs"][0], "graphs[0]")
    for region in document["regions"]:
        same_keys(region, documented["regions"][0], "regions[]")
    assert document["schema_version"] == accgraph.stats_schema_version()
    assert document["run"]["sample_every"] == 4 and document["run"]["sample_seed"] == 3
    assert document["run"]["devices"][0]["backend"] == "host"
    assert document["run"]["metadata"] == {"torch_version": "2.11.0"}
    assert document["graphs"] == [{"graph_id": g.id, "label": "train.py:7", "replays_run": 40,
                                   "replays_timed": 10, "sample_every": 4, "sampled": True}]
    # The same facts as the CSV: every column but the label (the graph's) and the version.
    prof.write_stats_csv(tmp_path / "s.csv", graph_labels={g.id: "train.py:7"})
    from_csv, from_json = read_stats_csv(tmp_path / "s.csv"), read_stats(tmp_path / "s.json")
    assert [dict(r, schema_version=None) for r in from_csv] == \
        [dict(r, schema_version=None) for r in from_json]


def test_compare_reads_json_as_it_reads_csv(tmp_path, capsys):
    prof, g = sampled_host_run(tmp_path)
    prof.write_stats_json(tmp_path / "a.json")
    prof.write_stats_csv(tmp_path / "a.csv")
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "a.csv")]) == 0
    out = capsys.readouterr().out
    assert "0 module(s) in one run only" in out and "A: 40 replays, 10 timed" in out
    (tmp_path / "bad.json").write_text('{"schema": "other"}')
    assert "not a statistics JSON of accgraph" in refused(capsys, tmp_path / "bad.json",
                                                          tmp_path / "a.csv")
    (tmp_path / "cut.json").write_text((tmp_path / "a.json").read_text()[:-10])
    assert "cut.json: not JSON (" in refused(capsys, tmp_path / "cut.json", tmp_path / "a.csv")


def test_cli_writes_the_stats_json_with_the_runs_metadata(torch, tmp_path, capsys):
    import json
    assert run(tmp_path, ["--json", str(tmp_path / "run.json"), "--csv", str(tmp_path / "run.csv"),
                          "SCRIPT"]) == 0
    capsys.readouterr()
    document = json.loads((tmp_path / "run.json").read_text())
    assert document["run"]["metadata"]["torch_version"] == torch.__version__
    (graph,) = document["graphs"]
    assert graph["label"] == "train.py:11"
    assert {r["graph_label"] for r in read_stats_csv(tmp_path / "run.csv")
            if r["graph_id"]} == {"train.py:11"}


MATCH_SCRIPT = """
import torch
from torch_standin import make_gpt

{extra}
model = make_gpt(torch, seconds={seconds})
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    model(None)
for _ in range(25):
    g.replay()
"""

EXTRA_CAPTURE = """
warm = make_gpt(torch, blocks=1)
w = torch.cuda.CUDAGraph()
with torch.cuda.graph(w):
    warm(None)
w.replay()
"""


def test_c24_two_runs_of_the_command_line_match_although_b_captured_a_graph_first(torch,
                                                                                   tmp_path,
                                                                                   capsys):
    for name, extra, seconds in (("a", "", 0.0005), ("b", EXTRA_CAPTURE, 0.0015)):
        script = tmp_path / f"{name}.py"
        script.write_text(MATCH_SCRIPT.format(extra=extra, seconds=seconds))
        assert cli.main(["--graphs-only", "--csv", str(tmp_path / f"{name}.csv"),
                         str(script)]) == 0
    capsys.readouterr()
    result = accgraph.torch.compare(str(tmp_path / "a.csv"), str(tmp_path / "b.csv"))
    (matched,) = [s for s in result.names if s.a and s.b]
    (extra,) = result.sections_only_b
    assert matched.a != matched.b and extra.b[0] < matched.b[0]  # B's graph came second
    # B's graph is named by its own capture site, a line further down than A's.
    site = (tmp_path / "b.py").read_text().splitlines().index("with torch.cuda.graph(g):") + 1
    name = result.names[matched]
    assert name.startswith(f"graph {matched.b[0]} (b.py:{site}; graph {matched.a[0]} in A)")
    rows = [r for r in result.rows if r["context"] == matched]
    assert {r["path"] for r in rows} == set(gpt_paths()) and not result.not_compared
    gpt = next(r for r in rows if r["path"] == "GPT")
    assert gpt["ratio"] > 1.5  # three times the work per leaf


def test_the_options_that_take_a_value_are_the_parsers():
    # The command line splits its own options from the script's by what its parser declares
    # (design review 2.5: a second list of them drifted from argparse). Every option that takes a
    # value, and one added to the parser now, takes the word after it.
    parser = cli._parser()
    valued = [name for action in parser._actions if action.nargs != 0
              for name in action.option_strings if name != "-m"]
    assert "--trace" in valued and "--keep" in valued and "--flat" not in valued
    for name in valued:
        assert cli._split([name, "x", "train.py", "--lr", "1"], parser) == (
            [name, "x"], ["train.py", "--lr", "1"]), name
    parser.add_argument("--new-option", metavar="V")
    assert cli._split(["--new-option", "v", "train.py"], parser) == (
        ["--new-option", "v"], ["train.py"])
    assert cli._split(["--flat", "train.py", "--depth", "2"], parser) == (
        ["--flat"], ["train.py", "--depth", "2"])
