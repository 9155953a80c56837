"""shardwise.torch.make_optimizer: the engine's optimizers (the CLI's kinds) over a wrapped module.

Kinds, as ``shardwise train``'s ``optimizer.kind``:
  layer-wise         Muon on whole 2-D matrices (owned by one rank each, shard-aligned layout)
                     + AdamW element-sharded for the rest; grads reduce-scattered, params
                     all-gathered in place.
  distributed        AdamW everywhere, element-sharded (ZeRO-1).
  ddp                grads all-reduced, every rank runs AdamW on every param.
  legacy-layer-wise  the layer-wise optimizer over all-reduce + all_gather_v (the baseline).

The kinds, the keywords and their defaults are the C++ optimizer spec's (OptimizerConfig, the
YAML config's optimizer section), read from the extension: nothing here declares its own.
"""

import inspect
import math
import warnings

from .. import _core
from .ddp import SET_TO_NONE_DEFAULT, DistributedDataParallel, check_same_settings_on_all_ranks

KINDS = tuple(_core.optimizer_kinds())
# make_optimizer's keywords with their defaults (the spec's; "kind" is an argument of its own).
DEFAULTS = {k: v for k, v in _core.optimizer_defaults().items() if k != "kind"}


def step_engine(ddp):
    """One engine step over `ddp`'s buffers: grad sync, update, param all-gather."""
    ddp.end_deferred_backward()
    ddp.check_unchanged()
    if ddp._ready_count == 0:
        # A second step() or .grad set by hand: torch.optim would step on .grad as it stands.
        raise RuntimeError("step(): no backward() through the wrapped module since the last "
                           "step() / zero_grad(), so no gradient reached the shardwise grad "
                           "buffer (the engine steps only what a backward() brought: a second "
                           "step() on the same gradients, or a .grad set by hand, is refused)")
    skipped = set(ddp.take_grads_set_since_sync())
    if ddp.find_unused_parameters:
        skipped.update(ddp.params_without_grad())
    ddp.engine.set_params_without_grad(sorted(skipped))  # replaces the last step's set
    # 16-bit params: the engine steps fp32 copies; written since, the params are re-read.
    if ddp._params_written or ddp.params_edited_since_step():
        ddp.engine.reload_model_params()
        ddp._params_written = False
    result = ddp.engine.step()
    if not result["stepped"] and not math.isfinite(result["grad_norm"]):
        # torch.optim would write the NaN into the params; the engine skips the step, as
        # Megatron's optimizer does. Said once per such step, not left to last_step alone.
        warnings.warn(f"step skipped: the gradients hold NaN or inf (grad norm "
                      f"{result['grad_norm']}); no param, moment or step count moved")
    ddp.note_params_in_sync()
    ddp._stepped = True
    ddp._ready_count = 0
    ddp._params_gathering()
    return result


class Optimizer:
    """Steps the params of a shardwise DistributedDataParallel.

    step(): finish the grad sync (wait for the bucket collectives still in flight, dispatch the
    rest), clip by the global grad norm, update this rank's params / shards, all-gather the
    updated params in place. Returns {"stepped", "grad_norm", "clip_coeff"}.
    """

    def __init__(self, ddp, kind, options):
        self.ddp = ddp
        # Every keyword's value: those given, the spec's defaults for the rest.
        check_same_settings_on_all_ranks({f"make_optimizer {k}": v
                                          for k, v in dict(options, kind=kind).items()})
        self.options = ddp.engine.make_optimizer(kind, dict(options))
        self._lr = self.options["lr"]

    @property
    def kind(self):
        return self.ddp.kind

    @property
    def lr(self):
        return self._lr

    def set_lr(self, lr):
        """Sets the AdamW lr to `lr` and Muon's to lr * muon_lr / lr (the schedule both follow)."""
        lr = float(lr)
        self.ddp.engine.set_lr(lr)  # validates it first
        self._lr = lr

    def step(self):
        return step_engine(self.ddp)

    def reload_model_params(self):
        """Call after writing params through ``.data`` (torch ops on the params and
        load_state_dict are seen without it): with 16-bit params the next step re-reads them
        into its fp32 copies instead of overwriting them."""
        self.ddp._params_written = True

    def zero_grad(self, set_to_none=SET_TO_NONE_DEFAULT):
        self.ddp.zero_grad_buffer(set_to_none)

    def state_dict(self):
        """This rank's optimizer state: {param name: {field: float32 numpy array}} of what it
        owns."""
        return {"kind": self.kind, "lr": self._lr, "state": self.ddp.engine.state_dict()}

    def load_state_dict(self, state_dict):
        if state_dict.get("kind") != self.kind:
            raise ValueError(f"optimizer state of kind '{state_dict.get('kind')}' cannot load "
                             f"into a '{self.kind}' optimizer")
        self.ddp.engine.load_state_dict(state_dict["state"])
        self.set_lr(state_dict.get("lr", self._lr))


def make_optimizer(ddp, kind=None, **options):
    """The optimizer of `kind` (default: the kind `ddp` was laid out for) over `ddp`.

    Keywords and defaults are those of ``shardwise train``'s optimizer section (``DEFAULTS``;
    docs/torch.md lists them): lr (AdamW), muon_lr, weight_decay, betas, eps, momentum /
    nesterov / ns_steps / coefficients ("quintic", "simple", "polar_express") / ns_algorithm
    ("standard", "gram") / scale_mode
    ("spectral", "unit_rms_norm", "shape_scaling", "adamw_matched_rms") / extra_scale_factor /
    split_qkv / matmul_precision ("fp32", "bf16") (Muon), clip_grad (global grad-norm clip; 0
    disables), overlap_param_gather_with_optimizer_step.

    The buffers are laid out for one kind when `ddp` is built
    (``DistributedDataParallel(module, optimizer=kind)``); another kind here is refused.
    """
    if not isinstance(ddp, DistributedDataParallel):
        raise TypeError("make_optimizer needs a shardwise.torch.DistributedDataParallel, got "
                        f"{type(ddp).__name__}")
    if kind is None:
        kind = ddp.kind
    if kind not in KINDS:
        raise ValueError(f"kind: unknown optimizer '{kind}' (valid: {', '.join(KINDS)})")
    if ddp.engine.has_optimizer():
        raise ValueError("make_optimizer: this DistributedDataParallel already has an optimizer")
    if kind != ddp.kind:
        raise ValueError(f"make_optimizer: kind '{kind}' needs another buffer layout than "
                         f"'{ddp.kind}', which the buffers were laid out for; wrap with "
                         f"DistributedDataParallel(..., optimizer='{kind}')")
    return Optimizer(ddp, kind, options)


# help() and inspect show the keywords with the spec's defaults.
make_optimizer.__signature__ = inspect.Signature(
    [inspect.Parameter("ddp", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("kind", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value)
       for name, value in DEFAULTS.items()])
