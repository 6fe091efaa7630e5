"""``gradviz.nn.modules.activation``: the activation modules, where torch code imports them from
``torch.nn.modules.activation``."""

from .. import (  # noqa: F401  (re-exported)
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    MultiheadAttention,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU", "SELU", "CELU", "GELU", "SiLU",
           "Mish", "Sigmoid", "Tanh", "Softplus", "Softsign", "Softshrink", "Hardshrink",
           "Hardtanh", "Hardsigmoid", "Hardswish", "Tanhshrink", "Threshold", "GLU", "LogSigmoid",
           "Softmax", "Softmin", "LogSoftmax", "Softmax2d", "MultiheadAttention"]
