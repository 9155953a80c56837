#!/usr/bin/env bash
# `--comm-timeout` on every subcommand that communicates besides train (which
# tests/comm/train_comm_timeout_cli_test.sh covers): `refit` and `generate --tp` on 2 ranks, one
# frozen (SIGSTOP) mid-run. The other rank's watchdog must report the wait and the job must exit 3
# within the timeout plus a few seconds, not hang for the 600 s default. Bad values exit 2.
# Usage: comm_timeout_cli_test.sh PATH/TO/shardwise REPO_ROOT [MPIEXEC]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: comm_timeout_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
root=${2:?usage: comm_timeout_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
mpiexec=${3:-mpirun}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cli_test_init comm_timeout

for bad in 0 -1 nan 2e9 1e-9; do
  expect_exit2 "refit --comm-timeout $bad" refit --config "$root/examples/refit.yaml" \
    --comm-timeout "$bad"
  expect_exit2 "generate --comm-timeout $bad" generate --checkpoint "$work/none" --prompt a \
    --tp 2 --comm-timeout "$bad"
done
grep -q -- "--comm-timeout" "$work/err" || fail "no message naming --comm-timeout"

if ! command -v "$mpiexec" >/dev/null; then
  echo "SKIP frozen-rank checks: no $mpiexec"
  cli_test_finish "--comm-timeout: bad values refused"
  exit 0
fi

# CPU seconds (user + system) a process has used so far.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# frozen_rank_job NAME MARKER READY TIMEOUT COMMAND...: starts COMMAND (a 2-rank job with
# --comm-timeout TIMEOUT whose rank command lines contain MARKER) in the background, freezes one
# rank once the job's output matches READY (if not empty) and the rank has done a second of work, and checks that
# the job exits 3 with a watchdog message within TIMEOUT + 15 s of the freeze.
frozen_rank_job() {
  local name=$1 marker=$2 ready=$3 limit=$4
  shift 4
  timeout 120 "$@" >"$work/$name.out" 2>&1 &
  local job=$! rank_pid="" stopped ended rc=0
  for _ in $(seq 600); do
    if [[ -n $ready ]] && ! grep -q -- "$ready" "$work/$name.out" 2>/dev/null; then
      kill -0 "$job" 2>/dev/null || break
      sleep 0.1
      continue
    fi
    for proc in /proc/[0-9]*; do
      [[ $(cat "$proc/comm" 2>/dev/null) == shardwise ]] || continue
      tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -qF -- "$marker" || continue
      if awk -v s="$(cpu_seconds "${proc#/proc/}")" 'BEGIN { exit !(s >= 1) }'; then
        rank_pid=${proc#/proc/}
        break
      fi
    done
    [[ -n $rank_pid ]] && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $rank_pid ]]; then
    fail "$name: no busy rank found (job output: $(tail -3 "$work/$name.out"))"
    kill "$job" 2>/dev/null || true
    wait "$job" || true
    return
  fi
  kill -STOP "$rank_pid"
  stopped=$(date +%s.%N)
  wait "$job" || rc=$?
  ended=$(date +%s.%N)
  kill -CONT "$rank_pid" 2>/dev/null || true
  local took
  took=$(awk -v a="$stopped" -v b="$ended" 'BEGIN { print b - a }')
  echo "$name: exit $rc, $took s after the freeze"
  [[ $rc == 3 ]] || fail "$name: job exited $rc, expected 3 (124: it hung)"
  grep -q "comm watchdog: rank [01] of group" "$work/$name.out" ||
    fail "$name: no watchdog message ($(tail -3 "$work/$name.out"))"
  awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l + 15) }' ||
    fail "$name: took $took s after the freeze"
}

# refit: rank 0 trains briefly and refits into rank 1 (tp 1) again and again; rank 1 waits while
# rank 0 trains, so the timeout leaves room for that on a loaded machine. Frozen once refitting.
frozen_rank_job refit "$work/refit.json" "^refit: " 20 "$mpiexec" -np 2 --oversubscribe "$shardwise" refit \
  --config "$root/examples/refit.yaml" training.steps=2 logging.progress=false --tp 1 \
  --repeat 100000 --mxfp8 none --comm-timeout 20 --json "$work/refit.json"

# generate --tp 2: a tiny byte-level model, sampling many tokens.
if expect_rc 0 text_train "$shardwise" train --config "$root/examples/text.yaml" data.source=text \
    data.path="$root/examples/data/tiny_corpus.txt" 'data.val_path=""' 'logging.jsonl_path=""' \
    'logging.plot_path=""' model.layers=1 model.hidden=32 model.heads=2 model.ffn=64 \
    model.seq_len=32 training.steps=2 training.eval_interval=0 data.eval_samples=8 \
    logging.progress=false --save "$work/text"; then
  frozen_rank_job generate "$work/text" "" 3 "$mpiexec" -np 2 --oversubscribe "$shardwise" generate \
    --checkpoint "$work/text" --prompt "The " --tokens 100000 --tp 2 --comm-timeout 3
  # Ranks given different prompts crashed in MPI (MPI_ERR_TRUNCATE); different seeds printed rank
  # 0's text with exit 0. Now exit 2 at once, naming the option.
  for differ in "--prompt:The :A longer prompt" "--seed:1:2"; do
    IFS=: read -r option mine theirs <<<"$differ"
    set +e
    timeout 60 "$mpiexec" -np 2 --oversubscribe bash -c '[[ $OMPI_COMM_WORLD_RANK == 1 ]] && v=$3 || v=$2
      p=(--prompt x); [[ $4 == --prompt ]] && p=()
      exec "$0" generate --checkpoint "$1" --tp 2 --tokens 5 "${p[@]}" "$4" "$v"' \
      "$shardwise" "$work/text" "$mine" "$theirs" "$option" >"$work/differ.out" 2>"$work/differ.err"
    rc=$?
    set -e
    [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "runs with $option = .*, and not every rank does" \
      "$work/differ.err" || fail "generate with $option differing per rank: rc $rc, $(head -c 400 "$work/differ.err")"
  done
fi

cli_test_finish "--comm-timeout (refit, generate --tp): all checks passed"
