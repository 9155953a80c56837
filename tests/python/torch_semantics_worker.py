"""Multi-rank worker of test_torch_ddp_semantics.py: shardwise's DistributedDataParallel against
torch.nn.parallel.DistributedDataParallel (gloo) in the same job, case by case, on models built
from torch layers (nn.TransformerEncoderLayer, nn.MultiheadAttention, BatchNorm). Every rank
asserts; rank 0 prints "ok <case>" per passed case. Usage: mpirun -np 2 python3 THIS PORT."""

import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import shardwise.torch as sw

VOCAB, HIDDEN, SEQ = 13, 16, 5


class EncoderBatchNormNet(torch.nn.Module):
    """Embedding -> TransformerEncoderLayer (MultiheadAttention inside) -> BatchNorm -> head."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.encoder = torch.nn.TransformerEncoderLayer(HIDDEN, 2, dim_feedforward=24,
                                                        dropout=0.0, batch_first=True)
        self.norm = torch.nn.BatchNorm1d(HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, targets):
        h = self.encoder(self.embed(tokens))
        h = self.norm(h.transpose(1, 2)).transpose(1, 2)
        return F.cross_entropy(self.head(h).reshape(-1, VOCAB), targets.reshape(-1))


class RoutedNet(torch.nn.Module):
    """MoE-style routing and layer drop: which experts and layers a step uses depends on the step
    and the rank, so some params are unused on one rank, or on all, from step to step."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.layers = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(2))
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, targets, step, rank):
        h = self.embed(tokens)
        h = h + torch.tanh(self.experts[(step + rank) % 3](h))
        for i, layer in enumerate(self.layers):
            if (step + i) % 3 != 0:  # layer drop
                h = h + torch.tanh(layer(h))
        return F.cross_entropy(self.head(h).reshape(-1, VOCAB), targets.reshape(-1))


def batch(step, rank, size=4):
    g = torch.Generator().manual_seed(100 * step + rank)
    tokens = torch.randint(0, VOCAB, (size, SEQ), generator=g)
    return tokens, (tokens * 5 + 2) % VOCAB


def assert_equal_across_ranks(tensor, what):
    gathered = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, tensor.contiguous())
    for other in gathered[1:]:
        torch.testing.assert_close(other, gathered[0], msg=what)


def report(case):
    if dist.get_rank() == 0:
        print("ok", case, flush=True)


def case_module_behaviour(rank):
    model, ref = EncoderBatchNormNet(seed=rank), EncoderBatchNormNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, optimizer="distributed")
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref)
    assert isinstance(ddp, torch.nn.Module)
    assert ddp.module is model
    assert list(ddp.state_dict()) == list(torch_ddp.state_dict())
    assert [n for n, _ in ddp.named_parameters()] == [n for n, _ in torch_ddp.named_parameters()]
    assert sum(p.numel() for p in ddp.parameters()) == sum(p.numel() for p in ref.parameters())
    ddp.eval()
    assert not model.training and not model.norm.training
    ddp.train()
    assert model.training and model.norm.training
    tokens, targets = batch(0, rank)
    torch.testing.assert_close(ddp(tokens, targets), torch_ddp(tokens, targets))
    report("module_behaviour")


def case_batchnorm_buffers(rank):
    model, ref = EncoderBatchNormNet(seed=rank), EncoderBatchNormNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, optimizer="layer-wise")
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref, broadcast_buffers=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(4):
        tokens, targets = batch(step, rank)  # different data per rank: local stats differ
        for wrapper, optimizer in ((ddp, opt), (torch_ddp, ref_opt)):
            optimizer.zero_grad()
            wrapper(tokens, targets).backward()
            optimizer.step()
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(model.norm, name), getattr(ref.norm, name),
                                       msg=f"step {step}: {name}")
    # As torch DDP, a forward under no_grad (here in train mode: it updates the local stats) is
    # not followed by a broadcast at the next forward, so the ranks' stats stay their own.
    for wrapper, optimizer in ((ddp, opt), (torch_ddp, ref_opt)):
        with torch.no_grad():
            wrapper(*batch(5, rank))
        optimizer.zero_grad()
        wrapper(*batch(6, rank)).backward()
        optimizer.step()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model.norm, name), getattr(ref.norm, name),
                                   msg=f"after a no_grad forward: {name}")
    ddp.eval()
    ddp(*batch(9, rank))  # broadcast at the start of forward; eval does not update the stats
    assert_equal_across_ranks(model.norm.running_mean, "running_mean after broadcast")
    assert_equal_across_ranks(model.norm.running_var, "running_var after broadcast")
    report("batchnorm_buffers")


class FrozenAndBuffersNet(torch.nn.Module):
    """A frozen projection and buffers of several kinds (non-contiguous, int64, float64) whose
    initial values differ per rank (seeded with the rank)."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.frozen = torch.nn.Linear(HIDDEN, HIDDEN)
        self.frozen.requires_grad_(False)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)
        self.register_buffer("shift", torch.randn(HIDDEN, 3).t())  # non-contiguous
        self.register_buffer("mask", (torch.rand(HIDDEN) > 0.5).long())  # gloo has no bool
        self.register_buffer("scale", torch.rand(HIDDEN, dtype=torch.float64) + 0.5)

    def forward(self, tokens, targets):
        h = self.frozen(self.embed(tokens)) + self.shift[0]
        h = h * self.scale.float() * self.mask
        return F.cross_entropy(self.head(h).reshape(-1, VOCAB), targets.reshape(-1))


def case_module_states_at_wrap(rank):
    """As torch DDP's construction: rank 0's frozen params and buffers reach every rank, also
    with broadcast_buffers=False; then training matches torch DDP + torch.optim.AdamW."""
    model, ref = FrozenAndBuffersNet(seed=rank), FrozenAndBuffersNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, broadcast_buffers=False, optimizer="distributed")
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref, broadcast_buffers=False)
    for name, t in list(model.named_buffers()) + [("frozen.weight", model.frozen.weight),
                                                  ("frozen.bias", model.frozen.bias)]:
        assert_equal_across_ranks(t, name)
    for (name, t), r in zip(model.state_dict().items(), ref.state_dict().values()):
        torch.testing.assert_close(t, r, rtol=0, atol=0, msg=f"at wrap: {name}")
    opt = sw.AdamW(ddp.parameters(), lr=0.01)
    ref_opt = torch.optim.AdamW(torch_ddp.parameters(), lr=0.01)
    for step in range(3):
        for wrapper, optimizer in ((ddp, opt), (torch_ddp, ref_opt)):
            optimizer.zero_grad()
            wrapper(*batch(step, rank)).backward()
            optimizer.step()
    ddp.finish_param_sync()
    for (name, t), r in zip(model.state_dict().items(), ref.state_dict().values()):
        torch.testing.assert_close(t, r, atol=1e-6, rtol=1e-5, msg=f"after 3 steps: {name}")
    report("module_states_at_wrap")


def case_buffers_that_differ_between_ranks(rank):
    """A buffer of another dtype or size on rank 1 was silently corrupted by the broadcast (or
    aborted in MPI); now every rank raises a ValueError at wrap, and the job goes on."""
    other_dtype = torch.float32 if rank == 0 else torch.float64
    for make in (lambda: torch.full((4,), 7.0, dtype=other_dtype),
                 lambda: torch.zeros(4 if rank == 0 else 6)):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
        model[0].register_buffer("extra", make())
        try:
            sw.DistributedDataParallel(model, optimizer="ddp")
        except ValueError as error:
            assert "buffers and frozen params differ between ranks" in str(error), error
        else:
            raise AssertionError("buffers that differ between ranks were accepted")
    report("buffers_differ")


def case_unused_parameters(rank, kind):
    model, ref = RoutedNet(seed=rank), RoutedNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, optimizer=kind, find_unused_parameters=True,
                                     overlap_grad_reduce=True, bucket_size=300)
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref, find_unused_parameters=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.2)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.2)
    for step in range(6):
        tokens, targets = batch(step, rank)
        losses = []
        for wrapper, optimizer in ((ddp, opt), (torch_ddp, ref_opt)):
            optimizer.zero_grad()
            loss = wrapper(tokens, targets, step, rank)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) < 1e-5, (step, losses)
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), r.detach(), atol=1e-5, rtol=1e-5, msg=name)
    report(f"unused_parameters_{kind}")


def case_unused_parameters_adamw(rank, kind, torch_optimizer):
    """AdamW tells a param skipped by every rank (its .grad stays None, torch's optimizers skip
    it: no decay, moments and step count kept) from one with a zero grad; shardwise must too,
    with its own AdamW or a torch one over the wrapper's params."""
    model, ref = RoutedNet(seed=rank), RoutedNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, optimizer=kind, find_unused_parameters=True,
                                     overlap_grad_reduce=True, bucket_size=300)
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref, find_unused_parameters=True)
    if torch_optimizer:
        opt = torch.optim.AdamW(ddp.parameters(), lr=0.05, weight_decay=0.1)
    else:
        opt = sw.AdamW(ddp.parameters(), lr=0.05, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.05, weight_decay=0.1)
    for step in range(8):
        tokens, targets = batch(step, rank)
        # zero_grad() keeps zeroed grads in torch 1.x: the first steps drop them instead
        set_to_none = step < 4
        for wrapper, optimizer in ((ddp, opt), (torch_ddp, ref_opt)):
            optimizer.zero_grad(set_to_none=set_to_none)
            wrapper(tokens, targets, step, rank).backward()
            if wrapper is ddp and step in (3, 6):  # layers[0] is dropped everywhere
                grad = model.layers[0].weight.grad
                if set_to_none:
                    assert grad is None, "unused everywhere: .grad stays None"
                else:
                    assert grad is not None and not grad.any(), "zeroed .grad stays zero"
            optimizer.step()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), r.detach(), atol=1e-5, rtol=1e-5, msg=name)
    report(f"unused_parameters_adamw_{kind}{'_torch_optim' if torch_optimizer else ''}")


def case_repeated_backward(rank, kind):
    model, ref = EncoderBatchNormNet(seed=rank), EncoderBatchNormNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, optimizer=kind)
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref)
    for step in range(2):  # two backward passes, no no_sync(), no zero_grad between
        tokens, targets = batch(step, rank)
        ddp(tokens, targets).backward()
        torch_ddp(tokens, targets).backward()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, r.grad, atol=1e-6, rtol=1e-5, msg=name)
    report(f"repeated_backward_{kind}")


def case_clip_grad_norm(rank, kind):
    model, ref = EncoderBatchNormNet(seed=rank), EncoderBatchNormNet(seed=rank)
    ddp = sw.DistributedDataParallel(model, optimizer=kind)
    opt = sw.make_optimizer(ddp, lr=1e-2, weight_decay=0.01, eps=1e-4, clip_grad=0)
    torch_ddp = torch.nn.parallel.DistributedDataParallel(ref)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.01, eps=1e-4)
    hook_calls = []
    model.head.bias.register_hook(lambda g: hook_calls.append(g.clone()))
    for step in range(4):
        tokens, targets = batch(step, rank)
        opt.zero_grad()
        ref_opt.zero_grad()
        loss, ref_loss = ddp(tokens, targets), torch_ddp(tokens, targets)
        loss.backward()
        ref_loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), 0.05)
        ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
        assert norm > 0.05, norm  # the clip acts
        torch.testing.assert_close(norm, ref_norm, rtol=1e-5, atol=0)
        opt.step()
        ref_opt.step()
        assert abs(loss.item() - ref_loss.item()) < 1e-4, (step, loss.item(), ref_loss.item())
    assert len(hook_calls) == 4  # tensor hooks see this rank's grad, once per backward
    ddp.finish_param_sync()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), r.detach(), atol=1e-4, rtol=1e-4, msg=name)
    report(f"clip_grad_norm_{kind}")


def main(port):
    torch.set_num_threads(1)
    rank, world = sw.init()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    case_module_behaviour(rank)
    case_batchnorm_buffers(rank)
    case_module_states_at_wrap(rank)
    case_buffers_that_differ_between_ranks(rank)
    for kind in ("layer-wise", "ddp"):
        case_unused_parameters(rank, kind)
        case_repeated_backward(rank, kind)
    for kind in ("distributed", "ddp"):
        case_clip_grad_norm(rank, kind)
        case_unused_parameters_adamw(rank, kind, torch_optimizer=False)
    case_unused_parameters_adamw(rank, "layer-wise", torch_optimizer=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]))
