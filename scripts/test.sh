#!/usr/bin/env bash
# Builds shardwise and runs the whole test suite: every test of the release build (unit tests,
# multi-rank tests under mpirun, CLI tests), then the unit tests and the multi-rank tests at
# np 2 again under AddressSanitizer + UndefinedBehaviorSanitizer (the multi-rank code is where
# races and lifetime bugs live; np 4 is left to the release run to bound the time). Leaks inside
# Open MPI are suppressed (tests/lsan_suppressions.cpp). Warnings are errors in both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/build.sh release
(cd build && ctest --output-on-failure --timeout 900)

scripts/build.sh asan
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -L 'unit|mpi_np2' --timeout 900)
