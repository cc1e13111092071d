#!/usr/bin/env bash
# Quickstart, step 2: builds accgraph and runs every test that can run on this machine, in parts:
#
#   default  build/ (the ci preset: the default build with warnings as errors): ctest (unit,
#            conformance on every backend here, CLI, plugins, Level Zero through the CPU driver,
#            Vulkan through Mesa's lavapipe, CUDA tests that skip without a GPU, the package tests: the installed package, both
#            example plugins built against it and the conformance suite on them, and the
#            Perfetto traces decoded in build/perfetto-venv, made by scripts/perfetto-venv.sh)
#   asan     build-asan/: the whole ctest under AddressSanitizer + UBSan + LeakSanitizer, less
#            the broken-on-purpose conformance mutants (label mutant-broken; not even built
#            there, cmake/AccgraphSanitizerScope.cmake) and the layers' include probes (label
#            layers: header compiles, which the default part runs)
#   tsan     build-tsan/: the same tests under ThreadSanitizer
#   fuzz     build-fuzz/: every libFuzzer target for ACCGRAPH_FUZZ_RUNS (20,000) inputs, the Python
#            one (annotate_trace) for 300 cases from a random seed (fuzz.sh)
#   soak     build/: the soak test (ctest --preset soak): 10,000 replay cycles and 10,000
#            short-lived streams on host and level_zero, flat memory, every report delivered
#   python   the Python package built into build/venv (python-install.sh: quickstart built it,
#            this rebuilds what changed), its pytest suite (tests/python) on host, level_zero
#            through the CPU driver (the default part's build/), and the toy plugin;
#            the .pftrace tests decode with the perfetto package (installed into the venv);
#            the HTML report is tested in headless Chromium (Debian's chromium, installed here)
#   torch    accgraph's torch.accelerator.Graph against PyTorch's real registry: torch 2.15.0 from
#            PyPI (the CUDA wheel, about 2.6 GB, imports without a GPU) in a venv made anew,
#            nothing cached (pip's cache off, the C++ part built from scratch), the venv removed
#            after; tests/python/test_accelerator_graph_registry.py, each case in its own process
#
#   bash scripts/test.sh                     # every part (CI; .ci/run prints each one's time)
#   ACCGRAPH_TEST_QUICK=1 bash scripts/test.sh   # the default part only (the build + ctest)
#   bash scripts/test.sh asan soak           # the parts named
#
# Every part runs even when an earlier one failed (each in its own `bash -euo pipefail`, so any
# failing command fails its part); the summary gives each part's result and time, and the
# script exits 1 if any part failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/timed.sh
all_parts=(default asan tsan fuzz soak python torch)

# Runs "$@" and prints how long it took, also when it fails (then it returns its exit code,
# which ends the part: errexit).
timed() {
  local start=$SECONDS rc=0
  echo "+ $*"
  "$@" || rc=$?
  echo "  ($((SECONDS - start)) s: $*)$([ "$rc" -eq 0 ] || echo " FAILED with exit $rc")"
  return "$rc"
}

# Configures and builds the tree of the configure and build presets named $1.
build_preset() {
  timed cmake --preset "$1"
  timed cmake --build --preset "$1"
}

# Each part, run as `bash scripts/test.sh --part NAME`.
part_default() {
  build_preset ci
  # The Perfetto trace checks decode with the perfetto PyPI package: here they must run.
  timed bash scripts/perfetto-venv.sh "$root/build/perfetto-venv"
  export ACCGRAPH_REQUIRE_PERFETTO_PYTHON=1
  timed ctest --preset ci
}

part_asan() {
  build_preset asan
  timed ctest --preset asan
}

part_tsan() {
  build_preset tsan
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
  # A number of inputs, not of seconds: the same fuzzing on an idle machine and a loaded one.
  timed bash scripts/fuzz.sh "${ACCGRAPH_FUZZ_RUNS:-20000}"
}

part_soak() {
  build_preset ci
  timed ctest --preset soak
}

part_python() {
  # The CPU Level Zero driver and an installed accgraph to build the toy plugin against: the
  # default part's tree as it is (the ci preset; the default preset's flags would rebuild it all).
  build_preset ci
  timed cmake --install build --prefix "$root/build/python-prefix"
  timed cmake -S examples/out_of_tree_backend -B build/python-toy \
    -DCMAKE_PREFIX_PATH="$root/build/python-prefix"
  timed cmake --build build/python-toy
  timed bash scripts/python-install.sh
  # The .pftrace tests decode with the perfetto package's own protos: here they must run.
  timed "${ACCGRAPH_VENV:-$root/build/venv}/bin/python" -m pip install -q perfetto protobuf
  # The HTML report of python -m accgraph.torch is tested in headless Chromium
  # (tests/python/test_torch_report_browser.py): here it must run.
  timed bash scripts/ensure-packages.sh chromium
  # The toy plugin links libaccgraph.so.0 by its soname, so loaded into Python it uses the
  # wheel's copy, which the process has already loaded.
  # vulkan runs on Mesa's lavapipe, which the backend uses only when pointed at it.
  timed env ZE_ENABLE_ALT_DRIVERS="$root/build/lib/libze_accgraph_cpu.so" \
    VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
    ACCGRAPH_TEST_TOY_PLUGIN="$root/build/python-toy/libaccgraph_toy.so" \
    ACCGRAPH_TEST_REQUIRE_BACKENDS="${ACCGRAPH_TEST_REQUIRE_BACKENDS:-host,level_zero,toy,vulkan}" \
    ACCGRAPH_TEST_REQUIRE_PERFETTO=1 ACCGRAPH_TEST_REQUIRE_CHROMIUM=1 \
    "${ACCGRAPH_VENV:-$root/build/venv}/bin/python" -m pytest -p no:cacheprovider -q -rs tests/python
}

part_torch() {
  # The package as the python part built it (reused; built here when that part did not run).
  timed bash scripts/python-install.sh
  local venv="$root/build/torch-registry-venv" work="$root/build/torch-registry"
  local site
  site="$("${ACCGRAPH_VENV:-$root/build/venv}/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  rm -rf "$venv" "$work"
  mkdir -p "$work/path"
  # accgraph alone on the torch venv's path, not the python part's other packages.
  ln -s "$site/accgraph" "$work/path/accgraph"
  timed "${ACCGRAPH_PYTHON:-python3}" -m venv "$venv"
  timed "$venv/bin/python" -m pip install -q --no-cache-dir "torch==${ACCGRAPH_TEST_TORCH_VERSION:-2.15.0}" ninja pytest
  local rc=0
  # torch's cpp_extension compiles through ccache where it is installed: off, so the C++ parts
  # are built from scratch (their cold build is what a user's first import pays).
  timed env PYTHONPATH="$work/path" PATH="$venv/bin:$PATH" CCACHE_DISABLE=1 \
    ACCGRAPH_TORCH_EXTENSIONS_DIR="$work/extensions" ACCGRAPH_TEST_REQUIRE_TORCH_REGISTRY=1 \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs \
    tests/python/test_accelerator_graph_registry.py || rc=$?
  rm -rf "$venv"  # about 5 GB installed: nothing is kept for the next run
  return "$rc"
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

# The Vulkan backend's build and CI driver (headers, Mesa's lavapipe, the shader compiler): CI
# machines set up before the backend existed lack them. Installs only what is missing.
bash scripts/ensure-packages.sh libvulkan-dev mesa-vulkan-drivers glslang-tools

summary=()
failed=0
total_start=$SECONDS
for part in "${parts[@]}"; do
  echo
  echo "==== test.sh: $part"
  start=$SECONDS
  rc=0
  timed_step "test.sh: $part" bash -euo pipefail "${BASH_SOURCE[0]}" --part "$part" || rc=$?
  took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf '  %-8s passed  %5d s (%d min %02d s)' "$part" "$took" $((took / 60)) $((took % 60)))")
  else
    failed=$((failed + 1))
    summary+=("$(printf '  %-8s FAILED  %5d s (exit %d)' "$part" "$took" "$rc")")
  fi
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
