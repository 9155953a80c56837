"""torch.nn.parallel.DistributedDataParallel's keyword arguments, as shardwise's wrapper reads them.

A script written for torch DDP passes them unchanged: values that mean nothing different here are
accepted, values shardwise cannot honour are a ValueError naming the argument and what to pass.
"""

import torch

from .._numbers import whole_number

# torch DDP's default bucket is 25 MiB; shardwise's default is its own (set by the engine).
_BYTES_PER_GRAD_ELEMENT = 4  # grads are reduced in fp32 (grad_reduce_in_fp32)


def _is_cpu(device):
    if isinstance(device, int):
        return False
    return torch.device(device).type == "cpu"


def check_devices(device_ids, output_device):
    """shardwise trains CPU params: device_ids / output_device may only name the CPU (torch DDP
    wants None for a CPU module as well)."""
    if device_ids is not None:
        ids = list(device_ids) if isinstance(device_ids, (list, tuple)) else [device_ids]
        if not all(_is_cpu(d) for d in ids):
            raise ValueError(f"DistributedDataParallel: device_ids={device_ids!r}: shardwise trains "
                             "CPU params; pass device_ids=None")
    if output_device is not None and not _is_cpu(output_device):
        raise ValueError(f"DistributedDataParallel: output_device={output_device!r}: shardwise "
                         "trains CPU params; pass output_device=None")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def bucket_size_from(bucket_cap_mb, bucket_size):
    """The engine's bucket size (fp32 grad elements) from torch's bucket_cap_mb (MiB)."""
    if bucket_size is not None and not (isinstance(bucket_size, int)
                                        and not isinstance(bucket_size, bool)):
        raise TypeError(f"DistributedDataParallel: bucket_size must be an int (grad elements per "
                        f"bucket) or None, got {type(bucket_size).__name__} {bucket_size!r}")
    if bucket_cap_mb is not None and not _is_number(bucket_cap_mb):
        raise TypeError(f"DistributedDataParallel: bucket_cap_mb must be a number (MiB) or None, "
                        f"got {type(bucket_cap_mb).__name__} {bucket_cap_mb!r}")
    if bucket_cap_mb is None:
        return None if bucket_size is None else whole_number(
            bucket_size, "DistributedDataParallel: bucket_size")
    if bucket_size is not None:
        raise ValueError("DistributedDataParallel: pass bucket_cap_mb (torch's, MiB) or "
                         "bucket_size (elements), not both")
    if not bucket_cap_mb > 0:
        raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
    return max(1, int(bucket_cap_mb * 2**20) // _BYTES_PER_GRAD_ELEMENT)


def check_process_group(process_group, world_size, rank):
    """shardwise reduces over every rank of the MPI job. torch.distributed, when initialised,
    must be the same job (mpirun, not torchrun) and `process_group` its whole world."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        if process_group is not None:
            raise ValueError("DistributedDataParallel: process_group was given but "
                             "torch.distributed is not initialised")
        return
    if dist.get_world_size() != world_size or dist.get_rank() != rank:
        raise RuntimeError(
            f"DistributedDataParallel: torch.distributed has rank {dist.get_rank()} of "
            f"{dist.get_world_size()} but the MPI job this process runs in has rank {rank} of "
            f"{world_size}; shardwise communicates through MPI: launch with `mpirun -np N "
            f"python3 script.py` (torchrun starts no MPI job)")
    if process_group is not None and dist.get_world_size(process_group) != world_size:
        raise ValueError(f"DistributedDataParallel: process_group has "
                         f"{dist.get_world_size(process_group)} of the {world_size} ranks; "
                         f"shardwise reduces over the whole job: pass process_group=None")


def check_optimizer_kind(optimizer):
    """`optimizer` names a kind of the optimizer spec (or is None)."""
    if optimizer is None:
        return
    from .. import _core
    kinds = tuple(_core.optimizer_kinds())
    if not isinstance(optimizer, str) or optimizer not in kinds:
        raise ValueError(f"DistributedDataParallel: optimizer={optimizer!r} is not an optimizer "
                         f"kind; pass one of {', '.join(kinds)} (or None)")
