#!/usr/bin/env bash
# Fault tests of the files every subcommand reads and writes. Each case used to destroy a file,
# hang or crash, and must now exit 2 with one line within seconds, leaving every file as it was:
#  - outputs that are not regular files (a device node, a FIFO, a socket, a directory, a symlink
#    to a FIFO) for train --log-jsonl/--plot/--save, layout --svg, model-spec --out, convert's
#    output, reshard --out, refit --json (the atomic writer renamed over them: /dev/null became a
#    regular file as root);
#  - outputs that are the same file as an input or as another output (train --config c.yaml
#    --log-jsonl c.yaml overwrote the config), spelt differently or through links;
#  - inputs that are a FIFO or a symlink to /dev/zero: safetensors files, checkpoint.json,
#    `latest`, optimizer rank files, configs, model specs, data (a FIFO blocked forever,
#    /dev/zero was read until bad_alloc);
#  - a symlink loop as --checkpoint (an `internal error:` line before).
# Usage: file_faults_test.sh PATH/TO/shardwise REPO_ROOT
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: file_faults_test.sh SHARDWISE_BINARY REPO_ROOT}
root=${2:?usage: file_faults_test.sh SHARDWISE_BINARY REPO_ROOT}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cli_test_init file_faults

# refuses NAME TEXT COMMAND...: COMMAND exits 2 within 20 s with one stderr line holding TEXT.
refuses() {
  local name=$1 text=$2
  shift 2
  local rc=0
  timeout 20 "$@" >"$work/out" 2>"$work/err" </dev/null || rc=$?
  if [[ $rc -eq 124 ]]; then
    fail "$name: still running after 20 s (hangs)"
  elif [[ $rc -ne 2 ]]; then
    fail "$name: expected exit 2, got $rc ($(head -c 300 "$work/err"))"
  elif [[ $(wc -l <"$work/err") -ne 1 ]]; then
    fail "$name: expected one error line, got: $(head -c 600 "$work/err")"
  elif ! grep -qF -- "$text" "$work/err"; then
    fail "$name: stderr lacks '$text': $(cat "$work/err")"
  elif grep -qF "internal error" "$work/err"; then
    fail "$name: $(cat "$work/err")"
  else
    echo "ok: $name -> $(cat "$work/err")"
  fi
}

tiny=(model.layers=1 model.hidden=16 model.heads=2 model.ffn=32 training.micro_batch_size=4
      training.warmup_steps=0 training.eval_interval=0 data.eval_samples=8 logging.progress=false)
cp "$root/examples/default.yaml" "$work/c.yaml"
cp "$work/c.yaml" "$work/c.yaml.orig"

# A checkpoint, its weights file and a model spec to read.
expect_rc 0 make_checkpoint "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" \
  training.steps=2 --save "$work/ckpt" || exit 1
step=$(cat "$work/ckpt/latest")
weights="$work/ckpt/$step/model.safetensors"
rank_file=$(cd "$work/ckpt/$step" && ls | grep -v -e checkpoint.json -e model.safetensors | head -1)
[[ -n "$rank_file" ]] || { fail "no optimizer rank file in $work/ckpt/$step"; exit 1; }
expect_rc 0 make_spec "$shardwise" model-spec --arch gpt-tiny --out "$work/spec.json" || exit 1

# --- outputs that are not regular files ---------------------------------------------------------
mkfifo "$work/fifo"
ln -s "$work/fifo" "$work/to_fifo"
mkdir "$work/dir"
"$python" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/sock"
kinds=("fifo:a FIFO" "to_fifo:a FIFO" "sock:a socket" "dir:a directory")
# As root a device node can be made: a copy of /dev/null (same major/minor) stands in for it.
if [[ $(id -u) -eq 0 ]] && mknod -m 666 "$work/null" c 1 3 2>/dev/null; then
  kinds+=("null:a character device")
else
  echo "SKIP: not root: no device node output case (the FIFO and socket cases still run)" >&2
fi
for kind in "${kinds[@]}"; do
  name=${kind%%:*} what=${kind#*:} out="$work/${kind%%:*}"
  [[ $name == dir ]] && what="is a directory"
  refuses "train_log_jsonl_$name" "$what" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --log-jsonl "$out"
  refuses "train_plot_$name" "$what" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --plot "$out"
  refuses "layout_svg_$name" "$what" "$shardwise" layout --model gpt-tiny --dp 2 --svg "$out"
  refuses "model_spec_out_$name" "$what" "$shardwise" model-spec --arch gpt-tiny --out "$out"
  refuses "convert_output_$name" "$what" "$shardwise" convert --to mxfp8 "$weights" "$out"
  refuses "refit_json_$name" "$what" "$shardwise" refit --checkpoint "$work/ckpt/$step" --json "$out"
  if [[ $name != dir ]]; then
    refuses "train_save_$name" ", not a directory" \
      "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save "$out"
    refuses "reshard_out_$name" "it must be a directory or not exist" \
      "$shardwise" reshard --checkpoint "$work/ckpt" --tp 1 --out "$out" --overwrite
  fi
done
# Each save replaces --save DIR/latest: refused before training, not at the first save.
mkdir "$work/save_root" && mkfifo "$work/save_root/latest"
refuses train_save_latest_fifo "--save '$work/save_root/latest' is not writable: it is a FIFO" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save "$work/save_root"
[[ -p "$work/save_root/latest" ]] || fail "the FIFO --save DIR/latest was replaced"
# The lock file is written and truncated: never through a FIFO or a symlink to another file.
mkdir "$work/lock_fifo" "$work/lock_link" && mkfifo "$work/lock_fifo/.lock"
ln -s "$work/c.yaml" "$work/lock_link/.lock"
refuses train_save_lock_fifo "lock file '$work/lock_fifo/.lock' is a FIFO" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save "$work/lock_fifo"
refuses train_save_lock_symlink "Too many levels of symbolic links" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save "$work/lock_link"
[[ -p "$work/fifo" && -L "$work/to_fifo" && -S "$work/sock" && -d "$work/dir" ]] ||
  fail "an output that is not a regular file was replaced: $(ls -l "$work")"
[[ -z $(ls -A "$work/dir") ]] || fail "something was written into $work/dir: $(ls -A "$work/dir")"
[[ ! -e "$work/null" || -c "$work/null" ]] || fail "the device node became $(stat -c %F "$work/null")"
# The issue's own case, on the real /dev/null: it must stay a character device.
refuses convert_dev_null "is a character device" \
  "$shardwise" convert --to mxfp8 "$weights" /dev/null
if [[ ! -c /dev/null ]]; then
  fail "/dev/null is no longer a character device"
  rm -f /dev/null && mknod -m 666 /dev/null c 1 3 || true
fi

# --- outputs that are the same file as an input or another output --------------------------------
mkdir "$work/sub"
ln -s "$work/c.yaml" "$work/c_link.yaml"
ln "$work/c.yaml" "$work/c_hard.yaml"
for spelling in "$work/c.yaml" "$work/sub/../c.yaml" "$work/c_link.yaml" "$work/c_hard.yaml"; do
  refuses "train_jsonl_is_config ($spelling)" "is the same file as the input --config" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --log-jsonl "$spelling"
done
refuses train_plot_is_config "is the same file as the input --config" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --plot "$work/./c.yaml"
refuses train_jsonl_is_plot "are the same file: one output would overwrite the other" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 \
  --log-jsonl "$work/m.out" --plot "$work/sub/../m.out"
printf 'some training text\n%.0s' $(seq 200) >"$work/data.txt"
cp "$work/data.txt" "$work/data.txt.orig"
refuses train_jsonl_is_data "is the same file as the input data.path" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" data.source=text \
  data.path="$work/data.txt" training.steps=2 --log-jsonl "$work/data.txt"
refuses train_plot_is_latest "is the same file as the input --load" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=4 \
  --load "$work/ckpt" --plot "$work/ckpt/latest"
refuses train_jsonl_in_loaded_step "which is read" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=4 \
  --load "$work/ckpt" --log-jsonl "$work/ckpt/$step/checkpoint.json"
# A `latest` symlink in the save root: each save wrote the step's name over its target (here the
# run's own config), though `latest` is no output the user named.
mkdir "$work/linked_root" && ln -s ../c.yaml "$work/linked_root/latest"
refuses train_latest_symlink "latest' is a symbolic link to '../c.yaml'" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save "$work/linked_root"
cmp -s "$work/c.yaml" "$work/c.yaml.orig" || fail "a save through a latest symlink wrote the config"
# data.eval_samples 0 with text data trained to the end, then stopped on a 0 / 0 held-out loss.
refuses train_eval_samples_zero "data.eval_samples" \
  "$shardwise" config resolve --config "$work/c.yaml" data.source=text data.path="$work/data.txt" \
  data.eval_samples=0
# A resume with no step left said "final loss 0", a loss no step had.
expect_rc 0 resume_nothing_left "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" \
  training.steps=2 --load "$work/ckpt" &&
  { grep -q "done: no step left to train (resumed at step 2)" "$work/resume_nothing_left.out" \
    "$work/resume_nothing_left.err" || fail "resume_nothing_left: $(cat "$work/resume_nothing_left.err")"; }
# Finite weights that overflow in the forward: generate printed bytes sampled from NaN, exit 0.
expect_rc 0 text_checkpoint "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" \
  data.source=text data.path="$work/data.txt" training.steps=1 --save "$work/ckpt_overflow"
"$python" - "$work/ckpt_overflow/step-0000001/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
blob = bytearray(open(path, "rb").read())
(n,) = struct.unpack("<Q", blob[:8])
entry = json.loads(blob[8:8 + n])["final_layernorm.weight"]
begin, end = (8 + n + o for o in entry["data_offsets"])
blob[begin:end] = struct.pack("<f", 3e38) * ((end - begin) // 4)
open(path, "wb").write(blob)
PY
refuses generate_overflowing_weights "is not finite" \
  "$shardwise" generate --checkpoint "$work/ckpt_overflow" --prompt so --tokens 4 --temperature 0
cp "$weights" "$work/w.safetensors"
ln "$work/w.safetensors" "$work/w_hard.safetensors"
refuses convert_output_is_input "is the same file as the input '" \
  "$shardwise" convert --to mxfp8 "$work/w.safetensors" "$work/w_hard.safetensors"
refuses layout_svg_is_spec "is the same file as the input --model" \
  "$shardwise" layout --model "$work/spec.json" --dp 2 --svg "$work/sub/../spec.json"
refuses refit_json_is_weights "is the same file as the input --checkpoint" \
  "$shardwise" refit --checkpoint "$work/ckpt/$step" --json "$weights"
refuses refit_json_is_config "is the same file as the input --config" \
  "$shardwise" refit --config "$work/c.yaml" --json "$work/c_link.yaml"
refuses reshard_out_holds_input "which is replaced as a whole" \
  "$shardwise" reshard --checkpoint "$work/ckpt" --tp 1 --out "$work/ckpt/$step" --overwrite
# 2 heads at tp 4: the export cut heads apart (exit 0); every other TP path refuses it.
refuses reshard_tp_splits_heads "--tp 4 does not divide the checkpoint's 2 attention heads" \
  "$shardwise" reshard --checkpoint "$work/ckpt" --tp 4 --out "$work/never_tp4"
cmp -s "$work/c.yaml" "$work/c.yaml.orig" || fail "the config was changed"
cmp -s "$work/data.txt" "$work/data.txt.orig" || fail "the data file was changed"
cmp -s "$work/w.safetensors" "$weights" || fail "the convert input was changed"
[[ $(cat "$work/ckpt/latest") == "$step" ]] || fail "the checkpoint's latest was changed"
[[ -f "$work/ckpt/$step/checkpoint.json" && -f "$weights" ]] || fail "the checkpoint was changed"
"$python" -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/spec.json" ||
  fail "the model spec was changed"
[[ ! -e "$work/m.out" ]] || fail "train_jsonl_is_plot wrote $work/m.out"
# An output given as a symlink is written where the link points, and the link stays (the
# rename used to replace the link with a file and leave the linked file as it was).
mkdir "$work/linked" && : >"$work/linked/spec.json" && ln -s linked/spec.json "$work/spec_link.json"
"$shardwise" model-spec --arch gpt-tiny -o "$work/spec_link.json" >/dev/null ||
  fail "model-spec -o through a symlink"
[[ -L "$work/spec_link.json" && -s "$work/linked/spec.json" ]] ||
  fail "model-spec -o did not write through the symlink: $(ls -l "$work/spec_link.json" "$work/linked")"

# --- inputs that are a FIFO or a symlink to /dev/zero ---------------------------------------------
ln -s /dev/zero "$work/zero"
# damaged NAME FILE KIND: a copy of the checkpoint in $work/NAME with FILE (relative) replaced.
damaged() {
  rm -rf "$work/$1" && cp -r "$work/ckpt" "$work/$1" && rm -f "$work/$1/$2"
  if [[ $3 == fifo ]]; then mkfifo "$work/$1/$2"; else ln -s /dev/zero "$work/$1/$2"; fi
}
for kind in fifo zero; do
  what="a FIFO"
  [[ $kind == zero ]] && what="a character device"
  damaged "latest_$kind" latest $kind
  refuses "load_latest_$kind" "'$work/latest_$kind/latest' is $what" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=4 --load "$work/latest_$kind"
  refuses "generate_latest_$kind" "is $what" \
    "$shardwise" generate --checkpoint "$work/latest_$kind" --prompt x --tokens 1
  damaged "manifest_$kind" "$step/checkpoint.json" $kind
  refuses "load_manifest_$kind" "checkpoint manifest '$work/manifest_$kind/$step/checkpoint.json' is $what" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=4 --load "$work/manifest_$kind"
  refuses "generate_manifest_$kind" "is $what" \
    "$shardwise" generate --checkpoint "$work/manifest_$kind" --prompt x --tokens 1
  refuses "reshard_manifest_$kind" "is $what" \
    "$shardwise" reshard --checkpoint "$work/manifest_$kind" --tp 1 --out "$work/never_$kind"
  damaged "rank_$kind" "$step/$rank_file" $kind
  refuses "load_rank_file_$kind" "safetensors file '$work/rank_$kind/$step/$rank_file' is $what" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=4 --load "$work/rank_$kind"
  damaged "model_$kind" "$step/model.safetensors" $kind
  refuses "reshard_model_$kind" "is $what" \
    "$shardwise" reshard --checkpoint "$work/model_$kind" --tp 1 --out "$work/never_$kind"
  refuses "generate_model_$kind" "is $what" \
    "$shardwise" generate --checkpoint "$work/model_$kind" --prompt x --tokens 1
  refuses "convert_input_$kind" "is $what" \
    "$shardwise" convert --to mxfp8 "$work/$kind" "$work/never_$kind.safetensors"
  refuses "config_$kind" "config file '$work/$kind' is $what" \
    "$shardwise" train --config "$work/$kind" "${tiny[@]}"
  refuses "config_resolve_$kind" "is $what" "$shardwise" config resolve --config "$work/$kind"
  refuses "refit_config_$kind" "is $what" "$shardwise" refit --config "$work/$kind"
  ln -sf "$work/$kind" "$work/spec_$kind.json"
  refuses "layout_model_$kind" "model spec '$work/spec_$kind.json' is $what" \
    "$shardwise" layout --model "$work/spec_$kind.json" --dp 2
  refuses "data_$kind" "data file '$work/$kind' is $what" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" data.source=text data.path="$work/$kind"
  [[ ! -e "$work/never_$kind" && ! -e "$work/never_$kind.safetensors" ]] ||
    fail "an output was written from a $kind input"
done
[[ -p "$work/fifo" ]] || fail "the input FIFO was replaced"

# --- paths std::filesystem cannot resolve ---------------------------------------------------------
ln -s "$work/loop_b" "$work/loop_a"
ln -s "$work/loop_a" "$work/loop_b"
refuses reshard_symlink_loop "Too many levels of symbolic links" \
  "$shardwise" reshard --checkpoint "$work/loop_a" --tp 1 --out "$work/never_loop"
refuses generate_symlink_loop "Too many levels of symbolic links" \
  "$shardwise" generate --checkpoint "$work/loop_a" --prompt x --tokens 1
refuses train_load_symlink_loop "Too many levels of symbolic links" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=4 --load "$work/loop_a"
refuses train_jsonl_symlink_loop "Too many levels of symbolic links" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --log-jsonl "$work/loop_a"
refuses layout_model_symlink_loop "Too many levels of symbolic links" \
  "$shardwise" layout --model "$work/loop_a" --dp 2

# --- the run's outputs and its --save directory (an adversarial sweep, 2026-11-27) ------------------
# Metrics and plot paths from the config are checked like the flags: this overwrote the config.
refuses train_config_jsonl_is_config "logging.jsonl_path '$work/c.yaml' is the same file as the input --config" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 logging.jsonl_path="$work/c.yaml"
refuses train_config_jsonl_is_plot "logging.jsonl_path '$work/m' and logging.plot_path '$work/m' are the same file" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 logging.jsonl_path="$work/m" \
  logging.plot_path="$work/m"
# An unset shell variable is not "no option": --load "" started a fresh run.
refuses train_empty_load "--load: an empty path" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --load ""
refuses train_empty_save "--save: an empty path" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save ""
# The same for the other subcommands' options: `config resolve --config ""` printed the defaults,
# `refit --tp-export ""` skipped the export's forward, `model-spec --dtype ""` wrote the default.
refuses config_resolve_empty_config "--config: an empty path" \
  "$shardwise" config resolve --config ""
refuses refit_empty_tp_export "--tp-export: an empty path" \
  "$shardwise" refit --config "$work/c.yaml" --tp-export ""
refuses model_spec_empty_dtype "--dtype: an empty value" \
  "$shardwise" model-spec --arch gpt-tiny --dtype ""
refuses layout_empty_shard_group_size "--shard-group-size: an empty value" \
  "$shardwise" layout --model gpt-tiny --dp 2 --shard-group-size ""
# Paths JSON records must be UTF-8: the run trained, then every save failed.
refuses train_data_path_not_utf8 "data.path '$work/corpus\\xff' is not valid UTF-8" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 data.source=text \
  model.vocab=256 data.path="$work/corpus"$'\xff' --save "$work/never_utf8"
# A fresh run saving where another run's checkpoints are: they were replaced and pruned.
refuses train_save_over_other_run "--save '$work/ckpt' already holds checkpoints (step 2)" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=3 --save "$work/ckpt" \
  --keep-last 1
# Entries under the saves' names that are not checkpoints: a step directory without a manifest
# lost its files, a user's `latest` and `.lock` were overwritten and truncated, and a file named
# like a step failed the first save after training (a second adversarial sweep, 2026-11-27).
mkdir -p "$work/notckpt/step-0000002" "$work/notlatest" "$work/notlock" "$work/stepfile"
echo precious >"$work/notckpt/step-0000002/notes.txt"
echo precious >"$work/notlatest/latest"
echo precious >"$work/notlock/.lock"
echo precious >"$work/stepfile/step-0000002"
for root in notckpt:step-0000002 notlatest:latest notlock:.lock stepfile:step-0000002; do
  refuses "train_save_over_${root%%:*}" "--save '$work/${root%%:*}' already holds '${root#*:}', which is not a checkpoint" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 --save "$work/${root%%:*}"
done
[[ $(cat "$work/notckpt/step-0000002/notes.txt" "$work/notlatest/latest" "$work/notlock/.lock" \
  "$work/stepfile/step-0000002") == $'precious\nprecious\nprecious\nprecious' ]] ||
  fail "a refused run changed a user's file in --save"
# The lock file a finished run leaves (empty) does not stand in the way of a fresh run.
"$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=1 --save "$work/ownlock" \
  >/dev/null 2>&1 || fail "a fresh run into an empty --save failed"
rm -rf "$work/ownlock/step-0000001" "$work/ownlock/latest"
[[ -f $work/ownlock/.lock ]] || fail "the run left no lock file"
"$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=1 --save "$work/ownlock" \
  >/dev/null 2>&1 || fail "a run was refused over the lock file an earlier run left"
# Outputs on the saves' own entries: the log was overwritten by `latest`, truncated as the lock,
# deleted with a pruned step.
for entry in latest .lock "$step/m.jsonl"; do
  refuses "train_jsonl_in_save_${entry%%/*}" "lies inside --save '$work/ckpt' at '${entry%%/*}'" \
    "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=3 --save "$work/ckpt" \
    --overwrite --keep-last 1 --log-jsonl "$work/ckpt/$entry"
done
[[ $(cat "$work/ckpt/latest") == "$step" && ! -e "$work/never_utf8" ]] ||
  fail "a refused run changed the checkpoint root or created its --save"
# reshard --out . wrote every file, printed "wrote", then failed to replace the directory.
mkdir "$work/here"
refuses reshard_out_cwd "--out '.' is the current directory or contains it" \
  bash -c 'cd "$1" && shift && exec "$@"' _ "$work/here" \
  "$(realpath "$shardwise")" reshard --checkpoint "$work/ckpt" --tp 1 --out . --overwrite
[[ -z $(ls -A "$work/here") ]] || fail "reshard --out . wrote into it: $(ls -A "$work/here")"
# Weights that are not finite: train --load refused them, generate printed garbage with exit 0.
cp -r "$work/ckpt" "$work/ckpt_nan"
"$python" - "$work/ckpt_nan/$step/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
for name, info in json.loads(data[8:8 + n]).items():
    if name != "__metadata__" and info["dtype"] == "F32":
        begin, end = (8 + n + o for o in info["data_offsets"])
        data[begin:end] = np.full((end - begin) // 4, np.nan, "<f4").tobytes()
open(path, "wb").write(data)
PY
refuses generate_nan_weights "element 0 is nan: a checkpoint's weights must be finite" \
  "$shardwise" generate --checkpoint "$work/ckpt_nan" --prompt 1 --tokens 4
# reshard read model.safetensors alone: a tensor retyped (or removed, reshaped, added) after the
# save was exported as it was. It must match the manifest's model list.
cp -r "$work/ckpt" "$work/ckpt_retyped"
"$python" - "$work/ckpt_retyped/$step/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = next(k for k in header if k != "__metadata__")
header[name]["dtype"] = "I32"
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
refuses reshard_weights_unlike_manifest "is int32" \
  "$shardwise" reshard --checkpoint "$work/ckpt_retyped" --tp 1 --out "$work/never_retyped"
[[ ! -e "$work/never_retyped" ]] || fail "reshard exported weights its manifest does not list"
# generate read the manifest's model sizes through get<int>: 4294967300 heads became 4.
cp -r "$work/ckpt" "$work/ckpt_heads"
"$python" -c 'import json, sys; p = sys.argv[1]; m = json.load(open(p))
m["config"]["model"]["heads"] = 4294967300; json.dump(m, open(p, "w"))' \
  "$work/ckpt_heads/$step/checkpoint.json"
refuses generate_manifest_heads "config.model.heads is 4294967300; expected an integer in [1," \
  "$shardwise" generate --checkpoint "$work/ckpt_heads" --prompt 1 --tokens 4
# reshard took an optimizer rank file's state tensors, or a TP export's shards, as whole weights.
refuses reshard_optimizer_file "is an optimizer rank file of a checkpoint" \
  "$shardwise" reshard --checkpoint "$work/ckpt/$step/optimizer-rank-00000-of-00001.safetensors" \
  --tp 1 --out "$work/never_optimizer"
[[ ! -e "$work/never_optimizer" ]] || fail "reshard exported an optimizer rank file"
expect_rc 0 reshard_tp2 "$shardwise" reshard --checkpoint "$work/ckpt" --tp 2 --out "$work/tp2"
refuses reshard_tp_export "is a tensor-parallel export" \
  "$shardwise" reshard --checkpoint "$work/tp2/tp-rank-00-of-02.safetensors" --tp 1 \
  --out "$work/never_tp"
[[ ! -e "$work/never_tp" ]] || fail "reshard split a tensor-parallel export again"
# reshard --dtype listed the integer dtypes as valid, then refused int32 without naming --dtype.
for dtype in int8 int32 e8m0; do
  refuses "reshard_dtype_$dtype" "--dtype: '$dtype' is not an export dtype (valid: keep, fp32," \
    "$shardwise" reshard --checkpoint "$work/ckpt" --tp 1 --out "$work/never_$dtype" --dtype "$dtype"
done
# reshard --dtype fp16 wrote finite weights above 65504 as inf, with exit 0.
"$python" - "$work/big.safetensors" <<'PY'
import json, struct, sys
data = struct.pack("<4f", 1.0, 7e4, -2.0, 3.0)
head = json.dumps({"layers.0.mlp.fc1.weight": {"dtype": "F32", "shape": [2, 2],
                                               "data_offsets": [0, len(data)]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(head)) + head + data)
PY
refuses reshard_fp16_overflow "param layers.0.mlp.fc1.weight: element 1 (70000) does not fit fp16" \
  "$shardwise" reshard --checkpoint "$work/big.safetensors" --tp 1 --out "$work/never_fp16" --dtype fp16
[[ ! -e "$work/never_fp16" ]] || fail "reshard --dtype fp16 left an export with inf"
# generate read "position" as rope-or-else-learned and ignored "arch" and tensors its model lacks:
# a learned-position checkpoint edited to rope left its position table unused without a word.
edit_generate_manifest() {  # name, python statement on m["config"]["model"], expected text
  cp -r "$work/ckpt" "$work/ckpt_$1"
  "$python" -c 'import json, sys; p = sys.argv[1]; m = json.load(open(p)); model = m["config"]["model"]
exec(sys.argv[2]); json.dump(m, open(p, "w"))' "$work/ckpt_$1/$step/checkpoint.json" "$2"
  refuses "generate_manifest_$1" "$3" \
    "$shardwise" generate --checkpoint "$work/ckpt_$1" --prompt 1 --tokens 4
}
edit_generate_manifest rope 'model["position"] = "rope"' \
  "has tensor 'embedding.position_embeddings.weight', which the model its manifest's config"
edit_generate_manifest position 'model["position"] = "banana"' \
  "config.model.position is 'banana' (valid: learned, rope)"
edit_generate_manifest arch 'model["arch"] = 5' "config.model.arch is missing or of the wrong type"
edit_generate_manifest llama 'model["arch"] = "llama"' "config.model.arch is 'llama' (valid: gpt)"
# reshard exported a checkpoint whose manifest train --load and generate refuse.
cp -r "$work/ckpt" "$work/ckpt_v2"
"$python" -c 'import json, sys; p = sys.argv[1]; m = json.load(open(p)); m["format_version"] = 2
json.dump(m, open(p, "w"))' "$work/ckpt_v2/$step/checkpoint.json"
refuses reshard_manifest_version "has format_version 2; this build reads version 1" \
  "$shardwise" reshard --checkpoint "$work/ckpt_v2" --tp 1 --out "$work/never_v2"
[[ ! -e "$work/never_v2" ]] || fail "reshard exported a checkpoint of format_version 2"
# Resuming in place, or saying --overwrite, is what the refusals point to.
cp -r "$work/ckpt" "$work/ckpt_resume"
expect_rc 0 resume_in_place "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=3 \
  --load "$work/ckpt_resume" --save "$work/ckpt_resume" --log-jsonl "$work/ckpt_resume/m.jsonl" || true
expect_rc 0 save_overwrite "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=1 \
  --save "$work/ckpt_resume" --overwrite || true

# Resuming from an older step of --save DIR with newer ones there: `latest` and --keep-last go by
# step number, so --keep-last 1 kept the abandoned run's newer step and pruned the one resumed
# from. Refused (the checkpoint root unchanged) unless --overwrite.
expect_rc 0 make_steps_1_to_3 "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" \
  training.steps=3 --save "$work/ckpt_older" --save-interval 1 || true
before=$(cd "$work/ckpt_older" && find . -type f -exec md5sum {} + | sort)
refuses resume_older_step "holds 2 steps, 2..3 after 'step-0000001', the checkpoint this run" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" training.steps=2 \
  --load "$work/ckpt_older" --load-step 1 --save "$work/ckpt_older" --keep-last 1
[[ "$(cd "$work/ckpt_older" && find . -type f -exec md5sum {} + | sort)" == "$before" ]] ||
  fail "resume_older_step changed the checkpoint root"

# A resume that fails (another model shape) creates nothing: not the --save directories it
# needed, not their lock file.
refuses failed_resume_leaves_nothing "has shape" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" model.hidden=32 training.steps=3 \
  --load "$work/ckpt" --save "$work/new_root/sub"
[[ ! -e "$work/new_root" ]] || fail "failed_resume_leaves_nothing left $(find "$work/new_root")"
mkdir "$work/existing_root"
refuses failed_resume_keeps_an_existing_root "has shape" \
  "$shardwise" train --config "$work/c.yaml" "${tiny[@]}" model.hidden=32 training.steps=3 \
  --load "$work/ckpt" --save "$work/existing_root"
[[ -d "$work/existing_root" && -z "$(ls -A "$work/existing_root")" ]] ||
  fail "failed_resume_keeps_an_existing_root: $(ls -A "$work/existing_root" 2>&1)"

# reshard --overwrite replaced any directory: a training checkpoint root given as --out was
# removed whole. It replaces an earlier reshard output only; --scale-rule without --mxfp8 is refused.
cp -r "$work/ckpt" "$work/ckpt_copy_root"
refuses reshard_overwrite_checkpoint_root "which reshard does not write" \
  "$shardwise" reshard --checkpoint "$work/ckpt" --tp 1 --out "$work/ckpt_copy_root" --overwrite
[[ -f "$work/ckpt_copy_root/latest" ]] || fail "reshard --overwrite removed a checkpoint root"
expect_rc 0 reshard_twice_1 "$shardwise" reshard --checkpoint "$work/ckpt" --tp 2 --out "$work/rs"
expect_rc 0 reshard_twice_2 "$shardwise" reshard --checkpoint "$work/ckpt" --tp 1 --out "$work/rs" \
  --overwrite && [[ -f "$work/rs/tp-rank-00-of-01.safetensors" && ! -e "$work/rs/tp-rank-01-of-02.safetensors" ]] ||
  fail "reshard --overwrite of an earlier reshard output: $(ls "$work/rs")"
refuses reshard_scale_rule_without_mxfp8 "applies to --mxfp8 exports only" \
  "$shardwise" reshard --checkpoint "$work/ckpt" --tp 1 --out "$work/rs_floor" --scale-rule floor

# Standard output on a full disk: exit 0 with the output cut short before (the file outputs
# already reported it).
if [[ -w /dev/full ]]; then
  for args in "version" "model-spec --arch llama3-8b" "config resolve --config $work/c.yaml" \
    "layout --model $work/spec.json --dp 2"; do
    rc=0
    # shellcheck disable=SC2086 # the words of $args are the command's arguments
    timeout 20 "$shardwise" $args >/dev/full 2>"$work/err" || rc=$?
    if [[ $rc -eq 2 ]] && grep -q "cannot write standard output" "$work/err"; then
      echo "ok: $args > /dev/full -> $(cat "$work/err")"
    else
      fail "$args > /dev/full: exit $rc, $(head -c 300 "$work/err")"
    fi
  done
fi

# A data file too large to hold in memory (here: under a 2 GiB address-space limit) is named,
# not reported as "std::bad_alloc".
truncate -s 8G "$work/huge.txt"
refuses data_file_beyond_memory "huge.txt' (8589934592 bytes) does not fit in memory" \
  bash -c 'ulimit -v 2097152 && exec "$@"' _ "$shardwise" train --config "$work/c.yaml" \
  "${tiny[@]}" model.vocab=256 training.steps=2 data.source=text data.path="$work/huge.txt"
rm -f "$work/huge.txt"

cli_test_finish "all file fault cases passed"
