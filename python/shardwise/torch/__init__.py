"""Train any torch.nn.Module on the shardwise engine.

    import shardwise.torch as sw            # starts nothing: MPI starts on first use
    ddp = sw.DistributedDataParallel(model)  # starts MPI (MPI_THREAD_MULTIPLE) if needed
    opt = sw.AdamW(ddp.parameters(), lr=3e-3)  # or sw.Muon / sw.muon_public / make_optimizer
    loss = model(batch); loss.backward()    # grads land in the grad buffer, buckets reduce
    opt.step(); opt.zero_grad()             # finish grad sync, step owned shards, all-gather

Run multi-rank with ``mpirun -np N python3 train.py``; without a launcher the job is one rank.

The one thing importing the package does: under mpirun it sets torch.distributed's env://
variables that are not set yet (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR on
one node, MASTER_PORT from the job id; see ``launch_env``), so an unchanged script's
``dist.init_process_group("gloo")`` joins the same ranks.
"""

import sys

from .. import _core
from .checkpoint import load_checkpoint, save_checkpoint
from .ddp import DistributedDataParallel
from .launch_env import set_torch_distributed_env
from .optim import AdamW, Muon, muon_megatron, muon_public
from .optimizer import Optimizer, make_optimizer

_abort_hook_installed = False
set_torch_distributed_env()  # documented above: env:// for torch.distributed under mpirun


def init():
    """Starts MPI (MPI_THREAD_MULTIPLE) unless it runs already; returns ``(rank, world_size)``.

    Importing the package starts nothing: MPI starts on first use (this call, ``rank``,
    ``world_size`` or the first ``DistributedDataParallel``).
    """
    return tuple(_core.init_mpi())


def install_abort_on_error():
    """Makes an uncaught exception on one rank abort every rank of a multi-rank job.

    Without it the other ranks would wait in a collective forever. The one global hook the
    package installs: ``DistributedDataParallel`` calls this when the job has more than one
    rank (``abort_job_on_error=False`` there opts out). It prints the exception as before
    (the previous ``sys.excepthook`` runs first), then aborts with exit code 2, as the shardwise
    CLI does. A no-op in a one-rank job.
    """
    global _abort_hook_installed
    rank, world_size = init()
    if _abort_hook_installed or world_size == 1:
        return
    previous_hook = sys.excepthook

    def hook(kind, value, traceback):
        previous_hook(kind, value, traceback)
        sys.stderr.flush()
        _core.abort_world(f"rank {rank}: {kind.__name__}: {value}")

    sys.excepthook = hook
    _abort_hook_installed = True


def __getattr__(name):
    # `rank` and `world_size` start MPI on first read (module attributes, as before).
    if name in ("rank", "world_size"):
        return init()[0 if name == "rank" else 1]
    raise AttributeError(f"module 'shardwise.torch' has no attribute '{name}'")


def all_reduce_mean(ddp, value):
    """Mean of a Python float over the data-parallel ranks (bit-identical on every rank)."""
    return ddp.engine.all_reduce_sum(float(value)) / ddp.engine.dp_size


__all__ = ["DistributedDataParallel", "AdamW", "Muon", "muon_public", "muon_megatron",
           "Optimizer", "make_optimizer", "save_checkpoint",
           "load_checkpoint", "rank", "world_size", "all_reduce_mean", "init",
           "install_abort_on_error"]
