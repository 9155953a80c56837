#!/usr/bin/env bash
# Configures and builds shardwise. Usage: scripts/build.sh [release|asan] (default release).
#   release -> build/       full build: library, CLI, tests, benchmarks
#   asan    -> build-asan/  AddressSanitizer + UBSan build of the libraries and unit tests
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-release}
jobs=${SHARDWISE_JOBS:-$(nproc)}
case "$mode" in
  release)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j "$jobs"
    ;;
  asan)
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSHARDWISE_SANITIZE=ON \
      -DSHARDWISE_BUILD_BENCH=OFF -DSHARDWISE_BUILD_APPS=OFF >/dev/null
    cmake --build build-asan -j "$jobs"
    ;;
  *)
    echo "usage: $0 [release|asan]" >&2
    exit 2
    ;;
esac
