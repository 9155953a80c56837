"""Trains a GPT written in plain PyTorch on shardwise's built-in addition task with the shardwise
engine (DDP buffers + layer-wise Muon/AdamW over MPI) as a torch optimizer (sw.muon_megatron or
sw.AdamW, clip_grad_norm_, the lr set in param_groups):

    PYTHONPATH=build/python mpirun -np 4 --oversubscribe /usr/bin/python3 examples/torch/train_gpt.py

Same model, data, schedule and hyperparameters as `shardwise train --config examples/default.yaml`
(the main job); the log lines look like the CLI's. --save/--load read and write the CLI's
checkpoint format (also across dp sizes and between this script and the CLI).
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import torch

import shardwise.torch as sw
from shardwise._core import SyntheticTask

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--micro-batch-size", type=int, default=16, help="samples per rank per step")
    p.add_argument("--kind", default="layer-wise",
                   help="layer-wise | distributed | ddp | legacy-layer-wise")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--muon-lr", type=float, default=2e-3)
    p.add_argument("--warmup-steps", type=int, default=50)
    p.add_argument("--bucket-size", type=int, default=16384)
    p.add_argument("--eval-interval", type=int, default=200)
    p.add_argument("--log-interval", type=int, default=50)
    p.add_argument("--seed", type=int, default=1234, help="model and data seed")
    p.add_argument("--save", default="", help="checkpoint root (saved after the last step)")
    p.add_argument("--save-interval", type=int, default=0)
    p.add_argument("--load", default="", help="resume from a checkpoint root or step directory")
    p.add_argument("--log-jsonl", default="", help="rank 0: one JSON object per step")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=256)
    return p.parse_args()


def learning_rate(step, args):
    """Linear warm-up, then cosine decay to min_lr (the CLI's schedule)."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    decay = max(1, args.steps - args.warmup_steps - 1)
    progress = min(max((step - args.warmup_steps) / decay, 0.0), 1.0)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * progress))


def make_optimizer(ddp, args):
    """The CLI's optimizer as a torch optimizer: Megatron's Muon (lr muon_lr) on the hidden
    matrices and AdamW (lr) on the rest for the layer-wise kinds, AdamW everywhere otherwise;
    weight decay 0.01. Clipping at 1.0 is clip_grad_norm_ in the loop, as the CLI clips."""
    if ddp.kind in ("layer-wise", "legacy-layer-wise"):
        return sw.muon_megatron(ddp.parameters(), lr=args.muon_lr, adamw_lr=args.lr,
                                weight_decay=0.01, adamw_weight_decay=0.01)
    return sw.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.01)


def set_schedule(opt, factor):
    """Every group's lr at `factor` times its initial lr (Muon's and AdamW's follow together)."""
    for group in opt.param_groups:
        group.setdefault("initial_lr", group["lr"])
        group["lr"] = group["initial_lr"] * factor


def evaluate(model, ddp, data, dp, rank):
    """Held-out loss and exact-match accuracy; each rank scores its slice of the held-out set."""
    n = data.validation_size
    lo, hi = n * rank // dp, n * (rank + 1) // dp
    loss_sum = correct = 0.0
    with torch.no_grad():
        for first in range(lo, hi, 64):
            count = min(64, hi - first)
            tokens, targets = (torch.from_numpy(a) for a in data.fill(True, first, count))
            loss_sum += model(tokens, targets).item() * count
            correct += model.exact_match(tokens, targets).sum().item()
    total = ddp.engine.all_reduce_sum(hi - lo)
    return (ddp.engine.all_reduce_sum(loss_sum) / total,
            ddp.engine.all_reduce_sum(correct) / total)


def log(*parts):
    if sw.rank == 0:
        print(*parts, flush=True)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    rss_after_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    data = SyntheticTask("addition", 3, args.seed, 256)
    # Built on the meta device: the weights only ever exist in shardwise's param buffer.
    model = GPT(data.vocab_size, data.seq_len, layers=args.layers, hidden=args.hidden,
                heads=args.heads, ffn=args.ffn, device="meta")
    ddp = sw.DistributedDataParallel(model, bucket_size=args.bucket_size, optimizer=args.kind)
    model.init_parameters(args.seed)
    opt = make_optimizer(ddp, args)
    dp, rank = ddp.engine.dp_size, sw.rank
    mbs = args.micro_batch_size
    global_batch = mbs * dp
    n_params = sum(p.numel() for p in model.parameters())
    log(f"train_gpt: {data.describe()}")
    log(f"model: GPT {args.layers} layers, hidden {args.hidden}, vocab {data.vocab_size}, "
        f"seq {data.seq_len} "
        f"({n_params} parameters); dp={dp}, optimizer={ddp.kind}, global batch {global_batch}")

    start, consumed = 0, 0
    if args.load:
        loaded = sw.load_checkpoint(args.load, ddp, opt)
        start, consumed = loaded["step"], loaded["consumed_samples"]
        log(f"resumed from '{loaded['directory']}' at step {start} ({consumed} samples consumed)")
    metrics = open(args.log_jsonl, "w") if args.log_jsonl and rank == 0 else None

    def save(step):
        path = sw.save_checkpoint(args.save, ddp, opt, step, consumed_samples=consumed,
                                  extra={"global_batch": global_batch, "script": "train_gpt.py"})
        log(f"saved checkpoint '{path}'")

    t_train = time.perf_counter()
    for step in range(start, args.steps):
        t0 = time.perf_counter()
        lr = learning_rate(step, args)
        set_schedule(opt, lr / args.lr)
        opt.zero_grad(set_to_none=True)
        tokens, targets = (torch.from_numpy(a) for a in
                           data.fill(False, consumed + rank * mbs, mbs))
        loss = model(tokens, targets)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        consumed += global_batch
        mean_loss = sw.all_reduce_mean(ddp, loss.item())
        ms = (time.perf_counter() - t0) * 1e3
        done = step + 1
        if metrics:
            metrics.write(json.dumps({"step": done, "loss": mean_loss,
                                      "grad_norm": grad_norm, "lr": lr,
                                      "step_ms": ms}) + "\n")
        if args.log_interval and (done % args.log_interval == 0 or done == args.steps):
            tok_s = global_batch * data.seq_len / (ms / 1e3)
            log(f"step {done}/{args.steps} | loss {mean_loss:.6g} | grad_norm "
                f"{grad_norm:.6g} | lr {lr:.6g} | {tok_s:.0f} tok/s | {ms:.3f} ms")
        if args.eval_interval and done % args.eval_interval == 0 and done != args.steps:
            eval_loss, acc = evaluate(model, ddp, data, dp, rank)
            log(f"eval step {done}: loss {eval_loss:.6g}, exact-match accuracy {acc * 100:.4g}%")
        if args.save and ((args.save_interval and done % args.save_interval == 0)
                          or done == args.steps):
            save(done)
    train_seconds = time.perf_counter() - t_train
    eval_loss, acc = evaluate(model, ddp, data, dp, rank)
    log(f"final: held-out loss {eval_loss:.6g}, exact-match accuracy {acc * 100:.4g}% "
        f"({args.steps - start} steps in {train_seconds:.1f} s)")
    report_memory(ddp, rss_after_imports)
    if metrics:
        metrics.close()


def report_memory(ddp, rss_after_imports_kib):
    """Peak RSS of this rank against what the training state itself needs."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before anything below allocates
    state_floats = ddp.engine.state_numel()
    buffers = ddp.engine.buffer_bytes()
    log(f"memory (rank 0): peak RSS {peak / 1024:.1f} MiB, of which {rss_after_imports_kib / 1024:.1f}"
        f" MiB before the model existed (Python + torch + MPI); param+grad buffers "
        f"{buffers / 2**20:.3f} MiB, optimizer state {state_floats * 4 / 2**20:.3f} MiB; growth "
        f"{(peak - rss_after_imports_kib) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
