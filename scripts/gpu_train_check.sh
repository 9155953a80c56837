#!/usr/bin/env bash
# `shardwise train` on the GPU against the CPU, end to end through the CLI (scripts/gpu_check.sh
# runs it; by hand: scripts/gpu_train_check.sh BIN_DIR [WORK_DIR]). The main job
# (examples/default.yaml: 4 ranks x micro-batch 16, global batch 64; one rank gets the same
# samples in the same order with grad accumulation 4) as:
#   gpu_train_fp32_parity        CPU (mpirun -np 4) vs GPU (1 rank, grad accumulation 4, fp32
#                                products, TF32 off): loss and grad norm of steps 1-5 within
#                                k x TOL at step k, TOL = 2 (6 L + 2) K 2^-24 (the device GPT's
#                                fp32 gradient bound, tests/cuda/gpt_model_cuda_test.cpp: L = 2
#                                layers, K = 256 = the longest sum: ffn 256, against micro-batch
#                                rows 16 x 12, hidden 64, vocab 14) = 4.3e-4; the whole run's
#                                100-step mean losses within 25% of the CPU run's (an envelope,
#                                not a bound: after a few steps rounding differences make the
#                                runs diverge like any two seeds)
#   gpu_train_main_1rank         that GPU run reaches 100% held-out exact match
#   gpu_train_main_2ranks        2 ranks sharing the GPU (host-staged MPI collectives), 100%
#   gpu_train_bf16               1 rank, bf16 products (fp32 master weights), 100%
#   gpu_train_checkpoint_round_trip  a 50-step run (the LR schedule of all three): the CPU saves
#                                at step 20; the GPU resumes there and saves at 40; the CPU resumes
#                                that at dp 2. Each resumed run's steps 1-5 equal the run it
#                                continues: the first within TOL (same weights: one forward and
#                                backward), the next within k x TOL (the optimizer state moved too)
#   gpu_train_generate           `shardwise generate` samples from a checkpoint the GPU trained
#                                (30 steps of a byte-level model): the prompt and 16 bytes
# Each run stops after GPU_TRAIN_RUN_LIMIT seconds (default 150). Prints `gpu_train: NAME
# passed|failed` per check; exits 1 when one failed, 2 without a GPU.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$(cd "${1:?usage: gpu_train_check.sh BIN_DIR [WORK_DIR]}" && pwd)
work=${2:-$(mktemp -d /tmp/gpu_train.XXXXXX)}
mkdir -p "$work"
python=$(command -v python3)
compare() { "$python" "$root/scripts/compare_training_runs.py" "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
tol=4.3e-4
run_limit=${GPU_TRAIN_RUN_LIMIT:-150}  # seconds per training run
config=$root/examples/default.yaml
failed=0

train() {  # train LOG_NAME NP [ARGS...]: one run, its output in $work/LOG_NAME.log
  local name=$1 np=$2
  shift 2
  # A hang must not eat the GPU session: every run has a time limit (exit 124 when it hits it).
  OMP_NUM_THREADS=$((np > 1 ? 2 : 4)) timeout -k 10 "$run_limit" mpirun --oversubscribe \
    -np "$np" "$bin/shardwise" train --config "$config" --progress off "$@" >"$work/$name.log" 2>&1
  local rc=$?
  grep -E '(^|\] )(device|done):' "$work/$name.log" | sed "s/^/   $name: /"
  if ((rc != 0)); then
    echo "   $name: exit $rc"
    tail -5 "$work/$name.log"
  fi
  return $rc
}

result() {  # result NAME STATUS
  if (($2 == 0)); then
    echo "gpu_train: $1 passed"
  else
    echo "gpu_train: $1 failed"
    ((failed += 1))
  fi
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_train: no CUDA device, skipped"
  exit 2
fi

gpu=(training.device=cuda)
main_1rank=(training.grad_accumulation=4)

echo "== main job: CPU at 4 ranks, GPU at 1 rank (fp32)"
train cpu_main 4 --log-jsonl "$work/cpu_main.jsonl"
cpu_rc=$?
train gpu_main 1 "${gpu[@]}" "${main_1rank[@]}" training.precision=fp32 \
  --log-jsonl "$work/gpu_main.jsonl"
gpu_rc=$?
status=1
if ((cpu_rc == 0 && gpu_rc == 0)); then
  compare steps "$work/cpu_main.jsonl" "$work/gpu_main.jsonl" 1 5 $tol
  first=$?
  compare curve "$work/cpu_main.jsonl" "$work/gpu_main.jsonl" 100 0.25
  status=$((first || $?))
fi
result gpu_train_fp32_parity $status
status=1
((gpu_rc == 0)) && { compare accuracy "$work/gpu_main.jsonl"; status=$?; }
result gpu_train_main_1rank $status

echo "== main job: GPU at 2 ranks sharing the GPU"
status=1
train gpu_main_np2 2 "${gpu[@]}" training.grad_accumulation=2 --log-jsonl "$work/gpu_np2.jsonl" &&
  { compare accuracy "$work/gpu_np2.jsonl"; status=$?; }
result gpu_train_main_2ranks $status

echo "== main job: GPU at 1 rank, bf16 products"
status=1
train gpu_bf16 1 "${gpu[@]}" "${main_1rank[@]}" training.precision=bf16 \
  --log-jsonl "$work/gpu_bf16.jsonl" && { compare accuracy "$work/gpu_bf16.jsonl"; status=$?; }
result gpu_train_bf16 $status

echo "== checkpoint round trip: CPU -> GPU -> CPU"
rm -rf "$work/ckpt_cpu" "$work/ckpt_gpu"
status=1
if train rt_cpu 1 "${main_1rank[@]}" training.steps=50 --save "$work/ckpt_cpu" --save-interval 20 \
  --log-jsonl "$work/rt_cpu.jsonl" &&
  train rt_gpu 1 "${gpu[@]}" "${main_1rank[@]}" training.steps=50 --load "$work/ckpt_cpu" \
    --load-step 20 --save "$work/ckpt_gpu" --save-interval 20 --log-jsonl "$work/rt_gpu.jsonl" &&
  train rt_cpu_np2 2 training.grad_accumulation=2 training.steps=50 --load "$work/ckpt_gpu" \
    --load-step 40 --log-jsonl "$work/rt_cpu_np2.jsonl"; then
  compare steps "$work/rt_cpu.jsonl" "$work/rt_gpu.jsonl" 21 25 $tol
  status=$?
  compare steps "$work/rt_gpu.jsonl" "$work/rt_cpu_np2.jsonl" 41 45 $tol
  status=$((status || $?))
fi
result gpu_train_checkpoint_round_trip $status

echo "== generate from a GPU-trained byte-level model"
rm -rf "$work/ckpt_text"
status=1
if train gpu_text 1 "${gpu[@]}" data.source=text data.path="$root/examples/data/tiny_corpus.txt" \
  model.seq_len=32 training.steps=30 training.eval_interval=0 --save "$work/ckpt_text"; then
  "$bin/shardwise" generate --checkpoint "$work/ckpt_text" --prompt "The " --tokens 16 --seed 1 \
    >"$work/generate.out" 2>"$work/generate.err"
  rc=$?
  # The prompt, then 16 sampled bytes and a newline.
  bytes=$(wc -c <"$work/generate.out")
  shown=$(od -An -c "$work/generate.out" | tr -d '\n' | tr -s ' ')
  echo "   generate: exit $rc, $bytes bytes:$shown"
  ((rc == 0 && bytes == 21)) && [[ $(head -c 4 "$work/generate.out") == "The " ]] && status=0
fi
result gpu_train_generate $status

echo "gpu_train: logs in $work"
((failed == 0))
