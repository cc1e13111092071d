#!/usr/bin/env bash
# Quickstart, step 1: installs the Debian packages accgraph needs (only those missing), builds it
# and runs `accgraph demo` (extra arguments go to the demo), then builds the Python package into
# build/venv (python-install.sh): build/venv/bin/python -c "import accgraph; print(accgraph.backends())".
# Each step's wall time is printed as it ends (scripts/timed.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/timed.sh

timed_step "quickstart: packages" bash scripts/ensure-packages.sh cmake g++ make pkg-config \
  libfmt-dev doctest-dev nlohmann-json3-dev libze1 libze-dev libprotobuf-dev protobuf-compiler \
  python3-venv python3-dev libvulkan-dev mesa-vulkan-drivers glslang-tools
timed_step "quickstart: configure" cmake --preset default
timed_step "quickstart: build" cmake --build --preset default
timed_step "quickstart: demo" ./build/bin/accgraph demo "$@"
timed_step "quickstart: python-install" bash scripts/python-install.sh
