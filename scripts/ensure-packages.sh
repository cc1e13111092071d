#!/usr/bin/env bash
# Installs, with apt-get (through sudo unless root), those of the given Debian packages that are
# not installed yet; does nothing when all are. Used by quickstart.sh (build dependencies) and
# fuzz.sh (clang and the libFuzzer runtime).
# usage: scripts/ensure-packages.sh PACKAGE...
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 PACKAGE..." >&2
  exit 2
fi
missing=()
for package in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "installing the missing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
