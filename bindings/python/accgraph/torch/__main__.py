"""``python -m accgraph.torch [options] script.py [args...]`` (or ``-m module [args...]``), like
``python -m cProfile``: runs the unmodified script as ``__main__`` with every ``nn.Module`` call
timed (``accgraph.torch.instrument(prof, modules=True)``: in CUDA graph captures, into the graph,
timed on every replay; eager calls, eagerly) and prints the per-module table at exit: one
section per captured graph (named by its capture site), one for the eager calls, and one for the
first eager call of each module (warm-up, compilation), kept out of the eager rows.

``python -m accgraph.torch compare A.csv B.csv [--fail-above PCT] [--html FILE]`` compares two
runs' --csv (or --json) files (Note [Comparing runs] in _compare.py); --html writes the
differential HTML report (B's icicle coloured by the verdicts: Note [HTML report] in _html.py).

Options:
  --depth N          time module calls nested at most N deep (the outermost module: 0)
  --include REGEX    time only modules whose qualified name matches (re.search)
  --exclude REGEX    do not time modules whose qualified name matches
  --graphs-only      time module calls only inside CUDA graph captures (not eager calls)
  --graph-region N   also time every captured graph as a whole, as region N
  --ring N           the profiler's ring_depth (replays in flight per graph; 0: sized by its
                     marker_memory budget)
  --keep N           reports kept for --trace (default 1024: the last ones)
  --sample N         time 1 replay in N of each graph (Profiler(sample_every=N); default 1:
                     every replay). PyTorch's graphs are foreign to accgraph: they cannot be
                     launched without their markers yet, so they are timed on every replay
                     and the table says so ("every replay timed: ...")
  --overhead PCT     or a budget: the share of each graph's device time, in percent (e.g. 0.5),
                     its markers may cost on average; each graph's N is chosen from its first
                     8 reports (Profiler(overhead=PCT/100)); not with --sample
  --trace FILE       write the kept reports as a trace (*.pftrace: Perfetto; else Chrome JSON)
  --csv FILE         write the per-module statistics as CSV
  --json FILE        write them as versioned JSON with the run's metadata (README: "Statistics
                     as JSON")
  --html FILE        write the HTML report (icicle view per graph, search, the table)
  --sort KEY         order of the rows: order (module order), total (p50), self, name
  --top N            only the N largest rows of each section (with their parents)
  --min-share PCT    only rows whose p50 is at least PCT percent of their graph's time
  --flat             full paths instead of the tree

Exit code: the script's own (its SystemExit passes through; an exception prints its traceback
and gives 1; KeyboardInterrupt gives 130, as python does), 2 when PyTorch, a GPU or accgraph's
cuda backend is missing (one line on stderr says which), the options are wrong, or an output
file cannot be written (checked before the script runs). The table is printed also when the
script fails; a report file that cannot be written after the run is an error after the table
and makes the exit code 1 (when the script's was 0).
"""

from __future__ import annotations

import argparse
import math
import os
import runpy
import sys
import traceback
from typing import Any, List, Optional, Tuple

import accgraph
import accgraph.torch as accgraph_torch

from .._native import check_output_file
from ._compare import compare
from ._html import write_diff_html, write_html
from ._table import SORTS, module_table

PROG = "python -m accgraph.torch"

EXAMPLES = f"""examples:
  {PROG} train.py --epochs 1                 time every module, print the table at exit
  {PROG} --depth 2 --top 20 serve.py         modules at most 2 deep, the 20 largest rows
  {PROG} --sort self --flat --csv a.csv train.py
  {PROG} --html report.html -m mypkg.bench   the HTML report (open it in a browser)
  {PROG} --sample 16 serve.py                time 1 replay in 16 where a graph allows it
  {PROG} compare a.csv b.csv --fail-above 5  compare two runs; exit 1 on a slowdown > 5%
  {PROG} compare a.csv b.csv --html diff.html  and draw B against A (open it in a browser)
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Run a PyTorch script with every nn.Module call timed by accgraph "
        "(CUDA graph replays included) and print the per-module table at exit.",
        usage=f"{PROG} [options] (script.py | -m module) [args...]\n"
              f"       {PROG} compare A.csv B.csv [--fail-above PCT] [--changed-only] "
              "[--html FILE]",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=None, metavar="N",
                        help="time module calls nested at most N deep (the outermost: 0)")
    parser.add_argument("--include", metavar="REGEX", help="time only modules whose qualified "
                        "name matches (re.search)")
    parser.add_argument("--exclude", metavar="REGEX", help="do not time modules whose "
                        "qualified name matches")
    parser.add_argument("--graphs-only", action="store_true", help="time module calls only "
                        "inside CUDA graph captures")
    parser.add_argument("--graph-region", metavar="NAME", help="also time every captured graph "
                        "as a whole, as region NAME")
    parser.add_argument("--ring", type=int, default=0, metavar="N",
                        help="replays in flight per graph (0: sized by the marker_memory budget)")
    parser.add_argument("--keep", type=int, default=1024, metavar="N",
                        help="reports kept for --trace (default 1024)")
    sampling = parser.add_mutually_exclusive_group()
    sampling.add_argument("--sample", type=int, default=None, metavar="N",
                          help="time 1 replay in N of each graph (default 1: every replay; "
                          "PyTorch's graphs are timed on every replay today, and the table "
                          "says so)")
    sampling.add_argument("--overhead", type=float, default=None, metavar="PCT",
                          help="or the share of each graph's device time, in percent (e.g. "
                          "0.5), its markers may cost: N chosen per graph")
    parser.add_argument("--trace", metavar="FILE", help="write the kept reports as a trace "
                        "in the format its name asks for (*.pftrace: Perfetto, *.speedscope.json: "
                        "speedscope, else Chrome JSON)")
    parser.add_argument("--csv", metavar="FILE", help="write the per-module statistics as CSV")
    parser.add_argument("--json", metavar="FILE", help="write the per-module statistics as "
                        "versioned JSON, with the run's metadata (device, driver, torch version, "
                        "timer step, marker placement, sampling)")
    parser.add_argument("--html", metavar="FILE", help="write the HTML report (icicle view per "
                        "graph, hover, zoom, search, the table)")
    parser.add_argument("--sort", choices=SORTS, default="order",
                        help="order of the rows (default: order, module order)")
    parser.add_argument("--top", type=int, default=None, metavar="N",
                        help="only the N largest rows of each section (with their parents)")
    parser.add_argument("--min-share", type=float, default=None, metavar="PCT",
                        help="only rows whose p50 is at least PCT percent of their graph's time")
    parser.add_argument("--flat", action="store_true", help="full paths instead of the tree")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script "
                        "(like python -m)")
    return parser


def _split(argv: List[str], parser: argparse.ArgumentParser) -> Tuple[List[str], List[str]]:
    """The options before the target, and the target with its arguments (the target's own
    options are not parsed: the first word that is not an option of ours starts it). Which of
    ours take a value, the parser says (every option but a flag's, whose nargs is 0)."""
    takes_value = {name for action in parser._actions if action.nargs != 0
                   for name in action.option_strings}
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "-m":
            return argv[:index + 2], argv[index + 2:]
        if word == "--":
            return argv[:index], argv[index + 1:]
        if not word.startswith("-") or word == "-":
            break
        index += 2 if word in takes_value else 1
    return argv[:index], argv[index:]


def _trimmed(tb: Any) -> Any:
    """The traceback from the script's first frame (without this module's and runpy's)."""
    skip = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}
    while tb is not None and (tb.tb_frame.f_code.co_filename in skip or
                              os.path.abspath(tb.tb_frame.f_code.co_filename) in skip):
        tb = tb.tb_next
    return tb


def _run(options: argparse.Namespace, target: List[str]) -> Any:
    """Runs the script or module as __main__; returns its exit code (SystemExit's code
    object: None, an int or a message)."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    cwd = os.getcwd()
    try:
        if options.module:
            sys.argv = [options.module] + target
            sys.path.insert(0, cwd)
            runpy.run_module(options.module, run_name="__main__", alter_sys=True)
        else:
            script = target[0]
            sys.argv = list(target)
            path0 = os.path.dirname(os.path.abspath(script))
            if sys.path:
                sys.path[0] = path0
            else:
                sys.path.insert(0, path0)
            runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as e:
        return e.code
    except BaseException as e:  # noqa: BLE001 - reported as Python would, then the table
        traceback.print_exception(type(e), e, _trimmed(e.__traceback__))
        # Python exits 130 (128 + SIGINT) on an uncaught KeyboardInterrupt.
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    finally:
        sys.argv = saved_argv
        if options.module and cwd in sys.path:
            sys.path.remove(cwd)
        elif sys.path and saved_path0 is not None:
            sys.path[0] = saved_path0


def _outputs(options: argparse.Namespace) -> List[Tuple[str, str]]:
    return [(option, path) for option, path in (("--trace", options.trace),
                                                 ("--csv", options.csv),
                                                 ("--json", options.json),
                                                 ("--html", options.html)) if path]


def _check_outputs(options: argparse.Namespace) -> bool:
    """Checks, before the script runs, that every output file can be written (a typo'd
    directory must not lose a whole run's results); one line on stderr for the first that
    cannot."""
    for option, path in _outputs(options):
        message = _unwritable(path)
        if message:
            print(f"{PROG}: {option}: {message} (nothing was run)", file=sys.stderr)
            return False
    return True


def _unwritable(path: str) -> str:
    """Why `path` cannot be written ("" when it can: check_output_file)."""
    try:
        check_output_file(path)
    except OSError as e:
        return str(e.args[1] if len(e.args) > 1 else e)
    return ""


def _untimed_lines(prof: accgraph.Profiler) -> str:
    return "".join(f"untimed: {u.count} call(s) not timed: {u.reason} (first: {u.first_name})\n"
                   for u in prof.untimed())


def _report(prof: accgraph.Profiler, options: argparse.Namespace) -> bool:
    """Prints the table, then writes the files (Note [Table first]); False when a file could
    not be written."""
    # Note [Table first]: the table is printed before any file is written, and a file that
    # cannot be written is an error after it: a run's results are never lost to a report
    # file (the paths were checked before the run, but a disk can fill up meanwhile).
    labels = accgraph_torch.graph_labels()
    print(f"accgraph.torch: {prof.delivered} report(s); per module (microseconds):")
    try:
        table = module_table(prof, labels=labels, sort=options.sort, flat=options.flat,
                             top=options.top, min_share=options.min_share)
    except Exception as e:  # noqa: BLE001 - the accgraph table then, never nothing
        print(f"{PROG}: the module table failed ({e}); accgraph's table:", file=sys.stderr)
        table = prof.stats_table()
    print(table + _untimed_lines(prof), end="")
    sys.stdout.flush()
    ok = True

    def html(path: str) -> None:
        write_html(prof, path, labels=labels)

    def stats_csv(path: str) -> None:
        prof.write_stats_csv(path, graph_labels=labels)

    def stats_json(path: str) -> None:
        prof.write_stats_json(path, graph_labels=labels, metadata=accgraph_torch.run_metadata())

    for path, write in ((options.trace, prof.write_trace), (options.csv, stats_csv),
                        (options.json, stats_json), (options.html, html)):
        if path:
            try:
                write(path)
                print(f"accgraph.torch: wrote {path}")
            except Exception as e:  # noqa: BLE001 - Note [Table first]: an error after the table
                print(f"{PROG}: {path} could not be written: {e}", file=sys.stderr)
                ok = False
    return ok


def _compare_main(argv: List[str]) -> int:
    """``compare A.csv B.csv``: the comparison table; 1 with --fail-above PCT when a change
    beyond the noise is a slowdown of more than PCT percent."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} compare", description="Compare the per-module statistics of two runs "
        "(their --csv files): p50 and self p50 in both, the delta and the ratio; a change is "
        "flagged only when each run's p50 lies outside the other run's p05-p95 spread.",
        epilog=f"example:\n  {PROG} compare before.csv after.csv --fail-above 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", metavar="A.csv", help="the baseline run's --csv (or --json) file")
    parser.add_argument("b", metavar="B.csv", help="the run compared with it")
    parser.add_argument("--fail-above", type=float, default=None, metavar="PCT",
                        help="exit 1 when a flagged change is a slowdown of more than PCT "
                        "percent of A's p50, or when the runs could not be compared (a graph "
                        "of A matches none of B, or no module is in both)")
    parser.add_argument("--changed-only", action="store_true",
                        help="list only flagged changes and modules in one run only")
    parser.add_argument("--html", metavar="FILE", help="also write the differential HTML "
                        "report: B's icicle coloured by the changes against A, the table "
                        "sortable by delta and ratio")
    try:
        options = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    fail_above = options.fail_above
    if fail_above is not None and not (math.isfinite(fail_above) and fail_above >= 0):
        print(f"{PROG} compare: --fail-above must be a percentage >= 0 (got {fail_above:g}): "
              "the slowdown that fails, e.g. 5", file=sys.stderr)
        return 2
    message = _unwritable(options.html) if options.html else ""
    if message:
        print(f"{PROG} compare: --html: {message} (nothing was compared)", file=sys.stderr)
        return 2
    try:
        result = compare(options.a, options.b)
    except (OSError, ValueError) as e:
        message = e.message if isinstance(e, accgraph.Error) else str(e)
        print(f"{PROG} compare: {message}", file=sys.stderr)
        return 2
    print(result.text(changed_only=options.changed_only), end="")
    if options.html:
        try:
            write_diff_html(result, options.html, a=options.a, b=options.b)
        except (OSError, ValueError) as e:
            print(f"{PROG} compare: {options.html} could not be written: {e}", file=sys.stderr)
            return 2
        print(f"accgraph.torch: wrote {options.html}")
    if fail_above is None:
        return 0
    if result.worst_slowdown_pct > fail_above:
        print(f"{PROG} compare: a slowdown of {result.worst_slowdown_pct:.1f}% is above "
              f"--fail-above {fail_above:g}%", file=sys.stderr)
        return 1
    if result.not_compared:
        print(f"{PROG} compare: --fail-above {fail_above:g}% cannot pass: "
              f"{result.not_compared}", file=sys.stderr)
        return 1
    return 0


def _usage_problem(parser: argparse.ArgumentParser, options: argparse.Namespace,
                   target: List[str]) -> Optional[str]:
    """What is wrong with the command line, said as its error (None: nothing)."""
    if not options.module and not target:
        parser.print_usage(sys.stderr)
        return f"{PROG}: error: give a script (or -m module) to run"
    if not options.module and os.path.isdir(target[0]):
        return (f"{PROG}: can't open file {target[0]!r}: it is a directory: give the script "
                "(a .py file) to run, or -m and a module")
    if not options.module and not os.path.isfile(target[0]):
        return f"{PROG}: can't open file {target[0]!r}: no such file"
    for option, value in (("--top", options.top), ("--min-share", options.min_share)):
        if value is not None and value < 0:
            return f"{PROG}: {option} must be >= 0 (got {value:g})"
    if options.sample is not None and options.sample < 1:
        return (f"{PROG}: --sample must be >= 1 (got {options.sample}): time 1 replay in N "
                "(1: every replay)")
    if options.overhead is not None and not 0 < options.overhead < 100:  # NaN too
        return (f"{PROG}: --overhead must be a percentage above 0 and below 100 (got "
                f"{options.overhead:g}), e.g. 0.5")
    return None


def main(argv: Optional[List[str]] = None) -> Any:
    """The command line; returns the exit code (an int, or SystemExit's message)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "compare":
        return _compare_main(args[1:])
    parser = _parser()
    ours, target = _split(args, parser)
    try:
        options = parser.parse_args(ours)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return e.code
    problem = _usage_problem(parser, options, target)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    if not _check_outputs(options):
        return 2
    sampling = {}
    if options.sample is not None:
        sampling["sample_every"] = options.sample
    if options.overhead is not None:
        sampling["overhead"] = options.overhead / 100.0
    try:
        prof = accgraph.Profiler(ring_depth=options.ring, keep_reports=options.keep,
                                 first_eager_call="apart", **sampling)
        accgraph_torch.instrument(prof, modules=True, depth=options.depth,
                                  include=options.include, exclude=options.exclude,
                                  eager_modules=not options.graphs_only,
                                  graph_region=options.graph_region)
    except accgraph.UnavailableError as e:  # TorchUnavailableError among them: says which
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except (TypeError, ValueError, accgraph.Error) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    code: Any = 0
    try:
        code = _run(options, target)
    finally:
        try:
            accgraph_torch.uninstrument(force=True)  # flushes: every replay is delivered
        except accgraph.Error as e:
            print(f"{PROG}: uninstrumenting failed: {e}", file=sys.stderr)
        written = _report(prof, options)
    if not written and code in (0, None):
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
