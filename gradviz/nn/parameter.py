"""``gradviz.nn.parameter``: ``Parameter``, ``Buffer`` and the lazy modules' uninitialised parameters, where
``from torch.nn.parameter import Parameter`` finds them."""

from ._lazy import UninitializedBuffer, UninitializedParameter
from ._module import Buffer, Parameter

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"]
