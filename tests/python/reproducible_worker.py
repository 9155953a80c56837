"""Multi-rank worker of test_torch_reproducible.py: a global batch of MICROS micro-batches of
MICRO samples, micro-batch g on rank g % dp (its (g // dp)-th), all but each rank's last under
no_sync(); sw.DistributedDataParallel(reproducible_reduction=True) + clip_grad_norm_ + sw.AdamW.
Rank 0 writes the per-step losses and final weights to OUT.npz."""

import sys

import numpy as np
import torch

import shardwise.torch as sw
from models import TinyNet

MICRO, MICROS, STEPS, VOCAB, SEQ = 4, 4, 6, 17, 6


def micro_batch(step, g):
    gen = torch.Generator().manual_seed(100 * step + g)
    tokens = torch.randint(0, VOCAB, (MICRO, SEQ), generator=gen)
    return tokens, (tokens * 3 + 1) % VOCAB


def main(out):
    model = TinyNet(seed=7)
    ddp = sw.DistributedDataParallel(model, reproducible_reduction=True)
    opt = sw.AdamW(ddp.parameters(), lr=1e-2, weight_decay=0.1)
    rank, dp = sw.rank, ddp.engine.dp_size
    mine = list(range(rank, MICROS, dp))
    losses = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for i, g in enumerate(mine):
            if i + 1 < len(mine):
                with ddp.no_sync():
                    loss = ddp(*micro_batch(step, g))
                    loss.backward()
            else:
                loss = ddp(*micro_batch(step, g))
                loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 0.5)
        opt.step()
        losses.append(ddp.engine.all_reduce_sum(total) / MICROS)
    if rank == 0:
        np.savez(out, losses=np.array(losses),
                 **{n: p.detach().numpy().copy() for n, p in model.named_parameters()})


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
