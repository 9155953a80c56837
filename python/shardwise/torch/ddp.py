"""shardwise.torch.DistributedDataParallel: a torch module's params as views of the engine's
contiguous param buffer, its grads accumulated into the grad buffer, buckets reduced as they fill.
"""

import contextlib
import weakref

import torch

from .. import _core
from .. import layout as _layout
from ._param_read_guard import ParamReadGuard
from ._tensors import check_params, materialize, tensor_over

_DEFAULT_KIND = _core.optimizer_defaults()["kind"]  # the optimizer spec's default


class DistributedDataParallel:
    """Wraps `module` (any torch.nn.Module with CPU params) for data-parallel training.

    Every trainable param's storage becomes a view of the C++ param buffer (zero copy; the
    module's original storage is released) and ``param.main_grad`` a view of the grad buffer.
    A hook on each param's gradient accumulator adds ``param.grad`` into ``main_grad``, drops
    ``param.grad`` and marks the param ready; a bucket's reduce-scatter (or all-reduce) is
    dispatched as soon as its last grad is ready (with ``overlap_grad_reduce``).

    With ``overlap_param_gather``, step() returns while the updated params are still being
    all-gathered; each param's first read afterwards (by any module or code: weight tying,
    functional calls, ``nn.MultiheadAttention``'s ``out_proj``) waits for its own gather, and the
    end of the module's forward waits for the rest.

    Params on the meta device are materialised as zeros in the buffer (initialise them after
    wrapping): a model built on "meta" never holds a second copy of its weights.

    The buffer layout depends on the optimizer, so `optimizer` names the kind the optimizer will
    be (one of ``shardwise.torch.optimizer.KINDS``; ``make_optimizer`` builds that kind and
    refuses another). Rank 0's initial values are broadcast to every rank.

    `comm_timeout` (seconds) is the collective watchdog of the job's groups, as ``shardwise train
    --comm-timeout``: a collective that has not completed by then (a rank stopped or gone)
    prints what it waited for and aborts every rank with exit code 3.

    Constructing it starts MPI if nobody has. In a job of more than one rank it also installs
    ``shardwise.torch.install_abort_on_error`` (an uncaught exception on one rank aborts them
    all instead of leaving the others waiting in a collective); ``abort_job_on_error=False``
    leaves ``sys.excepthook`` alone.
    """

    def __init__(self, module, bucket_size=None, overlap_grad_reduce=True,
                 overlap_param_gather=True, grad_reduce_in_fp32=True, optimizer=_DEFAULT_KIND,
                 all_layer_wise=False, comm_timeout=600.0, abort_job_on_error=True):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"DistributedDataParallel wraps a torch.nn.Module, got "
                            f"{type(module).__name__}")
        if abort_job_on_error:
            from . import install_abort_on_error
            install_abort_on_error()
        self.module = module
        self._options = dict(bucket_size=bucket_size, overlap_grad_reduce=overlap_grad_reduce,
                             overlap_param_gather=overlap_param_gather,
                             grad_reduce_in_fp32=grad_reduce_in_fp32,
                             all_layer_wise=all_layer_wise, comm_timeout=float(comm_timeout))
        self._params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not self._params:
            raise ValueError("DistributedDataParallel: the module has no trainable parameters")
        check_params(self._params)
        embedding_ids = {id(m.weight) for m in module.modules()
                         if isinstance(m, torch.nn.Embedding)}
        self._infos = [_layout.param_info(p, i, name=n, embedding_or_output=id(p) in embedding_ids)
                       for i, (n, p) in enumerate(self._params)]
        self._ready_count = 0
        self._backward_error = None
        self._grad_accumulators = []
        self._forward_hooks = []
        self.engine = None
        self._build(optimizer)
        self._register_grad_hooks()
        # Lets sw.AdamW / sw.Muon find the DDP from module.parameters() (weakly: no cycle).
        for _, p in self._params:
            p._shardwise_ddp = weakref.ref(self)

    # --- construction -------------------------------------------------------------------
    def _build(self, kind):
        options = _core.EngineOptions()
        options.kind = kind
        options.bucket_size = self._options["bucket_size"]
        options.overlap_grad_reduce = bool(self._options["overlap_grad_reduce"])
        options.overlap_param_gather = bool(self._options["overlap_param_gather"])
        options.grad_reduce_in_fp32 = bool(self._options["grad_reduce_in_fp32"])
        options.all_layer_wise = bool(self._options["all_layer_wise"])
        options.comm_timeout = self._options["comm_timeout"]
        engine = _core.Engine(self._infos, options)
        self._ptrs = []
        with torch.no_grad():
            for i, (name, p) in enumerate(self._params):
                value = tensor_over(engine.param_array(i), p.dtype)
                if p.device.type == "meta":
                    p = materialize(self.module, p, value)
                    self._params[i] = (name, p)
                else:
                    value.copy_(p.detach())
                    p.data = value  # the param now lives in the buffer; its old storage is freed
                p.main_grad = tensor_over(engine.grad_array(i))
                self._ptrs.append(p.data_ptr())
        self.engine = engine
        engine.broadcast_params_from_rank0()
        self._install_read_guard()

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
            if param.grad is not None:
                param.main_grad.add_(param.grad)
                param.grad = None
            self._ready_count += 1
            try:
                self.engine.register_grad_ready(index)
            except Exception as error:  # re-raised at the end of backward
                # Raised here, inside autograd, the exception would leave the rest of the graph
                # in the thread's ready queue; at exit its tensors are freed after Python is
                # gone, which hangs the process. backward() raises it once the graph is done.
                self._backward_error = error
                torch.autograd.Variable._execution_engine.queue_callback(
                    self._raise_backward_error)
        return hook

    def _raise_backward_error(self):
        error, self._backward_error = self._backward_error, None
        raise error

    def _install_read_guard(self):
        for handle in self._forward_hooks:
            handle.remove()
        self._forward_hooks = []
        ranges = []
        if self.engine.overlap_param_gather():
            for i, (_, p) in enumerate(self._params):
                start = p.data_ptr()
                ranges.append((start, start + p.numel() * p.element_size(),
                               self.engine.bucket_group_of(i)))
        self._read_guard = ParamReadGuard(ranges, self.engine.finish_param_sync)
        # After forward nothing may still be in flight: code after it (a loss on a tied head,
        # logging) reads params too, and backward must not race a gather.
        self._forward_hooks.append(self.module.register_forward_hook(
            lambda *_: self.finish_param_sync()))
        self._forward_hooks.append(self.module._register_state_dict_hook(
            lambda *_: self.finish_param_sync()))

    def _params_gathering(self):
        """Called once step() has dispatched the param all-gathers (overlap_param_gather)."""
        if self.engine.overlap_param_gather():
            self._read_guard.arm(range(self.engine.num_bucket_groups()))

    # --- training-loop API ---------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    forward = __call__

    @property
    def kind(self):
        return self.engine.kind

    @property
    def layout(self):
        """The FullParamLayout of the buffers, keyed by this module's params."""
        return _layout.from_engine(self.engine.layout(), [p for _, p in self._params])

    def named_parameters(self):
        return list(self._params)

    def zero_grad_buffer(self):
        """Zeros the grad buffer and forgets which grads are ready (call once per iteration)."""
        for _, p in self._params:
            p.grad = None
        self.engine.zero_grad_buffer()
        self._ready_count = 0
        self._backward_error = None

    def finish_grad_sync(self):
        self.engine.finish_grad_sync()

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
