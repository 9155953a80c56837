"""shardwise.torch on one rank: params become views of the engine's buffers, grads accumulate
there exactly as autograd computes them, the optimizers match independent torch references, and
bad input raises naming the param."""

import copy
import io
import json
import pathlib

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import shardwise.torch as sw
from models import TinyNet, batch

KINDS = ["layer-wise", "distributed", "ddp", "legacy-layer-wise"]


def array_address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("kind", KINDS)
def test_grads_in_buffer_equal_autograd(kind):
    model, ref = TinyNet(seed=0), TinyNet(seed=0)
    ddp = sw.DistributedDataParallel(model, bucket_size=600, optimizer=kind,
                                     overlap_grad_reduce=True)
    dispatched_before_last_grad = []
    # embed.weight is the last grad of backward; its tensor hook runs before it is accumulated.
    model.embed.weight.register_hook(
        lambda g: dispatched_before_last_grad.append(ddp.engine.groups_dispatched()))
    for step in range(2):
        ddp.zero_grad_buffer()
        ref.zero_grad()
        model(*batch(step, 8)).backward()
        ref(*batch(step, 8)).backward()
        if step == 1 and kind != "legacy-layer-wise":
            # From the second iteration on, every other bucket group is dispatched from the grad
            # hooks as soon as its last grad arrives, during backward().
            assert ddp.engine.num_bucket_groups() > 1
            assert dispatched_before_last_grad[-1] >= ddp.engine.num_bucket_groups() - 1
        ddp.finish_grad_sync()
        for (name, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
            # .grad is the buffer's view of the reduced grad (one rank: the local grad).
            assert p.grad.data_ptr() == p.main_grad.data_ptr(), name
            torch.testing.assert_close(p.main_grad, r.grad, rtol=0, atol=0, msg=name)


def test_params_are_zero_copy_views_of_the_buffers():
    model = TinyNet(seed=3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ddp = sw.DistributedDataParallel(model)
    buffer_bytes = 0
    for i, (name, p) in enumerate(model.named_parameters()):
        assert torch.equal(p.detach(), before[name]), name  # values carried over
        assert p.data_ptr() == array_address(ddp.engine.param_array(i)), name
        assert p.main_grad.data_ptr() == array_address(ddp.engine.grad_array(i)), name
        buffer_bytes += 2 * p.numel() * 4
    # Writing through the engine's view is visible in the param: same memory.
    ddp.engine.param_array(0)[...] = 7.0
    assert bool((model.embed.weight == 7.0).all())
    # fp32 params + fp32 grads, plus only alignment padding.
    assert buffer_bytes <= ddp.engine.buffer_bytes() < buffer_bytes + 64 * 4 * 2 * 8


def test_ddp_adamw_equals_torch_adamw_over_20_steps():
    model, ref = TinyNet(seed=1), TinyNet(seed=1)
    ddp = sw.DistributedDataParallel(model, optimizer="ddp", bucket_size=500)
    opt = sw.make_optimizer(ddp, kind="ddp", lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95),
                            eps=1e-8, clip_grad=0)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95),
                                eps=1e-8)
    for step in range(20):
        opt.zero_grad()
        ref_opt.zero_grad()
        model(*batch(step, 8)).backward()
        ref(*batch(step, 8)).backward()
        assert opt.step()["stepped"]
        ref_opt.step()
    for (name, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
        assert (p.detach() - r.detach()).abs().max().item() <= 1e-6, name


def newton_schulz_reference(g, steps=5, abc=(3.4445, -4.7750, 2.0315), eps=1e-7):
    x = g.clone()
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (x.norm() + eps)
    a, b, c = abc
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def test_layer_wise_muon_equals_reference_over_20_steps():
    lr, muon_lr, wd, mu = 1e-2, 2e-2, 0.1, 0.95
    model, ref = TinyNet(seed=2), TinyNet(seed=2)
    ddp = sw.DistributedDataParallel(model, optimizer="layer-wise", bucket_size=700)
    opt = sw.make_optimizer(ddp, lr=lr, muon_lr=muon_lr, weight_decay=wd, momentum=mu,
                            nesterov=True, coefficients="simple", clip_grad=0)
    # Muon: the 2-D weights that are neither embedding nor output; AdamW: everything else.
    muon_names = {"fc1.weight", "fc2.weight"}
    named = dict(ref.named_parameters())
    adamw = torch.optim.AdamW([p for n, p in named.items() if n not in muon_names], lr=lr,
                              weight_decay=wd)
    momentum = {n: torch.zeros_like(named[n]) for n in muon_names}
    for step in range(20):
        opt.zero_grad()
        adamw.zero_grad()
        for n in muon_names:
            named[n].grad = None
        model(*batch(step, 8)).backward()
        ref(*batch(step, 8)).backward()
        opt.step()
        adamw.step()
        with torch.no_grad():
            for n in muon_names:
                p, g = named[n], named[n].grad
                p.mul_(1 - muon_lr * wd)  # decoupled decay at Muon's lr
                momentum[n].mul_(mu).add_((1 - mu) * g)
                update = (1 - mu) * g + mu * momentum[n]
                p.sub_(muon_lr * max(p.shape) ** 0.5 * newton_schulz_reference(update))
    for (name, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
        assert (p.detach() - r.detach()).abs().max().item() <= 1e-5, name


def test_make_optimizer_refuses_a_kind_the_buffers_are_not_laid_out_for():
    wrapped, model, ref = TinyNet(seed=4), TinyNet(seed=4), TinyNet(seed=4)
    ddp = sw.DistributedDataParallel(wrapped)  # laid out for the default kind, layer-wise
    engine, layout = ddp.engine, ddp.layout
    assert ddp.kind == "layer-wise" and any(k.is_layer_wise for k in layout.layouts)
    with pytest.raises(ValueError, match="kind 'ddp' needs another buffer layout than "
                                         "'layer-wise'.*optimizer='ddp'"):
        sw.make_optimizer(ddp, kind="ddp", lr=1e-2)
    # Nothing was rebuilt: same engine, same buffers, no optimizer yet.
    assert ddp.engine is engine and not engine.has_optimizer()
    assert wrapped.embed.weight.data_ptr() == array_address(engine.param_array(0))
    # The kind the buffers were laid out for trains, as torch's AdamW would for 'ddp'.
    ddp = sw.DistributedDataParallel(model, optimizer="ddp")
    opt = sw.make_optimizer(ddp, kind="ddp", lr=1e-2, clip_grad=0)
    assert ddp.kind == "ddp" and all(not k.is_layer_wise for k in ddp.layout.layouts)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.01)
    for step in range(3):
        opt.zero_grad()
        ref_opt.zero_grad()
        model(*batch(step, 4)).backward()
        ref(*batch(step, 4)).backward()
        opt.step()
        ref_opt.step()
    for (name, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
        assert (p.detach() - r.detach()).abs().max().item() <= 1e-6, name


def test_optimizer_state_dict_round_trip():
    model = TinyNet(seed=5)
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp, lr=1e-2)
    model(*batch(0, 4)).backward()
    opt.step()
    state = opt.state_dict()
    assert state["kind"] == "layer-wise"
    assert set(state["state"]["fc1.weight"]) == {"momentum_buffer"}
    assert set(state["state"]["norm.weight"]) >= {"exp_avg", "exp_avg_sq"}
    snapshot = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.zero_grad()
    model(*batch(1, 4)).backward()
    opt.step()  # moves params and state on
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(snapshot[n])
    opt.load_state_dict(state)
    opt.zero_grad()
    model(*batch(1, 4)).backward()
    opt.step()
    again = {n: p.detach().clone() for n, p in model.named_parameters()}
    # Replaying step 1 from the restored state gives the same params again.
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(snapshot[n])
    opt.load_state_dict(state)
    opt.zero_grad()
    model(*batch(1, 4)).backward()
    opt.step()
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), again[n]), n


class OnCuda(torch.nn.Parameter):
    """A param that reports a CUDA device (this CPU-only torch cannot allocate one)."""

    @property
    def device(self):
        return torch.device("cuda", 0)


class Holder(torch.nn.Module):
    def __init__(self, **params):
        super().__init__()
        for name, p in params.items():
            self.register_parameter(name, p)

    def forward(self, x):
        return sum((p.float() * 0 + 1).sum() for p in self.parameters()) * x


class StridedNet(torch.nn.Module):
    """A channels_last conv and a param made from a transposed view: non-contiguous params."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(21)
        self.conv = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
        self.proj = torch.nn.Parameter(torch.randn(5, 16).t() * 0.1)  # (16, 5), strides (1, 16)

    def forward(self, x):
        return (self.conv(x).flatten(2).mean(-1) @ torch.ones(4, 16) @ self.proj).pow(2).mean()


def test_non_contiguous_params_train_as_with_torch():
    reference = StridedNet()
    assert not reference.conv.weight.is_contiguous() and not reference.proj.is_contiguous()
    model = copy.deepcopy(reference)
    torch_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.equal(p.detach(), q.detach()), n  # the values survive the move
    for step in range(4):
        x = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(step))
        for m, o in ((reference, torch_opt), (model, opt)):
            m(x).backward()
            o.step()
            o.zero_grad()
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), atol=1e-6, rtol=1e-5, msg=n)


def test_bad_params_raise_naming_the_param():
    with pytest.raises(ValueError, match="'w' has overlapping elements.*expanded"):
        sw.DistributedDataParallel(Holder(w=torch.nn.Parameter(torch.randn(4, 1).expand(4, 6))))
    with pytest.raises(ValueError, match="'w' has unsupported dtype torch.float64"):
        sw.DistributedDataParallel(Holder(w=torch.nn.Parameter(torch.randn(4, dtype=torch.float64))))
    with pytest.raises(ValueError, match="'w' is on cuda:0"):
        sw.DistributedDataParallel(Holder(w=OnCuda(torch.zeros(4))))
    base = torch.randn(10)
    with pytest.raises(ValueError, match="'a' and 'b' share storage"):
        sw.DistributedDataParallel(Holder(a=torch.nn.Parameter(base),
                                          b=torch.nn.Parameter(base[2:6])))
    with pytest.raises(TypeError):
        sw.DistributedDataParallel(torch.randn(3))
    sparse = TinyNet(seed=0)
    sparse.embed.sparse = True  # nn.Embedding(..., sparse=True): torch would make a sparse grad
    with pytest.raises(ValueError, match="module 'embed' \\(Embedding\\) has sparse=True"):
        sw.DistributedDataParallel(sparse)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(bucket_size="x"), TypeError, "bucket_size must be an int .* got str 'x'"),
    (dict(bucket_size=1.5), TypeError, "bucket_size must be an int"),
    (dict(bucket_size=2 ** 63), ValueError, "bucket_size = 9223372036854775808 does not fit"),
    (dict(bucket_cap_mb="25"), TypeError, "bucket_cap_mb must be a number"),
    (dict(optimizer=3), ValueError, "optimizer=3 is not an optimizer kind; pass one of"),
    (dict(optimizer="sgd"), ValueError, "optimizer='sgd' is not an optimizer kind"),
])
def test_argument_types_are_checked_naming_the_argument(kwargs, error, message):
    with pytest.raises(error, match=message):
        sw.DistributedDataParallel(TinyNet(seed=0), **kwargs)


def test_misuse_raises():
    model = TinyNet(seed=6)
    ddp = sw.DistributedDataParallel(model)
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        sw.make_optimizer(ddp, kind="sgd")
    opt = sw.make_optimizer(ddp)
    with pytest.raises(RuntimeError, match="no backward\\(\\) through the wrapped module"):
        opt.step()
    model(*batch(0, 4)).backward()
    once = model.fc1.weight.grad.clone()
    model(*batch(0, 4)).backward()  # a second backward syncs again on the sum, as torch DDP's
    torch.testing.assert_close(model.fc1.weight.grad, 2 * once)
    opt.zero_grad()
    model(*batch(0, 4)).backward()
    opt.step()
    with pytest.raises(RuntimeError, match="no backward\\(\\) through the wrapped module"):
        opt.step()  # a second step needs a new backward
    with pytest.raises(ValueError, match="already has an optimizer"):
        sw.make_optimizer(ddp)


@pytest.mark.parametrize("change", ["replace", "reassign_data", "add", "remove"])
def test_params_changed_after_wrapping_raise(change):
    model = TinyNet(seed=7)
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp)
    if change == "replace":
        model.fc1.weight = torch.nn.Parameter(model.fc1.weight.detach().clone())
        expected = "'fc1.weight' was replaced"
    elif change == "reassign_data":
        model.fc2.weight.data = model.fc2.weight.detach().clone()
        expected = "'fc2.weight' no longer lives in the shardwise param buffer"
    elif change == "add":
        model.extra = torch.nn.Linear(2, 2)
        expected = "'extra.weight' was added"
    else:
        model.norm.bias.requires_grad_(False)
        expected = "'norm.bias' was removed"
    opt.zero_grad()
    # A replaced or frozen param gets no grad: backward already says so; the others at step().
    with pytest.raises(ValueError, match=expected):
        model(*batch(0, 4)).backward()
        opt.step()


def test_gradient_accumulation_with_no_sync_equals_one_big_batch():
    model, ref = TinyNet(seed=8), TinyNet(seed=8)
    ddp = sw.DistributedDataParallel(model, bucket_size=600)
    tokens, targets = batch(0, 8)
    with ddp.no_sync():
        (model(tokens[:4], targets[:4]) / 2).backward()
    (model(tokens[4:], targets[4:]) / 2).backward()
    ddp.finish_grad_sync()
    ref(tokens, targets).backward()
    for (name, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.main_grad, r.grad, rtol=1e-6, atol=1e-7, msg=name)


def test_meta_params_are_materialised_in_the_buffer():
    model = torch.nn.Sequential(torch.nn.Linear(6, 8, device="meta"),
                                torch.nn.Linear(8, 6, bias=False, device="meta"))
    model[1].weight.use_muon = False
    ddp = sw.DistributedDataParallel(model, optimizer="ddp")
    for i, (name, p) in enumerate(model.named_parameters()):
        assert p.device.type == "cpu" and bool((p == 0).all()), name
        assert p.data_ptr() == array_address(ddp.engine.param_array(i)), name
    assert model[1].weight.use_muon is False  # attributes carry over
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()  # initialised in place, in the buffer
    opt = sw.make_optimizer(ddp, lr=0.1, clip_grad=0)
    before = model[0].weight.detach().clone()
    model(torch.ones(3, 6)).square().sum().backward()
    opt.step()
    assert not torch.equal(before, model[0].weight.detach())


def test_optimizer_built_on_meta_params_before_wrapping_steps_the_materialised_ones():
    # The wrapper replaces meta params with CPU ones; an sw.AdamW built first still held the meta
    # tensors and was refused at binding ("a param of shape (8, 6) is not one of the wrapped
    # module's trainable params"), though both orders and meta params are supported.
    model = torch.nn.Sequential(torch.nn.Linear(6, 8, device="meta"))
    opt = sw.AdamW(model.parameters(), lr=0.1)
    sw.DistributedDataParallel(model, optimizer="ddp")
    assert [p.device.type for p in opt.param_groups[0]["params"]] == ["cpu", "cpu"]
    assert all(p is q for p, q in zip(opt.param_groups[0]["params"], model.parameters()))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    before = model[0].weight.detach().clone()
    model(torch.ones(3, 6)).square().sum().backward()
    opt.step()
    assert not torch.equal(before, model[0].weight.detach())


def test_bf16_params_step_from_fp32_main_params():
    # kind=distributed keeps fp32 main params and fp32 grads and writes bf16 (RNE) back: the same
    # as torch.optim.AdamW on an fp32 master copy fed with the bf16 model's grads. Each step both
    # models start from the same bf16 weights (the reference takes ours), so the fp32 masters only
    # differ by the order of AdamW's operations and the bf16 results by at most one rounding step;
    # without the re-sync, one element rounded the other way makes the two runs drift apart.
    model, ref = TinyNet(seed=9).to(torch.bfloat16), TinyNet(seed=9).to(torch.bfloat16)
    ddp = sw.DistributedDataParallel(model, optimizer="distributed", bucket_size=500)
    opt = sw.make_optimizer(ddp, lr=1e-2, clip_grad=0)
    master = [p.detach().float().clone().requires_grad_() for p in ref.parameters()]
    ref_opt = torch.optim.AdamW(master, lr=1e-2, weight_decay=0.01)
    names = [name for name, _ in model.named_parameters()]
    for step in range(5):
        opt.zero_grad()
        ref.zero_grad()
        model(*batch(step, 8)).backward()
        ref(*batch(step, 8)).backward()
        for m, p in zip(master, ref.parameters()):
            m.grad = p.grad.float()
        opt.step()
        ref_opt.step()
        with torch.no_grad():
            for name, m, p, r in zip(names, master, model.parameters(), ref.parameters()):
                assert p.dtype == torch.bfloat16 and p.main_grad.dtype == torch.float32, name
                torch.testing.assert_close(p.detach().float(), m.to(torch.bfloat16).float(),
                                           rtol=2 ** -7, atol=1e-6, msg=f"{name}, step {step}")
                r.copy_(p)
    state = opt.state_dict()["state"]
    for name, m in zip(names, master):
        for field in ("exp_avg", "exp_avg_sq"):
            ours = torch.as_tensor(state[name][field]).reshape(m.shape)
            torch.testing.assert_close(ours, ref_opt.state[m][field], rtol=1e-5, atol=1e-9,
                                       msg=f"{name} {field}")
    with pytest.raises(Exception, match="needs fp32 params.*'head.bias'|fp32 params.*head"):
        sw.make_optimizer(sw.DistributedDataParallel(TinyNet(seed=9).to(torch.bfloat16),
                                                     optimizer="ddp"), kind="ddp")


@pytest.mark.parametrize("kind", ["distributed", "layer-wise"])
@pytest.mark.parametrize("write", ["torch_op", "data_and_reload"])
def test_bf16_params_written_after_the_optimizer_reach_its_fp32_copies(kind, write):
    # The optimizer steps fp32 copies of bf16 params. Weights loaded into the module after it was
    # built (load_state_dict), written in place by a torch op (seen by the version counter, as
    # torch.optim sees the param itself) or written through .data and announced with
    # reload_model_params(), must be what the next step updates, not be overwritten by the copies.
    model = TinyNet(seed=3).to(torch.bfloat16)
    ddp = sw.DistributedDataParallel(model, optimizer=kind, bucket_size=500)
    opt = sw.make_optimizer(ddp, kind=kind, lr=0.0, muon_lr=0.0, weight_decay=0.0, clip_grad=0)
    loaded = TinyNet(seed=4).to(torch.bfloat16).state_dict()
    model.load_state_dict(loaded)
    opt.zero_grad()
    model(*batch(0, 8)).backward()
    opt.step()  # lr 0: the params must stay what was loaded
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), loaded[name]), name
    if write == "torch_op":
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(0.5)
    else:
        for p in model.parameters():
            p.data.mul_(0.5)  # .data has a version counter of its own: torch cannot tell
        opt.reload_model_params()
    written = {name: p.detach().clone() for name, p in model.named_parameters()}
    opt.zero_grad()
    model(*batch(1, 8)).backward()
    opt.step()
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), written[name]), name


@pytest.mark.parametrize("kind", ["distributed", "layer-wise"])
def test_bf16_params_show_grads_and_clip_grad_norm_reaches_the_step(kind):
    # bf16 params over the fp32 grad buffer: .grad is the reduced grad rounded to bf16, and an
    # in-place edit of it (clip_grad_norm_) is what the step reads. AdamW with eps = 1 makes the
    # first update ~lr * g, so a clip to a norm of 1e-4 must leave the params (nearly) in place.
    model = TinyNet(seed=5).to(torch.bfloat16)
    ddp = sw.DistributedDataParallel(model, optimizer=kind)
    opt = sw.make_optimizer(ddp, kind=kind, lr=0.2, muon_lr=0.0, eps=1.0, weight_decay=0.0,
                            clip_grad=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.zero_grad()
    model(*batch(0, 8)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.bfloat16, name
        assert torch.equal(p.grad, p.main_grad.to(torch.bfloat16)), name
    norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1e-4)
    assert norm > 1e-2
    opt.step()
    for name, p in model.named_parameters():
        moved = (p.detach().float() - before[name].float()).abs().max().item()
        assert moved <= 2 ** -7 * before[name].float().abs().max().item() + 1e-6, (name, moved)
    # A backward onto the exposed copies, with no zero_grad since, is refused loudly...
    with pytest.raises(RuntimeError, match="16-bit param .* zero_grad"):
        model(*batch(1, 8)).backward()
    # ... and after a torch-style zero_grad(set_to_none=False), which zeroes them in place, the
    # next backward starts from zero as in torch.
    opt.zero_grad()
    model(*batch(2, 8)).backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad.zero_()
    model(*batch(2, 8)).backward()
    for name, p in model.named_parameters():
        assert torch.equal(p.grad, expected[name]), name


def test_save_checkpoint_refuses_weights_that_are_not_finite(tmp_path):
    # The trainer's save path: a NaN weight stops the save, naming the param, and writes nothing.
    model = TinyNet(seed=7)
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp, lr=1e-2)
    model(*batch(0, 4)).backward()
    opt.step()
    with torch.no_grad():
        model.fc1.weight[1, 2] = float("nan")
    with pytest.raises(ValueError, match="step 1: the weights are not finite \\('fc1.weight' "
                                         "element [0-9]+ is nan\\)"):
        sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, step=1)
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())
    with torch.no_grad():
        model.fc1.weight[1, 2] = 0.0
    saved = sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, step=1)
    assert (tmp_path / "ckpt" / "step-0000001").samefile(saved)


def test_save_checkpoint_extra_keys_that_the_manifest_owns_are_refused(tmp_path):
    # extra={"world_size": 99} silently replaced the real value; {"step": 1} failed an internal
    # invariant; NaN reached the C++ JSON parser.
    model = TinyNet(seed=7)
    ddp = sw.DistributedDataParallel(model)
    opt = sw.make_optimizer(ddp, lr=1e-2)
    model(*batch(0, 4)).backward()
    opt.step()
    with pytest.raises(ValueError, match="extra key 'world_size' is one the checkpoint writes"):
        sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, step=1, extra={"world_size": 99})
    with pytest.raises(ValueError, match="extra manifest key 'step' is one the manifest writes"):
        sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, step=1, extra={"step": 1})
    with pytest.raises(ValueError, match="extra is not JSON-serialisable"):
        sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, step=1, extra={"a": float("nan")})
    for bad, match in (({"keep_last": -3}, "keep_last must be >= 0"),
                       ({"consumed_samples": -5}, "consumed_samples must be >= 0"),
                       ({"step": 1.5}, "step must be an int"),
                       ({"step": 2 ** 63}, "step = 9223372036854775808 does not fit in a 64-bit"),
                       ({"keep_last": 2 ** 31}, "keep_last = 2147483648 does not fit in a 32")):
        with pytest.raises(ValueError, match=match):
            sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, **dict({"step": 1}, **bad))
    with pytest.raises(ValueError, match="contains a NUL byte"):
        sw.save_checkpoint(str(tmp_path / "ck\0pt"), ddp, opt, step=1)
    for load in (False, True):  # an unset variable: the filesystem said "Invalid argument []"
        with pytest.raises(ValueError, match="directory is an empty path"):
            (sw.load_checkpoint("", ddp, opt) if load else
             sw.save_checkpoint("", ddp, opt, step=1))
    saved = sw.save_checkpoint(tmp_path / "ckpt", ddp, opt, step=1, extra={"note": "ok"})
    manifest = json.loads((pathlib.Path(saved) / "checkpoint.json").read_text())
    assert manifest["note"] == "ok" and manifest["world_size"] == 1


def test_engine_broadcast_refuses_an_array_it_would_have_to_convert():
    """broadcast_from_rank0 overwrites its array in place: an int16 or non-contiguous array used
    to be converted first, so rank 0's values landed in a temporary and the caller's kept its own."""
    ddp = sw.DistributedDataParallel(TinyNet(seed=21))
    ok = np.arange(6, dtype=np.float32)
    ddp.engine.broadcast_from_rank0(ok)  # one rank: nothing to receive
    for bad in (np.arange(6, dtype=np.int16), np.arange(12, dtype=np.float32)[::2],
                np.arange(6, dtype=np.float64)):
        with pytest.raises(ValueError, match="writeable C-contiguous float32"):
            ddp.engine.broadcast_from_rank0(bad)
    frozen = np.arange(6, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable C-contiguous float32"):
        ddp.engine.broadcast_from_rank0(frozen)


class _CheckpointedHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(4, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.head, torch.tanh(self.body(x)))  # reentrant


def test_reentrant_checkpoint_of_the_last_layer_trains_as_torch():
    # The first grad hook fired inside the checkpoint's own backward, whose end ran the callback
    # it queued: "2 parameter(s) received no gradient: 'body.weight', 'body.bias'" before the
    # outer backward reached them. Torch DDP trains this model.
    torch.manual_seed(0)
    model, ref = _CheckpointedHead(), _CheckpointedHead()
    ref.load_state_dict(model.state_dict())
    sw.DistributedDataParallel(model)
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    for step in range(3):
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(step))
        for m, o in ((model, opt), (ref, ref_opt)):
            o.zero_grad()
            m(x).pow(2).sum().backward()
            o.step()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, r, rtol=1e-6, atol=1e-7, msg=name)


def test_the_wrapped_module_deep_copies_and_pickles_as_a_plain_module():
    # Its hooks held the wrapper (a bound method, lambdas), so copy.deepcopy(ddp.module), the
    # usual start of an EMA model, failed on the engine's ParamInfo, and torch.save(ddp.module)
    # on a local lambda. Both work with torch DDP.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    ddp = sw.DistributedDataParallel(model)
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(3, 4)
    ddp(x).sum().backward()
    opt.step()
    ema = copy.deepcopy(ddp.module)
    saved = io.BytesIO()
    torch.save(ddp.module, saved)
    saved.seek(0)
    loaded = torch.load(saved)
    for other in (ema, loaded):
        assert torch.equal(other(x), model(x))
        assert all(p.data_ptr() != q.data_ptr() for p, q in zip(other.parameters(),
                                                                  model.parameters()))
    opt.zero_grad()
    ddp(x).sum().backward()
    opt.step()  # the wrapper trains on; the copies stay as they were
    assert not torch.equal(ema(x), model(x))
    ema.load_state_dict(model.state_dict())
    assert torch.equal(ema(x), model(x))
