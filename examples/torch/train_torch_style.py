"""An ordinary PyTorch DDP training loop that runs on torch DDP or on shardwise, with only the
wrapper and optimizer lines changed (the two lines marked SWITCH):

    PYTHONPATH=build/python mpirun -np 2 --oversubscribe /usr/bin/python3 \
        examples/torch/train_torch_style.py --backend shardwise   # or --backend torch

A small transformer (torch layers: Embedding, TransformerEncoderLayer, LayerNorm, Linear) learns
a synthetic task (each target token is a fixed function of the current and previous input
token). torch.distributed (gloo, env://) gives the ranks and the DistributedSampler; under mpirun
``import shardwise.torch`` sets the env:// variables. AdamW with no weight decay on biases and
norms, warmup + cosine through torch.optim.lr_scheduler.LambdaLR, clip_grad_norm_,
zero_grad(set_to_none=True), the loss averaged with dist.all_reduce for logging, evaluation in
model.eval(), a checkpoint saved by rank 0.

--optimizer-first builds the optimizer on model.parameters() before the model is wrapped (the
other order torch scripts use). --out writes rank 0's per-step losses and final weights (npz).
"""

import argparse
import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import shardwise.torch as sw  # under mpirun: sets RANK / WORLD_SIZE / MASTER_* for env://

VOCAB, SEQ = 32, 16


class TinyTransformer(torch.nn.Module):
    def __init__(self, hidden=32, heads=4, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, hidden)
        self.pos = torch.nn.Parameter(torch.randn(SEQ, hidden) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.0,
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = torch.nn.Linear(hidden, VOCAB)
        self.register_buffer("causal", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1))

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        return self.head(self.norm(self.blocks(h, mask=self.causal)))


def synthetic_dataset(samples, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (samples, SEQ), generator=g)
    previous = torch.roll(tokens, 1, dims=1)
    previous[:, 0] = 0
    targets = (tokens + 2 * previous) % VOCAB
    return TensorDataset(tokens, targets)


def param_groups(model, weight_decay):
    """No weight decay on biases and norm weights (the 1-D params)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return factor


def evaluate(model, loader):
    model.eval()
    total = torch.zeros(2)
    with torch.no_grad():
        for tokens, targets in loader:
            logits = model(tokens)
            total[0] += F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1),
                                        reduction="sum")
            total[1] += targets.numel()
    dist.all_reduce(total)
    model.train()
    return (total[0] / total[1]).item()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("torch", "shardwise"), default="shardwise")
    p.add_argument("--optimizer-first", action="store_true",
                   help="build the optimizer before wrapping the model")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=8, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default="", help="rank 0 saves model+optimizer here")
    p.add_argument("--out", default="", help="rank 0 writes losses and final weights (npz)")
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = TinyTransformer()

    def wrap(module):
        if args.backend == "torch":
            return torch.nn.parallel.DistributedDataParallel(module)
        return sw.DistributedDataParallel(module)  # SWITCH: the wrapper

    def make_optimizer(params):
        adamw = torch.optim.AdamW if args.backend == "torch" else sw.AdamW  # SWITCH: optimizer
        return adamw(params, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    if args.optimizer_first:
        optimizer = make_optimizer(param_groups(model, 0.1))
        model = wrap(model)
    else:
        model = wrap(model)
        optimizer = make_optimizer(param_groups(model, 0.1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(5, args.steps))

    train = synthetic_dataset(args.steps * args.batch_size * world_size, args.seed)
    sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    held_out = synthetic_dataset(64 * world_size, args.seed + 1)
    eval_loader = DataLoader(held_out, batch_size=32, sampler=DistributedSampler(
        held_out, num_replicas=world_size, rank=rank, shuffle=False))

    losses = []
    model.train()
    sampler.set_epoch(0)
    for step, (tokens, targets) in enumerate(loader):
        optimizer.zero_grad(set_to_none=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged)
        losses.append(logged.item() / world_size)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {losses[-1]:.5f} grad_norm {grad_norm.item():.4f} "
                  f"lr {scheduler.get_last_lr()[0]:.2e}", flush=True)
    eval_loss = evaluate(model, eval_loader)
    if rank == 0:
        print(f"final train loss {losses[-1]:.5f} eval loss {eval_loss:.5f}", flush=True)
        if args.checkpoint:
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict()}, args.checkpoint)
        if args.out:
            weights = {f"w.{n}": p.detach().numpy().copy()
                       for n, p in model.module.named_parameters()}
            np.savez(args.out, losses=np.array(losses), eval_loss=eval_loss, **weights)
    # Free the wrapper (torch DDP's reducer holds the process group) while every rank is
    # still here, then the group: torch 1.13 can deadlock tearing them down at exit.
    dist.barrier()
    del model, optimizer, scheduler
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
