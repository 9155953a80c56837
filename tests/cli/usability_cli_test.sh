#!/usr/bin/env bash
# CLI test of what a new user meets first: the run.sh launcher, config typos and warnings, errors
# reported once per job, the log line, checkpoint resolution, and the example scripts.
# Usage: usability_cli_test.sh PATH/TO/shardwise REPO_ROOT
set -euo pipefail
shardwise=$(realpath "${1:?usage: usability_cli_test.sh SHARDWISE_BINARY REPO_ROOT}")
repo=$(realpath "${2:?usage: usability_cli_test.sh SHARDWISE_BINARY REPO_ROOT}")
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cli_test_init usability_cli
cd "$repo"
# run NAME CMD...: runs CMD with stdout/stderr to $work/NAME.{out,err}; its exit code in $rc.
run() {
  local name=$1
  shift
  set +e
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
  set -e
}
lines() { grep -c "$1" "$2" || true; }
train=("$shardwise" train --config examples/default.yaml)

# scripts/run.sh: NP ranks of any command; a bad NP is a usage error.
run run2 scripts/run.sh 2 -- "$shardwise" --version
[[ $rc -eq 0 && $(lines "shardwise" "$work/run2.out") -eq 2 ]] ||
  fail "run.sh 2 -- shardwise --version: rc $rc, $(cat "$work/run2.out")"
# `shardwise version`: the build configuration, one line each.
run version "$shardwise" version
[[ $rc -eq 0 ]] || fail "version: rc $rc"
for field in "BLAS: OpenBLAS" "CPU kernels: " "CUDA kernels: "; do
  grep -q "^$field" "$work/version.out" || fail "version has no '$field' line: $(cat "$work/version.out")"
done
run run_bad scripts/run.sh two -- true
[[ $rc -eq 2 ]] || fail "run.sh with NP 'two': exit $rc, expected 2"

# A typo in an override: blamed on the override, with the closest key; once per job.
run typo "${train[@]}" optimizer.lrr=0.1
[[ $rc -eq 2 ]] || fail "typo: exit $rc"
grep -q "override 'optimizer.lrr=0.1'.*(did you mean lr?)" "$work/typo.err" ||
  fail "typo message: $(cat "$work/typo.err")"
grep -q "default.yaml" "$work/typo.err" && fail "typo blamed on the file: $(cat "$work/typo.err")"
run typo2 scripts/run.sh 2 -- "${train[@]}" optimizer.lrr=0.1
[[ $rc -eq 2 ]] || fail "typo under 2 ranks: exit $rc"
[[ $(lines "shardwise: error" "$work/typo2.err") -eq 1 ]] ||
  fail "typo under 2 ranks printed $(lines "shardwise: error" "$work/typo2.err") times"

# Option mistakes (a missing option, a mistyped subcommand) likewise once per job.
for misuse in "train" "trian --config x"; do
  run misuse scripts/run.sh 2 -- "$shardwise" $misuse
  [[ $rc -eq 2 && $(lines "shardwise: error" "$work/misuse.err") -eq 1 ]] ||
    fail "'shardwise $misuse' under 2 ranks: exit $rc, $(cat "$work/misuse.err")"
done

# A typo on rank 1 alone (its node's copy of the config differs): rank 1 says so, naming itself;
# it used to exit 2 without a word, leaving only mpirun's "returned a non-zero exit code".
printf 'optimizer: {lrr: 1}\n' >"$work/typo_rank1.yaml"
run typo_rank1 scripts/run.sh 2 -- bash -c 'c=examples/default.yaml
  [[ $OMPI_COMM_WORLD_RANK == 1 ]] && c=$0; exec "$1" train --config "$c" training.steps=2' \
  "$work/typo_rank1.yaml" "$shardwise"
[[ $rc -ne 0 && $(lines "shardwise: error: rank 1: .*typo_rank1.yaml.*unknown key 'lrr'" \
  "$work/typo_rank1.err") -eq 1 ]] ||
  fail "a typo on rank 1 alone: exit $rc, $(cat "$work/typo_rank1.err")"

# Ranks given different overrides (or options) crashed in MPI, waited out the watchdog or trained
# with each rank's own settings and exited 0; now exit 2 naming the first setting that differs.
run differ scripts/run.sh 2 -- bash -c '[[ $OMPI_COMM_WORLD_RANK == 1 ]] && x=training.grad_accumulation=2
  exec "$@" $x' _ "${train[@]}" training.steps=2
[[ $rc -ne 0 && $(lines "runs with training.grad_accumulation = .*, and not every rank does" \
  "$work/differ.err") -ge 1 ]] || fail "ranks with different overrides: exit $rc, $(cat "$work/differ.err")"

run refit_differ scripts/run.sh 3 -- bash -c '[[ $OMPI_COMM_WORLD_RANK == 2 ]] && x=--repeat=2
  exec "$@" $x' _ "$shardwise" refit --config examples/refit.yaml training.steps=2 --tp 1
[[ $rc -ne 0 && $(lines "runs with --repeat = ., and not every rank does" "$work/refit_differ.err") -ge 1 ]] ||
  fail "refit ranks with different options: exit $rc, $(cat "$work/refit_differ.err")"

run refit_typo scripts/run.sh 3 -- "$shardwise" refit --config examples/refit.yaml optimizer.lrr=1
[[ $rc -eq 2 && $(lines "shardwise: error" "$work/refit_typo.err") -eq 1 ]] ||
  fail "refit config typo under 3 ranks: exit $rc, $(lines "shardwise: error" "$work/refit_typo.err") lines"

# steps < warmup_steps: accepted with one warning; without a launcher, one line says so; the log
# line names comm hidden as a percentage; no progress-bar frames in a pipe.
run short "${train[@]}" training.steps=10 training.eval_interval=0
[[ $rc -eq 0 ]] || fail "training.steps=10: exit $rc: $(cat "$work/short.err")"
[[ $(lines "shardwise: warning: training.warmup_steps (50) > training.steps (10)" \
  "$work/short.err") -eq 1 ]] || fail "warmup warning: $(cat "$work/short.err")"
grep -q "no MPI launcher detected: running 1 rank; use mpirun -np N" "$work/short.out" ||
  fail "no note about the missing launcher"
grep -q "comm hidden [0-9]*%" "$work/short.out" || fail "log line lacks 'comm hidden N%'"
grep -q "exact-match accuracy" "$work/short.out" || fail "addition run lacks exact match"
grep -q $'\r' "$work/short.out" && fail "progress-bar frames written into a pipe"
run launched scripts/run.sh 1 -- "${train[@]}" training.steps=2 training.eval_interval=0
grep -q "no MPI launcher" "$work/launched.out" && fail "launcher note printed under mpirun"

# A text run reports no exact-match accuracy.
head -c 4000 README.md >"$work/corpus.txt"
cat >"$work/text.yaml" <<YAML
model: {seq_len: 16}
data: {source: text, path: $work/corpus.txt, eval_samples: 4}
training: {steps: 2, micro_batch_size: 2, warmup_steps: 1, eval_interval: 0}
YAML
run text "$shardwise" train --config "$work/text.yaml"
[[ $rc -eq 0 ]] || fail "text run: exit $rc: $(cat "$work/text.err")"
grep -q "exact-match" "$work/text.out" && fail "text run prints exact-match accuracy"

# Checkpoints: reshard takes the --save root (latest) or --step; a pruned step lists the others.
run save "${train[@]}" training.steps=4 training.eval_interval=0 --save "$work/ck" \
  --save-interval 2 --keep-last 1
[[ $rc -eq 0 ]] || fail "save: exit $rc: $(cat "$work/save.err")"
run reshard_root "$shardwise" reshard --checkpoint "$work/ck" --tp 2 --out "$work/rs"
[[ $rc -eq 0 && -f "$work/rs/tp-rank-01-of-02.safetensors" ]] || fail "reshard of a --save root"
grep -q "step-0000004" "$work/reshard_root.out" || fail "reshard did not take the latest step"
run reshard_step "$shardwise" reshard --checkpoint "$work/ck" --step 4 --tp 1 --out "$work/rs4"
[[ $rc -eq 0 ]] || fail "reshard --step 4: exit $rc: $(cat "$work/reshard_step.err")"
run reshard_pruned "$shardwise" reshard --checkpoint "$work/ck" --step 2 --tp 1 --out "$work/x"
[[ $rc -eq 2 ]] && grep -q "(it holds step 4)" "$work/reshard_pruned.err" ||
  fail "reshard --step 2 after pruning: $(cat "$work/reshard_pruned.err")"
run load_pruned "${train[@]}" training.steps=6 --load "$work/ck" --load-step 2
[[ $rc -eq 2 ]] && grep -q "no complete checkpoint of step 2.*(it holds step 4)" \
  "$work/load_pruned.err" || fail "--load-step 2 after pruning: $(cat "$work/load_pruned.err")"

# main_job.sh: the caller's --log-jsonl replaces the script's default.
run main_job env SHARDWISE_RANKS=2 SHARDWISE_BIN="$shardwise" scripts/main_job.sh --log-jsonl "$work/m.jsonl" \
  training.steps=3 training.eval_interval=0
[[ $rc -eq 0 && -s "$work/m.jsonl" ]] || fail "main_job.sh --log-jsonl: exit $rc: $(cat "$work/main_job.err")"

# examples/models/deepseek-v3.sh with no argument finds the repository's build/bin/shardwise.
mkdir -p "$work/repo/examples/models" "$work/repo/build/bin"
cp examples/models/deepseek-v3.sh "$work/repo/examples/models/"
ln -s "$shardwise" "$work/repo/build/bin/shardwise"
run deepseek env PATH=/usr/bin:/bin "$work/repo/examples/models/deepseek-v3.sh"
[[ $rc -eq 0 && -s "$work/repo/examples/models/deepseek-v3.json" ]] ||
  fail "deepseek-v3.sh without arguments: exit $rc: $(cat "$work/deepseek.err")"

cli_test_finish "all usability CLI tests passed"
