# Environment for running shardwise jobs on this machine; sourced by the other scripts.
# - Open MPI refuses to run as root without these two variables.
# - Debian's OpenBLAS 0.3.21 does not recognise newer CPUs and falls back to its slowest generic
#   kernels (~5x slower sgemm); name the core type from the CPU flags when the user has not.
# - Several ranks share few cores: one BLAS/OpenMP thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ -z "${OPENBLAS_CORETYPE:-}" && -r /proc/cpuinfo ]]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
