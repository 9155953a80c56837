#!/usr/bin/env bash
# CLI test for `shardwise config resolve` and `shardwise config presets`.
# Usage: config_cli_test.sh PATH/TO/shardwise PATH/TO/examples
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: config_cli_test.sh SHARDWISE_BINARY EXAMPLES_DIR}
examples=${2:?usage: config_cli_test.sh SHARDWISE_BINARY EXAMPLES_DIR}
cli_test_init config_cli

# Resolution at world size 4 with the layer-wise (distributed) optimizer turns the DP overlap on;
# the user's comm_overlap.bucket_size from default.yaml wins over the derived 128Mi.
"$shardwise" config resolve --config "$examples/default.yaml" --world-size 4 --format json \
  >"$work/resolved.json" 2>"$work/resolved.err" || fail "resolve exited $?"
"$python" - "$work/resolved.json" <<'PY' || fail "resolved JSON content"
import json, sys
doc = json.load(open(sys.argv[1]))
for key in ("config", "resolution", "warnings"):
    assert key in doc, key
ddp = doc["config"]["ddp"]
assert ddp["overlap_grad_reduce"] is True, ddp
assert ddp["overlap_param_gather"] is True, ddp
assert ddp["bucket_size"] == 16384, ddp
PY

# Gathering params during the optimizer step: the optimizer section's key stands at pp = 1;
# comm_overlap's key keeps Megatron's rule (interleaved pipeline only) and is refused here.
"$shardwise" config resolve --config "$examples/default.yaml" --world-size 2 --format json \
  optimizer.overlap_param_gather_with_optimizer_step=true >"$work/with_step.json" \
  2>"$work/with_step.err" || fail "resolve (gather during step) exited $?"
"$python" - "$work/with_step.json" <<'PY' || fail "gather during the step JSON content"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["config"]["optimizer"]["overlap_param_gather_with_optimizer_step"] is True, doc["config"]["optimizer"]
PY
if "$shardwise" config resolve --config "$examples/default.yaml" --world-size 2 \
  comm_overlap.overlap_param_gather_with_optimizer_step=true >/dev/null 2>"$work/megatron.err"; then
  fail "comm_overlap.overlap_param_gather_with_optimizer_step at pp = 1 was accepted"
fi
grep -qF "needs the interleaved pipeline schedule" "$work/megatron.err" ||
  fail "comm_overlap refusal lacks the reason: $(head -c 300 "$work/megatron.err")"

# Without the distributed optimizer the DDP settings stay as the user wrote them (and a warning
# says the comm_overlap DP fields are ignored).
"$shardwise" config resolve --config "$examples/default.yaml" --world-size 4 --format json \
  optimizer.kind=ddp >"$work/ddp.json" 2>"$work/ddp.err" || fail "resolve (ddp) exited $?"
"$python" - "$work/ddp.json" <<'PY' || fail "ddp JSON content"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["config"]["ddp"]["overlap_grad_reduce"] is False, doc["config"]["ddp"]
assert any("not a distributed optimizer" in w for w in doc["warnings"]), doc["warnings"]
PY

# TP overlap at tp = 2 with sequence parallelism: the MPI backend is available, bootstraps over
# MPI, and tp_overlap_runtime says what each GEMM slot runs (a preset's slots here, with its
# GPU-only fields reported as not applicable); the YAML output carries the same section.
tp_overrides=(parallel.tp=2 parallel.sequence_parallel=true comm_overlap.tp_comm_overlap=true
              comm_overlap.tp_comm_overlap_cfg=userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192)
"$shardwise" config resolve --config "$examples/default.yaml" --world-size 4 --format json \
  "${tp_overrides[@]}" >"$work/tp.json" 2>"$work/tp.err" || fail "resolve (tp) exited $? $(cat "$work/tp.err")"
"$python" - "$work/tp.json" <<'PY' || fail "tp_overlap_runtime JSON content"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["resolution"]["tp_comm_overlap"] is True, doc["resolution"]
assert doc["resolution"]["tp_comm_bootstrap_backend"] == "mpi", doc["resolution"]
rt = doc["tp_overlap_runtime"]
assert rt["enabled"] is True and rt["backend"] == "mpi", rt
slots = rt["slots"]
assert slots["qkv_fprop"]["algorithm"] == "ring_exchange", slots["qkv_fprop"]
assert slots["proj_fprop"]["algorithm"] == "pipeline" and slots["proj_fprop"]["num_splits"] == 4
assert slots["qkv_wgrad"]["algorithm"] == "bulk", slots["qkv_wgrad"]
assert slots["proj_fprop"]["not_applicable_on_mpi_backend"]["num_sm"] == 32, slots["proj_fprop"]
assert any("not applicable on the MPI backend" in n for n in rt["notes"]), rt["notes"]
PY
"$shardwise" config resolve --config "$examples/default.yaml" --world-size 4 "${tp_overrides[@]}" \
  >"$work/tp.yaml" 2>/dev/null || fail "resolve (tp, yaml) exited $?"
grep -q "^# tp_overlap_runtime (MPI backend):" "$work/tp.yaml" &&
  grep -q "not_applicable_on_mpi_backend" "$work/tp.yaml" ||
  fail "YAML output lacks the tp_overlap_runtime section"
"$python" - "$work/resolved.json" <<'PY' || fail "tp_overlap_runtime off at tp = 1"
import json, sys
rt = json.load(open(sys.argv[1]))["tp_overlap_runtime"]
assert rt["enabled"] is False and all(s["algorithm"] == "none" for s in rt["slots"].values()), rt
PY

# YAML output loads again and resolves to the same thing.
"$shardwise" config resolve --config "$examples/default.yaml" --world-size 4 >"$work/r.yaml" \
  2>/dev/null || fail "resolve yaml exited $?"
"$shardwise" config resolve --config "$work/r.yaml" --world-size 4 >"$work/r2.yaml" 2>/dev/null ||
  fail "re-resolve exited $?"
cmp -s "$work/r.yaml" "$work/r2.yaml" || fail "resolved YAML is not a fixed point"

# Presets: list, one by name, unknown name.
"$shardwise" config presets >"$work/presets.txt" || fail "presets exited $?"
count=$(grep -c "userbuffers_" "$work/presets.txt" || true)
[[ $count -ge 19 ]] || fail "expected 19 presets listed, saw $count"
"$shardwise" config presets --name userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192 \
  >"$work/one.txt" || fail "preset by name exited $?"
grep -q "qkv_dgrad" "$work/one.txt" || fail "preset output lacks its GEMM slots"

# Bad input: exit 2 with one line on stderr.
expect_exit2 "unknown preset" config presets --name userbuffers_nope
expect_exit2 "unknown key" config resolve --config "$examples/default.yaml" \
  training.no_such_key=1
expect_exit2 "bad type" config resolve --config "$examples/default.yaml" \
  training.steps=many
expect_exit2 "missing file" config resolve --config "$work/none.yaml"
expect_exit2 "dp not dividing world" config resolve \
  --config "$examples/default.yaml" --world-size 4 comm_overlap.data_parallel_size=3

# Optimizer values the shared hyperparameter checks refuse (the Python front end runs the same
# ones): exit 2, one line naming the field.
for bad in optimizer.lr=.nan optimizer.lr=-1 optimizer.adam_beta1=1 optimizer.adam_eps=0 \
  optimizer.muon_momentum=2 optimizer.muon_ns_steps=0 optimizer.muon_ns_steps=2147483647 \
  optimizer.clip_grad=.nan optimizer.weight_decay=-0.1; do
  expect_exit2 "$bad" config resolve --config "$examples/default.yaml" "$bad"
  grep -qF "${bad%%=*}" "$work/err" || fail "$bad: the message does not name ${bad%%=*}"
done

# ddp.layer_wise_shard_group_size: shown by resolve (default dp), validated on load.
"$shardwise" config resolve --config "$examples/default.yaml" ddp.layer_wise_shard_group_size=2 \
  >"$work/sg.yaml" 2>"$work/sg.err" && grep -q "layer_wise_shard_group_size: \"\?2\"\?$" "$work/sg.yaml" ||
  fail "resolve does not show ddp.layer_wise_shard_group_size: $(cat "$work/sg.err")"
rc=0
"$shardwise" config resolve --config "$examples/default.yaml" ddp.layer_wise_shard_group_size=two \
  >/dev/null 2>"$work/sg.err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "ddp.layer_wise_shard_group_size must be" "$work/sg.err" ||
  fail "bad ddp.layer_wise_shard_group_size: rc $rc, $(cat "$work/sg.err")"

# An override's value is YAML: a ' #' began a comment and a line break folded, so another path was
# used (and written) in silence. Refused; quoted, the value is kept whole.
expect_exit2 "override value with a comment" config resolve --config "$examples/default.yaml" \
  'logging.jsonl_path=/tmp/out #1.jsonl'
grep -q "reads as '/tmp/out'" "$work/err" || fail "comment in an override: $(cat "$work/err")"
# An anchor changed the value too; the message blamed a ' #' comment the value did not have.
expect_exit2 "override value with an anchor" config resolve --config "$examples/default.yaml" \
  'model.layers=&a 3'
grep -q "a leading '&' or '!' is YAML syntax" "$work/err" || fail "anchor in an override: $(cat "$work/err")"
# A data file named with data.source left at synthetic trained on the addition task instead.
expect_exit2 "data.path with synthetic data" config resolve --config "$examples/default.yaml" \
  data.path=corpus.txt
grep -q "data.source is synthetic, which reads no file" "$work/err" ||
  fail "data.path with synthetic data: $(cat "$work/err")"
expect_exit2 "override value with a line break" config resolve --config "$examples/default.yaml" \
  $'data.path=/tmp/a\nb.txt'
"$shardwise" config resolve --config "$examples/default.yaml" \
  'logging.jsonl_path="/tmp/out #1.jsonl"' >"$work/quoted.out" 2>&1 &&
  grep -qF '/tmp/out #1.jsonl' "$work/quoted.out" &&
  echo "ok: a quoted override keeps its ' #'" || fail "quoted override value not kept whole"

cli_test_finish "config CLI: all checks passed"
