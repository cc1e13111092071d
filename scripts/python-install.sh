#!/usr/bin/env bash
# Builds the Python package (pip install . : libaccgraph, the backend modules whose SDKs are
# here, the nanobind extension, one wheel) into a virtual environment, with the build and test
# requirements from PyPI. Used by quickstart.sh and test.sh.
#
#   bash scripts/python-install.sh        # venv build/venv (ACCGRAPH_VENV), from python3
#                                         # (ACCGRAPH_PYTHON); then build/venv/bin/python -c
#                                         # "import accgraph; print(accgraph.backends())"
#
# The wheel's CMake build is kept in build/python-wheel/, so a second run rebuilds only what
# changed. Without network it works where the interpreter already has nanobind, scikit-build-core
# and pytest (the venv sees the interpreter's packages).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${ACCGRAPH_PYTHON:-python3}"
venv="${ACCGRAPH_VENV:-$root/build/venv}"

if [ ! -x "$venv/bin/python" ]; then
  echo "python-install: creating the virtual environment $venv ($("$python" --version))"
  # With the interpreter's own packages visible: what is installed there already (nanobind,
  # scikit-build-core, pytest, torch on the GPU machine) is not fetched again, so the script
  # also works without network where they are installed.
  "$python" -m venv --system-site-packages "$venv"
  # --system-site-packages shows the base interpreter's packages only. When $python is itself
  # a virtual environment's (the GPU machine's python3 is /opt/torch/.venv/bin/python3, which
  # holds torch, nanobind and scikit-build-core), a .pth file shows that environment's too.
  parent_site="$("$python" -c 'import sys, sysconfig
print(sysconfig.get_paths()["purelib"] if sys.prefix != sys.base_prefix else "")')"
  if [ -n "$parent_site" ]; then
    venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$parent_site" > "$venv_site/_accgraph_parent_env.pth"
    echo "python-install: $python is a virtual environment's: its packages ($parent_site) are visible in $venv"
  fi
fi
"$venv/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" "pytest>=7"
# numpy is optional (the tests that view buffers through it skip without it).
"$venv/bin/python" -m pip install -q "numpy>=1.22" ||
  echo "python-install: numpy could not be installed; the tests that use it will be skipped"
# --no-build-isolation: build with the venv's nanobind and scikit-build-core (installed above),
# so the build does not fetch them again into a throw-away environment.
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$root"
"$venv/bin/python" -c 'import sys, accgraph
names = ", ".join(b.name for b in accgraph.backends() if b.available)
print(f"python-install: accgraph {accgraph.__version__} installed in {sys.argv[1]}; available backends: {names}")' "$venv"
