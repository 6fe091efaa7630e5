"""The parts of ``torch.nn.functional`` that torch writes as composites of other ops: the
in-place activations (``relu_``, ``elu_``, ...), the
``*_with_indices`` pools, the deprecated ``upsample_nearest``/``upsample_bilinear``, and
``local_response_norm`` and ``lp_pool1d/2d/3d`` with their modules (``LocalResponseNorm``,
``LPPool1d/2d/3d``). Each is written as torch's own Python is (the same composite of ops), so
values, gradients and node names agree.
"""

from __future__ import annotations

import math

from .. import ops as _ops
from . import _activations_and_pools
from . import _functional_core as F
from ._activations_and_pools import adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d
from ._functional_layers import interpolate
from ._module import Module
from ._padding import pad
from ._volumetric import avg_pool3d, max_pool3d
from ._warn import warn as _warn

__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "threshold_", "selu_", "celu_",
           "rrelu_", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
           "upsample_nearest", "upsample_bilinear",
           "local_response_norm", "lp_pool1d", "lp_pool2d", "lp_pool3d"]


# ---- in-place activations: the ``inplace=True`` forms ----------------------------------------

def relu_(input):
    """``relu(input, inplace=True)``."""
    return F.relu(input, inplace=True)


def elu_(input, alpha=1.0):
    """``elu(input, alpha, inplace=True)``."""
    return F.elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """``leaky_relu(input, negative_slope, inplace=True)``."""
    return F.leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """``hardtanh(input, min_val, max_val, inplace=True)``."""
    return F.hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold, value):
    """``threshold(input, threshold, value, inplace=True)``."""
    return _activations_and_pools.threshold(input, threshold, value, inplace=True)


def selu_(input):
    """``selu(input, inplace=True)``."""
    return F.selu(input, inplace=True)


def celu_(input, alpha=1.0):
    """``celu(input, alpha, inplace=True)``."""
    return F.celu(input, alpha, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """``rrelu(input, lower, upper, training, inplace=True)``."""
    return F.rrelu(input, lower, upper, training, inplace=True)


# ---- pools returning their indices ------------------------------------------------------------

def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``(output, indices)`` of :func:`max_pool1d` (``return_indices`` is ignored, as torch)."""
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices=True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``(output, indices)`` of :func:`max_pool2d`."""
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode,
                        return_indices=True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``(output, indices)`` of :func:`max_pool3d`."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode,
                      return_indices=True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool1d`."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool2d`."""
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool3d`."""
    return adaptive_max_pool3d(input, output_size, return_indices=True)


# ---- deprecated up-sampling -------------------------------------------------------------------

def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated in torch (warns): ``interpolate(input, size, scale_factor, mode="nearest")``."""
    _warn("`nn.functional.upsample_nearest` is deprecated. Use "
          "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated in torch (warns): ``interpolate(..., mode="bilinear", align_corners=True)``."""
    _warn("`nn.functional.upsample_bilinear` is deprecated. Use "
          "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- local response normalization -------------------------------------------------------------

def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0):
    """AlexNet's normalization across channels (dim 1): ``input / (k + alpha * mean of the
    squares of ``size`` neighbouring channels) ** beta``, zero-padded at the ends.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(1, 3, 2)
    >>> torch.nn.functional.local_response_norm(x, 2, alpha=1.0, k=1.0)[0, :, 0]
    tensor([0.5946, 0.5946, 0.5946])
    """
    dim = input.ndim
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input "
                         f"(got {dim} dimensions)")
    if input.numel() == 0:
        return input
    div = input.mul(input)
    if dim == 3:
        div = div.unsqueeze(1)
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = F.avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = input.shape
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1)
        div = div.view(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


class LocalResponseNorm(Module):
    """:func:`local_response_norm` as a module."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


# ---- power-average pooling --------------------------------------------------------------------

def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, max_pool, avg_pool, count):
    if isinstance(norm_type, (int, float)):
        if norm_type == math.inf:
            return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -math.inf:
            return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (_ops.sign(out) * F.relu(_ops.abs(out))).mul(count).pow(1.0 / norm_type)


def _sizes(kernel_size, n):
    return tuple(kernel_size) if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * n


def lp_pool1d(input, norm_type, kernel_size: int, stride=None, ceil_mode: bool = False):
    """Power-average pooling: ``(sum over the window of x ** p) ** (1 / p)`` (``p =
    norm_type``; ``inf`` is max pooling of ``|x|``)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, F.max_pool1d,
                    F.avg_pool1d, kernel_size)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """:func:`lp_pool1d` over a 2-D window."""
    kw, kh = _sizes(kernel_size, 2)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, F.max_pool2d,
                    F.avg_pool2d, kw * kh)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """:func:`lp_pool1d` over a 3-D window."""
    kd, kw, kh = _sizes(kernel_size, 3)
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, max_pool3d, avg_pool3d,
                    kd * kw * kh)


class _LPPoolNd(Module):
    _pool = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._pool(input, float(self.norm_type), self.kernel_size, self.stride,
                                self.ceil_mode)

    def extra_repr(self):
        return ("norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, "
                "ceil_mode={ceil_mode}".format(**self.__dict__))


class LPPool1d(_LPPoolNd):
    """:func:`lp_pool1d` as a module."""

    _pool = staticmethod(lp_pool1d)


class LPPool2d(_LPPoolNd):
    """:func:`lp_pool2d` as a module."""

    _pool = staticmethod(lp_pool2d)


class LPPool3d(_LPPoolNd):
    """:func:`lp_pool3d` as a module."""

    _pool = staticmethod(lp_pool3d)
