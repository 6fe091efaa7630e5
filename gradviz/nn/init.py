"""``gradviz.nn.init``: fill a parameter in place (under ``no_grad``), as ``torch.nn.init``.

The random initializers draw from gradviz's generator, so their values differ from torch's;
the deterministic ones (``zeros_``, ``ones_``, ``constant_``, ``eye_``) give the same tensors.
"""

from __future__ import annotations

import math

from .. import ops as _ops
from ..autograd import no_grad

__all__ = ["calculate_gain", "zeros_", "ones_", "constant_", "eye_", "normal_", "uniform_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (``torch.nn.init.calculate_gain``)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for size in tensor.shape[2:]:
        receptive *= size
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fill(tensor, values):
    with no_grad():
        tensor.copy_(values)
    return tensor


def zeros_(tensor):
    return _fill(tensor, _ops.zeros(()))


def ones_(tensor):
    return _fill(tensor, _ops.ones(()))


def constant_(tensor, val):
    return _fill(tensor, _ops.full((), val))


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, _ops.eye(*tensor.shape))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan_in, fan_out = _fans(tensor)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None):
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None):
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)
