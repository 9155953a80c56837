#!/usr/bin/env bash
# CLI test of hostile input to the parsers and size checks: each case used to crash, hang, run
# without end or be accepted silently, and must now exit 2 with one line naming the culprit,
# well under a second. Deeply nested JSON (model spec, checkpoint.json), YAML alias cycles and
# second documents, YAML 1.1 booleans, parallel-size products that overflowed, sizes no real job
# reaches, out-of-range numeric options, huge values echoed whole, and an edited
# trainer.consumed_samples.
# Usage: parsers_cli_test.sh PATH/TO/shardwise REPO_ROOT
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: parsers_cli_test.sh SHARDWISE_BINARY REPO_ROOT}
root=${2:?usage: parsers_cli_test.sh SHARDWISE_BINARY REPO_ROOT}
cli_test_init parsers_cli
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
config=$root/examples/default.yaml

# expect_exit2_with NAME TEXT ARGS...: expect_exit2, and TEXT in the line, at most 1000 bytes.
expect_exit2_with() {
  local name=$1 text=$2
  shift 2
  local before=$failures
  expect_exit2 "$name" "$@"
  ((failures == before)) || return 0
  grep -qF -- "$text" "$work/err" || fail "$name: error lacks '$text': $(head -c 300 "$work/err")"
  (($(wc -c <"$work/err") <= 1000)) || fail "$name: error line of $(wc -c <"$work/err") bytes"
}

# --- overflowing products and unbounded sizes -------------------------------------------------
expect_exit2_with pp_x_vp "parallel.pp (65536) x parallel.vp (65536)" \
  config resolve --config "$config" parallel.pp=65536 parallel.vp=65536
expect_exit2_with tp_x_pp "parallel.tp (65536) x parallel.pp (65536)" \
  config resolve --config "$config" parallel.tp=65536 parallel.pp=65536
expect_exit2_with tp_x_cp "parallel.cp (65536)" \
  config resolve --config "$config" parallel.tp=65536 parallel.cp=65536
expect_exit2_with grad_accumulation "training.grad_accumulation must be <= 1048576" \
  config resolve --config "$config" training.grad_accumulation=2147483647
expect_exit2_with layout_dp "--dp" layout --model gpt-tiny --dp 2147483647
expect_exit2_with model_spec_layers "--layers" model-spec --arch gpt-tiny --layers 2000000000
expect_exit2_with reshard_tp "--tp" reshard --checkpoint "$work/none" --tp 2147483647 \
  --out "$work/out"
expect_exit2_with world_size "--world-size" config resolve --config "$config" \
  --world-size 2147483647

# --- numeric options out of range ---------------------------------------------------------------
expect_exit2_with save_interval "--save-interval" train --config "$config" --save "$work/s" \
  --save-interval 99999999999999999999
expect_exit2_with convert_threads "--threads" convert --to bf16 --threads -5 \
  "$work/in.safetensors" "$work/out.safetensors"
expect_exit2_with generate_seed "--seed" generate --checkpoint "$work/none" --prompt a --seed -1
expect_exit2_with generate_tokens "--tokens" generate --checkpoint "$work/none" --prompt a \
  --tokens 2147483648
expect_exit2_with octal_step "--load-step" train --config "$config" --load "$work/none" \
  --load-step 0x10

# --- YAML: alias cycles, second documents, booleans ----------------------------------------------
printf 'model:\n  arch: &a [*a]\n' >"$work/self_alias.yaml"
expect_exit2_with self_alias "alias '*a' on line 2 refers to the node that contains it" \
  config resolve --config "$work/self_alias.yaml"
printf 'model: &m\n  layers: 2\n  loop: *m\n' >"$work/map_cycle.yaml"
expect_exit2_with mapping_cycle "recursive aliases are not allowed" \
  config resolve --config "$work/map_cycle.yaml"
printf 'training:\n  steps: 5\n---\ntraining:\n  steps: 7\n' >"$work/two_docs.yaml"
expect_exit2_with second_document "a second YAML document starts on line 3" \
  config resolve --config "$work/two_docs.yaml"
expect_exit2_with yes_boolean "parallel.sequence_parallel: expected a boolean" \
  config resolve --config "$config" parallel.sequence_parallel=yes
printf "ddp:\n  overlap_grad_reduce: 'true'\n" >"$work/quoted_true.yaml"
expect_exit2_with quoted_true "quoted string 'true'" config resolve --config "$work/quoted_true.yaml"

# --- huge values are cut in messages -------------------------------------------------------------
"$python" -c "
import sys
open(sys.argv[1], 'w').write('model:\n  arch: ' + 'x' * (15 << 20) + '\n')
open(sys.argv[2], 'w').write('model:\n  arch: ' + 'x' * 100000 + '\n')" "$work/huge_arch.yaml" \
  "$work/long_arch.yaml"
expect_exit2_with huge_arch "more than any config file" config resolve --config "$work/huge_arch.yaml"
expect_exit2_with long_arch "(100000 bytes)" config resolve --config "$work/long_arch.yaml"

# --- deeply nested JSON ---------------------------------------------------------------------------
"$python" -c "
import sys
deep = '[' * 200000 + ']' * 200000
open(sys.argv[1], 'w').write('{\"name\": \"m\", \"params\": [{\"name\": \"w\", \"shape\": ' + deep + '}]}')
open(sys.argv[2], 'w').write('{\"format\": ' + deep + '}')" "$work/deep_spec.json" "$work/deep.json"
expect_exit2_with deep_model_spec "JSON nests deeper than 64 levels" \
  layout --model "$work/deep_spec.json" --dp 2
mkdir -p "$work/ck/step-0000001"
cp "$work/deep.json" "$work/ck/step-0000001/checkpoint.json"
echo step-0000001 >"$work/ck/latest"
expect_exit2_with deep_manifest_generate "JSON nests deeper than 64 levels" \
  generate --checkpoint "$work/ck" --prompt a
expect_exit2_with deep_manifest_train "JSON nests deeper than 64 levels" \
  train --config "$config" --load "$work/ck" logging.progress=false
"$python" -c "
import sys
open(sys.argv[1], 'w').write('y' * (10 << 20))" "$work/ck/latest"
expect_exit2_with huge_latest "is 10485760 bytes, more than any pointer file" generate --checkpoint "$work/ck" --prompt a

# --- an edited trainer.consumed_samples ---------------------------------------------------------
tiny=(--config "$config" model.layers=1 model.hidden=16 model.heads=2 model.ffn=32
      training.micro_batch_size=4 training.warmup_steps=0 training.eval_interval=0
      data.eval_samples=8 logging.progress=false training.steps=2)
if "$shardwise" train "${tiny[@]}" --save "$work/run" >"$work/train.out" 2>"$work/train.err"; then
  manifest=$work/run/step-0000002/checkpoint.json
  "$python" - "$manifest" <<'PY' || fail "saved manifest: batch history"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["batch_history"] == [[0, 4]], m["batch_history"]
assert m["trainer"]["consumed_samples"] == 8, m["trainer"]
PY
  # Resuming the untouched checkpoint works, also at another global batch: the history then
  # has two stretches and the sample count is their sum (2 x 4 + 1 x 2).
  "$shardwise" train "${tiny[@]}" training.steps=3 training.micro_batch_size=2 \
    --load "$work/run" --save "$work/run" >"$work/resume.out" 2>"$work/resume.err" ||
    fail "resume of an unedited checkpoint: $(tail -2 "$work/resume.err")"
  "$python" - "$work/run/step-0000003/checkpoint.json" <<'PY' || fail "resumed manifest: history"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["batch_history"] == [[0, 4], [2, 2]], m["batch_history"]
assert m["trainer"]["consumed_samples"] == 10, m["trainer"]
PY
  "$shardwise" train "${tiny[@]}" training.steps=4 training.micro_batch_size=2 \
    --load "$work/run" >"$work/resume2.out" 2>"$work/resume2.err" ||
    fail "resume of a two-stretch history: $(tail -2 "$work/resume2.err")"
  "$python" - "$manifest" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["trainer"]["consumed_samples"] = 12
json.dump(m, open(sys.argv[1], "w"))
PY
  expect_exit2_with edited_consumed_samples \
    "trainer.consumed_samples is 12 but step 2 at global batch 4 gives 8 samples" \
    train "${tiny[@]}" training.steps=3 --load "$work/run/step-0000002"
else
  fail "tiny training run failed: $(tail -3 "$work/train.err")"
fi

# --- text that JSON cannot hold (nlohmann threw an "internal error", exit 1) ----------------------
expect_exit2_with model_spec_name_not_utf8 "--name 'bad\\xff' is not valid UTF-8" \
  model-spec --arch gpt-tiny --name $'bad\xff' --out "$work/never_spec.json"
expect_exit2_with config_jsonl_not_utf8 "logging.jsonl_path '/tmp/j\\xff' is not valid UTF-8" \
  config resolve --config "$config" --format json $'logging.jsonl_path=/tmp/j\xff'
[[ ! -e "$work/never_spec.json" ]] || fail "model-spec wrote a spec with a non-UTF-8 name"

expect_exit2_with unknown_subcommand "unknown subcommand 'trian' (valid: config, convert," trian

cli_test_finish "parsers CLI: hostile input refused with one line each"
