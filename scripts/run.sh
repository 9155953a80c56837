#!/usr/bin/env bash
# Runs a command on NP ranks on this machine: scripts/run.sh NP -- CMD [ARGS...]
# Sources scripts/env.sh (root may run Open MPI; one BLAS/OpenMP thread per rank; OpenBLAS core
# type) and launches `mpirun -np NP --oversubscribe`, so NP may exceed the number of cores.
# Relative paths in CMD are taken from the current directory, as for any command.
set -euo pipefail
usage() {
  echo "usage: scripts/run.sh NP -- CMD [ARGS...]   (e.g. scripts/run.sh 4 -- build/bin/bench_ddp_step)" >&2
  exit 2
}
[[ $# -ge 3 && $2 == "--" ]] || usage
np=$1
[[ $np =~ ^[1-9][0-9]*$ ]] || { echo "scripts/run.sh: NP must be a positive integer, got '$np'" >&2; exit 2; }
shift 2
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
exec mpirun -np "$np" --oversubscribe "$@"
