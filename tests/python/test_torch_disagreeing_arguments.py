"""DistributedDataParallel arguments that differ between ranks: a ValueError on every rank naming
the argument, before the engine's first collective."""

import pathlib

from conftest import run_mpi
from disagreeing_arguments_worker import CASES

HERE = pathlib.Path(__file__).resolve().parent


def test_an_argument_that_differs_on_one_rank_is_named_on_every_rank():
    done = run_mpi(2, HERE / "disagreeing_arguments_worker.py", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = [*CASES, "sw.AdamW_lr", "optimizer", "sw.AdamW_param_groups", "step"]
    assert done.stdout.split() == [w for a in expected for w in ("ok", a)], done.stdout
