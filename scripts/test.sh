#!/usr/bin/env bash
# Quickstart, step 2: builds accgraph and runs the whole test suite: ctest (unit, conformance on
# every backend that can run here, CLI, Level Zero through the CPU driver, CUDA tests that skip
# without a GPU), then the installed-package and out-of-tree plugin check.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cmake --preset default
cmake --build --preset default
ctest --preset default
bash scripts/check-package.sh build "$PWD/build/package-prefix"
