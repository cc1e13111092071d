#!/usr/bin/env bash
# Quickstart, step 2: builds accgraph and runs every test that can run on this machine, in parts:
#
#   default  build/ (the default preset): ctest (unit, conformance on every backend here, CLI,
#            plugins, Level Zero through the CPU driver, CUDA tests that skip without a GPU),
#            then the installed-package and out-of-tree plugin check (check-package.sh)
#   asan     build-asan/: the whole ctest under AddressSanitizer + UBSan + LeakSanitizer
#   tsan     build-tsan/: the whole ctest under ThreadSanitizer
#   fuzz     build-fuzz/: every libFuzzer target for ACCGRAPH_FUZZ_SECONDS (30) s (fuzz.sh)
#   soak     build/: the soak test (ctest --preset soak): 10,000 replay cycles and 10,000
#            short-lived streams on host and level_zero, flat memory, every report delivered
#
#   bash scripts/test.sh                     # every part (CI): 5 min on an idle 2-core machine,
#                                            # 11 min on a loaded one, after quickstart's build
#   ACCGRAPH_TEST_QUICK=1 bash scripts/test.sh   # the default part only (build + 30 s)
#   bash scripts/test.sh asan soak           # the parts named
#
# Every part runs even when an earlier one failed (each in its own `bash -euo pipefail`, so any
# failing command fails its part); the summary gives each part's result and time, and the
# script exits 1 if any part failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
all_parts=(default asan tsan fuzz soak)

# Runs "$@" and prints how long it took, also when it fails (then it returns its exit code,
# which ends the part: errexit).
timed() {
  local start=$SECONDS rc=0
  echo "+ $*"
  "$@" || rc=$?
  echo "  ($((SECONDS - start)) s: $*)$([ "$rc" -eq 0 ] || echo " FAILED with exit $rc")"
  return "$rc"
}

# Each part, run as `bash scripts/test.sh --part NAME`.
part_default() {
  timed cmake --preset default
  timed cmake --build --preset default
  timed ctest --preset default
  timed bash scripts/check-package.sh build "$root/build/package-prefix"
}

part_asan() {
  timed cmake --preset asan
  timed cmake --build --preset asan
  timed ctest --preset asan
}

part_tsan() {
  timed cmake --preset tsan
  timed cmake --build --preset tsan
  # ThreadSanitizer needs the address layout it was built for; kernels with more mmap
  # randomisation bits than it knows (vm.mmap_rnd_bits > 28 on recent kernels) make it abort
  # with "unexpected memory mapping". Without ASLR it runs everywhere.
  local no_aslr=()
  if command -v setarch > /dev/null && setarch "$(uname -m)" -R true 2> /dev/null; then
    no_aslr=(setarch "$(uname -m)" -R)
  fi
  timed "${no_aslr[@]}" ctest --preset tsan
}

part_fuzz() {
  timed bash scripts/fuzz.sh "${ACCGRAPH_FUZZ_SECONDS:-30}"
}

part_soak() {
  timed cmake --preset default
  timed cmake --build --preset default
  timed ctest --preset soak
}

if [ "${1:-}" = "--part" ]; then
  "part_$2"
  exit 0
fi

parts=()
if [ $# -gt 0 ]; then
  for part in "$@"; do
    case " ${all_parts[*]} " in
      *" $part "*) parts+=("$part") ;;
      *) echo "usage: $0 [PART...]   PART: ${all_parts[*]} (got '$part')" >&2; exit 2 ;;
    esac
  done
elif [ "${ACCGRAPH_TEST_QUICK:-0}" = "1" ]; then
  parts=(default)
  echo "test.sh: ACCGRAPH_TEST_QUICK=1: the default part only (skipping asan, tsan, fuzz, soak)"
else
  parts=("${all_parts[@]}")
fi

summary=()
failed=0
total_start=$SECONDS
for part in "${parts[@]}"; do
  echo
  echo "==== test.sh: $part"
  start=$SECONDS
  rc=0
  bash -euo pipefail "${BASH_SOURCE[0]}" --part "$part" || rc=$?
  took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf '  %-8s passed  %5d s (%d min %02d s)' "$part" "$took" $((took / 60)) $((took % 60)))")
  else
    failed=$((failed + 1))
    summary+=("$(printf '  %-8s FAILED  %5d s (exit %d)' "$part" "$took" "$rc")")
  fi
  echo "==== test.sh: $part: $([ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $took s"
done

total=$((SECONDS - total_start))
echo
echo "==== test.sh summary ($total s = $((total / 60)) min $((total % 60)) s)"
printf '%s\n' "${summary[@]}"
echo "parts: $((${#parts[@]} - failed)) passed, $failed failed"
if [ "$failed" -ne 0 ]; then
  echo "test.sh: $failed of ${#parts[@]} parts FAILED (their output is above)" >&2
  exit 1
fi
