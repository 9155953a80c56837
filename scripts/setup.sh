#!/usr/bin/env bash
# Installs every Debian package shardwise needs to build, test and run. Idempotent: when all
# packages are present it only checks and exits (no apt-get update).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libopenmpi-dev openmpi-bin
  libopenblas-dev
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy
  libre2-dev clang-14 libclang-rt-14-dev clang-format-14
  fortunes-min fortunes   # the text example's corpus (scripts/prepare_fortunes.py)
  python3-dev pybind11-dev python3-torch python3-pytest
)

# CUDA is not installed from apt: the toolkit is preinstalled at /usr/local/cuda. Only report it
# (cmake/cuda.cmake builds the CUDA kernels when nvcc is there).
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_release=$(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  echo "setup: CUDA toolkit ${cuda_release} at /usr/local/cuda: the CUDA kernels will be built"
else
  echo "setup: no CUDA toolkit at /usr/local/cuda (no nvcc): the CUDA kernels will be skipped"
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
