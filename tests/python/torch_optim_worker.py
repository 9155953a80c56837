"""Multi-rank worker of test_torch_optim.py: the same training script twice on a fixed global
batch of 8 (8/dp samples per rank), once as plain torch (the full batch on every rank: what
torch DDP's averaged grads give) + torch.optim.AdamW and once on shardwise (only the wrapper and
optimizer lines differ), both with "no decay on biases and norms" groups and a OneCycleLR.
Rank 0 writes the per-step losses of both to OUT.npz."""

import copy
import sys

import numpy as np
import torch

import shardwise.torch as sw
from models import TinyNet, batch

GLOBAL_BATCH, STEPS = 8, 20


def groups(model):
    return [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]


def train(model, opt, rank, dp, mean):
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=STEPS)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model(*batch(step, GLOBAL_BATCH, rank, dp))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(mean(loss.item()))
    return losses


def main(out):
    torch_model = TinyNet(seed=0)
    model = copy.deepcopy(torch_model)
    expected = train(torch_model, torch.optim.AdamW(groups(torch_model)), 0, 1, float)
    ddp = sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(groups(model))
    got = train(model, opt, sw.rank, ddp.engine.dp_size, lambda v: sw.all_reduce_mean(ddp, v))
    if sw.rank == 0:
        np.savez(out, expected=np.array(expected), got=np.array(got))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
