#!/usr/bin/env bash
# CLI test for `shardwise refit` (under mpirun) and `shardwise reshard` (offline TP export).
# Usage: refit_cli_test.sh PATH/TO/shardwise REPO_ROOT [MPIEXEC]
# Checks exit codes, the bit-exact verification line, the JSON measurements, the TP forward of the
# refitted and of `reshard --tp 2` weights against the training model, and (with an
# independent numpy reader) the per-TP-rank safetensors files: slices per Megatron rule, stride-3
# QKV, MXFP8 data + scales that decode back to the slice.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: refit_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
root=${2:?usage: refit_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
mpiexec=${3:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
cli_test_init refit_cli

# --- refit after a short training run: 4 training ranks, TP=2 inference on ranks 4-5 -----------
if expect_rc 0 refit6 "$mpiexec" -np 6 --oversubscribe "$shardwise" refit \
    --config "$root/examples/refit.yaml" training.steps=5 --repeat 2 --json "$work/refit.json"; then
  grep -q "verified [0-9]* tensors, all bit-exact" "$work/refit6.out" ||
    fail "refit6: no verification line"
  "$python" - "$work/refit.json" "$work/refit6.out" <<'PY' || fail "refit6: measurements"
import json, re, sys
doc = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
assert doc["world_size"] == 6 and doc["training_ranks"] == 4 and doc["tp"] == 2, doc
modes = {m["mode"]: m for m in doc["modes"]}
assert set(modes) == {"bf16", "mxfp8-receiver", "mxfp8-send"}, modes.keys()
# Every param once per inference rank, per refit, per mode.
n = int(re.search(r"verified (\d+) tensors", out).group(1))
assert n == doc["params"] * 2 * 2 * 3 == doc["verified_tensors"], (n, doc["params"])
bf16 = modes["bf16"]
# TP slices of every param plus the replicated ones on both ranks: 2 bytes per delivered element.
assert bf16["wire_bytes"] == 2 * bf16["elements_delivered"], bf16
assert modes["mxfp8-receiver"]["wire_bytes"] == bf16["wire_bytes"]
send = modes["mxfp8-send"]["wire_bytes"]
assert 0.5 * bf16["wire_bytes"] < send < 0.75 * bf16["wire_bytes"], (send, bf16["wire_bytes"])
for m in doc["modes"]:
    assert len(m["seconds"]) == 2 and m["median_seconds"] > 0 and m["gigabytes_per_second"] > 0, m
for mode in modes:
    assert re.search(r"^%s\s+\d+" % re.escape(mode), out, re.M), mode
# The TP=2 forward of the refitted weights against the training model's forward: within the
# derived bounds in every mode; bf16 within bf16 rounding (relative 2^-8), MXFP8 further off.
for m in doc["modes"]:
    f = m["tp_forward"]
    assert f["within_bounds"] and f["worst_logit_error_over_bound"] <= 1, (m["mode"], f)
    assert abs(f["loss_difference"]) <= f["loss_bound"], (m["mode"], f)
    assert 0 < f["max_abs_logit_error"] and f["max_rel_logit_error"] < 0.05, (m["mode"], f)
    assert re.search(r"^tp forward %s .* within bounds$" % re.escape(m["mode"]), out, re.M), m
fb = modes["bf16"]["tp_forward"]
assert fb["max_rel_logit_error"] < 2 ** -8 and abs(fb["loss_difference"]) < 2 ** -8 * fb["loss"], fb
assert modes["mxfp8-send"]["tp_forward"]["max_abs_logit_error"] > fb["max_abs_logit_error"]
PY
fi

# --- `reshard --tp 2 --mxfp8` output through the same TP inference path ------------------------
if expect_rc 0 export_train "$shardwise" train --config "$root/examples/refit.yaml" training.steps=3 \
    logging.progress=false --save "$work/trained" &&
  expect_rc 0 export_reshard "$shardwise" reshard --checkpoint "$work/trained" --tp 2 --mxfp8 \
    --out "$work/export" &&
  expect_rc 0 export_forward "$mpiexec" -np 3 --oversubscribe "$shardwise" refit \
    --config "$root/examples/refit.yaml" --checkpoint "$work/trained/step-0000003" \
    --tp-export "$work/export" --mxfp8 none --repeat 1 --json "$work/export.json"; then
  "$python" - "$work/export.json" <<'PY' || fail "export_forward: JSON"
import json, sys
f = json.load(open(sys.argv[1]))["tp_export_forward"]
assert f["within_bounds"] and 0 < f["max_abs_logit_error"] and f["max_rel_logit_error"] < 0.05, f
PY
  grep -q "^tp forward export .* within bounds$" "$work/export_forward.out" ||
    fail "export_forward: no TP forward line"
fi
# The same export with its tensor tables in side files (what reshard writes when a table would
# pass the 100 MB header limit, i.e. above ~500k tensors): refit reads them from there, with the
# same TP forward result. --checkpoint names the --save root here (its latest step, as generate
# and reshard take it; refit said "has no model.safetensors").
if [[ -f "$work/export.json" ]]; then
  cp -r "$work/export" "$work/export_side"
  "$python" - "$work/export_side" <<'PY' || fail "export_side: rewriting the export"
import json, os, struct, sys
d = sys.argv[1]
for name in sorted(os.listdir(d)):
    path = os.path.join(d, name)
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header["__metadata__"]
    side = name.replace(".safetensors", ".tensors.json")
    open(os.path.join(d, side), "w").write(meta.pop("tensors"))
    meta["tensors_file"] = side
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
PY
  if expect_rc 0 export_side "$mpiexec" -np 3 --oversubscribe "$shardwise" refit \
      --config "$root/examples/refit.yaml" --checkpoint "$work/trained" \
      --tp-export "$work/export_side" --mxfp8 none --repeat 1 --json "$work/export_side.json"; then
    "$python" - "$work/export.json" "$work/export_side.json" <<'PY' || fail "export_side: differs"
import json, sys
a, b = (json.load(open(p))["tp_export_forward"] for p in sys.argv[1:])
assert a == b, (a, b)
PY
  fi
fi
# An export cut from another run's checkpoint (another seed): the forward bounds grow with the
# weight difference and used to pass it; the weights must be the checkpoint's, rounded.
if [[ -f "$work/export.json" ]] &&
  expect_rc 0 other_train "$shardwise" train --config "$root/examples/refit.yaml" training.steps=3 \
    model.seed=99 logging.progress=false --save "$work/other" &&
  expect_rc 0 other_reshard "$shardwise" reshard --checkpoint "$work/other" --tp 2 \
    --out "$work/export_other" &&
  expect_rc 2 export_other "$mpiexec" -np 3 --oversubscribe "$shardwise" refit \
    --config "$root/examples/refit.yaml" --checkpoint "$work/trained" \
    --tp-export "$work/export_other" --mxfp8 none --repeat 1; then
  grep -q "^.*--tp-export .*is not the checkpoint's weights rounded to bf16" \
    "$work/export_other.err" || fail "export_other: $(head -c 400 "$work/export_other.err")"
fi
# An optimizer rank file given as the weights: its state tensors were refit as weights.
if [[ -d "$work/trained" ]] && expect_rc 2 refit_optimizer_file "$mpiexec" -np 3 --oversubscribe \
  "$shardwise" refit --checkpoint \
  "$work/trained/step-0000003/optimizer-rank-00000-of-00001.safetensors" --repeat 1; then
  grep -q "is an optimizer rank file of a checkpoint" "$work/refit_optimizer_file.err" ||
    fail "refit_optimizer_file: $(head -c 400 "$work/refit_optimizer_file.err")"
fi
expect_exit2 "tp-export without checkpoint" refit --config "$root/examples/refit.yaml" \
  --tp-export "$work/export"

# --- too few ranks: exit 2 with a message -----------------------------------------------------
if expect_rc 2 refit2 "$mpiexec" -np 2 --oversubscribe "$shardwise" refit \
    --config "$root/examples/refit.yaml" training.steps=5; then
  grep -q "needs at least 3 ranks" "$work/refit2.err" || fail "refit2: no rank-count message"
fi
# A --tp the model cannot take (8 heads, tp 3) is refused before training, not after it: a run of
# 100000 steps would take far past the 60 s limit.
if expect_rc 2 refit_tp3 timeout 60 "$mpiexec" -np 4 --oversubscribe "$shardwise" refit \
    --config "$root/examples/refit.yaml" --tp 3 training.steps=100000; then
  grep -q "divisible by --tp (3)" "$work/refit_tp3.err" ||
    fail "refit_tp3: $(tail -3 "$work/refit_tp3.err")"
fi
expect_rc 2 refit_bad_mode "$shardwise" refit --config "$root/examples/refit.yaml" --mxfp8 maybe ||
  true
expect_rc 2 refit_bad_key "$shardwise" refit --config "$root/examples/refit.yaml" model.nope=1 ||
  true
# Overrides edit --config: with --checkpoint alone they were dropped in silence (exit 0).
expect_exit2 "overrides without --config" refit --checkpoint "$work/anything" model.layers=3
grep -q "needs --config" "$work/err" || fail "overrides without --config: $(cat "$work/err")"

# --- a small checkpoint written by an independent writer --------------------------------------
mkdir -p "$work/ckpt" "$work/odd"
"$python" - "$work/ckpt/model.safetensors" "$work/odd/model.safetensors" <<'PY'
import sys
import numpy as np
import safetensors_container as container

def write(path, tensors):
    container.write(path, {name: ("F32", a.shape, a.astype("<f4").tobytes())
                           for name, a in tensors.items()})

rng = np.random.default_rng(3)
def t(*shape):
    # Magnitudes vary per block of 32 so MXFP8 scales differ.
    a = rng.uniform(-1, 1, size=shape).astype(np.float32)
    flat = a.reshape(-1)
    flat *= np.exp2((np.arange(flat.size) // 32) % 7 - 3).astype(np.float32)
    return a

write(sys.argv[1], {
    "embedding.word_embeddings.weight": t(64, 64),
    "layers.0.input_layernorm.weight": t(64),
    "layers.0.attention.qkv.weight": t(192, 64),
    "layers.0.attention.qkv.bias": t(192),
    "layers.0.attention.proj.weight": t(64, 64),
    "layers.0.attention.proj.bias": t(64),
    "layers.0.mlp.fc1.weight": t(128, 64),
    "layers.0.mlp.fc2.weight": t(64, 128),
    "layers.0.mlp.fc2.bias": t(64),
})
write(sys.argv[2], {"layers.0.input_layernorm.weight": t(64), "layers.0.mlp.fc1.weight": t(6, 64)})
PY

# Independent check of an export: numpy slicing by the Megatron rules, MXFP8 decoded by hand.
check_export() {
  "$python" - "$work/ckpt/model.safetensors" "$1" "$2" "$3" <<'PY'
import json, sys
import numpy as np
import safetensors_container as container

def read(path):
    tensors, meta = container.read(path)
    dtypes = {"F32": "<f4", "F8_E4M3": "u1", "F8_E8M0": "u1", "BF16": "<u2"}
    return meta, {name: (dtype, np.frombuffer(raw, dtype=dtypes[dtype]).reshape(shape))
                  for name, (dtype, shape, raw) in tensors.items()}

def e4m3(byte):
    s = np.where(byte & 0x80, -1.0, 1.0)
    e = (byte >> 3) & 0xF
    m = (byte & 7).astype(np.float64)
    return s * np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e.astype(np.float64) - 7))

def expected_slice(name, a, tp, r):
    if name.endswith("qkv.weight") or name.endswith("qkv.bias"):
        parts = np.split(a, 3, axis=0)
        return np.concatenate([np.split(p, tp, axis=0)[r] for p in parts], axis=0)
    if name.endswith(("fc1.weight", "fc1.bias", "word_embeddings.weight")):
        return np.split(a, tp, axis=0)[r]
    if name.endswith(("proj.weight", "fc2.weight")):
        return np.split(a, tp, axis=1)[r]
    return a

_, full = read(sys.argv[1])
out_dir, tp, mxfp8 = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
for r in range(tp):
    meta, got = read(f"{out_dir}/tp-rank-{r:02d}-of-{tp:02d}.safetensors")
    assert meta["tp_size"] == str(tp) and meta["tp_rank"] == str(r), meta
    rules = json.loads(meta["tensors"])
    assert set(rules) == set(full), rules.keys()
    for name, (_, a) in full.items():
        want = expected_slice(name, a, tp, r)
        quantized = mxfp8 and a.ndim == 2 and "embedding" not in name
        dtype, g = got[name]
        assert rules[name]["format"] == ("mxfp8" if quantized else "plain"), name
        if not quantized:
            assert dtype == "F32" and np.array_equal(g, want), name
            assert name + "_scale" not in got
            continue
        sdtype, s = got[name + "_scale"]
        assert dtype == "F8_E4M3" and sdtype == "F8_E8M0", (dtype, sdtype)
        assert g.shape == want.shape and s.shape == (want.shape[0], want.shape[1] // 32), s.shape
        scale = np.repeat(2.0 ** (s.astype(np.float64) - 127), 32, axis=1)
        decoded = e4m3(g) * scale
        # E4M3 keeps 3 mantissa bits: error <= 2^-4 relative, or half a subnormal step.
        err = np.abs(decoded - want)
        assert np.all(err <= np.abs(want) * 2.0 ** -4 + scale * 2.0 ** -10), (name, err.max())
        # Ceil rule: no block saturates, and the scale is the smallest power of two that fits.
        amax = np.abs(want).reshape(want.shape[0], -1, 32).max(axis=2)
        assert np.all(amax <= 448 * 2.0 ** (s.astype(np.float64) - 127)), name
        assert np.all(amax > 448 * 2.0 ** (s.astype(np.float64) - 128)), name
PY
}

for tp in 1 2 4; do
  if expect_rc 0 "reshard_tp$tp" "$shardwise" reshard --checkpoint "$work/ckpt" --tp "$tp" \
      --out "$work/out_tp$tp"; then
    check_export "$work/out_tp$tp" "$tp" 0 || fail "reshard tp=$tp: content"
  fi
done
if expect_rc 0 reshard_mxfp8 "$shardwise" reshard --checkpoint "$work/ckpt/model.safetensors" \
    --tp 2 --mxfp8 --out "$work/out_mx"; then
  check_export "$work/out_mx" 2 1 || fail "reshard --mxfp8: content"
  [[ $(ls "$work/out_mx" | wc -l) -eq 2 ]] || fail "reshard --mxfp8: expected 2 files"
fi

# --- errors: exit 2, one line naming the problem, nothing left behind ---------------------------
if expect_rc 2 reshard_missing "$shardwise" reshard --checkpoint "$work/nope" --tp 2 \
    --out "$work/x"; then
  grep -q "nope" "$work/reshard_missing.err" || fail "missing checkpoint not named"
fi
mkdir -p "$work/empty"
if expect_rc 2 reshard_empty "$shardwise" reshard --checkpoint "$work/empty" --tp 2 \
    --out "$work/x"; then
  grep -q "holds no published checkpoint" "$work/reshard_empty.err" || fail "empty dir message"
fi
if expect_rc 2 reshard_odd "$shardwise" reshard --checkpoint "$work/odd" --tp 4 --out "$work/x"; then
  grep -q "layers.0.mlp.fc1.weight" "$work/reshard_odd.err" || fail "indivisible param not named"
fi
if expect_rc 2 reshard_exists "$shardwise" reshard --checkpoint "$work/ckpt" --tp 2 \
    --out "$work/out_tp2"; then
  grep -q "already exists" "$work/reshard_exists.err" || fail "existing --out message"
fi
expect_rc 0 reshard_overwrite "$shardwise" reshard --checkpoint "$work/ckpt" --tp 2 \
    --out "$work/out_tp2" --overwrite || true
[[ ! -e "$work/x" ]] || fail "a failed reshard left $work/x"
leftovers=$(find "$work" -maxdepth 1 -name '.*' | wc -l)
[[ $leftovers -eq 0 ]] || fail "temp directories left behind: $(ls -a "$work")"

# --- refit from the checkpoint: 1 training rank, TP=2 inference ------------------------------
if expect_rc 0 refit_ckpt "$mpiexec" -np 3 --oversubscribe "$shardwise" refit \
    --checkpoint "$work/ckpt" --repeat 2 --mxfp8 send; then
  grep -q "verified 36 tensors, all bit-exact" "$work/refit_ckpt.out" ||
    fail "refit from checkpoint: $(tail -1 "$work/refit_ckpt.out")"
fi

# --- refit --checkpoint where the same path holds another run's weights on one training rank
# (storage each node has its own copy of): exit 2 naming the rank, not a mix delivered and a
# "mismatch on rank N" (exit 1). Two training ranks, in two directories.
mkdir -p "$work/node2"
if [[ -d "$work/trained" ]] &&
  expect_rc 0 train_other_node "$shardwise" train --config "$root/examples/refit.yaml" \
    training.steps=3 model.seed=7 logging.progress=false --save "$work/node2/trained" &&
  expect_rc 2 refit_mixed "$mpiexec" --oversubscribe -np 1 -wdir "$work" "$shardwise" refit \
    --checkpoint trained : -np 1 -wdir "$work/node2" "$shardwise" refit --checkpoint trained : \
    -np 2 -wdir "$work" "$shardwise" refit --checkpoint trained; then
  grep -q "is not the same on every rank: rank(s) 1 " "$work/refit_mixed.err" ||
    fail "refit_mixed: the error does not name rank 1"
fi

# Rank 0's --json is the file rank 1 reads as --config (an MPMD launch): it was written over it.
cp "$root/examples/refit.yaml" "$work/other.yaml"
if expect_rc 2 refit_json_is_other_config "$mpiexec" --oversubscribe -np 1 "$shardwise" refit \
    --config "$root/examples/refit.yaml" --json "$work/other.yaml" training.steps=2 : -np 2 \
    "$shardwise" refit --config "$work/other.yaml" training.steps=2; then
  grep -q "rank 0's --json '$work/other.yaml' is the file rank 1 reads as --config" \
    "$work/refit_json_is_other_config.err" || fail "refit_json_is_other_config: no such message"
fi
cmp -s "$root/examples/refit.yaml" "$work/other.yaml" || fail "rank 1's config was written over"

cli_test_finish "refit CLI tests passed"
