"""shardwise.torch with overlapped param all-gathers: no param is read before its gather is
complete, whoever reads it. Models built from torch's own layers (nn.MultiheadAttention reads
out_proj.weight without calling out_proj), a tied head and a functional forward train exactly as
plain torch does, at several bucket sizes (several bucket groups each), on 1 and 2 ranks (at
dp=1 a gather moves nothing, so only dp=2 can catch a read that comes too early)."""

import json
import pathlib

import pytest
import torch

import shardwise.torch as sw
from conftest import run_mpi
from layer_models import EPS, MODELS, VOCAB, AttentionNet, fresh
from models import batch
from param_gather_worker import BUCKET_SIZES, differences, train_shardwise, train_torch

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def two_rank_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gather") / "report.json"
    done = run_mpi(2, HERE / "param_gather_worker.py", out, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("bucket_size", BUCKET_SIZES)
@pytest.mark.parametrize("model_class", MODELS, ids=lambda c: c.__name__)
def test_two_ranks_train_as_plain_torch(two_rank_report, model_class, bucket_size):
    case = two_rank_report[f"{model_class.__name__}/{bucket_size}"]
    assert case["groups"] > 1, "the case needs several bucket groups to overlap gathers"
    # kind=distributed is AdamW on every param: plain torch.optim.AdamW is the reference.
    loss, param = case["distributed_vs_torch"]
    assert loss <= 1e-5 and param <= 1e-5, f"dp=2 differs from torch: {case}"
    # Muon + AdamW: overlapped gathers are bit-identical to gathering inside step().
    assert case["layer_wise_overlap_vs_sync"] == [0, 0], case


def test_a_read_on_one_rank_keeps_the_gathers_in_order(two_rank_report):
    case = two_rank_report["rank_local_read"]
    assert case["groups"] > 1
    loss, param = case["distributed_vs_torch"]
    assert loss <= 1e-5 and param <= 1e-5, case


@pytest.mark.parametrize("model_class", MODELS, ids=lambda c: c.__name__)
def test_one_rank_trains_as_plain_torch(model_class):
    run = train_shardwise(fresh(model_class), bucket_size=1500, optimizer="distributed",
                          overlap_grad_reduce=True, overlap_param_gather=True)
    assert run[2] > 1
    loss, param = differences(run, train_torch(fresh(model_class)))
    assert loss <= 1e-5 and param <= 1e-5, (loss, param)


def test_reads_outside_forward_see_the_gathered_params():
    # Between step() and the next forward, a param read (here: a copy for logging) waits for
    # its gather; so does state_dict(). The copy is taken through an alias made before training.
    model, ref = fresh(AttentionNet), fresh(AttentionNet)
    ddp = sw.DistributedDataParallel(model, bucket_size=600, optimizer="distributed",
                                     overlap_grad_reduce=True, overlap_param_gather=True)
    opt = sw.make_optimizer(ddp, lr=1e-2, weight_decay=0.1, eps=EPS, clip_grad=0)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1, eps=EPS)
    alias = model.attn.out_proj.weight.detach()
    for step in range(3):
        opt.zero_grad()
        ref_opt.zero_grad()
        model(*batch(step, 8, vocab=VOCAB)).backward()
        ref(*batch(step, 8, vocab=VOCAB)).backward()
        opt.step()
        ref_opt.step()
        torch.testing.assert_close(alias.clone(), ref.attn.out_proj.weight.detach(), rtol=0,
                                   atol=1e-5)
    state = model.state_dict()
    for name, want in ref.state_dict().items():
        torch.testing.assert_close(state[name], want, rtol=0, atol=1e-5, msg=name)
