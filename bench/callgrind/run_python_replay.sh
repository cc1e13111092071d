#!/usr/bin/env bash
# Instructions per Python Graph.replay() of a host graph of one fill, under callgrind, beyond the
# host backend's own replay (HostGraph::replay: the enqueue a GPU backend's launch replaces), on
# the launching thread. Each figure is a difference between N2 and N1 replays over N2 - N1, so
# setup and exit cancel out:
#   binding + core  from the binding's entry (Graph.replay's method, Note [Replay method] in
#                   bindings/python/src/graph.cpp; a nanobind function's bound-method call before
#                   it) to the backend: the argument parsing, the binding (GraphUse, the GIL
#                   release, the stream's share and replayed_on) and AcceleratorGraph::replay
#                   (checks, hooks, the stream lookup); the figure to cut
#   core            AcceleratorGraph::replay alone;  GIL  the release and re-acquisition
#   with Python     the whole thread but the final synchronize, less the backend: the
#                   interpreter's loop and call too, and also the allocator's work behind the host
#                   worker's frees (malloc_consolidate), which moves it by up to ~250 from run to
#                   run: indicative only (the C++ loop's row shows that part alone)
# for g.replay(), g.replay(stream) and the C++ loop of accgraph.benchmarks.replay_loop_ns (no binding). Usage:
#   bench/callgrind/run_python_replay.sh [PYTHON] [N1] [N2]
# PYTHON: an interpreter that imports accgraph (default: build/venv/bin/python, else python3;
# PYTHONPATH=build/python when the build tree has the package: ACCGRAPH_BUILD_PYTHON=ON).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python=${1:-}; n1=${2:-1000}; n2=${3:-3000}
if [[ -z $python ]]; then
  python=python3
  [[ -x $root/build/venv/bin/python ]] && python=$root/build/venv/bin/python
fi
[[ -d $root/build/python/accgraph ]] && export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
command -v valgrind >/dev/null || { echo "run_python_replay.sh: valgrind is not installed (apt install valgrind)" >&2; exit 2; }
"$python" -c 'import accgraph' 2>/dev/null || {
  echo "run_python_replay.sh: $python cannot import accgraph: pass an interpreter that can, or build with ACCGRAPH_BUILD_PYTHON=ON (or bash scripts/python-install.sh)" >&2; exit 2; }
# Fixed string hashing: dict lookups (imports, attribute reads) then cost the same in every run.
export PYTHONHASHSEED=0

# mode count -> "total backend core gil call": the launching thread's instructions (less
# Stream::synchronize) and the
# inclusive instructions of HostGraph::replay, of AcceleratorGraph::replay, of the GIL's release
# plus re-acquisition (nanobind::gil_scoped_release) and of the binding's entry.
count() {
  local dir; dir=$(mktemp -d)
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/out" \
    "$python" "$root/bench/callgrind/python_replay.py" "$1" "$2" 2>/dev/null
  # A function's inclusive cost is its largest entry: the others are the parts inlined from
  # headers, already inside it.
  local counts; counts=$(callgrind_annotate --inclusive=yes --auto=no --threshold=100 \
    "$dir/out-01" | awk '
    function keep(key, v) { if (v + 0 > best[key] + 0) best[key] = v + 0 }
    /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1; next }
    { v = $1; gsub(",", "", v); if (v !~ /^[0-9]+$/) next }
    /:accgraph::detail::host::HostGraph::replay\(/ { keep("backend", v) }
    /:accgraph::AcceleratorGraph::replay\(\)/ { keep("core", v) }
    /:accgraph::AcceleratorGraph::replay\(accgraph::Stream&\)/ { keep("core", v) }
    /:accgraph::AcceleratorGraph::replay_with\(/ { keep("core", v) }
    /:accgraph::AcceleratorGraph::replay_on\(/ { keep("core", v) }
    /:PyEval_SaveThread / { keep("release", v) }
    /:PyEval_RestoreThread / { keep("acquire", v) }
    /:nanobind::detail::nb_bound_method_vectorcall\(/ { keep("nanobind", v) }
    /:accgraph::python::\(anonymous namespace\)::replay_method\(/ { keep("method", v) }
    /:accgraph::Stream::synchronize\(\)/ { keep("sync", v) }
    END {
      if (total > 0) printf "%d %d %d %d %d", total - best["sync"], best["backend"], best["core"],
                            best["release"] + best["acquire"], best["nanobind"] + best["method"] }')
  rm -rf "$dir"
  [[ -n $counts ]] || { echo "run_python_replay.sh: no callgrind summary for $1 $2" >&2; exit 1; }
  echo "$counts"
}
report() {  # mode label
  local a b
  a=$(count "$1" "$n1"); b=$(count "$1" "$n2")
  awk -v a="$a" -v b="$b" -v n="$((n2 - n1))" -v label="$2" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    for (i = 1; i <= 5; ++i) d[i] = (y[i] - x[i]) / n
    # total backend core gil call
    binding = d[5] > 0 ? sprintf("%12.0f", d[5] - d[2]) : sprintf("%12s", "-")
    printf "%-24s %s %6.0f %6.0f %11.0f %8.0f\n", label, binding, d[3] - d[2], d[4],
           d[1] - d[2], d[2] }'
}
echo "callgrind, host graph of one fill, $n1 and $n2 replays: instructions per call, launching thread"
printf "%-24s %12s %6s %6s %11s %8s\n" "" "binding+core" "core" "GIL" "with Python" "backend"
report python "Python g.replay()"
report stream "Python g.replay(stream)"
report cpp "C++ replay() loop"
