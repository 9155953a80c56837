#!/usr/bin/env bash
# CLI test for the text corpus path end to end: scripts/prepare_fortunes.py on a small fortune
# directory (duplicates, a document-level split, deterministic output, a format the trainer
# reads), `shardwise train` on the result (bits per byte and perplexity instead of exact match),
# and `shardwise generate` from the saved checkpoint (deterministic per seed, bad input exits 2).
# Usage: text_corpus_cli_test.sh PATH/TO/shardwise REPO_ROOT
set -euo pipefail

shardwise=${1:?usage: text_corpus_cli_test.sh SHARDWISE_BINARY REPO_ROOT}
root=${2:?usage: text_corpus_cli_test.sh SHARDWISE_BINARY REPO_ROOT}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
cli_test_init text_cli

# --- a fortune directory: 60 distinct texts over two files, 10 of them repeated ---------------
mkdir -p "$work/fortunes"
$python - "$work/fortunes" <<'PY'
import sys
d = sys.argv[1]
texts = [f"Fortune number {i}: a {'wise' if i % 2 else 'silly'} saying\n  -- someone {i % 7}"
         for i in range(60)]
with open(f"{d}/first", "w") as f:
    f.write("\n%\n".join(texts[:40] + texts[:5]) + "\n%\n")
with open(f"{d}/second", "w") as f:
    f.write("\n%\n".join(texts[40:] + texts[30:35]) + "\n")
open(f"{d}/first.dat", "wb").write(b"\0" * 24)  # strfile index: not text, must be skipped
PY
ln -s first "$work/fortunes/first.u8"  # Debian's .u8 links: each file is read once

prepare() {
  $python "$root/scripts/prepare_fortunes.py" --source "$work/fortunes" --out "$1" \
    --val-percent 25
}
expect_rc 0 prepare prepare "$work/data" || true
expect_rc 0 prepare_again prepare "$work/data2" || true
cmp -s "$work/data/train.bin" "$work/data2/train.bin" && cmp -s "$work/data/val.bin" \
  "$work/data2/val.bin" || fail "prepare_fortunes.py is not deterministic"
if ! $python - "$work/data" "$work/fortunes" <<'PY'; then
import json, struct, sys
data, src = sys.argv[1], sys.argv[2]
def texts(name):
    raw = open(f"{data}/{name}", "rb").read()
    magic, version, count = struct.unpack("<3i", raw[:12])
    assert (magic, version) == (20240520, 1), (magic, version)
    body = raw[1024:]
    assert len(body) == 2 * count, (len(body), count)
    tokens = struct.unpack(f"<{count}H", body)
    assert max(tokens) < 256, "byte-level tokens"
    text = bytes(tokens)
    assert text.endswith(b"\n%\n")
    return text[:-3].split(b"\n%\n")
train, val = texts("train.bin"), texts("val.bin")
expected = {f"Fortune number {i}: a {'wise' if i % 2 else 'silly'} saying\n  -- someone {i % 7}"
            .encode() for i in range(60)}
assert len(train) == len(set(train)) and len(val) == len(set(val)), "duplicates removed"
assert not set(train) & set(val), "no validation text in training"
assert set(train) | set(val) == expected, "every distinct text in exactly one split"
assert 5 <= len(val) <= 25, f"about a quarter held out: {len(val)} of 60"
m = json.load(open(f"{data}/manifest.json"))
assert m["texts_read"] == 70 and m["texts_distinct"] == 60, m
assert m["files"] == ["first", "second"], m["files"]
PY
  fail "prepared token files are wrong"
fi
expect_rc 1 prepare_missing_source $python "$root/scripts/prepare_fortunes.py" \
  --source "$work/nowhere" --out "$work/x" || true
grep -q "fortunes-min" "$work/prepare_missing_source.err" ||
  fail "a missing fortune directory should say which packages to install"

# --- train on it: language-model figures, not exact match ------------------------------------
train_args=(train --config "$root/examples/text.yaml" "data.path=$work/data/train.bin"
  "data.val_path=$work/data/val.bin" model.layers=1 model.hidden=32 model.heads=2 model.ffn=64
  model.seq_len=32 model.vocab=0 training.steps=8 training.warmup_steps=2
  training.eval_interval=4 training.micro_batch_size=4 data.eval_samples=8
  logging.log_interval=4 logging.progress=false "logging.plot_path=''" "logging.jsonl_path=''")
expect_rc 0 train "$shardwise" "${train_args[@]}" --log-jsonl "$work/m.jsonl" \
  --save "$work/ckpt" || true
grep -q "bits/byte, perplexity" "$work/train.out" "$work/train.err" ||
  fail "the text run's eval lines should show bits/byte and perplexity"
! grep -q "exact-match" "$work/train.out" "$work/train.err" ||
  fail "a text run should not report exact-match accuracy"
if ! $python - "$work/m.jsonl" <<'PY'; then
import json, math, sys
evals = [r for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r]
assert len(evals) == 2, evals
for r in evals:
    assert abs(r["val_bits_per_byte"] - r["eval_loss"] / math.log(2)) < 1e-9, r
    assert abs(r["val_perplexity"] - math.exp(r["eval_loss"])) < 1e-6, r
    assert "accuracy" in r
PY
  fail "metrics.jsonl lacks val_bits_per_byte / val_perplexity"
fi

# An empty validation text file held out 10% of the training data instead, without a word (an
# empty .bin file is refused by its header check).
: >"$work/empty_val.txt"
expect_rc 2 train_empty_val "$shardwise" "${train_args[@]}" data.source=text \
  "data.path=$root/examples/data/tiny_corpus.txt" "data.val_path=$work/empty_val.txt" || true
grep -q "data.val_path '$work/empty_val.txt' holds no tokens" "$work/train_empty_val.err" ||
  fail "an empty data.val_path: $(cat "$work/train_empty_val.err")"
# One too short for a sample was reported under data.path's name.
printf 'short' >"$work/short_val.txt"
expect_rc 2 train_short_val "$shardwise" "${train_args[@]}" data.source=text \
  "data.path=$root/examples/data/tiny_corpus.txt" "data.val_path=$work/short_val.txt" || true
grep -q "data.val_path '$work/short_val.txt' holds 5 tokens" "$work/train_short_val.err" ||
  fail "a short data.val_path: $(cat "$work/train_short_val.err")"

# --- generate --------------------------------------------------------------------------------
gen() { "$shardwise" generate --checkpoint "$work/ckpt" --prompt "Fortune" --tokens 40 "$@"; }
expect_rc 0 gen_a gen --seed 3 --temperature 1.0 || true
expect_rc 0 gen_b gen --seed 3 --temperature 1.0 || true
expect_rc 0 gen_c gen --seed 4 --temperature 1.0 --top-k 5 || true
cmp -s "$work/gen_a.out" "$work/gen_b.out" || fail "same seed gave different text"
expect_rc 0 gen_greedy gen --temperature 0 --seed 1 || true
expect_rc 0 gen_greedy_step "$shardwise" generate --checkpoint "$work/ckpt/step-0000008" \
  --prompt "Fortune" --tokens 40 --temperature 0 --seed 2 || true
cmp -s "$work/gen_greedy.out" "$work/gen_greedy_step.out" ||
  fail "greedy output depends on the seed or on root vs step directory"
for name in gen_a gen_c gen_greedy; do
  size=$(stat -c %s "$work/$name.out")
  [[ $size -eq $((7 + 40 + 1)) ]] || fail "$name: $size bytes, expected prompt + 40 + newline"
  [[ $(head -c 7 "$work/$name.out") == Fortune ]] || fail "$name: output lacks the prompt"
done

# Bad input: one line, exit 2. The corpus is ASCII, so vocab (from the data) is < 128.
expect_rc 2 gen_missing "$shardwise" generate --checkpoint "$work/nope" --prompt "a" || true
grep -q "nope" "$work/gen_missing.err" || fail "missing checkpoint: the message should name it"
expect_rc 2 gen_oov "$shardwise" generate --checkpoint "$work/ckpt" --prompt $'caf\xc3\xa9' || true
grep -q "byte 195 at position 3" "$work/gen_oov.err" || fail "out-of-vocabulary prompt byte"
expect_rc 2 gen_empty "$shardwise" generate --checkpoint "$work/ckpt" --prompt "" || true
expect_rc 2 gen_bad_temp gen --temperature -1 || true
expect_rc 2 gen_bad_top_k gen --top-k -2 || true
expect_rc 2 gen_bad_step "$shardwise" generate --checkpoint "$work/ckpt" --step 5 --prompt a || true
for name in gen_missing gen_oov gen_empty gen_bad_step gen_bad_temp gen_bad_top_k; do
  [[ $(wc -l <"$work/$name.err") -eq 1 ]] || fail "$name: expected one stderr line"
done

cli_test_finish "text corpus CLI test: all checks passed"
