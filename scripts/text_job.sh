#!/usr/bin/env bash
# The text example: byte-level language modelling on Debian's fortune texts with 2 data-parallel
# ranks. Prepares data/fortunes/ when missing (scripts/prepare_fortunes.py), trains with
# examples/text.yaml (validation bits per byte in the log and out/text_metrics.jsonl), saves the
# model under out/text_ckpt, and prints a sample from it. Extra arguments go to `shardwise train`
# (e.g. training.steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ranks=${SHARDWISE_RANKS:-2}
[[ -f data/fortunes/train.bin && -f data/fortunes/val.bin ]] || python3 scripts/prepare_fortunes.py
mkdir -p out
rm -rf out/text_ckpt
mpirun -np "$ranks" --oversubscribe build/bin/shardwise train --config examples/text.yaml \
  --save out/text_ckpt logging.progress=false "$@"
echo "--- sample (shardwise generate --checkpoint out/text_ckpt --prompt 'The ' --seed 1):"
build/bin/shardwise generate --checkpoint out/text_ckpt --prompt "The " --tokens 300 --seed 1
