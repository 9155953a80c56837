"""Training runs for the overlapped param-gather tests, and their multi-rank worker.

Run as `mpirun -np N python3 param_gather_worker.py OUT.json`: every model of layer_models at
every bucket size trains with shardwise at dp=N (kind distributed against plain torch AdamW on the
global batch; layer-wise with overlapped gathers against layer-wise gathering inside step()).
Rank 0 writes the largest loss and param differences of each case to OUT.json.
"""

import json
import sys

import torch

import shardwise.torch as sw
from layer_models import EPS, MODELS, STEPS, VOCAB, AttentionNet, fresh
from models import batch

BUCKET_SIZES = [4096, 1500, 600]
GLOBAL_BATCH = 8


def train_shardwise(model, steps=STEPS, peek=None, **ddp_options):
    """(per-step mean losses over the ranks, final params, bucket groups) of a shardwise run.
    peek(model), when given, runs on rank 0 only after every step (a rank-local param read)."""
    ddp = sw.DistributedDataParallel(model, **ddp_options)
    opt = sw.make_optimizer(ddp, lr=1e-2, muon_lr=2e-2, weight_decay=0.1, eps=EPS, clip_grad=0)
    dp = ddp.engine.dp_size
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = model(*batch(step, GLOBAL_BATCH, sw.rank, dp, vocab=VOCAB))
        loss.backward()
        opt.step()
        if peek is not None and sw.rank == 0:
            peek(model)
        losses.append(sw.all_reduce_mean(ddp, loss.item()))
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    return losses, params, ddp.engine.num_bucket_groups()


def train_torch(model, steps=STEPS):
    """The same steps with torch.optim.AdamW on the global batch."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, eps=EPS)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = model(*batch(step, GLOBAL_BATCH, vocab=VOCAB))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


def differences(got, want):
    """(largest relative loss difference, largest param difference) of two runs."""
    loss = max(abs(a - b) / abs(b) for a, b in zip(got[0], want[0]))
    param = max((got[1][n] - p).abs().max().item() for n, p in want[1].items())
    return loss, param


def main(out):
    report = {}
    for model_class in MODELS:
        reference = train_torch(fresh(model_class))
        for bucket_size in BUCKET_SIZES:
            run = train_shardwise(fresh(model_class), bucket_size=bucket_size,
                                  optimizer="distributed", overlap_grad_reduce=True,
                                  overlap_param_gather=True)
            overlap = train_shardwise(fresh(model_class), bucket_size=bucket_size,
                                     overlap_grad_reduce=True, overlap_param_gather=True)
            sync = train_shardwise(fresh(model_class), bucket_size=bucket_size,
                                   overlap_param_gather=False)
            report[f"{model_class.__name__}/{bucket_size}"] = {
                "groups": run[2],
                "distributed_vs_torch": differences(run, reference),
                "layer_wise_overlap_vs_sync": differences(overlap, sync),
            }
    # Rank 0 alone reads the output head (the last group in forward order) right after each
    # step: its gathers must still be issued in the same order as on the other ranks.
    reference = train_torch(fresh(AttentionNet))
    run = train_shardwise(fresh(AttentionNet), bucket_size=600, optimizer="distributed",
                          peek=lambda model: model.head.weight.sum().item(), comm_timeout=60,
                          overlap_grad_reduce=True, overlap_param_gather=True)
    report["rank_local_read"] = {"groups": run[2],
                                 "distributed_vs_torch": differences(run, reference)}
    if sw.rank == 0:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
