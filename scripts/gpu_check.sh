#!/usr/bin/env bash
# Builds what the GPU code needs, runs every GPU test (test_cuda: MXFP8, AdamW, Newton-Schulz,
# Muon, grad stats, the device GPT's forward and backward, each against the CPU path;
# test_cuda_host_emulation, the same host code on CPU stand-ins; test_nccl_mpi, the NCCL process
# group at 1 and 2 ranks; test_cuda_mpi under mpirun -np 1/2/4, device DDP + layer-wise optimizer
# against the host path with fp32 / bf16 / fp16 param buffers and MXFP8 refit quantized on the
# GPU against the CPU transform, every rank on the one GPU) and every GPU benchmark (bench/cuda),
# and
# ends with
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
#                                         CUDA toolkit but not the build dependencies (yaml-cpp,
#                                         GoogleTest, ...). MPI and NCCL stay out: the GPU
#                                         machines here have Open MPI 4.1 (ABI-compatible with
#                                         Debian's) and NCCL in the PyTorch wheel's nvidia-nccl
#   scripts/gpu_check.sh --pack-from DIR  the same pack from an existing build's DIR/bin (e.g. the
#                                         release build/, which builds the CUDA targets whenever
#                                         nvcc is found), without configuring or building
#   scripts/gpu_check.sh --prebuilt DIR   run DIR/test_cuda and DIR/bench_* (a pack, or a build's
#                                         bin/) without building; DIR/lib goes first on the
#                                         library path when it exists
#   --memcheck                            also run test_cuda under compute-sanitizer memcheck
#   --train-only                          only the `shardwise train` checks (run_train_checks)
#   --cpu-bench N                         instead of the GPU checks: scripts/bench.sh
#                                         --figures-only --repeat N on the same binaries, pinned
#                                         to two cores (taskset -c 0,1: the 2-core hosts its
#                                         goals are set for), then an alternated A/B of the
#                                         single-copy all-gather: the AVX-512 column from a GPU
#                                         machine's Xeon (~9 min for N = 3, so a call of its own);
#                                         the pack needs the CPU benches (GPU_PACK_EXTRA,
#                                         docs/gpu.md)
# Environment: GPU_BUILD_DIR (default build-gpu), JOBS (default nproc), GPU_PACK_EXTRA (more
# binaries of the build to pack, e.g. "test_core bench_mxfp8_codec" for CPU checks there),
# SHARDWISE_CUDA_ARCHITECTURES (default 90: H100 and H200), GPU_TRAIN_RUN_LIMIT (seconds each
# `shardwise train` run of run_train_checks may take, default 240).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
targets=(test_cuda test_cuda_host_emulation test_nccl_mpi test_cuda_mpi bench_mxfp8_cuda
         bench_adamw_cuda bench_newton_schulz_cuda bench_layer_wise_step_cuda bench_train_mfu_cuda
         shardwise)

mode=build prebuilt="" memcheck=0 train_only=0 cpu_bench=0
while (($#)); do
  case $1 in
    --pack) mode=pack ;;
    --pack-from) mode=pack_from; build=$(cd "${2:?--pack-from needs a build directory}" && pwd); shift ;;
    --prebuilt) mode=prebuilt; prebuilt=${2:?--prebuilt needs a directory}; shift ;;
    --memcheck) memcheck=1 ;;
    --train-only) train_only=1 ;;
    --cpu-bench)
      cpu_bench=${2:-}
      [[ $cpu_bench =~ ^[1-9]$ ]] || { echo "gpu_check: --cpu-bench takes 1 to 9, got '$cpu_bench'" >&2; exit 2; }
      shift ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

build_targets() {
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDWISE_CUDA=ON \
    -DSHARDWISE_CUDA_ARCHITECTURES="${SHARDWISE_CUDA_ARCHITECTURES:-90}" \
    -DSHARDWISE_BUILD_BENCH=ON -DSHARDWISE_BUILD_APPS=ON \
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

# Copies the binaries and every shared library they load, except the C library family, the CUDA
# libraries (the GPU machine's own must match its driver), and MPI and NCCL (the GPU machine's own
# runtimes: a packed libmpi would load the machine's MPI plugins of another build).
pack() {
  local dest=${GPU_PACK_DIR:-$root/build-gpu/pack}
  rm -rf "$dest" && mkdir -p "$dest/lib"
  local packed=("${targets[@]}" ${GPU_PACK_EXTRA:-})
  # Stripped: the pack and what else a run carries must stay within the device tool's 64 MiB.
  for t in "${packed[@]}"; do strip --strip-unneeded -o "$dest/$t" "$build/bin/$t"; done
  ldd "${packed[@]/#/$build/bin/}" | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libstdc++.so* | \
        libgcc_s.so* | libcuda.so* | libcudart.so* | libcublas*.so* | libnccl.so* | libmpi*.so* | \
        libopen-pal.so* | libopen-rte.so* | libevent*.so* | libhwloc.so* | libpmix.so* | libudev.so* | \
        libz.so*) ;;
      *) cp -L "$lib" "$dest/lib/" ;;
    esac
  done
  echo "gpu_check: packed $(du -sh "$dest" | cut -f1) into $dest"
}

case $mode in
  build) build_targets; bin=$build/bin ;;
  pack) build_targets; pack; exit 0 ;;
  pack_from) pack; exit 0 ;;
  prebuilt)
    bin=$(cd "$prebuilt" && pwd)
    [[ -d $bin/lib ]] && export LD_LIBRARY_PATH=$bin/lib:${LD_LIBRARY_PATH:-}
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/lib
    # NCCL where the machine has it only in PyTorch's wheel (nvidia-nccl).
    nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' \
      2>/dev/null) && [[ -d $nccl ]] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$nccl
    ;;
esac

logs=$(mktemp -d /tmp/gpu_check.XXXXXX)
passed=0 failed=0 skipped=0
count() {  # gtest's summary count of $1 in log $2 (colour codes, which mpirun lets through, removed)
  sed 's/\x1b\[[0-9;]*m//g' "$2" | grep -oE "^\[  $1 *\] [0-9]+ test" | grep -oE '[0-9]+' | head -1 || true
}

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

# One multi-rank gtest binary under mpirun (ranks share the machine's GPUs):
#   run_mpi_tests NAME NP BINARY [ARGS...]
run_mpi_tests() {
  local name=$1 np=$2
  shift 2
  run_tests "$name" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe -np "$np" "$@"
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

# `shardwise train` with training.device: cuda against the CPU (scripts/gpu_train_check.py): the
# main job at 1 rank in fp32 (parity with the CPU run), at 4 ranks sharing the GPU in fp32 and at
# 2 in bf16 (100% held-out exact match); a CPU checkpoint resumed on the GPU and that run's checkpoint resumed
# on the CPU, each continuing where the other was; the text example in bf16 at the CPU run's bits
# per byte (needs data/fortunes from scripts/prepare_fortunes.py; skipped without it).
run_train_checks() {
  local out=$logs/train sw=$bin/shardwise cfg=$root/examples/default.yaml
  local check=$root/scripts/gpu_train_check.py
  local mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
             OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe)
  mkdir -p "$out"
  if ! "$sw" version >/dev/null 2>&1; then
    echo "== train: no shardwise binary in $bin"; ((failed += 1)); return
  fi
  # The 1-rank runs at the README's global batch (4 micro-batches of 16): at a batch of 16 alone
  # the held-out result of a 600-step run is luck (scripts/gpu_train_check.py says how much).
  local ga=training.grad_accumulation=4
  train_run cpu "$sw" train --config "$cfg" $ga --save "$out/ck_cpu" --save-interval 300 || return
  train_run gpu_fp32 "$sw" train --config "$cfg" $ga training.device=cuda || return
  train_check python3 "$check" parity "$out/cpu.jsonl" "$out/gpu_fp32.jsonl"
  # The README's main job (4 ranks, global batch 64), every rank on the one GPU.
  train_run gpu_fp32_np4 "${mpi[@]}" -np 4 "$sw" train --config "$cfg" training.device=cuda &&
    train_check python3 "$check" accuracy "$out/gpu_fp32_np4.jsonl"
  train_run gpu_bf16_np2 "${mpi[@]}" -np 2 "$sw" train --config "$cfg" training.device=cuda \
    training.precision=bf16 && train_check python3 "$check" accuracy "$out/gpu_bf16_np2.jsonl"
  train_run gpu_resumed "$sw" train --config "$cfg" $ga training.device=cuda --load "$out/ck_cpu" \
    --load-step 300 --save "$out/ck_gpu" --save-interval 450 &&
    train_check python3 "$check" same_step "$out/cpu.jsonl" "$out/gpu_resumed.jsonl" 301 &&
    train_run cpu_resumed "$sw" train --config "$cfg" $ga --load "$out/ck_gpu" --load-step 450 &&
    train_check python3 "$check" same_step "$out/gpu_resumed.jsonl" "$out/cpu_resumed.jsonl" 451
  if [[ -f $root/data/fortunes/train.bin ]]; then
    pushd "$root" >/dev/null  # the config's data paths are relative to the repository root
    train_run text_bf16_np2 "${mpi[@]}" -np 2 "$sw" train --config examples/text.yaml \
      training.device=cuda training.precision=bf16 --save "$out/ck_text" --plot "$out/text.svg" &&
      train_check python3 "$check" bits_per_byte "$out/text_bf16_np2.jsonl" 2.39 0.05 &&
      train_check "$sw" generate --checkpoint "$out/ck_text" --prompt "The " --tokens 80
    popd >/dev/null
  else
    # Without data/fortunes (ignored by git, so not in a copy of the tree): a short byte-level
    # run on the repository's tiny corpus, so generate still samples from a GPU-trained checkpoint.
    train_run text_tiny "$sw" train --config "$cfg" training.device=cuda data.source=text \
      data.path="$root/examples/data/tiny_corpus.txt" model.seq_len=32 training.steps=30 \
      training.eval_interval=0 --save "$out/ck_tiny" &&
      train_check "$sw" generate --checkpoint "$out/ck_tiny" --prompt "The " --tokens 16 --seed 1
  fi
}

# train_run NAME COMMAND...: one training run, its metrics in $logs/train/NAME.jsonl; a failed
# run counts one failure.
train_run() {
  local name=$1 log=$logs/train/$1.log
  shift
  echo "== train $name"
  local start=$SECONDS
  # A hang must not eat the GPU session: each run is stopped after GPU_TRAIN_RUN_LIMIT seconds.
  if timeout -k 10 "${GPU_TRAIN_RUN_LIMIT:-240}" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    "$@" --log-jsonl "$logs/train/$name.jsonl" --progress off >"$log" 2>&1; then
    echo "   done in $((SECONDS - start)) s: $(grep -E '(^|\] )(device|done):' "$log" | tr '\n' ' ')"
    return 0
  fi
  ((failed += 1))
  echo "   FAILED (log $log):"
  tail -15 "$log"
  return 1
}

# train_check COMMAND...: its ok / FAIL lines count one pass / failure each; a command that fails
# without printing FAIL counts one failure.
train_check() {
  local text rc
  text=$("$@" 2>&1)
  rc=$?
  echo "$text" | sed 's/^/   /'
  local ok bad
  ok=$(grep -c '^ok:' <<<"$text")
  bad=$(grep -c '^FAIL:' <<<"$text")
  if ((rc == 0 && ok == 0 && bad == 0)); then ok=1; fi
  if ((rc != 0 && bad == 0)); then bad=1; fi
  ((passed += ok, failed += bad))
  ((bad == 0))
}

# scripts/bench.sh on two cores of this machine, then the single-copy all-gather A/B.
run_cpu_bench() {
  local bench_build pin pass single np_numel
  # bench.sh reads BUILD_DIR/bin; a pack is the bin directory itself.
  bench_build=$(mktemp -d /tmp/gpu_check_bench.XXXXXX)
  ln -s "$bin" "$bench_build/bin"
  pin=(taskset -c 0,1)
  command -v taskset >/dev/null || { pin=(); echo "gpu_check: no taskset here, CPU benches unpinned"; }
  echo "== CPU benchmarks (scripts/bench.sh --figures-only --repeat $cpu_bench, ${pin[*]:-unpinned})"
  # No MPI core binding: the ranks keep the two cores taskset gives them.
  local pinned=(env OMPI_MCA_hwloc_base_binding_policy=none "${pin[@]}")
  "${pinned[@]}" "$root/scripts/bench.sh" --figures-only --repeat "$cpu_bench" "$bench_build" \
    >"$logs/cpu_bench.log" 2>&1
  echo "   scripts/bench.sh exit $?; full output $logs/cpu_bench.log"
  sed -n '/^CPU: /,/^$/p' "$logs/cpu_bench.log"
  # The opt-in single-copy all-gather (docs/collectives.md) against the segment, alternated.
  echo "== single-copy all-gather A/B (2 ranks 16 MiB, 4 ranks 64 MiB; SHARDWISE_SINGLE_COPY=1 / 0)"
  for pass in 1 2; do
    for single in 1 0; do
      for np_numel in "2 4194304" "4 16777216"; do
        set -- $np_numel
        SHARDWISE_SINGLE_COPY=$single "${pinned[@]}" "$root/scripts/run.sh" "$1" -- \
          "$bin/bench_comm_collectives" --numel "$2" --iters 5 2>&1 |
          grep -E '^bench: all_gather' | sed "s/^/   single_copy=$single pass $pass: /"
      done
    done
  done
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader
if ((cpu_bench)); then
  run_cpu_bench
  exit 0
fi
if ((train_only)); then
  run_train_checks
  echo "gpu_check: $passed passed, $failed failed"
  exit $((failed > 0))
fi
run_tests test_cuda "$bin/test_cuda"
run_tests test_cuda_host_emulation "$bin/test_cuda_host_emulation"
# The NCCL group (tests/nccl/mpi): one rank runs every collective and the watchdog; two ranks
# each take a GPU, or share the only one (the own-GPU check says so and the collectives skip).
run_mpi_tests test_nccl_mpi_np1 1 "$bin/test_nccl_mpi"
run_mpi_tests test_nccl_mpi_np2 2 "$bin/test_nccl_mpi"
# Device DDP + layer-wise optimizer against the host path (fp32, bf16 and fp16 param buffers) and
# MXFP8 refit on the GPU against the CPU transform, every rank on the one GPU (host-staged MPI
# collectives).
for np in 1 2 4; do
  run_mpi_tests test_cuda_mpi_np$np $np "$bin/test_cuda_mpi"
done
if ((memcheck)); then
  run_tests test_cuda_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/test_cuda"
fi
run_bench bench_mxfp8_cuda "$bin/bench_mxfp8_cuda"
run_bench bench_adamw_cuda "$bin/bench_adamw_cuda"
run_bench bench_newton_schulz_cuda "$bin/bench_newton_schulz_cuda"
run_bench bench_layer_wise_step_cuda env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe -np 1 \
  "$bin/bench_layer_wise_step_cuda"
# The device GPT (GPT-2 small, bf16 GEMMs): one micro-batch of 8 x 1024, 5 timed steps.
run_bench bench_train_mfu_cuda "$bin/bench_train_mfu_cuda" 8 5 bf16

run_train_checks

echo "gpu_check: $skipped skipped"
echo "gpu_check: $passed passed, $failed failed"
[[ -f $logs/bench_lines ]] && cat "$logs/bench_lines"
((failed == 0))
