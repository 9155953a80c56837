"""shardwise.torch.make_optimizer: the engine's optimizers (the CLI's kinds) over a wrapped module.

Kinds, as ``shardwise train``'s ``optimizer.kind``:
  layer-wise         Muon on whole 2-D matrices (owned by one rank each, shard-aligned layout)
                     + AdamW element-sharded for the rest; grads reduce-scattered, params
                     all-gathered in place.
  distributed        AdamW everywhere, element-sharded (ZeRO-1).
  ddp                grads all-reduced, every rank runs AdamW on every param.
  legacy-layer-wise  the layer-wise optimizer over all-reduce + all_gather_v (the baseline).
"""

from .ddp import DistributedDataParallel

KINDS = ("layer-wise", "distributed", "ddp", "legacy-layer-wise")


class Optimizer:
    """Steps the params of a shardwise DistributedDataParallel.

    step(): finish the grad sync (wait for the bucket collectives still in flight, dispatch the
    rest), clip by the global grad norm, update this rank's params / shards, all-gather the
    updated params in place. Returns {"stepped", "grad_norm", "clip_coeff"}.
    """

    def __init__(self, ddp, options):
        self.ddp = ddp
        self.options = dict(options)
        self._lr = options["lr"]
        ddp.engine.make_optimizer(self.options)

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
        self.ddp.check_unchanged()
        if self.ddp._ready_count == 0:
            raise RuntimeError("step() called before any backward(): no gradient reached the "
                               "shardwise grad buffer since the last step() / zero_grad()")
        result = self.ddp.engine.step()
        self.ddp._ready_count = 0
        self.ddp._params_gathering()
        return result

    def zero_grad(self, set_to_none=True):
        del set_to_none  # grads live in the grad buffer, which is zeroed either way
        self.ddp.zero_grad_buffer()

    def state_dict(self):
        """This rank's optimizer state: {param name: {field: list of floats}} of what it owns."""
        return {"kind": self.kind, "lr": self._lr, "state": self.ddp.engine.state_dict()}

    def load_state_dict(self, state_dict):
        if state_dict.get("kind") != self.kind:
            raise ValueError(f"optimizer state of kind '{state_dict.get('kind')}' cannot load "
                             f"into a '{self.kind}' optimizer")
        self.ddp.engine.load_state_dict(state_dict["state"])
        self.set_lr(state_dict.get("lr", self._lr))


def make_optimizer(ddp, kind=None, lr=1e-3, muon_lr=2e-3, weight_decay=0.01, betas=(0.9, 0.999),
                   eps=1e-8, momentum=0.95, nesterov=True, ns_steps=5, coefficients="quintic",
                   scale_mode="spectral", extra_scale_factor=1.0, split_qkv=True,
                   matmul_precision="fp32", clip_grad=1.0,
                   overlap_param_gather_with_optimizer_step=False):
    """The optimizer of `kind` (default: the kind `ddp` was laid out for) over `ddp`.

    Options and defaults are those of ``shardwise train``'s optimizer section: lr (AdamW),
    muon_lr, weight_decay, betas, eps, momentum / nesterov / ns_steps / coefficients
    ("quintic", "simple", "polar_express") / scale_mode ("spectral", "unit_rms_norm",
    "shape_scaling") / extra_scale_factor / split_qkv / matmul_precision (Muon), clip_grad
    (global grad-norm clip; 0 disables).
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
        if ddp._ready_count:
            raise ValueError(f"make_optimizer: kind '{kind}' needs another buffer layout than "
                             f"'{ddp.kind}', and gradients are already in the buffer; wrap with "
                             f"DistributedDataParallel(..., optimizer='{kind}')")
        ddp._relayout(kind)
    beta1, beta2 = betas
    options = dict(lr=float(lr), muon_lr=float(muon_lr), weight_decay=float(weight_decay),
                   beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                   momentum=float(momentum), nesterov=bool(nesterov), ns_steps=int(ns_steps),
                   coefficients=str(coefficients), scale_mode=str(scale_mode),
                   extra_scale_factor=float(extra_scale_factor), split_qkv=bool(split_qkv),
                   matmul_precision=str(matmul_precision), clip_grad=float(clip_grad),
                   overlap_param_gather_with_optimizer_step=bool(
                       overlap_param_gather_with_optimizer_step))
    return Optimizer(ddp, options)
