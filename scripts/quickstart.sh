#!/usr/bin/env bash
# Quickstart, step 1: installs the Debian packages accgraph needs (only those missing), builds
# libaccgraph, the `accgraph` program and the backend modules and runs `accgraph demo` (extra
# arguments go to the demo), then builds the Python package into build/venv (python-install.sh):
# build/venv/bin/python -c "import accgraph; print(accgraph.backends())". The tests are built by
# step 2, scripts/test.sh, with the ci preset in the same build/ (warnings as errors): what is
# built here with other flags would be compiled twice, so only what the demo needs is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/timed.sh

timed_step "quickstart: packages" bash scripts/ensure-packages.sh cmake g++ make pkg-config \
  libfmt-dev doctest-dev nlohmann-json3-dev libze1 libze-dev libprotobuf-dev protobuf-compiler \
  python3-venv python3-dev libvulkan-dev mesa-vulkan-drivers glslang-tools
timed_step "quickstart: configure" cmake --preset default
timed_step "quickstart: build" cmake --build --preset default --target accgraph_cli accgraph_backends
timed_step "quickstart: demo" ./build/bin/accgraph demo "$@"
timed_step "quickstart: python-install" bash scripts/python-install.sh
