"""shardwise.torch optimizer options are validated as torch.optim validates them (the same checks
as the CLI's optimizer section): a bad value raises a ValueError naming it before any step, and
the weights are never touched."""

import math

import pytest
import torch

import shardwise.torch as sw
from models import TinyNet, batch

BAD_OPTIONS = [
    (dict(lr=math.nan), "Invalid learning rate: lr must be >= 0 \\(got nan\\)"),
    (dict(lr=-1e-3), "Invalid learning rate: lr must be >= 0"),
    (dict(lr=math.inf), "Invalid learning rate: lr must be finite"),
    (dict(muon_lr=math.nan), "muon_lr must be >= 0"),
    (dict(betas=(1, 1)), "Invalid beta parameter at index 0: betas\\[0\\] must be in \\[0, 1\\)"),
    (dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1"),
    (dict(betas=(-0.1, 0.9)), "betas\\[0\\] must be in \\[0, 1\\) \\(got -0.1\\)"),
    (dict(eps=0), "Invalid epsilon value: eps must be > 0 \\(got 0\\)"),
    (dict(eps=-1e-8), "Invalid epsilon value"),
    (dict(weight_decay=-0.1), "Invalid weight_decay value: weight_decay must be >= 0"),
    (dict(weight_decay=math.nan), "weight_decay must be >= 0 \\(got nan\\)"),
    (dict(momentum=2), "Invalid momentum value: momentum must be in \\[0, 1\\) \\(got 2\\)"),
    (dict(ns_steps=0), "Invalid Newton-Schulz steps: ns_steps must be in \\[1, 100\\] \\(got 0\\)"),
    (dict(ns_steps=2147483647), "ns_steps must be in \\[1, 100\\]"),
    (dict(ns_steps=10 ** 30), "ns_steps must be in \\[1, 100\\]"),
    # int() would truncate: 2.5 ran 2 steps while the optimizer's defaults said 2.5.
    (dict(ns_steps=2.5), "ns_steps: expected an integer, got 2.5 \\(float\\)"),
    (dict(ns_steps=True), "ns_steps: expected an integer, got True \\(bool\\)"),
    (dict(clip_grad=math.nan), "Invalid clip_grad value: clip_grad must be >= 0 \\(got nan\\)"),
    (dict(clip_grad=-1), "clip_grad must be >= 0"),
    (dict(extra_scale_factor=0), "Invalid scale factor: extra_scale_factor must be > 0"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS,
                         ids=[f"{k}={v}" for (o, _) in BAD_OPTIONS for k, v in o.items()])
def test_bad_option_raises_naming_it(options, message):
    ddp = sw.DistributedDataParallel(TinyNet(seed=0))
    with pytest.raises(ValueError, match=message):
        sw.make_optimizer(ddp, **options)
    # Nothing was built: a valid optimizer can still be made over the same wrap.
    assert not ddp.engine.has_optimizer()
    sw.make_optimizer(ddp)


@pytest.mark.parametrize("lr", [math.nan, -1.0, math.inf])
def test_set_lr_refuses_a_bad_value_and_keeps_the_old_one(lr):
    model = TinyNet(seed=1)
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp, lr=1e-2)
    with pytest.raises(ValueError, match="Invalid learning rate: lr must be"):
        opt.set_lr(lr)
    assert opt.lr == 1e-2
    model(*batch(0, 4)).backward()
    opt.step()
    for name, p in model.named_parameters():
        assert bool(torch.isfinite(p.detach()).all()), name


def test_edge_values_are_accepted_and_train():
    model = TinyNet(seed=2)
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp, lr=0.0, muon_lr=0.0, weight_decay=0.0, betas=(0.0, 0.5),
                            momentum=0.0, ns_steps=100, clip_grad=0.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model(*batch(0, 4)).backward()
    opt.step()
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[name]), name  # lr 0: nothing moves
