"""Worker of test_torch_comm_timeout.py: every rank wraps TinyNet with comm_timeout=SECONDS, then
rank 1 stops communicating (sleeps far past the timeout) while rank 0 trains. Rank 0's
watchdog must end the job; printing "finished" means it did not."""

import sys
import time

import torch

import shardwise.torch as sw
from models import TinyNet, batch


def main(seconds):
    model = TinyNet(seed=0)
    ddp = sw.DistributedDataParallel(model, bucket_size=600, comm_timeout=seconds)
    opt = sw.make_optimizer(ddp, lr=1e-2)
    if sw.rank == 1:
        time.sleep(300)
        return
    for step in range(3):
        opt.zero_grad()
        model(*batch(step, 8, sw.rank, ddp.engine.dp_size)).backward()
        opt.step()
    print("rank 0 finished without its peer", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]))
