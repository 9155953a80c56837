#!/usr/bin/env bash
# Builds what the GPU code needs, runs every GPU test (test_cuda: MXFP8, AdamW, Newton-Schulz,
# Muon, grad stats, each against the CPU path; test_cuda_host_emulation, the same host code on CPU
# stand-ins; test_cuda_mpi under mpirun -np 1/2/4, device DDP + layer-wise optimizer against the
# host path with every rank on the one GPU) and every GPU benchmark (bench/cuda), and ends with
#   gpu_check: N passed, M failed
# followed by the benchmarks' `bench:` lines. N and M count test cases (gtest) plus one per
# benchmark that ran; without a GPU everything builds, the tests report themselves skipped, the
# benchmarks say there is no device, and the line before the summary counts the skips.
# Sized for one H100 / H200 with 16 cores: a Release build of only the CUDA targets and the
# layers they link (-j$(nproc)), then a minute or two of tests and benchmarks.
#
#   scripts/gpu_check.sh                  configure build-gpu/ (CUDA on, sm_90), build, run
#   scripts/gpu_check.sh --pack           build, then copy the binaries and the non-system shared
#                                         libraries they load (OpenBLAS, libgomp, ...) into
#                                         build-gpu/pack (~45 MB): for a GPU machine that has the
#                                         CUDA toolkit but not the build dependencies (MPI,
#                                         yaml-cpp, GoogleTest, ...)
#   scripts/gpu_check.sh --prebuilt DIR   run DIR/test_cuda and DIR/bench_* (a pack, or a build's
#                                         bin/) without building; DIR/lib goes first on the
#                                         library path when it exists
#   --memcheck                            also run test_cuda under compute-sanitizer memcheck
# Environment: GPU_BUILD_DIR (default build-gpu), JOBS (default nproc),
# SHARDWISE_CUDA_ARCHITECTURES (default 90: H100 and H200).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
targets=(test_cuda test_cuda_host_emulation test_cuda_mpi bench_mxfp8_cuda bench_adamw_cuda
         bench_newton_schulz_cuda bench_layer_wise_step_cuda)

mode=build prebuilt="" memcheck=0
while (($#)); do
  case $1 in
    --pack) mode=pack ;;
    --prebuilt) mode=prebuilt; prebuilt=${2:?--prebuilt needs a directory}; shift ;;
    --memcheck) memcheck=1 ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

build_targets() {
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDWISE_CUDA=ON \
    -DSHARDWISE_CUDA_ARCHITECTURES="${SHARDWISE_CUDA_ARCHITECTURES:-90}" \
    -DSHARDWISE_BUILD_BENCH=ON -DSHARDWISE_BUILD_APPS=OFF \
    >"$build/configure.log" 2>&1 || {
    tail -20 "$build/configure.log"
    echo "gpu_check: configuring failed (log: $build/configure.log). Without the build" \
      "dependencies here, build elsewhere with --pack and run here with --prebuilt." >&2
    exit 2
  }
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" || {
    echo "gpu_check: the build failed" >&2
    exit 2
  }
}

# Copies the binaries and every shared library they load, except the C library family and the
# CUDA libraries (the GPU machine's own must match its driver).
pack() {
  local dest=$build/pack
  rm -rf "$dest" && mkdir -p "$dest/lib"
  for t in "${targets[@]}"; do cp "$build/bin/$t" "$dest/"; done
  ldd "${targets[@]/#/$build/bin/}" | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libstdc++.so* | \
        libgcc_s.so* | libcuda.so* | libcudart.so* | libcublas*.so*) ;;
      *) cp -L "$lib" "$dest/lib/" ;;
    esac
  done
  echo "gpu_check: packed $(du -sh "$dest" | cut -f1) into $dest"
}

case $mode in
  build) build_targets; bin=$build/bin ;;
  pack) build_targets; pack; exit 0 ;;
  prebuilt)
    bin=$(cd "$prebuilt" && pwd)
    [[ -d $bin/lib ]] && export LD_LIBRARY_PATH=$bin/lib:${LD_LIBRARY_PATH:-}
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/lib
    ;;
esac

logs=$(mktemp -d /tmp/gpu_check.XXXXXX)
passed=0 failed=0 skipped=0
count() { grep -oE "^\[  $1 *\] [0-9]+ test" "$2" | grep -oE '[0-9]+' | head -1 || true; }

# One gtest binary: adds its passed / failed / skipped cases; a crash counts as one failure.
run_tests() {
  local name=$1 log=$logs/$1.log
  shift
  echo "== $name"
  "$@" >"$log" 2>&1
  local rc=$? p f s
  p=$(count PASSED "$log") f=$(count FAILED "$log") s=$(count SKIPPED "$log")
  p=${p:-0} f=${f:-0} s=${s:-0}
  if ((rc != 0 && f == 0)); then f=1; fi
  ((passed += p, failed += f, skipped += s))
  echo "   $p passed, $f failed, $s skipped (exit $rc; log $log)"
  ((f == 0)) || grep -E '^\[  FAILED  \]|Failure|error|Expected|Which is|actual' "$log" | head -40
}

# One benchmark: passes when it exits 0 having measured; its bench: lines are kept for the end.
run_bench() {
  local name=$1 log=$logs/$1.log
  shift
  echo "== $name"
  "$@" >"$log" 2>&1
  local rc=$?
  cat "$log"
  if ((rc != 0)); then
    ((failed += 1))
  elif grep -q 'no CUDA device' "$log"; then
    ((skipped += 1))
  else
    ((passed += 1))
  fi
  grep '^bench:' "$log" >>"$logs/bench_lines" || true
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader
run_tests test_cuda "$bin/test_cuda"
run_tests test_cuda_host_emulation "$bin/test_cuda_host_emulation"
# Device DDP + layer-wise optimizer against the host path, every rank on the one GPU.
for np in 1 2 4; do
  run_tests test_cuda_mpi_np$np env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --oversubscribe -np $np "$bin/test_cuda_mpi"
done
if ((memcheck)); then
  run_tests test_cuda_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/test_cuda"
fi
run_bench bench_mxfp8_cuda "$bin/bench_mxfp8_cuda"
run_bench bench_adamw_cuda "$bin/bench_adamw_cuda"
run_bench bench_newton_schulz_cuda "$bin/bench_newton_schulz_cuda"
run_bench bench_layer_wise_step_cuda env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe -np 1 "$bin/bench_layer_wise_step_cuda"

echo "gpu_check: $skipped skipped"
echo "gpu_check: $passed passed, $failed failed"
[[ -f $logs/bench_lines ]] && cat "$logs/bench_lines"
((failed == 0))
