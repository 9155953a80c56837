"""shardwise.torch's symmetric_buffers: on two ranks the params are views of a shared-memory
segment with it and of private memory without, and both train to the same bits."""

import json
import pathlib

from conftest import run_mpi

HERE = pathlib.Path(__file__).resolve().parent


def test_symmetric_buffers_are_shared_and_train_to_the_same_bits(tmp_path):
    out = tmp_path / "report.json"
    done = run_mpi(2, HERE / "symmetric_buffers_worker.py", out)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report == {"shared_on": True, "shared_off": False, "same_losses": True,
                      "same_params": True, "losses_fell": True}, report
