"""Per-phase profile of one training step: shardwise's DistributedDataParallel vs torch DDP (gloo),
in alternating blocks of steps in one job, one thread per rank, on bench_ddp.py's transformer.

    PYTHONPATH=build/python scripts/run.sh 2 -- /usr/bin/python3 examples/torch/profile_ddp.py \\
        --configs torch ddp distributed layer-wise:ns=gram

Prints, per configuration, rank 0's median ms of zero_grad, forward, backward (with the grad hooks
and the end-of-backward sync) and the optimizer step, and of every engine call made in the step
("e.<name>": e.g. finish_grad_sync = the wait for the grad collectives, gather_reduced_grads = the
all-gather behind .grad, step = the engine's update and param all-gather). A configuration is
"torch" (torch DDP + AdamW) or an optimizer kind with optional settings after a colon:
"ns=gram" (Muon's Newton-Schulz algorithm), "overlap=1" / "overlap=0" (both overlap options).
"""

import argparse
import collections
import gc
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ddp import transformer  # noqa: E402


class TimedEngine:
    """Forwards to the engine, adding each call's seconds to `totals[name]`."""

    def __init__(self, engine, totals):
        object.__setattr__(self, "_engine", engine)
        object.__setattr__(self, "_totals", totals)

    def __getattr__(self, name):
        attr = getattr(self._engine, name)
        if not callable(attr):
            return attr

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._totals[name] += time.perf_counter() - start
        return timed


def make(config, vocab, seq_len, totals):
    import shardwise.torch as sw
    model = transformer(vocab, seq_len)
    if config == "torch":
        return (torch.nn.parallel.DistributedDataParallel(model),
                torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01))
    kind, _, extra = config.partition(":")
    settings = dict(item.split("=") for item in extra.split(";") if item)
    wrap, optimizer = {}, {}
    if "overlap" in settings:
        on = settings.pop("overlap") == "1"
        wrap = dict(overlap_grad_reduce=on, overlap_param_gather=on)
    if "ns" in settings:
        optimizer["ns_algorithm"] = settings.pop("ns")
    if settings:
        sys.exit(f"{config}: unknown settings {sorted(settings)}")
    ddp = sw.DistributedDataParallel(model, optimizer=kind, **wrap)
    opt = sw.make_optimizer(ddp, lr=1e-3, clip_grad=0, **optimizer)
    ddp.engine = TimedEngine(ddp.engine, totals)
    return ddp, opt


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["torch", "ddp", "distributed"])
    parser.add_argument("--steps", type=int, default=3, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=2, help="timed blocks per configuration")
    parser.add_argument("--port", type=int, default=29731, help="torch's rendezvous port")
    args = parser.parse_args()

    import shardwise.torch as sw
    torch.set_num_threads(1)
    rank, dp = sw.init()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=dp)
    vocab, seq_len, mbs = 512, 64, 8
    totals = {c: collections.defaultdict(float) for c in args.configs}
    runs = {c: make(c, vocab, seq_len, totals[c]) for c in args.configs}
    phases = {c: collections.defaultdict(list) for c in args.configs}
    step = 0
    for block in range(args.blocks + 1):  # block 0 warms up
        for config, (ddp, opt) in runs.items():
            for _ in range(args.steps):
                g = torch.Generator().manual_seed(step * dp + rank)
                tokens = torch.randint(0, vocab, (mbs, seq_len), generator=g)
                targets = (tokens * 7 + 3) % vocab
                totals[config].clear()
                t0 = time.perf_counter()
                opt.zero_grad()
                t1 = time.perf_counter()
                loss = ddp(tokens, targets)
                t2 = time.perf_counter()
                loss.backward()
                t3 = time.perf_counter()
                opt.step()
                t4 = time.perf_counter()
                step += 1
                if block == 0:
                    continue
                seen = phases[config]
                for name, seconds in (("zero_grad", t1 - t0), ("forward", t2 - t1),
                                      ("backward", t3 - t2), ("step", t4 - t3),
                                      ("total", t4 - t0)):
                    seen[name].append(seconds)
                for name, seconds in totals[config].items():
                    seen["e." + name].append(seconds)
    if rank == 0:
        for config, seen in phases.items():
            print(f"dp={dp} {config:<28} " + " ".join(
                f"{name}={statistics.median(v) * 1e3:.1f}" for name, v in seen.items()
                if statistics.median(v) >= 5e-5), flush=True)
    dist.barrier()
    del runs
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
