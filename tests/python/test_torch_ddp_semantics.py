"""shardwise.torch.DistributedDataParallel behaves as torch.nn.parallel.DistributedDataParallel
at dp=2, checked against torch DDP (gloo) in the same job: an nn.Module (parameters, state_dict
keys, train/eval, forward), BatchNorm buffers broadcast from rank 0, frozen params and buffers
(non-contiguous, int64, float64) broadcast at construction, params unused from step to
step (MoE routing, layer drop) with find_unused_parameters, repeated backward() and
clip_grad_norm_ on .grad, on models with nn.TransformerEncoderLayer and BatchNorm."""

import pathlib
import socket

from conftest import run_mpi

HERE = pathlib.Path(__file__).resolve().parent
CASES = ["module_behaviour", "batchnorm_buffers", "module_states_at_wrap", "buffers_differ",
         "unused_parameters_layer-wise",
         "repeated_backward_layer-wise", "unused_parameters_ddp", "repeated_backward_ddp",
         "clip_grad_norm_distributed", "unused_parameters_adamw_distributed",
         "clip_grad_norm_ddp", "unused_parameters_adamw_ddp",
         "unused_parameters_adamw_layer-wise_torch_optim"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_match_torch_ddp():
    done = run_mpi(2, HERE / "torch_semantics_worker.py", free_port())
    assert done.returncode == 0, done.stdout + done.stderr
    passed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert passed == CASES, done.stdout + done.stderr
