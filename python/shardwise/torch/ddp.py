"""shardwise.torch.DistributedDataParallel: a torch module's params as views of the engine's
contiguous param buffer, its grads accumulated into the grad buffer, buckets reduced as they fill.
"""

import contextlib
import hashlib
import inspect
import json
import os
import sys
import weakref

import torch

from .. import _core
from .. import layout as _layout
from . import ddp_arguments as _arguments
from ._param_read_guard import ParamReadGuard
from ._tensors import check_params, materialize, tensor_over

_DEFAULT_KIND = _core.optimizer_defaults()["kind"]  # the optimizer spec's default
# zero_grad's default as the installed torch has it (False in torch 1.x, True from 2.0): a script
# calling zero_grad() gets the .grad its torch would leave, which decides whether an optimizer
# skips a param no backward reached (None) or steps it with a zero grad.
SET_TO_NONE_DEFAULT = inspect.signature(
    torch.optim.Optimizer.zero_grad).parameters["set_to_none"].default


def overlap_pays(world_size):
    """Whether overlapping communication with compute can pay on this node: only when every rank
    has a core for its compute threads and one more for the communication progress. With fewer
    (e.g. 2 ranks of one thread each on 2 cores) the collectives steal the compute's core and
    overlap only adds switching and polling, so the default turns it off."""
    local_ranks = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", world_size))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores >= local_ranks * (torch.get_num_threads() + 1)


def check_no_sparse_grads(module):
    """ValueError naming the module whose trainable weight would get a sparse grad: the grad
    buffer holds dense grads only."""
    for name, m in module.named_modules():
        weight = getattr(m, "weight", None)
        if (getattr(m, "sparse", False) is True and isinstance(weight, torch.Tensor)
                and weight.requires_grad):
            raise ValueError(f"module '{name}' ({type(m).__name__}) has sparse=True: shardwise "
                             f"reduces dense grads in its grad buffer; build it with sparse=False")


def _as_json_value(value):
    """Floats as their repr (JSON has no NaN; a bad value is refused later, by its own check),
    sequences as lists, anything else unknown as its repr."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return [_as_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _as_json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def check_same_settings_on_all_ranks(settings):
    """Collective over the job: a ValueError on every rank naming the first of `settings` (a
    dict) that differs between ranks. Ranks with other arguments would pair mismatched
    collectives (MPI_ERR_TRUNCATE), wait out the watchdog, or train apart without a word."""
    _core.check_settings_agree(json.dumps(_as_json_value(settings)))


def check_same_tensors_on_all_ranks(engine, tensors, what):
    """ValueError on every rank unless every rank holds as many `tensors` with the same shapes
    and dtypes as rank 0 (a broadcast of different ones would corrupt them or abort in MPI)."""
    signature = repr([(str(t.dtype), tuple(t.shape), t.device.type) for t in tensors])
    ours = torch.frombuffer(bytearray(hashlib.sha256(signature.encode()).digest()),
                            dtype=torch.uint8)
    rank0s = ours.clone()
    engine.broadcast_from_rank0(rank0s.view(torch.float32).numpy())
    differs = not torch.equal(ours, rank0s)
    disagreeing = engine.ranks_using([differs])[0]
    if disagreeing:
        raise ValueError(f"DistributedDataParallel: {what} differ between ranks ({disagreeing} "
                         f"rank(s) have other counts, shapes or dtypes than rank 0); every rank "
                         f"must build the same module")


def broadcast_from_rank0(engine, tensors):
    """Rank 0's values of `tensors` (any dtype, contiguous or not; meta and empty ones skipped)
    to every rank, packed into one float32 message over the engine's group."""
    tensors = [t for t in tensors if t.numel() > 0 and t.device.type != "meta"]
    if not tensors:
        return
    with torch.no_grad():
        raw = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in tensors]
        packed = torch.cat(raw)
        padded = torch.zeros((packed.numel() + 3) // 4 * 4, dtype=torch.uint8)
        padded[:packed.numel()] = packed
        engine.broadcast_from_rank0(padded.view(torch.float32).numpy())
        offset = 0
        for t, r in zip(tensors, raw):
            r.copy_(padded[offset:offset + r.numel()])  # r is t's memory when t is contiguous
            if r.data_ptr() != t.data_ptr():
                t.copy_(r.view(t.dtype).view(t.shape))
            offset += r.numel()


class _WrapperRef(weakref.ref):
    """A weak reference to the wrapper, set on the wrapped module's params and hooks. A deep copy
    or pickle of the module (an EMA copy, torch.save(ddp.module)) gets a dead one, so the copy
    is a plain module: it takes neither the wrapper nor its engine along."""

    def __deepcopy__(self, memo):
        return _dead_wrapper_ref()

    def __reduce__(self):
        return (_dead_wrapper_ref, ())


class _Gone:
    pass


def _dead_wrapper_ref():
    return _WrapperRef(_Gone())  # its referent is freed at once


class _WrapperHook:
    """A hook on the wrapped module calling one method of its wrapper (held by a _WrapperRef:
    in a copy of the module it does nothing). With `with_args` the hook's arguments are passed."""

    def __init__(self, ddp, method, with_args=False):
        self.ddp, self.method, self.with_args = _WrapperRef(ddp), method, with_args

    def __call__(self, *args):
        ddp = self.ddp()
        if ddp is None:
            return
        if self.with_args:
            getattr(ddp, self.method)(*args)
        else:
            getattr(ddp, self.method)()


def _inside_an_enclosing_backward():
    """Whether this thread runs a backward() inside another backward(): a reentrant backward
    (torch.utils.checkpoint's default) runs its graph's callbacks there, before the outer
    backward has reached the params outside the checkpointed part. CPU autograd runs each
    backward on the thread that called it, so both calls' Python frames are on this stack."""
    code, depth, frame = torch.autograd.backward.__code__, 0, sys._getframe()
    while frame is not None:
        depth += frame.f_code is code
        frame = frame.f_back
    return depth >= 2


class DistributedDataParallel(torch.nn.Module):
    """Wraps `module` (any torch.nn.Module with CPU params) for data-parallel training.

    An ``nn.Module`` as ``torch.nn.parallel.DistributedDataParallel``: ``forward`` calls the
    wrapped ``self.module``, so ``parameters()``, ``state_dict()`` (keys ``module.<name>``),
    ``train()`` / ``eval()`` behave as torch DDP's. With ``broadcast_buffers`` rank 0's module
    buffers (BatchNorm running statistics) are copied to every rank at the start of each forward.

    After a backward outside ``no_sync()`` the grads are reduced (end of backward, as torch DDP)
    and, with ``expose_grads``, every param's ``.grad`` is a view of the reduced (averaged)
    gradient in the grad buffer: torch tools that read or scale ``.grad`` in place
    (``clip_grad_norm_``, logging) see torch DDP's values and their edits reach the update.
    ``find_unused_parameters=True`` counts params that backward did not reach as ready with a
    zero grad (their buckets are reduced at the end of backward instead of during it).

    Every trainable param's storage becomes a view of the C++ param buffer (zero copy; the
    module's original storage is released) and ``param.main_grad`` a view of the grad buffer.
    A hook on each param's gradient accumulator adds ``param.grad`` into ``main_grad``, drops
    ``param.grad`` (until the sync makes it the buffer's view) and marks the param ready; a
    bucket's reduce-scatter (or all-reduce) is dispatched as soon as its last grad is ready (with
    ``overlap_grad_reduce``). ``overlap_grad_reduce`` / ``overlap_param_gather`` default to None:
    on only when the node has a spare core per rank for communication (``overlap_pays``).

    With ``overlap_param_gather``, step() returns while the updated params are still being
    all-gathered; each param's first read afterwards (by any module or code: weight tying,
    functional calls, ``nn.MultiheadAttention``'s ``out_proj``) waits for its own gather, and the
    end of the module's forward waits for the rest.

    Params on the meta device are materialised as zeros in the buffer (initialise them after
    wrapping): a model built on "meta" never holds a second copy of its weights.

    The buffer layout depends on the optimizer, so `optimizer` names the kind the optimizer will
    be (one of ``shardwise.torch.optimizer.KINDS``; ``make_optimizer`` builds that kind and
    refuses another). Left out, the buffers start laid out for the default kind and the first
    ``sw.AdamW`` / ``sw.Muon`` attached before training re-lays them for its own (``relayout``).
    Rank 0's initial values are broadcast to every rank.

    torch DDP's arguments are accepted: ``device_ids`` / ``output_device`` None or the CPU,
    ``process_group`` None or the whole world of torch.distributed (which must be this MPI job:
    launch with mpirun), ``bucket_cap_mb`` sets the bucket size (MiB of fp32 grads), ``dim``,
    ``check_reduction``, ``gradient_as_bucket_view`` and ``static_graph`` change nothing.

    ``reproducible_reduction=True`` (``ddp.reproducible_reduction``, docs/reproducible_reduction.md)
    sums the grads of every micro-batch of the global batch in one fixed tree and divides by
    their count, so the losses and weights are bit-identical at every power-of-two dp for the same
    global batch and micro-batch size (dp=1 runs the micro-batches of the others under
    ``no_sync()``). The micro-batch grads are averaged: do not divide the loss by the number of
    accumulated micro-batches. Needs ``grad_reduce_in_fp32``; nothing overlaps backward.

    ``symmetric_buffers=True`` (``ddp.symmetric_buffers``, docs/collectives.md) allocates the
    param and grad buffers in shared memory that every rank of the node maps, so the bucket
    reduce-scatters, all-reduces and param all-gathers read the peers' buckets in place instead
    of copying them through a staging segment (same results, bit for bit). It falls back to
    private memory, with a warning, where that cannot be mapped (ranks on several nodes, a small
    ``/dev/shm``); ``False`` always uses private memory.

    `comm_timeout` (seconds) is the collective watchdog of the job's groups, as ``shardwise train
    --comm-timeout``: a collective that has not completed by then (a rank stopped or gone)
    prints what it waited for and aborts every rank with exit code 3.

    Constructing it starts MPI if nobody has. In a job of more than one rank it also installs
    ``shardwise.torch.install_abort_on_error`` (an uncaught exception on one rank aborts them
    all instead of leaving the others waiting in a collective); ``abort_job_on_error=False``
    leaves ``sys.excepthook`` alone.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, *, init_sync=True,
                 bucket_size=None, overlap_grad_reduce=None, overlap_param_gather=None,
                 grad_reduce_in_fp32=True, optimizer=None, all_layer_wise=False,
                 comm_timeout=600.0, abort_job_on_error=True, expose_grads=True,
                 reproducible_reduction=False, symmetric_buffers=True):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"DistributedDataParallel wraps a torch.nn.Module, got "
                            f"{type(module).__name__}")
        # torch DDP's arguments: dim (input scattering over several devices), check_reduction
        # (deprecated), gradient_as_bucket_view (our .grad are always views of the grad buffer)
        # and static_graph (a hint) change nothing here.
        del dim, check_reduction, gradient_as_bucket_view, static_graph
        _arguments.check_devices(device_ids, output_device)
        if not init_sync:
            raise ValueError("DistributedDataParallel: init_sync=False is not supported (rank "
                             "0's params are always broadcast)")
        bucket_size = _arguments.bucket_size_from(bucket_cap_mb, bucket_size)
        _arguments.check_optimizer_kind(optimizer)
        rank, world_size = _core.init_mpi()
        _arguments.check_process_group(process_group, world_size, rank)
        super().__init__()
        if abort_job_on_error:
            from . import install_abort_on_error
            install_abort_on_error()
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.expose_grads = bool(expose_grads)
        if overlap_grad_reduce is None or overlap_param_gather is None:
            pays = overlap_pays(_core.init_mpi()[1])
            overlap_grad_reduce = pays if overlap_grad_reduce is None else overlap_grad_reduce
            overlap_param_gather = pays if overlap_param_gather is None else overlap_param_gather
        self._options = dict(bucket_size=bucket_size, overlap_grad_reduce=overlap_grad_reduce,
                             overlap_param_gather=overlap_param_gather,
                             grad_reduce_in_fp32=grad_reduce_in_fp32,
                             all_layer_wise=all_layer_wise, comm_timeout=float(comm_timeout),
                             reproducible_reduction=bool(reproducible_reduction),
                             symmetric_buffers=bool(symmetric_buffers))
        self._params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not self._params:
            raise ValueError("DistributedDataParallel: the module has no trainable parameters")
        check_params(self._params)
        check_no_sparse_grads(module)
        embedding_ids = {id(m.weight) for m in module.modules()
                         if isinstance(m, torch.nn.Embedding)}
        self._infos = [_layout.param_info(p, i, name=n, embedding_or_output=id(p) in embedding_ids)
                       for i, (n, p) in enumerate(self._params)]
        self._ready_count = 0
        self._ready = [False] * len(self._params)
        # which params this rank's backwards reached since the last sync (every mode), which had
        # no .grad when the step began, and which no rank used in the last sync
        self._used = [False] * len(self._params)
        self._grad_was_none = [True] * len(self._params)
        self._unused_everywhere = set()
        self._in_backward = False
        self._end_deferred = False  # a reentrant backward ended first: the outer one ends it
        self._synced = False  # the grad buffer holds reduced grads that no zero_grad cleared
        self._gathered = False  # ... in the whole buffer, not only in this rank's shards
        self._backward_error = None
        self._grad_accumulators = []
        # 16-bit params over an fp32 grad buffer: index -> (the .grad copy the last sync exposed,
        # its value then), to write back an edit (clip_grad_norm_) before the step
        self._grad_copies = {}
        self._module_hook_handles = []
        self.engine = None
        self._stepped = False  # an optimizer step ran: the layout is final
        self._buffers_need_sync = True  # torch DDP's require_forward_param_sync
        # Without an explicit kind the first sw optimizer may re-lay the buffers for its own.
        self.kind_is_explicit = optimizer is not None
        self._build(_DEFAULT_KIND if optimizer is None else optimizer)
        self._sync_module_states()
        self._register_grad_hooks()
        # 16-bit params: the optimizer steps fp32 copies taken when it was built, so it re-reads
        # the params before its first step (initialised after wrapping) and after every
        # load_state_dict of the module (a write it cannot see otherwise: reload_model_params).
        self._params_written = True
        self._param_versions = None  # the params' version counters when last in sync
        self.module.register_load_state_dict_post_hook(
            _WrapperHook(self, "_note_params_loaded", with_args=True))
        # Lets sw.AdamW / sw.Muon find the DDP from module.parameters() (weakly: no cycle).
        for _, p in self._params:
            p._shardwise_ddp = _WrapperRef(self)
        self._bind_pending_optimizer()

    # --- construction -------------------------------------------------------------------
    def _build(self, kind):
        # Before the engine's own collectives: ranks wrapping with other arguments would pair
        # mismatched collectives (MPI_ERR_TRUNCATE) or wait out the watchdog.
        check_same_settings_on_all_ranks(dict(
            self._options, optimizer=kind, broadcast_buffers=self.broadcast_buffers,
            find_unused_parameters=self.find_unused_parameters, expose_grads=self.expose_grads))
        options = _core.EngineOptions()
        options.kind = kind
        options.bucket_size = self._options["bucket_size"]
        options.overlap_grad_reduce = bool(self._options["overlap_grad_reduce"])
        options.overlap_param_gather = bool(self._options["overlap_param_gather"])
        options.grad_reduce_in_fp32 = bool(self._options["grad_reduce_in_fp32"])
        options.all_layer_wise = bool(self._options["all_layer_wise"])
        options.comm_timeout = self._options["comm_timeout"]
        options.reproducible_reduction = self._options["reproducible_reduction"]
        options.symmetric_buffers = self._options["symmetric_buffers"]
        engine = _core.Engine(self._infos, options)
        self._ptrs = []
        self._materialized = {}  # id of a meta param -> the CPU param that replaced it
        with torch.no_grad():
            for i, (name, p) in enumerate(self._params):
                value = tensor_over(engine.param_array(i), p.dtype)
                if p.device.type == "meta":
                    meta, p = p, materialize(self.module, p, value)
                    self._materialized[id(meta)] = p
                    self._params[i] = (name, p)
                else:
                    value.copy_(p.detach())
                    p.data = value  # the param now lives in the buffer; its old storage is freed
                p.main_grad = tensor_over(engine.grad_array(i))
                self._ptrs.append(p.data_ptr())
        self.engine = engine
        engine.broadcast_params_from_rank0()
        self._install_read_guard()

    def _note_params_loaded(self, module, incompatible_keys):
        del module, incompatible_keys
        self._params_written = True

    def _versions(self):
        return [p._version for _, p in self._params]

    def note_params_in_sync(self):
        """Called when the engine's fp32 copies and the params agree (after a step, a checkpoint
        load): the engine writes params without torch seeing it, so the version counters now
        are the baseline for params_edited_since_step."""
        self._param_versions = self._versions()

    def params_edited_since_step(self):
        """Whether a torch op wrote into a param since the last step (``p.mul_()``,
        ``p.copy_()`` under no_grad: its version counter moved). A write through ``p.data``
        keeps the counter: announce those with the optimizer's reload_model_params()."""
        return self._param_versions is not None and self._versions() != self._param_versions

    def training_started(self):
        """Whether a backward or an optimizer step has run (the buffers hold grads or state)."""
        return bool(self._stepped or self._ready_count or self._synced or self._in_backward
                    or self.engine.has_optimizer())

    def relayout(self, kind):
        """Lays the buffers out for optimizer `kind`, keeping every param's value. For an
        optimizer that attaches before training; afterwards (grads or optimizer state in the
        buffers) a RuntimeError."""
        if kind == self.kind:
            return
        if self.training_started():
            raise RuntimeError(f"DistributedDataParallel: cannot re-lay the buffers from "
                               f"'{self.kind}' to '{kind}' once training started; wrap with "
                               f"DistributedDataParallel(..., optimizer='{kind}')")
        for _, p in self._params:
            p.grad = None
        # _build copies each param's value out of the old buffers, which live until it ends.
        self._build(kind)

    def _bind_pending_optimizer(self):
        """An sw optimizer built on these params before they were wrapped attaches now."""
        for _, p in self._params:
            ref = getattr(p, "_shardwise_pending_optimizer", None)
            pending = ref() if ref is not None else None
            if pending is not None and pending.ddp is None:
                # Built on meta params, it holds the tensors the wrapper replaced: the new ones
                # take their places in its groups.
                for group in pending.param_groups:
                    group["params"] = [self._materialized.get(id(q), q) for q in group["params"]]
                pending.bind(self)
                return

    def _register_grad_hooks(self):
        for i, (_, p) in enumerate(self._params):
            # The AccumulateGrad node of p: its hook runs once p.grad holds this backward's grad.
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_grad_hook(i, p))
            self._grad_accumulators.append(accumulator)

    def _make_grad_hook(self, index, param):
        def hook(*_):
            if self._backward_error is not None:
                param.grad = None  # this backward already failed; the error ends it
                return
            if not self._in_backward:
                try:
                    self._start_backward(param)
                except Exception as error:
                    param.grad = None
                    self._defer_backward_error(error)
                    return
            elif self._end_deferred:  # the outer backward of a reentrant one: its end is ours
                self._end_deferred = False
                torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
            grad = param.grad
            # A .grad that is the buffer's view (exposed by the last sync) was accumulated into
            # in place by autograd, as torch DDP's grads are.
            if grad is not None and grad.data_ptr() != param.main_grad.data_ptr():
                param.main_grad.add_(grad)
                param.grad = None
            self._ready_count += 1
            self._ready[index] = True
            try:
                self.engine.register_grad_ready(index)
            except Exception as error:
                self._defer_backward_error(error)
        return hook

    def _defer_backward_error(self, error):
        """An error inside a grad hook, re-raised by backward() once the graph is done. Raised
        inside autograd, the exception would leave the rest of the graph in the thread's ready
        queue; at exit its tensors are freed after Python is gone, which hangs the process."""
        self._backward_error = error
        torch.autograd.Variable._execution_engine.queue_callback(self._raise_backward_error)

    def _start_backward(self, first):
        """The first grad hook of a backward: decides what the buffer's contents mean."""
        self._in_backward = True
        self._ready = [False] * len(self._params)
        if self.find_unused_parameters and not any(self._used):
            self._grad_was_none = [p.grad is None or p is first for _, p in self._params]
        torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
        if not self._synced:
            return
        self._synced = False
        if self._grad_copies:
            self._settle_grad_copies(first)
        others_hold_grads = any(p.grad is not None for _, p in self._params if p is not first)
        if not self.expose_grads or others_hold_grads:
            # A repeated backward without zero_grad: torch DDP reduces the sum of the reduced
            # grads and this backward's, which needs the whole buffer to hold the reduced grads.
            if not self._gathered:
                self.engine.gather_reduced_grads()
        else:  # the grads were dropped (a torch optimizer's zero_grad): start from zero
            self.engine.zero_grad_buffer()

    def _settle_grad_copies(self, first):
        """A backward after a sync that no zero_grad of ours followed, with 16-bit .grad copies
        exposed: a torch optimizer's zero_grad(set_to_none=False) zeroed them in place (then
        the buffer is zeroed for them too and this backward starts from zero, as torch's), or
        nothing cleared them: accumulating onto copies is not supported, a clear error."""
        copies, self._grad_copies = self._grad_copies, {}
        others = [(i, copy) for i, (copy, _) in copies.items() if self._params[i][1] is not first]
        if any(copy.any() for _, copy in others):
            name = self._params[others[0][0]][0]
            raise RuntimeError(
                f"backward() onto the .grad of 16-bit param '{name}' that the last grad sync "
                f"exposed: with 16-bit params and an fp32 grad buffer .grad is a copy, so a "
                f"second backward cannot add to it; call zero_grad() between the two, or "
                f"accumulate inside no_sync()")
        for i in copies:
            _, p = self._params[i]
            p.main_grad.zero_()
            if p is not first:
                p.grad = None

    def take_grads_set_since_sync(self):
        """Before a step, once the sync exposed .grad: the engine steps what torch.optim would
        read. A .grad replaced by another tensor (``p.grad = p.grad * 0``) is copied into the
        buffer, as is a 16-bit param's .grad copy edited in place (clip_grad_norm_); a .grad
        set to None skips its param this step. Returns the names of the skipped params."""
        if not (self.expose_grads and self._gathered):
            return []
        dropped = []
        for i, (name, p) in enumerate(self._params):
            grad, copy = p.grad, self._grad_copies.get(i)
            if grad is None:
                dropped.append(name)
            elif copy is not None and grad is copy[0]:
                if not torch.equal(grad, copy[1]):
                    p.main_grad.copy_(grad)
            elif grad.data_ptr() != p.main_grad.data_ptr():
                p.main_grad.copy_(grad)
        return dropped

    def _end_backward(self):
        if not all(self._ready) and _inside_an_enclosing_backward():
            # A reentrant backward (torch.utils.checkpoint's default) ran the callback queued
            # by its first grad hook; the outer backward has params still to reach.
            self._end_deferred = True
            return
        self._end_deferred = False
        self._in_backward = False
        self._used = [u or r for u, r in zip(self._used, self._ready)]
        if self._backward_error is not None:
            return
        if not self.engine.is_last_microbatch():
            if self._options["reproducible_reduction"]:
                self.engine.close_microbatch()  # a leaf of the fixed summation tree
            return
        if self.find_unused_parameters:
            # Params the backward did not reach: ready with the zero grad they hold.
            for i, ready in enumerate(self._ready):
                if not ready:
                    self.engine.register_grad_ready(i)
        self.finish_grad_sync()
        if self.find_unused_parameters:
            # After the sync: the buckets' collectives must be issued in the same order on
            # every rank, and this rank's unused params only completed their buckets above.
            self._find_unused_everywhere()
        else:
            self._refuse_unused_params()

    def _refuse_unused_params(self):
        """Without find_unused_parameters, a param that no backward since the last sync reached
        is an error, as in torch DDP: the step would otherwise move it (weight decay, moments) with
        a zero grad where torch's optimizers skip a param whose .grad is None. Raised after the
        sync, so every rank has issued the same collectives whatever it used."""
        unused = [name for (name, _), used in zip(self._params, self._used) if not used]
        self._used = [False] * len(self._params)
        if unused:
            self.check_unchanged()  # a param replaced or frozen after wrapping: say that instead
            shown = ", ".join(f"'{n}'" for n in unused[:8])
            more = f" and {len(unused) - 8} more" if len(unused) > 8 else ""
            raise RuntimeError(
                f"DistributedDataParallel: {len(unused)} parameter(s) received no gradient in this "
                f"iteration: {shown}{more}. As with torch DDP, every trainable param must take "
                f"part in producing the loss unless the wrapper is built with "
                f"find_unused_parameters=True (then a param no rank used keeps .grad None and the "
                f"step skips it); or freeze it (requires_grad=False) before wrapping")

    def _find_unused_everywhere(self):
        """Params no rank's backward reached since the last sync (one small all-reduce). As in
        torch DDP, their .grad stays what it was (None after zero_grad) and an optimizer step
        leaves them alone (torch's optimizers skip a None grad; see params_without_grad)."""
        counts = self.engine.ranks_using(self._used)
        self._unused_everywhere = {i for i, c in enumerate(counts) if c == 0}
        self._used = [False] * len(self._params)
        for i in self._unused_everywhere:
            if self._grad_was_none[i]:
                self._params[i][1].grad = None

    def params_without_grad(self):
        """Names of the params the coming step must skip: unused by every rank in the last
        synced backward (find_unused_parameters) and without a .grad, as torch's optimizers
        skip them (value, state and step count unchanged)."""
        return [self._params[i][0] for i in sorted(self._unused_everywhere)
                if self._params[i][1].grad is None]

    def _raise_backward_error(self):
        self._in_backward = False
        error, self._backward_error = self._backward_error, None
        raise error

    def _install_read_guard(self):
        for handle in self._module_hook_handles:
            handle.remove()
        self._module_hook_handles = []
        ranges = []
        if self.engine.overlap_param_gather():
            for i, (_, p) in enumerate(self._params):
                start = p.data_ptr()
                ranges.append((start, start + p.numel() * p.element_size(),
                               self.engine.bucket_group_of(i)))
        self._read_guard = ParamReadGuard(ranges, self.engine.finish_param_sync)
        # After forward nothing may still be in flight: code after it (a loss on a tied head,
        # logging) reads params too, and backward must not race a gather.
        self._module_hook_handles.append(self.module.register_forward_hook(
            _WrapperHook(self, "finish_param_sync")))
        self._module_hook_handles.append(self.module._register_state_dict_hook(
            _WrapperHook(self, "finish_param_sync")))

    def _params_gathering(self):
        """Called once step() has dispatched the param all-gathers (overlap_param_gather)."""
        if self.engine.overlap_param_gather():
            self._read_guard.arm(range(self.engine.num_bucket_groups()))

    # --- training-loop API ---------------------------------------------------------------
    def end_deferred_backward(self):
        """Ends a backward whose end a reentrant backward deferred and which reached no param
        after it (so its own end was never queued): before the next forward or step."""
        if self._end_deferred:
            self._end_backward()  # outside autograd now: it ends

    def forward(self, *args, **kwargs):
        self.end_deferred_backward()
        # As torch DDP: the buffers are broadcast before a forward that follows a forward run
        # with grad enabled outside no_sync() (or the first one), so an evaluation under
        # torch.no_grad() is not followed by a broadcast and no_sync() micro-batches keep theirs.
        if (self._buffers_need_sync and self.broadcast_buffers
                and self.engine.dp_size > 1):
            self._broadcast_module_buffers()
        output = self.module(*args, **kwargs)
        self._buffers_need_sync = torch.is_grad_enabled() and self.engine.is_last_microbatch()
        return output

    def _broadcast_module_buffers(self):
        """Rank 0's buffers to every rank."""
        broadcast_from_rank0(self.engine, list(self.module.buffers()))

    def _sync_module_states(self):
        """At construction, as torch DDP: rank 0's frozen params and buffers to every rank (the
        trainable params were broadcast with the engine's buffer), whatever broadcast_buffers."""
        if self.engine.dp_size > 1:
            frozen = [p for p in self.module.parameters() if not p.requires_grad]
            states = frozen + list(self.module.buffers())
            check_same_tensors_on_all_ranks(self.engine, states, "the module's buffers and "
                                            "frozen params")
            broadcast_from_rank0(self.engine, states)

    @property
    def kind(self):
        return self.engine.kind

    @property
    def layout(self):
        """The FullParamLayout of the buffers, keyed by this module's params."""
        return _layout.from_engine(self.engine.layout(), [p for _, p in self._params])

    def zero_grad_buffer(self, set_to_none=True):
        """Zeros the grad buffer and forgets which grads are ready (call once per iteration).
        With ``set_to_none=False`` a ``.grad`` that views the buffer stays, reading zeros."""
        for _, p in self._params:
            if set_to_none or p.grad is None or p.grad.data_ptr() != p.main_grad.data_ptr():
                p.grad = None
        self.engine.zero_grad_buffer()
        self._grad_copies = {}
        self._used = [False] * len(self._params)
        self._ready_count = 0
        self._synced = False
        self._gathered = False
        self._in_backward = False
        self._end_deferred = False
        self._backward_error = None

    def zero_grad(self, set_to_none=SET_TO_NONE_DEFAULT):
        self.zero_grad_buffer(set_to_none)

    def finish_grad_sync(self):
        """Reduces the grads (a no-op when this backward's sync has run) and, with
        expose_grads, makes every param's .grad a view of its reduced gradient."""
        if not self.engine.is_last_microbatch():
            raise RuntimeError("finish_grad_sync() called inside no_sync(): only the last "
                               "micro-batch syncs")
        if not self._synced:
            self.engine.finish_grad_sync()
            self._synced, self._gathered = True, False
        if self.expose_grads and not self._gathered:
            self.engine.gather_reduced_grads()
            self._gathered = True
            for i, (_, p) in enumerate(self._params):
                if p.main_grad.dtype == p.dtype:
                    p.grad = p.main_grad
                else:  # a view of another dtype cannot be a .grad: the rounded value instead
                    copy = p.main_grad.to(p.dtype)
                    p.grad = copy
                    self._grad_copies[i] = (copy, copy.clone())

    def finish_param_sync(self):
        """Waits for every in-flight param all-gather. Not needed for correctness (a read of a
        param waits for its own gather); it ends the overlap early, before a long read-out."""
        self.engine.finish_all_param_sync()
        self._read_guard.pending.clear()
        self._read_guard.disarm()

    @contextlib.contextmanager
    def no_sync(self):
        """Grad accumulation: grads of backward passes inside accumulate without any reduce."""
        previous = self.engine.is_last_microbatch()
        self.engine.set_is_last_microbatch(False)
        try:
            yield
        finally:
            self.engine.set_is_last_microbatch(previous)

    def check_unchanged(self):
        """ValueError naming the param when the module's params changed after wrapping."""
        current = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        wrapped = {n for n, _ in self._params}
        for n, _ in current:
            if n not in wrapped:
                raise ValueError(f"param '{n}' was added to the module after it was wrapped by "
                                 f"shardwise DistributedDataParallel; wrap the final module")
        present = {n for n, _ in current}
        for n, _ in self._params:
            if n not in present:
                raise ValueError(f"param '{n}' was removed from the module (or frozen) after it "
                                 f"was wrapped by shardwise DistributedDataParallel")
        for (n, p), (n0, p0), ptr in zip(current, self._params, self._ptrs):
            if p is not p0:
                raise ValueError(f"param '{n}' was replaced by a new tensor after wrapping; the "
                                 f"optimizer only updates the wrapped one")
            if p.data_ptr() != ptr or p.device.type != "cpu":
                raise ValueError(f"param '{n}' no longer lives in the shardwise param buffer "
                                 f"(its .data was reassigned or moved after wrapping)")
