#!/usr/bin/env bash
# AdamW vs Muon on the main job's task (examples/default.yaml: 3-digit addition, 600 steps,
# global batch 64), each optimizer at its own best learning rate: a small lr sweep per optimizer
# over 3 seeds (model init and data order), then a table of held-out exact match and loss.
#   AdamW everywhere:  optimizer.kind=distributed, sweeping optimizer.lr
#   Muon + AdamW:      optimizer.kind=layer-wise, sweeping optimizer.muon_lr (AdamW lr for the
#                      embeddings, norms and biases stays at the config's 0.003)
# The best lr of each optimizer is the one with the highest mean exact match over the seeds.
# Runs one rank with grad_accumulation=4, which gives the same global batch (and, up to fp32
# summation order, the same training) as the main job's 4 ranks; SHARDWISE_RANKS=R runs R ranks
# with 4/R accumulation. Extra arguments are passed to every run (e.g. training.steps=300).
# Environment: ADAMW_LRS, MUON_LRS, SEEDS (space-separated) replace the defaults below.
# Takes 18 runs of the main job: about 8 minutes of one core on an idle 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
adamw_lrs=(${ADAMW_LRS:-0.003 0.005 0.008})
muon_lrs=(${MUON_LRS:-0.001 0.002 0.004})
seeds=(${SEEDS:-1234 1235 1236})
ranks=${SHARDWISE_RANKS:-1}
(( 4 % ranks == 0 )) || { echo "compare_optimizers: SHARDWISE_RANKS must divide 4" >&2; exit 2; }
out=out/compare_optimizers
rm -rf "$out"
mkdir -p "$out"

run() {  # run NAME OVERRIDES...: one training run, metrics in $out/NAME.jsonl
  local name=$1
  shift
  local launcher=()
  if ((ranks > 1)); then launcher=(mpirun -np "$ranks" --oversubscribe); fi
  echo "compare_optimizers: $name"
  if ! "${launcher[@]}" build/bin/shardwise train --config examples/default.yaml \
    training.grad_accumulation=$((4 / ranks)) training.eval_interval=0 logging.progress=false \
    logging.log_interval=100 --log-jsonl "$out/$name.jsonl" "$@" "${extra[@]}" \
    >"$out/$name.log" 2>&1; then
    echo "compare_optimizers: run $name failed:" >&2
    tail -5 "$out/$name.log" >&2
    exit 1
  fi
}

extra=("$@")
for seed in "${seeds[@]}"; do
  for lr in "${adamw_lrs[@]}"; do
    run "adamw_lr${lr}_seed${seed}" optimizer.kind=distributed optimizer.lr="$lr" \
      model.seed="$seed" training.seed="$seed"
  done
  for lr in "${muon_lrs[@]}"; do
    run "muon_lr${lr}_seed${seed}" optimizer.kind=layer-wise optimizer.muon_lr="$lr" \
      model.seed="$seed" training.seed="$seed"
  done
done

python3 - "$out" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
runs = {}  # (optimizer, lr) -> {seed: (accuracy, eval_loss)}
for path in sorted(glob.glob(f"{out}/*.jsonl")):
    opt, lr, seed = re.match(r"(\w+?)_lr([\d.]+)_seed(\d+)\.jsonl", os.path.basename(path)).groups()
    final = [r for r in map(json.loads, open(path)) if "eval_loss" in r][-1]
    runs.setdefault((opt, float(lr)), {})[int(seed)] = (final["accuracy"], final["eval_loss"])
seeds = sorted({s for r in runs.values() for s in r})
names = {"adamw": "AdamW (kind=distributed), lr", "muon": "Muon (kind=layer-wise), muon_lr"}
print("| optimizer, learning rate | " + " | ".join(f"seed {s}" for s in seeds) +
      " | mean exact match | mean held-out loss |")
print("|---|" + "---|" * (len(seeds) + 2))
best = {}
for (opt, lr), r in sorted(runs.items()):
    acc = statistics.mean(a for a, _ in r.values())
    loss = statistics.mean(l for _, l in r.values())
    if opt not in best or acc > best[opt][1]:
        best[opt] = (lr, acc)
    cells = " | ".join(f"{100 * r[s][0]:.1f}%" if s in r else "-" for s in seeds)
    print(f"| {names[opt]} {lr:g} | {cells} | {100 * acc:.1f}% | {loss:.4f} |")
print()
for opt, (lr, acc) in sorted(best.items()):
    print(f"best {names[opt]} {lr:g}: mean held-out exact match {100 * acc:.1f}% over "
          f"{len(seeds)} seeds")
PY
