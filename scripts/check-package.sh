#!/usr/bin/env bash
# Checks the installed package the way its users meet it, by running the package tests of a
# configured and built tree (ctest label `package`, tests/package/CMakeLists.txt): install into
# <build-dir>/package-prefix, build tests/package/consumer (find_package, the build-tree export,
# pkg-config), build examples/out_of_tree_backend and examples/async_backend against the install,
# check that they export only their entry point, load them through ACCGRAPH_PLUGIN_PATH, run the
# installed conformance suite and the demo on them, and check that a plugin built for another ABI
# major is rejected with a message naming the file. ctest runs the same tests with the rest.
# usage: scripts/check-package.sh <build-dir>
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 <build-dir>" >&2
  exit 2
fi
if [ $# -eq 2 ]; then
  echo "check-package: the <prefix> argument is no longer used: the package tests install into" \
       "$1/package-prefix" >&2
fi
exec ctest --test-dir "$1" -L package --output-on-failure
