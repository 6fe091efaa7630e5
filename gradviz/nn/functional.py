"""``gradviz.nn.functional``: activations, as ``torch.nn.functional``."""

from ..ops import elu, gelu, leaky_relu, log_softmax, relu, sigmoid, silu, softmax, softplus, tanh

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "softplus", "gelu", "leaky_relu",
           "elu", "silu"]
