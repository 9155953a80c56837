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


def worker(args):
    import torch
    import torch.distributed as dist

    import shardwise.torch as sw
    from shardwise import _core

    torch.set_num_threads(1)
    rank, dp = sw.init()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=dp)
    vocab, seq_len, mbs = 512, 64, 8

    def make(kind):
        model = transformer(vocab, seq_len)
        if kind == "torch":
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            return ddp, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        ddp = sw.DistributedDataParallel(model, optimizer=kind)  # the defaults
        return ddp, sw.make_optimizer(ddp, lr=1e-3, clip_grad=0)

    kinds = ["torch"] + list(_core.optimizer_kinds())
    runs = {kind: make(kind) for kind in kinds}
    probe = runs[kinds[1]][0]
    n_params = sum(p.numel() for p in runs["torch"][0].parameters())
    times = {kind: [] for kind in runs}
    sent = {kind: 0 for kind in runs}
    step = 0
    for block in range(args.blocks + 1):  # block 0 warms up
        for kind, (ddp, opt) in runs.items():
            if kind != "torch":
                ddp.finish_param_sync()  # count only what this block's steps sent
            before = ddp.engine.bytes_communicated()[0] if kind != "torch" else 0
            for _ in range(args.steps):
                g = torch.Generator().manual_seed(step * dp + rank)
                tokens = torch.randint(0, vocab, (mbs, seq_len), generator=g)
                targets = (tokens * 7 + 3) % vocab
                t0 = time.perf_counter()
                opt.zero_grad()
                ddp(tokens, targets).backward()
                opt.step()
                elapsed = time.perf_counter() - t0
                if block > 0:
                    times[kind].append(elapsed)
                step += 1
            if kind != "torch" and block > 0:
                ddp.finish_param_sync()
                sent[kind] += ddp.engine.bytes_communicated()[0] - before
    measured = args.blocks * args.steps
    formula = 2 * (dp - 1) / dp * n_params * 4
    # Every rank's median, reduced to the slowest rank's (what a synchronous job runs at).
    medians = {}
    for kind in runs:
        t = torch.tensor([statistics.median(times[kind]) * 1e3])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        medians[kind] = t.item()
    if rank == 0:
        overlap = runs[kinds[1]][0].engine.overlap_param_gather()
        for kind in runs:
            per_step = sent[kind] / measured if kind != "torch" else formula
            note = "" if kind != "torch" else " (formula)"
            label = "torch DDP (gloo) + AdamW" if kind == "torch" else f"shardwise {kind}"
            print(f"{dp:>3} {label:<34} {medians[kind]:>9.2f} "
                  f"{medians[kind] / medians['torch']:>8.2f}x {per_step:>17.0f} {formula:>15.0f} "
                  f"{per_step / formula:>6.3f}{note}")
        print(f"    (N = {n_params} params, {measured} timed steps per engine, median over steps, "
              f"slowest rank; default overlap here: {overlap})", flush=True)
        for kind in kinds[1:]:
            print(f"bench: torch_ddp_step_{kind}_dp{dp} ours={medians[kind]:.1f} "
                  f"limit={medians['torch']:.1f} unit=ms "
                  f"ratio={medians['torch'] / medians[kind]:.3f}", flush=True)
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
