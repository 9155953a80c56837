#!/usr/bin/env bash
# The main job: a 4-rank data-parallel training run of the reference GPT on the built-in
# addition task with the layer-wise distributed optimizer (Muon + AdamW, reduce-scatter during
# backward, in-place param all-gather). Writes out/metrics.jsonl and out/loss.svg.
# Extra arguments are passed to `shardwise train` (e.g. training.steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ranks=${SHARDWISE_RANKS:-4}
mkdir -p out
mpirun -np "$ranks" --oversubscribe build/bin/shardwise train --config examples/default.yaml \
  --log-jsonl out/metrics.jsonl --plot out/loss.svg logging.progress=false "$@"
