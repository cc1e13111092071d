#!/usr/bin/env bash
# On a GPU machine: configure and build everything (Release, cuda backend ON), run the whole
# ctest suite (cuda tests and conformance on cuda included), the demo on cuda and the CUDA
# benchmark; copy logs and JSON into $OUT (if set) and print a short summary.
#
#   scripts/gpu-check.sh            # build dir: build-gpu/ (override with BUILD_DIR=...)
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
  say "deps: unpacked $(ls "$root"/.deps/*.deb | wc -l) carried packages into $prefix"
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

# --- demo and backends -------------------------------------------------------------------------
bin="$build/bin"
{
  echo "\$ accgraph backends"; "$bin/accgraph" backends
  echo; echo "\$ CUDA_VISIBLE_DEVICES= accgraph backends"; CUDA_VISIBLE_DEVICES= "$bin/accgraph" backends
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
cat "$out/bench.log" | tee -a "$summary" > /dev/null
cat "$out/bench.log"

ok=$(( ctest_rc == 0 && demo_rc == 0 && bench_rc == 0 ))
say "== gpu-check: $([ $ok = 1 ] && echo PASSED || echo FAILED) (ctest $ctest_rc, demo $demo_rc, bench $bench_rc)"
[ $ok = 1 ]
