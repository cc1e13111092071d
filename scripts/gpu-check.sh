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
#   scripts/gpu-check.sh build tests demo bench   # some stages; later: repeat sanitizer
#
# Stages (all of them, in this order, by default): build tests repeat sanitizer demo bench
# python torch nccl vulkan (torch: module timing, its bench and the annotated trace fixture). The vulkan stage runs the vulkan backend on NVIDIA's Vulkan driver: the
# machine has its ICD (/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json) but no loader, so
# the stage unpacks Debian's loader and glvnd (carried in .deps/) into / and runs ldconfig when
# libvulkan.so.1 is missing, points VK_DRIVER_FILES at the ICD (override: NVIDIA_ICD=...), and
# runs the vulkan tests with a driver, the conformance suite and the demo on vulkan. The python stage builds the wheel (scripts/python-install.sh, into $BUILD_DIR/venv,
# with the interpreter's nanobind, scikit-build-core, pytest and torch: no network needed), runs
# tests/python with host and cuda required (a skip there is a failure; the PyTorch tests among
# them; tests/python/test_accelerator_graph.py builds accgraph's torch.accelerator.Graph
# extension for the installed torch, with CXX and ninja), the Python benchmark, the PyTorch
# example (examples/python/transparent_profiling.py, failing without torch or a GPU) and the
# PyTorch benchmarks (bench/python/bench_torch.py, bench_graph_routes.py).
# The nccl stage runs examples/nccl_allreduce with one rank per visible GPU (it needs
# accgraph::perfetto, hence libprotobuf, and NCCL: a missing example fails the stage) and prints
# its figures: per-rank cost, clock offsets, the ranks' alignment (with 2 or more GPUs) and the
# merged trace; with one GPU there is one rank and no alignment figure. Then the same with
# examples/python/nccl_allreduce_torch.py (torch.distributed, the python stage's wheel), then
# the host clock skew tests: tests/perfetto/multihost_skew and tests/python/multihost_skew_torch.py
# (one rank per GPU over NCCL; with one GPU two ranks share it, offsets over Gloo).
# A machine that limits one command's time runs them in several calls on one build directory:
# each stage records its result under $BUILD_DIR/gpu-check/, and every call prints the summary
# of all stages run so far and the verdict over them ("PASSED" only when every stage has run
# and passed). REPEAT=N (15) sets the rounds of the repeat stage.
#
# The GPU machine cannot reach a package registry: the Debian packages the build needs (fmt,
# doctest, nlohmann-json, Level Zero, protobuf) are carried in .deps/ (made by
# scripts/fetch-gpu-deps.sh)
# and unpacked here into a private prefix when the system lacks them.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-gpu}"
state="$build/gpu-check"  # per-stage summaries and exit codes, kept between calls
out="${OUT:-$state}"
jobs="${JOBS:-16}"
all_stages=(build tests repeat sanitizer demo bench python torch nccl vulkan)
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=("${all_stages[@]}")
for stage in "${stages[@]}"; do
  case " ${all_stages[*]} " in
    *" $stage "*) ;;
    *) echo "gpu-check.sh: unknown stage '$stage' (stages: ${all_stages[*]})" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" "$build" "$state"
# A build starts a new check: the results of earlier stages were for another build.
case " ${stages[*]} " in *" build "*) rm -f "$state"/*.summary "$state"/*.rc ;; esac
summary=/dev/null
say() { echo "$*" | tee -a "$summary"; }
wants() { case " ${stages[*]} " in *" $1 "*) return 0 ;; esac; return 1; }
# begin_stage NAME: the stage's summary lines go to $state/NAME.summary.
begin_stage() { summary="$state/$1.summary"; : > "$summary"; }
end_stage() { echo "$2" > "$state/$1.rc"; }

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
# Note [Static C++ runtime]: the GPU machines set CXX=/opt/gcc/bin/g++, a g++ that links
# libstdc++ statically. Every shared object built with it then carries (and exports) its own
# copy of the C++ runtime: `import accgraph` followed by `import torch` aborted in torch's first
# std::stringstream destructor (free(): invalid pointer, std::locale::~locale bound to
# libaccgraph's copy; cuda-gdb backtrace on the H100, 2026-11-24), and hiding the copies
# (--exclude-libs) splits the runtime's exception state between libaccgraph and its callers
# (std::uncaught_exceptions() in CaptureGuard saw 0). accgraph wants the shared libstdc++, as a
# distribution's compiler links it: use the system's gcc/g++ when they are there.
if [ -z "${ACCGRAPH_KEEP_CXX:-}" ] && [ -x /usr/bin/g++ ] && [ -x /usr/bin/gcc ]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# --- build -------------------------------------------------------------------------------------
bin="$build/bin"
if wants build; then
begin_stage build
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) | $(date -u +%Y-%m-%dT%H:%MZ) | CXX ${CXX:-c++}"
t0=$SECONDS
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DACCGRAPH_BACKEND_CUDA=ON -DACCGRAPH_BACKEND_LEVEL_ZERO="${LEVEL_ZERO:-AUTO}" \
     -DACCGRAPH_BACKEND_VULKAN="${VULKAN:-AUTO}" \
     "${cmake_extra[@]}" > "$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" >> "$out/build.log" 2>&1; then
  say "BUILD FAILED (last lines of build.log):"
  grep -E "error|Error" "$out/build.log" | head -30 | tee -a "$summary"
  tail -20 "$out/build.log"
  end_stage build 1
  exit 1
fi
say "build: ok in $((SECONDS - t0)) s ($(grep -c 'accgraph: cuda backend ON' "$out/build.log") x 'cuda backend ON')"
end_stage build 0
fi
if [ ! -x "$bin/accgraph" ]; then
  echo "gpu-check.sh: nothing built in $build: run the build stage first" >&2
  exit 1
fi

# --- tests -------------------------------------------------------------------------------------
if wants tests; then
begin_stage tests
t0=$SECONDS
(cd "$build" && ctest --output-on-failure --timeout 300 -j 4) > "$out/ctest.log" 2>&1
ctest_rc=$?
say "ctest: rc $ctest_rc in $((SECONDS - t0)) s: $(grep -E 'tests passed|tests failed' "$out/ctest.log")"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Not Run|Exception)" "$out/ctest.log" | tee -a "$summary"
for t in cuda_backend cuda_backend_plain_markers cuda_backend_chained_markers cuda_unavailable_reason \
    cuda_broken_context cuda_capture_mode_rules cuda_overhead_measurement_beside_other_threads \
    conformance_cuda; do
  line="$(grep -E "Test +#[0-9]+: $t " "$out/ctest.log" | tail -1)"
  say "  $t: ${line:-NOT REGISTERED}"
done
grep -E "SKIPPED|Skipped" "$out/ctest.log" | head -10 | sed 's/^/  skip: /' | tee -a "$summary"

# On a GPU machine every cuda test must have run and passed: one that is missing (not built) or
# skipped (no usable device) fails the check instead of passing quietly.
cuda_registered=1
for t in cuda_backend cuda_backend_plain_markers cuda_backend_chained_markers cuda_unavailable_reason \
    cuda_broken_context cuda_capture_mode_rules cuda_overhead_measurement_beside_other_threads \
    conformance_cuda; do
  grep -E "Test +#[0-9]+: $t " "$out/ctest.log" | tail -1 | grep -q "Passed" || cuda_registered=0
done
if [ "$cuda_registered" -ne 1 ]; then
  say "ctest: a cuda test did not run and pass (NOT REGISTERED or skipped, see above): is the GPU visible?"
fi
end_stage tests $(( ctest_rc == 0 && cuda_registered == 1 ? 0 : 1 ))
fi

# --- the whole suite, repeated under load --------------------------------------------------------
# Three at a time where ctest may (RESOURCE_LOCK gpu and RUN_SERIAL keep the GPU and timing tests
# apart: this checks that they do), REPEAT (15) rounds, stopping at the first failure. The
# package tests and the conformance mutants (labels package, mutants) rebuild or re-run the same
# thing each round and are left out; the tests stage ran them once.
if wants repeat; then
begin_stage repeat
rounds="${REPEAT:-15}"
t0=$SECONDS
(cd "$build" && ctest -j3 --repeat "until-fail:$rounds" -LE 'package|mutants' \
   --output-on-failure --timeout 600) > "$out/ctest-repeat.log" 2>&1
repeat_rc=$?
say "ctest -j3 --repeat until-fail:$rounds -LE 'package|mutants': rc $repeat_rc in $((SECONDS - t0)) s: $(grep -E 'tests passed|tests failed' "$out/ctest-repeat.log" | tail -1)"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Not Run|Exception)" "$out/ctest-repeat.log" | tee -a "$summary"
if grep -q "No tests were found" "$out/ctest-repeat.log"; then
  say "  no cuda test found: that counts as a failure"
  repeat_rc=1
fi
end_stage repeat "$repeat_rc"
fi

# --- compute-sanitizer -------------------------------------------------------------------------
# test_cuda and the conformance suite on cuda under memcheck (with the leak check), racecheck and
# synccheck. A run passes only if it exits 0 AND the tool printed its summary with nothing in it
# ("ERROR SUMMARY: 0 errors"; racecheck: "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0
# warnings)"; memcheck: no leaked bytes), so a sanitizer that did not run, or stopped early,
# cannot pass. The sanitizer serialises kernels and slows launches, so test_cuda skips its timing
# upper bounds there (ACCGRAPH_TEST_SKIP_TIMING_BOUNDS=1, see tests/cuda/test_cuda.cpp).
# racecheck and synccheck look at shared memory and barriers, which only the backend's sequence
# tail (marker_end_kernel in backends/cuda/kernels.cu) has; they run the conformance suite and
# the test_cuda cases below, which launch that tail with 32 and 256 threads, captured and eager,
# with each marker kind. All of test_cuda under racecheck ran over 4 minutes on an H100 (memcheck
# 42 s), more than a gpu-check call of the device tool may take with the other stages.
sync_cases='cuda: the profiler reports every replay with both strategies'
sync_cases+=',cuda: device_timestamps sequences longer than one staging chunk keep every stamp'
sync_cases+=',cuda: concurrent eager sequences on two streams keep their own stamps'
sync_cases+=',cuda: captured markers hang off the work before them and are exact'
sync_cases+=',cuda: a region boundary between PDL kernels keeps their overlap'
sync_cases+=',cuda: sampled replays run every replay*'
if wants sanitizer; then
begin_stage sanitizer
sanitizer_rc=0
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
  sanitizer_rc=skipped
elif [ -z "$compute_sanitizer" ]; then
  say "compute-sanitizer: SKIPPED: not on PATH and not in /usr/local/cuda/bin (it comes with the CUDA Toolkit)"
  sanitizer_rc=skipped
else
  for tool in memcheck racecheck synccheck; do
    # --report-api-errors no: the tests provoke CUDA API errors on purpose (capture misuse,
    # unjoined forks, an update that must fall back) and check that accgraph turns each into an
    # accgraph::Error; the sanitizer would count those as errors. Memory, race and sync errors
    # are still reported.
    tool_args=(--tool "$tool" --error-exitcode 1 --report-api-errors no)
    if [ "$tool" = memcheck ]; then tool_args+=(--leak-check full); fi
    for target in test_cuda conformance; do
      if [ "$target" = test_cuda ] && [ "$tool" = memcheck ]; then
        command=("$bin/test_cuda")
      elif [ "$target" = test_cuda ]; then
        command=("$bin/test_cuda" "--test-case=$sync_cases")
      else
        command=("$bin/accgraph-conformance" --backend cuda)
      fi
      log="$out/sanitizer-$tool-$target.log"
      t0=$SECONDS
      ACCGRAPH_TEST_SKIP_TIMING_BOUNDS=1 timeout 1800 "$compute_sanitizer" "${tool_args[@]}" \
        "${command[@]}" > "$log" 2>&1
      rc=$?
      summary_line="$(grep -E "(ERROR|RACECHECK|LEAK) SUMMARY:" "$log" | sed 's/^=* *//' | paste -sd ';' -)"
      # The filtered run must have run each of its cases (a filter that matches none runs
      # nothing, cleanly).
      cases_ran=ok
      if [ "${command[1]:-}" = "--test-case=$sync_cases" ]; then
        want_cases=$(( $(tr -cd ',' <<<"$sync_cases" | wc -c) + 1 ))
        grep -qE "test cases: +$want_cases \| +$want_cases passed" "$log" || cases_ran=missing
      fi
      if [ "$rc" -eq 0 ] && [ "$cases_ran" = ok ] && clean_sanitizer_log "$tool" "$log"; then
        say "compute-sanitizer $tool $target: ok in $((SECONDS - t0)) s ($summary_line)"
      else
        sanitizer_rc=1
        say "compute-sanitizer $tool $target: FAILED, rc $rc in $((SECONDS - t0)) s (${summary_line:-no summary line: the tool did not finish}$([ "$cases_ran" = ok ] || echo "; not every case of the filter ran"); log: $log"
        grep -E "^========= (Invalid|Race|Barrier|Leaked|Program hit|Error|Warning|Saved host backtrace)|^[^=].*(FAILED|ERROR|error:)" "$log" \
          | head -20 | sed 's/^/    /' | tee -a "$summary"
      fi
    done
  done
fi
end_stage sanitizer "$sanitizer_rc"
fi

# --- demo and backends -------------------------------------------------------------------------
if wants demo; then
begin_stage demo
{
  echo "\$ accgraph backends"; "$bin/accgraph" backends
  echo; echo "\$ CUDA_VISIBLE_DEVICES='' accgraph backends"; CUDA_VISIBLE_DEVICES='' "$bin/accgraph" backends
  echo; echo "\$ accgraph demo --backend cuda --layers 4 --replays 50 --trace $out/trace.json"
  "$bin/accgraph" demo --backend cuda --layers 4 --replays 50 --trace "$out/trace.json" &&
  echo && echo "\$ accgraph demo --backend cuda --lanes --trace $out/lanes.pftrace" &&
  "$bin/accgraph" demo --backend cuda --lanes --trace "$out/lanes.pftrace"
} > "$out/demo.log" 2>&1
demo_rc=$?
say "demo: rc $demo_rc, trace $( [ -s "$out/trace.json" ] && echo "written ($(wc -c < "$out/trace.json") bytes)" || echo MISSING), lanes trace $( [ -s "$out/lanes.pftrace" ] && echo "written ($(wc -c < "$out/lanes.pftrace") bytes)" || echo MISSING)"
grep -iE "cuda" "$out/demo.log" | head -4 | sed 's/^/  /' | tee -a "$summary"
end_stage demo "$demo_rc"
fi

# --- benchmark ---------------------------------------------------------------------------------
if wants bench; then
begin_stage bench
"$bin/accgraph-bench-cuda" --json "$out/bench.json" > "$out/bench.log" 2>&1
bench_rc=$?
say "bench: rc $bench_rc"
tee -a "$summary" < "$out/bench.log"
# Issue 43: the cost of the candidate mechanisms for sampled timing's untimed replays.
if [ -x "$bin/accgraph-probe-untimed" ]; then
  "$bin/accgraph-probe-untimed" > "$out/probe-untimed.log" 2>&1 || bench_rc=1
  tee -a "$summary" < "$out/probe-untimed.log"
fi
end_stage bench "$bench_rc"
fi

# --- python ------------------------------------------------------------------------------------
if wants python; then
begin_stage python
venv="$build/venv"
t0=$SECONDS
ACCGRAPH_VENV="$venv" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" bash "$root/scripts/python-install.sh" \
  > "$out/python.log" 2>&1
python_rc=$?
say "python: wheel build and install: rc $python_rc in $((SECONDS - t0)) s: $(grep -E '^python-install: accgraph' "$out/python.log" | tail -1)"
if [ "$python_rc" -eq 0 ]; then
  t0=$SECONDS
  (cd "$root" && ACCGRAPH_TEST_REQUIRE_BACKENDS=host,cuda \
     "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs tests/python) > "$out/pytest.log" 2>&1
  python_rc=$?
  say "python: pytest tests/python (host, cuda required): rc $python_rc in $((SECONDS - t0)) s: $(tail -1 "$out/pytest.log")"
  grep -E "^(FAILED|ERROR|SKIPPED)" "$out/pytest.log" | head -20 | sed 's/^/  /' | tee -a "$summary"
  "$venv/bin/python" "$root/bench/python/bench_python.py" > "$out/python-bench.log" 2>&1
  bench_py_rc=$?
  say "python: bench/python/bench_python.py: rc $bench_py_rc"
  tee -a "$summary" < "$out/python-bench.log"
  [ "$bench_py_rc" -eq 0 ] || python_rc=1
  # accgraph.torch: the blog's example (no --allow-skip: without torch or a GPU it fails) and
  # its benchmark against untimed replays and the blog's event timing.
  (cd "$root" && "$venv/bin/python" examples/python/transparent_profiling.py \
     --out "$out/transparent-profiling") > "$out/transparent-profiling.log" 2>&1
  example_rc=$?
  say "python: examples/python/transparent_profiling.py: rc $example_rc"
  grep -vE "^(--- Replay Iteration|\[(replay [0-9]+|eager)\] )" "$out/transparent-profiling.log" \
    | tail -25 | sed 's/^/  /' | tee -a "$summary"
  [ "$example_rc" -eq 0 ] || python_rc=1
  (cd "$root" && "$venv/bin/python" bench/python/bench_torch.py) > "$out/bench-torch.log" 2>&1
  bench_torch_rc=$?
  say "python: bench/python/bench_torch.py: rc $bench_torch_rc"
  tee -a "$summary" < "$out/bench-torch.log"
  [ "$bench_torch_rc" -eq 0 ] || python_rc=1
  # accgraph.torch's two routes (patch, PyTorch >= 2.14's lifecycle hooks): host cost per replay.
  (cd "$root" && "$venv/bin/python" bench/python/bench_graph_routes.py) > "$out/bench-graph-routes.log" 2>&1
  rc=$?
  say "python: bench/python/bench_graph_routes.py: rc $rc"
  tee -a "$summary" < "$out/bench-graph-routes.log"
  [ "$rc" -eq 0 ] || python_rc=1
else
  tail -30 "$out/python.log"
fi
end_stage python "$python_rc"
fi

# --- torch: module timing (issue 20) with the python stage's wheel ------------------------------
# python -m accgraph.torch on the example script (and on the GPT-2-small-like model with a
# decode-shape graph: its HTML reports, torch-gpt2-{1,2}.html, and compare with its differential
# report, torch-gpt2-diff.html), the module-timing benchmark (device time of all modules /
# depth <= 2 / blocks against the untimed graph at the prefill and decode shapes, host cost per
# replay; again with
# ACCGRAPH_CUDA_MARKER_PLACEMENT=chained, to compare), the CUPTI referee
# (bench/python/bench_accuracy.py) and a
# torch.profiler trace recorded and annotated (tests/python/data/record_torch_trace.py; its
# files under $OUT/torch-trace-fixture are the CI fixture of tests/python/test_torch_trace.py).
if wants torch; then
begin_stage torch
torch_rc=0
if [ ! -x "$build/venv/bin/python" ]; then
  say "torch: needs the python stage's wheel ($build/venv): run the python stage first"
  torch_rc=1
else
  py="$build/venv/bin/python"
  (cd "$root" && "$py" -m accgraph.torch --depth 2 --csv "$out/torch-modules.csv" \
     examples/python/torch_modules.py) > "$out/torch-cli.log" 2>&1
  rc=$?; say "torch: python -m accgraph.torch --depth 2 examples/python/torch_modules.py: rc $rc"
  tail -25 "$out/torch-cli.log" | sed 's/^/  /' | tee -a "$summary"
  [ "$rc" -eq 0 ] || torch_rc=1
  # Issue 37: the GPT-2-small-like model (12 blocks, batch 8, sequence 256; 3 eager calls) and
  # its decode-shape graph (batch 8, sequence 1), every module timed: the table (each graph, the
  # eager calls, their first call apart), the HTML report and the CSV, twice, then compare on
  # the two runs (the same code: changes flagged there are noise that passed the filter).
  for run in 1 2; do
    (cd "$root" && "$py" -m accgraph.torch --csv "$out/torch-gpt2-$run.csv" \
       --json "$out/torch-gpt2-$run.json" \
       --html "$out/torch-gpt2-$run.html" examples/python/torch_modules.py --blocks 12 \
       --eager 3 --decode --replays 520) > "$out/torch-gpt2-$run.log" 2>&1
    rc=$?; say "torch: python -m accgraph.torch --html (GPT-2-small-like, prefill and decode graphs), run $run: rc $rc"
    [ "$rc" -eq 0 ] || torch_rc=1
  done
  grep -E '^(graph |eager)' "$out/torch-gpt2-1.log" | sed 's/^/  /' | tee -a "$summary"
  sed -n '/report(s); per module/,/^$/p' "$out/torch-gpt2-1.log" | head -40 | sed 's/^/  /' \
    | tee -a "$summary"
  # Run 1's JSON against run 2's CSV: compare reads both formats (README: Statistics as JSON);
  # --html: the differential view of the two runs (scripts/screenshot-report.sh pictures it
  # where chromium is, e.g. for the README).
  (cd "$root" && "$py" -m accgraph.torch compare "$out/torch-gpt2-1.json" "$out/torch-gpt2-2.csv" \
     --changed-only --html "$out/torch-gpt2-diff.html") > "$out/torch-gpt2-compare.log" 2>&1
  rc=$?; say "torch: python -m accgraph.torch compare run 1 run 2 (same code): rc $rc"
  tail -30 "$out/torch-gpt2-compare.log" | sed 's/^/  /' | tee -a "$summary"
  [ "$rc" -eq 0 ] || torch_rc=1
  (cd "$root" && "$py" bench/python/bench_modules.py) > "$out/bench-modules.log" 2>&1
  rc=$?; say "torch: bench/python/bench_modules.py: rc $rc"
  tee -a "$summary" < "$out/bench-modules.log"
  [ "$rc" -eq 0 ] || torch_rc=1
  # The same with the markers chained, as before exact placement (Note [Exact marker placement]).
  (cd "$root" && ACCGRAPH_CUDA_MARKER_PLACEMENT=chained "$py" bench/python/bench_modules.py \
     --rounds 5 --models gpt) > "$out/bench-modules-chained.log" 2>&1
  rc=$?; say "torch: ACCGRAPH_CUDA_MARKER_PLACEMENT=chained bench/python/bench_modules.py: rc $rc"
  grep -E "^===|^  (graph|untimed|all modules|depth|blocks) " "$out/bench-modules-chained.log" \
    | tee -a "$summary"
  [ "$rc" -eq 0 ] || torch_rc=1
  (cd "$root" && "$py" bench/python/bench_accuracy.py --replays 10) > "$out/bench-accuracy.log" 2>&1
  rc=$?; say "torch: bench/python/bench_accuracy.py: rc $rc"
  tee -a "$summary" < "$out/bench-accuracy.log"
  [ "$rc" -eq 0 ] || torch_rc=1
  (cd "$root" && "$py" tests/python/data/record_torch_trace.py "$out/torch-trace-fixture") \
    > "$out/torch-trace.log" 2>&1
  rc=$?; say "torch: tests/python/data/record_torch_trace.py: rc $rc"
  tail -15 "$out/torch-trace.log" | sed 's/^/  /' | tee -a "$summary"
  [ "$rc" -eq 0 ] || torch_rc=1
fi
end_stage torch "$torch_rc"
fi

# --- nccl: the 2-rank example (one rank per GPU here) ------------------------------------------
if wants nccl; then
begin_stage nccl
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
if [ ! -x "$bin/nccl_allreduce" ]; then
  say "nccl: examples/nccl_allreduce was not built (it needs accgraph::perfetto and NCCL: see build.log's 'nccl_allreduce' and 'Perfetto' lines)"
  grep -E "nccl_allreduce|Perfetto" "$out/build.log" | head -5 | sed 's/^/  /' | tee -a "$summary"
  nccl_rc=1
elif [ "$gpus" -lt 1 ]; then
  say "nccl: no GPU listed by nvidia-smi"
  nccl_rc=1
else
  rm -rf "$out/nccl" && mkdir -p "$out/nccl"
  t0=$SECONDS
  timeout 300 "$bin/nccl_allreduce" --spawn "$gpus" --replays "${NCCL_REPLAYS:-1000}" \
    --out "$out/nccl" > "$out/nccl.log" 2>&1
  nccl_rc=$?
  say "nccl: nccl_allreduce --spawn $gpus ($gpus GPU(s), one rank each): rc $nccl_rc in $((SECONDS - t0)) s"
  grep -vE "^(NCCL|.*NCCL INFO)" "$out/nccl.log" | tail -20 | sed 's/^/  /' | tee -a "$summary"
  [ "$gpus" -ge 2 ] || say "  (one GPU: one rank, so no alignment across ranks; the 2-GPU figures need a machine with 2)"
  if [ "$nccl_rc" -eq 0 ]; then
    "$bin/accgraph" merge-traces "$out"/nccl/rank*.pftrace -o "$out/nccl/merged-cli.pftrace" \
      > "$out/nccl-merge.log" 2>&1
    merge_rc=$?
    say "nccl: accgraph merge-traces: rc $merge_rc"
    sed 's/^/  /' "$out/nccl-merge.log" | tee -a "$summary"
    [ "$merge_rc" -eq 0 ] || nccl_rc=1
  fi
  # The Python counterpart (torch.distributed + accgraph.torch), with the python stage's wheel.
  if [ -x "$build/venv/bin/python" ]; then
    t0=$SECONDS
    (cd "$root" && timeout 300 "$build/venv/bin/python" examples/python/nccl_allreduce_torch.py \
       --spawn "$gpus" --replays "${NCCL_REPLAYS:-1000}" --out "$out/nccl-py") \
      > "$out/nccl-py.log" 2>&1
    py_rc=$?
    say "nccl: examples/python/nccl_allreduce_torch.py --spawn $gpus: rc $py_rc in $((SECONDS - t0)) s"
    grep -vE "NCCL INFO|^\s*$" "$out/nccl-py.log" | tail -20 | sed 's/^/  /' | tee -a "$summary"
    [ "$py_rc" -eq 0 ] || nccl_rc=1
  else
    say "nccl: the Python example needs the python stage's wheel ($build/venv): run the python stage first"
    nccl_rc=1
  fi
  # Host clock skew (issue 38): ranks with injected host clock skews (100-800 us, +-50 ppm;
  # ACCGRAPH_TEST_HOST_CLOCK_SKEW), offsets measured over the process group, traces merged; the
  # script fails unless every skew is recovered within the reported uncertainty and the
  # barrier-aligned regions line up within it. One rank per GPU over NCCL with 2+ GPUs; with one
  # GPU, 2 ranks share it (NCCL refuses two ranks on one GPU, so the offsets go over Gloo; the
  # regions are still timed and calibrated on the GPU). Also the socket version (no torch).
  if [ -x "$bin/multihost_skew" ]; then
    timeout 120 "$bin/multihost_skew" > "$out/nccl-skew-cpp.log" 2>&1
    skew_rc=$?
    say "nccl: multihost_skew (4 ranks on loopback sockets, host backend): rc $skew_rc"
    grep -E "MESSAGE|ERROR|logged|test cases" "$out/nccl-skew-cpp.log" | sed 's/^.*MESSAGE: /  /' | tail -14 | tee -a "$summary"
    [ "$skew_rc" -eq 0 ] || nccl_rc=1
  fi
  if [ -x "$build/venv/bin/python" ]; then
    if [ "$gpus" -ge 2 ]; then
      skew_args=(--spawn "$(( gpus > 8 ? 8 : gpus ))" --pg nccl --device cuda)
    else
      skew_args=(--spawn 2 --pg gloo --device cuda)
    fi
    # The perfetto package decodes the traces: from the wheels scripts/fetch-gpu-deps.sh carries
    # in .deps/wheels (the GPU machines reach no index), else from the index where one is reachable.
    wheels="$root/.deps/wheels"
    if [ -d "$wheels" ]; then
      "$build/venv/bin/python" -m pip install -q --no-index --find-links "$wheels" perfetto \
        protobuf > "$out/nccl-perfetto-pip.log" 2>&1
    else
      "$build/venv/bin/python" -m pip install -q perfetto protobuf > "$out/nccl-perfetto-pip.log" 2>&1
    fi || say "nccl: installing the perfetto package failed ($out/nccl-perfetto-pip.log; run scripts/fetch-gpu-deps.sh where apt and pip reach their indexes, and carry .deps)"
    t0=$SECONDS
    (cd "$root" && timeout 300 "$build/venv/bin/python" tests/python/multihost_skew_torch.py        "${skew_args[@]}" --out "$out/nccl-skew") > "$out/nccl-skew.log" 2>&1
    skew_rc=$?
    say "nccl: multihost_skew_torch.py ${skew_args[*]}: rc $skew_rc in $((SECONDS - t0)) s"
    grep -vE "NCCL INFO|^\s*$" "$out/nccl-skew.log" | tail -30 | sed 's/^/  /' | tee -a "$summary"
    [ "$skew_rc" -eq 0 ] || nccl_rc=1
  fi
fi
end_stage nccl "$nccl_rc"
fi

# --- vulkan on NVIDIA's driver ------------------------------------------------------------------
if wants vulkan; then
begin_stage vulkan
t0=$SECONDS
icd="${NVIDIA_ICD:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}"
vulkan_rc=0
if [ ! -f "$build/lib/accgraph/libaccgraph_backend_vulkan.so" ]; then
  say "vulkan: the vulkan module was not built (no Vulkan headers: see build.log's 'vulkan backend' line; .deps/ should carry libvulkan-dev)"
  vulkan_rc=1
elif [ ! -f "$icd" ]; then
  say "vulkan: no NVIDIA Vulkan ICD at $icd (set NVIDIA_ICD=...)"
  vulkan_rc=1
else
  # The loader (libvulkan1) and glvnd, without which NVIDIA's ICD fails to load
  # (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER): unpacked into / from .deps/ when missing.
  if ! ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
    unpacked=0
    for package in libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libgles2 libopengl0; do
      deb="$(ls "$root"/.deps/"${package}"_*.deb 2>/dev/null | head -1)"
      if [ -n "$deb" ]; then dpkg -x "$deb" / && unpacked=$((unpacked + 1)); fi
    done
    ldconfig
    say "vulkan: unpacked $unpacked carried loader/glvnd packages into / (ldconfig)"
  fi
  export VK_DRIVER_FILES="$icd"
  {
    echo "\$ accgraph backends"; "$bin/accgraph" backends
    echo; echo "\$ test_vulkan_backend --test-case='driver:*'"
    ACCGRAPH_TEST_VULKAN_DEVICE=NVIDIA ACCGRAPH_TEST_VULKAN_EXPECT_DELAY=1 \
      "$bin/test_vulkan_backend" --test-case='driver:*'
  } > "$out/vulkan-tests.log" 2>&1 || vulkan_rc=1
  say "vulkan: $(grep -A1 '^vulkan ' "$out/vulkan-tests.log" | tail -1 | sed 's/^ *//')"
  say "vulkan: test_vulkan_backend (driver cases): $(grep -E '^\[doctest\] test cases' "$out/vulkan-tests.log" | tail -1)"
  "$bin/accgraph-conformance" --backend vulkan > "$out/conformance-vulkan.log" 2>&1 || vulkan_rc=1
  say "vulkan: conformance: $(grep -E 'vulkan: test cases' "$out/conformance-vulkan.log" | tail -1 | sed 's/^ *//')"
  grep -E '^ +skipped \[vulkan\]|FAILED' "$out/conformance-vulkan.log" | sed 's/^ */  /' | tee -a "$summary"
  {
    echo "\$ accgraph demo --backend vulkan --layers 4 --replays 50 --trace $out/trace-vulkan.json"
    "$bin/accgraph" demo --backend vulkan --layers 4 --replays 50 --trace "$out/trace-vulkan.json"
  } > "$out/demo-vulkan.log" 2>&1 || vulkan_rc=1
  say "vulkan: demo: $(grep -E '^backend|compute|data check' "$out/demo-vulkan.log" | head -3 | tr '\n' ' ')"
  # The same portable workload on cuda and vulkan side by side (bench/backends).
  if [ -x "$bin/accgraph-bench-backends" ]; then
    "$bin/accgraph-bench-backends" cuda vulkan > "$out/bench-backends.log" 2>&1 || vulkan_rc=1
    say "vulkan: accgraph-bench-backends cuda vulkan:"
    sed 's/^/  /' "$out/bench-backends.log" | tee -a "$summary"
  fi
fi
say "vulkan: rc $vulkan_rc in $((SECONDS - t0)) s (logs: vulkan-tests.log, conformance-vulkan.log, demo-vulkan.log)"
end_stage vulkan "$vulkan_rc"
fi

# --- verdict over every stage run on this build ---------------------------------------------------
echo
echo "==== gpu-check summary ($build)"
verdict=PASSED
results=()
for stage in "${all_stages[@]}"; do
  if [ ! -f "$state/$stage.rc" ]; then
    results+=("$stage not run")
    verdict=INCOMPLETE
    continue
  fi
  cat "$state/$stage.summary"
  rc="$(cat "$state/$stage.rc")"
  results+=("$stage $rc")
  case "$rc" in
    0) ;;
    skipped) [ "$verdict" = PASSED ] && verdict="PASSED (with skipped stages)" ;;
    *) failed=1 ;;
  esac
done
# FAILED wins over INCOMPLETE; a call whose own stages passed exits 0 while others remain.
[ "${failed:-0}" = 1 ] && verdict=FAILED
line="== gpu-check: $verdict ($(IFS=,; echo "${results[*]}" | sed 's/,/, /g'))"
echo "$line"
cat "$state"/*.summary > "$out/summary.txt" 2>/dev/null; echo "$line" >> "$out/summary.txt"
[ "$verdict" != FAILED ]
