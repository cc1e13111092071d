#!/usr/bin/env bash
# On a GPU machine: configure and build everything (Release, cuda backend ON), run the whole
# ctest suite (cuda tests and conformance on cuda included), the cuda tests 15 times over with
# ctest -j3 (flakiness under load), the cuda tests and the conformance suite on cuda under
# compute-sanitizer (memcheck with leak check, racecheck, synccheck), the demo on cuda and the
# CUDA benchmark; copy logs and JSON into $OUT (if set) and print a short summary. Any failure,
# and a missing cuda test, fails the script; a missing compute-sanitizer is reported as skipped.
#
#   scripts/gpu-check.sh            # build dir: build-gpu/ (override with BUILD_DIR=...)
#   SANITIZER=0 scripts/gpu-check.sh   # without the compute-sanitizer step
#
# The GPU machine cannot reach a package registry: the Debian packages the build needs (fmt,
# doctest, nlohmann-json, Level Zero) are carried in .deps/ (made by scripts/fetch-gpu-deps.sh)
# and unpacked here into a private prefix when the system lacks them.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-gpu}"
out="${OUT:-$build/gpu-check}"
jobs="${JOBS:-16}"
mkdir -p "$out" "$build"
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

# --- dependencies ------------------------------------------------------------------------------
cmake_extra=()
if ! ls /usr/lib/*/cmake/fmt /usr/lib/cmake/fmt >/dev/null 2>&1 && ls "$root"/.deps/*.deb >/dev/null 2>&1; then
  prefix=/tmp/accgraph-deps
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "$root"/.deps/*.deb; do dpkg -x "$deb" "$prefix"; done
  arch_lib="$prefix/usr/lib/x86_64-linux-gnu"
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$arch_lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # libze_loader.pc says prefix=/usr: move its paths under the private prefix.
  sed -i "s|^prefix=/usr|prefix=$prefix/usr|" "$arch_lib"/pkgconfig/*.pc 2>/dev/null || true
  say "deps: unpacked $(find "$root"/.deps -maxdepth 1 -name '*.deb' | wc -l) carried packages into $prefix"
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# --- build -------------------------------------------------------------------------------------
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) | $(date -u +%Y-%m-%dT%H:%MZ)"
t0=$SECONDS
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DACCGRAPH_BACKEND_CUDA=ON -DACCGRAPH_BACKEND_LEVEL_ZERO="${LEVEL_ZERO:-AUTO}" \
     "${cmake_extra[@]}" > "$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" >> "$out/build.log" 2>&1; then
  say "BUILD FAILED (last lines of build.log):"
  grep -E "error|Error" "$out/build.log" | head -30 | tee -a "$summary"
  tail -20 "$out/build.log"
  exit 1
fi
say "build: ok in $((SECONDS - t0)) s ($(grep -c 'accgraph: cuda backend ON' "$out/build.log") x 'cuda backend ON')"

bin="$build/bin"

# --- tests -------------------------------------------------------------------------------------
t0=$SECONDS
(cd "$build" && ctest --output-on-failure --timeout 300 -j 4) > "$out/ctest.log" 2>&1
ctest_rc=$?
say "ctest: rc $ctest_rc in $((SECONDS - t0)) s: $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Not Run|Exception)" "$out/ctest.log" | tee -a "$summary"
for t in cuda_backend cuda_backend_plain_markers cuda_unavailable_reason conformance_cuda; do
  line="$(grep -E "Test +#[0-9]+: $t " "$out/ctest.log" | tail -1)"
  say "  $t: ${line:-NOT REGISTERED}"
done
grep -E "SKIPPED|Skipped" "$out/ctest.log" | head -10 | sed 's/^/  skip: /' | tee -a "$summary"

# On a GPU machine every cuda test must have run and passed: one that is missing (not built) or
# skipped (no usable device) fails the check instead of passing quietly.
cuda_registered=1
for t in cuda_backend cuda_backend_plain_markers cuda_unavailable_reason conformance_cuda; do
  grep -E "Test +#[0-9]+: $t " "$out/ctest.log" | tail -1 | grep -q "Passed" || cuda_registered=0
done
if [ "$cuda_registered" -ne 1 ]; then
  say "ctest: a cuda test did not run and pass (NOT REGISTERED or skipped, see above): is the GPU visible?"
fi

# --- the whole suite, repeated under load --------------------------------------------------------
# Three at a time where ctest may (RESOURCE_LOCK gpu and RUN_SERIAL keep the GPU and timing tests
# apart: this checks that they do), 15 rounds, stopping at the first failure.
t0=$SECONDS
(cd "$build" && ctest -j3 --repeat until-fail:15 --output-on-failure --timeout 600) \
  > "$out/ctest-repeat.log" 2>&1
repeat_rc=$?
say "ctest -j3 --repeat until-fail:15: rc $repeat_rc in $((SECONDS - t0)) s: $(grep -E 'tests passed|tests failed' "$out/ctest-repeat.log" | tail -1)"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Not Run|Exception)" "$out/ctest-repeat.log" | tee -a "$summary"
if grep -q "No tests were found" "$out/ctest-repeat.log"; then
  say "  no cuda test found: that counts as a failure"
  repeat_rc=1
fi

# --- compute-sanitizer -------------------------------------------------------------------------
# test_cuda and the conformance suite on cuda under memcheck (with the leak check), racecheck and
# synccheck. A run passes only if it exits 0 AND the tool printed its summary with nothing in it
# ("ERROR SUMMARY: 0 errors"; racecheck: "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0
# warnings)"; memcheck: no leaked bytes), so a sanitizer that did not run, or stopped early,
# cannot pass. The sanitizer serialises kernels and slows launches, so test_cuda skips its timing
# upper bounds there (ACCGRAPH_TEST_SKIP_TIMING_BOUNDS=1, see tests/cuda/test_cuda.cpp).
sanitizer_rc=0
sanitizer_note=""
compute_sanitizer="$(command -v compute-sanitizer || true)"
if [ -z "$compute_sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
  compute_sanitizer=/usr/local/cuda/bin/compute-sanitizer
fi
# clean_sanitizer_log TOOL LOG: true when LOG holds TOOL's summary and every summary is clean.
clean_sanitizer_log() {
  local summaries
  if [ "$1" = racecheck ]; then
    summaries="$(grep -E "RACECHECK SUMMARY:" "$2")"
    [ -n "$summaries" ] || return 1
    ! echo "$summaries" | grep -vqE "RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)" || return 1
  else
    summaries="$(grep -E "ERROR SUMMARY:" "$2")"
    [ -n "$summaries" ] || return 1
    ! echo "$summaries" | grep -vqE "ERROR SUMMARY: 0 errors" || return 1
  fi
  # Errors of another kind may come with a clean summary line of this one: none is allowed.
  ! grep -qE "ERROR SUMMARY: [1-9]|LEAK SUMMARY: [1-9]|Leaked [0-9]+ bytes" "$2"
}
if [ "${SANITIZER:-1}" = "0" ]; then
  say "compute-sanitizer: SKIPPED (SANITIZER=0)"
  sanitizer_note=" (sanitizer skipped by SANITIZER=0)"
elif [ -z "$compute_sanitizer" ]; then
  say "compute-sanitizer: SKIPPED: not on PATH and not in /usr/local/cuda/bin (it comes with the CUDA Toolkit)"
  sanitizer_note=" (sanitizer SKIPPED: not found)"
else
  for tool in memcheck racecheck synccheck; do
    # --report-api-errors no: the tests provoke CUDA API errors on purpose (capture misuse,
    # unjoined forks, an update that must fall back) and check that accgraph turns each into an
    # accgraph::Error; the sanitizer would count those as errors. Memory, race and sync errors
    # are still reported.
    tool_args=(--tool "$tool" --error-exitcode 1 --report-api-errors no)
    if [ "$tool" = memcheck ]; then tool_args+=(--leak-check full); fi
    for target in test_cuda conformance; do
      if [ "$target" = test_cuda ]; then
        command=("$bin/test_cuda")
      else
        command=("$bin/accgraph-conformance" --backend cuda)
      fi
      log="$out/sanitizer-$tool-$target.log"
      t0=$SECONDS
      ACCGRAPH_TEST_SKIP_TIMING_BOUNDS=1 timeout 1800 "$compute_sanitizer" "${tool_args[@]}" \
        "${command[@]}" > "$log" 2>&1
      rc=$?
      summary_line="$(grep -E "(ERROR|RACECHECK|LEAK) SUMMARY:" "$log" | sed 's/^=* *//' | paste -sd ';' -)"
      if [ "$rc" -eq 0 ] && clean_sanitizer_log "$tool" "$log"; then
        say "compute-sanitizer $tool $target: ok in $((SECONDS - t0)) s ($summary_line)"
      else
        sanitizer_rc=1
        say "compute-sanitizer $tool $target: FAILED, rc $rc in $((SECONDS - t0)) s (${summary_line:-no summary line: the tool did not finish}); log: $log"
        grep -E "^========= (Invalid|Race|Barrier|Leaked|Program hit|Error|Warning|Saved host backtrace)|^[^=].*(FAILED|ERROR|error:)" "$log" \
          | head -20 | sed 's/^/    /' | tee -a "$summary"
      fi
    done
  done
fi

# --- demo and backends -------------------------------------------------------------------------
{
  echo "\$ accgraph backends"; "$bin/accgraph" backends
  echo; echo "\$ CUDA_VISIBLE_DEVICES='' accgraph backends"; CUDA_VISIBLE_DEVICES='' "$bin/accgraph" backends
  echo; echo "\$ accgraph demo --backend cuda --layers 4 --replays 50 --trace $out/trace.json"
  "$bin/accgraph" demo --backend cuda --layers 4 --replays 50 --trace "$out/trace.json"
} > "$out/demo.log" 2>&1
demo_rc=$?
say "demo: rc $demo_rc, trace $( [ -s "$out/trace.json" ] && echo "written ($(wc -c < "$out/trace.json") bytes)" || echo MISSING)"
grep -iE "cuda" "$out/demo.log" | head -4 | sed 's/^/  /' | tee -a "$summary"

# --- benchmark ---------------------------------------------------------------------------------
"$bin/accgraph-bench-cuda" --json "$out/bench.json" > "$out/bench.log" 2>&1
bench_rc=$?
say "bench: rc $bench_rc"
tee -a "$summary" < "$out/bench.log"

ok=$(( ctest_rc == 0 && cuda_registered == 1 && repeat_rc == 0 && sanitizer_rc == 0 && demo_rc == 0 && bench_rc == 0 ))
say "== gpu-check: $([ $ok = 1 ] && echo PASSED || echo FAILED) (ctest $ctest_rc, cuda tests ran $cuda_registered, repeat $repeat_rc, compute-sanitizer $sanitizer_rc$sanitizer_note, demo $demo_rc, bench $bench_rc)"
[ $ok = 1 ]
