#!/usr/bin/env bash
# `pip install .` from the repository into a fresh virtual environment (Debian's python with
# --system-site-packages, offline, --no-build-isolation), then, from outside the repository and
# without PYTHONPATH: the package imports from the environment, importing it starts no MPI and
# installs no hook, and it works (MXFP8 round trip, a one-rank DDP + optimizer step).
#   pip_install_test.sh REPO_ROOT PIP_BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.sh"
root=$1
export SHARDWISE_PIP_BUILD_DIR=$2  # kept between runs: a rebuild is incremental
cli_test_init pip_install

"$python" -m venv --system-site-packages "$work/venv"
if ! "$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps -q \
  "$root" >"$work/pip.log" 2>&1; then
  tail -30 "$work/pip.log" >&2
  fail "pip install . failed"
  cli_test_finish "unreachable"
fi

cd "$work"
cat >check.py <<'PY'
import sys
hook = sys.excepthook
import shardwise
import shardwise.torch as sw
from shardwise import _core

venv = sys.prefix
assert shardwise.__file__.startswith(venv), f"imported {shardwise.__file__}, not from {venv}"
assert not _core.mpi_running(), "importing shardwise.torch started MPI"
assert sys.excepthook is hook, "importing shardwise.torch replaced sys.excepthook"

import numpy as np
x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)
data, scale = shardwise.mxfp8.quantize(x)
y = shardwise.mxfp8.dequantize(data, scale, "fp32")
assert np.max(np.abs(y - x)) <= 0.07 * np.max(np.abs(x)), "MXFP8 round trip"

import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
ddp = sw.DistributedDataParallel(model, optimizer="distributed")
assert _core.mpi_running() and sw.world_size == 1 and sw.rank == 0
assert sys.excepthook is hook, "a one-rank job needs no abort hook"
opt = sw.make_optimizer(ddp, kind="distributed", lr=1e-2)
before = [p.detach().clone() for p in model.parameters()]
loss = model(torch.randn(4, 8)).square().mean()
loss.backward()
opt.step()
opt.zero_grad()
assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters())), "step moved nothing"
print("installed package OK:", shardwise.__file__)
PY
if ! "$work/venv/bin/python" check.py >"$work/check.log" 2>&1; then
  cat "$work/check.log" >&2
  fail "the installed package did not pass its checks"
fi
cli_test_finish "pip install: the package installs into a venv and works from there"
