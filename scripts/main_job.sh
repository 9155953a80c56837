#!/usr/bin/env bash
# The main job: a 4-rank data-parallel training run of the reference GPT on the built-in
# addition task with the layer-wise distributed optimizer (Muon + AdamW, reduce-scatter during
# backward, in-place param all-gather). Writes out/metrics.jsonl and out/loss.svg.
# Extra arguments are passed to `shardwise train` (e.g. training.steps=100); an option given
# here (--log-jsonl FILE, --plot FILE) replaces the script's default for it.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${SHARDWISE_RANKS:-4}
log_jsonl=(--log-jsonl out/metrics.jsonl)
plot=(--plot out/loss.svg)
for arg in "$@"; do
  case $arg in
    --log-jsonl | --log-jsonl=*) log_jsonl=() ;;
    --plot | --plot=*) plot=() ;;
  esac
done
mkdir -p out
scripts/run.sh "$ranks" -- build/bin/shardwise train --config examples/default.yaml \
  "${log_jsonl[@]}" "${plot[@]}" logging.progress=false "$@"
