#!/usr/bin/env bash
# `shardwise train --progress auto|on|off`: off writes no progress bar, on writes one into a file
# with at most 4 redraws a second (however many steps), auto writes none into a file nor into a
# rank's stdout under mpirun (Open MPI gives each rank a pseudo-terminal), and a bad value exits 2.
# Usage: progress_cli_test.sh PATH/TO/shardwise REPO_ROOT [MPIEXEC]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shardwise=${1:?usage: progress_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
root=${2:?usage: progress_cli_test.sh SHARDWISE_BINARY REPO_ROOT [MPIEXEC]}
mpiexec=${3:-mpirun}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cli_test_init progress

# A model small enough that a step takes about a millisecond: many steps, each a redraw candidate.
steps=3000
tiny=(--config "$root/examples/default.yaml" model.layers=1 model.hidden=16 model.heads=2
      model.ffn=32 training.micro_batch_size=2 training.warmup_steps=0 training.eval_interval=0
      data.eval_samples=8 training.steps=$steps logging.log_interval=1000)

expect_exit2 "--progress bogus" train "${tiny[@]}" --progress bogus
expect_exit2 "--progress ON" train "${tiny[@]}" --progress ON

redraws() { tr -cd '\r' <"$1" | wc -c; }

# off: log lines only (every log_interval steps), no '\r'.
if expect_rc 0 off "$shardwise" train "${tiny[@]}" --progress off; then
  [[ $(redraws "$work/off.out") -eq 0 ]] || fail "--progress off: $(redraws "$work/off.out") redraws"
  grep -q "step $steps/$steps" "$work/off.out" || fail "--progress off: no step lines"
fi

# on, into a file: redraws bounded by the run's wall time, far fewer than the steps, and the
# final state drawn.
start=$(date +%s.%N)
if expect_rc 0 on "$shardwise" train "${tiny[@]}" --progress on; then
  end=$(date +%s.%N)
  n=$(redraws "$work/on.out")
  limit=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%d", 4 * (b - a) + 2 }')
  echo "ok: --progress on: $n redraws for $steps steps in $(awk -v a="$start" -v b="$end" \
    'BEGIN { print b - a }') s (limit $limit)"
  ((n >= 1 && n <= limit)) || fail "--progress on: $n redraws, expected 1..$limit"
  ((n < steps / 2)) || fail "--progress on: $n redraws for $steps steps: not rate-limited"
  grep -q "$steps/$steps" "$work/on.out" || fail "--progress on: final state not drawn"
  ! grep -q "^step [0-9]*/$steps" "$work/on.out" || fail "--progress on: log lines as well"
fi

# auto (the default), into a file: no bar, as before.
if expect_rc 0 auto_file "$shardwise" train "${tiny[@]}"; then
  [[ $(redraws "$work/auto_file.out") -eq 0 ]] || fail "auto into a file drew a progress bar"
fi

# auto under mpirun, whose ranks write to a pseudo-terminal even with mpirun's output in a file.
if command -v "$mpiexec" >/dev/null; then
  if expect_rc 0 auto_mpi env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      "$mpiexec" -np 1 --oversubscribe "$shardwise" train "${tiny[@]}" training.steps=300; then
    [[ $(redraws "$work/auto_mpi.out") -eq 0 ]] ||
      fail "auto under mpirun drew $(redraws "$work/auto_mpi.out") redraws into a file"
  fi
else
  echo "SKIP auto under mpirun: no $mpiexec"
fi

cli_test_finish "train --progress: all checks passed"
