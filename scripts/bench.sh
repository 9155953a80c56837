#!/usr/bin/env bash
# Runs every benchmark that prints a `bench:` figure (multi-rank ones under scripts/run.sh, as the
# README does) and ends with the 14 figures as one table, the five collective figures against
# the memory bound as a second, the collectives on symmetric memory as a third, then every
# `bench:` line (the tp_overlap_<algorithm>_tp<T>
# step-time ratios of bench_tp_overlap among them; those compare with the same step without
# overlap and name it baseline_off= instead of limit=):
#   bench: <figure-name> ours=<value> limit=<value> unit=<GB/s|GF/s> ratio=<ours/limit>
# Each limit is measured by a probe in the same run (bench/machine_limits.hpp). Sizes keep the
# whole script to a few minutes on a 2-core machine.
#
# Figures whose limit is probed several times print the probes' spread after the ratio
# (probe_min= probe_median= probe_max=; the ratio divides by the best probe).
#
#   scripts/bench.sh [--repeat N] [--figures-only] [BUILD_DIR=build]
#   scripts/bench.sh --table-from LOG [BUILD_DIR=build]   (configure with -DSHARDWISE_BUILD_BENCH=ON)
# --repeat N runs everything N times and the table gives each figure's median ratio over the runs
# (with ours and limit of the median run, every run's ratio, and the probe spread of that run).
# --figures-only runs just the benchmarks behind the table's 14 figures (about half the time: for
# a borrowed machine). --table-from LOG prints the table of an earlier run's log (BENCH_LOG), or of
# several runs' logs joined with cat, without running anything.
# Every step's title line is followed by its wall time ("   step took N s").
# Environment: BENCH_DIR (checkpoint files; default /tmp), BENCH_LOG (full output; default a
# temporary file, kept and named at the end).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { echo "scripts/bench.sh: $1" >&2; exit 2; }
repeat=1 figures_only=0 table_from=""
while [[ ${1:-} == --* ]]; do
  case $1 in
    --repeat)
      repeat=${2:-}
      [[ $repeat =~ ^[1-9][0-9]?$ ]] || usage "--repeat takes 1 to 99, got '$repeat'"
      shift 2 ;;
    --figures-only) figures_only=1; shift ;;
    --table-from)
      table_from=${2:-}
      [[ -r $table_from ]] || usage "--table-from needs a readable log, got '$table_from'"
      shift 2 ;;
    *) usage "unknown option '$1'" ;;
  esac
done
build=${1:-build}
bin=$build/bin
run=$root/scripts/run.sh
if [[ -n $table_from ]]; then
  log=$table_from
  repeat=$(grep -c '^load average before' "$log" || true)
else
  log=${BENCH_LOG:-$(mktemp /tmp/shardwise-bench.XXXXXX.log)}
  : >"$log"
fi

for b in comm_collectives comm_wait ddp_step checkpoint_io mxfp8_codec adamw_step \
         reshard_throughput newton_schulz train_throughput tp_overlap layout_reshard_scaling; do
  [[ -x $bin/bench_$b ]] || { echo "scripts/bench.sh: $bin/bench_$b is missing (build with -DSHARDWISE_BUILD_BENCH=ON)" >&2; exit 2; }
done

step() {  # step "title" command...: runs one bench, its output to the terminal and the log
  echo "== $1" | tee -a "$log"
  shift
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$log"
  echo "   step took $((SECONDS - start)) s" | tee -a "$log"
}

# A step whose output has no figure of the table: left out by --figures-only.
extra_step() { ((figures_only)) || step "$@"; }

run_all() {
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
  step "collectives, 2 ranks, 16 MiB" "$run" 2 -- "$bin/bench_comm_collectives" --numel 4194304 --iters 10
  step "collectives, 4 ranks, 64 MiB" "$run" 4 -- "$bin/bench_comm_collectives" --numel 16777216 --iters 5
  extra_step "communication waits" "$bin/bench_comm_wait"
  step "DDP step, 2 ranks" "$run" 2 -- "$bin/bench_ddp_step" --mode overlap --iters 5
  extra_step "exposed optimizer time, 2 ranks" "$run" 2 -- "$bin/bench_ddp_step" --mode optimizer --iters 5
  step "checkpoint save/load" "$run" 1 -- "$bin/bench_checkpoint_io" "${BENCH_DIR:-/tmp}" 128 5
  step "MXFP8 codec" "$bin/bench_mxfp8_codec" --figures-only
  step "AdamW step" "$bin/bench_adamw_step" --figures-only
  step "reshard, 4 ranks" "$run" 4 -- "$bin/bench_reshard_throughput" --rows 4096 --cols 4096 --params 2 --iters 5
  step "Newton-Schulz" "$bin/bench_newton_schulz" --figures-only
  step "training FLOP/s" "$run" 1 -- "$bin/bench_train_throughput" --figures-only
  extra_step "Muon vs AdamW step" "$run" 1 -- "$bin/bench_train_throughput" --muon-vs-adamw
  extra_step "TP comm overlap, tp 2 and 4" "$run" 4 -- "$bin/bench_tp_overlap" --hidden 1024 --tokens 512 --iters 3
  # layout of a 1M-param spec and reshard of a 1M-tensor file, each also at 1/4 the size (growth_4x:
  # ~4 when linear); needs the CLI next to the benches.
  extra_step "layout and reshard scaling, 1M" "$bin/bench_layout_reshard_scaling" --dir "${BENCH_DIR:-/tmp}"
  # Built with the CUDA kernels: MXFP8 and AdamW on the GPU against a device copy, Newton-Schulz
  # against cuBLAS GEMMs (each says so and exits 0 without a GPU).
  if [[ -x $bin/bench_mxfp8_cuda ]]; then extra_step "MXFP8 on the GPU" "$bin/bench_mxfp8_cuda"; fi
  if [[ -x $bin/bench_adamw_cuda ]]; then extra_step "AdamW on the GPU" "$bin/bench_adamw_cuda"; fi
  if [[ -x $bin/bench_newton_schulz_cuda ]]; then
    extra_step "Newton-Schulz on the GPU" "$bin/bench_newton_schulz_cuda"
  fi
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
}

for ((r = 1; r <= repeat && ${#table_from} == 0; r++)); do
  if ((repeat > 1)); then echo "=== run $r of $repeat" | tee -a "$log"; fi
  run_all
done

# Which CPU the table is from: its name, core count, the kernels' ISA level and OpenBLAS's core.
cpu_name=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
version=$("$bin/shardwise" version 2>/dev/null || true)
cpu_kernels=$(awk -F': *' '/^CPU kernels/ { print $2 }' <<<"$version")
blas_core=$(grep -o 'core=[A-Za-z0-9]*' <<<"$version" || true)
echo
echo "CPU: ${cpu_name:-unknown}, $(nproc) cores, CPU kernels: ${cpu_kernels:-unknown}, OpenBLAS ${blas_core:-core=unknown}; median of $repeat run(s)"
echo "| figure | ours | limit | unit | ratio | ratio of each run | limit probes (min / median / max) |"
echo "|---|---|---|---|---|---|---|"
expected=(reduce_scatter_2r_16MiB all_gather_2r_16MiB reduce_scatter_4r_64MiB all_gather_4r_64MiB
          ddp_step_comm_2r checkpoint_save checkpoint_load mxfp8_quantize_bf16 mxfp8_dequantize_bf16
          mxfp8_quantize_fp32 adamw_step reshard_4r newton_schulz_1t train_flops_3m_dp1)
missing=0
table_row() {  # table_row NAME: the figure's row, or "missing" (and missing=1) when no run has it
  local name=$1 lines
  lines=$(grep -E "^bench: $name " "$log" || true)
  if [[ -z $lines ]]; then
    echo "| $name | missing | | | | | |"
    missing=1
    return
  fi
  # The run with the median ratio (the lower middle one for an even count) gives the row.
  awk -v name="$name" '
    { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = kv[2] }
      ratio[NR] = v[NR, "ratio"]; order[NR] = NR }
    END {
      n = NR
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (ratio[order[j]] < ratio[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
      m = order[int((n + 1) / 2)]
      runs = ""; for (i = 1; i <= n; i++) runs = runs (i > 1 ? ", " : "") ratio[i]
      spread = ((m, "probe_min") in v) ? v[m, "probe_min"] " / " v[m, "probe_median"] " / " v[m, "probe_max"] : "-"
      printf "| %s | %s | %s | %s | %s | %s | %s |\n", name, v[m, "ours"], v[m, "limit"], v[m, "unit"], ratio[m], runs, spread
    }' <<<"$lines"
}
for name in "${expected[@]}"; do table_row "$name"; done
# The same collectives against the memory bound (bench/machine_limits.hpp,
# collective_memory_bound_gbs): where memory, not the wire, bounds them, this says what is left.
echo
echo "The collectives against the memory bound (the ranks' shared STREAM copy x (p-1)/(p(p+1))):"
echo "| figure | ours | limit | unit | ratio | ratio of each run | limit probes (min / median / max) |"
echo "|---|---|---|---|---|---|---|"
for name in reduce_scatter_2r_16MiB all_gather_2r_16MiB reduce_scatter_4r_64MiB \
            all_gather_4r_64MiB ddp_step_comm_2r; do
  table_row "${name}_of_memory_bound"
done
# The same collectives on symmetric memory (bench_comm_collectives' buffers allocated with
# allocate_symmetric_memory, so they run in place, as DDP's buffers do by default), and DDP's
# grad reduce-scatter with ddp.symmetric_buffers off for comparison.
echo
echo "The collectives on symmetric memory (in place; DDP's default), and DDP with private buffers:"
echo "| figure | ours | limit | unit | ratio | ratio of each run | limit probes (min / median / max) |"
echo "|---|---|---|---|---|---|---|"
for name in reduce_scatter_2r_16MiB_symmetric all_gather_2r_16MiB_symmetric \
            reduce_scatter_4r_64MiB_symmetric all_gather_4r_64MiB_symmetric \
            ddp_step_comm_2r_private_buffers; do
  table_row "$name"
done
echo
grep -E '^bench: ' "$log" | awk '!seen[$2]++' || true
echo "full output: $log"
exit $missing
