#!/usr/bin/env bash
# The timing layer's instructions per region per replay on the host backend, under callgrind:
# (I(timed, N2) - I(timed, N1)) - (I(untimed, N2) - I(untimed, N1)), over (N2 - N1) x REGIONS.
# Setup and capture cancel out in the differences; every thread (launch, host worker, collector)
# is counted. Usage: bench/callgrind/run_callgrind.sh [BUILD_DIR] [REGIONS] [N1] [N2]
set -euo pipefail
build=${1:-build}; regions=${2:-1000}; n1=${3:-20}; n2=${4:-220}
exe="$build/bin/accgraph-bench-callgrind"
command -v valgrind >/dev/null || { echo "run_callgrind.sh: valgrind is not installed (apt install valgrind)" >&2; exit 2; }
[[ -x $exe ]] || { echo "run_callgrind.sh: $exe is missing: build the target accgraph-bench-callgrind" >&2; exit 2; }
instructions() {  # mode replays -> total instructions (Ir) of the whole process
  local out; out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$exe" "$1" "$regions" "$2" 2>/dev/null
  local ir; ir=$(awk '/^summary:/ {print $2}' "$out"); rm -f "$out"
  [[ -n $ir ]] || { echo "run_callgrind.sh: no callgrind summary for $1 $2" >&2; exit 1; }
  echo "$ir"
}
t1=$(instructions timed "$n1"); t2=$(instructions timed "$n2")
u1=$(instructions untimed "$n1"); u2=$(instructions untimed "$n2")
awk -v t1="$t1" -v t2="$t2" -v u1="$u1" -v u2="$u2" -v n1="$n1" -v n2="$n2" -v r="$regions" 'BEGIN {
  timed = (t2 - t1) / (n2 - n1); untimed = (u2 - u1) / (n2 - n1)
  printf "callgrind, host backend, %d regions: %.0f instructions per timed replay, %.0f untimed; " \
         "timing layer %.1f instructions per region per replay\n", r, timed, untimed, (timed - untimed) / r }'
