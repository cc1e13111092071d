#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cpp, the fuzz preset: clang, build-fuzz/) and
# runs each for RUNS inputs (libFuzzer's -runs: CI fuzzes the same amount on a fast machine and a
# loaded one) or, given as Ns, for N seconds. Every fuzzer keeps its corpus in
# build-fuzz/corpus/<name>/ (it grows from run to run; tests/fuzz/corpus/<name>/ seeds it where
# present). A crash, leak, timeout or out-of-memory input is written to build-fuzz/crashes/<name>/,
# named at the end, and makes the script exit 1 once every fuzzer has run.
#
#   bash scripts/fuzz.sh               # 20,000 inputs each, 300 traces for the Python one (test.sh)
#   bash scripts/fuzz.sh 600s fuzz_stats  # one fuzzer, 10 minutes
#   bash scripts/fuzz.sh 60s fuzz_annotate_trace  # the Python one (needs scripts/python-install.sh)
#   build-fuzz/fuzz/fuzz_stats build-fuzz/crashes/fuzz_stats/crash-...   # replay one input
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
budget="${1:-20000}"
if ! [[ "$budget" =~ ^[1-9][0-9]*s?$ ]]; then
  echo "usage: $0 [RUNS|SECONDSs] [fuzz_NAME...]   (a whole number >= 1 of inputs, or of seconds" \
    "with an s after it: 20000, 60s; got '$budget')" >&2
  exit 2
fi
# libFuzzer's limit, and the Python fuzzer's (tests/python/test_torch_trace_fuzz.py): with RUNS
# it runs 300 cases (each a whole trace, far slower than one libFuzzer input) from a random seed.
if [[ "$budget" == *s ]]; then
  budget_text="${budget%s} s"
  libfuzzer_limit=(-max_total_time="${budget%s}")
  python_limit=(ACCGRAPH_FUZZ_TRACE_SECONDS="${budget%s}")
  python_text="$budget_text"
else
  budget_text="$budget inputs"
  libfuzzer_limit=(-runs="$budget")
  python_limit=(ACCGRAPH_FUZZ_TRACE_CASES=300)
  python_text="300 cases"
fi
shift $(($# > 0 ? 1 : 0))

# clang and its libFuzzer runtime (Debian 12: clang 14); installed when missing.
if command -v dpkg-query >/dev/null; then
  bash scripts/ensure-packages.sh clang libclang-rt-14-dev
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ is not on PATH; install clang (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi

build="$root/build-fuzz"
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz

python_fuzz=1  # fuzz_annotate_trace, the Python one (below)
if [ $# -gt 0 ]; then
  fuzzers=()
  python_fuzz=0
  for name in "$@"; do
    if [ "$name" = fuzz_annotate_trace ]; then
      python_fuzz=1
      continue
    fi
    if [ ! -x "$build/fuzz/$name" ]; then
      echo "fuzz.sh: no fuzzer '$name' in $build/fuzz (built: $(find "$build/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -printf '%f ' 2>/dev/null))" >&2
      exit 2
    fi
    fuzzers+=("$build/fuzz/$name")
  done
else
  mapfile -t fuzzers < <(find "$build/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | sort)
fi
if [ ${#fuzzers[@]} -eq 0 ] && [ $# -eq 0 ]; then
  echo "fuzz.sh: no fuzzers were built (tests/fuzz/fuzz_*.cpp)" >&2
  exit 1
fi

# LeakSanitizer runs at the end of each input; abort_on_error=0 so a report exits with libFuzzer's
# error code (which names the saved input) instead of a core dump.
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

failed=()
for fuzzer in "${fuzzers[@]}"; do
  name="$(basename "$fuzzer")"
  corpus="$build/corpus/$name"
  crashes="$build/crashes/$name"
  log="$build/logs/$name.log"
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  seeds=()
  if [ -d "$root/tests/fuzz/corpus/$name" ]; then seeds=("$root/tests/fuzz/corpus/$name"); fi
  stamp="$build/logs/$name.started"
  touch "$stamp"
  echo "== fuzz: $name for $budget_text (corpus $corpus: $(find "$corpus" -type f | wc -l) inputs)"
  rc=0
  # -timeout: one input running longer than 10 s is a hang; -rss_limit_mb keeps a runaway input
  # from taking the shared machine's memory.
  "$fuzzer" "${libfuzzer_limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" "${seeds[@]}" > "$log" 2>&1 || rc=$?
  new_artifacts="$(find "$crashes" -type f -newer "$stamp" | sort)"
  if [ "$rc" -ne 0 ] || [ -n "$new_artifacts" ]; then
    tail -n 60 "$log" >&2
    echo "FAILED: $name exited with $rc; input(s) kept:" >&2
    while IFS= read -r artifact; do echo "  $artifact" >&2; done <<< "${new_artifacts:-(none written: see $log)}"
    echo "  reproduce: $fuzzer <input>     full log: $log" >&2
    failed+=("$name")
  else
    runs="$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')"
    cov="$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 || true)"
    echo "ok: $name: $runs inputs, ${cov:-cov: ?}, corpus now $(find "$corpus" -type f | wc -l) inputs"
  fi
done

# annotate_trace is Python: tests/python/test_torch_trace_fuzz.py mutates its inputs with
# Python's random (300 fixed cases in test.sh's python part). Here, with the package installed
# (scripts/python-install.sh), it runs 300 cases (or for SECONDS) from a random seed; the seed of
# a failing case is in its output.
venv_python="${ACCGRAPH_VENV:-$root/build/venv}/bin/python"
if [ "$python_fuzz" -eq 1 ]; then
  if [ -x "$venv_python" ] && "$venv_python" -c "import accgraph.torch" 2>/dev/null; then
    seed=$(( (RANDOM << 15 | RANDOM) ))
    echo "== fuzz: fuzz_annotate_trace (Python) for $python_text from seed $seed"
    log="$build/logs/fuzz_annotate_trace.log"
    mkdir -p "$build/crashes/fuzz_annotate_trace" "$(dirname "$log")"
    if env "${python_limit[@]}" ACCGRAPH_FUZZ_TRACE_SEED="$seed" \
        ACCGRAPH_FUZZ_TRACE_KEEP="$build/crashes/fuzz_annotate_trace" \
        "$venv_python" -m pytest -p no:cacheprovider -q -s tests/python/test_torch_trace_fuzz.py \
        > "$log" 2>&1; then
      echo "ok: fuzz_annotate_trace: $(grep -o 'seeds .* failed' "$log" || echo '?')"
    else
      tail -n 40 "$log" >&2
      echo "FAILED: fuzz_annotate_trace; inputs kept in $build/crashes/fuzz_annotate_trace; full log: $log" >&2
      failed+=("fuzz_annotate_trace")
    fi
    fuzzers+=("fuzz_annotate_trace")
  else
    echo "fuzz: fuzz_annotate_trace skipped: no accgraph package in $venv_python (scripts/python-install.sh); test.sh's python part runs its 300 fixed cases"
  fi
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#fuzzers[@]} fuzzers failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#fuzzers[@]} fuzzers ran without a finding (libFuzzer's: $budget_text each$(
  [ "$python_fuzz" -eq 0 ] || echo "; the Python one: $python_text"))"
