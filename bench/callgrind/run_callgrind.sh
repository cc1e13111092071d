#!/usr/bin/env bash
# The timing layer's instructions per region per replay on the host backend, under callgrind:
# (I(timed, N2) - I(timed, N1)) - (I(untimed, N2) - I(untimed, N1)), over (N2 - N1) x REGIONS.
# Setup and capture cancel out in the differences; every thread (launch, host worker, collector,
# statistics) is counted. The same figure is also split by thread: the launching thread
# (launch, collection, and the statistics' staging, or all of the statistics with
# no-stats-thread: the host cost a GPU backend also pays), the statistics thread
# (ProfilerOptions::stats_thread, Note [Stats thread] in timing/model/stats.cpp: its callgrind file
# is the one that ran its std::thread entry) and the backend's workers (the host worker running the
# marker operations: device work on a GPU backend). Usage:
#   bench/callgrind/run_callgrind.sh [BUILD_DIR] [REGIONS] [N1] [N2] [stats-thread|no-stats-thread]
# (by default the profiler's default: stats-thread)
set -euo pipefail
build=${1:-build}; regions=${2:-1000}; n1=${3:-20}; n2=${4:-220}; stats=${5:-default}
# default: no argument (the profiler's default, stats_thread on; also for a program from before
# the argument existed)
stats_arg=(); [[ $stats == default ]] || stats_arg=("$stats")
exe="$build/bin/accgraph-bench-callgrind"
command -v valgrind >/dev/null || { echo "run_callgrind.sh: valgrind is not installed (apt install valgrind)" >&2; exit 2; }
[[ -x $exe ]] || { echo "run_callgrind.sh: $exe is missing: build the target accgraph-bench-callgrind" >&2; exit 2; }
[[ $stats == default || $stats == stats-thread || $stats == no-stats-thread ]] ||
  { echo "run_callgrind.sh: the 5th argument is stats-thread or no-stats-thread, not '$stats'" >&2; exit 2; }
# The statistics thread's entry: std::thread's _M_run of StatsAccumulator's lambda (only that
# thread runs it; the launching thread only constructs the std::thread).
stats_entry='_M_run.*StatsAccumulator|StatsAccumulator.*_M_run'
instructions() {  # mode replays -> "launching statistics workers" instructions (Ir)
  local dir; dir=$(mktemp -d)
  # --fair-sched: valgrind runs one thread at a time; without it the statistics thread seldom
  # gets its turn, and add() folds the batches that fill its queue (a third of them at 1000
  # regions), which no multi-core machine does.
  valgrind --tool=callgrind --fair-sched=yes --separate-threads=yes \
    --callgrind-out-file="$dir/out" --log-file="$dir/valgrind.log" \
    "$exe" "$1" "$regions" "$2" "${stats_arg[@]}" 2>"$dir/stderr"
  # Who folded the statistics (the program says, from the counters of Note [Stats thread]).
  [[ $1 != timed || $2 != "$n2" ]] || sed -n 's/^statistics batches/  timed, '"$2"' replays: &/p' "$dir/stderr" >&2
  # One file per thread, out-01 the main (launching) thread.
  local file summary main=0 statistics=0 workers=0
  for file in "$dir"/out-*; do
    summary=$(awk '/^summary:/ {print $2}' "$file")
    [[ -n $summary ]] || continue
    if [[ $file == *-01 ]]; then main=$((main + summary))
    elif grep -Eq "$stats_entry" "$file"; then statistics=$((statistics + summary))
    else workers=$((workers + summary)); fi
  done
  rm -rf "$dir"
  (( main > 0 )) || { echo "run_callgrind.sh: no callgrind summary for $1 $2" >&2; exit 1; }
  echo "$main $statistics $workers"
}
read -r tm1 ts1 tw1 <<<"$(instructions timed "$n1")"; read -r tm2 ts2 tw2 <<<"$(instructions timed "$n2")"
read -r um1 us1 uw1 <<<"$(instructions untimed "$n1")"; read -r um2 us2 uw2 <<<"$(instructions untimed "$n2")"
awk -v tm1="$tm1" -v tm2="$tm2" -v ts1="$ts1" -v ts2="$ts2" -v tw1="$tw1" -v tw2="$tw2" \
    -v um1="$um1" -v um2="$um2" -v us1="$us1" -v us2="$us2" -v uw1="$uw1" -v uw2="$uw2" \
    -v n1="$n1" -v n2="$n2" -v r="$regions" -v stats="$stats" 'BEGIN {
  n = n2 - n1
  timed = ((tm2 + ts2 + tw2) - (tm1 + ts1 + tw1)) / n
  untimed = ((um2 + us2 + uw2) - (um1 + us1 + uw1)) / n
  launch = ((tm2 - tm1) - (um2 - um1)) / n / r
  statistics = ((ts2 - ts1) - (us2 - us1)) / n / r
  workers = ((tw2 - tw1) - (uw2 - uw1)) / n / r
  printf "callgrind, host backend, %d regions, %s: %.0f instructions per timed replay, %.0f " \
         "untimed; timing layer %.1f instructions per region per replay (launching thread " \
         "%.1f, statistics thread %.1f, backend workers %.1f)\n", r, stats, timed, untimed,
         (timed - untimed) / r, launch, statistics, workers }'
