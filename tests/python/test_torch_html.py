"""The HTML reports' files without a browser (Note [HTML report] in accgraph/torch/_html.py): what
the page embeds (escaping, finite numbers, the tree of a deep run), what write_html takes, the
words it uses for regions and modules, and the differential report of compare (--html). The
browser test (test_torch_report_browser.py) checks what the pages draw."""

import contextlib
import json
import re

import pytest

import accgraph
import accgraph.torch
from accgraph.torch import __main__ as cli
from accgraph.torch._html import html_report, report_data

DATA = re.compile(r'<script type="application/json" id="data">(.*?)</script>', re.S)


def row(path, depth=0, p50=1000.0, count=100, graph_id=1, **extra):
    out = {"path": path, "depth": depth, "count": count, "p05_ns": 0.9 * p50, "p50_ns": p50,
           "p95_ns": 1.1 * p50, "self_p50_ns": p50, "graph_id": graph_id, "first_call": False}
    out.update(extra)
    return out


def embedded(page):
    """The JSON text of the page's data element (everything between its tags)."""
    (text,) = DATA.findall(page)
    return text


def host_profiler(names, depth=1):
    """A host Profiler with one eager call of each of `names` (regions nested `depth` deep)."""
    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, 64)
    for name in names:
        with contextlib.ExitStack() as stack:
            for _ in range(depth):
                stack.enter_context(prof.region(s, name))
            s.fill(buf, 1)
    s.synchronize()
    prof.flush()
    return prof


# --- what the page embeds (audit 2026-12-07: H02, H07, H09) ----------------------------------

@pytest.mark.parametrize("name", ["<!--<script>", "</script><script>alert(1)</script>",
                                  "a<!--b", "x&amp;<b>"])
def test_no_name_puts_markup_into_the_data_element(name):
    # H02: "<!--" then "<script" in the data put the tokenizer into "script data double
    # escaped", where "</script>" no longer ends the element: the page's script became data.
    rows = [row("GPT"), row(f"GPT/{name}", depth=1, p50=500.0)]
    page = html_report(rows)
    text = embedded(page)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == json.loads(json.dumps(report_data(rows)))
    assert page.count("</script>") == 2  # the data element's and the page script's


def test_a_nan_or_inf_in_a_stats_csv_is_refused_naming_the_file_and_region(tmp_path):
    # H07: json.dumps wrote NaN / Infinity, which the page's JSON.parse rejects: a blank page.
    prof = host_profiler(["load", "step"])
    good = tmp_path / "stats.csv"
    prof.write_stats_csv(good)
    lines = good.read_text().splitlines()
    header = lines[0].split(",")
    for field, value in (("p50_ns", "nan"), ("p95_ns", "inf"), ("self_p50_ns", "-inf")):
        cells = lines[2].split(",")
        cells[header.index(field)] = value
        bad = tmp_path / f"bad-{field}.csv"
        bad.write_text("\n".join([lines[0], lines[1], ",".join(cells)] + lines[3:]) + "\n")
        out = tmp_path / "r.html"
        with pytest.raises(accgraph.InvalidArgumentError) as error:
            accgraph.torch.write_html(str(bad), out)
        message = str(error.value)
        # The stats reader refuses it first, naming the file, the line and the field.
        assert f"{bad}:3: {field} is {value}" in message, message
        assert "infinite" in message and "Profiler.write_stats_csv" in message
        assert not out.exists()
    accgraph.torch.write_html(str(good), tmp_path / "r.html")


def test_a_thousand_nested_regions_make_a_report(tmp_path):
    # H09: report_data's recursive walk raised RecursionError at depth 999.
    prof = host_profiler(["r"], depth=1000)
    out = tmp_path / "deep.html"
    accgraph.torch.write_html(prof, out)
    data = json.loads(embedded(out.read_text()))
    (context,) = data["contexts"]
    rows = context["rows"]
    assert len(rows) == 1000
    assert [r["parent"] for r in rows] == list(range(-1, 999))
    assert rows[-1]["depth"] == 999 and rows[-1]["name"] == "r"


# --- what write_html takes (H16) and says -----------------------------------------------------

@pytest.mark.parametrize("source", [None, 5, b"stats.csv", {"path": "GPT"}, [1, 2]])
def test_write_html_of_a_wrong_source_says_what_it_takes(tmp_path, source):
    out = tmp_path / "r.html"
    with pytest.raises(TypeError, match=r"write_html takes a Profiler, the path of a statistics "
                       r"CSV \(--csv, Profiler.write_stats_csv\) or its rows "
                       r"\(Profiler.stats\(\)\); got " + type(source).__name__):
        accgraph.torch.write_html(source, out)
    assert not out.exists()


def test_a_host_profilers_page_says_region_and_a_torch_runs_says_module(tmp_path):
    prof = host_profiler(["load", "step"])
    page = html_report(prof)
    assert "<title>accgraph region timing</title>" in page
    assert 'placeholder="search regions' in page and "Per region (microseconds)" in page
    assert json.loads(embedded(page))["noun"] == "region"
    assert "module" not in page.split("<style>")[0] + page.split("</style>")[1].split(
        '<script type="application/json"')[0]
    page = html_report([row("GPT")], classes={"GPT": "GPT2"})
    assert "<title>accgraph module timing</title>" in page and "Per module" in page
    assert json.loads(embedded(page))["noun"] == "module"


# --- the differential report: compare --html --------------------------------------------------

def two_runs(tmp_path):
    """Two stats CSVs of one graph: GPT slower beyond the noise, attn within it, mlp faster,
    old only in A, new only in B."""
    a = [row("GPT", p50=1000.0), row("GPT/attn", 1, 300.0), row("GPT/mlp", 1, 400.0),
         row("GPT/old", 1, 6.0)]
    b = [row("GPT", p50=1500.0), row("GPT/attn", 1, 305.0), row("GPT/mlp", 1, 200.0),
         row("GPT/new", 1, 6.0)]
    return a, b


def test_compare_writes_the_differential_report_with_its_verdicts(tmp_path):
    a, b = two_runs(tmp_path)
    out = tmp_path / "diff.html"
    result = accgraph.torch.compare(a, b, html=out)
    data = json.loads(embedded(out.read_text()))
    assert data["kind"] == "diff"
    (context,) = data["contexts"]
    verdicts = {r["path"]: r["verdict"] for r in context["rows"]}
    assert verdicts == {"GPT": "slower", "GPT/attn": "", "GPT/mlp": "faster",
                        "GPT/new": "only B", "GPT/old": "only A"}
    flagged = {r["path"] for r in result.changes}
    assert flagged == {p for p, v in verdicts.items() if v in ("slower", "faster")}
    gone = next(r for r in context["rows"] if r["path"] == "GPT/old")
    assert gone["b"] is None and gone["a"]["p50"] == 6.0 and gone["parent"] == 0
    assert context["header"].startswith("A: 100 replays, 1.00 us; B: 100 replays, 1.50 us per")


def test_compare_html_on_the_command_line(tmp_path, capsys):
    a, b = (tmp_path / "a.csv", tmp_path / "b.csv")
    for path, names in ((a, ["load", "step"]), (b, ["load", "step", "save"])):
        host_profiler(names).write_stats_csv(path)
    out = tmp_path / "diff.html"
    assert cli.main(["compare", str(a), str(b), "--html", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "only B" in stdout and stdout.endswith(f"accgraph.torch: wrote {out}\n")
    page = out.read_text()
    assert f"A: {a}" in page and f"B: {b}" in page and "region timing: B against A" in page
    # An output that cannot be written is refused before anything is compared.
    missing = tmp_path / "no-such-dir" / "diff.html"
    assert cli.main(["compare", str(a), str(b), "--html", str(missing)]) == 2
    out_text, err = capsys.readouterr()
    assert out_text == "" and "--html" in err and "nothing was compared" in err
    assert cli.main(["compare", "--help"]) == 0
    assert "--html FILE" in capsys.readouterr().out
