"""sw.DistributedDataParallel(reproducible_reduction=True): the same global batch gives
bit-identical losses and weights at dp=1 (micro-batches accumulated under no_sync) and dp=2."""

import pathlib

import numpy as np
import pytest

import shardwise.torch as sw
from conftest import run_mpi
from models import TinyNet

HERE = pathlib.Path(__file__).resolve().parent


def test_dp1_and_dp2_give_bit_identical_losses_and_weights(tmp_path):
    results = {}
    for dp in (1, 2):
        out = tmp_path / f"dp{dp}.npz"
        done = run_mpi(dp, HERE / "reproducible_worker.py", out)
        assert done.returncode == 0, done.stdout + done.stderr
        results[dp] = np.load(out)
    one, two = results[1], results[2]
    assert one.files == two.files
    np.testing.assert_array_equal(one["losses"], two["losses"])
    assert one["losses"][-1] < one["losses"][0]  # it trained
    for key in one.files:
        np.testing.assert_array_equal(one[key], two[key], err_msg=key)


def test_reproducible_reduction_needs_fp32_grads():
    with pytest.raises(Exception, match="reproducible_reduction needs ddp.grad_reduce_in_fp32"):
        sw.DistributedDataParallel(TinyNet(seed=0), reproducible_reduction=True,
                                   grad_reduce_in_fp32=False)
