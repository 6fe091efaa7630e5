"""Activations and normalizers of ``torch.nn.functional``: ``softmax``, ``log_softmax``,
``softplus``, ``gelu``, ``leaky_relu``, ``elu``, ``silu``."""

from __future__ import annotations

import math

import numpy as np

from .._tensor import _wrap_dim
from ._pointwise import ERF, _erf_scalar, exp, gt, sigmoid, tanh, where_zero, logical_not
from ._reduction import sum
from ._registry import Op, apply, promote_float, saves_inputs, saves_output

__all__ = ["softmax", "log_softmax", "softplus", "gelu", "leaky_relu", "elu", "silu"]


def _softmax_forward(a, dim):
    shifted = a - np.max(a, axis=dim, keepdims=True) if a.size else a
    e = np.exp(shifted)
    return e / np.sum(e, axis=dim, keepdims=True)


def _softmax_backward(ctx, g):
    y = ctx.output()
    return (y * (g - sum(g * y, ctx.dim, keepdim=True)),)


SOFTMAX = Op("softmax", "SoftmaxBackward0", forward=_softmax_forward, backward=_softmax_backward,
             saves=saves_output, dtype=promote_float)


def _log_softmax_forward(a, dim):
    if not a.size:
        return a.copy()
    shifted = a - np.max(a, axis=dim, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


LOG_SOFTMAX = Op("log_softmax", "LogSoftmaxBackward0", forward=_log_softmax_forward,
                 backward=lambda ctx, g: (g - exp(ctx.output()) * sum(g, ctx.dim, keepdim=True),),
                 saves=saves_output, dtype=promote_float)


def _check_floating(input, dim, what):
    if not input.dtype.is_floating_point:
        from .._tensor import TYPE_WORDS

        kernel = "lastdim_kernel_impl" if dim in (-1, input.ndim - 1) or input.ndim <= 1 else "kernel_impl"
        raise NotImplementedError(f'"{what}_{kernel}" not implemented for '
                                  f"'{TYPE_WORDS[input.dtype.name]}'")


def _dim_or_error(input, dim, what):
    if dim is None:
        raise TypeError(f"{what}() received an invalid combination of arguments - got (Tensor), "
                        f"but expected (Tensor input, int dim, dtype dtype = None): pass `dim`")
    return _wrap_dim(dim, input.ndim)


def softmax(input, dim=None, dtype=None, *, axis=None):
    """``exp(x) / sum(exp(x), dim)``, computed without overflow."""
    if dtype is not None:
        input = input.to(dtype)
    dim = axis if dim is None else dim
    dim = _dim_or_error(input, dim, "softmax")
    if input.numel():
        _check_floating(input, dim, "softmax")
    return apply(SOFTMAX, input, dim=dim)


def log_softmax(input, dim=None, dtype=None, *, axis=None):
    if dtype is not None:
        input = input.to(dtype)
    dim = axis if dim is None else dim
    if input.numel():
        _check_floating(input, _dim_or_error(input, dim, "log_softmax"), "log_softmax")
    return apply(LOG_SOFTMAX, input, dim=_dim_or_error(input, dim, "log_softmax"))


def _softplus_backward(ctx, g):
    x = ctx.input(0)
    scaled = x * ctx.beta
    linear = gt(scaled, ctx.threshold)
    return (where_zero(linear, g * sigmoid(scaled)) + where_zero(logical_not(linear), g),)


SOFTPLUS = Op("softplus", "SoftplusBackward0",
              forward=lambda a, beta, threshold: np.where(
                  a * beta > threshold, a, np.log1p(np.exp(np.minimum(a * beta, threshold))) / beta),
              backward=_softplus_backward, saves=saves_inputs(0), dtype=promote_float)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""
    return apply(SOFTPLUS, input, beta=beta, threshold=threshold)


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_forward(a, approximate):
    if approximate == "tanh":
        return 0.5 * a * (1 + np.tanh(_SQRT_2_OVER_PI * (a + 0.044715 * a ** 3)))
    cdf = 0.5 * (1 + np.asarray(_erf_scalar(a * _INV_SQRT2), dtype=np.float64))
    return (a * cdf).astype(a.dtype)


def _gelu_backward(ctx, g):
    x = ctx.input(0)
    if ctx.approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        t = tanh(inner)
        d_inner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
        return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner),)
    cdf = 0.5 * (1 + apply(ERF, x * _INV_SQRT2))
    pdf = exp(-0.5 * x * x) * _INV_SQRT_2PI
    return (g * (cdf + x * pdf),)


GELU = Op("gelu", "GeluBackward0", forward=_gelu_forward, backward=_gelu_backward,
          saves=saves_inputs(0), dtype=promote_float)


def gelu(input, approximate="none"):
    """Gaussian error linear unit; ``approximate="tanh"`` for the tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return apply(GELU, input, approximate=approximate)


def _leaky_backward(ctx, g):
    positive = gt(ctx.input(0), 0)
    return (where_zero(logical_not(positive), g) + where_zero(positive, g * ctx.negative_slope),)


LEAKY_RELU = Op("leaky_relu", "LeakyReluBackward0",
                forward=lambda a, negative_slope: np.where(a > 0, a, a * negative_slope),
                backward=_leaky_backward, saves=saves_inputs(0))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return apply(LEAKY_RELU, input, negative_slope=negative_slope)


def _elu_backward(ctx, g):
    x = ctx.input(0)
    positive = gt(x, 0)
    return (where_zero(logical_not(positive), g) + where_zero(positive, g * ctx.alpha * exp(x)),)


ELU = Op("elu", "EluBackward0",
         forward=lambda a, alpha: np.where(a > 0, a, alpha * np.expm1(np.minimum(a, 0))),
         backward=_elu_backward, saves=saves_inputs(0), dtype=promote_float)


def elu(input, alpha=1.0, inplace=False):
    return apply(ELU, input, alpha=alpha)


def _silu_forward(a):
    return a / (1 + np.exp(-a))


def _silu_backward(ctx, g):
    x = ctx.input(0)
    s = sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


SILU = Op("silu", "SiluBackward0", forward=_silu_forward, backward=_silu_backward,
          saves=saves_inputs(0), dtype=promote_float)


def silu(input, inplace=False):
    """``x * sigmoid(x)`` (one ``SiluBackward0`` node, as in PyTorch)."""
    return apply(SILU, input)
