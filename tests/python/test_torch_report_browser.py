"""The HTML reports of python -m accgraph.torch (Note [HTML report] in accgraph/torch/_html.py) in
a real browser: headless Chromium (Debian's chromium package, which scripts/test.sh installs)
loads the file, the test checks the rendered elements and their text against the run's CSV,
searches through ?q=, zooms through ?zoom=, sorts through ?sort=, takes screenshots that must
not be blank, and checks that reports of 5,000 regions draw and zoom in time linear in their
size. The differential report (compare --html) is checked against compare's own verdicts: a
module flagged in compare's text is coloured in the page, and only those. Skipped only where
chromium is missing outside CI (CI=true, or ACCGRAPH_TEST_REQUIRE_CHROMIUM=1 as
scripts/test.sh sets it: a missing chromium fails)."""

import colorsys
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser

import pytest

import accgraph
import accgraph.torch
from accgraph.torch import __main__ as cli
from accgraph.torch._html import html_report
from accgraph.torch._table import Tree, by_context, context_name, read_stats_csv, us
from torch_standin import make_torch


def chromium_path():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true" or os.environ.get("ACCGRAPH_TEST_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is not installed: scripts/test.sh installs Debian's chromium "
                        "package (the HTML report's browser test must run in CI)")
        pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")
    return found


@pytest.fixture(scope="module")
def chromium():
    return chromium_path()


def browse(chromium, tmp_path, page, query="", *extra):
    """Runs headless Chromium on `page` (+ `query`); returns its stdout (--dump-dom: the DOM
    after the page's script ran)."""
    url = "file://" + str(page) + query
    profile = tmp_path / "chromium-profile"
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
                           "--window-size=1200,900", "--virtual-time-budget=10000", *extra, url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """What the test reads of the dumped DOM: the icicle nodes per context (and their hover
    text), the table rows per context, the inverted view's rows per context, the match count
    and the body's data attributes."""

    def __init__(self, text):
        super().__init__()
        self.nodes = {}      # context -> [(path, classes, style)]
        self.titles = {}     # context -> {path: the node's title, for those that have one}
        self.rows = {}       # context -> [(path, classes, [cell texts])]
        self.inverted = {}   # context -> [(key, classes, [cell texts])]
        self.headers = {}    # context -> the table's column titles
        self.body = {}
        self.matches = ""
        self._section = None
        self._table = None
        self._row = None
        self._cell = None
        self._in_matches = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "body":
            self.body = {k: v for k, v in a.items() if k.startswith("data-")}
        elif tag == "section" and "context" in classes:
            self._section = a["data-context"]
            self.nodes[self._section] = []
            self.titles[self._section] = {}
        elif tag == "div" and "node" in classes:
            self.nodes[self._section].append((a["data-path"], classes, a.get("style", "")))
            if "title" in a:
                self.titles[self._section][a["data-path"]] = a["title"]
        elif tag == "table" and ("modules" in classes or "inverted" in classes):
            self._table = (self.rows if "modules" in classes else self.inverted,
                           a["data-context"])
            self._table[0][self._table[1]] = []
            if "modules" in classes:
                self.headers[self._table[1]] = []
        elif tag == "tr" and ("row" in classes or "inv" in classes):
            self._row = (a.get("data-path", a.get("data-key")), classes, [])
            self._table[0][self._table[1]].append(self._row)
        elif tag in ("td", "th") and (self._row is not None or tag == "th"):
            self._cell = ""
        elif tag == "span" and a.get("id") == "matches":
            self._in_matches = True

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row[2].append(self._cell)
            self._cell = None
        elif tag == "th" and self._cell is not None:
            if self._table is not None and self._table[0] is self.rows:
                self.headers[self._table[1]].append(self._cell)
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "span":
            self._in_matches = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_matches:
            self.matches += data


def png_pixels(path):
    """(width, height, channels, rows of bytes) of an 8-bit RGB or RGBA PNG, decoded with zlib
    and the five PNG filters (no imaging library)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat = 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunk = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
        elif kind == b"IDAT":
            idat += chunk
        at += 12 + length
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


@pytest.fixture(scope="module")
def run_report(tmp_path_factory):
    """A stand-in run's CSV and HTML report (python -m accgraph.torch --csv --html)."""
    tmp = tmp_path_factory.mktemp("report")
    standin = make_torch()
    runtime = accgraph.torch._runtime
    saved = (runtime.load_torch, runtime.BACKEND, runtime.streams, sys.modules.get("torch"))
    runtime.load_torch, runtime.BACKEND = (lambda: standin), "host"
    runtime.streams = {}
    sys.modules["torch"] = standin
    script = tmp / "train.py"
    script.write_text("import torch\nfrom torch_standin import make_gpt\n"
                      "model = make_gpt(torch, blocks=3, seconds=0.00002)\n"
                      "for _ in range(3):\n    model(None)\n"
                      "g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    model(None)\n"
                      "for _ in range(8):\n    g.replay()\n")
    try:
        code = cli.main(["--csv", str(tmp / "run.csv"), "--html", str(tmp / "run.html"),
                         str(script)])
    finally:
        accgraph.torch.uninstrument()
        runtime.load_torch, runtime.BACKEND, runtime.streams = saved[:3]
        if saved[3] is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = saved[3]
    assert code == 0
    return tmp, read_stats_csv(tmp / "run.csv"), tmp / "run.html"


def test_the_report_shows_every_region_of_the_csv_and_searches(chromium, run_report):
    tmp, rows, page = run_report
    dom = Dom(browse(chromium, tmp, page, "?q=attn", "--dump-dom"))
    assert dom.body.get("data-ready") == "1"
    labels = accgraph.torch.graph_labels()
    expected = {context_name(c, labels): group for c, group in by_context(rows).items()}
    assert list(dom.nodes) == list(expected)  # graph, eager, eager first call: in this order
    assert list(dom.rows) == list(expected)
    for name, group in expected.items():
        assert sorted(p for p, _, _ in dom.nodes[name]) == sorted(r["path"] for r in group), name
        by_path = {r["path"]: r for r in group}
        assert len(dom.rows[name]) == len(group)
        for path, _, cells in dom.rows[name]:
            r = by_path[path]
            assert cells[0].strip().replace("\xa0", "") == path.rsplit("/", 1)[-1], path
            assert cells[1:5] == [str(r["count"]), us(r["p50_ns"]), us(r["p95_ns"]),
                                  us(r["self_p50_ns"])], path
    # The search: every node and table row whose path holds "attn", and only those.
    matching = [p for group in dom.nodes.values() for p, classes, _ in group if "match" in classes]
    assert matching and all("attn" in p for p in matching)
    assert len(matching) == sum("attn" in r["path"] for r in rows)
    assert dom.matches == f"{len(matching)} matches"
    marked = [p for group in dom.rows.values() for p, classes, _ in group if "match" in classes]
    assert sorted(marked) == sorted(matching)


def test_the_report_zooms_to_a_region_through_the_url(chromium, run_report):
    tmp, rows, page = run_report
    dom = Dom(browse(chromium, tmp, page, "?zoom=GPT/h.1", "--dump-dom"))
    graph = next(iter(dom.nodes))
    shown = {p for p, _, style in dom.nodes[graph] if "display: none" not in style}
    # The zoomed node and its ancestor span the width; its subtree is shown; the rest hidden.
    assert shown == {"GPT", "GPT/h.1"} | {p for p, _, _ in dom.nodes[graph]
                                          if p.startswith("GPT/h.1/")}
    widths = {p: style for p, _, style in dom.nodes[graph] if p in ("GPT", "GPT/h.1")}
    assert all("width: 100%" in style for style in widths.values()), widths


def test_a_screenshot_of_the_report_is_not_blank(chromium, run_report):
    tmp, _, page = run_report
    shot = tmp / "report.png"
    browse(chromium, tmp, page, "?q=attn", f"--screenshot={shot}")
    width, height, channels, rows = png_pixels(shot)
    assert (width, height) == (1200, 900)
    # Luminance over a grid of pixels: a page that drew nothing is one colour.
    samples = [sum(row[x * channels:x * channels + 3]) / 3 for row in rows[::9]
               for x in range(0, width, 7)]
    mean = sum(samples) / len(samples)
    variance = sum((s - mean) ** 2 for s in samples) / len(samples)
    colours = {row[x * channels:x * channels + 3] for row in rows[::9] for x in range(0, width, 7)}
    assert variance > 100 and len(colours) > 20, (variance, len(colours))
    if os.environ.get("ACCGRAPH_REPORT_SCREENSHOT"):  # to refresh docs/ (README)
        shutil.copy(shot, os.environ["ACCGRAPH_REPORT_SCREENSHOT"])


def synthetic_rows(regions):
    """`regions` rows of one graph: 10 top-level modules, each a chain of blocks with leaves."""
    rows, per_top = [], regions // 10
    for t in range(10):
        top = f"Model.{t}"
        rows.append({"path": top, "depth": 0, "count": 100, "p50_ns": 1e6, "p95_ns": 1.1e6,
                     "self_p50_ns": 1e3, "graph_id": 1, "first_call": False})
        for b in range(per_top - 1):
            rows.append({"path": f"{top}/block{b}", "depth": 1, "count": 100,
                         "p50_ns": 1e6 / per_top, "p95_ns": 1.2e6 / per_top,
                         "self_p50_ns": 1e6 / per_top, "graph_id": 1, "first_call": False})
    return rows


def test_the_report_stays_responsive_at_5000_regions(chromium, tmp_path):
    # Drawing and zooming are one pass over the nodes (Note [HTML report]): 5,000 regions take
    # about ten times what 500 take, not a hundred (a bound relative to the same browser's time
    # for 500, floored at 20 ms so that timer noise on a tiny page does not decide).
    times = {}
    for regions in (500, 5000):
        page = tmp_path / f"r{regions}.html"
        page.write_text(html_report(synthetic_rows(regions)))
        dom = Dom(browse(chromium, tmp_path, page, "?zoom=Model.3", "--dump-dom"))
        assert sum(len(n) for n in dom.nodes.values()) == regions
        times[regions] = (float(dom.body["data-render-ms"]), float(dom.body["data-zoom-ms"]))
    render, zoom = zip(times[500], times[5000])
    print(f"render ms (500, 5000): {render}; zoom ms: {zoom}")
    assert render[1] <= 40 * max(render[0], 20.0), times
    assert zoom[1] <= 40 * max(zoom[0], 20.0), times


ROOT = pathlib.Path(__file__).resolve().parents[2]


def background(style):
    """(hue in degrees, saturation, lightness) of a node's inline background colour (Chromium
    writes it back as rgb(...) once the script set other properties)."""
    m = re.search(r"background(?:-color)?:\s*(rgb|hsl)\(([^)]*)\)", style)
    assert m, style
    values = [float(v.strip().rstrip("%")) for v in m.group(2).split(",")[:3]]
    if m.group(1) == "hsl":
        return values[0], values[1] / 100, values[2] / 100
    h, l, s = colorsys.rgb_to_hls(*(v / 255 for v in values))
    return h * 360, s, l


def is_hue(colour, low, high):
    """A saturated colour whose hue lies in [low, high] degrees (low > high: around red)."""
    hue, saturation, _ = colour
    inside = low <= hue <= high if low <= high else hue >= low or hue <= high
    return inside and saturation > 0.5


def test_the_report_marks_narrow_labels_and_colours_neighbours_apart(chromium, run_report):
    tmp, rows, page = run_report
    dom = Dom(browse(chromium, tmp, page, "", "--dump-dom"))
    for name, group in by_context(rows).items():
        name = context_name(name, accgraph.torch.graph_labels())
        nodes = {p: (classes, style) for p, classes, style in dom.nodes[name]}
        shown = {p: n for p, n in nodes.items() if "display: none" not in n[1]}
        # A node too narrow for its label shows none and has its path as hover text; the wider
        # ones show their label and need no title (the tooltip has the details).
        narrow = {p for p, (classes, _) in shown.items() if "narrow" in classes}
        assert dom.titles[name] == {p: p for p in narrow}, name
        width = {p: float(re.search(r"width: ([0-9.e-]+)%", s).group(1))
                 for p, (_, s) in shown.items()}
        if narrow and len(narrow) < len(shown):
            assert max(width[p] for p in narrow) < min(width[p] for p in shown
                                                       if p not in narrow), name
        # Neighbours differ: a node's colour is neither its parent's nor its previous sibling's.
        tree = Tree(group)
        colour = {p: background(style) for p, (_, style) in nodes.items()}
        for i, r in enumerate(tree.rows):
            parent = tree.parent[i]
            siblings = tree.children[parent] if parent >= 0 else tree.roots
            before = siblings[siblings.index(i) - 1] if siblings.index(i) > 0 else -1
            for other in (parent, before):
                if other >= 0:
                    assert colour[r["path"]] != colour[tree.rows[other]["path"]], r["path"]
    hues = {round(background(style)[0]) for group in dom.nodes.values() for _, _, style in group}
    assert len(hues) >= 5 and any(90 <= h <= 300 for h in hues), hues  # not warm hues only


def test_the_inverted_view_sums_self_time_over_call_sites(chromium, tmp_path, run_report):
    rows = [{"path": p, "depth": p.count("/"), "count": 100, "p50_ns": 1e3 * t,
             "p95_ns": 1.1e3 * t, "self_p50_ns": 1e3 * s, "graph_id": 1, "first_call": False}
            for p, t, s in (("GPT", 1100, 10), ("GPT/h.0", 505, 5), ("GPT/h.0/attn", 300, 300),
                            ("GPT/h.0/mlp", 200, 200), ("GPT/h.1", 555, 5),
                            ("GPT/h.1/attn", 300, 300), ("GPT/h.1/mlp", 250, 250))]
    page = tmp_path / "inverted.html"
    accgraph.torch.write_html(rows, page)
    dom = Dom(browse(chromium, tmp_path, page, "", "--dump-dom"))
    (inverted,) = dom.inverted.values()
    assert [(key, cells[1], cells[2]) for key, _, cells in inverted] == [
        ("attn", "2", "600.0"), ("mlp", "2", "450.0"), ("GPT", "1", "10.0"),
        ("h.0", "1", "5.00"), ("h.1", "1", "5.00")]
    assert inverted[0][2][3] == "54.5%"  # of the graph's time per replay, GPT's 1100 us
    # A torch run: grouped by the modules' classes, every row of the context in one group.
    tmp, run_rows, run_page = run_report
    dom = Dom(browse(chromium, tmp, run_page, "", "--dump-dom"))
    for context, group in by_context(run_rows).items():
        name = context_name(context, accgraph.torch.graph_labels())
        shown = {key: int(cells[1]) for key, _, cells in dom.inverted[name]}
        assert sum(shown.values()) == len(group), name
        assert {"Linear", "LayerNorm", "Block"} <= set(shown), shown
        selfs = [float(cells[2]) for _, _, cells in dom.inverted[name]]
        assert selfs == sorted(selfs, reverse=True), name


# --- the differential report (compare --html) ------------------------------------------------

def stat(path, p50_us, count=100, graph_id=1, first_call=False, self_us=None, depth=None):
    p50 = p50_us * 1000.0
    return {"path": path, "depth": path.count("/") if depth is None else depth, "count": count,
            "p05_ns": 0.9 * p50,
            "p50_ns": p50, "p95_ns": 1.1 * p50,
            "self_p50_ns": p50 if self_us is None else self_us * 1000.0,
            "graph_id": graph_id, "first_call": first_call}


def diff_runs():
    """Two runs with every verdict: in the graph a slower root and h.1/attn, a faster h.1/mlp,
    a region only in A and one only in B; in the eager calls a faster h.0 and a module with
    too few calls; the first calls (one each): few."""
    a = [stat("GPT", 2000, self_us=10), stat("GPT/h.0", 1000, self_us=10),
         stat("GPT/h.0/attn", 600), stat("GPT/h.0/mlp", 390), stat("GPT/h.1", 990, self_us=10),
         stat("GPT/h.1/attn", 500), stat("GPT/h.1/mlp", 400), stat("GPT/h.1/drop", 80),
         stat("GPT", 2100, graph_id=0), stat("GPT/h.0", 1000, graph_id=0),
         stat("GPT/h.1", 1000, graph_id=0),
         stat("GPT", 9000, count=1, graph_id=0, first_call=True)]
    b = [stat("GPT", 2600, self_us=10), stat("GPT/h.0", 1000, self_us=10),
         stat("GPT/h.0/attn", 600), stat("GPT/h.0/mlp", 390), stat("GPT/h.1", 1590, self_us=10),
         stat("GPT/h.1/attn", 1200), stat("GPT/h.1/mlp", 200), stat("GPT/h.1/adapter", 180),
         stat("GPT", 2100, graph_id=0), stat("GPT/h.0", 700, graph_id=0),
         stat("GPT/h.1", 1400, count=5, graph_id=0),
         stat("GPT", 7000, count=1, graph_id=0, first_call=True)]
    return a, b


def text_verdicts(result):
    """compare's verdicts as its text table prints them: context name -> {path: change}."""
    names = set(result.names.values())
    out, section = {}, None
    for line in result.text().splitlines():
        head = line.split(": p50 and self p50 (us)")[0]
        if head in names and line != head:
            section = out.setdefault(head, {})
        elif not line.strip():
            section = None
        elif section is not None and not line.startswith(("module (full path)", "  A: ")):
            words = line.split()
            change = " ".join(words[-2:]) if words[-2:] in (["only", "A"], ["only", "B"]) else \
                words[-1] if words[-1] in ("slower", "faster", "few") else ""
            section[words[0]] = change
    return out


VERDICT_CLASS = {"slower": "v-slower", "faster": "v-faster", "": "v-same", "few": "v-few",
                 "only A": "v-gone", "only B": "v-new"}


@pytest.fixture(scope="module")
def diff_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diff")
    a, b = diff_runs()
    page = tmp / "diff.html"
    result = accgraph.torch.compare(a, b, html=page)
    return tmp, result, page


def test_the_diff_report_colours_exactly_what_compare_flags(chromium, diff_report):
    tmp, result, page = diff_report
    expected = text_verdicts(result)
    assert {c for v in expected.values() for c in v.values()} == set(VERDICT_CLASS)  # all kinds
    dom = Dom(browse(chromium, tmp, page, "", "--dump-dom"))
    assert dom.body.get("data-ready") == "1" and dom.body.get("data-kind") == "diff"
    assert list(dom.nodes) == list(expected) and list(dom.rows) == list(expected)
    for name, verdicts in expected.items():
        nodes = {p: (classes, background(style)) for p, classes, style in dom.nodes[name]}
        assert set(nodes) == set(verdicts), name
        for path, change in verdicts.items():
            classes, colour = nodes[path]
            assert VERDICT_CLASS[change] in classes, (name, path, change, classes)
            # Coloured when flagged, and only then: one hue for slower, another for faster,
            # grey within the noise (and for rows not judged), amber for new.
            assert is_hue(colour, 345, 15) == (change == "slower"), (name, path, colour)
            assert is_hue(colour, 195, 230) == (change == "faster"), (name, path, colour)
            assert is_hue(colour, 35, 55) == (change == "only B"), (name, path, colour)
            if change in ("", "few", "only A"):
                assert colour[1] < 0.15, (name, path, colour)
        table = {p: (classes, cells) for p, classes, cells in dom.rows[name]}
        assert set(table) == set(verdicts), name
        assert dom.headers[name][-1] == "change"
        for path, change in verdicts.items():
            assert table[path][1][-1] == change, (name, path)
        # A and B p50 as compare's table prints them.
        by_path = {r["path"]: r for r in result.rows if result.names[r["context"]] == name}
        for path, (_, cells) in table.items():
            r = by_path[path]
            assert cells[1:3] == [us(r["a"]["p50_ns"]) if r["a"] else "-",
                                  us(r["b"]["p50_ns"]) if r["b"] else "-"], path


def test_the_diff_report_sorts_by_delta_and_by_ratio(chromium, diff_report):
    tmp, result, page = diff_report
    graph = next(iter(result.names.values()))
    for query, column, descending in (("?sort=delta", 3, True), ("?sort=ratio", 4, True),
                                      ("?sort=ratio:asc", 4, False), ("?sort=delta:asc", 3, False)):
        dom = Dom(browse(chromium, tmp, page, query, "--dump-dom"))
        cells = [c for _, _, c in dom.rows[graph]]
        values = [c[column] for c in cells]
        known = [float(v) for v in values if v != "-"]
        assert values == [f"{v}" for v in values if v != "-"] + ["-"] * (len(values) - len(known))
        assert known == sorted(known, reverse=descending), (query, values)
        assert len(known) >= 5
        assert [c[0] for c in cells if c[0].startswith("GPT/")]  # sorted rows show full paths
    expected_first = max((r for r in result.rows if r["delta_ns"] is not None),
                         key=lambda r: r["delta_ns"])["path"]
    dom = Dom(browse(chromium, tmp, page, "?sort=delta", "--dump-dom"))
    assert dom.rows[graph][0][0] == expected_first == "GPT/h.1/attn"


def test_the_diff_report_searches_and_zooms_as_the_single_view(chromium, diff_report):
    tmp, result, page = diff_report
    dom = Dom(browse(chromium, tmp, page, "?q=attn&zoom=GPT/h.1", "--dump-dom"))
    graph = next(iter(result.names.values()))
    matching = [p for group in dom.nodes.values() for p, classes, _ in group if "match" in classes]
    assert sorted(matching) == sorted(r["path"] for r in result.rows if "attn" in r["path"])
    assert dom.matches == f"{len(matching)} matches"
    shown = {p for p, _, style in dom.nodes[graph] if "display: none" not in style}
    assert shown == {"GPT", "GPT/h.1"} | {p for p, _, _ in dom.nodes[graph]
                                          if p.startswith("GPT/h.1/")}
    assert "GPT/h.1/drop" in shown  # gone: drawn at A's p50 under its parent in B


def hue_pixels(png, top):
    """How many pixels below row `top` have the slower hue and how many the faster hue."""
    width, height, channels, rows = png_pixels(png)
    slower = faster = 0
    for row in rows[top:]:
        for x in range(0, width * channels, channels):
            colour = colorsys.rgb_to_hls(*(v / 255 for v in row[x:x + 3]))
            hue, lightness, saturation = colour[0] * 360, colour[1], colour[2]
            if saturation > 0.5 and 0.3 < lightness < 0.9:
                slower += hue >= 345 or hue <= 15
                faster += 195 <= hue <= 230
    return slower, faster


def test_a_screenshot_of_the_diff_report_shows_both_hues(diff_report, tmp_path):
    # Through the script that makes the README's pictures; below the header (its legend has
    # both hues on every page): a comparison of a run with itself shows neither.
    chromium_path()
    tmp, _, page = diff_report
    a, _ = diff_runs()
    same = tmp_path / "same.html"
    accgraph.torch.compare(a, a, html=same)
    counts = {}
    for name, report in (("diff", page), ("same", same)):
        shot = tmp_path / f"{name}.png"
        done = subprocess.run(["bash", str(ROOT / "scripts/screenshot-report.sh"), str(report),
                               str(shot)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        counts[name] = hue_pixels(shot, top=110)
    slower, faster = counts["diff"]
    assert slower > 2000 and faster > 500, counts
    assert counts["same"] == (0, 0), counts
    if os.environ.get("ACCGRAPH_DIFF_SCREENSHOT"):  # to refresh docs/ (README)
        shutil.copy(tmp_path / "diff.png", os.environ["ACCGRAPH_DIFF_SCREENSHOT"])


def test_the_diff_report_stays_responsive_at_5000_modules(chromium, tmp_path):
    # As the single view: drawing, the tables and a zoom are passes over the rows, so 5,000
    # take about ten times what 500 take (a bound relative to the same browser's time for 500).
    times = {}
    for regions in (500, 5000):
        a = synthetic_rows(regions)
        b = [dict(r, p50_ns=r["p50_ns"] * (1.5 if i % 7 == 0 else 0.6 if i % 11 == 0 else 1.0))
             for i, r in enumerate(a)]
        page = tmp_path / f"d{regions}.html"
        result = accgraph.torch.compare(a, b, html=page)
        assert result.changes
        dom = Dom(browse(chromium, tmp_path, page, "?zoom=Model.3&sort=delta", "--dump-dom"))
        assert sum(len(n) for n in dom.nodes.values()) == regions
        assert sum(len(r) for r in dom.rows.values()) == regions
        times[regions] = (float(dom.body["data-render-ms"]), float(dom.body["data-zoom-ms"]))
    render, zoom = zip(times[500], times[5000])
    print(f"diff render ms (500, 5000): {render}; zoom ms: {zoom}")
    assert render[1] <= 40 * max(render[0], 20.0), times
    assert zoom[1] <= 40 * max(zoom[0], 20.0), times


# --- the 2026-12-07 audit's HTML rows in the browser ------------------------------------------

def test_a_name_opening_a_comment_and_a_script_leaves_the_page_drawn(chromium, tmp_path):
    # H02: "<!--<script>" in the embedded JSON kept "</script>" from closing the data element:
    # a blank page (no icicle, no table, no data-ready).
    names = ["<!--<script>", "</script><script>document.title='x'</script>", "<!--"]
    rows = [stat("GPT", 1000)] + [stat(f"GPT/{n}", 100, depth=1) for n in names]
    page = tmp_path / "h02.html"
    accgraph.torch.write_html(rows, page)
    dom = Dom(browse(chromium, tmp_path, page, "", "--dump-dom"))
    assert dom.body.get("data-ready") == "1"
    (table,) = dom.rows.values()
    assert [cells[0].replace("\xa0", "") for _, _, cells in table] == ["GPT"] + names
    assert "<title>accgraph region timing</title>" in page.read_text()


def test_a_thousand_nested_regions_draw(chromium, tmp_path):
    # H09: the tree 1,000 levels deep is written and drawn (no recursion in the page either).
    rows = [stat("/".join(["r"] * (d + 1)), 1000 - d) for d in range(1000)]
    page = tmp_path / "deep.html"
    accgraph.torch.write_html(rows, page)
    dom = Dom(browse(chromium, tmp_path, page, "?zoom=" + "/".join(["r"] * 500), "--dump-dom"))
    assert dom.body.get("data-ready") == "1"
    (nodes,) = dom.nodes.values()
    assert len(nodes) == 1000 and all("display: none" not in style for _, _, style in nodes)
