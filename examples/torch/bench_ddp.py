"""Benchmark: the shardwise engine vs torch.nn.parallel.DistributedDataParallel (gloo) +
torch.optim.AdamW on the example GPT, at dp=2 and dp=4 in one run.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch/bench_ddp.py [--steps 30]

For each dp it launches one `mpirun -np dp` job in which every rank times, in alternating blocks
of steps, (a) torch DDP + AdamW, (b) shardwise kind=distributed (AdamW, ZeRO-1) and (c) shardwise
kind=layer-wise (Muon + AdamW), and reports the median step time and the bytes each rank sent per
step against the ZeRO-1 formula 2(dp-1)/dp * N * 4 bytes (reduce-scatter of fp32 grads +
all-gather of fp32 params; torch DDP's ring all-reduce moves the same 2(dp-1)/dp * N * 4).
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
    for dp in (2, 4):
        command = ["mpirun", "-np", str(dp), "--oversubscribe", sys.executable, __file__,
                   "--worker", "--port", str(free_port()), "--steps", str(args.steps),
                   "--blocks", str(args.blocks)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"dp={dp} failed:\n{done.stdout}\n{done.stderr}")
        print(done.stdout, end="", flush=True)


def worker(args):
    import torch
    import torch.distributed as dist

    import shardwise.torch as sw
    from shardwise._core import SyntheticTask
    sys.path.insert(0, HERE)
    from gpt import GPT

    torch.set_num_threads(1)
    rank, dp = sw.rank, sw.world_size
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=dp)
    data = SyntheticTask("addition", 3, 1234, 256)
    mbs = 16

    def make(kind):
        model = GPT(data.vocab_size, data.seq_len)
        if kind == "torch":
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            return model, ddp, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        ddp = sw.DistributedDataParallel(model, bucket_size=16384, optimizer=kind)
        return model, ddp, sw.make_optimizer(ddp, lr=1e-3, clip_grad=0)

    runs = {kind: make(kind) for kind in ("torch", "distributed", "layer-wise")}
    probe = runs["distributed"][1]
    n_params = sum(p.numel() for p in runs["torch"][0].parameters())
    times = {kind: [] for kind in runs}
    sent = {kind: 0 for kind in runs}
    step = 0
    for block in range(args.blocks + 1):  # block 0 warms up
        for kind, (model, ddp, opt) in runs.items():
            if kind != "torch":
                ddp.finish_param_sync()  # count only what this block's steps sent
            before = ddp.engine.bytes_communicated()[0] if kind != "torch" else 0
            for _ in range(args.steps):
                tokens, targets = (torch.from_numpy(a) for a in
                                   data.fill(False, (step * dp + rank) * mbs, mbs))
                t0 = time.perf_counter()
                opt.zero_grad()
                if kind == "torch":
                    ddp(tokens, targets).backward()
                else:
                    model(tokens, targets).backward()
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
    torch_ms = statistics.median(times["torch"]) * 1e3
    # Every rank's median, reduced to the slowest rank's (what a synchronous job runs at).
    medians = {}
    for kind in runs:
        t = torch.tensor([statistics.median(times[kind]) * 1e3])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        medians[kind] = t.item()
    if rank == 0:
        labels = {"torch": "torch DDP (gloo) + AdamW", "distributed": "shardwise distributed (AdamW)",
                  "layer-wise": "shardwise layer-wise (Muon+AdamW)"}
        for kind in runs:
            per_step = sent[kind] / measured if kind != "torch" else formula
            note = "" if kind != "torch" else " (formula)"
            print(f"{dp:>3} {labels[kind]:<34} {medians[kind]:>9.2f} "
                  f"{medians[kind] / medians['torch']:>8.2f}x {per_step:>17.0f} {formula:>15.0f} "
                  f"{per_step / formula:>6.3f}{note}")
        print(f"    (N = {n_params} params, {measured} timed steps per engine, median over steps, "
              f"slowest rank; torch median on rank 0 {torch_ms:.2f} ms)", flush=True)
    # Tear torch's side down while every rank is still here: a gloo process group destroyed at
    # interpreter exit can wait forever on a peer that has already left (seen at dp=4).
    dist.barrier()
    del runs
    gc.collect()
    dist.destroy_process_group()
    sw.all_reduce_mean(probe, 0.0)  # and leave MPI together


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=3, help="timed blocks per engine")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = parser.parse_args()
    worker(a) if a.worker else driver(a)
