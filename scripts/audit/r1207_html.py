"""Re-runs the HTML report cases (H01-H17) of the 2026-12-07 reliability audit
(area (b)), each in its own process
(scripts/audit/_harness.py). Pages are written by accgraph.torch.write_html (H15: by
`python -m accgraph.torch --html`) and opened in headless Chromium (`--dump-dom`), as the
auditor did: the page drew (body[data-ready]), no payload ran (each would set body[data-pwned])
and no injected element exists (img, svg, iframe, template, object, embed, math, and no script
but the page's two).

    build/venv/bin/python scripts/audit/r1207_html.py            # every case
    build/venv/bin/python scripts/audit/r1207_html.py H02 H09    # some

Profiles are timed on the host backend (regions named as the row says); no torch needed.
Choices where a row is vague:
- H06: the file holds exactly two scripts (the JSON data and the page's code), the data parses
  as strict JSON (NaN/Infinity refused) and every region name comes back from it unchanged;
- H07: write_html of the CSV refuses (an error naming the field), or the page still draws;
- H08: 50,000 regions are one root with 50,000 children (each a region of its own name);
- H09, H10: one chain of 1,000 nested regions (depth 999); the page must draw too;
- H11: the page draws and its text says there is nothing to draw;
- H14: the write runs as uid 65534 into a directory of root's (mode 755) holding a report;
- H15: the command line runs the torch stand-in's launcher (r1207's torch_cli_cases.standin:
  tests/python/torch_standin.py on the host backend), and the script must not run."""

from __future__ import annotations

import json
import sys
import time

from _harness import as_nobody, bad, browse, cases, check, clip, main, ok, run, short
from torch_cli_cases import SCRIPT_RAN, never, standin

PWN = "document.body.setAttribute('data-pwned','1')"
PAYLOADS = [
    f"<script>{PWN}</script>",
    f"<img src=x onerror=\"{PWN}\">",
    f"<svg onload=\"{PWN}\"></svg>",
    f"<iframe srcdoc=\"<script>parent.{PWN}</script>\"></iframe>",
    f"\" onmouseover=\"{PWN}\" data-x=\"",
    f"' autofocus onfocus='{PWN}' x='",
    f"<template><img src=x onerror=\"{PWN}\"></template>",
    f"</script><script>{PWN}</script>",
    f"<math><mtext><table><mglyph><style><img src=x onerror=\"{PWN}\">",
]
INJECTED = {"img", "svg", "iframe", "template", "object", "embed", "math", "mglyph", "mtext"}


def profile(names, nested=False, metadata=None):
    """A flushed host Profiler that timed `names` (3 times each): as siblings, or nested in one
    chain; `metadata`: each region's."""
    import accgraph

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    for _ in range(3):
        if nested:
            regions = [prof.region(s, n, **(metadata or {})) for n in names]
            for r in regions:
                r.__enter__()
            for r in reversed(regions):
                r.__exit__(None, None, None)
        else:
            for n in names:
                with prof.region(s, n, **(metadata or {})):
                    pass
    prof.flush()
    return prof


def safe(page):
    """bad() unless the page drew, ran no payload and holds no injected element."""
    injected = sorted(INJECTED & set(page.tags))
    scripts = page.tags.count("script")
    if not page.drew or page.pwned or injected or scripts != 2:
        bad(f"{page.summary()}, injected {injected}, {scripts} script elements")
    return page


def H01(d):
    import accgraph.torch

    prof = profile(PAYLOADS)
    accgraph.torch.write_html(prof, d / "r.html")
    page = safe(browse(d / "r.html"))
    shown = sum(p in page.text for p in PAYLOADS if "\n" not in p)
    check(shown >= len(PAYLOADS) - 1, f"{page.summary()}; {shown}/{len(PAYLOADS)} names shown "
          "as text")


def H02(d):
    import accgraph.torch

    prof = profile(["<!--<script>", "after"])
    accgraph.torch.write_html(prof, d / "r.html")
    page = safe(browse(d / "r.html"))
    check("<!--<script>" in page.text, page.summary())


def H03(d):
    import accgraph
    import accgraph.torch

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    g = accgraph.Graph("host")
    prof.attach(g)
    with g.capture(s):
        with prof.region(s, "step"):
            pass
    for _ in range(3):
        g.replay()
    s.synchronize()
    prof.flush()
    payload = PAYLOADS[1]
    accgraph.torch.write_html(prof, d / "r.html", labels={g.id: payload}, title=PAYLOADS[0])
    page = safe(browse(d / "r.html"))
    check(payload in page.text and PAYLOADS[0] in page.text,
          f"{page.summary()}; label and title shown as text")


def H04(d):
    import accgraph.torch

    prof = profile(["GPT", "attn"], metadata={"module": PAYLOADS[1]})
    accgraph.torch.write_html(prof, d / "r.html")
    page = safe(browse(d / "r.html"))
    ok(f"{page.summary()}; the class payload (hover text) is no element")


def H05(d):
    import urllib.parse

    import accgraph.torch

    prof = profile(["GPT", "attn"])
    accgraph.torch.write_html(prof, d / "r.html")
    page = safe(browse(d / "r.html", "?q=" + urllib.parse.quote(PAYLOADS[1])))
    ok(f"{page.summary()} with ?q=<img onerror>")


def H06(d):
    import re

    import accgraph.torch

    names = PAYLOADS + ["<!--<script>", "\u2028\u2029", "a&amp;b", "\ud83d\ude00".encode(
        "utf-16", "surrogatepass").decode("utf-16"), "x" * 300]
    prof = profile(names)
    accgraph.torch.write_html(prof, d / "r.html")
    text = (d / "r.html").read_text()
    scripts = re.findall(r"<script\b", text)
    data = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    if len(scripts) != 2 or data is None:
        bad(f"{len(scripts)} script tags, data element {'found' if data else 'missing'}")

    def no_constant(name):
        raise ValueError(f"not strict JSON: {name}")

    try:
        document = json.loads(data.group(1), parse_constant=no_constant)
    except ValueError as e:
        bad(f"the data is not strict JSON: {short(e)}")
    found = set()

    def walk(value):
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, str):
                found.add(v)

    walk(document)
    lost = [n for n in names if n not in found and not any(n in f for f in found)]
    check(not lost, f"2 scripts, strict JSON, {len(names) - len(lost)}/{len(names)} names back"
          f"{f'; lost {lost[:2]!r}' if lost else ''}")


def stats_with(d, field, value):
    import csv

    prof = profile(["GPT", "attn"])
    prof.write_stats_csv(d / "s.csv")
    with open(d / "s.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rows[-1][field] = value
    with open(d / "s.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return d / "s.csv"


def H07(d):
    import accgraph.torch

    outcomes = []
    for field, value in (("p50_ns", "nan"), ("p95_ns", "inf")):
        path = stats_with(d, field, value)
        try:
            accgraph.torch.write_html(path, d / "r.html")
        except ValueError as e:
            if field not in str(e) or "s.csv" not in str(e):
                bad(f"{field}={value}: {short(e)}")
            outcomes.append(f"{field}={value} refused: {clip(str(e), 70)}")
            continue
        except Exception as e:  # noqa: BLE001
            bad(f"{field}={value}: raw {short(e)}")
        page = browse(d / "r.html")
        if not page.drew:
            bad(f"{field}={value}: written, but the page is blank ({page.summary()})")
        outcomes.append(f"{field}={value}: the page draws")
    ok("; ".join(outcomes))


def H08(d):
    import accgraph
    import accgraph.torch

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    with prof.region(s, "root"):
        for i in range(50_000):
            with prof.region(s, f"m{i}"):
                pass
    prof.flush()
    start = time.monotonic()
    accgraph.torch.write_html(prof, d / "r.html")
    seconds = time.monotonic() - start
    page = browse(d / "r.html", timeout=140)
    check(seconds < 120 and page.drew and not page.pwned,
          f"written in {seconds:.1f} s ({(d / 'r.html').stat().st_size >> 20} MiB); "
          f"{page.summary()}")


def chain():
    return profile([f"m{i}" for i in range(1000)], nested=True)


def H09(d):
    import accgraph.torch

    prof = chain()
    depth = max(r.depth for r in prof.stats())
    try:
        accgraph.torch.write_html(prof, d / "r.html")
    except RecursionError as e:
        bad(f"depth {depth}: {short(e)}")
    except ValueError as e:
        check("deep" in str(e), f"depth {depth}: {short(e)}")
    page = browse(d / "r.html")
    check(page.drew and not page.pwned, f"depth {depth}: written; {page.summary()}")


def H10(d):
    import accgraph.torch

    prof = chain()
    prof.write_stats_csv(d / "s.csv")
    try:
        tables = [accgraph.torch.module_table(prof), accgraph.torch.module_table(d / "s.csv")]
    except RecursionError as e:
        bad(short(e))
    lines = [t.count("\n") for t in tables]
    check(all(n >= 1000 for n in lines) and "m999" in tables[0],
          f"module_table of the profiler and of its CSV: {lines} lines")


def H11(d):
    import accgraph
    import accgraph.torch

    prof = accgraph.Profiler()
    accgraph.torch.write_html(prof, d / "r.html")
    page = browse(d / "r.html")
    check(page.drew and "nothing" in page.text.lower(),
          f"{page.summary()}; says: {clip(page.text[-80:], 80)}")


def refused_write(d, path, kinds):
    import accgraph.torch

    prof = profile(["GPT"])
    try:
        accgraph.torch.write_html(prof, path)
    except kinds as e:
        check(str(path) in str(e), f"{type(e).__name__}: {clip(str(e), 150)}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad(f"{path}: no error")


def H12(d):
    refused_write(d, d / "missing" / "r.html", (OSError,))


def H13(d):
    (d / "r.html").mkdir()
    refused_write(d, d / "r.html", (IsADirectoryError, OSError))


H14_SCRIPT = """
import sys, accgraph, accgraph.torch
prof = accgraph.Profiler()
s = accgraph.Stream("host")
with prof.region(s, "GPT"):
    pass
prof.flush()
try:
    accgraph.torch.write_html(prof, sys.argv[1])
    print("written")
except PermissionError as e:
    print("PermissionError", e)
except Exception as e:
    print("other", type(e).__name__, e)
"""


def H14(d):
    d.chmod(0o755)
    out = d / "reports"
    out.mkdir(mode=0o755)
    report = out / "r.html"
    report.write_text("the earlier report\n")
    script = d / "h14.py"
    script.write_text(H14_SCRIPT)
    script.chmod(0o644)
    done = run(as_nobody([sys.executable, script, report]))
    kept = report.read_text() == "the earlier report\n"
    left = [p.name for p in out.iterdir() if p.name != "r.html"]
    check(done.stdout.startswith("PermissionError") and str(out) in done.stdout and kept and
          not left, f"{clip(done.stdout or done.stderr, 150)}; report kept {kept}, "
          f"left behind {left}")


def H15(d):
    done = standin(d, "--html", d / "missing" / "r.html", never(d))
    check(done.returncode == 2 and SCRIPT_RAN not in done.stdout and "missing" in done.stderr,
          f"exit {done.returncode}, script ran {SCRIPT_RAN in done.stdout}: "
          f"{clip(done.stderr, 150)}")


def H16(d):
    import accgraph.torch

    try:
        accgraph.torch.write_html(None, d / "r.html")
    except TypeError as e:
        check("not iterable" not in str(e) and "write_html" in str(e) and "Profiler" in str(e),
              f"TypeError: {clip(str(e), 160)}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad("no error")


def H17(d):
    import accgraph.torch

    prof = profile(["GPT", "attn"])
    prof.write_csv(d / "reports.csv")
    try:
        accgraph.torch.write_html(d / "reports.csv", d / "r.html")
    except ValueError as e:
        check("reports.csv" in str(e) and "write_stats_csv" in str(e),
              f"{type(e).__name__}: {clip(str(e), 160)}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad("no error")


if __name__ == "__main__":
    sys.exit(main("HTML report (H)", cases(globals()), __file__))
