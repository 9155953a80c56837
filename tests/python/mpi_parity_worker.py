"""Multi-rank worker of test_torch_mpi.py: trains TinyNet for 20 steps with every optimizer kind
on a fixed global batch of 8 (8/dp samples per rank) and writes, from rank 0, the per-step mean
losses and the final params of each kind to OUT.npz. Run under mpirun with any -np dividing 8.
"""

import sys

import numpy as np
import torch

import shardwise.torch as sw
from models import TinyNet, batch

KINDS = ["layer-wise", "distributed", "ddp", "legacy-layer-wise"]
GLOBAL_BATCH, STEPS = 8, 20


def train(kind, overlap):
    # Ranks start from different seeds: the wrap broadcasts rank 0's initial values.
    model = TinyNet(seed=sw.rank)
    ddp = sw.DistributedDataParallel(model, bucket_size=600, optimizer=kind,
                                     overlap_grad_reduce=overlap, overlap_param_gather=overlap)
    opt = sw.make_optimizer(ddp, lr=1e-2, muon_lr=2e-2, weight_decay=0.1, clip_grad=1.0)
    dp = ddp.engine.dp_size
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model(*batch(step, GLOBAL_BATCH, sw.rank, dp))
        loss.backward()
        opt.step()
        losses.append(sw.all_reduce_mean(ddp, loss.item()))
    ddp.finish_param_sync()
    return losses, {n: p.detach().numpy().copy() for n, p in model.named_parameters()}


def main(out):
    results = {}
    for kind in KINDS:
        for overlap in (True, False):
            losses, params = train(kind, overlap)
            tag = f"{kind}/{'overlap' if overlap else 'sync'}"
            results[f"{tag}/losses"] = np.array(losses)
            for n, v in params.items():
                results[f"{tag}/{n}"] = v
    if sw.rank == 0:
        np.savez(out, **results)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
