"""``gradviz.nn``: ``Parameter``, ``Module``, the common layers, containers and losses,
``functional``, ``init`` and ``utils``.

Layers and losses record the backward nodes PyTorch records (``AddmmBackward0`` for a
``Linear``, ``MseLossBackward0``, ``NllLossBackward0``, ...; see :mod:`gradviz.nn.functional`).
"""

from . import functional, init, utils
from ._layers import (ELU, GELU, Dropout, Flatten, Identity, LeakyReLU, Linear, LogSoftmax,
                      ModuleDict, ModuleList, ReLU, Sequential, Sigmoid, SiLU, Softmax, Softplus,
                      Tanh, Unflatten)
from ._loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss,
                    NLLLoss, SmoothL1Loss)
from ._module import Module, Parameter
from ._normalization import BatchNorm1d, Embedding, LayerNorm

__all__ = ["functional", "init", "utils", "Parameter", "Module", "Identity", "Linear", "ReLU",
           "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "LeakyReLU", "ELU", "GELU", "SiLU",
           "Softplus", "Flatten", "Unflatten", "Dropout", "Sequential", "ModuleList", "ModuleDict",
           "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "NLLLoss", "CrossEntropyLoss", "Embedding", "LayerNorm", "BatchNorm1d"]
