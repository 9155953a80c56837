#!/usr/bin/env bash
# training.device / training.precision through the CLI without a usable GPU: `config` accepts
# them; `train` refuses cuda with exit 2 and one line saying no CUDA device can be used (no GPU
# visible, or a build without CUDA); impossible combinations name the key. The GPU runs of these
# keys are scripts/gpu_train_check.sh (in scripts/gpu_check.sh).
# Usage: train_device_cli_test.sh SHARDWISE EXAMPLES_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=$1
examples=$2
cli_test_init train_device
config=$examples/default.yaml
# Hide every GPU, so the test means the same on a machine that has one.
export CUDA_VISIBLE_DEVICES=

if "$shardwise" config resolve --config "$config" training.device=cuda training.precision=bf16 \
  >"$work/resolved" 2>"$work/err"; then
  grep -q 'device: cuda' "$work/resolved" || fail "config resolve: no 'device: cuda' in the output"
  grep -q 'precision: bf16' "$work/resolved" || fail "config resolve: no 'precision: bf16'"
else
  fail "config resolve refused training.device=cuda: $(cat "$work/err")"
fi

expect_exit2 "train on cuda without a GPU" train --config "$config" training.device=cuda \
  --progress off
grep -qE "training.device: cuda.*(no CUDA device|no CUDA training)" "$work/err" ||
  fail "train on cuda: the message does not say that no CUDA device can be used"

expect_exit2 "bf16 on the cpu" train --config "$config" training.precision=bf16
grep -q "training.precision: bf16 needs training.device: cuda" "$work/err" ||
  fail "bf16 on the cpu: the message does not name training.precision"
expect_exit2 "unknown device" train --config "$config" training.device=gpu
grep -q "training.device: unknown value 'gpu' (valid: cpu, cuda)" "$work/err" ||
  fail "unknown device: the message does not list the valid values"
expect_exit2 "unknown precision" train --config "$config" training.precision=fp16
grep -q "training.precision: unknown value 'fp16' (valid: fp32, tf32, bf16)" "$work/err" ||
  fail "unknown precision: the message does not list the valid values"
expect_exit2 "cuda with another optimizer kind" train --config "$config" training.device=cuda \
  optimizer.kind=distributed
grep -q "training.device: cuda runs optimizer.kind 'layer-wise' only (got 'distributed')" \
  "$work/err" ||
  fail "cuda with kind distributed: the message does not name the kind"

cli_test_finish "train_device_cli_test: training.device and training.precision checks passed"
