"""``gradviz.nn``: ``Parameter``, ``Module``, a few layers and losses, and ``functional``.

The layers and losses are built from gradviz's primitive ops, so a loss's backward graph shows
those primitives where PyTorch shows one fused node (see :mod:`gradviz.nn.functional`).
"""

from . import functional
from ._layers import Identity, Linear, ReLU, Sequential, Sigmoid, Tanh
from ._loss import CrossEntropyLoss, MSELoss, NLLLoss
from ._module import Module, Parameter

__all__ = ["functional", "Parameter", "Module", "Identity", "Linear", "ReLU", "Tanh", "Sigmoid",
           "Sequential", "MSELoss", "NLLLoss", "CrossEntropyLoss"]
