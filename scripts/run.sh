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
# More ranks than the cores this process may run on (nproc counts the affinity mask that taskset
# or a container's cpuset narrows, where Open MPI counts the node's cores): have Open MPI's waits
# give up the core, as it does on its own only when it sees the oversubscription. Without it, 4
# ranks pinned to 2 cores of a 16-core machine spent seconds per MPI collective spinning.
if ((np > $(nproc))); then export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}; fi
exec mpirun -np "$np" --oversubscribe "$@"
