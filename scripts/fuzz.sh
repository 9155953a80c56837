#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input for a bounded time: builds the libFuzzer harnesses of
# tests/fuzz with clang++-14 (ASan + UBSan, apart from the main g++ build), generates their seed
# corpora from the library's own writers and the example configs (nothing is stored), then runs
# each harness for SECONDS (default 30). Any crash, sanitizer report, leak or slow input fails the
# script; the input that did it is kept in build-fuzz/artifacts/ for reproduction
# (build-fuzz/HARNESS build-fuzz/artifacts/FILE).
# The mutation seed is fixed (SHARDWISE_FUZZ_SEED, default 1) so that a test run walks the same
# sequence of inputs every time (as far as its time allows) and does not fail by chance; set
# SHARDWISE_FUZZ_SEED=0 for a random seed when hunting for new bugs (and add a regression test
# for whatever it finds).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
seed=${SHARDWISE_FUZZ_SEED:-1}
build=${SHARDWISE_FUZZ_BUILD_DIR:-build-fuzz}
harnesses=(fuzz_safetensors_header fuzz_model_spec fuzz_checkpoint_manifest fuzz_training_config)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # objects shared between clones (scripts/build.sh)

command -v clang++-14 >/dev/null || { echo "fuzz: clang++-14 missing (scripts/setup.sh)" >&2; exit 1; }
cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" -j"$(nproc)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/fuzz_seeds" "$work/seeds"
cp examples/*.yaml "$work/seeds/fuzz_training_config/"
mkdir -p "$build/artifacts"

status=0
for harness in "${harnesses[@]}"; do
  mkdir -p "$work/corpus/$harness"
  # -timeout: one input running over 10 s counts as a hang; -rss_limit_mb: a blow-up as a crash.
  if "$build/$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
       -seed="$seed" -print_final_stats=1 -artifact_prefix="$build/artifacts/$harness-" \
       "$work/corpus/$harness" "$work/seeds/$harness" >"$work/$harness.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$harness.log")
    echo "fuzz: $harness: ok, ${runs:-?} inputs in ${seconds} s"
  else
    echo "fuzz: $harness: FAILED (log tail below; inputs in $build/artifacts/)" >&2
    tail -n 60 "$work/$harness.log" >&2
    status=1
  fi
done
exit $status
