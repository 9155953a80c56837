#!/usr/bin/env bash
# End to end: `shardwise train --comm-timeout 3` on 2 ranks, one of which is frozen (SIGSTOP)
# mid-training. The other rank's watchdog must name the data-parallel group the trainer made and
# the job must exit 3 within the timeout plus a few seconds. Also: bad values exit 2.
# Usage: train_comm_timeout_cli_test.sh PATH/TO/shardwise PATH/TO/examples
set -euo pipefail

shardwise=${1:?usage: train_comm_timeout_cli_test.sh SHARDWISE_BINARY EXAMPLES_DIR}
examples=${2:?usage: train_comm_timeout_cli_test.sh SHARDWISE_BINARY EXAMPLES_DIR}
work=$(mktemp -d "${TMPDIR:-/tmp}/shardwise_comm_timeout.XXXXXX")
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

for bad in 0 -1 nan 2e9 1e-9; do
  rc=0
  "$shardwise" train --config "$examples/default.yaml" --comm-timeout "$bad" \
    >"$work/bad.out" 2>&1 || rc=$?
  [[ $rc == 2 ]] || fail "--comm-timeout $bad exited $rc, expected 2"
done
grep -q -- "--comm-timeout" "$work/bad.out" || fail "no message naming --comm-timeout"

if ! command -v mpirun >/dev/null; then
  echo "SKIP frozen-rank check: no mpirun"
  rm -rf "$work"
  exit $((failures > 0))
fi
# The metrics file names this job's ranks in their command lines.
marker="$work/metrics.jsonl"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
  OPENBLAS_NUM_THREADS=1 timeout 120 mpirun -np 2 --oversubscribe "$shardwise" train \
  --config "$examples/default.yaml" --comm-timeout 3 --log-jsonl "$marker" \
  training.steps=1000000 training.eval_interval=0 >"$work/job.out" 2>&1 &
job=$!
# Wait until training has taken a few steps, then freeze one rank.
for _ in $(seq 600); do
  [[ -s "$marker" && $(wc -l <"$marker") -ge 3 ]] && break
  sleep 0.1
done
rank_pid=""
for proc in /proc/[0-9]*; do
  if tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -q -- "--log-jsonl $marker"; then
    [[ $(cat "$proc/comm" 2>/dev/null) == shardwise ]] && rank_pid=${proc#/proc/} && break
  fi
done
if [[ -z $rank_pid ]]; then
  fail "no rank of the job found (job output: $(tail -3 "$work/job.out"))"
  kill "$job" 2>/dev/null || true
else
  kill -STOP "$rank_pid"
  stopped=$(date +%s.%N)
  rc=0
  wait "$job" || rc=$?
  ended=$(date +%s.%N)
  [[ $rc == 3 ]] || fail "job exited $rc, expected 3 (124: it hung)"
  grep -q "comm watchdog: rank [01] of group data_parallel\[0,1\] (world ranks 0,1)" \
    "$work/job.out" || fail "no watchdog message naming the data-parallel group"
  awk -v a="$stopped" -v b="$ended" 'BEGIN { exit !(b - a < 3 + 15) }' ||
    fail "job took $(awk -v a="$stopped" -v b="$ended" 'BEGIN { print b - a }') s after the freeze"
fi
if ((failures > 0)); then
  echo "job output kept in $work" >&2
  tail -20 "$work/job.out" >&2 || true
  exit 1
fi
rm -rf "$work"
echo "train --comm-timeout: all checks passed"
