"""torch.optim.Optimizer subclasses over the shardwise engine: sw.AdamW, sw.Muon and its presets.

    ddp = sw.DistributedDataParallel(model)   # re-laid out for "distributed" by sw.AdamW below
    opt = sw.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)    # torch.optim.AdamW's signature
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)

They are torch optimizers (``param_groups``, ``defaults``, ``step(closure)``, ``zero_grad``,
``state_dict`` in torch's layout), so every ``torch.optim.lr_scheduler`` works: before each step
the values in ``param_groups`` (lr, weight_decay, betas, eps; momentum for Muon groups) are handed
to the engine, per param, when they changed since the last step. The update itself is the
engine's (grad sync, sharded update, param all-gather), as with ``make_optimizer``.

The params are those of a module wrapped by ``sw.DistributedDataParallel`` (found from the params,
wrapped before or after the optimizer is built; ``ddp=`` names it explicitly). The engine steps every trainable param of the wrapped module, so the
groups must hold each of them exactly once. Unlike ``make_optimizer`` (the CLI's settings) these
constructors do not clip gradients (torch does not; call ``torch.nn.utils.clip_grad_norm_``).
"""

import warnings
import weakref
from types import MappingProxyType

import numpy as np
import torch

from .ddp import SET_TO_NONE_DEFAULT, DistributedDataParallel, check_same_settings_on_all_ranks
from .optimizer import step_engine

# The engine's per-param hyperparameters, by group key (betas split in two).
_ADAMW_GROUP_KEYS = ("lr", "weight_decay", "betas", "eps")
_MUON_GROUP_KEYS = ("lr", "weight_decay", "momentum")
# Muon settings that are one per optimizer in the engine: a group may not change them.
_MUON_OPTIMIZER_WIDE = ("nesterov", "ns_steps", "coefficients", "ns_algorithm", "scale_mode",
                        "extra_scale_factor", "split_qkv", "matmul_precision")
# torch.optim group flags the engine has no such update for: set in a group (by hand, or by a
# loaded torch state dict) they would be ignored without a word.
_UNSUPPORTED_GROUP_FLAGS = ("amsgrad", "maximize", "capturable", "differentiable")
# AdamW kinds step every param with AdamW; Muon kinds step 2-D hidden weights with Muon.
# The first is what a wrapper built without optimizer= is re-laid for: "ddp" (all-reduce, every
# rank holding the whole AdamW state) behaves as torch DDP + torch.optim.AdamW in every respect a
# script can see, state_dict() included (rank 0's loads on every rank); ZeRO-1's sharded state
# ("distributed") is for who asks for it with optimizer="distributed".
_ADAMW_KINDS = ("ddp", "distributed")
_MUON_KINDS = ("layer-wise", "legacy-layer-wise")


def _wrapped_params(ddp):
    """(engine name, param) of every param the engine steps, in its param order. The names are
    the engine's (those of its state and checkpoints), without any wrapper prefix."""
    return list(ddp._params)


def _as_groups(params):
    if isinstance(params, torch.Tensor):
        raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                        "or dicts, but got " + torch.typename(params))
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if not isinstance(params[0], dict):
        return [{"params": params}]
    return [dict(g, params=list(g["params"]) if not isinstance(g["params"], torch.Tensor)
                 else [g["params"]]) for g in params]


def _find_ddp(groups, ddp, required=True):
    if ddp is not None:
        if not isinstance(ddp, DistributedDataParallel):
            raise TypeError(f"ddp must be a shardwise.torch.DistributedDataParallel, got "
                            f"{type(ddp).__name__}")
        return ddp
    for group in groups:
        for p in group["params"]:
            ref = getattr(p, "_shardwise_ddp", None)
            found = ref() if ref is not None else None
            if found is not None:
                return found
    if not required:
        return None
    raise ValueError("these params belong to no shardwise.torch.DistributedDataParallel: wrap the "
                     "module first (sw.DistributedDataParallel(model)) and pass its parameters, "
                     "or pass ddp=")


def lay_out_for(ddp, kinds, name):
    """Makes `ddp`'s buffers laid out for one of `kinds`: re-lays them for kinds[0] when the kind
    was not chosen explicitly and training has not started; otherwise a clear ValueError."""
    if ddp.kind in kinds:
        return
    if not ddp.kind_is_explicit and not ddp.training_started():
        fp32 = all(p.dtype == torch.float32 for p in ddp.parameters())
        # the replicated "ddp" kind steps fp32 params only; 16-bit ones need fp32 main copies
        ddp.relayout(kinds[0] if fp32 or kinds[0] != "ddp" else kinds[1])
        return
    why = (f"it was wrapped with optimizer='{ddp.kind}'" if ddp.kind_is_explicit
           else "training started before this optimizer was built")
    raise ValueError(f"{name} needs a DistributedDataParallel laid out for one of "
                     f"{', '.join(kinds)}; this one is '{ddp.kind}' ({why}; wrap with "
                     f"DistributedDataParallel(..., optimizer='{kinds[0]}') or build the "
                     f"optimizer before the first backward)")


class _EngineOptimizer(torch.optim.Optimizer):
    """The torch.optim.Optimizer side shared by AdamW and Muon.

    Built on params no DistributedDataParallel wraps yet (``opt = sw.AdamW(model.parameters());
    model = sw.DistributedDataParallel(model)``, the order many torch scripts use), it is a
    plain torch optimizer until the module is wrapped: the wrapper binds it (``bind``).
    """

    _kinds = ()
    _name = ""

    def __init__(self, groups, defaults, spec, ddp, defer=False):
        self.ddp = None
        self._names = None
        self._engine_ready = False
        self._spec = spec
        self._applied = None
        self.last_step = None  # the engine's {"stepped", "grad_norm", "clip_coeff"}
        self._check_group_flags(groups)
        super().__init__(groups, defaults)
        if ddp is None and defer:
            # Parameter objects survive wrapping: the wrapper finds this optimizer on them.
            for p in self._all_params():
                p._shardwise_pending_optimizer = weakref.ref(self)
            return
        self.bind(ddp)

    def _all_params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def bind(self, ddp):
        """Attaches to `ddp` (re-laying its buffers for this optimizer's kind when it was built
        without an explicit kind and has not trained yet) and creates the engine's optimizer."""
        if self.ddp is not None:
            raise ValueError(f"{self._name} is bound to a DistributedDataParallel already")
        if ddp.engine.has_optimizer():
            raise ValueError(f"{self._name}: this DistributedDataParallel already has an "
                             f"optimizer")
        # The class, then every engine keyword's value (the spec's defaults for those not
        # given), first: a rank with another optimizer would fail a check below alone. One
        # collective; a differing class is the first setting it names.
        check_same_settings_on_all_ranks(
            {"optimizer": self._name, **{f"{self._name} {k}": v for k, v in self._spec.items()}})
        self._names = {id(p): n for n, p in _wrapped_params(ddp)}
        # Checks of this rank's params: a failure on any rank fails all (none is left waiting).
        error = None
        try:
            for p in self._all_params():
                self._check_param(p)
            self._check_coverage(ddp)
        except ValueError as e:
            error = e
        failed = ddp.engine.ranks_using([error is not None])[0]
        if error is not None:
            raise error
        if failed:
            raise ValueError(f"{self._name}: its params were refused on {failed} other rank(s) "
                             f"(see their errors)")
        lay_out_for(ddp, self._kinds, self._name)
        # torch's rules: lr x weight_decay >= 1 is the user's to choose, as with torch.optim
        self.options = ddp.engine.make_optimizer(ddp.kind, self._spec, torch_rules=True)
        self.ddp = ddp
        self._engine_ready = True
        for p in self._all_params():
            if getattr(p, "_shardwise_pending_optimizer", None) is not None:
                del p._shardwise_pending_optimizer

    @classmethod
    def _agree_on_class(cls):
        """Collective: a ValueError on every rank unless every rank builds this optimizer class
        (sw.Muon on one rank and sw.AdamW on another raised on one and hung the other)."""
        check_same_settings_on_all_ranks({"optimizer": cls._name})

    def _check_param(self, p):
        # A frozen param (requires_grad=False) may sit in a group, as in torch: it never moves.
        if self._names is not None and id(p) not in self._names and p.requires_grad:
            raise ValueError(f"{self._name}: a param of shape {tuple(p.shape)} is not one of "
                             "the wrapped module's trainable params")

    def add_param_group(self, param_group):
        if self._engine_ready:
            raise ValueError(f"{self._name}: the engine steps every param of the wrapped module "
                             "and they are all in a group already; give every group to the "
                             "constructor")
        for p in param_group["params"] if isinstance(param_group["params"], list) else []:
            self._check_param(p)
        super().add_param_group(param_group)

    def _check_coverage(self, ddp):
        listed = {id(p) for p in self._all_params()}
        for n, p in _wrapped_params(ddp):
            if id(p) not in listed:
                raise ValueError(f"{self._name}: param '{n}' of the wrapped module is in no param "
                                 "group; the engine steps every trainable param (freeze it with "
                                 "requires_grad=False before wrapping)")

    def _bound_ddp(self):
        if self.ddp is None:
            ddp = _find_ddp(self.param_groups, None, required=False)
            if ddp is None:
                raise RuntimeError(f"{self._name}: its params belong to no shardwise "
                                   "DistributedDataParallel yet: wrap the module "
                                   "(sw.DistributedDataParallel(model)) before the first step")
            self.bind(ddp)
        return self.ddp

    # --- hyperparameters ------------------------------------------------------------------
    def _group_values(self, group):
        raise NotImplementedError

    def _check_group_flags(self, groups, where="param group"):
        for i, group in enumerate(groups):
            for flag in _UNSUPPORTED_GROUP_FLAGS:
                if group.get(flag):
                    raise ValueError(f"{self._name}: {where} {i} sets {flag}={group[flag]!r}, "
                                     "which the engine does not support")

    def _sync_hyperparameters(self):
        """Hands param_groups' values to the engine, only when one changed since last time."""
        self._check_group_flags(self.param_groups)  # an edit of param_groups since the last step
        values = [self._group_values(g) for g in self.param_groups]
        if self.ddp.engine.world_size > 1:
            # Every step: a scheduler or load_state_dict on one rank changes its values alone,
            # and the ranks then trained apart ("ddp") or stepped each shard with its owner's.
            named = [dict(v) for v in values]
            check_same_settings_on_all_ranks({f"{self._name} param_groups": named})
        if values == self._applied:
            return
        by_param = {}
        for group, group_values in zip(self.param_groups, values):
            for p in group["params"]:
                if id(p) in self._names:
                    by_param[self._names[id(p)]] = dict(group_values)
        self.ddp.engine.set_param_hyperparameters(by_param)
        self._applied = values

    # --- torch.optim.Optimizer API ------------------------------------------------------
    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        ddp = self._bound_ddp()
        if ddp._ready_count == 0 and all(p.grad is None for _, p in ddp._params):
            # As torch.optim: no param has a grad (no backward yet, or zero_grad() since the last
            # step), so there is nothing to update. Every rank must agree, as under torch DDP.
            return loss
        self._sync_hyperparameters()
        self.last_step = step_engine(ddp)
        return loss

    def reload_model_params(self):
        """Call after writing params through ``.data`` (torch ops on the params and
        load_state_dict are seen without it): with 16-bit params the next step re-reads them
        into its fp32 copies instead of overwriting them."""
        if self.ddp is not None:
            self.ddp._params_written = True

    def zero_grad(self, set_to_none=SET_TO_NONE_DEFAULT):
        if self.ddp is None:  # not bound yet: torch's own zero_grad on the params' .grad
            for p in self._all_params():
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_().zero_()
            return
        self.ddp.zero_grad_buffer(set_to_none)

    def _indices(self):
        order = [p for g in self.param_groups for p in g["params"]]
        return {id(p): i for i, p in enumerate(order)}, order

    def _state_by_param(self, order):
        """{param: {field: tensor}} of what this rank holds of the engine's state (copies)."""
        engine_state = self._bound_ddp().engine.state_dict()
        state = {}
        for p in order:
            fields = engine_state.get(self._names.get(id(p)))
            if fields is None or self._never_stepped(fields):
                continue
            entry = {}
            for field, values in fields.items():
                t = torch.from_numpy(values.copy())
                if field == "step":
                    t = t.reshape(())
                elif t.numel() == p.numel():
                    t = t.reshape(p.shape)
                entry[field] = t
            state[p] = entry
        return state

    def _never_stepped(self, fields):
        """As torch, a param gets state at its first step (the engine's is zeros until then).
        Muon's momentum has no step count: zeros before this optimizer's first step."""
        if "step" in fields:
            return not fields["step"].any()
        return self.last_step is None and not any(v.any() for v in fields.values())

    @property
    def state(self):
        """torch's ``opt.state`` ({param: {field: tensor}}), read-only: a snapshot of what this
        rank holds, the values of state_dict()'s "state" keyed by param (as torch's
        ZeroRedundancyOptimizer, a sharded kind holds its shard's slices only). The state lives
        in the engine: change it through load_state_dict."""
        if self.ddp is None:
            return self._state_before_binding  # a plain torch optimizer until wrapped: empty
        return MappingProxyType({p: MappingProxyType(entry) for p, entry in
                                 self._state_by_param(self._all_params()).items()})

    @state.setter
    def state(self, value):
        # torch.optim.Optimizer.__init__ sets self.state; nothing else may.
        if getattr(self, "ddp", None) is not None:
            raise AttributeError(f"{self._name}.state is read-only: its state lives in the "
                                 "engine; change it with load_state_dict")
        self._state_before_binding = value

    def state_dict(self):
        """torch's layout: {"state": {param index: {field: tensor}}, "param_groups": [...]}.

        Indices count the params of param_groups in order, as torch's. "state" holds what this
        rank owns: whole params, or in the distributed kinds the flat slice of each param this
        rank's shard holds (a param outside the shard is absent). "step" is a scalar tensor.
        """
        index, order = self._indices()
        state = {index[id(p)]: entry for p, entry in self._state_by_param(order).items()}
        groups = [dict({k: v for k, v in g.items() if k != "params"},
                       params=[index[id(p)] for p in g["params"]]) for g in self.param_groups]
        engine = self.ddp.engine
        # Whose shards "state" holds: load_state_dict refuses another rank's (torch ignores keys
        # it does not know, so the dict still loads into nothing else by mistake).
        saved_by = {"kind": engine.kind, "rank": engine.rank, "dp_size": engine.dp_size}
        return {"state": state, "param_groups": groups, "shardwise": saved_by}

    def _check_saved_by(self, saved_by):
        """The sharded kinds' state dicts hold one rank's shards: only that rank can load one."""
        engine = self.ddp.engine
        if saved_by is None or engine.kind == "ddp" and saved_by["kind"] == "ddp":
            return  # the ddp kind keeps the whole state on every rank, as torch does
        if (saved_by["kind"], saved_by["rank"], saved_by["dp_size"]) != (
                engine.kind, engine.rank, engine.dp_size):
            raise ValueError(
                f"this optimizer state dict was saved by rank {saved_by['rank']} of "
                f"{saved_by['dp_size']} with optimizer kind '{saved_by['kind']}', and this is rank "
                f"{engine.rank} of {engine.dp_size} with '{engine.kind}': the sharded kinds' "
                f"state_dict() holds only the saving rank's shards, so save and load one per rank "
                f"(e.g. f'optimizer.{{rank}}.pt'), or use sw.save_checkpoint / sw.load_checkpoint "
                f"(which also load at another dp size)")

    def load_state_dict(self, state_dict):
        """Loads a state_dict() of the same optimizer at the same dp (other dp: load_checkpoint),
        or a torch.optim one of the same params; a param it has no state for starts fresh."""
        self._check_saved_by(state_dict.get("shardwise"))
        saved_groups = state_dict["param_groups"]
        self._check_group_flags(saved_groups, "the loaded state dict's param group")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, saved in zip(self.param_groups, saved_groups):
            if len(g["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        _, order = self._indices()
        self._bound_ddp()
        engine_state = {}
        for i, fields in state_dict["state"].items():
            index = int(i)
            if not 0 <= index < len(order):
                raise ValueError(f"loaded state dict has state for param index {i}, but the "
                                 f"optimizer's param groups hold {len(order)} params")
            name = self._names.get(id(order[index]))
            if name is None:  # frozen: torch would keep state it never uses; the engine has none
                warnings.warn(f"{self._name}.load_state_dict: state for param index {i} ignored: "
                              "the param does not require grad, so the engine never steps it")
                continue
            engine_state[name] = {f: t.detach().reshape(-1).to(torch.float32).numpy()
                                  for f, t in fields.items()}
        # As torch: a param without saved state (the saved optimizer never stepped it) starts
        # fresh: zero moments and momentum, step 0.
        for name, fields in self.ddp.engine.state_dict().items():
            if name not in engine_state:
                engine_state[name] = {f: np.zeros_like(v) for f, v in fields.items()}
        self.ddp.engine.load_state_dict(engine_state)
        for g, saved in zip(self.param_groups, saved_groups):
            g.update({k: v for k, v in saved.items() if k != "params"})
        self._applied = None


class AdamW(_EngineOptimizer):
    """torch.optim.AdamW on the engine: same signature, defaults and update (decoupled decay).

    Steps a DistributedDataParallel laid out for "distributed" (ZeRO-1) or "ddp"; one wrapped
    without an explicit ``optimizer=`` is re-laid out for "distributed" when this attaches
    before training. Built before the module is wrapped, it binds when the wrapper is built
    (or at the first step). amsgrad,
    maximize, capturable and differentiable are not supported (ValueError when set, here, in a
    param group or in a loaded state dict's groups); foreach and fused are accepted and ignored.
    """

    _kinds = _ADAMW_KINDS
    _name = "sw.AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, ddp=None):
        del foreach, fused
        for name, value in (("amsgrad", amsgrad), ("maximize", maximize),
                            ("capturable", capturable), ("differentiable", differentiable)):
            if value:
                raise ValueError(f"sw.AdamW: {name}=True is not supported by the engine")
        _check_adamw_values(lr, betas, eps, weight_decay)
        groups = _as_groups(params)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        spec = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, clip_grad=0.0)
        super().__init__(groups, defaults, spec, _find_ddp(groups, ddp, required=False),
                         defer=True)

    def _group_values(self, group):
        return _adamw_values(group)


def _check_adamw_values(lr, betas, eps, weight_decay):
    # torch.optim.AdamW's checks and wording.
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 < eps:  # torch takes 0; the engine refuses it (a zero grad would give 0 / 0)
        raise ValueError(f"Invalid epsilon value: eps must be > 0 (got {eps})")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _adamw_values(group):
    beta1, beta2 = group["betas"]
    return (("lr", float(group["lr"])), ("weight_decay", float(group["weight_decay"])),
            ("beta1", float(beta1)), ("beta2", float(beta2)), ("eps", float(group["eps"])))


class Muon(_EngineOptimizer):
    """Muon on the 2-D hidden weights, AdamW on the other params, in one torch optimizer.

    Which params Muon steps is fixed when the module is wrapped (layout "layer-wise"): 2-D
    weights, except nn.Embedding weights and params marked ``is_embedding_or_output_parameter``
    or ``use_muon = False`` (mark a classifier head so before wrapping; a head tied to the
    embedding is an embedding already). Each group carries ``use_muon``: a group without it is
    split into its Muon params and its AdamW params (the keys it sets apply to both); a group
    whose use_muon contradicts the layout is a ValueError. Muon groups use lr, momentum and
    weight_decay; AdamW groups lr, betas, eps and weight_decay, which default to the adamw_*
    arguments. The Newton–Schulz and scale settings are one per optimizer.
    """

    _kinds = _MUON_KINDS
    _name = "sw.Muon"

    def __init__(self, params, lr=0.02, momentum=0.95, weight_decay=0.0, nesterov=True,
                 ns_steps=5, coefficients="simple", scale_mode="shape_scaling",
                 extra_scale_factor=1.0, split_qkv=True, ns_algorithm="standard",
                 matmul_precision="fp32", adamw_lr=3e-4, adamw_betas=(0.9, 0.95),
                 adamw_eps=1e-10, adamw_weight_decay=0.0, *, ddp=None):
        _check_adamw_values(adamw_lr, adamw_betas, adamw_eps, adamw_weight_decay)
        groups = _as_groups(params)
        ddp = _find_ddp(groups, ddp)
        self._agree_on_class()  # before lay_out_for, which refuses a kind on this rank alone
        lay_out_for(ddp, self._kinds, self._name)  # which params Muon steps depends on it
        muon_wide = dict(nesterov=nesterov, ns_steps=ns_steps, coefficients=coefficients,
                         scale_mode=scale_mode, extra_scale_factor=extra_scale_factor,
                         split_qkv=split_qkv, ns_algorithm=ns_algorithm,
                         matmul_precision=matmul_precision)
        adamw_defaults = dict(lr=adamw_lr, betas=tuple(adamw_betas), eps=adamw_eps,
                              weight_decay=adamw_weight_decay)
        self._muon_flags = _muon_flags(ddp)
        groups = [g for group in groups for g in self._split_by_use_muon(group, ddp)]
        for g in groups:
            if not g["use_muon"]:
                for key, value in adamw_defaults.items():
                    g.setdefault(key, value)
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, use_muon=True,
                        betas=tuple(adamw_betas), eps=adamw_eps, **muon_wide)
        spec = dict(lr=adamw_lr, muon_lr=lr, momentum=momentum, weight_decay=weight_decay,
                    betas=tuple(adamw_betas), eps=adamw_eps, clip_grad=0.0, **muon_wide)
        super().__init__(groups, defaults, spec, ddp)

    def _split_by_use_muon(self, group, ddp):
        names = {id(p): n for n, p in _wrapped_params(ddp)}
        flags = [self._muon_flags.get(id(p)) for p in group["params"]]
        for p, flag in zip(group["params"], flags):
            if flag is None:
                raise ValueError(f"sw.Muon: a param of shape {tuple(p.shape)} is not one of the "
                                 "wrapped module's trainable params")
        if "use_muon" in group:
            for p, flag in zip(group["params"], flags):
                if flag != bool(group["use_muon"]):
                    raise ValueError(
                        f"sw.Muon: param '{names[id(p)]}' is in a group with use_muon="
                        f"{group['use_muon']} but the layout steps it with "
                        f"{'Muon' if flag else 'AdamW'}; set param.use_muon = "
                        f"{bool(group['use_muon'])} before wrapping the module")
            return [group]
        out = []
        for use_muon in (True, False):
            params = [p for p, f in zip(group["params"], flags) if f == use_muon]
            if params:
                out.append(dict(group, params=params, use_muon=use_muon))
        return out

    def _group_values(self, group):
        for key in _MUON_OPTIMIZER_WIDE:
            if group.get(key, self.defaults[key]) != self.defaults[key]:
                raise ValueError(f"sw.Muon: '{key}' is one per optimizer; a group may not change "
                                 f"it ({group[key]!r} vs {self.defaults[key]!r})")
        if not group["use_muon"]:
            return _adamw_values(group)
        return (("lr", float(group["lr"])), ("weight_decay", float(group["weight_decay"])),
                ("momentum", float(group["momentum"])))


def _muon_flags(ddp):
    flags = ddp.engine.muon_params()
    return {id(p): bool(f) for (_, p), f in zip(_wrapped_params(ddp), flags)}


def muon_public(params, lr=0.02, momentum=0.95, weight_decay=0.0, adamw_lr=3e-4,
                adamw_betas=(0.9, 0.95), adamw_eps=1e-10, adamw_weight_decay=0.0, *, ddp=None,
                **options):
    """The public Muon (K. Jordan): one quintic (3.4445, -4.7750, 2.0315) five times, Nesterov
    momentum 0.95, update scaled by sqrt(max(1, rows/cols)), lr 0.02, no weight decay; AdamW
    (lr 3e-4, betas (0.9, 0.95), eps 1e-10) on embeddings, the head and 1-D params."""
    options.setdefault("coefficients", "simple")
    options.setdefault("scale_mode", "shape_scaling")
    return Muon(params, lr=lr, momentum=momentum, weight_decay=weight_decay, adamw_lr=adamw_lr,
                adamw_betas=adamw_betas, adamw_eps=adamw_eps,
                adamw_weight_decay=adamw_weight_decay, ddp=ddp, **options)


def muon_megatron(params, *, ddp=None, **options):
    """Megatron's Muon settings, those of ``shardwise train`` (the optimizer spec's defaults):
    five cycled tuned quintics, update scaled by sqrt(max(rows, cols)), Muon lr 0.002, AdamW lr
    0.001 betas (0.9, 0.999) eps 1e-8, weight decay 0.01 on both. No clipping (the CLI clips at
    1.0; call clip_grad_norm_)."""
    from .optimizer import DEFAULTS
    settings = dict(lr=DEFAULTS["muon_lr"], momentum=DEFAULTS["momentum"],
                    weight_decay=DEFAULTS["weight_decay"], nesterov=DEFAULTS["nesterov"],
                    ns_steps=DEFAULTS["ns_steps"], coefficients=DEFAULTS["coefficients"],
                    scale_mode=DEFAULTS["scale_mode"], adamw_lr=DEFAULTS["lr"],
                    adamw_betas=tuple(DEFAULTS["betas"]), adamw_eps=DEFAULTS["eps"],
                    adamw_weight_decay=DEFAULTS["weight_decay"])
    settings.update(options)
    return Muon(params, ddp=ddp, **settings)
