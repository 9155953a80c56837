"""shardwise: Megatron-style distributed-optimizer machinery (C++ engine) for Python.

- ``shardwise.layout``: ``compute_full_param_layout`` with Megatron's layout objects.
- ``shardwise.mxfp8``: MXFP8 ``quantize`` / ``dequantize``, bit-exact with the C++ codec.
- ``shardwise.newton_schulz``: Muon's orthogonalisation of a 2-D matrix.
- ``shardwise.torch`` (import explicitly): train a torch.nn.Module on the engine's DDP buffers
  and optimizers over MPI.
"""

from . import _core  # noqa: F401  (loads the extension: fails early when it is missing)
from ._core import Error

__version__ = "0.1.0"

__all__ = ["Error", "layout", "mxfp8", "newton_schulz"]


def __getattr__(name):
    # Submodules load on first use so `import shardwise` stays cheap (no torch import).
    if name in ("layout", "mxfp8"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name == "newton_schulz":
        from ._newton_schulz import newton_schulz
        return newton_schulz
    raise AttributeError(f"module 'shardwise' has no attribute '{name}'")
