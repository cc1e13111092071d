"""The timing layer: regions recorded into a captured graph (context manager and decorator),
a report per replay delivered to a sink, statistics, and the exporters.

    python examples/python/profiling.py [BACKEND] [OUTPUT_DIR]
"""

import pathlib
import sys
import tempfile

import accgraph


def main(backend: str = "host", output_dir: str = "") -> None:
    stream = accgraph.Stream(backend)
    a = accgraph.Buffer(stream, 1 << 20)
    b = accgraph.Buffer(stream, 1 << 20)

    prof = accgraph.Profiler(keep_reports=100)
    slow = []
    prof.add_sink(lambda report: slow.extend(r.path for r in report if r.duration_ns > 10**9))

    @prof.region(stream, "copy")  # a decorator: every call is a region
    def copy() -> None:
        stream.copy(b, a)

    g = accgraph.Graph(backend)
    prof.attach(g)  # or prof.attach_all()
    with g.capture(stream):
        with prof.region(stream, "layer0", bytes=1 << 20):  # metadata: any str()-able value
            with prof.region(stream, "fill"):
                stream.fill(a, 0x2A)
            copy()
    for _ in range(20):
        g.replay()  # no host synchronisation per region or per replay
    prof.flush()  # every replay's report -> sinks, stats

    report = prof.reports()[-1]
    print(f"{report!r}: " + ", ".join(f"{r.path} {r.duration_ns} ns" for r in report))
    print(prof.stats_table())
    print(f"{prof.delivered} reports, regions over a second: {slow}")

    out = pathlib.Path(output_dir or tempfile.mkdtemp(prefix="accgraph-"))
    prof.write_chrome_trace(out / "trace.json")  # load it in Perfetto
    prof.write_csv(out / "reports.csv")
    prof.write_stats_csv(out / "stats.csv")
    print(f"wrote {', '.join(p.name for p in sorted(out.iterdir()))} to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
