"""An error in shardwise.torch's grad hooks (a param that produced no grad on the first
iteration has one later, without find_unused_parameters) raises from backward() and leaves a process that exits: raised inside autograd, it used
to leave the graph queued on the thread, and the process hung at exit freeing it."""

import pathlib
import subprocess
import sys
import textwrap

from conftest import launcher_env

HERE = pathlib.Path(__file__).resolve().parent

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import shardwise.torch as sw
    from models import TinyNet, batch

    model = TinyNet(seed=0)
    ddp = sw.DistributedDataParallel(model, overlap_grad_reduce=True)
    opt = sw.make_optimizer(ddp)
    model.head.bias.sum().backward()  # the first iteration: every other param is unused
    opt.step()
    opt.zero_grad()
    if {catch!r}:
        try:
            model(*batch(0, 4)).backward()
        except ValueError as error:
            print("caught:", error, flush=True)
        # The wrap still trains (the params it learnt to wait for) after the failed backward.
        opt.zero_grad()
        model.head.bias.sum().backward()
        assert opt.step()["stepped"]
        print("trained on", flush=True)
    else:
        model(*batch(0, 4)).backward()
""")


def run_script(tmp_path, catch):
    script = tmp_path / "twice.py"
    script.write_text(SCRIPT.format(tests=str(HERE), catch=catch))
    # A hang shows as subprocess.TimeoutExpired.
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=launcher_env(), timeout=120)


def test_uncaught_error_in_a_grad_hook_exits(tmp_path):
    done = run_script(tmp_path, catch=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "'head.weight' (id 6) produced no gradient on the first iteration" in done.stderr


def test_caught_error_in_a_grad_hook_leaves_a_working_wrap(tmp_path):
    done = run_script(tmp_path, catch=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "caught: register_grad_ready" in done.stdout
    assert "trained on" in done.stdout
