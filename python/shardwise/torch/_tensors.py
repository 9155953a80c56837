"""Torch <-> engine tensor plumbing: checks on the params a module hands over, and torch views of
the engine's numpy buffer views (bf16 travels as int16 bits: numpy has no bfloat16)."""

import numpy as np
import torch

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def tensor_over(array, dtype=None):
    """A torch tensor sharing `array`'s memory (bf16 when the array holds bf16 bits)."""
    t = torch.from_numpy(array)
    if array.dtype == np.int16:
        t = t.view(torch.bfloat16)
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"engine buffer is {t.dtype}, param is {dtype}")
    return t


def materialize(module, param, value):
    """A CPU Parameter over `value` replacing the meta-device `param` wherever `module` holds it
    (a meta tensor cannot take CPU storage in place). Attributes set on `param` carry over."""
    new = torch.nn.Parameter(value, requires_grad=param.requires_grad)
    new.__dict__.update(param.__dict__)
    for m in module.modules():
        for key, p in m._parameters.items():
            if p is param:
                m._parameters[key] = new
    return new


def check_params(named):
    """ValueError naming the param for anything the engine cannot hold."""
    spans = []
    for name, p in named:
        if p.device.type not in ("cpu", "meta"):
            raise ValueError(f"param '{name}' is on {p.device}: shardwise.torch trains CPU tensors "
                             f"(its buffers live in host memory)")
        if p.is_sparse:
            raise ValueError(f"param '{name}' is sparse: only dense params are supported")
        if p.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"param '{name}' has unsupported dtype {p.dtype} (supported: "
                             f"float32, bfloat16, float16)")
        # A non-contiguous param (channels_last, a transposed view) is copied into the buffer
        # contiguous, as the engine and checkpoints read params row-major; one whose elements
        # overlap (an expanded tensor) has no values of its own to train.
        if any(stride == 0 and size > 1 for size, stride in zip(p.shape, p.stride())):
            raise ValueError(f"param '{name}' has overlapping elements (shape {tuple(p.shape)}, "
                             f"strides {p.stride()}: an expanded tensor?); give it storage of "
                             f"its own (.clone())")
        if p.numel() > 0 and p.device.type == "cpu":
            start = p.data_ptr()
            last = sum((size - 1) * abs(stride) for size, stride in zip(p.shape, p.stride()))
            spans.append((start, start + (last + 1) * p.element_size(), name))
    # Two distinct params over the same memory (one a view of the other) cannot both become
    # views of separate buffer ranges; tie them as one nn.Parameter instead.
    spans.sort()
    for (s0, e0, n0), (s1, _, n1) in zip(spans, spans[1:]):
        if s1 < e0:
            raise ValueError(f"params '{n0}' and '{n1}' share storage: a param that is a view of "
                             f"another cannot be wrapped (share one nn.Parameter between the "
                             f"modules instead)")
