"""Train any torch.nn.Module on the shardwise engine.

    import shardwise.torch as sw            # initialises MPI (MPI_THREAD_MULTIPLE) if needed
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp, kind="layer-wise", lr=3e-3, muon_lr=2e-3)
    loss = model(batch); loss.backward()    # grads land in the grad buffer, buckets reduce
    opt.step(); opt.zero_grad()             # finish grad sync, step owned shards, all-gather

Run multi-rank with ``mpirun -np N python3 train.py``; without a launcher the job is one rank.
"""

import sys

from .. import _core
from .checkpoint import load_checkpoint, save_checkpoint
from .ddp import DistributedDataParallel
from .optimizer import Optimizer, make_optimizer

rank, world_size = _core.init_mpi()


def _abort_other_ranks_on_error(previous_hook):
    # An exception on one rank would leave the others waiting in a collective forever: print it
    # and abort the whole job instead (as the shardwise CLI does).
    def hook(kind, value, traceback):
        previous_hook(kind, value, traceback)
        if world_size > 1:
            sys.stderr.flush()
            _core.abort_world(f"rank {rank}: {kind.__name__}: {value}")
    return hook


sys.excepthook = _abort_other_ranks_on_error(sys.excepthook)


def all_reduce_mean(ddp, value):
    """Mean of a Python float over the data-parallel ranks (bit-identical on every rank)."""
    return ddp.engine.all_reduce_sum(float(value)) / ddp.engine.dp_size


__all__ = ["DistributedDataParallel", "Optimizer", "make_optimizer", "save_checkpoint",
           "load_checkpoint", "rank", "world_size", "all_reduce_mean"]
