"""ParamReadGuard: no param is read before its all-gather is complete, whoever reads it.

With overlap_param_gather, step() returns while the updated params are still being all-gathered
into the param buffer, bucket group by bucket group. A per-module forward pre-hook is not enough
to wait for them: a module may read a child's params without calling the child
(``nn.MultiheadAttention`` passes ``out_proj.weight`` to a functional call), and any code may read
a param directly (weight tying, functional models, logging). So while gathers are in flight, a
torch function mode is pushed: every torch call that receives a param whose group is still pending
waits for that group first. A tensor counts as a param when its memory lies in a param's range
of the buffer, so views and aliases made before the step (``p.detach()``, ``p.data``) are
covered too. Calls that only look at a param's metadata (shape, dtype, ``.grad``)
do not wait, so the gathers still overlap with everything up to each param's first use.
"""

import bisect

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode


def _metadata_functions():
    # Reading or setting these neither reads the param's values nor creates an alias of them.
    properties = ("shape", "dtype", "device", "requires_grad", "grad", "grad_fn", "is_leaf",
                  "ndim", "is_sparse", "layout", "is_cuda", "is_meta", "is_quantized",
                  "is_nested", "is_mkldnn", "output_nr", "retains_grad", "_version")
    methods = ("size", "dim", "numel", "nelement", "stride", "data_ptr", "is_contiguous",
               "element_size", "storage_offset", "is_floating_point", "is_complex",
               "get_device", "requires_grad_", "register_hook")
    tensor_base = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase  # 2.x / 1.x name
    found = set()
    for name in properties:
        descriptor = tensor_base.__dict__.get(name)
        for accessor in ("__get__", "__set__"):
            if hasattr(descriptor, accessor):
                found.add(getattr(descriptor, accessor))
    for name in methods:
        if hasattr(torch.Tensor, name):
            found.add(getattr(torch.Tensor, name))
    return frozenset(found)


_METADATA_FUNCTIONS = _metadata_functions()


def _tensors_in(args, kwargs):
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


class ParamReadGuard(TorchFunctionMode):
    """Waits for the pending bucket group of each param a torch call receives.

    `ranges`: (start address, end address, bucket group) of every param's memory;
    `wait(group)` finishes that group's all-gather. Pushed by `arm(groups)` when gathers start,
    popped by `disarm()` once every one is waited for.
    """

    def __init__(self, ranges, wait):
        super().__init__()
        ranges = sorted(r for r in ranges if r[1] > r[0])
        self._starts = [r[0] for r in ranges]
        self._ranges = ranges
        self._wait = wait
        self.pending = set()
        self._pushed = False

    def _group_at(self, address):
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and address < self._ranges[i][1]:
            return self._ranges[i][2]
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.pending and func not in _METADATA_FUNCTIONS:
            for t in _tensors_in(args, kwargs):
                try:
                    address = t.data_ptr()
                except RuntimeError:  # no storage (sparse, nested): not a view of a param
                    continue
                group = self._group_at(address)
                if group in self.pending:
                    self._wait_through(group)
        return func(*args, **kwargs)

    def _wait_through(self, group):
        # Every rank must issue the gathers in the same order (each finish dispatches the next
        # one), whatever it reads first: wait for the groups in forward order (groups are
        # indexed in backprop order) up to and including `group`.
        for g in sorted((g for g in self.pending if g >= group), reverse=True):
            self.pending.discard(g)
            self._wait(g)

    def arm(self, groups):
        """Marks `groups` as being gathered and starts watching param reads."""
        self.pending.update(groups)
        if self.pending and not self._pushed:
            self.__enter__()
            self._pushed = True

    def disarm(self):
        """Stops watching once nothing is pending. The mode can only leave the stack from its
        top: under a mode pushed later it stays (as a pass-through) until a later disarm()."""
        if self.pending or not self._pushed:
            return
        if _get_current_function_mode() is self:
            self.__exit__(None, None, None)
            self._pushed = False
