"""``gradviz.autograd``: custom Functions, ``backward``/``grad`` and grad modes, as in
``torch.autograd``."""

from . import anomaly_mode, function, grad_mode, graph
from . import forward_ad
from . import functional, variable
from ._functional import backward, grad
from .anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                           set_detect_anomaly)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .function import Function, FunctionCtx, NestedIOFunction, once_differentiable
from .variable import Variable
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)

__all__ = [
    "Function", "FunctionCtx", "NestedIOFunction", "once_differentiable", "backward", "grad",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled",
    "forward_ad", "function", "functional", "grad_mode", "graph", "anomaly_mode", "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "gradcheck", "gradgradcheck",
    "GradcheckError", "Variable", "variable",
]
