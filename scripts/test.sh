#!/usr/bin/env bash
# Builds shardwise and runs the whole test suite: every test of the release build (unit tests,
# multi-rank tests under mpirun, CLI tests), then the unit tests and the multi-rank tests at
# np 2 again under AddressSanitizer + UndefinedBehaviorSanitizer (the multi-rank code is where
# races and lifetime bugs live; np 4 is left to the release run to bound the time). Leaks inside
# Open MPI are suppressed (tests/lsan_suppressions.cpp). Warnings are errors in both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/check_format.sh  # every C++/CUDA source as clang-format-14 writes it (.clang-format)
scripts/build.sh release
# The Python package's pytest suite is the CTest test "python"; fail if the build left it out
# (missing dependencies) instead of passing without it.
if ! (cd build && ctest -N -R '^python$' | grep -q 'Total Tests: 1'); then
  echo "test.sh: the Python package was not built (scripts/setup.sh installs its dependencies)" >&2
  exit 1
fi
(cd build && ctest --output-on-failure --timeout 900)
scripts/fuzz.sh 20  # libFuzzer on the safetensors, model-spec and config parsers (tests/fuzz)

scripts/build.sh asan
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -L 'unit|mpi_np2' --timeout 900)
