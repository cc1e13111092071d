#!/usr/bin/env bash
# The timing layer's instructions per region per replay on the host backend, under callgrind:
# (I(timed, N2) - I(timed, N1)) - (I(untimed, N2) - I(untimed, N1)), over (N2 - N1) x REGIONS.
# Setup and capture cancel out in the differences; every thread (launch, host worker, collector)
# is counted. The same figure is also split by thread: the launching thread (launch, collection,
# statistics: the host cost a GPU backend also pays) and the others (the host worker running the
# marker operations: device work on a GPU backend). Usage:
#   bench/callgrind/run_callgrind.sh [BUILD_DIR] [REGIONS] [N1] [N2]
set -euo pipefail
build=${1:-build}; regions=${2:-1000}; n1=${3:-20}; n2=${4:-220}
exe="$build/bin/accgraph-bench-callgrind"
command -v valgrind >/dev/null || { echo "run_callgrind.sh: valgrind is not installed (apt install valgrind)" >&2; exit 2; }
[[ -x $exe ]] || { echo "run_callgrind.sh: $exe is missing: build the target accgraph-bench-callgrind" >&2; exit 2; }
instructions() {  # mode replays -> "launching-thread other-threads" instructions (Ir)
  local dir; dir=$(mktemp -d)
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/out" \
    "$exe" "$1" "$regions" "$2" 2>/dev/null
  # One file per thread, out-01 the main (launching) thread.
  local counts; counts=$(awk '/^summary:/ {print FILENAME, $2}' "$dir"/out-* | awk '
    $1 ~ /-01$/ {main += $2; next} {other += $2} END {if (main > 0) printf "%d %d", main, other}')
  rm -rf "$dir"
  [[ -n $counts ]] || { echo "run_callgrind.sh: no callgrind summary for $1 $2" >&2; exit 1; }
  echo "$counts"
}
read -r tm1 to1 <<<"$(instructions timed "$n1")"; read -r tm2 to2 <<<"$(instructions timed "$n2")"
read -r um1 uo1 <<<"$(instructions untimed "$n1")"; read -r um2 uo2 <<<"$(instructions untimed "$n2")"
awk -v tm1="$tm1" -v tm2="$tm2" -v to1="$to1" -v to2="$to2" -v um1="$um1" -v um2="$um2" \
    -v uo1="$uo1" -v uo2="$uo2" -v n1="$n1" -v n2="$n2" -v r="$regions" 'BEGIN {
  n = n2 - n1
  timed = ((tm2 + to2) - (tm1 + to1)) / n; untimed = ((um2 + uo2) - (um1 + uo1)) / n
  launch = ((tm2 - tm1) - (um2 - um1)) / n / r; other = ((to2 - to1) - (uo2 - uo1)) / n / r
  printf "callgrind, host backend, %d regions: %.0f instructions per timed replay, %.0f untimed; " \
         "timing layer %.1f instructions per region per replay (launching thread %.1f, " \
         "host worker %.1f)\n", r, timed, untimed, (timed - untimed) / r, launch, other }'
