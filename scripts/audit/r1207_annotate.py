"""Re-runs the annotate_trace marker_kernels= cases (T01-T08) of the 2026-12-07 reliability audit
(area (f)), each in its own process
(scripts/audit/_harness.py), on the recorded H100 fixture (tests/python/data/torch_trace.json.gz
and its reports CSV torch_trace_reports.csv: 4 traced replays of 12 regions, a CSV written
before it carried the marker kernels' names), as the auditor did; no torch, no GPU.

    build/venv/bin/python scripts/audit/r1207_annotate.py            # every case
    build/venv/bin/python scripts/audit/r1207_annotate.py T03 T06    # some

Choices where a row is vague:
- the right marker_kernels (T02, T05) are the cuda backend's names
  (record_at_start: marker_record_kernel; record_at_end: marker_record_programmatic_kernel,
  marker_record_placed_kernel; end: marker_end_kernel), as its reports name them;
- T05: the dict is accepted (4 replays annotated), or a TypeError naming marker_kernels;
- every refused case also requires that no output was written."""

from __future__ import annotations

import sys
import warnings

from _harness import TESTS, bad, cases, check, clip, expect_error, main, ok

TRACE = TESTS / "data" / "torch_trace.json.gz"
REPORTS = TESTS / "data" / "torch_trace_reports.csv"
CUDA = dict(record_at_start=["marker_record_kernel"],
            record_at_end=["marker_record_programmatic_kernel", "marker_record_placed_kernel"],
            end=["marker_end_kernel"])


def annotate(d, marker_kernels=None, *, module="accgraph.torch"):
    import importlib

    target = importlib.import_module(module)
    kwargs = {} if marker_kernels is None else {"marker_kernels": marker_kernels}
    return target.annotate_trace(TRACE, d / "out.json", REPORTS, **kwargs)


def refused(d, call, names, cls):
    said = expect_error(call, names, cls)
    if (d / "out.json").exists():
        bad(f"refused, but out.json was written: {clip(said, 100)}")
    ok(f"{cls}: {clip(said, 170)}")


def T01(d):
    refused(d, lambda: annotate(d), ["torch_trace_reports.csv", "marker_kernels="],
            "InvalidArgumentError")


def T02(d):
    import accgraph

    summary = annotate(d, accgraph.MarkerKernels(**CUDA))
    check(summary["replays"] == 4 and summary["regions"] == 48,
          f"{summary['replays']} replays, {summary['regions']} regions, "
          f"{summary.get('unmatched_replays')} unmatched")


def T03(d):
    refused(d, lambda: annotate(d, "marker_record_kernel"), ["marker_kernels", "MarkerKernels"],
            "TypeError")


def T04(d):
    refused(d, lambda: annotate(d, ["marker_record_kernel", "marker_end_kernel"]),
            ["marker_kernels"], "TypeError")


def T05(d):
    try:
        summary = annotate(d, dict(CUDA))
    except TypeError as e:
        check("marker_kernels" in str(e), f"TypeError: {clip(str(e), 160)}")
    except Exception as e:  # noqa: BLE001
        bad(f"{type(e).__name__}: {clip(str(e), 160)}")
    check(summary["replays"] == 4, f"accepted: {summary['replays']} replays annotated")


def T06(d):
    import accgraph

    said = expect_error(lambda: annotate(d, accgraph.MarkerKernels()), ["marker_kernels"])
    check("no kernel" in said and "pass marker_kernels=" not in said and
          not (d / "out.json").exists(), clip(said, 180))


def T07(d):
    import accgraph

    kernels = accgraph.MarkerKernels(record_at_start=["no_such_start_kernel"],
                                     record_at_end=["no_such_end_kernel"],
                                     end=["no_such_last_kernel"])
    refused(d, lambda: annotate(d, kernels), ["no_such_start_kernel"], "InvalidArgumentError")


def T08(d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        refused(d, lambda: annotate(d, module="accgraph.torch_trace"),
                ["torch_trace_reports.csv", "marker_kernels="], "InvalidArgumentError")


if __name__ == "__main__":
    sys.exit(main("annotate_trace marker_kernels= (T)", cases(globals()), __file__))
