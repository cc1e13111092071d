#!/usr/bin/env bash
# Creates (or updates) the Python virtual environment the Perfetto trace checks decode with: the
# `perfetto` package (Perfetto's own protos) and `protobuf`, from PyPI. ctest looks for it at
# build/perfetto-venv (the CMake cache variable ACCGRAPH_PERFETTO_PYTHON says where exactly).
# usage: scripts/perfetto-venv.sh [DIR]   (default: build/perfetto-venv)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/build/perfetto-venv}"
python="${PYTHON:-python3}"
if ! "$venv/bin/python3" -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2" 2> /dev/null; then
  if ! "$python" -m venv "$venv"; then
    echo "perfetto-venv.sh: '$python -m venv' failed: install python3-venv (Debian) and try again" >&2
    exit 1
  fi
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check perfetto protobuf
fi
"$venv/bin/python3" -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2" 
echo "perfetto-venv.sh: $venv has the perfetto package"
