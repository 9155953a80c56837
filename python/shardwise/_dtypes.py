"""Element-type names shared by the Python modules and the C++ engine.

The engine names dtypes fp32 / bf16 / fp16 / uint8 ...; callers may hand torch dtypes, numpy
dtypes or those names. Results use torch dtypes when torch is importable (what Megatron users
compare against), the engine's names otherwise.
"""

try:  # torch is optional for the layout and MXFP8 tools
    import torch as _torch
except ImportError:  # pragma: no cover - exercised only on machines without torch
    _torch = None

import numpy as _np

_TORCH_TO_NAME = {}
_NAME_TO_TORCH = {}
if _torch is not None:
    _TORCH_TO_NAME = {
        _torch.float32: "fp32",
        _torch.bfloat16: "bf16",
        _torch.float16: "fp16",
        _torch.uint8: "uint8",
        _torch.int32: "int32",
        _torch.int64: "int64",
    }
    _NAME_TO_TORCH = {v: k for k, v in _TORCH_TO_NAME.items()}

_NUMPY_TO_NAME = {
    _np.dtype(_np.float32): "fp32",
    _np.dtype(_np.float16): "fp16",
    _np.dtype(_np.uint8): "uint8",
    _np.dtype(_np.int32): "int32",
    _np.dtype(_np.int64): "int64",
}

_ALIASES = {
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "uint8": "uint8", "int32": "int32", "int64": "int64",
}


def dtype_name(dtype, what="dtype"):
    """The engine's name for a torch dtype, numpy dtype or name; ValueError naming `what`."""
    if _torch is not None and isinstance(dtype, _torch.dtype):
        if dtype in _TORCH_TO_NAME:
            return _TORCH_TO_NAME[dtype]
        raise ValueError(f"{what}: unsupported dtype {dtype}")
    if isinstance(dtype, str):
        key = dtype.lower().replace("torch.", "")
        if key in _ALIASES:
            return _ALIASES[key]
        raise ValueError(f"{what}: unsupported dtype '{dtype}'")
    try:
        np_dtype = _np.dtype(dtype)
    except TypeError:
        raise ValueError(f"{what}: unsupported dtype {dtype!r}") from None
    if np_dtype in _NUMPY_TO_NAME:
        return _NUMPY_TO_NAME[np_dtype]
    raise ValueError(f"{what}: unsupported dtype {np_dtype}")


def public_dtype(name):
    """The dtype object results carry for an engine dtype name."""
    return _NAME_TO_TORCH.get(name, name)
