"""What a script written for torch DDP + torch.optim.AdamW meets on shardwise: torch DDP's
constructor arguments, sw.AdamW attaching to a wrapper built without a kind (re-laid out, values
kept) or built before the module is wrapped, and torch.distributed's env:// under mpirun."""

import os
import re
import subprocess
import sys

import pytest
import torch

import shardwise.torch as sw
from conftest import launcher_env
from models import TinyNet, batch
from shardwise.torch.launch_env import derived_variables


def adamw_losses(model, opt, steps=4):
    losses = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model(*batch(step, 8))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def reference_losses(seed):
    model = TinyNet(seed=seed)
    return adamw_losses(model, torch.optim.AdamW(model.parameters(), lr=1e-2)), model


def test_torch_ddp_arguments_are_accepted_and_bucket_cap_mb_sets_the_bucket():
    ddp = sw.DistributedDataParallel(TinyNet(seed=0), device_ids=None, output_device=None, dim=0,
                                     broadcast_buffers=False, process_group=None,
                                     bucket_cap_mb=0.001, find_unused_parameters=True,
                                     check_reduction=True, gradient_as_bucket_view=True,
                                     static_graph=True)
    assert not ddp.broadcast_buffers and ddp.find_unused_parameters
    assert ddp._options["bucket_size"] == 1048 // 4
    sw.DistributedDataParallel(TinyNet(seed=0), device_ids=["cpu"], output_device="cpu")


@pytest.mark.parametrize("kwargs, message", [
    (dict(device_ids=[0]), "device_ids=\\[0\\]: shardwise trains CPU params"),
    (dict(output_device=0), "output_device=0"),
    (dict(bucket_cap_mb=0), "bucket_cap_mb must be > 0"),
    (dict(bucket_cap_mb=1, bucket_size=100), "bucket_cap_mb .* or bucket_size"),
    (dict(init_sync=False), "init_sync=False"),
    (dict(process_group=object()), "torch.distributed is not initialised"),
])
def test_torch_ddp_arguments_it_cannot_honour_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sw.DistributedDataParallel(TinyNet(seed=0), **kwargs)


def test_adamw_relays_a_default_wrapper_keeping_the_values():
    expected, reference = reference_losses(seed=21)
    model = TinyNet(seed=21)
    ddp = sw.DistributedDataParallel(model)
    assert ddp.kind == "layer-wise"
    opt = sw.AdamW(ddp.parameters(), lr=1e-2)
    assert ddp.kind == "ddp" and opt.ddp is ddp
    for (n, p), q in zip(model.named_parameters(), TinyNet(seed=21).parameters()):
        assert torch.equal(p.detach(), q), n
    assert adamw_losses(model, opt) == pytest.approx(expected, abs=1e-6)


def test_adamw_after_training_started_or_an_explicit_kind_is_a_clear_error():
    model = TinyNet(seed=22)
    ddp = sw.DistributedDataParallel(model)
    model(*batch(0, 8)).backward()
    with pytest.raises(ValueError, match="training started before this optimizer was built"):
        sw.AdamW(model.parameters())
    with pytest.raises(RuntimeError, match="once training started"):
        ddp.relayout("ddp")


def test_adamw_built_before_wrapping_binds_when_the_module_is_wrapped():
    expected, _ = reference_losses(seed=23)
    model = TinyNet(seed=23)
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    assert opt.ddp is None
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ddp = sw.DistributedDataParallel(model)
    assert opt.ddp is ddp and ddp.kind == "ddp"
    assert adamw_losses(ddp, opt) == pytest.approx(expected, abs=1e-6)
    assert scheduler.get_last_lr() == [1e-2]


def test_frozen_params_may_sit_in_a_group_as_in_torch():
    model = TinyNet(seed=24)
    model.embed.weight.requires_grad_(False)
    ddp = sw.DistributedDataParallel(model)
    frozen = model.embed.weight.detach().clone()
    opt = sw.AdamW(ddp.parameters(), lr=1e-2)  # holds the frozen embedding too
    adamw_losses(ddp, opt, steps=2)
    assert torch.equal(model.embed.weight, frozen)


def test_mpirun_sets_torch_distributed_env_from_open_mpi_variables():
    ompi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "OMPI_MCA_ess_base_jobid": "733085697"}
    derived = derived_variables(ompi)
    assert derived["RANK"] == "1" and derived["WORLD_SIZE"] == "2"
    assert derived["LOCAL_RANK"] == "1" and derived["MASTER_ADDR"] == "127.0.0.1"
    port = int(derived["MASTER_PORT"])
    assert 20000 <= port < 30000 and derived_variables(dict(ompi))["MASTER_PORT"] == str(port)
    other_job = derived_variables(dict(ompi, OMPI_MCA_ess_base_jobid="733085698"))
    assert other_job["MASTER_PORT"] != str(port)
    # Ranks on several nodes: rank 0's host is not known without communicating.
    assert "MASTER_ADDR" not in derived_variables(dict(ompi, OMPI_COMM_WORLD_LOCAL_SIZE="1"))
    assert derived_variables({"RANK": "0"}) == {}


WORKER = """
import sys, torch, torch.distributed as dist
import shardwise.torch as sw
from models import TinyNet
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
ddp = sw.DistributedDataParallel(TinyNet(seed=0), process_group=dist.group.WORLD)
line = f"rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item()} sw {sw.rank} {ddp.kind}"
sys.stdout.write(line + "\\n")  # one write: mpirun interleaves the ranks' partial writes
sys.stdout.flush()
"""


def worker_env():
    env = launcher_env()  # the worker imports models.py from this directory
    env["PYTHONPATH"] += os.pathsep + os.path.dirname(os.path.abspath(__file__))
    return env


def test_init_process_group_under_mpirun_joins_the_same_ranks(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=120, env=worker_env())
    assert done.returncode == 0, done.stdout + done.stderr
    lines = sorted(re.findall(r"rank \d of \d sum [\d.]+ sw \d [a-z-]+", done.stdout))
    assert lines == ["rank 0 of 2 sum 3.0 sw 0 layer-wise", "rank 1 of 2 sum 3.0 sw 1 layer-wise"]


def test_torchrun_style_launch_without_mpirun_is_a_clear_error(tmp_path):
    # torchrun sets RANK / WORLD_SIZE / MASTER_* and starts no MPI job: each process is an MPI
    # world of one, which the wrapper names instead of training apart.
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    base = dict(worker_env(), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29731")
    procs = [subprocess.Popen([sys.executable, str(script)], env=dict(base, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode != 0 for p in procs)
    assert "launch with `mpirun -np N" in outputs[1][1], outputs[1][1]
