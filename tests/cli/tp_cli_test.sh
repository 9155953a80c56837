#!/usr/bin/env bash
# CLI test of tensor-parallel training: examples/tp.yaml (tp = 2 x dp = 2, sequence parallel, TP
# comm overlap asked for) resolves and trains under mpirun -np 4 (a short run: the loss falls and
# the metrics log is complete), a checkpoint it saves resumes at tp = 1 with the same next-step
# loss (and a tp = 1 checkpoint at tp = 2), `generate --tp 2` samples what tp = 1 samples (and
# refuses ranks that read different checkpoints), and impossible TP sizes exit 2 naming
# parallel.tp.
# Usage: tp_cli_test.sh PATH/TO/shardwise REPO_ROOT [MPIEXEC]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: tp_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
root=${2:?usage: tp_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
mpiexec=${3:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
cli_test_init tp_cli
config="$root/examples/tp.yaml"

# --- config resolve: tp and sequence parallelism as written, the overlap resolution reported ----
if expect_rc 0 resolve "$shardwise" config resolve --config "$config" --world-size 4 \
    --format json; then
  "$python" - "$work/resolve.out" <<'PY' || fail "resolve: JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
cfg = doc["config"] if "config" in doc else doc
assert cfg["parallel"]["tp"] == 2 and cfg["parallel"]["sequence_parallel"] is True, cfg["parallel"]
res = doc["resolution"]
# On over MPI: no userbuffers preset fits this small model, so resolve takes the backend's
# default per-GEMM config, and the runtime overlaps every slot with one of the three algorithms.
assert res["tp_comm_overlap"] is True and res["tp_comm_overlap_cfg_source"] == "backend-default", res
runtime = doc["tp_overlap_runtime"]
assert runtime["enabled"] and runtime["backend"] == "mpi", runtime
algorithms = {slot["algorithm"] for slot in runtime["slots"].values()}
assert algorithms <= {"ring_exchange", "pipeline", "bulk"} and len(algorithms) == 3, algorithms
PY
fi

# --- a short TP training run (the full 600-step run is measured in docs/) -----------------------
steps=40
if expect_rc 0 train4 "$mpiexec" -np 4 --oversubscribe "$shardwise" train --config "$config" \
    training.steps=$steps training.eval_interval=0 training.warmup_steps=5 logging.progress=false \
    --log-jsonl "$work/m.jsonl" --save "$work/ckpt" --save-interval 30; then
  "$python" - "$work/m.jsonl" $steps <<'PY' || fail "train4: metrics"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r and "eval_loss" not in r and r.get("step")]
assert len(steps) == int(sys.argv[2]), len(steps)
first = sum(r["loss"] for r in steps[:5]) / 5
last = sum(r["loss"] for r in steps[-5:]) / 5
assert last < 0.8 * first, (first, last)
PY
fi

# --- the tp = 2 checkpoint (full tensors) resumes at tp = 1 x dp = 2 and at tp = 2 x dp = 2 -------
if [[ -d "$work/ckpt/step-0000030" ]]; then
  grep -q '"tensor_parallel"' "$work/ckpt/step-0000030/checkpoint.json" ||
    fail "manifest has no tensor_parallel entry"
  # np tp micro_batch_size: dp = 2 both times, so the global batch stays 64.
  for shape in "2 1 32" "4 2 32"; do
    read -r np tp mbs <<<"$shape"
    if expect_rc 0 "resume_tp$tp" "$mpiexec" -np "$np" --oversubscribe "$shardwise" train \
        --config "$config" parallel.tp=$tp parallel.sequence_parallel=$([[ $tp == 1 ]] && echo false || echo true) \
        training.micro_batch_size=$mbs training.steps=$steps training.eval_interval=0 \
        training.warmup_steps=5 logging.progress=false --load "$work/ckpt" --load-step 30 \
        --log-jsonl "$work/r$tp.jsonl"; then
      "$python" - "$work/m.jsonl" "$work/r$tp.jsonl" <<'PY' || fail "resume_tp$tp: losses"
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path))
            if "loss" in r and "eval_loss" not in r and r.get("step")}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert min(b) == 31, sorted(b)
assert abs(a[31] - b[31]) <= 1e-5 * abs(a[31]), (a[31], b[31])
PY
    fi
  done
else
  fail "train4 saved no checkpoint at step 30"
fi

# --- a damaged index in a tp = 2 checkpoint: exit 2 naming the checkpoint (it gave raw JSON-library
# messages, or named the loader's own scratch file in /tmp) ----------------------------------------
if [[ -d "$work/ckpt/step-0000030" ]]; then
  for damage in no_index drop_field; do
    cp -r "$work/ckpt/step-0000030" "$work/$damage"
    "$python" - "$work/$damage/checkpoint.json" "$damage" <<'PY'
import json, sys
path, damage = sys.argv[1], sys.argv[2]
m = json.load(open(path))
if damage == "no_index":
    del m["index"]
else:  # the first param's entries no longer list its second moment
    first = next(iter(m["index"].values()))
    for entry in first:
        entry["fields"] = [f for f in entry["fields"] if f != "exp_avg_sq"]
json.dump(m, open(path, "w"))
PY
    if expect_rc 2 "load_$damage" "$mpiexec" -np 4 --oversubscribe "$shardwise" train \
        --config "$config" training.steps=32 logging.progress=false --load "$work/$damage"; then
      grep -q "$work/$damage" "$work/load_$damage.err" ||
        fail "load_$damage: the error does not name the checkpoint"
      ! grep -qE "json.exception.out_of_range|shardwise-tp-load" "$work/load_$damage.err" ||
        fail "load_$damage: a raw JSON message or the scratch file in the error"
    fi
  done
fi

# --- and the reverse: a tp = 1 checkpoint (dp = 2) resumes at tp = 2 x dp = 2 --------------------
if expect_rc 0 save_tp1 "$mpiexec" -np 2 --oversubscribe "$shardwise" train --config "$config"     parallel.tp=1 parallel.sequence_parallel=false training.steps=12 logging.progress=false     --save "$work/ckpt1" --save-interval 10 --log-jsonl "$work/s1.jsonl" &&
  expect_rc 0 load_tp2 "$mpiexec" -np 4 --oversubscribe "$shardwise" train --config "$config"     training.steps=12 logging.progress=false --load "$work/ckpt1" --load-step 10     --log-jsonl "$work/l2.jsonl"; then
  "$python" - "$work/s1.jsonl" "$work/l2.jsonl" <<'PY' || fail "load_tp2: losses"
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path))
            if "loss" in r and "eval_loss" not in r and r.get("step")}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(b) == [11, 12], sorted(b)
for s in (11, 12):
    assert abs(a[s] - b[s]) <= 1e-5 * abs(a[s]), (s, a[s], b[s])
PY
fi

# --- generate --tp 2 samples the same bytes as generate at tp = 1 (same seed) -------------------
if expect_rc 0 text_train "$shardwise" train --config "$root/examples/text.yaml" data.source=text \
    data.path="$root/examples/data/tiny_corpus.txt" 'data.val_path=""' 'logging.jsonl_path=""' \
    'logging.plot_path=""' model.layers=1 model.hidden=32 model.heads=2 model.ffn=64 \
    model.seq_len=32 training.steps=30 training.eval_interval=0 data.eval_samples=8 \
    logging.progress=false --save "$work/text" &&
  expect_rc 0 gen1 "$shardwise" generate --checkpoint "$work/text" --prompt "The " --tokens 40 \
    --temperature 1 --seed 3 &&
  expect_rc 0 gen2 "$mpiexec" -np 2 --oversubscribe "$shardwise" generate --checkpoint \
    "$work/text" --prompt "The " --tokens 40 --temperature 1 --seed 3 --tp 2; then
  cmp -s "$work/gen1.out" "$work/gen2.out" || fail "generate --tp 2 differs from tp = 1"
  # A --tp the model cannot take is named as the user gave it (it said parallel.tp).
  if expect_rc 2 gen_tp3 "$mpiexec" -np 3 --oversubscribe "$shardwise" generate --checkpoint \
      "$work/text" --prompt "The " --tokens 4 --tp 3; then
    grep -q "model.num_heads (2) must be divisible by --tp (3)" "$work/gen_tp3.err" ||
      fail "gen_tp3: $(tail -3 "$work/gen_tp3.err")"
  fi
fi

# --- generate --tp 2 where the same path holds another run's checkpoint on one rank (storage each
# node has its own copy of): refused on every rank, naming the rank, instead of sampling from a
# mix of two models. The ranks run in two directories, each with its own "text".
mkdir -p "$work/other"
if [[ -d "$work/text" ]] &&
  expect_rc 0 text_train_other "$shardwise" train --config "$root/examples/text.yaml" \
    data.source=text data.path="$root/examples/data/tiny_corpus.txt" 'data.val_path=""' \
    'logging.jsonl_path=""' 'logging.plot_path=""' model.layers=1 model.hidden=32 model.heads=2 \
    model.ffn=64 model.seq_len=32 training.steps=30 training.eval_interval=0 data.eval_samples=8 \
    model.seed=7 logging.progress=false --save "$work/other/text" &&
  expect_rc 2 gen_mixed "$mpiexec" --oversubscribe -np 1 -wdir "$work" "$shardwise" generate \
    --checkpoint text --prompt "The " --tokens 8 --tp 2 : -np 1 -wdir "$work/other" \
    "$shardwise" generate --checkpoint text --prompt "The " --tokens 8 --tp 2; then
  grep -q "is not the same on every rank: rank(s) 1 " "$work/gen_mixed.err" ||
    fail "gen_mixed: the error does not name rank 1"
fi

# --- generate in a job of several ranks: each rank needs --tp N (a rank without it sampled alone
# and Open MPI reported it "exited improperly", exit 1); a rank that cannot read the checkpoint is
# named with its rank and the others wait for nothing.
if [[ -d "$work/text" ]]; then
  if expect_rc 2 gen_tp_one_rank "$mpiexec" --oversubscribe -np 1 -wdir "$work" "$shardwise" \
      generate --checkpoint text --prompt "The " --tokens 8 --tp 2 : -np 1 -wdir "$work" \
      "$shardwise" generate --checkpoint text --prompt "The " --tokens 8; then
    grep -q "runs with --tp = 1, and not every rank does" "$work/gen_tp_one_rank.err" ||
      fail "gen_tp_one_rank: the error does not name --tp"
  fi
  if expect_rc 2 gen_np2_no_tp "$mpiexec" --oversubscribe -np 2 "$shardwise" generate \
      --checkpoint "$work/text" --prompt "The " --tokens 8; then
    grep -q "this job has 2 ranks; .* or give --tp 2" "$work/gen_np2_no_tp.err" ||
      fail "gen_np2_no_tp: the error does not say to give --tp 2"
  fi
  mkdir -p "$work/no_checkpoint"
  if expect_rc 2 gen_missing_rank1 "$mpiexec" --oversubscribe -np 1 -wdir "$work" "$shardwise" \
      generate --checkpoint text --prompt "The " --tokens 8 --tp 2 : -np 1 -wdir \
      "$work/no_checkpoint" "$shardwise" generate --checkpoint text --prompt "The " --tokens 8 \
      --tp 2; then
    grep -q "\[rank 1/2\] .*'text' does not exist" "$work/gen_missing_rank1.err" ||
      fail "gen_missing_rank1: rank 1's error is not labelled with its rank"
    grep -q "could not be read on rank(s) 1" "$work/gen_missing_rank1.err" ||
      fail "gen_missing_rank1: rank 0 does not name rank 1"
  fi
fi

# --- training data that differs by node under the same data.path (tensor-parallel ranks computed
# one batch from two files without a word): exit 2 naming the rank.
mkdir -p "$work/node_a" "$work/node_b"
cp "$root/examples/data/tiny_corpus.txt" "$work/node_a/corpus.txt"
{ cat "$root/examples/data/tiny_corpus.txt"; echo "one line more on this node"; } \
  >"$work/node_b/corpus.txt"
node_train=(train --config "$root/examples/text.yaml" data.source=text data.path=corpus.txt
  'data.val_path=""' 'logging.jsonl_path=""' 'logging.plot_path=""' model.layers=1 model.hidden=32
  model.heads=2 model.ffn=64 model.seq_len=32 training.steps=2 training.eval_interval=0
  data.eval_samples=8 logging.progress=false parallel.tp=2)
if expect_rc 2 data_by_node "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" "$shardwise" \
    "${node_train[@]}" : -np 1 -wdir "$work/node_b" "$shardwise" "${node_train[@]}"; then
  grep -q "data.path 'corpus.txt' does not hold the same tokens on every rank: rank(s) 1 " \
    "$work/data_by_node.err" || fail "data_by_node: the error does not name data.path and rank 1"
fi
expect_rc 0 data_same_nodes "$mpiexec" --oversubscribe -np 2 -wdir "$work/node_a" "$shardwise" \
  "${node_train[@]}" || true
# A job refused because its ranks disagree (here on --save) leaves no --save directory behind.
# (Separate parents: a parent both ranks share is removed only by the rank that made it, and only
# when the other rank's directory is gone by then.)
if expect_rc 2 save_disagree "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" "$shardwise" \
    "${node_train[@]}" --save "$work/sv_a/a" : -np 1 -wdir "$work/node_a" "$shardwise" \
    "${node_train[@]}" --save "$work/sv_b/b"; then
  [[ ! -e "$work/sv_a" && ! -e "$work/sv_b" ]] ||
    fail "save_disagree left $(find "$work"/sv_*)"
fi
# --save on each node's own disk (here: one relative path in two working directories) failed only
# at the first save, after the work: refused at the start, naming rank 1, leaving nothing behind.
if expect_rc 2 save_node_local "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" "$shardwise" \
    "${node_train[@]}" training.steps=50 --save local_ckpt : -np 1 -wdir "$work/node_b" \
    "$shardwise" "${node_train[@]}" training.steps=50 --save local_ckpt; then
  grep -q "is not one directory for every rank: rank(s) 1 do not find the lock file" \
    "$work/save_node_local.err" || fail "save_node_local: the error does not name rank 1"
  grep -q "^step " "$work/save_node_local.out" && fail "save_node_local: training started"
  [[ ! -e "$work/node_a/local_ckpt" && ! -e "$work/node_b/local_ckpt" ]] ||
    fail "save_node_local left $(find "$work"/node_*/local_ckpt)"
fi
# Rank 0's --log-jsonl is the file rank 1 reads as --config (each rank checked only its own
# inputs, and rank 0 wrote its log over rank 1's config, exit 0).
cp "$root/examples/text.yaml" "$work/node_a/other.yaml"
other_train=("${node_train[@]}")
other_train[2]=other.yaml
if expect_rc 2 log_is_other_config "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" \
    "$shardwise" "${node_train[@]}" --log-jsonl other.yaml : -np 1 -wdir "$work/node_a" \
    "$shardwise" "${other_train[@]}"; then
  grep -q "rank 0's --log-jsonl 'other.yaml' is the file rank 1 reads as --config" \
    "$work/log_is_other_config.err" || fail "log_is_other_config: the error does not say so"
fi
cmp -s "$root/examples/text.yaml" "$work/node_a/other.yaml" || fail "rank 1's config was written over"
# A metrics log given to rank 1 only is not written, and rank 1 says so (it was dropped silently).
if expect_rc 0 log_on_rank1 "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" "$shardwise" \
    "${node_train[@]}" : -np 1 -wdir "$work/node_a" "$shardwise" "${node_train[@]}" \
    --log-jsonl rank1.jsonl; then
  grep -qF "[rank 1/2] shardwise: warning: --log-jsonl 'rank1.jsonl' is not written: only rank 0 \
writes it, and rank 0 has none" "$work/log_on_rank1.err" || fail "log_on_rank1: no warning"
  [[ ! -e "$work/node_a/rank1.jsonl" ]] || fail "log_on_rank1: rank 1 wrote a log"
fi
# An option only one rank was given wrong is named with that rank (it printed no rank).
if expect_rc 2 progress_rank1 "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" \
    "$shardwise" "${node_train[@]}" --progress on : -np 1 -wdir "$work/node_a" "$shardwise" \
    "${node_train[@]}" --progress maybe; then
  grep -qF "shardwise: error: rank 1: --progress: expected auto, on or off, got 'maybe'" \
    "$work/progress_rank1.err" || fail "progress_rank1: the error does not name rank 1"
fi
# Ranks that run different subcommands are told so (it read "has the setting --tp where not every
# rank has it").
if [[ -d "$work/text" ]] &&
  expect_rc 2 mixed_subcommands "$mpiexec" --oversubscribe -np 1 -wdir "$work/node_a" \
    "$shardwise" "${node_train[@]}" : -np 1 -wdir "$work" "$shardwise" generate \
    --checkpoint text --prompt "The " --tokens 8 --tp 2; then
  grep -qF "rank 0 runs with subcommand = 'train', and not every rank does (disagreeing rank(s) 1)" \
    "$work/mixed_subcommands.err" || fail "mixed_subcommands: the error does not name the subcommand"
fi

# --- impossible TP sizes: exit 2 naming the field ------------------------------------------------
if expect_rc 2 tp3 "$mpiexec" -np 4 --oversubscribe "$shardwise" train --config "$config" \
    parallel.tp=3; then
  grep -q "parallel.tp" "$work/tp3.err" || fail "tp3: error does not name parallel.tp"
fi
expect_exit2 "tp does not divide heads" config resolve --config "$config" parallel.tp=8
if expect_rc 2 resolve3 "$shardwise" config resolve --config "$config" --world-size 3; then
  grep -q "parallel.tp = 2" "$work/resolve3.err" || fail "resolve3: error does not name parallel.tp"
fi
expect_exit2 "sequence parallel without tp" train --config "$config" parallel.tp=1

# Fewer held-out samples than data-parallel ranks: a rank with none ran no forward, where the
# overlapped param all-gathers finish, so the others hung in them (or, at 3 ranks, met its next
# collective: MPI_ERR_TRUNCATE). The 1-rank TP group case (-np 4 tp 2) is the same per dp rank.
for shape in "2 1 1" "3 1 2" "4 2 1"; do
  read -r np tp samples <<<"$shape"
  expect_rc 0 "eval_fewer_than_dp_$np" timeout 120 "$mpiexec" -np "$np" --oversubscribe \
    "$shardwise" train --config "$root/examples/default.yaml" training.steps=2 parallel.tp="$tp" \
    data.eval_samples="$samples" comm_overlap.overlap_param_gather=true logging.progress=false
done

# tp = 2, dp = 1: the TP layers' traffic is counted ("0 bytes communicated" before).
if expect_rc 0 tp_only_traffic timeout 120 "$mpiexec" -np 2 --oversubscribe "$shardwise" train \
    --config "$root/examples/default.yaml" training.steps=2 parallel.tp=2 logging.progress=false; then
  grep -qE "\| [1-9][0-9]* bytes communicated by rank 0" "$work/tp_only_traffic.out" \
    "$work/tp_only_traffic.err" || fail "tp_only_traffic: $(grep done: "$work"/tp_only_traffic.*)"
fi

cli_test_finish "tp CLI: resolve, 4-rank TP training, resume at other tp, bad sizes rejected"
