#!/usr/bin/env bash
# The main job: a 4-rank data-parallel training run of the reference GPT on the built-in
# addition task with the layer-wise distributed optimizer (Muon + AdamW, reduce-scatter during
# backward, in-place param all-gather). Writes out/metrics.jsonl and out/loss.svg.
# Extra arguments are passed to `shardwise train` (e.g. training.steps=100); an option given
# here (--log-jsonl FILE, --plot FILE) replaces the script's default for it.
# SHARDWISE_BIN names the binary (default: the repository's build/bin/shardwise).
set -euo pipefail
# A relative SHARDWISE_BIN is taken from the caller's directory, the default from the repository.
shardwise=build/bin/shardwise
if [[ -n ${SHARDWISE_BIN:-} ]]; then
  shardwise=$SHARDWISE_BIN
  [[ $shardwise == */* ]] && shardwise=$(realpath -m "$shardwise")
fi
cd "$(dirname "$0")/.."
[[ -x $shardwise ]] || command -v "$shardwise" >/dev/null || {
  echo "main_job.sh: no shardwise binary at '$shardwise': build it (scripts/build.sh) or set SHARDWISE_BIN" >&2
  exit 2
}
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
scripts/run.sh "$ranks" -- "$shardwise" train --config examples/default.yaml \
  "${log_jsonl[@]}" "${plot[@]}" logging.progress=false "$@"
