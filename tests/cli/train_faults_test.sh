#!/usr/bin/env bash
# Fault tests of `shardwise train`: each case is input or an environment that used to crash, hang
# or succeed silently, and must now end fast with a clear message and a non-zero exit.
# Usage: train_faults_test.sh PATH/TO/shardwise REPO_ROOT
# Cases: an impossible model size, data files that are not regular files, --config a directory,
# duplicate YAML keys, non-finite training (lr=1e30) with and without training.skip_nonfinite_steps
# and after the last update (found by the held-out evaluation),
# unusable output paths (missing directory; read-only and full tmpfs where the test may mount one),
# a metrics log that fills its disk mid-run, refit's --json in a missing directory, two jobs on one --save root, leftovers of a killed
# save, damaged checkpoint manifests, and a resume with another head count.
set -euo pipefail

shardwise=${1:?usage: train_faults_test.sh SHARDWISE_BINARY REPO_ROOT}
root=${2:?usage: train_faults_test.sh SHARDWISE_BINARY REPO_ROOT}
python=/usr/bin/python3
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/shardwise_train_faults.XXXXXX")
mounts=()
background=()
cleanup() {
  for pid in "${background[@]}"; do kill "$pid" 2>/dev/null || true; done
  for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# A model small enough that a step takes milliseconds.
tiny=(--config "$root/examples/default.yaml" model.layers=1 model.hidden=16 model.heads=2
      model.ffn=32 training.micro_batch_size=4 training.warmup_steps=0 training.eval_interval=0
      data.eval_samples=8 logging.progress=false)

# expect_rc CODE NAME COMMAND...: runs COMMAND (at most 60 s) with output in $work/NAME.{out,err}.
expect_rc() {
  local want=$1 name=$2
  shift 2
  local rc=0
  timeout 60 "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  if [[ $rc -ne $want ]]; then
    fail "$name: exit code $rc, expected $want"
    tail -5 "$work/$name.out" "$work/$name.err" | sed 's/^/    /' >&2
    return 1
  fi
}
# expect_error NAME TEXT COMMAND...: exit 2 and TEXT in the error output.
expect_error() {
  local name=$1 text=$2
  shift 2
  expect_rc 2 "$name" "$@" || return 0
  grep -qF -- "$text" "$work/$name.err" || {
    fail "$name: stderr lacks '$text'"
    sed 's/^/    /' "$work/$name.err" >&2
  }
}

# --- resources and inputs, refused before any work --------------------------------------------
start=$(date +%s)
expect_error huge_model "MemAvailable" "$shardwise" train "${tiny[@]}" model.layers=1000 \
  model.hidden=16384 model.ffn=65536
(($(date +%s) - start < 20)) || fail "huge_model: took more than 20 s to refuse"
grep -qF "optimizer state" "$work/huge_model.err" || fail "huge_model: no estimate breakdown"

mkdir "$work/a_directory"
mkfifo "$work/a_fifo"
expect_error data_dev_zero "is a character device" \
  "$shardwise" train "${tiny[@]}" data.source=text data.path=/dev/zero
expect_error data_fifo "is a FIFO" \
  "$shardwise" train "${tiny[@]}" data.source=text data.path="$work/a_fifo"
expect_error data_directory "is a directory" \
  "$shardwise" train "${tiny[@]}" data.source=bin data.path="$work/a_directory"
expect_error config_directory "is a directory" "$shardwise" train --config "$work"
printf 'optimizer:\n  lr: 0.1\n  lr: 0.01\n' >"$work/dup.yaml"
expect_error duplicate_key "key 'optimizer.lr' is given twice" \
  "$shardwise" train --config "$work/dup.yaml"

# Under `ulimit -v` a run that fits MemAvailable (about 8 GB here) ended in std::bad_alloc once
# the work had begun; the pre-check now takes the address-space limit too.
expect_error train_address_space_limit "of address space this process may still take" \
  bash -c 'ulimit -v 4000000 && exec "$0" "$@"' "$shardwise" train "${tiny[@]}" \
  model.hidden=2048 model.heads=16 model.ffn=8192 model.layers=8

# ep sizes expert parallelism; the reference GPT has no experts (it was ignored).
expect_error train_ep_on_dense "parallel.ep = 2: the reference GPT has no experts" \
  "$shardwise" train "${tiny[@]}" parallel.ep=2

# --- unusable outputs, found before training ---------------------------------------------------
expect_error jsonl_missing_dir "does not exist" \
  "$shardwise" train "${tiny[@]}" training.steps=2 --log-jsonl "$work/no/such/dir/m.jsonl"
expect_error plot_is_directory "it is a directory" \
  "$shardwise" train "${tiny[@]}" training.steps=2 --plot "$work/a_directory"
expect_error refit_json_missing_dir "--json '$work/no/r.json' is not writable" \
  "$shardwise" refit --config "$root/examples/refit.yaml" --json "$work/no/r.json"
if mkdir -p "$work/full" "$work/ro" "$work/small" &&
   mount -t tmpfs -o size=64k tmpfs "$work/full" 2>/dev/null; then
  mounts+=("$work/full")
  mount -t tmpfs -o size=64k,ro tmpfs "$work/ro" && mounts+=("$work/ro")
  mount -t tmpfs -o size=16k tmpfs "$work/small" && mounts+=("$work/small")
  head -c 1M /dev/zero >"$work/full/filler" 2>/dev/null || true
  expect_error save_full_disk "--save '$work/full/ckpt' is not writable" \
    "$shardwise" train "${tiny[@]}" training.steps=2 --save "$work/full/ckpt"
  grep -qF "No space left on device" "$work/save_full_disk.err" ||
    fail "save_full_disk: the message does not say the disk is full"
  expect_error save_read_only "--save '$work/ro/ckpt'" \
    "$shardwise" train "${tiny[@]}" training.steps=2 --save "$work/ro/ckpt"
  expect_error jsonl_read_only "Read-only file system" \
    "$shardwise" train "${tiny[@]}" training.steps=2 --log-jsonl "$work/ro/m.jsonl"
  # Room for the probe, not for 300 steps of metrics: the run must fail, not truncate silently.
  expect_error jsonl_fills_disk "cannot write metrics file '$work/small/m.jsonl'" \
    "$shardwise" train "${tiny[@]}" training.steps=300 --log-jsonl "$work/small/m.jsonl"
else
  echo "SKIP: cannot mount a tmpfs here (needs root/CAP_SYS_ADMIN): full and read-only" \
       "output directory cases not run" >&2
fi

# --- non-finite training -----------------------------------------------------------------------
expect_rc 2 nan_stops "$shardwise" train "${tiny[@]}" training.steps=8 optimizer.lr=1e30 \
  optimizer.muon_lr=1e30 optimizer.weight_decay=0 --save "$work/nan" --log-jsonl "$work/nan.jsonl" || true
grep -qE "step [0-9]+: non-finite training state" "$work/nan_stops.err" ||
  fail "nan_stops: no message naming the step"
[[ ! -e "$work/nan/latest" ]] || fail "nan_stops: a checkpoint was published"
! ls -d "$work"/nan/step-* >/dev/null 2>&1 || fail "nan_stops: a step directory exists"

expect_rc 2 nan_skips "$shardwise" train "${tiny[@]}" training.steps=12 optimizer.lr=1e30 \
  optimizer.muon_lr=1e30 optimizer.weight_decay=0 training.skip_nonfinite_steps=3 \
  --log-jsonl "$work/skip.jsonl" || true
"$python" - "$work/skip.jsonl" "$work/nan_skips.err" <<'PY' || fail "nan_skips: records"
import json, re, sys
records = [json.loads(line) for line in open(sys.argv[1])]
skipped = [r["step"] for r in records if r.get("skipped")]
assert len(skipped) == 3, skipped          # three skipped, the fourth stops the run
err = open(sys.argv[2]).read()
stop = int(re.search(r"error: step (\d+): non-finite", err).group(1))
assert stop > skipped[-1] and "3 step(s) skipped before" in err, (stop, skipped, err)
assert all(r["step"] < stop for r in records[:-1]), "a record after the stop"
last = records[-1]                          # the log ends with the step that stopped the run
assert last["step"] == stop and last["stopped"] is True, last
assert "non-finite training state" in last["error"], last
PY

# The one step's loss is finite (it is computed before the update), the update overflows: only the
# held-out evaluation sees it. It must stop the run (exit 2) before the step's save.
expect_rc 2 nan_after_last_update "$shardwise" train "${tiny[@]}" training.steps=1 \
  optimizer.lr=1e30 optimizer.muon_lr=1e30 optimizer.weight_decay=0 --save "$work/nan_last" \
  --log-jsonl "$work/nan_last.jsonl" || true
grep -qF "step 1: non-finite held-out evaluation (loss" "$work/nan_after_last_update.err" ||
  fail "nan_after_last_update: no message naming the evaluation"
[[ ! -e "$work/nan_last/latest" ]] || fail "nan_after_last_update: a checkpoint was published"
tail -n 1 "$work/nan_last.jsonl" | grep -qF '"stopped":true' ||
  fail "nan_after_last_update: the metrics log does not end with the stop"

# --- one job per --save root; a killed save's leftovers are removed -----------------------------
"$shardwise" train "${tiny[@]}" training.steps=1000000 --save "$work/shared" \
  >"$work/first.out" 2>&1 &
first=$!
background+=("$first")
for _ in $(seq 100); do
  grep -qs "pid $first" "$work/shared/.lock" && break
  sleep 0.1
done
expect_error second_job "is in use by another job (host $(hostname) pid $first" \
  "$shardwise" train "${tiny[@]}" training.steps=2 --save "$work/shared"
kill "$first" 2>/dev/null || true
wait "$first" 2>/dev/null || true

mkdir -p "$work/ckpt/.step-0000003.staging.99.abc.0"
echo partial >"$work/ckpt/.step-0000003.staging.99.abc.0/model.safetensors"
expect_rc 0 clean_leftovers "$shardwise" train "${tiny[@]}" training.steps=4 --save "$work/ckpt" ||
  true
[[ ! -e "$work/ckpt/.step-0000003.staging.99.abc.0" ]] || fail "staging leftover not removed"
[[ -e "$work/ckpt/step-0000004/checkpoint.json" ]] || fail "clean_leftovers: no checkpoint"

# --- damaged manifests are refused at --load ---------------------------------------------------
edit_manifest() {  # edit_manifest PYTHON-STATEMENT-ON-m: a copy of the checkpoint, edited
  rm -rf "$work/edited" && cp -r "$work/ckpt" "$work/edited"
  "$python" - "$work/edited/step-0000004/checkpoint.json" "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(m, open(sys.argv[1], "w"))
PY
}
edit_manifest 'm["step"] = 2**63'
expect_error manifest_step_2_63 '"step" is 9223372036854775808' \
  "$shardwise" train "${tiny[@]}" training.steps=6 --load "$work/edited"
edit_manifest 'm["step"] = -5'
expect_error manifest_negative_step '"step" is -5' \
  "$shardwise" train "${tiny[@]}" training.steps=6 --load "$work/edited"
edit_manifest 'm["trainer"]["consumed_samples"] = -5'
expect_error manifest_negative_samples '"trainer.consumed_samples" is -5' \
  "$shardwise" train "${tiny[@]}" training.steps=6 --load "$work/edited"
edit_manifest 'm["data_parallel_size"] = 4'
expect_error manifest_dp_size '"data_parallel_size" is 4' \
  "$shardwise" train "${tiny[@]}" training.steps=6 --load "$work/edited"
edit_manifest 'm["optimizer_files"] = []'
expect_error manifest_no_files '"optimizer_files" is empty' \
  "$shardwise" train "${tiny[@]}" training.steps=6 --load "$work/edited"
# A resume whose config differs where the weights' shapes cannot tell (heads = 2 saved, 4 here).
expect_error resume_other_heads "trained with model.heads = 2 and this run has model.heads = 4" \
  "$shardwise" train "${tiny[@]}" model.heads=4 training.steps=6 --load "$work/ckpt"
expect_rc 0 manifest_intact "$shardwise" train "${tiny[@]}" training.steps=6 --load "$work/ckpt" ||
  true

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "all train fault cases passed"
