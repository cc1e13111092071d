#!/usr/bin/env bash
# Checks the installed package the way its users meet it: install from <build-dir> into
# <prefix>, build tests/package (find_package) and a pkg-config program against it, build
# examples/out_of_tree_backend against it, load the plugin through ACCGRAPH_PLUGIN_PATH, run the
# installed conformance suite and the demo on it, and check that a plugin built for another ABI
# major is rejected with a message naming the file.
# usage: scripts/check-package.sh <build-dir> <prefix>
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 <build-dir> <prefix>" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
prefix="$2"
work="$build/package-check"
passed=0
failed=0

step() { echo; echo "== package check: $*"; }
ok() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*" >&2; }

# The prefix is scratch space that this script empties first, so that a file missing from the
# install rules cannot hide behind one left by an earlier run. It refuses to empty a directory
# that holds anything but an earlier accgraph install (a typo must never wipe /usr/local).
stamp=".accgraph-package-check"
only_accgraph_install() {
  [ -e "$1/$stamp" ] && return 0
  [ -e "$1/lib/cmake/accgraph/accgraphConfig.cmake" ] || return 1
  local entry
  for entry in $(ls -A "$1"); do
    case "$entry" in bin|include|lib) ;; *) return 1 ;; esac
  done
}
if [ -d "$prefix" ] && [ -n "$(ls -A "$prefix")" ] && ! only_accgraph_install "$prefix"; then
  echo "check-package: $prefix holds more than an earlier accgraph install, so it is not" \
       "emptied; give a new or empty directory as <prefix>" >&2
  exit 2
fi
rm -rf "$prefix" "$work"
mkdir -p "$prefix" "$work"
touch "$prefix/$stamp"

step "install into $prefix"
if ! cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1; then
  cat "$work/install.log" >&2
  echo "check-package: cmake --install $build --prefix $prefix failed" >&2
  exit 1
fi
for file in bin/accgraph bin/accgraph-conformance include/accgraph/accgraph.hpp \
            lib/cmake/accgraph/accgraphConfig.cmake lib/cmake/accgraph/accgraphConfigVersion.cmake \
            lib/pkgconfig/accgraph.pc; do
  if [ -e "$prefix/$file" ]; then ok "installed $file"; else fail "missing $prefix/$file"; fi
done

step "find_package consumer (tests/package)"
if cmake -S "$root/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer.log" 2>&1 &&
   cmake --build "$work/consumer" -j2 >> "$work/consumer.log" 2>&1 &&
   "$work/consumer/package_consumer"; then
  ok "find_package(accgraph CONFIG) consumer"
else
  cat "$work/consumer.log" >&2; fail "find_package consumer"
fi

step "pkg-config consumer"
if flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs accgraph) &&
   c++ "$root/tests/package/consumer.cpp" -o "$work/pkgconfig_consumer" $flags \
     -Wl,-rpath,"$prefix/lib" && "$work/pkgconfig_consumer"; then
  ok "pkg-config consumer ($flags)"
else
  fail "pkg-config consumer"
fi

step "out-of-tree plugin (examples/out_of_tree_backend)"
toy="$work/toy"
if cmake -S "$root/examples/out_of_tree_backend" -B "$toy" -DCMAKE_PREFIX_PATH="$prefix" > "$work/toy.log" 2>&1 &&
   cmake --build "$toy" -j2 >> "$work/toy.log" 2>&1; then
  ok "toy plugin built against the installed package"
else
  cat "$work/toy.log" >&2; fail "toy plugin build"
fi
backends_out=$(ACCGRAPH_PLUGIN_PATH="$toy" "$prefix/bin/accgraph" backends 2>&1 || true)
echo "$backends_out"
if echo "$backends_out" | grep -q "^toy (priority [0-9]*, plugin $toy/" &&
   ! echo "$backends_out" | grep -A1 "^toy " | grep -q "unavailable"; then
  ok "accgraph backends lists toy, available, loaded from ACCGRAPH_PLUGIN_PATH"
else
  fail "toy is not listed as an available plugin backend"
fi
if ACCGRAPH_PLUGIN_PATH="$toy" "$prefix/bin/accgraph-conformance" --backend toy > "$work/conformance.log" 2>&1; then
  tail -n 8 "$work/conformance.log"
  ok "installed conformance suite passes on toy"
else
  cat "$work/conformance.log" >&2; fail "conformance suite on toy"
fi
if ACCGRAPH_PLUGIN_PATH="$toy" "$prefix/bin/accgraph" demo --backend toy --layers 2 --replays 5 > "$work/demo.log" 2>&1; then
  cat "$work/demo.log"
  # One row per region, each with count 5 (the replays).
  if grep -Eq "^layer1/copy +5 " "$work/demo.log"; then
    ok "accgraph demo --backend toy --layers 2 --replays 5"
  else
    fail "demo on toy printed no 'layer1/copy' row with count 5"
  fi
else
  cat "$work/demo.log" >&2; fail "demo on toy"
fi

step "a plugin built for another ABI major is rejected"
bad="$work/toy-bad-abi"
if cmake -S "$root/examples/out_of_tree_backend" -B "$bad" -DCMAKE_PREFIX_PATH="$prefix" -DTOY_FAKE_ABI_MAJOR=ON > "$work/bad.log" 2>&1 &&
   cmake --build "$bad" -j2 >> "$work/bad.log" 2>&1; then
  bad_rc=0
  bad_out=$(ACCGRAPH_PLUGIN_PATH="$bad" "$prefix/bin/accgraph" backends 2>&1) || bad_rc=$?
  echo "$bad_out" | grep "rejected plugin" || true
  if echo "$bad_out" | grep -q "rejected plugin $bad/[^:]*\.so: .*major versions must match"; then
    ok "mismatched ABI major rejected, naming the file"
  else
    echo "$bad_out" >&2; fail "mismatched ABI major was not rejected with the file name"
  fi
  # The rejection costs nothing else: the program still succeeds and lists host, and no toy.
  if [ "$bad_rc" -eq 0 ] && echo "$bad_out" | grep -q "^host (priority" && ! echo "$bad_out" | grep -q "^toy (priority"; then
    ok "after the rejection accgraph backends still works (host listed, toy not registered)"
  else
    fail "after the rejection accgraph backends failed (exit $bad_rc) or did not list host alone"
  fi
else
  cat "$work/bad.log" >&2; fail "building the toy plugin with TOY_FAKE_ABI_MAJOR=ON"
fi

echo
echo "package check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
