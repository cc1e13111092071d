#!/usr/bin/env bash
# Downloads, on a machine with apt access, the Debian packages the GPU machine lacks (it cannot
# reach any registry) into .deps/, which scripts/gpu-check.sh unpacks there with dpkg -x.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$root/.deps"
# Keep .deps/ out of git (it travels to the device machine as a carried path).
exclude="$root/.git/info/exclude"
if [ -f "$exclude" ] && ! grep -qx '/.deps/' "$exclude"; then echo '/.deps/' >> "$exclude"; fi
cd "$root/.deps"
packages=(libfmt-dev libfmt9 doctest-dev nlohmann-json3-dev libze-dev libze1
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
  # Vulkan: headers and the shader compiler for the build (unpacked into the private prefix
  # with the others); the loader and glvnd, which NVIDIA's ICD needs, for gpu-check's vulkan
  # stage, which unpacks them into / (the machine has the ICD but no loader).
  libvulkan-dev glslang-tools spirv-tools
  libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libgles2 libopengl0)
apt-get download "${packages[@]}"
# The perfetto Python package and protobuf, as wheels for the GPU machines' Python (3.12): the
# nccl stage's multihost_skew_torch.py decodes its traces with them (gpu-check installs them from
# here into its venv, with no index).
mkdir -p wheels
python3 -m pip --version > /dev/null 2>&1 ||
  { echo "fetch-gpu-deps.sh: python3 has no pip: apt-get install python3-pip, then run this again" >&2; exit 1; }
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d wheels perfetto protobuf
ls -l "$root/.deps" "$root/.deps/wheels"
