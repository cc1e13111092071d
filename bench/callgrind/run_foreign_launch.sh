#!/usr/bin/env bash
# Instructions per launch of a timed foreign graph the way accgraph.torch launches a torch
# graph, on the launching thread, host backend, under callgrind: ForeignGraph.launch with the
# owner's replay as its callable (the binding, the timing layer's launch path, the Python call
# of the callable), beside the owner's own launch; and the whole replay() of a graph captured
# through accgraph.torch on the torch stand-in, with and without a region (its native replay
# on top). bench/callgrind/foreign_launch.py says what each mode runs. Each figure
# is (I(N2) - I(N1)) / (N2 - N1), so setup and exit cancel out; the final flush (collecting the
# N reports) and synchronize are taken out. Usage:
#   bench/callgrind/run_foreign_launch.sh [PYTHON] [N1] [N2]
# PYTHON: an interpreter that imports accgraph (default: build/venv/bin/python, else python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python=${1:-}; n1=${2:-200}; n2=${3:-1200}
if [[ -z $python ]]; then
  python=python3
  [[ -x $root/build/venv/bin/python ]] && python=$root/build/venv/bin/python
fi
command -v valgrind >/dev/null || { echo "run_foreign_launch.sh: valgrind is not installed (apt install valgrind)" >&2; exit 2; }
"$python" -c 'import accgraph' 2>/dev/null || {
  echo "run_foreign_launch.sh: $python cannot import accgraph: pass an interpreter that can (bash scripts/python-install.sh builds build/venv)" >&2; exit 2; }
export PYTHONHASHSEED=0  # dict lookups cost the same in every run
count() {  # mode launches -> the launching thread's instructions
  local dir total; dir=$(mktemp -d)
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/out" \
    "$python" "$root/bench/callgrind/foreign_launch.py" "$1" "$2" >/dev/null 2>"$dir/log" ||
    { cat "$dir/log" >&2; rm -rf "$dir"; exit 1; }
  # Less the final flush (collecting N reports: not launch work) and synchronize: a
  # function's inclusive cost is its largest entry (the others are parts inlined into it).
  total=$(callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$dir/out-01" | awk '
    function keep(key, v) { if (v + 0 > best[key] + 0) best[key] = v + 0 }
    /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1; next }
    { v = $1; gsub(",", "", v); if (v !~ /^[0-9]+$/) next }
    /:accgraph::timing::Profiler::flush\(\)/ { keep("flush", v) }
    /:accgraph::Stream::synchronize\(\)/ { keep("sync", v) }
    END { if (total > 0) print total - best["flush"] - best["sync"] }')
  rm -rf "$dir"
  [[ -n $total ]] || { echo "run_foreign_launch.sh: no callgrind summary for $1 $2" >&2; exit 1; }
  echo "$total"
}
declare -A per
for mode in owner owner-arg method torch-untimed torch-timed; do
  a=$(count "$mode" "$n1"); b=$(count "$mode" "$n2")
  per[$mode]=$(( (b - a) / (n2 - n1) ))
done
echo "callgrind, host backend, $n1 and $n2 launches: instructions per launch, launching thread"
printf "%-58s %8d\n" "owner's launch alone (untimed)" "${per[owner]}"
printf "%-58s %8d  (+%d)\n" "ForeignGraph.launch(fn, owner=graph) (accgraph.torch's)" \
  "${per[owner-arg]}" "$(( per[owner-arg] - per[owner] ))"
printf "%-58s %8d  (+%d)\n" "ForeignGraph.launch, callable a bound method (before)" \
  "${per[method]}" "$(( per[method] - per[owner] ))"
printf "%-58s %8d\n" "accgraph.torch stand-in: replay() without regions" "${per[torch-untimed]}"
printf "%-58s %8d  (+%d)\n" "accgraph.torch stand-in: replay() with a region" \
  "${per[torch-timed]}" "$(( per[torch-timed] - per[torch-untimed] ))"
