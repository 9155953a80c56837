"""Training runs for the symmetric-buffers test, and their multi-rank worker.

Run as `mpirun -np N python3 symmetric_buffers_worker.py OUT.json`: the same model trains with
symmetric_buffers on and off (kind distributed: grads reduce-scattered, params all-gathered).
Rank 0 writes to OUT.json whether each run's params lie in a shardwise shared-memory segment
(/proc/self/maps) and whether the two runs' losses and params are bit-identical.
"""

import json
import sys

import torch

import shardwise.torch as sw
from layer_models import TransformerNet, fresh
from param_gather_worker import train_shardwise


def in_shared_segment(address):
    """Whether `address` lies in this process's mapping of a shardwise shared-memory segment."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            if low <= address < high:
                return "/shardwise-" in line
    return False


def train(symmetric_buffers):
    """(whether each param is a view of a shared segment, losses, final params) of one run."""
    model = fresh(TransformerNet)
    losses, params, _ = train_shardwise(model, optimizer="distributed", bucket_size=1500,
                                        symmetric_buffers=symmetric_buffers)
    return [in_shared_segment(p.data_ptr()) for p in model.parameters()], losses, params


def main(out):
    on = train(True)
    off = train(False)
    report = {
        "shared_on": all(on[0]),
        "shared_off": any(off[0]),
        "same_losses": on[1] == off[1],
        "same_params": all(torch.equal(p, off[2][n]) for n, p in on[2].items()),
        "losses_fell": on[1][-1] < on[1][0],
    }
    if sw.rank == 0:
        with open(out, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
