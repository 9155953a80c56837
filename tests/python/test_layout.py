"""shardwise.layout.compute_full_param_layout against the CLI's `shardwise layout --format json`
for every model of the zoo, with params built from the CLI's model spec as plain objects that
carry Megatron's attributes."""

import json

import pytest
import torch

import shardwise
from shardwise.layout import BufferKey, compute_full_param_layout

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class MegatronLikeParam:
    """What Megatron's layout code reads off a param: shape, dtype and attributes."""

    def __init__(self, spec):
        self.name = spec["name"]
        self.shape = torch.Size(spec["shape"])
        self.dtype = TORCH_DTYPES[spec.get("dtype", "bf16")]
        if spec.get("embedding_or_output"):
            self.is_embedding_or_output_parameter = True
        if spec.get("shared_embedding"):
            self.shared_embedding = True
        if spec.get("expert_parallel"):
            self.allreduce = False
        if spec.get("use_muon") is not None:
            self.use_muon = spec["use_muon"]
        if spec.get("qkv_split"):
            self.qkv_split = tuple(spec["qkv_split"])


def zoo_models(cli):
    return [line.split()[0] for line in cli("model-spec", "--list").splitlines() if line.strip()]


def expected_buffers(cli, model, dp, bucket_size, optimizer):
    report = json.loads(cli("layout", "--model", model, "--dp", dp, "--format", "json",
                            "--bucket-size", "none" if bucket_size is None else bucket_size,
                            "--optimizer", optimizer))
    return report["buffers"]


def check_equal(layout, buffers, params):
    assert len(layout.layouts) == len(buffers)
    for (key, got), want in zip(layout.layouts.items(), buffers):
        assert key == BufferKey(TORCH_DTYPES[want["param_dtype"]], TORCH_DTYPES[want["grad_dtype"]],
                                want["expert_parallel"], want["layer_wise"])
        assert got.num_shards == want["num_shards"]
        assert got.shard_aligned == want["shard_aligned"]
        assert got.bucket_indices == [(b["start"], b["end"]) for b in want["buckets"]]
        assert got.per_bucket_numel_unpadded == [b["numel_unpadded"] for b in want["buckets"]]
        entries = list(got.param_index_map.items())
        assert [(p.name, rng) for p, rng in entries] == \
            [(e["name"], (e["start"], e["end"], e["bucket"])) for e in want["params"]]
        # Keys are the caller's own objects.
        assert all(p is params[e["param_id"]] for (p, _), e in zip(entries, want["params"]))
        indices = got.param_indices or [e["param_id"] for e in want["params"]]
        assert indices == [e["index"] for e in want["params"]]


@pytest.mark.parametrize("dp,bucket_size", [(2, None), (8, 20_000_000)])
def test_layout_matches_cli_for_every_zoo_model(cli, dp, bucket_size):
    models = zoo_models(cli)
    assert len(models) >= 5, models
    for model in models:
        spec = json.loads(cli("model-spec", "--arch", model))
        params = [MegatronLikeParam(p) for p in spec["params"]]
        layout = compute_full_param_layout(params, dp, bucket_size=bucket_size)
        check_equal(layout, expected_buffers(cli, model, dp, bucket_size, "layer-wise"), params)


@pytest.mark.parametrize("optimizer", ["distributed", "ddp"])
def test_other_optimizers_match_cli(cli, optimizer):
    spec = json.loads(cli("model-spec", "--arch", "llama3-8b"))
    params = [MegatronLikeParam(p) for p in spec["params"]]
    layout = compute_full_param_layout(params, 4, bucket_size=50_000_000, optimizer=optimizer)
    cli_optimizer = "none" if optimizer == "ddp" else optimizer
    check_equal(layout, expected_buffers(cli, "llama3-8b", 4, 50_000_000, cli_optimizer), params)


def test_expert_dp_and_high_nccl_busbw_match_cli(cli):
    spec = json.loads(cli("model-spec", "--arch", "mixtral-8x7b"))
    params = [MegatronLikeParam(p) for p in spec["params"]]
    assert any(getattr(p, "allreduce", True) is False for p in params)
    layout = compute_full_param_layout(params, 8, bucket_size=30_000_000, expert_dp=2,
                                       high_nccl_busbw=True)
    report = json.loads(cli("layout", "--model", "mixtral-8x7b", "--dp", 8, "--expert-dp", 2,
                            "--bucket-size", 30_000_000, "--high-nccl-busbw", "--format", "json"))
    assert {b["num_shards"] for b in report["buffers"]} == {2, 8}
    check_equal(layout, report["buffers"], params)


def test_torch_parameters_are_keys_and_attributes_route_buffers():
    emb = torch.nn.Parameter(torch.zeros(100, 16))
    emb.is_embedding_or_output_parameter = True
    w = torch.nn.Parameter(torch.zeros(32, 16))
    norm = torch.nn.Parameter(torch.zeros(16))
    expert = torch.nn.Parameter(torch.zeros(32, 16))
    expert.allreduce = False
    layout = compute_full_param_layout([emb, w, norm, expert], dp=2, grad_reduce_in_fp32=False)
    where = {}
    for key, buf in layout.layouts.items():
        assert key.grad_dtype == torch.float32  # fp32 params: fp32 grads either way
        for p in buf.param_index_map:
            where[id(p)] = key
    assert where[id(w)].is_layer_wise and not where[id(w)].is_expert_parallel
    assert not where[id(emb)].is_layer_wise  # embeddings stay on AdamW
    assert not where[id(norm)].is_layer_wise
    assert where[id(expert)].is_expert_parallel
    start, end, bucket = layout.layouts[where[id(w)]].param_index_map[w]
    assert end - start == w.numel() and bucket == 0


def test_bad_input_names_the_param():
    class NoShape:
        dtype = torch.float32
    with pytest.raises(ValueError, match=r"params\[1\]"):
        compute_full_param_layout([torch.nn.Parameter(torch.zeros(4)), NoShape()], dp=2)
    p = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"params\[0\].*float64"):
        compute_full_param_layout([p], dp=2)
    q = torch.nn.Parameter(torch.zeros(4))
    with pytest.raises(ValueError, match="listed twice"):
        compute_full_param_layout([q, q], dp=2)
    with pytest.raises(shardwise.Error, match="dp|data_parallel"):
        compute_full_param_layout([q], dp=0)
    with pytest.raises(shardwise.Error, match="unknown layout"):
        compute_full_param_layout([q], dp=1, optimizer="adam")
    # int() truncated these: dp 1.5 laid out for dp 1, a shape (4.7, 4) became [4, 4].
    with pytest.raises(ValueError, match="dp must be an integer, got 1.5"):
        compute_full_param_layout([q], dp=1.5)
    with pytest.raises(ValueError, match="'odd': a dimension of its shape must be an integer"):
        compute_full_param_layout([ShapedParam("odd", (4.7, 4))], dp=2)
    with pytest.raises(ValueError, match="steps must be an integer, got 1.7"):
        shardwise.newton_schulz(torch.eye(4), steps=1.7)
    # dp 2^30 ran out of memory (work and memory grow with dp); the CLI's limit holds here too.
    with pytest.raises(shardwise.Error, match=r"data_parallel_size must be in \[1, 1048576\]"):
        compute_full_param_layout([q], dp=2 ** 30)
    # A qkv_split that is not 3 positive row counts summing to shape[0] changed the layout.
    for split, problem in (((1, 1, 1), "sums to 3 but shape\\[0\\] is 768"),
                           ((-10 ** 6, 10 ** 6 + 384, 384), "entries must be > 0"),
                           ((256, 512), "must have 3 entries")):
        qkv = ShapedParam("qkv", (768, 256))
        qkv.qkv_split = split
        with pytest.raises(shardwise.Error, match=f"'qkv': qkv_split {problem}"):
            compute_full_param_layout([qkv], dp=2)


class ShapedParam:
    def __init__(self, name, shape, dtype=torch.float32):
        self.name, self.shape, self.dtype = name, shape, dtype


@pytest.mark.parametrize("shape", [(2 ** 33, 2 ** 32), (2 ** 62, 4), (3, 2 ** 62, 2 ** 62),
                                   (2 ** 26, 2 ** 25)])
def test_a_shape_past_the_element_limit_is_refused(shape):
    # 2^65 elements used to wrap to an empty range; anything past 2^50 elements is refused.
    params = [ShapedParam("small", (4, 4)), ShapedParam("huge", shape)]
    with pytest.raises(shardwise.Error, match=r"param huge: shape \[.*\] has more than"):
        compute_full_param_layout(params, dp=2)


def test_a_dimension_past_64_bits_is_refused():
    with pytest.raises(ValueError, match="'huge': a dimension of its shape = "
                                         "36893488147419103232 does not fit in a 64-bit integer"):
        compute_full_param_layout([ShapedParam("huge", (2 ** 65,))], dp=2)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_params_are_refused(dtype):
    """An integer tensor has no gradient: a layout with a grad buffer for it was computed."""
    with pytest.raises(ValueError, match=f"param 'ids' is {dtype}: layouts hold trainable"):
        compute_full_param_layout([ShapedParam("w", (4, 4)), ShapedParam("ids", (8,), dtype)],
                                  dp=2)


@pytest.mark.parametrize("arguments, message", [
    (dict(dp=2 ** 31), "dp = 2147483648 does not fit in a 32-bit integer"),
    (dict(dp=2, expert_dp=-2 ** 40), "expert_dp = -1099511627776 does not fit in a 32-bit"),
    (dict(dp=2, bucket_size=2 ** 63), "bucket_size = 9223372036854775808 does not fit in a 64"),
])
def test_integers_past_the_engines_width_are_named(arguments, message):
    """They reached the binding as pybind11's "incompatible function arguments"."""
    with pytest.raises(ValueError, match=message):
        compute_full_param_layout([ShapedParam("w", (4, 4))], **arguments)


def test_params_past_the_element_limit_together_are_refused():
    params = [ShapedParam(f"p{i}", (2 ** 24, 2 ** 24)) for i in range(5)]  # 2^48 each
    with pytest.raises(shardwise.Error, match="the params up to p4 hold .* more than"):
        compute_full_param_layout(params, dp=2, optimizer="ddp")


def test_a_param_at_the_element_limit_is_laid_out_whole():
    layout = compute_full_param_layout([ShapedParam("big", (2 ** 25, 2 ** 25))], dp=1,
                                       optimizer="ddp")
    (buffer,) = layout.layouts.values()
    ((param, (start, end, _)),) = buffer.param_index_map.items()
    assert end - start == 2 ** 50
