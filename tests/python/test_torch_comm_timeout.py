"""shardwise.torch's collective watchdog: DistributedDataParallel(comm_timeout=S) ends a job whose
peer stopped communicating after S seconds (exit 3, naming the group), as `shardwise train
--comm-timeout` does, instead of hanging for the 600 s default; bad values are refused."""

import math
import pathlib
import time

import pytest

import shardwise.torch as sw
from conftest import run_mpi
from models import TinyNet

HERE = pathlib.Path(__file__).resolve().parent


def test_a_stopped_rank_ends_the_job_at_the_timeout():
    timeout = 3
    started = time.monotonic()
    done = run_mpi(2, HERE / "comm_timeout_worker.py", timeout, timeout=120)
    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "finished without its peer" not in output
    assert "comm watchdog: rank 0 of group" in output, output
    # Start-up (two Python processes importing torch) plus the timeout plus the abort.
    assert elapsed < timeout + 60, f"the job took {elapsed:.0f} s"


@pytest.mark.parametrize("seconds", [0, -1, math.nan, 2e9, 1e-9])
def test_a_bad_timeout_is_refused(seconds):
    with pytest.raises(ValueError, match="comm_timeout"):
        sw.DistributedDataParallel(TinyNet(seed=0), comm_timeout=seconds)
