"""The Python front end declares no optimizer kinds or defaults of its own: make_optimizer's kinds,
keywords and defaults come from the C++ optimizer spec (OptimizerConfig) through the extension,
and they equal the spec's as the CLI resolves an empty YAML optimizer section."""

import inspect
import json
import os
import subprocess

import pytest
import torch

import shardwise.torch as sw
from shardwise import _core
from shardwise.torch import optimizer as sw_optimizer
from models import TinyNet

BUILD_DIR = os.environ.get("SHARDWISE_BUILD_DIR", "build")

# make_optimizer keyword -> the YAML key of the same spec field (betas: two keys).
YAML_KEY = {"lr": "lr", "muon_lr": "muon_lr", "weight_decay": "weight_decay", "eps": "adam_eps",
            "momentum": "muon_momentum", "nesterov": "muon_nesterov", "ns_steps": "muon_ns_steps",
            "coefficients": "muon_coefficient_set", "ns_algorithm": "muon_ns_algorithm", "scale_mode": "muon_scale_mode",
            "extra_scale_factor": "muon_extra_scale_factor", "split_qkv": "muon_split_qkv",
            "matmul_precision": "muon_matmul_precision", "clip_grad": "clip_grad",
            "overlap_param_gather_with_optimizer_step":
                "overlap_param_gather_with_optimizer_step"}


def resolved_yaml_optimizer_section(tmp_path):
    """The optimizer section `shardwise config resolve` makes of a config without one."""
    config = tmp_path / "empty.yaml"
    config.write_text("optimizer: {}\n")
    out = subprocess.run([os.path.join(BUILD_DIR, "bin", "shardwise"), "config", "resolve",
                          "--config", str(config), "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["config"]["optimizer"]


def test_kinds_and_defaults_are_the_bindings():
    assert sw_optimizer.KINDS == tuple(_core.optimizer_kinds())
    assert sw_optimizer.KINDS == ("layer-wise", "distributed", "ddp", "legacy-layer-wise")
    defaults = _core.optimizer_defaults()
    assert sw_optimizer.DEFAULTS == {k: v for k, v in defaults.items() if k != "kind"}
    # No Python default anywhere else: the signature shows the binding's values.
    parameters = inspect.signature(sw.make_optimizer).parameters
    assert {n: p.default for n, p in parameters.items() if n not in ("ddp", "kind")} == \
        sw_optimizer.DEFAULTS
    # optimizer=None lays the buffers out for the spec's default kind (until an sw optimizer
    # of another kind attaches).
    assert inspect.signature(sw.DistributedDataParallel).parameters["optimizer"].default is None
    assert sw.DistributedDataParallel(torch.nn.Linear(2, 2)).kind == defaults["kind"]


def test_defaults_equal_the_yaml_defaults(tmp_path):
    yaml = resolved_yaml_optimizer_section(tmp_path)
    defaults = _core.optimizer_defaults()
    assert defaults["kind"] == yaml["kind"]
    assert defaults["betas"] == (yaml["adam_beta1"], yaml["adam_beta2"])
    assert set(YAML_KEY) | {"kind", "betas"} == set(defaults)
    for keyword, key in YAML_KEY.items():
        assert defaults[keyword] == yaml[key], keyword


def test_an_optimizer_without_keywords_has_the_defaults():
    ddp = sw.DistributedDataParallel(TinyNet(seed=0))
    opt = sw.make_optimizer(ddp)
    assert opt.options == sw_optimizer.DEFAULTS
    assert opt.lr == sw_optimizer.DEFAULTS["lr"]


def test_every_scale_mode_of_the_spec_is_accepted():
    for mode in ("spectral", "unit_rms_norm", "shape_scaling", "adamw_matched_rms"):
        ddp = sw.DistributedDataParallel(TinyNet(seed=0))
        assert sw.make_optimizer(ddp, scale_mode=mode).options["scale_mode"] == mode
    ddp = sw.DistributedDataParallel(TinyNet(seed=0))
    with pytest.raises(ValueError, match="scale_mode: unknown value 'rms' \\(valid: spectral, "
                                         "unit_rms_norm, shape_scaling, adamw_matched_rms\\)"):
        sw.make_optimizer(ddp, scale_mode="rms")


def test_an_unknown_keyword_is_a_type_error():
    ddp = sw.DistributedDataParallel(TinyNet(seed=0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta1'"):
        sw.make_optimizer(ddp, beta1=0.9)
    assert not ddp.engine.has_optimizer()


def test_decay_rule_is_the_clis_for_make_optimizer_and_torchs_for_sw_adamw():
    # make_optimizer took lr x weight_decay >= 1, which `shardwise train` refuses for the same
    # settings (the weights are multiplied by 1 - lr x weight_decay each step); sw.AdamW keeps
    # torch.optim.AdamW's rules, which allow it.
    ddp = sw.DistributedDataParallel(TinyNet(seed=0), optimizer="distributed")
    with pytest.raises(ValueError, match=r"lr \(2\) x weight_decay \(0.6\) must be < 1"):
        sw.make_optimizer(ddp, lr=2.0, weight_decay=0.6)
    assert not ddp.engine.has_optimizer()
    layer_wise = sw.DistributedDataParallel(TinyNet(seed=1), optimizer="layer-wise")
    with pytest.raises(ValueError, match=r"muon_lr \(5\) x weight_decay \(0.5\) must be < 1"):
        sw.make_optimizer(layer_wise, muon_lr=5.0, weight_decay=0.5)
    model = TinyNet(seed=2)
    sw.DistributedDataParallel(model, optimizer="distributed")
    sw.AdamW(model.parameters(), lr=2.0, weight_decay=0.6)  # as torch.optim.AdamW
