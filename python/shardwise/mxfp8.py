"""MXFP8 quantize / dequantize, bit-exact with the C++ codec and `shardwise convert`.

A tensor of shape [..., cols] is treated as a row-major [rows, cols] matrix (rows = product of
the leading dims; a 1-D tensor is one row). Blocks of 32 consecutive elements along the last dim
share one E8M0 scale byte.

- ``quantize(x, scale_rule="ceil", scale_layout="2d") -> (data, scale)``: ``data`` is uint8
  (E4M3 codes) with x's shape; ``scale`` is uint8 E8M0, shaped ``[..., ceil(cols/32)]`` for the
  "2d" (row-major) layout or ``[round_up(rows, 128), round_up(ceil(cols/32), 4)]`` for
  "swizzled" (cuBLAS 128x4 tiles, zero padded) - the shapes `shardwise convert` writes.
- ``dequantize(data, scale, dtype, scale_layout="2d")`` reverses it (fp32, fp16, or bf16).

Inputs may be numpy arrays or CPU torch tensors (fp32 / bf16 / fp16); results have the same
kind as the input. numpy has no bfloat16, so bf16 needs torch tensors.
"""

import numpy as np

from . import _core
from ._dtypes import _torch, dtype_name

BLOCK_SIZE = 32
_SCALE_RULES = ("ceil", "floor")
_SCALE_LAYOUTS = ("2d", "swizzled")


def _is_torch(x):
    return _torch is not None and isinstance(x, _torch.Tensor)


def _as_numpy(x, what):
    """(contiguous numpy view of x's bytes, engine dtype name, is_torch)."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{what}: tensor on {x.device}; shardwise.mxfp8 works on CPU tensors")
        name = dtype_name(x.dtype, what)
        t = x.detach().contiguous()
        if name == "bf16":
            return t.view(_torch.int16).numpy().view(np.uint16), name, True
        return t.numpy(), name, True
    a = np.ascontiguousarray(x)
    return a, dtype_name(a.dtype, what), False


def _check_choice(value, choices, what):
    if value not in choices:
        raise ValueError(f"{what}: expected one of {', '.join(choices)}, got {value!r}")


def _rows_cols(shape, what):
    if len(shape) == 0:
        raise ValueError(f"{what}: a scalar has no blocks; pass a tensor with at least one dim")
    cols = int(shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    if rows == 0 or cols == 0:
        raise ValueError(f"{what}: empty tensor of shape {tuple(shape)}")
    return rows, cols


def _scale_shape(shape, rows, cols, scale_layout):
    if scale_layout == "2d":
        return tuple(shape[:-1]) + (-(-cols // BLOCK_SIZE),)
    return tuple(_core.mxfp8_scale_shape(rows, cols, scale_layout))


def quantize(x, scale_rule="ceil", scale_layout="2d"):
    """MXFP8 (data, scale) of x; see the module docstring for shapes."""
    _check_choice(scale_rule, _SCALE_RULES, "scale_rule")
    _check_choice(scale_layout, _SCALE_LAYOUTS, "scale_layout")
    a, name, torch_in = _as_numpy(x, "quantize input")
    if name not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"quantize input: dtype {name} is not fp32, bf16 or fp16")
    shape = tuple(a.shape)
    rows, cols = _rows_cols(shape, "quantize input")
    data, scale = _core.mxfp8_quantize(a, name, rows, cols, scale_rule, scale_layout)
    data = data.reshape(shape)
    scale = scale.reshape(_scale_shape(shape, rows, cols, scale_layout))
    if torch_in:
        return _torch.from_numpy(data), _torch.from_numpy(scale)
    return data, scale


def dequantize(data, scale, dtype, scale_layout="2d"):
    """Decodes MXFP8 (data, scale) to `dtype` (fp32, fp16 or bf16; torch or numpy dtype or name)."""
    _check_choice(scale_layout, _SCALE_LAYOUTS, "scale_layout")
    d, d_name, torch_in = _as_numpy(data, "MXFP8 data")
    s, s_name, _ = _as_numpy(scale, "MXFP8 scale")
    if d_name != "uint8" or s_name != "uint8":
        raise ValueError(f"dequantize: data and scale must be uint8, got {d_name} and {s_name}")
    out_name = dtype_name(dtype, "dequantize dtype")
    if out_name not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"dequantize dtype: {out_name} is not fp32, bf16 or fp16")
    shape = tuple(d.shape)
    rows, cols = _rows_cols(shape, "MXFP8 data")
    expected = _scale_shape(shape, rows, cols, scale_layout)
    if tuple(s.shape) != expected:
        raise ValueError(f"MXFP8 scale: shape {tuple(s.shape)}, expected {expected} for data of "
                         f"shape {shape} with scale_layout '{scale_layout}'")
    if out_name == "bf16":
        if not torch_in and _torch is None:
            raise ValueError("dequantize to bf16 needs torch (numpy has no bfloat16)")
        out = np.empty(shape, dtype=np.uint16)
    else:
        out = np.empty(shape, dtype=np.float32 if out_name == "fp32" else np.float16)
    _core.mxfp8_dequantize(d, s, rows, cols, scale_layout, out, out_name)
    if out_name == "bf16":
        return _torch.from_numpy(out.view(np.int16)).view(_torch.bfloat16)
    return _torch.from_numpy(out) if torch_in else out


__all__ = ["quantize", "dequantize", "BLOCK_SIZE"]
