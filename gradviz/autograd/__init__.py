"""``gradviz.autograd``: custom Functions, ``backward``/``grad`` and grad modes, as in
``torch.autograd``."""

from . import function, grad_mode, graph
from ._functional import backward, grad
from .function import Function, FunctionCtx, NestedIOFunction, once_differentiable
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = [
    "Function", "FunctionCtx", "NestedIOFunction", "once_differentiable", "backward", "grad",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "function", "grad_mode", "graph",
]
