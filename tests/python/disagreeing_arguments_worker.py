"""Multi-rank worker of test_torch_disagreeing_arguments.py: the last rank wraps the same module
with one DistributedDataParallel argument changed; every rank must raise a ValueError naming it
(they crashed in MPI with MPI_ERR_TRUNCATE or waited out the comm watchdog). Rank 0 prints
"ok <argument>" per case. Usage: mpirun -np N python3 THIS."""

import torch

import shardwise.torch as sw
from shardwise import _core

CASES = {
    "find_unused_parameters": True,
    "expose_grads": False,
    "reproducible_reduction": True,
    "broadcast_buffers": False,
    "symmetric_buffers": False,
    "bucket_size": 100,
    "optimizer": "ddp",
}


def main():
    rank, size = _core.init_mpi()
    for argument, value in CASES.items():
        torch.manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                                     torch.nn.Linear(16, 4))
        changed = {argument: value} if rank == size - 1 else {}
        try:
            sw.DistributedDataParallel(module, comm_timeout=60, abort_job_on_error=False,
                                       **changed)
        except ValueError as error:
            assert f"runs with {argument} = " in str(error), str(error)
            assert f"disagreeing rank(s) {size - 1}" in str(error), str(error)
        else:
            raise AssertionError(f"{argument} differing on rank {size - 1} was accepted")
        if rank == 0:
            print("ok", argument, flush=True)
    check_optimizer_and_checkpoint_arguments(rank, size)


def expect_named(text, action, rank, size):
    try:
        action()
    except ValueError as error:
        assert text in str(error) and f"disagreeing rank(s) {size - 1}" in str(error), str(error)
    else:
        raise AssertionError(f"'{text}' differing on rank {size - 1} was accepted")
    if rank == 0:
        print("ok", text.split(" = ")[0].replace(" ", "_"), flush=True)


def check_optimizer_and_checkpoint_arguments(rank, size):
    """Another lr on one rank trained the replicas apart without a word (kind ddp); another
    save step or directory on one rank was silently ignored (rank 0's won)."""
    import tempfile
    last = rank == size - 1
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    ddp = sw.DistributedDataParallel(module, optimizer="ddp", comm_timeout=60,
                                     abort_job_on_error=False)
    expect_named("sw.AdamW lr = ", lambda: sw.AdamW(module.parameters(),
                                                     lr=0.1 if last else 1e-3), rank, size)
    # Another optimizer class on one rank: sw.Muon refused this DDP's kind on that rank alone and
    # the others waited out the watchdog.
    expect_named("optimizer = ", lambda: (sw.Muon if last else sw.AdamW)(module.parameters()),
                 rank, size)
    opt = sw.AdamW(module.parameters(), lr=1e-3)
    module(torch.ones(2, 8)).sum().backward()
    opt.step()
    # A scheduler (or load_state_dict) on one rank only: its lr went to the engine there alone.
    opt.param_groups[0]["lr"] = 0.5 if last else 1e-3
    module(torch.ones(2, 8)).sum().backward()
    expect_named("sw.AdamW param_groups", opt.step, rank, size)
    opt.param_groups[0]["lr"] = 1e-3
    opt.step()
    directory = tempfile.gettempdir() + "/shardwise_disagreeing_save"
    expect_named("step = ", lambda: sw.save_checkpoint(directory, ddp, opt, step=2 if last else 1),
                 rank, size)


if __name__ == "__main__":
    main()
