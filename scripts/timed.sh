# Sourced by quickstart.sh and test.sh: how long each step takes, printed as it ends.
#
# timed_step NAME COMMAND...  runs COMMAND, prints its wall time, also when it fails (then it
# returns COMMAND's exit code); with ACCGRAPH_CI_TIMES set (.ci/run sets it) it also appends
# "<seconds>\t<NAME>\t<passed|FAILED (exit N)>" to that file, which .ci/run prints at the end.
timed_step() {
  local name="$1" start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  local took=$((SECONDS - start)) result=passed
  if [ "$rc" -ne 0 ]; then result="FAILED (exit $rc)"; fi
  echo "==== $name: $result in $took s ($((took / 60)) min $((took % 60)) s)"
  if [ -n "${ACCGRAPH_CI_TIMES:-}" ]; then
    printf '%d\t%s\t%s\n' "$took" "$name" "$result" >> "$ACCGRAPH_CI_TIMES"
  fi
  return "$rc"
}
