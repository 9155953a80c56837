"""Checkpoints in the format of ``shardwise train --save / --load``: a step directory with the
full weights (model.safetensors, one tensor per param name), one optimizer file per data-parallel
rank and a checkpoint.json manifest; saved atomically, loadable at another dp size.

A checkpoint moves between Python and the CLI when the param names and shapes match (the example
GPT in examples/torch/train_gpt.py uses the CLI model's names) and the optimizer kind is the same.
"""

import json
import os

from .._numbers import whole_number
from .ddp import check_same_settings_on_all_ranks


def _path_text(directory, name):
    text = os.fsdecode(directory)  # str, bytes or os.PathLike
    if "\0" in text:
        raise ValueError(f"{name} {text!r} contains a NUL byte")
    if not text:  # an unset variable; the filesystem's own error said "Invalid argument []"
        raise ValueError(f"{name} is an empty path")
    return text


def save_checkpoint(directory, ddp, optimizer, step, consumed_samples=0, keep_last=0,
                    extra=None):
    """Saves step `step` under `directory` (collective over the data-parallel ranks).

    Returns the published step directory. `extra` (a JSON-serialisable dict) is stored in the
    manifest next to the engine's own entries.
    """
    if optimizer.ddp is not ddp:
        raise ValueError("save_checkpoint: the optimizer does not belong to this "
                         "DistributedDataParallel")
    ddp.check_unchanged()
    entries = {"world_size": ddp.engine.world_size, "saved_by": "shardwise.torch"}
    for key in extra or {}:
        # The manifest's own fields (step, format, ...) are the engine's; these two are ours.
        if key in entries:
            raise ValueError(f"save_checkpoint: extra key '{key}' is one the checkpoint writes "
                             f"itself; choose another name")
    entries.update(extra or {})
    try:
        text = json.dumps(entries, allow_nan=False)  # the manifest is strict JSON
    except (TypeError, ValueError) as error:
        raise ValueError(f"save_checkpoint: extra is not JSON-serialisable: {error}") from None
    path = _path_text(directory, "save_checkpoint: directory")
    counts = [whole_number(v, f"save_checkpoint: {n}", minimum=0, bits=bits) for n, v, bits in
              (("step", step, 64), ("consumed_samples", consumed_samples, 64),
               ("keep_last", keep_last, 32))]
    check_same_settings_on_all_ranks({"save_checkpoint directory": path, "step": counts[0],
                                      "consumed_samples": counts[1], "keep_last": counts[2],
                                      "extra": text})
    ddp.finish_param_sync()
    return ddp.engine.save_checkpoint(path, *counts, text)


def load_checkpoint(directory, ddp, optimizer, step=None):
    """Loads `directory` (a step directory, or a root with `latest` / step-S) into the module's
    params and the optimizer state (resharded to this dp size). Returns {"directory", "step",
    "consumed_samples", "manifest"}."""
    if optimizer.ddp is not ddp:
        raise ValueError("load_checkpoint: the optimizer does not belong to this "
                         "DistributedDataParallel")
    ddp.check_unchanged()
    path = _path_text(directory, "load_checkpoint: directory")
    step = None if step is None else whole_number(step, "load_checkpoint: step", minimum=0)
    check_same_settings_on_all_ranks({"load_checkpoint directory": path, "step": step})
    ddp.finish_param_sync()
    path, loaded_step, consumed, manifest = ddp.engine.load_checkpoint(path, step)
    ddp._params_written = False  # the checkpoint's fp32 main params are loaded too
    ddp.note_params_in_sync()
    return {"directory": path, "step": loaded_step, "consumed_samples": consumed,
            "manifest": json.loads(manifest)}
