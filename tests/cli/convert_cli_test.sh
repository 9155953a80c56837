#!/usr/bin/env bash
# CLI test for `shardwise convert`: writes a small checkpoint with numpy, converts it to MXFP8 and
# back, and checks the files with an independent numpy reader (header, dtypes, shapes, metadata,
# values within the MXFP8 error bound), plus exit code 2 and one error line for bad inputs,
# generated hostile files (nested JSON, control characters, NUL/BOM, over-long names, empty
# tensors with 2^62 dimensions through convert and reshard) and the output preflight.
# Usage: convert_cli_test.sh PATH/TO/shardwise
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: convert_cli_test.sh SHARDWISE_BINARY}
cli_test_init convert_test

if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: $python has no numpy"
  exit 0
fi

# Shared numpy helpers: a safetensors reader/writer and the E4M3 / E8M0 decoders.
cat >"$work/st.py" <<'PY'
import numpy as np
import safetensors_container as container

NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F8_E4M3": np.uint8,
      "F8_E8M0": np.uint8, "U8": np.uint8, "I64": np.int64, "I32": np.int32}

def write(path, tensors, metadata=None):
    """tensors: name -> (safetensors dtype, numpy array)."""
    container.write(path, {name: (dtype, array.shape, np.ascontiguousarray(array).tobytes())
                           for name, (dtype, array) in tensors.items()}, metadata)

def read(path):
    """-> ({name: (safetensors dtype, numpy array)}, metadata)."""
    tensors, meta = container.read(path)
    return {name: (dtype, np.frombuffer(raw, dtype=NP[dtype]).reshape(shape))
            for name, (dtype, shape, raw) in tensors.items()}, meta

def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)

def f32_to_bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            t[code] = np.nan
        elif e == 0:
            t[code] = sign * m * 2.0 ** -9
        else:
            t[code] = sign * (1 + m / 8) * 2.0 ** (e - 7)
    return t

def as_float(dtype, arr):
    return bf16_to_f32(arr) if dtype == "BF16" else arr.astype(np.float32)

def decode(data, scale_2d):
    """MXFP8 -> float32 for a row-major [rows, blocks] scale matrix."""
    cols = data.shape[1]
    scale = np.ldexp(np.float32(1), scale_2d.astype(np.int32) - 127).astype(np.float32)
    per_elem = np.repeat(scale, 32, axis=1)[:, :cols]
    return e4m3_table()[data] * per_elem, per_elem
PY

# 1. Input: three linear weights (bf16, f32 with a partial last block, f16), an embedding, a norm,
#    a bias, an integer tensor and some metadata.
"$python" - "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st
rng = np.random.default_rng(0)
def mag(rows, cols):
    return (rng.standard_normal((rows, cols)) * np.ldexp(1.0, (np.arange(rows) % 30 - 20))[:, None]).astype(np.float32)
st.write(sys.argv[1] + "/in.safetensors", {
    "model.layers.0.self_attn.q_proj.weight": ("BF16", st.f32_to_bf16(mag(64, 128))),
    "model.layers.0.mlp.up_proj.weight": ("F32", mag(48, 80)),
    "model.layers.0.mlp.down_proj.weight": ("F16", (mag(40, 64) / 2 ** 10 + 1e-3).astype(np.float16)),
    "model.embed_tokens.weight": ("BF16", st.f32_to_bf16(mag(100, 64))),
    "model.layers.0.input_layernorm.weight": ("F32", np.ones(64, np.float32)),
    "model.layers.0.mlp.up_proj.bias": ("F32", np.arange(80, dtype=np.float32)),
    "model.step": ("I64", np.array([1234], np.int64)),
}, {"format": "pt", "origin": "convert_cli_test"})
PY

# 2. To MXFP8 with the defaults.
if "$shardwise" convert --to mxfp8 "$work/in.safetensors" "$work/mx.safetensors" >"$work/out" 2>"$work/err"; then
  grep -q "converted 3 tensors, copied 4" "$work/out" && echo "ok: to mxfp8: $(cat "$work/out")" ||
    fail "unexpected summary: $(cat "$work/out")"
else
  fail "convert --to mxfp8: $(cat "$work/err")"
fi
"$python" - "$work" <<'PY' && echo "ok: numpy reads the MXFP8 file" || fail "MXFP8 file check"
import sys, json
sys.path.insert(0, sys.argv[1])
import numpy as np, st
src, _ = st.read(sys.argv[1] + "/in.safetensors")
out, meta = st.read(sys.argv[1] + "/mx.safetensors")
converted = ["model.layers.0.mlp.up_proj.weight", "model.layers.0.self_attn.q_proj.weight",
             "model.layers.0.mlp.down_proj.weight"]
assert meta["format"] == "pt" and meta["origin"] == "convert_cli_test", meta
assert meta["shardwise.mxfp8.block_size"] == "32", meta
assert meta["shardwise.mxfp8.scale_rule"] == "ceil", meta
assert meta["shardwise.mxfp8.scale_layout"] == "2d", meta
assert sorted(meta["shardwise.mxfp8.tensors"].split(",")) == sorted(converted), meta
assert len(out) == len(src) + 3, sorted(out)
for name, (dtype, arr) in src.items():
    if name not in converted:
        assert out[name][0] == dtype and np.array_equal(out[name][1], arr), name
        assert name + "_scale" not in out, name
        continue
    info = json.loads(meta["shardwise.mxfp8.tensor." + name])
    assert info["dtype"] == dtype and info["shape"] == list(arr.shape), info
    rows, cols = arr.shape
    assert info["last_block_size"] == (cols % 32 or 32), info
    ddt, data = out[name]
    sdt, scale = out[name + "_scale"]
    assert ddt == "F8_E4M3" and data.shape == (rows, cols), (name, ddt, data.shape)
    assert sdt == "F8_E8M0" and scale.shape == (rows, (cols + 31) // 32), (name, sdt, scale.shape)
    x = st.as_float(dtype, arr)
    y, s = st.decode(data, scale)
    bound = np.abs(x) * 2.0 ** -4 + s * 2.0 ** -10
    err = np.abs(y - x)
    assert np.all(err <= bound), (name, float((err - bound).max()))
    # Ceil rule: the block max fits in E4M3 without saturating.
    if cols % 32 == 0:
        blocks = np.abs(x).reshape(rows, cols // 32, 32).max(axis=2)
        assert np.all(blocks <= 448 * s[:, ::32]), name
PY

# 3. Back to bf16: original names, dtypes BF16, shapes, values = MXFP8 decode rounded to bf16.
if "$shardwise" convert --to bf16 "$work/mx.safetensors" "$work/back.safetensors" >"$work/out" 2>"$work/err"; then
  grep -q "restored 3 tensors, copied 4" "$work/out" && echo "ok: to bf16: $(cat "$work/out")" ||
    fail "unexpected summary: $(cat "$work/out")"
else
  fail "convert --to bf16: $(cat "$work/err")"
fi
"$python" - "$work" <<'PY' && echo "ok: numpy reads the restored file" || fail "restored file check"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st
src, _ = st.read(sys.argv[1] + "/in.safetensors")
mx, mx_meta = st.read(sys.argv[1] + "/mx.safetensors")
back, meta = st.read(sys.argv[1] + "/back.safetensors")
assert meta == {"format": "pt", "origin": "convert_cli_test"}, meta
assert sorted(back) == sorted(src), sorted(back)
converted = mx_meta["shardwise.mxfp8.tensors"].split(",")
for name, (dtype, arr) in src.items():
    bdt, b = back[name]
    assert b.shape == arr.shape, name
    if name not in converted:
        assert bdt == dtype and np.array_equal(b, arr), name
        continue
    assert bdt == "BF16", (name, bdt)
    y, _ = st.decode(mx[name][1], mx[name + "_scale"][1])
    assert np.array_equal(b, st.f32_to_bf16(y)), name
PY

# 3b. More --threads than the address space under `ulimit -v` holds stacks for: exit 2 naming
# --threads (libgomp's "Thread creation failed" ended it with exit 1), before any output.
rc=0
(ulimit -v 3000000 && exec "$shardwise" convert --to mxfp8 --threads 4096 "$work/in.safetensors" \
  "$work/threads.safetensors") >"$work/out" 2>"$work/err" || rc=$?
[[ $rc == 2 ]] && grep -q -- "--threads 4096: the threads' stacks .* give at most [0-9]* threads" \
  "$work/err" && [[ ! -e "$work/threads.safetensors" ]] && echo "ok: --threads beyond ulimit -v" ||
  fail "--threads 4096 under ulimit -v: rc $rc, $(cat "$work/err")"

# 4. Floor rule, swizzled scales, explicit filters.
if "$shardwise" convert --to mxfp8 "$work/in.safetensors" "$work/swz.safetensors" --scale-rule floor \
  --scale-layout swizzled --include 'proj\.weight$' --include embed --exclude down_proj >"$work/out" 2>"$work/err"; then
  "$python" - "$work" <<'PY' && echo "ok: floor + swizzled + filters" || fail "floor/swizzled check"
import sys
sys.path.insert(0, sys.argv[1])
import st
out, meta = st.read(sys.argv[1] + "/swz.safetensors")
assert meta["shardwise.mxfp8.scale_rule"] == "floor" and meta["shardwise.mxfp8.scale_layout"] == "swizzled"
assert sorted(meta["shardwise.mxfp8.tensors"].split(",")) == [
    "model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.self_attn.q_proj.weight"], meta
# [100, 64] -> 2 blocks per row -> scales padded to 128 x 4 tiles.
assert out["model.embed_tokens.weight_scale"][1].shape == (128, 4)
assert out["model.layers.0.mlp.down_proj.weight"][0] == "F16"
PY
else
  fail "floor/swizzled convert: $(cat "$work/err")"
fi
"$shardwise" convert --to bf16 "$work/swz.safetensors" "$work/swz_back.safetensors" >/dev/null &&
  echo "ok: swizzled back to bf16" || fail "swizzled back to bf16"

"$shardwise" convert --to mxfp8 "$work/in.safetensors" "$work/bias.safetensors" --include bias >"$work/out" &&
  grep -q "skipped 1 not 2-D" "$work/out" && echo "ok: non-2-D selection reported" ||
  fail "non-2-D selection: $(cat "$work/out")"

"$shardwise" convert --help >"$work/help" 2>&1 || true
grep -q "lm_head" "$work/help" && echo "ok: --help documents the default patterns" ||
  fail "--help does not document the default patterns"

# 5. Bad inputs: exit 2 and one line on stderr; no output file left behind.
printf 'not a safetensors file' >"$work/garbage.safetensors"
cp "$work/in.safetensors" "$work/in_copy.safetensors"
expect_exit2 "missing file" convert --to mxfp8 "$work/nope.safetensors" "$work/x.safetensors"
expect_exit2 "malformed file" convert --to mxfp8 "$work/garbage.safetensors" "$work/x.safetensors"
expect_exit2 "bad regex" convert --to mxfp8 "$work/in.safetensors" "$work/x.safetensors" --include 'fc('
expect_exit2 "unknown --to" convert --to fp4 "$work/in.safetensors" "$work/x.safetensors"
expect_exit2 "bad scale rule" convert --to mxfp8 "$work/in.safetensors" "$work/x.safetensors" --scale-rule round
expect_exit2 "bad scale layout" convert --to mxfp8 "$work/in.safetensors" "$work/x.safetensors" --scale-layout 3d
expect_exit2 "output is input" convert --to mxfp8 "$work/in_copy.safetensors" "$work/in_copy.safetensors"
expect_exit2 "already MXFP8" convert --to mxfp8 "$work/mx.safetensors" "$work/x.safetensors"
# A stale key of the conversion's own namespace was copied through, into a file that --to bf16
# then called damaged.
"$python" - "$work/stale_key.safetensors" <<'PY'
import json, struct, sys
data = struct.pack("<4f", 1, 2, 3, 4)
head = json.dumps({"__metadata__": {"shardwise.mxfp8.tensor.zzz": "{}"},
                   "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(head)) + head + data)
PY
expect_exit2 "stale MXFP8 metadata key" convert --to mxfp8 "$work/stale_key.safetensors" "$work/x.safetensors"
grep -q "shardwise.mxfp8.tensor.zzz" "$work/err" || fail "stale MXFP8 key: $(cat "$work/err")"
expect_exit2 "bf16 of a plain file" convert --to bf16 "$work/in.safetensors" "$work/x.safetensors"
# The file records each tensor's scale rule and layout: these flags were accepted and ignored.
expect_exit2 "bf16 with a scale rule" convert --to bf16 "$work/mx.safetensors" "$work/x.safetensors" --scale-rule floor
expect_exit2 "bf16 with a scale layout" convert --to bf16 "$work/mx.safetensors" "$work/x.safetensors" --scale-layout swizzled
# Option-parsing errors come from CLI11 (usage hint on a second line): exit code only.
rc=0
"$shardwise" convert --to mxfp8 "$work/in.safetensors" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] && echo "ok: missing output argument -> exit 2" ||
  fail "missing output argument: expected exit 2, got $rc"
[[ -e "$work/x.safetensors" ]] && fail "a failed conversion left $work/x.safetensors"
cmp -s "$work/in.safetensors" "$work/in_copy.safetensors" || fail "output-is-input modified the input"

# 6. Hostile files (generated here): each crashed, hung or was accepted before the hardening.
"$python" - "$work" <<'PY'
import json, struct, sys
work = sys.argv[1]
def raw(path, header_bytes, data=b""):
    with open(work + "/" + path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + data)
def header(obj):
    text = json.dumps(obj, separators=(",", ":")).encode()
    return text + b" " * (-len(text) % 8)
one = {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}
# 100k nested arrays in __metadata__ (the error path printed them recursively: SIGSEGV).
raw("nested.safetensors", b'{"__metadata__":{"k":' + b"[" * 100000 + b"]" * 100000 + b"}}", b"")
# A name with a newline and an ANSI clear-screen sequence, and an unknown dtype.
raw("ansi.safetensors", header({"evil\n\x1b[2J\x1b[Hname": {"dtype": "XX", "shape": [1],
                                                          "data_offsets": [0, 1]}}), b"\0")
raw("nul.safetensors", header({"t": one}).rstrip(b" ") + b"\0" + b'{"x":1}', b"\0")
raw("bom.safetensors", b"\xef\xbb\xbf" + header({"t": one}), b"\0")
raw("longname.safetensors", header({"n" * 65537: one}), b"\0")
# 60,000-character name: std::regex '(.)*' overflowed the stack from ~13,800.
raw("name60k.safetensors", header({"w" * 60000: one}), b"\0")
# Empty tensors with a 2^62 dimension: convert spun in the quantizer, reshard --tp 2 in slicing.
huge = 4611686018427387904
raw("hugedim.safetensors", header({
    "layers.0.mlp.fc1.weight": {"dtype": "BF16", "shape": [huge, 0], "data_offsets": [0, 0]},
    "layers.0.mlp.fc2.weight": {"dtype": "BF16", "shape": [huge, 0], "data_offsets": [0, 0]},
}))
PY
expect_exit2 "nested JSON header" convert --to mxfp8 "$work/nested.safetensors" "$work/x.safetensors"
expect_exit2 "control characters in a name" convert --to mxfp8 "$work/ansi.safetensors" "$work/x.safetensors"
if grep -q $'\x1b' "$work/err"; then fail "raw ESC byte reached stderr"; fi
grep -qF 'evil\n\x1b[2J\x1b[Hname' "$work/err" && echo "ok: the name is printed escaped" ||
  fail "name not escaped: $(cat -v "$work/err")"
expect_exit2 "NUL in header" convert --to mxfp8 "$work/nul.safetensors" "$work/x.safetensors"
expect_exit2 "BOM header" convert --to mxfp8 "$work/bom.safetensors" "$work/x.safetensors"
expect_exit2 "name over 64 KiB" convert --to mxfp8 "$work/longname.safetensors" "$work/x.safetensors"
expect_exit2 "RE2-invalid pattern" convert --to mxfp8 "$work/in.safetensors" "$work/x.safetensors" --include '(a)\1'
rc=0
timeout 60 "$shardwise" convert --to mxfp8 "$work/name60k.safetensors" "$work/n.safetensors" \
  --include '(.)*' >"$work/out" 2>"$work/err" || rc=$?
[[ $rc -eq 0 ]] && echo "ok: '(.)*' on a 60,000-character name" ||
  fail "'(.)*' on a long name: exit $rc $(head -c 300 "$work/err")"
rc=0
timeout 60 "$shardwise" convert --to mxfp8 "$work/hugedim.safetensors" "$work/h.safetensors" \
  --include fc >"$work/out" 2>"$work/err" || rc=$?
[[ $rc -eq 0 ]] && grep -q "converted 2 tensors" "$work/out" &&
  echo "ok: empty [2^62, 0] tensors convert at once" ||
  fail "convert of empty [2^62, 0] tensors: exit $rc $(head -c 300 "$work/err")"
rc=0
timeout 60 "$shardwise" reshard --checkpoint "$work/hugedim.safetensors" --tp 2 \
  --out "$work/hugedim_tp2" >"$work/out" 2>"$work/err" || rc=$?
if [[ $rc -eq 0 ]] && "$python" - "$work" <<'PY'
import json, struct, sys
blob = open(sys.argv[1] + "/hugedim_tp2/tp-rank-01-of-02.safetensors", "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
h = json.loads(blob[8:8 + n])  # numpy cannot shape a [2^62, 0] BF16 array
assert h["layers.0.mlp.fc1.weight"]["shape"] == [2305843009213693952, 0], h
assert h["layers.0.mlp.fc2.weight"]["shape"] == [4611686018427387904, 0], h
assert len(blob) == 8 + n, len(blob)
PY
then echo "ok: reshard --tp 2 of empty [2^62, 0] tensors"
else fail "reshard of empty [2^62, 0] tensors: exit $rc $(head -c 300 "$work/err")"; fi

# 6b. MXFP8 files whose metadata was damaged after the conversion: restoring them succeeded and
#     dropped the metadata (an empty tensor list left E4M3 bytes nothing could decode any more) or
#     decoded on the shape alone.
"$python" - "$work" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import st
work = sys.argv[1]
tensors, meta = st.read(work + "/mx.safetensors")
def variant(name, **changes):
    m = dict(meta)
    for key, value in changes.items():
        m[key] = value
    st.write(work + "/" + name, tensors, m)
variant("mx_empty_list.safetensors", **{"shardwise.mxfp8.tensors": ""})
key = "shardwise.mxfp8.tensor.model.layers.0.mlp.up_proj.weight"
fields = json.loads(meta[key])
variant("mx_bad_blocks.safetensors", **{key: json.dumps(dict(fields, blocks_per_row=2 ** 40))})
variant("mx_bad_dtype.safetensors", **{key: json.dumps(dict(fields, dtype="ZZ"))})
PY
expect_exit2 "MXFP8 tensor list emptied" convert --to bf16 "$work/mx_empty_list.safetensors" "$work/x.safetensors"
grep -q "does not list" "$work/err" || fail "emptied tensor list: $(cat "$work/err")"
expect_exit2 "MXFP8 blocks_per_row edited" convert --to bf16 "$work/mx_bad_blocks.safetensors" "$work/x.safetensors"
grep -q '"blocks_per_row" must be' "$work/err" || fail "edited blocks_per_row: $(cat "$work/err")"
expect_exit2 "MXFP8 original dtype edited" convert --to bf16 "$work/mx_bad_dtype.safetensors" "$work/x.safetensors"
[[ -e "$work/x.safetensors" ]] && fail "a refused restore left $work/x.safetensors"

# 7. Outputs are checked before any work: with a broken input and an output in a missing
#    directory, the error names the output (the input is never read).
expect_exit2 "convert output directory missing" convert --to mxfp8 "$work/garbage.safetensors" "$work/no/such/dir/x.safetensors"
grep -q "no/such/dir" "$work/err" || fail "convert preflight does not name the output: $(cat "$work/err")"
mkdir -p "$work/outdir"
expect_exit2 "convert output is a directory" convert --to mxfp8 "$work/garbage.safetensors" "$work/outdir"
grep -q "is a directory" "$work/err" || fail "convert to a directory: $(cat "$work/err")"
printf 'x' >"$work/plainfile"
expect_exit2 "reshard --out under a file" reshard --checkpoint "$work/garbage.safetensors" --tp 2 --out "$work/plainfile/tp"
grep -q "plainfile" "$work/err" || fail "reshard preflight does not name --out: $(cat "$work/err")"
if [[ $(id -u) -ne 0 ]]; then  # root writes through permission bits
  mkdir -p "$work/readonly" && chmod 555 "$work/readonly"
  expect_exit2 "convert into a read-only directory" convert --to mxfp8 "$work/garbage.safetensors" "$work/readonly/x.safetensors"
  grep -q "cannot create files in" "$work/err" || fail "read-only output: $(cat "$work/err")"
  expect_exit2 "reshard into a read-only directory" reshard --checkpoint "$work/garbage.safetensors" --tp 2 --out "$work/readonly/tp"
  chmod 755 "$work/readonly"
elif [[ -d /proc/self ]]; then  # a directory nobody can create files in
  expect_exit2 "convert into /proc" convert --to mxfp8 "$work/garbage.safetensors" /proc/self/x.safetensors
  grep -q "cannot create files in /proc/self" "$work/err" || fail "unwritable output: $(cat "$work/err")"
fi

cli_test_finish "all CLI convert tests passed"
