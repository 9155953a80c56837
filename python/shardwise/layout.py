"""Megatron's optimizer-driven parameter layout, computed by the shardwise engine.

``compute_full_param_layout(params, dp, ...)`` takes the model's params in forward order (torch
Parameters, or any objects with ``.shape`` and ``.dtype``) and returns a ``FullParamLayout`` whose
``layouts`` map ``BufferKey`` to ``PerBufferParamLayout`` with Megatron's field names:
``param_index_map`` (param -> ``(start, end, bucket_id)``, in backprop order), ``bucket_indices``,
``per_bucket_numel_unpadded``, ``param_indices`` and ``num_shards``.

Megatron's param attributes are honoured: ``shared_embedding``,
``is_embedding_or_output_parameter``, ``use_muon`` and ``allreduce`` (False marks an expert
param, reduced over the expert-data-parallel group). Two shardwise extras: ``qkv_split`` (row
counts of a fused QKV weight, used to balance Newton-Schulz work) and ``name`` (used in errors).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from . import _core
from ._dtypes import dtype_name, public_dtype
from ._numbers import whole_number


@dataclass(frozen=True, order=False)
class BufferKey:
    """Identifies one contiguous buffer; params with equal keys share it."""

    param_dtype: Any
    grad_dtype: Any
    is_expert_parallel: bool = False
    is_layer_wise: bool = False


class ParamIndexMap(Mapping):
    """param -> (start, end, bucket_id), keyed by object identity.

    Megatron keys this dict by torch Parameters, which hash by identity; keying by identity here
    as well lets any object (hashable or not) serve as a param. Iteration is in buffer order.
    """

    def __init__(self, entries):
        self._entries = {id(p): (p, value) for p, value in entries}

    def __getitem__(self, param):
        try:
            return self._entries[id(param)][1]
        except KeyError:
            raise KeyError(_param_label(param)) from None

    def __contains__(self, param):
        return id(param) in self._entries

    def __iter__(self):
        return (p for p, _ in self._entries.values())

    def __len__(self):
        return len(self._entries)

    def __repr__(self):
        items = ", ".join(f"{_param_label(p)}: {v}" for p, v in self._entries.values())
        return f"ParamIndexMap({{{items}}})"


@dataclass
class PerBufferParamLayout:
    """Where each param of one buffer sits, and the buffer's buckets."""

    param_index_map: ParamIndexMap
    bucket_indices: List[Tuple[int, int]] = field(default_factory=list)
    per_bucket_numel_unpadded: List[int] = field(default_factory=list)
    param_indices: List[int] = field(default_factory=list)
    num_shards: int = 1
    # shardwise extra: no param crosses a shard boundary (the layer-wise layout).
    shard_aligned: bool = False

    @property
    def numel(self):
        return self.bucket_indices[-1][1] if self.bucket_indices else 0


@dataclass
class FullParamLayout:
    layouts: Dict[BufferKey, PerBufferParamLayout] = field(default_factory=dict)


def _param_label(param):
    name = getattr(param, "name", None)
    return name if isinstance(name, str) else f"<param shape={tuple(getattr(param, 'shape', ()))}>"


def param_info(param, index, name=None, embedding_or_output=False):
    """The engine's ParamInfo for one param object.

    name: overrides the param's ``name`` attribute (unnamed params are called ``params[index]``).
    embedding_or_output: the default when the param has no ``is_embedding_or_output_parameter``.
    """
    if name is None:
        name = getattr(param, "name", None)
    if not isinstance(name, str) or not name:
        name = f"params[{index}]"
    try:
        shape = [whole_number(d, f"param '{name}': a dimension of its shape") for d in param.shape]
    except (AttributeError, TypeError):
        raise ValueError(f"param '{name}' has no usable .shape") from None
    if not hasattr(param, "dtype"):
        raise ValueError(f"param '{name}' has no .dtype")
    dtype = dtype_name(param.dtype, f"param '{name}'")
    if dtype in ("int32", "int64"):  # no gradient, so nothing for a grad buffer to hold
        raise ValueError(f"param '{name}' is {dtype}: layouts hold trainable params (fp32, bf16, "
                         f"fp16, and fp8 stored as uint8)")
    use_muon = getattr(param, "use_muon", None)
    return _core.ParamInfo(
        name=name,
        shape=shape,
        dtype=dtype,
        shared_embedding=bool(getattr(param, "shared_embedding", False)),
        expert_parallel=not bool(getattr(param, "allreduce", True)),
        embedding_or_output=bool(getattr(param, "is_embedding_or_output_parameter",
                                         embedding_or_output)),
        use_muon=None if use_muon is None else bool(use_muon),
        qkv_split=[whole_number(r, f"param '{name}': a qkv_split entry")
                   for r in getattr(param, "qkv_split", None) or []],
    )


def param_infos(params):
    """ParamInfos for a forward-ordered param list; ValueError for a param listed twice."""
    seen = {}
    infos = []
    for i, p in enumerate(params):
        if id(p) in seen:
            raise ValueError(f"param '{_param_label(p)}' is listed twice (params[{seen[id(p)]}] "
                             f"and params[{i}])")
        seen[id(p)] = i
        infos.append(param_info(p, i))
    return infos


def from_engine(buffers, params):
    """Wraps the engine's per-buffer dicts into a FullParamLayout keyed by `params`' objects."""
    full = FullParamLayout()
    for b in buffers:
        key = BufferKey(public_dtype(b["param_dtype"]), public_dtype(b["grad_dtype"]),
                        b["is_expert_parallel"], b["is_layer_wise"])
        index_map = ParamIndexMap(
            (params[pid], (start, end, bucket)) for pid, start, end, bucket in b["param_index_map"])
        full.layouts[key] = PerBufferParamLayout(
            param_index_map=index_map,
            bucket_indices=[tuple(r) for r in b["bucket_indices"]],
            per_bucket_numel_unpadded=list(b["per_bucket_numel_unpadded"]),
            param_indices=list(b["param_indices"]),
            num_shards=b["num_shards"],
            shard_aligned=b["shard_aligned"],
        )
    return full


def compute_full_param_layout(params, dp, bucket_size=None, optimizer="layer-wise",
                              expert_dp=None, high_nccl_busbw=False, grad_reduce_in_fp32=True,
                              all_layer_wise=False):
    """FullParamLayout of `params` (forward order) for data-parallel size `dp`.

    optimizer: "layer-wise" (shard-aligned buffers for Muon-managed params, DistributedOptimizer
    layout for the rest), "distributed" (DistributedOptimizer) or "ddp" (plain DDP).
    bucket_size: approximate elements per bucket; None = one bucket per buffer.
    Raises shardwise.Error (a ValueError) naming the param or option for bad input.
    """
    params = list(params)
    infos = param_infos(params)
    buffers = _core.compute_full_param_layout(
        infos, optimizer, whole_number(dp, "dp", bits=32),
        None if expert_dp is None else whole_number(expert_dp, "expert_dp", bits=32),
        None if bucket_size is None else whole_number(bucket_size, "bucket_size"),
        bool(grad_reduce_in_fp32),
        bool(high_nccl_busbw), bool(all_layer_wise))
    return from_engine(buffers, params)


__all__ = ["BufferKey", "PerBufferParamLayout", "FullParamLayout", "ParamIndexMap",
           "compute_full_param_layout"]
