"""Benchmark: the shardwise engine vs torch.nn.parallel.DistributedDataParallel (gloo) +
torch.optim.AdamW on a 7.3M-parameter transformer built from torch layers
(nn.TransformerEncoderLayer), at dp=2 and dp=4 in one run, one thread per rank.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch/bench_ddp.py [--steps 3 --blocks 2]

For each dp it launches one `mpirun -np dp` job in which every rank times, in alternating blocks
of steps, torch DDP + AdamW and shardwise's DistributedDataParallel with its default settings
(bucket size, overlap) for every optimizer kind, and prints per kind
``bench: torch_ddp_step_<kind>_dp<N> ours=<ms> limit=<torch ms> unit=ms ratio=<torch/ours>``
(median over steps, slowest rank), plus the bytes each rank sent per step against the ZeRO-1
formula 2(dp-1)/dp * N * 4 bytes (torch DDP's ring all-reduce moves the same).

The layer-wise kinds run Muon on the 2-D hidden weights, whose Newton-Schulz iterations cost far
more than AdamW: against torch + AdamW their ratio measures Muon's arithmetic, not the wrapper. So
they also get a like-for-like line, ``bench: torch_ddp_muon_step_<kind>_dp<N>``, against torch DDP
(gloo) + Muon written in plain torch as a torch user would (every rank orthogonalises every Muon
matrix, the same matrices, steps and coefficients as the engine's defaults; AdamW for the rest).
"""

import argparse
import gc
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def driver(args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    print(f"{'dp':>3} {'engine':<34} {'step ms':>9} {'vs torch':>9} {'sent B/step/rank':>17} "
          f"{'ZeRO-1 formula':>15} {'ratio':>6}")
    for dp in args.dp:
        command = ["mpirun", "-np", str(dp), "--oversubscribe", sys.executable, __file__,
                   "--worker", "--port", str(free_port()), "--steps", str(args.steps),
                   "--blocks", str(args.blocks)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"dp={dp} failed:\n{done.stdout}\n{done.stderr}")
        print(done.stdout, end="", flush=True)


def transformer(vocab, seq_len, hidden=256, layers=9, heads=4, ffn=1024):
    import torch
    import torch.nn.functional as F

    class Transformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embed = torch.nn.Embedding(vocab, hidden)
            self.pos = torch.nn.Parameter(torch.randn(seq_len, hidden) * 0.02)
            self.layers = torch.nn.ModuleList(
                torch.nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=ffn, dropout=0.0,
                                                 batch_first=True, norm_first=True)
                for _ in range(layers))
            self.head = torch.nn.Linear(hidden, vocab)

        def forward(self, tokens, targets):
            h = self.embed(tokens) + self.pos[:tokens.shape[1]]
            for layer in self.layers:
                h = layer(h)
            logits = self.head(h)
            return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    return Transformer()


def newton_schulz(g, coefficients, steps):
    """The public Muon's orthogonalisation in plain torch (fp32): odd quintic polynomials of X,
    iterated on the short side's Gram matrix product, X scaled to unit Frobenius norm first."""
    import torch
    x = g / (g.norm() + 1e-7)
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    for k in range(steps):
        a, b, c = coefficients[k % len(coefficients)]
        s = x @ x.T
        x = torch.addmm(x, torch.addmm(s, s, s, beta=b, alpha=c), x, beta=a)
    return x.T if transposed else x


def torch_muon(named_params, muon_names, lr, adamw_lr, weight_decay):
    """torch DDP users' Muon: Nesterov momentum, Newton-Schulz per matrix (QKV projections split
    into their three blocks, as the engine's split_qkv default), update scaled by
    sqrt(max(rows, cols)) (the engine's default "spectral" scale); torch.optim.AdamW for the
    params that are not Muon's. Coefficients and steps: the optimizer spec's defaults."""
    import torch
    from shardwise.torch.optimizer import DEFAULTS
    assert DEFAULTS["coefficients"] == "quintic" and DEFAULTS["scale_mode"] == "spectral"
    coefficients = QUINTIC_COEFFICIENTS
    steps, momentum = DEFAULTS["ns_steps"], DEFAULTS["momentum"]
    muon = [(n, p) for n, p in named_params if n in muon_names]
    adamw = torch.optim.AdamW([p for n, p in named_params if n not in muon_names], lr=adamw_lr,
                              weight_decay=weight_decay)
    buffers = {n: torch.zeros_like(p) for n, p in muon}

    class TorchMuon:
        def zero_grad(self):
            adamw.zero_grad()
            for _, p in muon:
                p.grad = None

        @torch.no_grad()
        def step(self):
            adamw.step()
            for n, p in muon:
                buf = buffers[n]
                buf.lerp_(p.grad, 1 - momentum)
                update = p.grad.lerp_(buf, momentum)  # Nesterov
                blocks = 3 if n.endswith("in_proj_weight") else 1
                p.mul_(1 - lr * weight_decay)
                for u, w in zip(update.chunk(blocks), p.chunk(blocks)):
                    o = newton_schulz(u, coefficients, steps)
                    w.add_(o, alpha=-lr * max(u.shape) ** 0.5)

    return TorchMuon()


# The optimizer spec's default Newton-Schulz coefficients ("quintic": Megatron's five tuned
# quintics, cycled), as src/optim/newton_schulz.cpp lists them.
QUINTIC_COEFFICIENTS = [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377),
                        (3.7418, -5.5913, 2.3037), (2.8769, -3.1427, 1.2046),
                        (2.8366, -3.0525, 1.2012)]


VOCAB, SEQ_LEN, MICRO_BATCH = 512, 64, 8


def build_runs(engine_kinds):
    """Every engine's (wrapped model, optimizer): torch DDP + AdamW, torch DDP + Muon, and
    shardwise with each optimizer kind at its defaults, all from the same initialisation."""
    import torch

    import shardwise.torch as sw
    from shardwise.torch.optimizer import DEFAULTS

    def make(kind):
        model = transformer(VOCAB, SEQ_LEN)
        if kind == "torch":
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            return ddp, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        if kind == "torch-muon":
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            return ddp, torch_muon(list(model.named_parameters()), muon_names,
                                   lr=DEFAULTS["muon_lr"], adamw_lr=1e-3,
                                   weight_decay=DEFAULTS["weight_decay"])
        ddp = sw.DistributedDataParallel(model, optimizer=kind)  # the defaults
        return ddp, sw.make_optimizer(ddp, lr=1e-3, clip_grad=0)

    runs = {kind: make(kind) for kind in engine_kinds}
    # The baseline's Muon steps exactly the matrices the engine's layer-wise layout gives Muon.
    layer_wise = runs["layer-wise"][0]
    muon_names = {n for (n, _), flag in zip(layer_wise._params, layer_wise.engine.muon_params())
                  if flag}
    return {kind: make(kind) for kind in ("torch", "torch-muon")} | runs


def time_blocks(runs, engine_kinds, args, rank, dp):
    """Alternating blocks of steps per engine (block 0 warms up): every timed step's seconds and
    the bytes each shardwise engine sent in the timed blocks."""
    import torch

    times = {kind: [] for kind in runs}
    sent = {kind: 0 for kind in runs}
    step = 0
    for block in range(args.blocks + 1):
        for kind, (ddp, opt) in runs.items():
            ours = kind in engine_kinds
            if ours:
                ddp.finish_param_sync()  # count only what this block's steps sent
            before = ddp.engine.bytes_communicated()[0] if ours else 0
            for _ in range(args.steps):
                g = torch.Generator().manual_seed(step * dp + rank)
                tokens = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ_LEN), generator=g)
                targets = (tokens * 7 + 3) % VOCAB
                t0 = time.perf_counter()
                opt.zero_grad()
                ddp(tokens, targets).backward()
                opt.step()
                elapsed = time.perf_counter() - t0
                if block > 0:
                    times[kind].append(elapsed)
                step += 1
            if ours and block > 0:
                ddp.finish_param_sync()
                sent[kind] += ddp.engine.bytes_communicated()[0] - before
    return times, sent


def print_report(runs, engine_kinds, medians, sent, measured, dp, overlap):
    """Rank 0's table and `bench:` lines."""
    n_params = sum(p.numel() for p in runs["torch"][0].parameters())
    formula = 2 * (dp - 1) / dp * n_params * 4
    labels = {"torch": "torch DDP (gloo) + AdamW", "torch-muon": "torch DDP (gloo) + Muon"}
    for kind in runs:
        ours = kind in engine_kinds
        per_step = sent[kind] / measured if ours else formula
        note = "" if ours else " (formula)"
        label = labels.get(kind, f"shardwise {kind}")
        print(f"{dp:>3} {label:<34} {medians[kind]:>9.2f} "
              f"{medians[kind] / medians['torch']:>8.2f}x {per_step:>17.0f} {formula:>15.0f} "
              f"{per_step / formula:>6.3f}{note}")
    print(f"    (N = {n_params} params, {measured} timed steps per engine, median over steps, "
          f"slowest rank; default overlap here: {overlap})", flush=True)
    for kind in engine_kinds:
        print(f"bench: torch_ddp_step_{kind}_dp{dp} ours={medians[kind]:.1f} "
              f"limit={medians['torch']:.1f} unit=ms "
              f"ratio={medians['torch'] / medians[kind]:.3f}", flush=True)
    for kind in (k for k in engine_kinds if "layer-wise" in k):  # the Muon kinds
        print(f"bench: torch_ddp_muon_step_{kind}_dp{dp} ours={medians[kind]:.1f} "
              f"limit={medians['torch-muon']:.1f} unit=ms "
              f"ratio={medians['torch-muon'] / medians[kind]:.3f}", flush=True)


def worker(args):
    import torch
    import torch.distributed as dist

    import shardwise.torch as sw
    from shardwise import _core

    torch.set_num_threads(1)
    rank, dp = sw.init()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=dp)
    engine_kinds = list(_core.optimizer_kinds())
    runs = build_runs(engine_kinds)
    probe = runs[engine_kinds[0]][0]
    times, sent = time_blocks(runs, engine_kinds, args, rank, dp)
    # Every rank's median, reduced to the slowest rank's (what a synchronous job runs at).
    medians = {}
    for kind in runs:
        t = torch.tensor([statistics.median(times[kind]) * 1e3])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        medians[kind] = t.item()
    if rank == 0:
        print_report(runs, engine_kinds, medians, sent, args.blocks * args.steps, dp,
                     probe.engine.overlap_param_gather())
    # Tear torch's side down while every rank is still here: a gloo process group destroyed at
    # interpreter exit can wait forever on a peer that has already left (seen at dp=4).
    dist.barrier()
    del runs
    gc.collect()
    dist.destroy_process_group()
    sw.all_reduce_mean(probe, 0.0)  # and leave MPI together


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=3, help="timed blocks per engine")
    parser.add_argument("--dp", type=int, nargs="+", default=[2, 4], help="data-parallel sizes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = parser.parse_args()
    worker(a) if a.worker else driver(a)
