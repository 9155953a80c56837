#!/usr/bin/env bash
# Every safetensors dtype through `convert` and `reshard`: a checkpoint written by numpy (a small
# Megatron-named F32 model plus F64, I8, I16, U16, U32, U64, BOOL, F8_E5M2, F8_E4M3FNUZ,
# F8_E5M2FNUZ, C64, F4 and F6 tensors, the kind of buffers a Hugging Face checkpoint carries) is
# converted to MXFP8 and exported to tp 2; an independent numpy reader checks that every tensor
# that is not converted comes out byte for byte (sliced by the Megatron rules where it is split).
# A conversion asked for a dtype that cannot be converted, and a split of packed 4-bit elements,
# exit 2 naming the tensor.
# Usage: storage_dtypes_cli_test.sh PATH/TO/shardwise
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: storage_dtypes_cli_test.sh SHARDWISE_BINARY}
cli_test_init storage_dtypes

if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: $python has no numpy"
  exit 0
fi

cat >"$work/st.py" <<'PY'
import sys
import numpy as np
import safetensors_container as container

# safetensors dtype -> (numpy dtype of the stored bytes, bits per element)
KINDS = {"F64": ("<f8", 64), "F32": ("<f4", 32), "BF16": ("<u2", 16), "F16": ("<f2", 16),
         "I8": ("i1", 8), "I16": ("<i2", 16), "U16": ("<u2", 16), "U32": ("<u4", 32),
         "U64": ("<u8", 64), "I32": ("<i4", 32), "I64": ("<i8", 64), "U8": ("u1", 8),
         "BOOL": ("?", 8), "F8_E5M2": ("u1", 8), "F8_E4M3": ("u1", 8), "F8_E8M0": ("u1", 8),
         "F8_E4M3FNUZ": ("u1", 8), "F8_E5M2FNUZ": ("u1", 8), "C64": ("<c8", 64),
         "F4": ("u1", 4), "F6_E2M3": ("u1", 6), "F6_E3M2": ("u1", 6)}

def write(path, tensors):
    # tensors: name -> (dtype, shape, raw bytes)
    container.write(path, tensors)

def read(path):
    return container.read(path)[0]

def model(seed=1):
    rng = np.random.default_rng(seed)
    t = {}
    def add(name, dtype, shape, values):
        t[name] = (dtype, shape, np.ascontiguousarray(values, dtype=KINDS[dtype][0]).tobytes())
    add("layers.0.attention.qkv.weight", "F32", (96, 32), rng.standard_normal((96, 32)))
    add("layers.0.mlp.fc2.weight", "F32", (32, 64), rng.standard_normal((32, 64)))
    add("layers.0.mlp.fc1.weight", "I8", (64, 32), rng.integers(-128, 128, (64, 32)))
    add("layers.0.mlp.fc1.bias", "U16", (64,), rng.integers(0, 65536, 64))
    add("buffers.rotary_inv_freq", "F64", (16,), rng.standard_normal(16))
    add("buffers.attention_mask", "BOOL", (8, 8), np.tril(np.ones((8, 8))) > 0)
    add("buffers.i16", "I16", (5,), rng.integers(-30000, 30000, 5))
    add("buffers.u32", "U32", (3, 3), rng.integers(0, 2**32, (3, 3)))
    add("buffers.u64", "U64", (4,), rng.integers(0, 2**63, 4))
    add("buffers.e5m2", "F8_E5M2", (4, 64), rng.integers(0, 256, (4, 64)))
    add("buffers.e4m3fnuz", "F8_E4M3FNUZ", (7,), rng.integers(0, 256, 7))
    add("buffers.e5m2fnuz", "F8_E5M2FNUZ", (7,), rng.integers(0, 256, 7))
    add("buffers.c64", "C64", (2, 2), rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2)))
    t["buffers.fp4"] = ("F4", (2, 6), rng.integers(0, 256, 6, dtype=np.uint8).tobytes())  # 12 x 4 bits
    t["buffers.fp6"] = ("F6_E2M3", (8,), rng.integers(0, 256, 6, dtype=np.uint8).tobytes())  # 8 x 6 bits
    return t

def tp_slice(name, dtype, shape, raw, tp, r):
    a = np.frombuffer(raw, dtype=KINDS[dtype][0]).reshape(shape)
    if name.endswith("qkv.weight"):
        return np.concatenate([np.split(p, tp, axis=0)[r] for p in np.split(a, 3, axis=0)], axis=0)
    if name.endswith(("fc1.weight", "fc1.bias")):
        return np.split(a, tp, axis=0)[r]
    if name.endswith(("proj.weight", "fc2.weight")):
        return np.split(a, tp, axis=1)[r]
    return a

cmd = sys.argv[1]
if cmd == "write":
    write(sys.argv[2], model())
elif cmd == "write_f4_split":
    t = model()
    t["layers.0.mlp.fc1.weight"] = ("F4", (64, 32), bytes(64 * 16))
    write(sys.argv[2], t)
elif cmd == "check_convert":
    src, got = model(), read(sys.argv[2])
    for name, (dtype, shape, raw) in src.items():
        converted = dtype == "F32" and len(shape) == 2
        g = got[name]
        if converted:
            assert g[0] == "F8_E4M3" and name + "_scale" in got, (name, g[0])
        else:
            assert g == (dtype, shape, raw), (name, g[:2], (dtype, shape))
    print("convert: %d tensors checked" % len(src))
elif cmd == "check_reshard":
    src, tp = model(), int(sys.argv[3])
    for r in range(tp):
        got = read("%s/tp-rank-%02d-of-%02d.safetensors" % (sys.argv[2], r, tp))
        assert set(got) == set(src), set(got) ^ set(src)
        for name, (dtype, shape, raw) in src.items():
            if dtype in ("F4", "F6_E2M3"):
                want = raw
                want_shape = shape
            else:
                s = tp_slice(name, dtype, shape, raw, tp, r)
                want, want_shape = s.tobytes(), s.shape
            assert got[name] == (dtype, tuple(want_shape), want), (r, name, got[name][:2])
    print("reshard: %d tensors x %d ranks checked" % (len(src), tp))
PY

"$python" "$work/st.py" write "$work/hf.safetensors"

if expect_rc 0 convert "$shardwise" convert --to mxfp8 "$work/hf.safetensors" "$work/mx.safetensors"; then
  "$python" "$work/st.py" check_convert "$work/mx.safetensors" || fail "convert: outputs differ"
fi
if expect_rc 0 reshard "$shardwise" reshard --checkpoint "$work/hf.safetensors" --tp 2 \
    --out "$work/tp2"; then
  "$python" "$work/st.py" check_reshard "$work/tp2" 2 || fail "reshard: outputs differ"
fi
# A dtype conversion asked for a tensor whose dtype cannot be converted: exit 2 naming it.
expect_exit2 "reshard --dtype bf16 with an F64 tensor" reshard --checkpoint \
  "$work/hf.safetensors" --tp 2 --dtype bf16 --out "$work/bf16"
grep -q "buffers.rotary_inv_freq" "$work/err" || fail "--dtype error does not name the F64 tensor"
# 4-bit elements cannot be split by the column rule.
"$python" "$work/st.py" write_f4_split "$work/f4.safetensors"
expect_exit2 "reshard split of F4" reshard --checkpoint "$work/f4.safetensors" --tp 2 \
  --out "$work/f4"
grep -q "layers.0.mlp.fc1.weight" "$work/err" || fail "F4 split error does not name the tensor"
expect_rc 0 reshard_f4_tp1 "$shardwise" reshard --checkpoint "$work/f4.safetensors" --tp 1 \
  --out "$work/f4tp1" || true

cli_test_finish "storage dtypes through convert and reshard: all checks passed"
