"""The plain-torch Muon that examples/torch/bench_ddp.py times as the like-for-like baseline of
the layer-wise kinds does the engine's arithmetic: its Newton-Schulz gives shardwise.newton_schulz's
result with the spec's default coefficients and steps, on wide, tall and square matrices, and its
optimizer steps exactly the matrices it is given Muon for (AdamW the rest)."""

import pathlib
import sys

import numpy as np
import pytest
import torch

from shardwise import _core
from shardwise.torch.optimizer import DEFAULTS

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "torch"))
import bench_ddp  # noqa: E402


@pytest.mark.parametrize("shape", [(64, 256), (256, 64), (96, 96)])
def test_baseline_newton_schulz_is_the_engines(shape):
    assert DEFAULTS["coefficients"] == "quintic"
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    ours = _core.newton_schulz(g.numpy(), DEFAULTS["ns_steps"], DEFAULTS["coefficients"])
    baseline = bench_ddp.newton_schulz(g, bench_ddp.QUINTIC_COEFFICIENTS, DEFAULTS["ns_steps"])
    np.testing.assert_allclose(baseline.numpy(), ours, atol=5e-6, rtol=0)
    assert np.abs(ours).max() > 0.05  # a real orthogonalisation, not zeros


def test_baseline_muon_steps_only_the_muon_matrices():
    torch.manual_seed(0)
    matrix = torch.nn.Parameter(torch.randn(32, 128))
    vector = torch.nn.Parameter(torch.randn(32))
    named = [("w", matrix), ("b", vector)]
    opt = bench_ddp.torch_muon(named, {"w"}, lr=0.01, adamw_lr=0.001, weight_decay=0.0)
    before, vector_before = matrix.detach().clone(), vector.detach().clone()
    grad = torch.randn(32, 128)
    matrix.grad, vector.grad = grad.clone(), torch.ones(32)
    opt.step()
    # First step: momentum buffer (1 - mu) g, Nesterov update (1 - mu^2) g; NS is scale-free.
    expected = before - 0.01 * 128 ** 0.5 * torch.from_numpy(
        _core.newton_schulz(grad.numpy(), DEFAULTS["ns_steps"], DEFAULTS["coefficients"]))
    torch.testing.assert_close(matrix.detach(), expected, atol=1e-5, rtol=0)
    # AdamW's first step moves every element by lr against the sign of its grad.
    torch.testing.assert_close(vector.detach(), vector_before - 0.001, atol=1e-6, rtol=0)
