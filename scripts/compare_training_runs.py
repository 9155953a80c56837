#!/usr/bin/env python3
"""Compares the metrics JSONL files of `shardwise train` runs (scripts/gpu_train_check.sh).

  compare_training_runs.py accuracy RUN.jsonl [MIN]
      the run's last held-out evaluation reached exact-match accuracy >= MIN (default 1.0)
  compare_training_runs.py steps REF.jsonl RUN.jsonl FIRST LAST TOL
      loss and grad_norm of steps FIRST..LAST: |run - ref| <= k * TOL * |ref| at the k-th step
      compared (k = 1 at FIRST), the growth the device GPT's SGD test allows per step
  compare_training_runs.py curve REF.jsonl RUN.jsonl WINDOW ENVELOPE
      every WINDOW-step mean loss of RUN within ENVELOPE (relative) of REF's
Prints what it measured (the largest differences) and exits 1 when a check fails.
"""
import json
import sys


def read(path):
    steps, evals = {}, []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "accuracy" in record:
                evals.append(record)
            elif "loss" in record:
                steps[record["step"]] = record
    return steps, evals


def accuracy(path, minimum=1.0):
    _, evals = read(path)
    if not evals:
        print(f"{path}: no held-out evaluation")
        return False
    last = evals[-1]
    print(f"{path}: step {last['step']} held-out exact match {last['accuracy']:.6f}, "
          f"loss {last['eval_loss']:.6g} (need >= {minimum})")
    return last["accuracy"] >= minimum


def steps(ref_path, run_path, first, last, tol):
    ref, _ = read(ref_path)
    run, _ = read(run_path)
    ok = True
    for key in ("loss", "grad_norm"):
        worst = 0.0
        for k, step in enumerate(range(first, last + 1), start=1):
            if step not in ref or step not in run:
                print(f"step {step} missing in {ref_path if step not in ref else run_path}")
                return False
            a, b = run[step][key], ref[step][key]
            rel = abs(a - b) / abs(b)
            worst = max(worst, rel / k)
            if rel > k * tol:
                print(f"step {step} {key}: {a!r} vs {b!r}: relative {rel:.3g} > {k} x {tol:.3g}")
                ok = False
        print(f"steps {first}-{last} {key}: largest relative difference / k = {worst:.3g} "
              f"(tolerance {tol:.3g})")
    return ok


def curve(ref_path, run_path, window, envelope):
    ref, _ = read(ref_path)
    run, _ = read(run_path)
    last = max(ref)
    if max(run) != last:
        print(f"{run_path} ends at step {max(run)}, {ref_path} at {last}")
        return False
    worst, ok = 0.0, True
    for start in range(1, last + 1, window):
        window_steps = range(start, min(start + window, last + 1))
        a = sum(run[s]["loss"] for s in window_steps) / len(window_steps)
        b = sum(ref[s]["loss"] for s in window_steps) / len(window_steps)
        rel = abs(a - b) / abs(b)
        worst = max(worst, rel)
        if rel > envelope:
            print(f"steps {start}-{window_steps[-1]}: mean loss {a:.6g} vs {b:.6g} "
                  f"(relative {rel:.3g} > {envelope})")
            ok = False
    print(f"{window}-step mean losses: largest relative difference {worst:.3g} "
          f"(envelope {envelope})")
    return ok


def main(argv):
    if len(argv) >= 2 and argv[0] == "accuracy":
        return accuracy(argv[1], float(argv[2]) if len(argv) > 2 else 1.0)
    if len(argv) == 6 and argv[0] == "steps":
        return steps(argv[1], argv[2], int(argv[3]), int(argv[4]), float(argv[5]))
    if len(argv) == 5 and argv[0] == "curve":
        return curve(argv[1], argv[2], int(argv[3]), float(argv[4]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
