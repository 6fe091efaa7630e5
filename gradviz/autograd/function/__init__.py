"""``gradviz.autograd.function``: custom ``autograd.Function`` (docs/function_contract.md), as
``torch.autograd.function``.

The package is split by role: ``_function`` (``Function``, ``apply``, output wrapping),
``_ctx`` (the ctx / node and its backward), ``_once`` (``once_differentiable``) and
``_legacy`` (``InplaceFunction``, ``NestedIOFunction``).
"""

from ._ctx import BackwardCFunction, FunctionCtx
from ._function import Function, FunctionMeta
from ._legacy import InplaceFunction, NestedIOFunction
from ._once import DelayedError, once_differentiable

__all__ = [
    "Function", "FunctionCtx", "BackwardCFunction", "FunctionMeta", "once_differentiable",
    "InplaceFunction", "NestedIOFunction", "DelayedError",
]
