#!/usr/bin/env bash
# Quickstart, step 1: installs the Debian packages accgraph needs (only those missing), builds it
# and runs `accgraph demo` (extra arguments go to the demo), then builds the Python package into
# build/venv (python-install.sh): build/venv/bin/python -c "import accgraph; print(accgraph.backends())".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/ensure-packages.sh cmake g++ make pkg-config libfmt-dev doctest-dev \
  nlohmann-json3-dev libze1 libze-dev libprotobuf-dev protobuf-compiler python3-venv python3-dev \
  libvulkan-dev mesa-vulkan-drivers glslang-tools
cmake --preset default
cmake --build --preset default
./build/bin/accgraph demo "$@"
bash scripts/python-install.sh
