"""``python -m accgraph.torch [options] script.py [args...]`` (or ``-m module [args...]``), like
``python -m cProfile``: runs the unmodified script as ``__main__`` with every ``nn.Module`` call
timed (``accgraph.torch.instrument(prof, modules=True)``: in CUDA graph captures, into the graph,
timed on every replay; eager calls, eagerly) and prints the per-module table at exit.

Options:
  --depth N          time module calls nested at most N deep (the outermost module: 0)
  --include REGEX    time only modules whose qualified name matches (re.search)
  --exclude REGEX    do not time modules whose qualified name matches
  --graphs-only      time module calls only inside CUDA graph captures (not eager calls)
  --graph-region N   also time every captured graph as a whole, as region N
  --ring N           the profiler's ring_depth (replays in flight per graph; 0: sized by its
                     marker_memory budget)
  --keep N           reports kept for --trace (default 1024: the last ones)
  --trace FILE       write the kept reports as a trace (*.pftrace: Perfetto; else Chrome JSON)
  --csv FILE         write the per-module statistics as CSV

Exit code: the script's own (its SystemExit passes through; an exception prints its traceback
and gives 1), 2 when PyTorch, a GPU or accgraph's cuda backend is missing (one line on stderr
says which) or the options are wrong. The table is printed also when the script fails.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from typing import Any, List, Optional, Tuple

import accgraph
import accgraph.torch as accgraph_torch

PROG = "python -m accgraph.torch"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Run a PyTorch script with every nn.Module call timed by accgraph "
        "(CUDA graph replays included) and print the per-module table at exit.",
        usage=f"{PROG} [options] (script.py | -m module) [args...]")
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
    parser.add_argument("--trace", metavar="FILE", help="write the kept reports as a trace "
                        "(*.pftrace: Perfetto, else Chrome JSON)")
    parser.add_argument("--csv", metavar="FILE", help="write the per-module statistics as CSV")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script "
                        "(like python -m)")
    return parser


def _split(argv: List[str]) -> Tuple[List[str], List[str]]:
    """The options before the target, and the target with its arguments (the target's own
    options are not parsed: the first word that is not an option of ours starts it)."""
    takes_value = {"--depth", "--include", "--exclude", "--graph-region", "--ring", "--keep",
                   "--trace", "--csv"}
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
        return 1
    finally:
        sys.argv = saved_argv
        if options.module and cwd in sys.path:
            sys.path.remove(cwd)
        elif sys.path and saved_path0 is not None:
            sys.path[0] = saved_path0


def _report(prof: accgraph.Profiler, options: argparse.Namespace) -> bool:
    """Prints the table and writes the files; False when a file could not be written."""
    print(f"accgraph.torch: {prof.delivered} report(s); per region (microseconds):")
    print(prof.stats_table(), end="")
    sys.stdout.flush()
    ok = True
    for path, write in ((options.trace, prof.write_trace), (options.csv, prof.write_stats_csv)):
        if path:
            try:
                write(path)
                print(f"accgraph.torch: wrote {path}")
            except (OSError, accgraph.Error) as e:
                print(f"{PROG}: {path} could not be written: {e}", file=sys.stderr)
                ok = False
    return ok


def main(argv: Optional[List[str]] = None) -> Any:
    """The command line; returns the exit code (an int, or SystemExit's message)."""
    ours, target = _split(list(sys.argv[1:] if argv is None else argv))
    parser = _parser()
    try:
        options = parser.parse_args(ours)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return e.code
    if not options.module and not target:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: give a script (or -m module) to run", file=sys.stderr)
        return 2
    if not options.module and not os.path.isfile(target[0]):
        print(f"{PROG}: can't open file {target[0]!r}: no such file", file=sys.stderr)
        return 2
    try:
        prof = accgraph.Profiler(ring_depth=options.ring, keep_reports=options.keep)
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
            accgraph_torch._uninstrument(force=True)  # flushes: every replay is delivered
        except accgraph.Error as e:
            print(f"{PROG}: uninstrumenting failed: {e}", file=sys.stderr)
        written = _report(prof, options)
    if not written and code in (0, None):
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
