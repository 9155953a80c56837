"""shardwise.newton_schulz: Muon's Newton-Schulz orthogonalisation, run by the C++ engine."""

import numpy as np

from . import _core
from ._numbers import whole_number
from ._dtypes import _torch


def newton_schulz(g, steps=5, coefficients="quintic"):
    """Approximate polar factor U V^T of the 2-D matrix g = U S V^T.

    coefficients: "quintic" (five tuned quintics, cycled), "simple" (3.4445, -4.7750, 2.0315)
    or "polar_express". g may be a numpy array or a CPU torch tensor of any float dtype; the
    work is done in fp32 and the result is fp32 of the same kind as g.
    """
    steps = whole_number(steps, "newton_schulz: steps")
    if _torch is not None and isinstance(g, _torch.Tensor):
        if g.device.type != "cpu":
            raise ValueError(f"newton_schulz: tensor on {g.device}; pass a CPU tensor")
        out = _core.newton_schulz(g.detach().to(_torch.float32).contiguous().numpy(), steps,
                                  coefficients)
        return _torch.from_numpy(out)
    return _core.newton_schulz(np.asarray(g, dtype=np.float32), steps, coefficients)
