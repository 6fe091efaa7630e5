"""``gradviz.nn.parameter``: ``Parameter`` and the lazy modules' uninitialised parameters, where
``from torch.nn.parameter import Parameter`` finds them."""

from ._lazy import UninitializedBuffer, UninitializedParameter
from ._module import Parameter

__all__ = ["Parameter", "UninitializedParameter", "UninitializedBuffer"]
