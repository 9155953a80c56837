#!/usr/bin/env bash
# CLI test for `shardwise layout` and `shardwise model-spec`.
# Usage: layout_cli_test.sh PATH/TO/shardwise PATH/TO/examples/models
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: layout_cli_test.sh SHARDWISE_BINARY EXAMPLES_DIR}
examples=${2:?usage: layout_cli_test.sh SHARDWISE_BINARY EXAMPLES_DIR}
cli_test_init cli_test

# Checks a `layout --format json` document: required keys, one rank entry per dp rank, "shard" an
# integer in shard-aligned buffers and null elsewhere, params inside their bucket, totals agree.
check_layout_json() {
  local file=$1 dp=$2
  "$python" - "$file" "$dp" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
dp = int(sys.argv[2])
for key in ("dp", "expert_dp", "buffers", "ranks", "totals"):
    assert key in doc, f"missing top-level key {key}"
assert doc["dp"] == dp, doc["dp"]
assert len(doc["ranks"]) == max(doc["dp"], doc["expert_dp"]), len(doc["ranks"])
unpadded = padded = 0
for buf in doc["buffers"]:
    for key in ("param_dtype", "grad_dtype", "expert_parallel", "layer_wise", "num_shards",
                "numel", "numel_unpadded", "buckets", "params"):
        assert key in buf, f"missing buffer key {key}"
    buckets = buf["buckets"]
    for b in buckets:
        for key in ("start", "end", "numel_unpadded"):
            assert key in b, f"missing bucket key {key}"
        assert (b["end"] - b["start"]) % buf["num_shards"] == 0, b
    assert buckets[-1]["end"] == buf["numel"]
    real = 0
    for p in buf["params"]:
        for key in ("name", "start", "end", "bucket", "shard", "index"):
            assert key in p, f"missing param key {key}"
        b = buckets[p["bucket"]]
        assert b["start"] <= p["start"] < p["end"] <= b["end"], p
        if buf.get("shard_aligned", buf["layer_wise"]):
            size = (b["end"] - b["start"]) // buf["num_shards"]
            assert p["shard"] == (p["start"] - b["start"]) // size, p
            assert (p["end"] - 1 - b["start"]) // size == p["shard"], p
        else:
            assert p["shard"] is None, p
        real += p["end"] - p["start"]
    assert real == buf["numel_unpadded"], (real, buf["numel_unpadded"])
    unpadded += real
    padded += buf["numel"]
t = doc["totals"]
for key in ("numel_unpadded", "numel_padded", "padding_fraction", "ns_cost_max_over_mean"):
    assert key in t, f"missing totals key {key}"
assert t["numel_unpadded"] == unpadded and t["numel_padded"] == padded, t
assert abs(t["padding_fraction"] - (1 - unpadded / padded)) < 1e-9, t
costs = [r["ns_cost"] for r in doc["ranks"]]
mean = sum(costs) / len(costs)
ratio = max(costs) / mean if mean > 0 else 1.0
assert abs(t["ns_cost_max_over_mean"] - ratio) <= 1e-9 * ratio, (t, ratio)
assert sum(r["numel"] for r in doc["ranks"]) >= unpadded, "ranks update fewer elements than exist"
PY
}

# 1. Every bundled spec, both formats.
shopt -s nullglob
specs=("$examples"/*.json)
[[ ${#specs[@]} -ge 5 ]] || fail "expected at least 5 bundled specs in $examples, found ${#specs[@]}"
for spec in "${specs[@]}"; do
  name=$(basename "$spec" .json)
  for dp in 8 64; do
    if ! "$shardwise" layout --model "$spec" --dp "$dp" --format text >"$work/$name.txt" 2>"$work/err"; then
      fail "$name dp $dp text: $(cat "$work/err")"
    elif ! grep -q "^totals: " "$work/$name.txt"; then
      fail "$name dp $dp text: no totals line"
    fi
    if ! "$shardwise" layout --model "$spec" --dp "$dp" --format json >"$work/$name.json" 2>"$work/err"; then
      fail "$name dp $dp json: $(cat "$work/err")"
    elif ! check_layout_json "$work/$name.json" "$dp"; then
      fail "$name dp $dp json: invalid document"
    else
      echo "ok: $name dp $dp text+json"
    fi
  done
done

# Bundled presets without a JSON file (too large to ship) by name, plus the other optimizers.
"$shardwise" layout --model deepseek-v3 --dp 64 --expert-dp 8 --format json >"$work/ds.json" &&
  check_layout_json "$work/ds.json" 64 && echo "ok: deepseek-v3 by name" ||
  fail "deepseek-v3 by name"
for optimizer in distributed none; do
  "$shardwise" layout --model "$examples/llama3-8b.json" --dp 16 --optimizer "$optimizer" \
    --format json >"$work/opt.json" && check_layout_json "$work/opt.json" 16 &&
    echo "ok: optimizer $optimizer" || fail "optimizer $optimizer"
done
"$shardwise" layout --model moe-tiny --dp 4 --expert-dp 2 --all-layer-wise --high-nccl-busbw \
  --grad-reduce-fp32 false --bucket-size 5000 --format json >"$work/moe.json" &&
  check_layout_json "$work/moe.json" 4 && echo "ok: moe-tiny all options" || fail "moe-tiny all options"
# Boolean option values: the spellings CLI11's flags take, in any case; others exit 2 naming it.
"$shardwise" layout --model moe-tiny --dp 4 --expert-dp 2 --all-layer-wise --high-nccl-busbw \
  --grad-reduce-fp32 False --bucket-size 5000 --format json >"$work/moe_False.json" &&
  cmp -s "$work/moe.json" "$work/moe_False.json" && echo "ok: --grad-reduce-fp32 False" ||
  fail "--grad-reduce-fp32 False is not the same as false"
"$shardwise" model-spec --arch gpt-tiny --bias true >"$work/bias_true.json"
"$shardwise" model-spec --arch gpt-tiny --bias false >"$work/bias_false.json"
cmp -s "$work/bias_true.json" "$work/bias_false.json" && fail "--bias true and false agree"
for value in True ON yes 1 FALSE Off no 0; do
  expect_rc 0 "bool_$value" "$shardwise" model-spec --arch gpt-tiny --bias "$value" || true
  case $value in True | ON | yes | 1) want=true ;; *) want=false ;; esac
  cmp -s "$work/bool_$value.out" "$work/bias_$want.json" || fail "--bias $value is not $want"
done
expect_rc 2 bool_maybe "$shardwise" layout --model moe-tiny --dp 4 --grad-reduce-fp32 maybe || true
grep -qF -- "--grad-reduce-fp32: expected true or false (or yes/no, on/off, 1/0), got 'maybe'" \
  "$work/bool_maybe.err" || fail "bool_maybe: the message does not name the option and value"

# 2. SVG output.
svg="$work/gpt-tiny.svg"
if "$shardwise" layout --model "$examples/gpt-tiny.json" --dp 4 --bucket-size 20000 --svg "$svg" \
  >/dev/null && grep -q "<svg" "$svg" && grep -q "<title>layers.0.attn.qkv.weight" "$svg"; then
  "$python" -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$svg" &&
    echo "ok: svg" || fail "svg is not well-formed XML"
else
  fail "--svg did not write an SVG with param titles"
fi

# 3. model-spec regenerates the bundled files byte for byte.
for spec in "${specs[@]}"; do
  name=$(basename "$spec" .json)
  "$shardwise" model-spec --arch "$name" --out "$work/regen.json" 2>/dev/null &&
    cmp -s "$work/regen.json" "$spec" && echo "ok: model-spec $name" ||
    fail "model-spec --arch $name differs from $spec"
done
"$shardwise" model-spec --arch llama3-8b --layers 2 --hidden 256 --ffn 512 --heads 4 --kv-heads 2 \
  --vocab 1000 --name small >"$work/small.json" &&
  "$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["name"]=="small"; assert len(d["params"])==2+2*6+1, len(d["params"])' "$work/small.json" &&
  echo "ok: model-spec overrides to stdout" || fail "model-spec overrides"

# 4. Bad inputs exit 2 with a one-line message.
printf '{"name": "m", "params": [{"name": "a", "shape": [4, 4]},' >"$work/malformed.json"
printf '{"name": "m", "params": [{"name": "a", "shape": [4, 4], "colour": "red"}]}' >"$work/unknown.json"
printf '{"name": "m", "params": [{"name": "a", "shape": [4]}, {"name": "a", "shape": [8]}]}' >"$work/dup.json"
printf '{"name": "m", "params": [{"name": "a", "shape": [4, 0]}]}' >"$work/zero.json"
expect_exit2 "dp=0" layout --model "$examples/gpt-tiny.json" --dp 0
expect_exit2 "negative bucket size" layout --model "$examples/gpt-tiny.json" --dp 2 --bucket-size=-5
expect_exit2 "negative bucket size (separate arg)" layout --model "$examples/gpt-tiny.json" --dp 2 --bucket-size -5
expect_exit2 "unknown optimizer" layout --model "$examples/gpt-tiny.json" --dp 2 --optimizer adam
expect_exit2 "bad format" layout --model "$examples/gpt-tiny.json" --dp 2 --format yaml
# --expert-dp sizes the expert buffers only: on a dense model it was ignored.
expect_exit2 "expert-dp on a dense model" layout --model gpt-tiny --dp 2 --expert-dp 3
# Layer-wise options with another optimizer were ignored, and the header claimed them.
expect_exit2 "shard group with distributed" layout -m gpt-tiny --dp 4 --optimizer distributed --shard-group-size 2
expect_exit2 "all-layer-wise with none" layout -m gpt-tiny --dp 4 --optimizer none --all-layer-wise
# An integer dtype made a spec that layout then refused.
expect_exit2 "model-spec integer dtype" model-spec --arch gpt-tiny --dtype int32 --out "$work/i32.json"
[[ -e "$work/i32.json" ]] && fail "model-spec --dtype int32 wrote $work/i32.json"
# A name no dtype has was told every dtype a file may hold, integers and e8m0 among them.
expect_exit2 "model-spec unknown dtype" model-spec --arch gpt-tiny --dtype int8
grep -q "unknown dtype 'int8' (valid: fp32, bf16, fp16, e4m3)" "$work/err" ||
  fail "model-spec unknown dtype: $(cat "$work/err")"
# --list beside other options, and expert options on a dense model, were ignored (exit 0).
expect_exit2 "model-spec --list with --out" model-spec --list --arch gpt-tiny -o "$work/list.json"
[[ -e "$work/list.json" ]] && fail "model-spec --list wrote $work/list.json"
expect_exit2 "model-spec --moe-ffn on a dense model" model-spec --arch gpt-tiny --moe-ffn 64
expect_exit2 "model-spec --shared-experts, 0 experts" model-spec --arch moe-tiny --experts 0 \
  --shared-experts 1
# E8M0 is a scale-only format: neither the generator nor the reader takes it for parameters.
expect_exit2 "model-spec scale-only dtype" model-spec --arch gpt-tiny --dtype e8m0 --out "$work/e8m0.json"
[[ -e "$work/e8m0.json" ]] && fail "model-spec --dtype e8m0 wrote $work/e8m0.json"
sed 's/"bf16"/"e8m0"/' "$examples/gpt-tiny.json" >"$work/e8m0-spec.json"
expect_exit2 "layout of an e8m0 spec" layout --model "$work/e8m0-spec.json" --dp 2
expect_exit2 "malformed JSON" layout --model "$work/malformed.json" --dp 2
expect_exit2 "unknown field" layout --model "$work/unknown.json" --dp 2
expect_exit2 "duplicate name" layout --model "$work/dup.json" --dp 2
expect_exit2 "zero dim" layout --model "$work/zero.json" --dp 2
expect_exit2 "missing file" layout --model "$work/nope.json" --dp 2
expect_exit2 "unknown arch" model-spec --arch gpt5
expect_exit2 "neither a file nor a bundled model" layout --model llama3-9b --dp 8
# Bundled names match in any case; an unknown name lists the bundled ones.
"$shardwise" layout --model llama3-8B --dp 8 >"$work/upper.txt" 2>&1 ||
  fail "layout --model llama3-8B exited $?"
grep -q "llama3-8b" "$work/upper.txt" || fail "layout --model llama3-8B: no report"
grep -q "bundled: gpt-tiny, moe-tiny, gpt-small, gpt3-175b" <("$shardwise" layout --model llama3-9b --dp 8 2>&1 || true) ||
  fail "an unknown model does not list the bundled ones"
expect_exit2 "bad hyperparameter" model-spec --arch llama3-8b --kv-heads 5
grep -q "unknown field \"colour\"" <("$shardwise" layout --model "$work/unknown.json" --dp 2 2>&1 || true) ||
  fail "unknown field message does not name the field"
grep -q "duplicate param name \"a\"" <("$shardwise" layout --model "$work/dup.json" --dp 2 2>&1 || true) ||
  fail "duplicate message does not name the param"

# 5. Shard groups: layer-wise buffers over S shards, element-sharded ones over all of dp; the
# per-rank cost block of every buffer follows the documented formula and sums to the totals.
check_cost_json() {
  local file=$1 dp=$2 s=$3
  "$python" - "$file" "$dp" "$s" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
dp, s = int(sys.argv[2]), int(sys.argv[3])
assert doc["shard_group_size"] == s, doc["shard_group_size"]
size = {"fp32": 4, "bf16": 2, "fp16": 2, "uint8": 1}
keys = ("replicas", "padding_numel", "param_bytes", "grad_bytes", "optimizer_state_bytes",
        "memory_bytes", "comm_bytes", "exposed_rs_bytes")
total = {k: 0 for k in keys if k != "replicas"}
for buf in doc["buffers"]:
    c = buf["cost"]
    S = buf["num_shards"]
    assert S == (s if buf["layer_wise"] else dp), (S, buf["layer_wise"])
    R = c["replicas"]
    assert S * R == dp, (S, R)
    n, g, p = buf["numel"], size[buf["grad_dtype"]], size[buf["param_dtype"]]
    want = (S - 1) / S * n * g + 2 * (R - 1) / R * (n / S) * g + (S - 1) / S * n * p
    assert abs(c["comm_bytes"] - want) <= len(buf["buckets"]), (c["comm_bytes"], want)
    assert c["param_bytes"] == n * p and c["grad_bytes"] == n * g, c
    assert c["padding_numel"] == n - buf["numel_unpadded"], c
    last = buf["buckets"][-1]
    assert c["exposed_rs_bytes"] == (last["end"] - last["start"]) // S * (S - 1) * g, c
    for k in total:
        total[k] += c[k]
for k, v in total.items():
    assert doc["totals"]["cost"][k] == v, (k, doc["totals"]["cost"][k], v)
PY
}
"$shardwise" layout --model "$examples/llama3-8b.json" --dp 16 --shard-group-size 4 --format json \
  >"$work/sg.json" && check_layout_json "$work/sg.json" 16 && check_cost_json "$work/sg.json" 16 4 &&
  echo "ok: shard group 4 of dp 16" || fail "shard group 4 of dp 16"
"$shardwise" layout --model "$examples/llama3-8b.json" --dp 16 --format json >"$work/sg16.json" &&
  check_cost_json "$work/sg16.json" 16 16 && echo "ok: default shard group = dp" ||
  fail "default shard group = dp"
# auto: the text report shows the table it chose from, one row per divisor of dp, one marked.
if "$shardwise" layout --model "$examples/llama3-8b.json" --dp 256 --shard-group-size auto \
  >"$work/auto.txt" 2>"$work/err"; then
  rows=$(grep -cE '^[* ] +[0-9]+ +[0-9.]+%' "$work/auto.txt" || true)
  chosen=$(grep -E '^\* +[0-9]+ ' "$work/auto.txt" | awk '{print $2}')
  if [[ $rows -ne 9 || -z $chosen ]] || ! grep -q "shard group size $chosen$" "$work/auto.txt" ||
    ! grep -q "^totals per rank: param " "$work/auto.txt"; then
    fail "auto text: $rows table rows, chosen '$chosen'"
  else
    echo "ok: auto on llama3-8b dp 256 chose S=$chosen"
  fi
else
  fail "auto text: $(cat "$work/err")"
fi
"$shardwise" layout --model gpt-tiny --dp 64 --shard-group-size auto --format json >"$work/auto.json" &&
  "$python" - "$work/auto.json" <<'PY' && echo "ok: auto json" || fail "auto json"
import json, sys
doc = json.load(open(sys.argv[1]))
choice = doc["shard_group_choice"]
sizes = [c["shard_group_size"] for c in choice["candidates"]]
assert sizes == [1, 2, 4, 8, 16, 32, 64], sizes
assert choice["chosen"] == doc["shard_group_size"] and choice["chosen"] in sizes, choice["chosen"]
mem = {c["shard_group_size"]: c["param_grad_bytes"] + c["optimizer_state_bytes"]
       for c in choice["candidates"]}
assert mem[choice["chosen"]] <= min(mem.values()) * 1.05, mem
PY
# Overlap-aware cuts (the default; the flag is still accepted) and plain cuts give valid layouts
# with the cost block and name the cut mode; gpt-small at dp 8 is one bucket with plain cuts and
# two (half the exposed bytes) by default.
"$shardwise" layout --model moe-tiny --dp 8 --bucket-size 5000 --overlap-aware-cuts --format json \
  >"$work/oac.json" && check_layout_json "$work/oac.json" 8 && check_cost_json "$work/oac.json" 8 8 &&
  echo "ok: overlap-aware cuts" || fail "overlap-aware cuts"
"$shardwise" layout --model gpt-small --dp 8 --format json >"$work/cuts_default.json" &&
  "$shardwise" layout --model gpt-small --dp 8 --plain-cuts --format json >"$work/cuts_plain.json" &&
  check_cost_json "$work/cuts_plain.json" 8 8 || fail "layout --plain-cuts"
"$python" - "$work/cuts_default.json" "$work/cuts_plain.json" <<'PY' || fail "cut modes"
import json, sys
aware, plain = (json.load(open(p)) for p in sys.argv[1:3])
assert aware["layer_wise_cuts"] == "overlap_aware" and plain["layer_wise_cuts"] == "plain"
lw = lambda d: next(b for b in d["buffers"] if b["layer_wise"])
a, p = lw(aware), lw(plain)
assert (len(p["buckets"]), len(a["buckets"])) == (1, 2), (len(p["buckets"]), len(a["buckets"]))
assert 2 * a["cost"]["exposed_rs_bytes"] <= p["cost"]["exposed_rs_bytes"], (a["cost"], p["cost"])
assert a["cost"]["padding_fraction"] <= p["cost"]["padding_fraction"] + 0.005
PY
expect_exit2 "both cut modes" layout --model gpt-tiny --dp 8 --plain-cuts --overlap-aware-cuts
expect_exit2 "shard group not dividing dp" layout --model gpt-tiny --dp 8 --shard-group-size 3
expect_exit2 "shard group not a number" layout --model gpt-tiny --dp 8 --shard-group-size four
grep -q "layer_wise_shard_group_size 3" <("$shardwise" layout --model gpt-tiny --dp 8 --shard-group-size 3 2>&1 || true) ||
  fail "bad shard group message does not name the field"

cli_test_finish "all CLI layout tests passed"
