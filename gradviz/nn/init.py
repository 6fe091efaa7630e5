"""``gradviz.nn.init``: fill a parameter in place (under ``no_grad``), as ``torch.nn.init``.

The random initializers draw from gradviz's generator, so their values differ from torch's;
the deterministic ones (``zeros_``, ``ones_``, ``constant_``, ``eye_``) give the same tensors.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ops as _ops
from ..autograd import no_grad
from ..ops._creation import _rng
from ._warn import warn as _warn

__all__ = ["calculate_gain", "zeros_", "ones_", "constant_", "eye_", "normal_", "uniform_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "trunc_normal_", "dirac_", "orthogonal_", "sparse_"]


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
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
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
    """Fill ``tensor`` with 0, in place and without recording a graph; returns it.

    Mirrors ``torch.nn.init.zeros_``."""
    return _fill(tensor, _ops.zeros(()))


def ones_(tensor):
    """Fill ``tensor`` with 1, in place and without recording a graph; returns it.

    Mirrors ``torch.nn.init.ones_``."""
    return _fill(tensor, _ops.ones(()))


def constant_(tensor, val):
    """Fill ``tensor`` with ``val``, in place and without recording a graph; returns it.

    Mirrors ``torch.nn.init.constant_``."""
    return _fill(tensor, _ops.full((), val))


def eye_(tensor):
    """Fill the 2-D ``tensor`` with the identity matrix, in place; returns it.

    Mirrors ``torch.nn.init.eye_``."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, _ops.eye(*tensor.shape))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill ``tensor`` with draws from ``N(mean, std ** 2)``, in place; returns it.

    Mirrors ``torch.nn.init.normal_``."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill ``tensor`` with draws from U(``a``, ``b``), in place; returns it.

    Mirrors ``torch.nn.init.uniform_``."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """Glorot initialisation: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``, in place.

    Mirrors ``torch.nn.init.xavier_uniform_``."""
    fan_in, fan_out = _fans(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """Glorot initialisation: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``, in
    place.

    Mirrors ``torch.nn.init.xavier_normal_``."""
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
    """He initialisation: U(-bound, bound) with ``bound = gain * sqrt(3 / fan_mode)``, in place.

    Mirrors ``torch.nn.init.kaiming_uniform_``."""
    if 0 in tensor.shape:
        _warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None):
    """He initialisation: N(0, std**2) with ``std = gain / sqrt(fan_mode)``, in place.

    Mirrors ``torch.nn.init.kaiming_normal_``."""
    if 0 in tensor.shape:
        _warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None):
    """N(mean, std²) restricted to ``[a, b]`` (draws outside are redrawn)."""
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        _warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
              "distribution of values may be incorrect.", stacklevel=2)
    rng = _rng(generator)
    shape = tuple(tensor.shape)

    def cdf(x):
        return (1.0 + math.erf((x - mean) / std / math.sqrt(2.0))) / 2.0

    if cdf(b) - cdf(a) > 0.3:  # most normal draws land in [a, b]: redraw the others
        values = rng.normal(mean, std, size=shape)
        outside = (values < a) | (values > b)
        while outside.any():
            values[outside] = rng.normal(mean, std, size=int(outside.sum()))
            outside = (values < a) | (values > b)
    else:  # uniform draws on [a, b], kept with the density relative to its peak (as torch)
        peak = max(a, min(mean, b))

        def log_density(x):
            return -0.5 * ((x - mean) / std) ** 2 + 0.5 * ((peak - mean) / std) ** 2

        values = rng.uniform(a, b, size=shape)
        pending = np.log(rng.uniform(size=shape)) > log_density(values)
        while pending.any():
            values[pending] = rng.uniform(a, b, size=int(pending.sum()))
            pending[pending] = np.log(rng.uniform(size=int(pending.sum()))) > log_density(values[pending])
    return _fill(tensor, _ops.tensor(values, dtype=tensor.dtype))


def dirac_(tensor, groups: int = 1):
    """The identity of a convolution: 1 at the centre of the kernel of each matching in/out
    channel pair (per group), 0 elsewhere."""
    dimensions = tensor.ndim
    if dimensions not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    values = np.zeros(sizes)
    centre = tuple(n // 2 for n in sizes[2:])
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            values[(g * out_per_group + d, d) + centre] = 1
    return _fill(tensor, _ops.tensor(values, dtype=tensor.dtype))


def orthogonal_(tensor, gain: float = 1, generator=None):
    """A (semi-)orthogonal matrix (trailing dimensions flattened), times ``gain``."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flattened = _rng(generator).normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))  # a uniform draw over the orthogonal matrices
    if rows < cols:
        q = q.T
    return _fill(tensor, _ops.tensor((q * gain).reshape(tuple(tensor.shape)), dtype=tensor.dtype))


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """N(0, std²) values with ``ceil(sparsity * rows)`` zeros in each column."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tuple(tensor.shape)
    num_zeros = math.ceil(sparsity * rows)
    rng = _rng(generator)
    values = rng.normal(0.0, std, size=(rows, cols))
    for col in range(cols):
        values[rng.permutation(rows)[:num_zeros], col] = 0
    return _fill(tensor, _ops.tensor(values, dtype=tensor.dtype))


def _deprecated(method):
    """The pre-0.4 name without the trailing underscore, with torch's FutureWarning."""
    new_name = method.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        _warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
              FutureWarning, stacklevel=2)
        return method(*args, **kwargs)

    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"Deprecated: use :func:`{new_name}`."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)


# ---- the layers' default initialisations ------------------------------------------------------

def _uniform_(tensor, bound: float):
    """Fill ``tensor`` with U(-bound, bound) from gradviz's generator (not torch's values)."""
    with no_grad():
        sample = _ops.rand(*tensor.shape, dtype=tensor.dtype)
        tensor.copy_(sample * (2 * bound) - bound)
    return tensor


def _reset_conv(conv) -> None:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for a convolution's weight, then its bias (torch's
    kaiming-uniform with ``a=sqrt(5)``); nothing for a weight without entries."""
    fan_in = conv.weight.shape[1] * math.prod(conv.kernel_size)
    if fan_in == 0:
        return
    bound = 1 / math.sqrt(fan_in)
    _uniform_(conv.weight, bound)
    if conv.bias is not None:
        _uniform_(conv.bias, bound)
