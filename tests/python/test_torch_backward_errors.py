"""Errors raised at the end of a backward or inside shardwise.torch's grad hooks leave a process
that exits, and a caught one leaves a wrap that trains on. Raised inside autograd, an error used
to leave the graph queued on the thread, and the process hung at exit freeing it.

- A param that no backward since the last sync reached, without find_unused_parameters: an error
  after the sync, as torch DDP's (the step would otherwise move it with a zero grad).
- A second backward onto the .grad copies that a sync exposed for 16-bit params: an error inside
  the first grad hook of that backward, re-raised by backward() once the graph is done."""

import pathlib
import subprocess
import sys
import textwrap

from conftest import launcher_env

HERE = pathlib.Path(__file__).resolve().parent

UNUSED_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import shardwise.torch as sw
    from models import TinyNet, batch

    model = TinyNet(seed=0)
    ddp = sw.DistributedDataParallel(model, overlap_grad_reduce={overlap!r})
    opt = sw.make_optimizer(ddp)
    model.head.bias.sum().backward()  # every other param is unused
""")

HOOK_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    sys.path.insert(0, {tests!r})
    import shardwise.torch as sw
    from models import TinyNet, batch

    model = TinyNet(seed=0).to(torch.bfloat16)
    ddp = sw.DistributedDataParallel(model, overlap_grad_reduce=True, optimizer="distributed")
    opt = sw.make_optimizer(ddp, kind="distributed")
    model(*batch(0, 4)).backward()
    if {catch!r}:
        try:
            model(*batch(1, 4)).backward()  # onto the exposed 16-bit .grad copies
        except RuntimeError as error:
            print("caught:", error, flush=True)
        # The wrap still trains after the failed backward.
        opt.zero_grad()
        model(*batch(2, 4)).backward()
        assert opt.step()["stepped"]
        print("trained on", flush=True)
    else:
        model(*batch(1, 4)).backward()
""")


def run_script(tmp_path, script, **values):
    path = tmp_path / "script.py"
    path.write_text(script.format(tests=str(HERE), **values))
    # A hang shows as subprocess.TimeoutExpired.
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env=launcher_env(), timeout=120)


def test_a_param_no_backward_reached_is_an_error_naming_it(tmp_path):
    for overlap in (False, True):
        done = run_script(tmp_path, UNUSED_SCRIPT, overlap=overlap)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "parameter(s) received no gradient in this iteration: 'embed.weight'" in done.stderr
        assert "find_unused_parameters=True" in done.stderr


def test_uncaught_error_in_a_grad_hook_exits(tmp_path):
    done = run_script(tmp_path, HOOK_SCRIPT, catch=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "backward() onto the .grad of 16-bit param" in done.stderr


def test_caught_error_in_a_grad_hook_leaves_a_working_wrap(tmp_path):
    done = run_script(tmp_path, HOOK_SCRIPT, catch=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "caught: backward() onto the .grad of 16-bit param" in done.stdout
    assert "trained on" in done.stdout
