"""sw.AdamW and sw.Muon are torch.optim.Optimizers: torch's lr schedulers drive the engine's
update through param_groups, per-group hyperparameters reach the C++ step, and state_dict is in
torch's layout."""

import copy
import pathlib

import numpy as np
import pytest
import torch

import shardwise.torch as sw
from conftest import run_mpi
from models import TinyNet, batch

HERE = pathlib.Path(__file__).resolve().parent
SCHEDULERS = {
    "StepLR": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5),
    "CosineAnnealingLR": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20),
    "LambdaLR": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s)),
    "OneCycleLR": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.02,
                                                                  total_steps=20),
    "LinearLR": lambda opt: torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1,
                                                              total_iters=10),
}


def no_decay_groups(model, weight_decay=0.1):
    """The usual split: no weight decay on biases and norm weights (1-D params)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def train(model, opt, scheduler, steps=20):
    losses = []
    for step in range(steps):
        loss = model(*batch(step, 8))
        loss.backward()
        opt.step()
        opt.zero_grad()
        scheduler.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["distributed", "ddp"])
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_and_groups_match_torch_adamw(name, kind):
    reference = TinyNet(seed=3)
    model = copy.deepcopy(reference)
    torch_opt = torch.optim.AdamW(no_decay_groups(reference), lr=1e-2)
    expected = train(reference, torch_opt, SCHEDULERS[name](torch_opt))

    sw.DistributedDataParallel(model, optimizer=kind)
    opt = sw.AdamW(no_decay_groups(model), lr=1e-2)
    assert isinstance(opt, torch.optim.Optimizer)
    got = train(model, opt, SCHEDULERS[name](opt))
    assert got == pytest.approx(expected, abs=1e-6)
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in torch_opt.param_groups]
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p.detach(), q.detach(), atol=1e-5), n


def test_closure_is_evaluated_with_grad_and_its_loss_returned():
    model = TinyNet(seed=4)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters())

    def closure():
        opt.zero_grad()
        loss = model(*batch(0, 8))
        loss.backward()
        return loss
    before = model.fc1.weight.detach().clone()
    with torch.no_grad():
        loss = opt.step(closure)
    assert loss.requires_grad and not torch.equal(before, model.fc1.weight.detach())


def test_group_with_zero_lr_does_not_move_and_the_other_does():
    model = TinyNet(seed=5)
    sw.DistributedDataParallel(model, optimizer="distributed")
    frozen = [model.fc1.weight, model.fc1.bias]
    rest = [p for p in model.parameters() if all(p is not f for f in frozen)]
    opt = sw.AdamW([{"params": frozen, "lr": 0.0}, {"params": rest}], lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), steps=3)
    for n, p in model.named_parameters():
        moved = not torch.equal(before[n], p.detach())
        assert moved == (not n.startswith("fc1.")), n


def test_weight_decay_per_group_reaches_the_update():
    # With lr > 0 and zero grads AdamW only decays: p <- p * (1 - lr*wd) exactly per group.
    model = TinyNet(seed=6)
    ddp = sw.DistributedDataParallel(model, optimizer="ddp")
    opt = sw.AdamW([{"params": [model.fc2.weight], "weight_decay": 0.5},
                    {"params": [p for p in model.parameters() if p is not model.fc2.weight],
                     "weight_decay": 0.0}], lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    (model(*batch(0, 8)) * 0.0).backward()
    opt.step()
    for n, p in model.named_parameters():
        factor = 1 - 0.1 * 0.5 if n == "fc2.weight" else 1.0
        assert torch.allclose(p.detach(), before[n] * factor, atol=1e-7, rtol=0), n


def test_state_dict_is_torch_layout_and_round_trips():
    def make(seed):
        model = TinyNet(seed=seed)
        sw.DistributedDataParallel(model, optimizer="distributed")
        return model, sw.AdamW(no_decay_groups(model), lr=1e-2)
    model, opt = make(7)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    train(model, opt, sched, steps=3)
    saved = opt.state_dict()
    params = list(model.parameters())
    order = [p for g in opt.param_groups for p in g["params"]]
    assert sorted(saved["state"]) == list(range(len(params)))
    assert [g["params"] for g in saved["param_groups"]] == [
        list(range(len(opt.param_groups[0]["params"]))),
        list(range(len(opt.param_groups[0]["params"]), len(order)))]
    assert saved["param_groups"][1]["weight_decay"] == 0.0
    assert saved["param_groups"][0]["lr"] == pytest.approx(1e-2 / 8)
    first = saved["state"][0]
    assert set(first) == {"exp_avg", "exp_avg_sq", "step"}
    assert first["exp_avg"].shape == order[0].shape and float(first["step"]) == 3.0

    other, opt2 = make(7)
    other.load_state_dict(model.state_dict())
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == pytest.approx(1e-2 / 8)
    again = opt2.state_dict()
    for i, fields in saved["state"].items():
        for field, value in fields.items():
            assert torch.equal(again["state"][i][field], value), (i, field)
    # Both continue identically.
    for m, o in ((model, opt), (other, opt2)):
        m(*batch(9, 8)).backward()
        o.step()
    for (n, p), q in zip(model.named_parameters(), other.parameters()):
        assert torch.equal(p.detach(), q.detach()), n
    # The distributed kind's state dict holds the saving rank's shards: another rank refuses it.
    assert saved["shardwise"] == {"kind": "distributed", "rank": 0, "dp_size": 1}
    from_other_rank = dict(saved, shardwise=dict(saved["shardwise"], rank=1, dp_size=2))
    with pytest.raises(ValueError, match="saved by rank 1 of 2.*one per rank"):
        opt2.load_state_dict(from_other_rank)


@pytest.mark.parametrize("kind", ["distributed", "ddp"])
def test_state_is_torchs_by_param_and_read_only(kind):
    """opt.state holds torch.optim.AdamW's state tensors by param (dp 1: every param whole)."""
    reference = TinyNet(seed=11)
    model = copy.deepcopy(reference)
    torch_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    sw.DistributedDataParallel(model, optimizer=kind)
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    assert len(opt.state) == 0  # before the first step, as torch
    for step in range(3):
        for m, o in ((reference, torch_opt), (model, opt)):
            m(*batch(step, 8)).backward()
            o.step()
            o.zero_grad()
    assert len(opt.state) == len(list(model.parameters()))
    for p, q in zip(model.parameters(), reference.parameters()):
        got, expected = opt.state[p], torch_opt.state[q]
        assert set(got) == {"exp_avg", "exp_avg_sq", "step"}
        assert float(got["step"]) == float(expected["step"]) == 3.0
        for field in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(got[field], expected[field], atol=1e-7, rtol=1e-5)
    p = next(model.parameters())
    with pytest.raises(TypeError):
        opt.state[p]["step"] = torch.tensor(0.0)
    with pytest.raises(AttributeError, match="read-only.*load_state_dict"):
        opt.state = {}


@pytest.mark.parametrize("kind", ["distributed", "ddp"])
def test_grads_replaced_or_dropped_after_backward_are_what_the_step_reads(kind):
    """As torch.optim reads .grad: a .grad set to None skips its param (value and state stay),
    a .grad replaced by another tensor is the grad the step uses."""
    reference = TinyNet(seed=13)
    model = copy.deepcopy(reference)
    torch_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    sw.DistributedDataParallel(model, optimizer=kind)
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    for step in range(3):
        for m, o in ((reference, torch_opt), (model, opt)):
            m(*batch(step, 8)).backward()
            params = list(m.parameters())
            params[0].grad = None if step != 1 else params[0].grad * 0.5
            params[1].grad = params[1].grad * 0 if step == 0 else params[1].grad
            o.step()
            o.zero_grad()
        for (n, p), q in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.detach(), q.detach(), atol=1e-6, rtol=1e-5,
                                       msg=f"{n}, step {step}")
    ours = opt.state[next(model.parameters())]["step"]
    theirs = torch_opt.state[next(reference.parameters())]["step"]
    assert float(ours) == float(theirs) == 1.0  # stepped once: only step 1 gave it a grad


@pytest.mark.parametrize("kind", ["distributed", "ddp", "layer-wise"])
def test_step_without_any_grad_does_nothing_as_in_torch(kind):
    """torch.optim's step() skips every param whose .grad is None: before the first backward and
    after zero_grad(set_to_none=True) it changes nothing (values, state, step counts); it used to
    raise. After zero_grad(set_to_none=False) torch would step on zero grads: that still raises
    (the engine cannot tell zeros from grads written without a backward)."""
    model = TinyNet(seed=14)
    sw.DistributedDataParallel(model, optimizer=kind)
    opt = (sw.Muon(model.parameters(), lr=1e-2, adamw_lr=1e-2) if kind == "layer-wise"
           else sw.AdamW(model.parameters(), lr=1e-2))

    def unchanged_by_a_step_without_grads():
        values = [p.detach().clone() for p in model.parameters()]
        state = copy.deepcopy(opt.state_dict()["state"])
        opt.step()
        assert all(torch.equal(p, v) for p, v in zip(model.parameters(), values))
        torch.testing.assert_close(opt.state_dict()["state"], state, rtol=0, atol=0)

    unchanged_by_a_step_without_grads()
    assert opt.state == {} and opt.last_step is None
    for step in range(2):
        model(*batch(step, 8)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        unchanged_by_a_step_without_grads()
    if kind != "layer-wise":  # AdamW counts its steps: two, as torch's would
        assert float(opt.state[next(model.parameters())]["step"]) == 2.0
    model(*batch(2, 8)).backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None for p in model.parameters())
    with pytest.raises(RuntimeError, match="no backward\\(\\) through the wrapped module"):
        opt.step()


def test_muon_state_has_momentum_for_matrices_after_the_first_step():
    model = TinyNet(seed=12)
    sw.DistributedDataParallel(model, optimizer="layer-wise")
    opt = sw.Muon(model.parameters())
    assert len(opt.state) == 0
    model(*batch(0, 8)).backward()
    opt.step()
    assert len(opt.state) == len(list(model.parameters()))
    muon_params = [p for p in model.parameters() if p.dim() == 2 and p in opt.state
                   and "momentum_buffer" in opt.state[p]]
    assert muon_params, "no param carries Muon's momentum"
    for p in muon_params:
        assert opt.state[p]["momentum_buffer"].shape == p.shape
        assert opt.state[p]["momentum_buffer"].abs().sum() > 0


@pytest.mark.parametrize("steps_before_saving", [0, 2])
def test_torch_adamw_state_without_some_params_loads_as_in_torch(steps_before_saving):
    """A torch.optim.AdamW state dict saved before its first step (empty state) or after steps
    that skipped a param (.grad None: no state for it) loads, and a param without saved state
    starts fresh, as torch's own load_state_dict leaves it."""
    reference = TinyNet(seed=5)
    torch_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    for step in range(steps_before_saving):
        reference(*batch(step, 8)).backward()
        reference.head.bias.grad = None  # torch skips it: no state
        torch_opt.step()
        torch_opt.zero_grad()
    saved = copy.deepcopy(torch_opt.state_dict())
    params = len(list(reference.parameters()))
    assert len(saved["state"]) == (0 if steps_before_saving == 0 else params - 1)
    model = copy.deepcopy(reference)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters(), lr=1e-2)
    opt.load_state_dict(saved)
    for step in range(3):
        for m, o in ((reference, torch_opt), (model, opt)):
            m(*batch(10 + step, 8)).backward()
            o.step()
            o.zero_grad()
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), atol=1e-6, rtol=1e-5, msg=n)


def test_muon_public_preset_values_and_param_split():
    model = TinyNet(seed=8)
    sw.DistributedDataParallel(model, optimizer="layer-wise")
    opt = sw.muon_public(model.parameters())
    assert opt.options["coefficients"] == "simple"
    assert opt.options["scale_mode"] == "shape_scaling"
    assert opt.options["clip_grad"] == 0.0 and opt.options["nesterov"] is True
    muon_group, adamw_group = opt.param_groups
    assert muon_group["use_muon"] and muon_group["lr"] == 0.02
    assert {id(p) for p in muon_group["params"]} == {id(model.fc1.weight), id(model.fc2.weight)}
    assert not adamw_group["use_muon"] and adamw_group["lr"] == 3e-4
    assert adamw_group["betas"] == (0.9, 0.95) and adamw_group["eps"] == 1e-10


def test_muon_megatron_preset_is_the_spec():
    model = TinyNet(seed=9)
    sw.DistributedDataParallel(model, optimizer="layer-wise")
    opt = sw.muon_megatron(model.parameters())
    assert opt.options["coefficients"] == "quintic" and opt.options["scale_mode"] == "spectral"
    assert opt.options["muon_lr"] == 0.002 and opt.options["lr"] == 0.001
    assert opt.options["clip_grad"] == 0.0
    assert opt.param_groups[0]["weight_decay"] == 0.01


def test_muon_group_lr_zero_freezes_only_that_group():
    model = TinyNet(seed=10)
    sw.DistributedDataParallel(model, optimizer="layer-wise")
    opt = sw.muon_public([{"params": [model.fc1.weight], "lr": 0.0},
                          {"params": [p for p in model.parameters()
                                      if p is not model.fc1.weight]}])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), steps=2)
    for n, p in model.named_parameters():
        assert torch.equal(before[n], p.detach()) == (n == "fc1.weight"), n


def test_muon_scheduler_scales_the_muon_update():
    # Halving a Muon group's lr halves its update (the orthogonalised direction is the same).
    deltas = []
    for lr in (0.02, 0.01):
        model = TinyNet(seed=11)
        sw.DistributedDataParallel(model, optimizer="layer-wise")
        opt = sw.muon_public(model.parameters(), lr=0.04)
        opt.param_groups[0]["lr"] = lr
        before = model.fc2.weight.detach().clone()
        model(*batch(0, 8)).backward()
        opt.step()
        deltas.append(model.fc2.weight.detach() - before)
    assert torch.allclose(deltas[0], 2 * deltas[1], atol=1e-6)


def test_muon_group_contradicting_the_layout_names_the_param():
    model = TinyNet(seed=12)
    sw.DistributedDataParallel(model, optimizer="layer-wise")
    with pytest.raises(ValueError, match="param 'fc1.weight'.*use_muon=False"):
        sw.Muon([{"params": list(model.parameters()), "use_muon": False}])


def test_kind_mismatch_and_missing_params_are_clear_errors():
    model = TinyNet(seed=13)
    ddp = sw.DistributedDataParallel(model, optimizer="layer-wise")
    with pytest.raises(ValueError, match="sw.AdamW needs a DistributedDataParallel laid out for"):
        sw.AdamW(model.parameters())
    with pytest.raises(ValueError, match="param 'head.bias' of the wrapped module is in no"):
        sw.Muon([p for p in model.parameters() if p is not model.head.bias])
    unwrapped = TinyNet(seed=0)
    waiting = sw.AdamW(unwrapped.parameters())  # binds when the module is wrapped
    unwrapped(*batch(0, 8)).backward()
    with pytest.raises(RuntimeError, match="belong to no shardwise DistributedDataParallel yet"):
        waiting.step()
    assert not ddp.engine.has_optimizer()
    opt = sw.Muon(model.parameters(), ddp=ddp)
    with pytest.raises(ValueError, match="every param of the wrapped module"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})


def test_bad_group_value_is_refused_naming_param_and_field():
    model = TinyNet(seed=14)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters())
    opt.param_groups[0]["lr"] = -1.0
    model(*batch(0, 8)).backward()
    with pytest.raises(ValueError, match="param 'embed.weight': lr must be >= 0"):
        opt.step()


def test_constructor_values_the_engine_would_refuse_are_refused_up_front():
    # eps=0 passed the torch-style check (torch takes it), then the engine refused it; ns_steps
    # 2.5 was kept in the defaults while the engine ran int(2.5) = 2 steps.
    model = TinyNet(seed=15)
    sw.DistributedDataParallel(model, optimizer="distributed")
    with pytest.raises(ValueError, match="Invalid epsilon value: eps must be > 0 \\(got 0.0\\)"):
        sw.AdamW(model.parameters(), eps=0.0)
    layer_wise = TinyNet(seed=16)
    sw.DistributedDataParallel(layer_wise, optimizer="layer-wise")
    with pytest.raises(ValueError, match="ns_steps: expected an integer, got 2.5"):
        sw.Muon(layer_wise.parameters(), ns_steps=2.5)


def test_step_without_a_new_backward_says_what_is_missing():
    # The message said "called before any backward()" after a backward and one step.
    model = TinyNet(seed=17)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters())
    model(*batch(0, 8)).backward()
    opt.step()
    with pytest.raises(RuntimeError, match="no backward\\(\\) through the wrapped module since "
                                           "the last step\\(\\) / zero_grad\\(\\)"):
        opt.step()


def test_load_state_dict_names_an_index_it_cannot_place():
    # A frozen param's state gave KeyError(<id of the param>), an index past the groups a bare
    # IndexError.
    model = TinyNet(seed=18)
    model.head.bias.requires_grad_(False)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters())
    model(*batch(0, 8)).backward()
    opt.step()
    saved = opt.state_dict()
    params = list(model.parameters())
    frozen = next(i for i, p in enumerate(params) if p is model.head.bias)
    with_frozen = copy.deepcopy(saved)
    with_frozen["state"][frozen] = {"step": torch.tensor(1.0), "exp_avg": torch.zeros(2),
                                    "exp_avg_sq": torch.zeros(2)}
    with pytest.warns(UserWarning, match=f"state for param index {frozen} ignored: the param "
                                         "does not require grad"):
        opt.load_state_dict(with_frozen)
    torch.testing.assert_close(opt.state_dict()["state"], saved["state"], rtol=0, atol=0)
    past_the_end = copy.deepcopy(saved)
    past_the_end["state"][len(params)] = past_the_end["state"][0]
    with pytest.raises(ValueError, match=f"state for param index {len(params)}, but the "
                                         f"optimizer's param groups hold {len(params)} params"):
        opt.load_state_dict(past_the_end)


@pytest.mark.parametrize("flag", ["maximize", "amsgrad"])
def test_group_flags_the_engine_cannot_honour_are_refused(flag):
    # Refused by the constructor only: in a group (given, edited, or loaded from a torch state
    # dict) maximize=True stepped downhill and amsgrad=True plain AdamW, without a word.
    model = TinyNet(seed=19)
    sw.DistributedDataParallel(model, optimizer="distributed")
    with pytest.raises(ValueError, match=f"param group 0 sets {flag}=True"):
        sw.AdamW([{"params": list(model.parameters()), flag: True}])
    opt = sw.AdamW(model.parameters())
    model(*batch(0, 8)).backward()
    opt.step()
    saved = opt.state_dict()
    saved["param_groups"][0][flag] = True
    with pytest.raises(ValueError, match=f"loaded state dict's param group 0 sets {flag}=True"):
        opt.load_state_dict(saved)
    assert not opt.param_groups[0].get(flag)  # nothing of the refused dict was taken
    opt.param_groups[0][flag] = True
    opt.zero_grad()
    model(*batch(1, 8)).backward()
    with pytest.raises(ValueError, match=f"param group 0 sets {flag}=True"):
        opt.step()


@pytest.mark.parametrize("field, value, said", [("exp_avg", float("nan"), "holds nan"),
                                                ("exp_avg", float("inf"), "holds inf"),
                                                ("exp_avg_sq", -1.0, "cannot be negative")])
def test_load_state_dict_refuses_moments_that_would_poison_the_params(field, value, said):
    # Accepted before: the next step turned every param NaN.
    model = TinyNet(seed=20)
    sw.DistributedDataParallel(model, optimizer="distributed")
    opt = sw.AdamW(model.parameters())
    model(*batch(0, 8)).backward()
    opt.step()
    saved = opt.state_dict()
    bad = copy.deepcopy(saved)
    bad["state"][0][field].view(-1)[3] = value
    with pytest.raises(ValueError, match=f"field '{field}' of param .* {said}"):
        opt.load_state_dict(bad)
    torch.testing.assert_close(opt.state_dict()["state"], saved["state"], rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["distributed", "ddp", "legacy-layer-wise"])
def test_all_layer_wise_is_refused_where_it_would_be_ignored(kind):
    with pytest.raises(ValueError, match=f"optimizer kind '{kind}' has no such buffers"):
        sw.DistributedDataParallel(TinyNet(seed=21), optimizer=kind, all_layer_wise=True)
    # Wrapped without a kind, sw.AdamW re-lays the buffers for an AdamW kind: refused there too.
    model = TinyNet(seed=22)
    sw.DistributedDataParallel(model, all_layer_wise=True)
    with pytest.raises(ValueError, match="has no such buffers"):
        sw.AdamW(model.parameters())


@pytest.mark.parametrize("kind", ["distributed", "ddp"])
def test_a_step_skipped_for_non_finite_grads_warns(kind):
    # torch.optim.AdamW would write the NaN into the params; the engine skips the step, which
    # only opt.last_step["stepped"] showed.
    model = TinyNet(seed=19)
    sw.DistributedDataParallel(model, optimizer=kind)
    opt = sw.AdamW(model.parameters(), lr=0.1)
    model(*batch(0, 8)).backward()
    model.fc1.weight.grad[0, 0] = float("nan")
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.warns(UserWarning, match="step skipped: the gradients hold NaN or inf"):
        opt.step()
    assert opt.last_step["stepped"] is False
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


def test_torch_adamw_script_at_dp2_gives_torchs_losses(tmp_path):
    out = tmp_path / "losses.npz"
    done = run_mpi(2, HERE / "torch_optim_worker.py", out)
    assert done.returncode == 0, done.stderr
    result = np.load(out)
    np.testing.assert_allclose(result["got"], result["expected"], atol=1e-5, rtol=0)
