#!/usr/bin/env bash
# Quickstart, step 1: installs the Debian packages accgraph needs (only those missing), builds it
# and runs `accgraph demo` (extra arguments go to the demo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(cmake g++ make pkg-config libfmt-dev doctest-dev nlohmann-json3-dev libze1 libze-dev)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "quickstart: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake --preset default
cmake --build --preset default
./build/bin/accgraph demo "$@"
