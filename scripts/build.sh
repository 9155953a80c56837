#!/usr/bin/env bash
# Configures and builds shardwise. Usage: scripts/build.sh [release|asan] (default release).
#   release -> build/       full build: library, CLI, tests, benchmarks
#   asan    -> build-asan/  AddressSanitizer + UBSan build of the libraries and unit tests, as a
#              unity build (16 sources per compiler run: at -O0 most of the time goes to parsing
#              the same headers, so this halves the build; names in anonymous namespaces must
#              therefore be unique within a library or test binary)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-release}
# ccache keys on paths relative to the checkout, so every clone on this machine shares objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
jobs=${SHARDWISE_JOBS:-$(nproc)}
case "$mode" in
  release)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j "$jobs"
    ;;
  asan)
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSHARDWISE_SANITIZE=ON \
      -DSHARDWISE_BUILD_BENCH=OFF -DSHARDWISE_BUILD_APPS=OFF \
      -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
    cmake --build build-asan -j "$jobs"
    ;;
  *)
    echo "usage: $0 [release|asan]" >&2
    exit 2
    ;;
esac
