"""Re-runs the compare cases (C01-C28) of the 2026-12-07 reliability audit
(area (a)), each in its own process
(scripts/audit/_harness.py): `python -m accgraph.torch compare` run as a command, and
accgraph.torch.compare from Python where the row says so.

    build/venv/bin/python scripts/audit/r1207_compare.py            # every case
    build/venv/bin/python scripts/audit/r1207_compare.py C23 C24    # some

The statistics files are written as accgraph writes them: by Profiler.write_stats_csv where the
row says accgraph wrote them (C10, C15, C16, C28), otherwise rows of a made-up GPT-like run of
8 modules under stats_csv_columns() (the run's columns; C09, C23, C24 cut them as the audited
version wrote them). Every command case also requires that no traceback reaches stderr.

Choices where a row is vague:
- C01, C09, C20, C23, C24: "2x slower" is GPT/h.0/attn's p50 doubled (its spread with it), the
  modules above it grown by as much;
- C05: the command runs as uid 65534 and B is mode 000;
- C06, C11, C22, C25: exit 2 with a one-line message naming the file (C11, C22, C25: and the
  line); C10 must name the statistics writer (write_stats_csv or --csv) to give instead;
- C12, C14: refused (exit 2 naming the field), or at least the row not judged 'slower' or
  'faster'; C13: exit 2 with a message;
- C16: neither compare's table nor module_table passes ESC, BEL or a raw newline of a name;
- C21: exit 2 naming the row given twice (or a warning on stderr naming it);
- C23: A has the 14 columns written before graph_id/first_call existed, B the current ones
  (eager calls); C24: both written with the 17 columns of the audited version (no
  graph_label), A's graph 3 and B's graph 4, and again with the current columns and one
  capture site: --fail-above 5 must not exit 0 in any of them;
- C26: read and compared (exit 0, the change found), or refused without claiming that the
  path column is missing."""

from __future__ import annotations

import csv
import sys
import time

from _harness import as_nobody, bad, cases, check, clip, crashed, main, ok, run

# A GPT-like run: (path, depth, p50 us, self p50 us).
MODULES = [("GPT", 0, 1000, 100), ("GPT/wte", 1, 50, 50), ("GPT/h.0", 1, 420, 20),
           ("GPT/h.0/attn", 2, 250, 250), ("GPT/h.0/mlp", 2, 150, 150), ("GPT/h.1", 1, 430, 30),
           ("GPT/h.1/attn", 2, 250, 250), ("GPT/h.1/mlp", 2, 150, 150)]
COLUMNS_AUDITED = 17  # path .. p05_ns: what the audited version (43eb812) wrote
COLUMNS_OLD = 14      # path .. self_max_ns: before graph_id/first_call existed


def rows(slower=(), factor=2.0, graph_id=3, count=100, label="train.py:42"):
    """The run's statistics rows (dicts under stats_csv_columns()); the modules in `slower` and
    their ancestors take `factor` times as long."""
    grow = {}
    for path in slower:
        base = next(m[2] for m in MODULES if m[0] == path)
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            grow[prefix] = grow.get(prefix, 0) + base * (factor - 1)
    out = []
    for path, depth, p50, self_p50 in MODULES:
        p50 = (p50 + grow.get(path, 0)) * 1000.0
        self_p50 = (self_p50 + (grow[path] if path in slower else 0)) * 1000.0
        out.append({"path": path, "depth": depth, "count": count, "min_ns": p50 * 0.9,
                    "mean_ns": p50, "p50_ns": p50, "p95_ns": p50 * 1.05, "max_ns": p50 * 1.2,
                    "self_count": count, "self_min_ns": self_p50 * 0.9, "self_mean_ns": self_p50,
                    "self_p50_ns": self_p50, "self_p95_ns": self_p50 * 1.05,
                    "self_max_ns": self_p50 * 1.2, "graph_id": graph_id,
                    "first_call": 0, "p05_ns": p50 * 0.95,
                    "replays_run": count if graph_id else 0,
                    "replays_timed": count if graph_id else 0,
                    "graph_label": label if graph_id else "", "schema_version": 2})
    return out


def write(path, table, columns=None):
    import accgraph

    columns = list(columns or accgraph.stats_csv_columns())
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    return path


def cut_columns(n):
    import accgraph

    return list(accgraph.stats_csv_columns())[:n]


def pair(d, slower=("GPT/h.0/attn",), **kwargs):
    return write(d / "a.csv", rows(**kwargs)), write(d / "b.csv", rows(slower, **kwargs))


def compare(*args, cmd_prefix=None, timeout=120):
    """`python -m accgraph.torch compare ARGS` (as given by `cmd_prefix`, e.g. as nobody)."""
    cmd = [sys.executable, "-m", "accgraph.torch", "compare", *map(str, args)]
    return run(cmd_prefix(cmd) if cmd_prefix else cmd, timeout=timeout)


def said(done):
    return f"exit {done.returncode}: {clip(done.stderr or done.stdout, 200)}"


def clean(done):
    """No traceback and no crash: bad() otherwise."""
    if "Traceback" in done.stderr or crashed(done):
        bad(f"traceback/crash: {said(done)} ... {clip(done.stderr[-200:], 200)}")


def line_of(done, path):
    """compare's table line of module `path` (the first)."""
    return next((x for x in done.stdout.splitlines() if x.split()[:1] == [path]), "")


def refused(done, *needles):
    clean(done)
    missing = [n for n in needles if n not in done.stderr]
    check(done.returncode == 2 and not missing and done.stderr.strip().count("\n") == 0,
          f"{said(done)}{f' (lacks {missing})' if missing else ''}")


def C01(d):
    a, b = pair(d)
    done = compare(a, b)
    gated = compare(a, b, "--fail-above", "5")
    clean(done)
    clean(gated)
    check(done.returncode == 0 and line_of(done, "GPT/h.0/attn").endswith("slower") and
          gated.returncode == 1 and "slowdown of 100.0%" in gated.stderr,
          f"attn: {clip(line_of(done, 'GPT/h.0/attn'), 90)}; --fail-above 5: {said(gated)}")


def C02(d):
    a = write(d / "a.csv", rows())
    done = compare(a, a, "--fail-above", "0")
    clean(done)
    flagged = [x for x in done.stdout.splitlines() if x.endswith(("slower", "faster"))]
    check(done.returncode == 0 and not flagged and "0 change(s)" in done.stdout,
          f"exit {done.returncode}, flagged {len(flagged)}: "
          f"{clip(done.stdout.splitlines()[-2], 120)}")


def C03(d):
    b = write(d / "b.csv", rows())
    refused(compare(d / "missing.csv", b), str(d / "missing.csv"))


def C04(d):
    a = write(d / "a.csv", rows())
    (d / "dir.csv").mkdir()
    refused(compare(a, d / "dir.csv"), str(d / "dir.csv"), "directory")


def C05(d):
    a, b = pair(d)
    d.chmod(0o755)
    a.chmod(0o644)
    b.chmod(0o000)
    done = compare(a, b, cmd_prefix=as_nobody)
    clean(done)
    check(done.returncode == 2 and str(b) in done.stderr and "ermission" in done.stderr,
          said(done))


def C06(d):
    a = write(d / "a.csv", rows())
    (d / "empty.csv").write_bytes(b"")
    refused(compare(a, d / "empty.csv"), str(d / "empty.csv"))


def C07(d):
    a = write(d / "a.csv", rows())
    b = write(d / "b.csv", [])
    done = compare(a, b)
    clean(done)
    only_a = [m[0] for m in MODULES if line_of(done, m[0]).endswith("only A")]
    check(done.returncode == 0 and len(only_a) == len(MODULES),
          f"exit {done.returncode}, {len(only_a)}/{len(MODULES)} 'only A': "
          f"{clip(done.stdout.splitlines()[-1] if done.stdout else done.stderr, 120)}")


def C08(d):
    cut = d / "cut.csv"
    cut.write_text("path,depth,count,p50_ns\nM,0,100,1000\n")
    refused(compare(cut, cut), "cut.csv", "p95_ns", "self_p50_ns")


def C09(d):
    import accgraph

    old = [c for c in accgraph.stats_csv_columns() if c != "p05_ns"]
    a = write(d / "a.csv", rows(), old)
    b = write(d / "b.csv", rows(("GPT/h.0/attn",)))
    done = compare(a, b, "--fail-above", "5")
    clean(done)
    check(done.returncode == 1 and line_of(done, "GPT/h.0/attn").endswith("slower"),
          f"exit {done.returncode}, attn: {clip(line_of(done, 'GPT/h.0/attn'), 100)}")


def C10(d):
    import accgraph

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    for _ in range(3):
        with prof.region(s, "GPT"):
            with prof.region(s, "attn"):
                pass
    prof.flush()
    prof.write_csv(d / "reports.csv")
    a = write(d / "a.csv", rows())
    done = compare(a, d / "reports.csv")
    clean(done)
    check(done.returncode == 2 and "reports.csv" in done.stderr and
          ("write_stats_csv" in done.stderr or "--csv" in done.stderr), said(done))


def C11(d):
    a, b = pair(d)
    text = b.read_text()
    cut = text[: text.index("GPT/h.0/mlp") + 20]
    b.write_text(cut)
    line = cut.count("\n") + 1
    refused(compare(a, b), f"b.csv:{line}")


def edited(d, field, value, path="GPT/h.0/attn"):
    """A and B (unchanged) with B's `field` of `path` set to the text `value`."""
    a = write(d / "a.csv", rows())
    table = rows()
    for row in table:
        if row["path"] == path:
            row[field] = value
    return a, write(d / "b.csv", table)


def not_judged(done, field):
    """Refused naming the field, or at least the row not flagged."""
    clean(done)
    if done.returncode == 2:
        check(field in done.stderr, said(done))
    attn = line_of(done, "GPT/h.0/attn")
    check(done.returncode == 0 and attn and not attn.endswith(("slower", "faster")),
          f"exit {done.returncode}, attn judged: {clip(attn, 100)}")


def C12(d):
    a, b = edited(d, "p50_ns", "nan")
    not_judged(compare(a, b), "p50_ns")


def C13(d):
    a, b = edited(d, "p50_ns", "inf")
    done = compare(a, b)
    clean(done)
    check(done.returncode == 2 and "p50_ns" in done.stderr, said(done))


def C14(d):
    a = write(d / "a.csv", rows())
    table = rows()
    for row in table:
        if row["path"] == "GPT/h.0/attn":
            row.update(p05_ns=-12000.0, p50_ns=-9000.0, p95_ns=-3000.0)
    b = write(d / "b.csv", table)
    not_judged(compare(a, b), "_ns")


def profile_of(names):
    """A Profiler that timed one eager region per name (3 times each), flushed."""
    import accgraph

    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    for _ in range(3):
        for name in names:
            with prof.region(s, name):
                pass
    prof.flush()
    return prof


def C15(d):
    import accgraph.torch

    names = ["a,b", 'say "hi"', "x;y", "emoji \U0001F600", "\u6f22\u5b57",
             "\u05e9\u05dc\u05d5\u05dd", "n" * 1000]
    prof = profile_of(names)
    prof.write_stats_csv(d / "a.csv")
    prof.write_stats_csv(d / "b.csv")
    done = compare(d / "a.csv", d / "b.csv")
    clean(done)
    result = accgraph.torch.compare(d / "a.csv", d / "b.csv")
    matched = {r["path"] for r in result.rows if r["a"] is not None and r["b"] is not None}
    check(done.returncode == 0 and matched == set(names) and not result.one_run_only and
          "0 module(s) in one run only" in done.stdout,
          f"exit {done.returncode}, {len(matched)}/{len(names)} matched, "
          f"{len(result.one_run_only)} in one run only")


def C16(d):
    import accgraph.torch

    names = ["clear\x1b[2J\x1b[31m", "title\x1b]0;pwned\x07", "two\nlines"]
    prof = profile_of(names)
    prof.write_stats_csv(d / "a.csv")
    done = compare(d / "a.csv", d / "a.csv")
    clean(done)
    table = accgraph.torch.module_table(d / "a.csv")
    raw = [repr(c) for c in "\x1b\x07" if c in done.stdout or c in table]
    lines = "two" in done.stdout and not any(x.startswith("lines") for x in
                                             done.stdout.splitlines() + table.splitlines())
    check(done.returncode == 0 and not raw and lines,
          f"raw control characters {raw or 'none'}, newline kept in one line {lines}: "
          f"{clip(repr(line_of(done, 'clear' + chr(92) + 'x1b[2J' + chr(92) + 'x1b[31m')), 80)}")


def C17(d):
    n = 200_000
    for name, factor in (("a.csv", 1.0), ("b.csv", 1.01)):
        with open(d / name, "w", newline="") as f:
            import accgraph

            writer = csv.writer(f, lineterminator="\n")
            columns = list(accgraph.stats_csv_columns())
            writer.writerow(columns)
            writer.writerow(["M", 0, 100, *[1e9 * factor] * 5, 100, *[1e6] * 5, 3, 0, 1e9,
                             100, 100, "bench.py:1", 2])
            for i in range(n - 1):
                p50 = (1000 + i % 997) * factor
                writer.writerow([f"M/m{i}", 1, 100, p50, p50, p50, p50 * 1.05, p50 * 1.1, 100,
                                 p50, p50, p50, p50 * 1.05, p50 * 1.1, 3, 0, p50 * 0.95, 100, 100,
                                 "bench.py:1", 2])
    start = time.monotonic()
    done = compare(d / "a.csv", d / "b.csv", timeout=150)
    seconds = time.monotonic() - start
    clean(done)
    check(done.returncode == 0 and seconds < 90 and "in one run only" in done.stdout,
          f"exit {done.returncode} in {seconds:.1f} s, {len(done.stdout.splitlines())} lines")


def C18(d):
    a, b = pair(d)
    done = compare(a, b, "--fail-above", "nan")
    clean(done)
    check(done.returncode == 2 and "--fail-above" in done.stderr, said(done))


def C19(d):
    a = write(d / "a.csv", rows())
    done = compare(a, a, "--fail-above", "-1")
    clean(done)
    check(done.returncode == 0 or (done.returncode == 2 and "--fail-above" in done.stderr and
                                   "slowdown of" not in done.stderr), said(done))


def C20(d):
    a = write(d / "a.csv", [dict(r, count=100) for r in rows() if r["path"] == "GPT"])
    b = write(d / "b.csv", [r for r in rows(("GPT/h.0/attn",), factor=5.0) if r["path"] == "GPT"])
    # GPT: 1000 us in A, 2000 us in B (attn 4 x 250 us more): a slowdown of exactly 100%.
    at = compare(a, b, "--fail-above", "100")
    below = compare(a, b, "--fail-above", "99.9")
    clean(at)
    clean(below)
    check(at.returncode == 0 and below.returncode == 1,
          f"PCT 100: exit {at.returncode}; PCT 99.9: {said(below)}")


def C21(d):
    a = write(d / "a.csv", rows())
    table = rows()
    attn = next(r for r in table if r["path"] == "GPT/h.0/attn")
    b = write(d / "b.csv", table)
    with open(b, "a", newline="") as f:  # the second export's row, without its header
        import accgraph

        csv.DictWriter(f, fieldnames=list(accgraph.stats_csv_columns()),
                       lineterminator="\n").writerow(
            dict(attn, p50_ns=9e6, p05_ns=8.5e6, p95_ns=9.5e6, mean_ns=9e6))
    done = compare(a, b)
    clean(done)
    named = "GPT/h.0/attn" in done.stderr and "twice" in done.stderr
    check((done.returncode == 2 and named) or (named and done.returncode in (0, 1)), said(done))


def C22(d):
    a = write(d / "a.csv", rows())
    first = a.read_text()
    b = d / "b.csv"
    b.write_text(first + first)
    line = first.count("\n") + 1
    refused(compare(a, b), f"b.csv:{line}")


def gate(done):
    """--fail-above 5 over a 2x slowdown: exit 1 (the slowdown, or nothing compared)."""
    clean(done)
    check(done.returncode == 1,
          f"exit {done.returncode}: "
          f"{clip(done.stderr, 150) or clip(done.stdout.splitlines()[-1], 150)}")


def C23(d):
    a = write(d / "a.csv", rows(), cut_columns(COLUMNS_OLD))
    b = write(d / "b.csv", rows(("GPT/h.0/attn",), graph_id=0))  # eager calls
    gate(compare(a, b, "--fail-above", "5"))


def C24(d):
    audited = cut_columns(COLUMNS_AUDITED)
    a = write(d / "a.csv", rows(graph_id=3), audited)
    b = write(d / "b.csv", rows(("GPT/h.0/attn",), graph_id=4), audited)
    done = compare(a, b, "--fail-above", "5")
    clean(done)
    if done.returncode != 1:
        bad(f"the audited columns: exit {done.returncode}: {clip(done.stderr, 150)}")
    a = write(d / "a2.csv", rows(graph_id=3))
    b = write(d / "b2.csv", rows(("GPT/h.0/attn",), graph_id=4))
    current = compare(a, b, "--fail-above", "5")
    clean(current)
    check(current.returncode == 1,
          f"audited columns: {said(done)}; current columns: {said(current)}")


def C25(d):
    a, b = pair(d)
    data = b.read_bytes().replace(b"GPT/h.1/mlp", b"GPT/h.1/m\xffp")
    b.write_bytes(data)
    line = data[: data.index(b"\xff")].count(b"\n") + 1
    refused(compare(a, b), f"b.csv:{line}")


def C26(d):
    a, b = pair(d)
    b.write_bytes(b"\xef\xbb\xbf" + b.read_bytes())
    done = compare(a, b)
    clean(done)
    if done.returncode == 2:
        check("no path" not in done.stderr and "path column" not in done.stderr, said(done))
    check(done.returncode == 0 and line_of(done, "GPT/h.0/attn").endswith("slower"),
          f"exit {done.returncode}, attn: {clip(line_of(done, 'GPT/h.0/attn'), 90)}")


def C27(d):
    import accgraph.torch

    messages = []
    for a, b in ((5, None), ([], None)):
        try:
            accgraph.torch.compare(a, b)
            bad(f"compare({a!r}, {b!r}): no error")
        except TypeError as e:
            if "not iterable" in str(e) or "compare" not in str(e) or "Profiler" not in str(e):
                bad(f"compare({a!r}, {b!r}): TypeError: {clip(str(e), 150)}")
            messages.append(str(e))
        except Exception as e:  # noqa: BLE001
            bad(f"compare({a!r}, {b!r}): {type(e).__name__}: {clip(str(e), 150)}")
    ok(f"TypeError: {clip(messages[0], 170)}")


def C28(d):
    import accgraph.torch

    prof = profile_of(["x" * 200_000])
    prof.write_stats_csv(d / "a.csv")
    done = compare(d / "a.csv", d / "a.csv")
    clean(done)
    try:
        accgraph.torch.write_html(d / "a.csv", d / "r.html")
        html = "written"
    except Exception as e:  # noqa: BLE001
        html = f"{type(e).__name__}: {clip(str(e), 80)}"
    check(done.returncode == 0 and "0 module(s) in one run only" in done.stdout and
          html == "written", f"compare exit {done.returncode}; write_html of the CSV: {html}")


if __name__ == "__main__":
    sys.exit(main("compare (C)", cases(globals()), __file__))
