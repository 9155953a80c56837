#!/usr/bin/env bash
# Builds shardwise and runs the whole test suite: every test of the release build (unit tests,
# multi-rank tests under mpirun, CLI tests), then the single-process unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Warnings are errors in both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/build.sh release
(cd build && ctest --output-on-failure --timeout 900)
scripts/fuzz.sh 20  # libFuzzer on the safetensors, model-spec and config parsers (tests/fuzz)

scripts/build.sh asan
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -L unit --timeout 900)
