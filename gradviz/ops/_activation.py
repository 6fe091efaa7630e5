"""Activations and normalizers of ``torch.nn.functional``: ``softmax``, ``log_softmax``,
``softplus``, ``gelu``, ``leaky_relu``, ``elu``, ``silu``, ``hardtanh`` (and ``relu6``),
``logsigmoid``, ``selu``, ``celu``, ``mish``, ``hardswish`` and ``hardsigmoid``; PyTorch's
composites ``softsign``, ``tanhshrink`` and ``softmin`` are built from other ops, as there."""

from __future__ import annotations

import math

import numpy as np
import scipy.special as _scipy_special

from gradviz_ext import ops as _ext_ops

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _not_a_tensor, _wrap_dim
from .._tensor import _wrap as _wrap_array
from ._creation import rand
from ._pointwise import (
    ERF,
    _sigmoid_forward,
    abs,
    exp,
    ge,
    gt,
    logical_and,
    logical_not,
    lt,
    neg,
    sigmoid,
    tanh,
    where_zero,
)
from ._reduction import sum
from ._registry import Op, apply, declare, exports, promote_float, saves_inputs, saves_output
from ._saved import DIM, RESULT, SELF, Attr, Input, NotKept
from ._shape import cat, chunk

# Note [Softmax kernels]
# ~~~~~~~~~~~~~~~~~~~~~~
# softmax and log_softmax shift by the max into one new array and finish in place on it
# (exp, then the division or the log-sum subtraction); their backward without
# ``create_graph`` is the same formula on numpy arrays, with in-place updates of the one
# product array it allocates. The differentiable rules stay the definition. Over the last dim
# of C-contiguous float32 or float64 rows (attention's), the shift by the row maximum is one
# compiled pass, exp stays numpy's, and the division by the row sum (numpy's pairwise order
# from 0) is another; the backward ``y * (g - sum(g * y))`` is one (gradviz_ext/c/softmax.h):
# the same bits (tests/ops/test_softmax_kernel.py), without numpy's per-row reduction cost on
# rows of 32 entries. The row maximum is a vector running maximum (a scalar loop for rows
# holding a NaN): on attention's (16, 4, 32, 32) float32 scores the forward took 140 us with a
# scalar, branching maximum and takes 66 (25 of them numpy's exp; torch's softmax: 52).
# log_softmax over the last dim shares the shift; its sums of exp (numpy's exp, into a new
# array) are the same compiled row sums, numpy's log takes one value per row, and the
# subtraction of the row's log-sum from the shifted row is a compiled pass: on the GPT's
# (512, 65) float32 logits (cross_entropy's) the forward took 80 us and takes 32.

def _softmax_forward(a, dim, dim_arg=None):
    if not a.size or a.ndim == 0:
        shifted = a - np.max(a, axis=dim, keepdims=True) if a.size else a
        e = np.exp(shifted)
        return e / np.sum(e, axis=dim, keepdims=True)
    if dim == a.ndim - 1 or dim == -1:
        found = _ext_ops.softmax_arrays(a)  # Note [Softmax kernels]
        if found is not None:
            return found
    out = np.subtract(a, np.max(a, axis=dim, keepdims=True))
    np.exp(out, out=out)
    np.divide(out, np.sum(out, axis=dim, keepdims=True), out=out)
    return out


def _softmax_backward(ctx, g):
    y = ctx.output()
    return (y * (g - sum(g * y, ctx.dim, keepdim=True)),)


def _softmax_fast(ctx, grad):
    """:func:`_softmax_backward` on arrays (Note [Softmax kernels])."""
    y = ctx.output_data()
    if ctx.dim == y.ndim - 1 or ctx.dim == -1:
        found = _ext_ops.softmax_backward_arrays(y, grad)  # Note [Softmax kernels]
        if found is not None:
            return (found,)
    total = np.sum(grad * y, axis=ctx.dim, keepdims=True)
    if y.ndim == 0:  # ufuncs give 0-d results as scalars, which take no out=
        return (np.asarray(y * (grad - total)),)
    out = np.subtract(grad, total)
    out *= y
    return (out,)


SOFTMAX = Op("softmax", "SoftmaxBackward0", forward=_softmax_forward, backward=_softmax_backward,
             fast_backward=_softmax_fast, saves=saves_output, dtype=promote_float,
             saved={"dim": DIM, "result": RESULT})


# Note [Safe softmax]
# ~~~~~~~~~~~~~~~~~~~
# torch's scaled_dot_product_attention normalizes with ``_safe_softmax``: a softmax whose
# slices of only -inf (a query masked from every key) are 0, not NaN; its node is
# ``SafeSoftmaxBackward0``, with softmax's backward (which gives those slices a zero
# gradient). The other slices are softmax's, bit for bit: the same forward computes them.

def _safe_softmax_forward(a, dim, dim_arg=None):
    out = _softmax_forward(a, dim)
    if a.size and np.isnan(out).any():  # a slice of only -inf comes out NaN (0 / 0)
        masked = np.all(a == -np.inf, axis=dim, keepdims=True)
        if masked.any():
            out = np.where(masked, np.zeros((), out.dtype), out)
    return out


SAFE_SOFTMAX = Op("safe_softmax", "SafeSoftmaxBackward0", forward=_safe_softmax_forward,
                  backward=_softmax_backward, fast_backward=_softmax_fast, saves=saves_output,
                  dtype=promote_float, saved={"dim": DIM, "result": RESULT})


def safe_softmax(input, dim):
    """torch's ``_safe_softmax`` (Note [Safe softmax]), for scaled_dot_product_attention."""
    return apply(SAFE_SOFTMAX, input, dim=_wrap_dim(dim, input.ndim), dim_arg=dim)


def _log_softmax_forward(a, dim, dim_arg=None):
    if not a.size:
        return a.copy()
    if a.ndim and (dim == a.ndim - 1 or dim == -1):
        found = _ext_ops.log_softmax_arrays(a)  # Note [Softmax kernels]
        if found is not None:
            return found
    shifted = a - np.max(a, axis=dim, keepdims=True)
    if shifted.ndim == 0:
        return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))
    total = np.sum(np.exp(shifted), axis=dim, keepdims=True)
    np.subtract(shifted, np.log(total, out=total), out=shifted)
    return shifted


def _log_softmax_backward(ctx, g):
    return (g - exp(ctx.output()) * sum(g, ctx.dim, keepdim=True),)


def _log_softmax_fast(ctx, grad):
    """:func:`_log_softmax_backward` on arrays (Note [Softmax kernels])."""
    out = np.exp(ctx.output_data())
    if out.ndim == 0:
        return (np.asarray(grad - out * np.sum(grad, axis=ctx.dim, keepdims=True)),)
    np.multiply(out, np.sum(grad, axis=ctx.dim, keepdims=True), out=out)
    np.subtract(grad, out, out=out)
    return (out,)


LOG_SOFTMAX = Op("log_softmax", "LogSoftmaxBackward0", forward=_log_softmax_forward,
                 backward=_log_softmax_backward, fast_backward=_log_softmax_fast,
                 saves=saves_output, dtype=promote_float,
                 saved={"dim": DIM, "result": RESULT})


def _check_float_kernel(input, kernel):
    """torch's activation kernels are instantiated for floating types only: an integer or bool
    input is its NotImplementedError, naming the kernel (``"mish_cpu" not implemented for
    'Long'``)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{TYPE_WORDS[input.dtype.name]}'")


def _check_floating(input, dim, what):
    if not input.dtype.is_floating_point:
        kernel = "lastdim_kernel_impl" if dim in (-1, input.ndim - 1) or input.ndim <= 1 else "kernel_impl"
        raise NotImplementedError(f'"{what}_{kernel}" not implemented for '
                                  f"'{TYPE_WORDS[input.dtype.name]}'")


def _dim_or_error(input, dim, what):
    if dim is None:
        raise TypeError(f"{what}() received an invalid combination of arguments - got (Tensor), "
                        f"but expected (Tensor input, int dim, dtype dtype = None): pass `dim`")
    return _wrap_dim(dim, input.ndim)


@declare(method=True)
def softmax(input, dim=None, dtype=None, *, axis=None):
    """``exp(x) / sum(exp(x), dim)``, computed without overflow."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "softmax")
    if dtype is not None:
        input = input.to(dtype)
    dim_arg = axis if dim is None else dim
    dim = _dim_or_error(input, dim_arg, "softmax")
    if input.numel():
        _check_floating(input, dim, "softmax")
    return apply(SOFTMAX, input, dim=dim, dim_arg=dim_arg)  # Note [Saved ints as passed]


@declare(method=True)
def log_softmax(input, dim=None, dtype=None, *, axis=None):
    """``log(softmax(input, dim))``, computed stably (subtracting the max).

    Mirrors ``torch.log_softmax``."""
    if dtype is not None:
        input = input.to(dtype)
    dim_arg = axis if dim is None else dim
    dim = _dim_or_error(input, dim_arg, "log_softmax")
    if input._data.size:
        _check_floating(input, dim, "log_softmax")
    return apply(LOG_SOFTMAX, input, dim=dim, dim_arg=dim_arg)


def _softplus_backward(ctx, g):
    x = ctx.input(0)
    scaled = x * ctx.beta
    linear = gt(scaled, ctx.threshold)
    return (where_zero(linear, g * sigmoid(scaled)) + where_zero(logical_not(linear), g),)


SOFTPLUS = Op("softplus", "SoftplusBackward0",
              forward=lambda a, beta, threshold: np.where(
                  a * beta > threshold, a, np.log1p(np.exp(np.minimum(a * beta, threshold))) / beta),
              backward=_softplus_backward, saves=saves_inputs(0), dtype=promote_float,
              saved={"self": SELF, "beta": Attr("beta"), "threshold": Attr("threshold")})


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""
    _check_float_kernel(input, "softplus_cpu")
    return apply(SOFTPLUS, input, beta=beta, threshold=threshold)


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# Note [GELU kernels]
# ~~~~~~~~~~~~~~~~~~~
# The exact GELU is ``x * Phi(x)``, Phi the normal CDF. Float32 inputs, what models use, go
# through one compiled loop per direction (gradviz_ext/c/gelu.h, reached through
# ``gelu_float32`` and ``gelu_backward_float32`` in gradviz_ext/_ops.py), in float32
# arithmetic: Phi's tail as ``exp(-x^2/2)`` times a degree-10 polynomial in ``4 / (4 + |x|)``,
# the derivative's ``Phi(x) + x phi(x)`` with its zero at x = -0.7518 factored out (so it keeps
# its relative accuracy there), and ``exp`` computed in the loop with ``x^2`` split exactly,
# so the compiler vectorizes it sixteen floats per AVX-512 instruction. Accuracy, over a sweep
# of the float32 line against scipy's float64 ``ndtr`` (tests/ops/
# test_gelu_kernel_vs_torch.py): values within 8 units in the last place of the exact value
# (88% of them the exact value rounded, 99.96% within 2; the worst near x = -11, where the
# polynomial's float32 evaluation loses most), the derivative within 3.0e-7 relative; both
# inside the float32 tolerances the tests hold torch to (rtol 1e-6 where torch is exact, 2e-4
# against torch's own float32 polynomial erf). On a GPT's (16, 32, 256) activation the forward
# takes 0.11 ms and the backward 0.12 ms, where the previous loops (Phi in double precision,
# eight doubles per instruction, each float32 result the exact value rounded once) took 0.23
# each (torch: 0.055 and 0.12). The loops are compiled twice, for AVX2 with FMA and for
# AVX-512, and the widest the CPU has runs (``gelu_kernels_up_to``): the same operations per
# element, the fused multiply-adds written out, so the same bits, NaN payloads aside (tests/ops/
# test_gelu_kernel_vs_torch.py compares them). Measured alternatives: ``scipy.special.ndtr``
# in float64 took 2.7 ms; ``scipy.special.erf``'s float32 loop computes in double and is no
# faster; glibc's ``erf``/``erff``/``erfc`` called per element in C are as slow (12 ns per
# value: no vectorized libm without -ffast-math); a float32 rational approximation of erf
# (Abramowitz and Stegun 7.1.26, error 1.5e-7) differs from the exact value by more
# than the sweep's float32 tolerance (rtol 1e-6, atol 1e-7) in the lower tail. The backward
# takes any layout (a strided ``x`` or gradient is copied to a contiguous one first).
# Float64 inputs, a strided float32 forward (torch's rule at +inf differs there) and CPUs
# without AVX2 and FMA keep ``scipy.special.ndtr`` in float64 (``0.5 * (1 + erf(x /
# sqrt(2)))`` in one compiled loop), multiplied and cast back in one pass. The tanh form is
# computed in place in the input's dtype (``a ** 3`` is a slow ``pow`` in float32). The
# backward without ``create_graph`` is the same derivative on numpy arrays; the
# differentiable rule stays the definition for higher derivatives.


def _normal_cdf(a):
    """``0.5 * (1 + erf(a / sqrt(2)))`` in float64 (Note [GELU kernels])."""
    return _scipy_special.ndtr(a.astype(np.float64, copy=False))


def _tanh_inner(a):
    """``tanh(sqrt(2 / pi) * (a + 0.044715 a^3))``, in place on one new array."""
    inner = np.multiply(a, a)
    inner *= 0.044715
    inner += 1
    inner *= a
    inner *= _SQRT_2_OVER_PI
    return np.tanh(inner, out=inner)


def _cpu_has(feature: str) -> bool:
    """Whether the CPU has ``feature``, as numpy's dispatcher detected it (False if unknown)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:
        return False
    return bool(__cpu_features__.get(feature, False))


_VECTOR_HALF = _cpu_has("AVX512FP16")  # torch computes float16 GELU vectorized there


def _gelu_forward(a, approximate):
    if a.ndim == 0:  # ufuncs give 0-d results as scalars, which take no out=
        return _gelu_forward(a.reshape(1), approximate).reshape(())
    if approximate == "tanh":
        if a.dtype.kind != "f" or a.dtype == np.float16:
            return 0.5 * a * (1 + np.tanh(_SQRT_2_OVER_PI * (a + 0.044715 * a ** 3)))
        out = _tanh_inner(a)
        out += 1
        out *= a
        out *= 0.5
        return out
    # torch's vectorized CPU kernel (taken for contiguous float32 inputs of 2+ values) gives
    # NaN at +inf; its scalar loop (one value, strided inputs) and its float64 kernel give inf,
    # and so does its float16 kernel, but on CPUs with AVX512-FP16, where float16 takes the
    # vectorized kernel too
    posinf_is_nan = ((a.dtype == np.float32 or (a.dtype == np.float16 and _VECTOR_HALF))
                     and a.size >= 2 and a.flags.c_contiguous)
    out = _ext_ops.gelu_float32(a, posinf_is_nan)  # Note [GELU kernels]
    if out is not None:
        return out
    out = np.multiply(a, _normal_cdf(a), out=np.empty(a.shape, a.dtype), casting="same_kind")
    if posinf_is_nan:
        out[np.isposinf(a)] = np.nan
    return out


def _gelu_backward_arrays(x, g, approximate):
    """The GELU's derivative times ``g`` on numpy arrays (Note [GELU kernels])."""
    if x.ndim == 0:  # ufuncs give 0-d results as scalars, which take no out=
        return _gelu_backward_arrays(x.reshape(1), np.reshape(g, 1), approximate).reshape(())
    if approximate == "tanh":
        t = _tanh_inner(x)
        d_inner = np.multiply(x, x)
        d_inner *= 3 * 0.044715
        d_inner += 1
        d_inner *= _SQRT_2_OVER_PI
        d_inner *= x
        d_inner *= 0.5  # 0.5 x d_inner
        square = np.multiply(t, t)
        np.subtract(1, square, out=square)
        d_inner *= square
        t += 1
        t *= 0.5
        t += d_inner
        return np.multiply(g, t)
    if x.dtype == np.float32 and g.dtype == np.float32 and x.shape == g.shape:
        out = _ext_ops.gelu_backward_float32(np.ascontiguousarray(x), np.ascontiguousarray(g))
        if out is not None:  # Note [GELU kernels]
            return out
    wide = x.astype(np.float64, copy=False)
    pdf = np.multiply(wide, wide)
    pdf *= -0.5
    np.exp(pdf, out=pdf)
    pdf *= _INV_SQRT_2PI
    pdf *= wide
    pdf += _normal_cdf(wide)
    return np.multiply(g, pdf, out=np.empty(g.shape, g.dtype), casting="same_kind")


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
          fast_backward=lambda ctx, g: (_gelu_backward_arrays(ctx.data(0), g, ctx.approximate),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF, "approximate": Attr("approximate")})


def gelu(input, approximate="none"):
    """Gaussian error linear unit; ``approximate="tanh"`` for the tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "gelu")
    _check_float_kernel(input, "GeluKernelImpl")
    return apply(GELU, input, approximate=approximate)


# Note [Backward of piecewise-linear activations]
# ----------------------------------------------
# The derivative of leaky_relu, hardtanh (relu6), hardsigmoid, threshold, hardshrink and
# softshrink is piecewise constant in the input. PyTorch computes their backward with one op of
# (grad, input) (``leaky_relu_backward``, ``hardtanh_backward``, ...), whose own derivative is
# that op again for grad and zero for the input. So a first derivative taken with
# ``create_graph=True`` depends on the input, with a zero derivative: a second derivative is
# zeros, where a product with a constant mask would leave the input out of the graph and
# ``autograd.grad`` would raise that it was not used. Where the slope is zero the op selects
# zero (a NaN gradient stays out), as torch's kernels do.

def _slope_op(name, node, slope, select=True, saved=None):
    """The op ``grad * slope(input, **attrs)`` of (grad, input), ``slope`` piecewise constant
    (Note [Backward of piecewise-linear activations]). ``select``: a zero slope gives zero even
    for a NaN gradient (torch's kernels that choose, not multiply). ``saved``: the attributes
    torch's node saves beside the input (its ``self``)."""
    def forward(g, x, **attrs):
        factor = np.asarray(slope(x, **attrs), dtype=g.dtype)
        if not select:
            return g * factor
        return np.where(factor != 0, g * factor, np.zeros((), dtype=g.dtype))

    def backward(ctx, gg):
        return (apply(op, gg, ctx.input(1), **ctx.attrs) if ctx.needs_input_grad[0] else None,
                gg * 0 if ctx.needs_input_grad[1] else None)

    op = Op(name, node, forward=forward, backward=backward, saves=saves_inputs(1),
            saved=None if saved is None else {"self": Input(1), **saved})
    return op


LEAKY_RELU_BACKWARD = _slope_op(
    "leaky_relu_backward", "LeakyReluBackwardBackward0",
    lambda x, negative_slope: np.where(x > 0, 1.0, negative_slope), select=False,
    saved={"negative_slope": Attr("negative_slope")})

def _leaky_relu_forward(a, negative_slope):
    return np.where(a > 0, a, a * negative_slope)


LEAKY_RELU = Op("leaky_relu", "LeakyReluBackward0", forward=_leaky_relu_forward,
                backward=lambda ctx, g: (apply(LEAKY_RELU_BACKWARD, g, ctx.input(0),
                                               negative_slope=ctx.negative_slope),),
                saves=saves_inputs(0), saved={"self": SELF, "negative_slope": Attr("negative_slope")})


def _rrelu_forward(a, noise, noise_tensor):
    return np.where(a > 0, a, a * noise)


def _rrelu_backward(ctx, g):
    return (g * ctx.noise_tensor,)


RRELU = Op("rrelu_with_noise", "RreluWithNoiseBackward0", forward=_rrelu_forward,
           backward=_rrelu_backward, dtype=promote_float)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """Randomized leaky ReLU: in training each negative element gets its own slope drawn
    uniformly from ``[lower, upper]`` (from gradviz's generator), else the slope is their mean;
    one ``RreluWithNoiseBackward0`` node as in PyTorch, whose gradient uses the same slopes."""
    return _rrelu(RRELU, input, lower, upper, training)


def _rrelu(op, input, lower, upper, training):
    """``rrelu`` recorded as ``op`` (the out-of-place op, or the in-place form's)."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not input.dtype.is_floating_point:  # torch's kernels: floating dtypes only
        kernel = "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{TYPE_WORDS[input.dtype.name]}\'')
    data = input._data
    if training:
        slopes = rand(tuple(data.shape), dtype=input.dtype)._data * (upper - lower) + lower
        noise = np.where(data > 0, 1.0, slopes).astype(data.dtype)
    else:
        noise = np.where(data > 0, 1.0, (lower + upper) / 2).astype(data.dtype)
    return apply(op, input, noise=noise, noise_tensor=_wrap_array(noise))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    _check_float_kernel(input, "leaky_relu_cpu")
    return apply(LEAKY_RELU, input, negative_slope=negative_slope)


def _elu_backward(ctx, g):
    x = ctx.input(0)
    positive = gt(x, 0)
    return (where_zero(logical_not(positive), g) + where_zero(positive, g * ctx.alpha * exp(x)),)


ELU = Op("elu", "EluBackward0",
         forward=lambda a, alpha: np.where(a > 0, a, alpha * np.expm1(np.minimum(a, 0))),
         backward=_elu_backward, saves=saves_inputs(0), dtype=promote_float,
         saved={"alpha": Attr("alpha"), "scale": Attr("scale", default=1),
                "input_scale": Attr("input_scale", default=1), "self": SELF})


def elu(input, alpha=1.0, inplace=False):
    _check_float_kernel(input, "elu_cpu")
    return apply(ELU, input, alpha=alpha)


def _silu_forward(a):
    return a / (1 + np.exp(-a))


def _silu_backward(ctx, g):
    x = ctx.input(0)
    s = sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


SILU = Op("silu", "SiluBackward0", forward=_silu_forward, backward=_silu_backward,
          saves=saves_inputs(0), dtype=promote_float, saved={"self": SELF})


def silu(input, inplace=False):
    """``x * sigmoid(x)`` (one ``SiluBackward0`` node, as in PyTorch)."""
    _check_float_kernel(input, "silu_cpu")
    return apply(SILU, input)


def _keep(mask, g):
    """``g`` where ``mask`` (a bool tensor, not differentiated), zero elsewhere."""
    return where_zero(logical_not(mask), g)


# ---- hardtanh, relu6 ----------------------------------------------------------------------------

HARDTANH_BACKWARD = _slope_op(
    "hardtanh_backward", "HardtanhBackwardBackward0",
    lambda x, min_val, max_val: (x > min_val) & (x < max_val),
    saved={"min_val": Attr("min_val"), "max_val": Attr("max_val")})

HARDTANH = Op("hardtanh", "HardtanhBackward0",
              forward=lambda a, min_val, max_val: np.clip(a, min_val, max_val).astype(a.dtype),
              backward=lambda ctx, g: (apply(HARDTANH_BACKWARD, g, ctx.input(0),
                                             min_val=ctx.min_val, max_val=ctx.max_val),),
              saves=saves_inputs(0),
              saved={"self": SELF, "min_val": Attr("min_val"), "max_val": Attr("max_val")})


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)``, with a zero gradient at the two ends too (as torch)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype is _dtypes.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if input.dtype is _dtypes.uint8 and min_val < 0:
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return apply(HARDTANH, input, min_val=min_val, max_val=max_val)


def relu6(input, inplace=False):
    """``hardtanh(x, 0, 6)`` (a ``HardtanhBackward0`` node, as in PyTorch)."""
    return hardtanh(input, 0.0, 6.0)


# ---- threshold, hardshrink, softshrink ---------------------------------------------------------

# PyTorch's ``x <= threshold ? value : x``: a NaN passes, and its gradient with it
THRESHOLD_BACKWARD_AT = _slope_op(
    "threshold_backward_at", "ThresholdBackwardBackward0",
    lambda x, threshold: ~(x <= threshold))
THRESHOLD = Op("threshold", "ThresholdBackward0",
               forward=lambda a, threshold, value: np.where(a <= threshold,
                                                            np.asarray(value, dtype=a.dtype), a),
               backward=lambda ctx, g: (apply(THRESHOLD_BACKWARD_AT, g, ctx.input(0),
                                              threshold=ctx.threshold),),
               saves=saves_inputs(0),
               saved={"self": SELF, "threshold": Attr("threshold")})

HARDSHRINK_BACKWARD = _slope_op(
    "hardshrink_backward", "HardshrinkBackwardBackward0",
    lambda x, lambd: (x > lambd) | (x < -lambd), saved={"lambd": Attr("lambd")})
HARDSHRINK = Op("hardshrink", "HardshrinkBackward0",
                forward=lambda a, lambd: np.where((a > lambd) | (a < -lambd), a,
                                                  np.zeros((), dtype=a.dtype)),
                backward=lambda ctx, g: (apply(HARDSHRINK_BACKWARD, g, ctx.input(0),
                                               lambd=ctx.lambd),),
                saves=saves_inputs(0),
                saved={"lambd": Attr("lambd"), "self": SELF})

SOFTSHRINK_BACKWARD = _slope_op(
    "softshrink_backward", "SoftshrinkBackwardBackward0",
    lambda x, lambd: (x > lambd) | (x < -lambd), saved={"lambd": Attr("lambd")})
SOFTSHRINK = Op("softshrink", "SoftshrinkBackward0",
                forward=lambda a, lambd: np.where(
                    a > lambd, a - np.asarray(lambd, dtype=a.dtype),
                    np.where(a < -lambd, a + np.asarray(lambd, dtype=a.dtype),
                             np.zeros((), dtype=a.dtype))),
                backward=lambda ctx, g: (apply(SOFTSHRINK_BACKWARD, g, ctx.input(0),
                                               lambd=ctx.lambd),),
                saves=saves_inputs(0),
                saved={"lambd": Attr("lambd"), "self": SELF})


# ---- glu ---------------------------------------------------------------------------------------

# One ``GluBackward0`` node, as PyTorch records, saving the input and the dim as passed. The
# forward and the backward compute what gradviz's composition ``a * sigmoid(b)`` over the two
# halves computed, in the same order (so the values and gradients are unchanged); the backward
# is made of gradviz ops, so it differentiates again (PyTorch's gradient node is
# ``GluBackwardBackward0``, gradviz's the ops of that formula).

def _glu_forward(a, dim, dim_arg=None):
    first, second = np.split(a, 2, axis=dim)
    return first * _sigmoid_forward(second)


def _glu_backward(ctx, g):
    first, second = chunk(ctx.input(0), 2, ctx.dim)
    gate = sigmoid(second)
    return (cat([g * gate, g * first * (1 - gate) * gate], ctx.dim),)


GLU = Op("glu", "GluBackward0", forward=_glu_forward, backward=_glu_backward,
         saves=saves_inputs(0), saved={"self": SELF, "dim": DIM})


def glu(input, dim=-1):
    """The gated linear unit ``a * sigmoid(b)``, ``a`` and ``b`` the halves of ``input`` along
    ``dim`` (``nn.functional.glu``)."""
    _check_float_kernel(input, "glu_cpu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size "
                           f"{input.shape[d]}")
    return apply(GLU, input, dim=d, dim_arg=dim)


# ---- logsigmoid -------------------------------------------------------------------------------

LOG_SIGMOID = Op("log_sigmoid", "LogSigmoidBackward0",
                 forward=lambda a: np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a))),
                 backward=lambda ctx, g: (g * sigmoid(neg(ctx.input(0))),),
                 saves=saves_inputs(0), dtype=promote_float,
                 saved={"self": SELF, "buffer": NotKept(
                     "torch's CPU kernel keeps a buffer for its backward; gradviz's backward "
                     "computes from the input alone")})


def logsigmoid(input):
    """``log(sigmoid(x))``, computed without overflow."""
    _check_float_kernel(input, "log_sigmoid_cpu")
    return apply(LOG_SIGMOID, input)


# ---- selu, celu: elu with scales ------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _scaled_elu_forward(a, alpha, scale, input_scale):
    negative = alpha * np.expm1(np.minimum(a, 0) * input_scale)
    return (scale * np.where(a > 0, a, negative)).astype(a.dtype)


def _scaled_elu_backward(ctx, g):
    x = ctx.input(0)
    positive = gt(x, 0)
    slope = ctx.scale * ctx.alpha * ctx.input_scale
    return (_keep(positive, g * ctx.scale)
            + _keep(logical_not(positive), g * slope * exp(x * ctx.input_scale)),)


SELU = Op("selu", "EluBackward0", forward=_scaled_elu_forward, backward=_scaled_elu_backward,
          saves=saves_inputs(0), dtype=promote_float)
CELU = Op("celu", "CeluBackward0", forward=_scaled_elu_forward, backward=_scaled_elu_backward,
          saves=saves_inputs(0), dtype=promote_float,
          saved={"alpha": Attr("alpha"), "self": SELF})


@declare()
def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    _check_float_kernel(input, "elu_cpu")
    return apply(SELU, input, alpha=_SELU_ALPHA, scale=_SELU_SCALE, input_scale=1.0)


@declare()
def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    _check_float_kernel(input, "elu_cpu")
    return apply(CELU, input, alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


# ---- mish ---------------------------------------------------------------------------------------

def _softplus_array(a):
    return np.maximum(a, 0) + np.log1p(np.exp(-np.abs(a)))


def _mish_backward(ctx, g):
    x = ctx.input(0)
    t = tanh(softplus(x))
    return (g * (t + x * sigmoid(x) * (1 - t * t)),)


MISH = Op("mish", "MishBackward0",
          forward=lambda a: (a * np.tanh(_softplus_array(a))).astype(a.dtype),
          backward=_mish_backward, saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    _check_float_kernel(input, "mish_cpu")
    return apply(MISH, input)


# ---- hardswish, hardsigmoid ---------------------------------------------------------------------

def _hardswish_backward(ctx, g):
    x = ctx.input(0)
    middle = logical_and(gt(x, -3.0), lt(x, 3.0))
    return (_keep(middle, g * (x / 3 + 0.5)) + _keep(ge(x, 3.0), g),)


HARDSWISH = Op("hardswish", "HardswishBackward0",
               forward=lambda a: (a * np.clip(a + 3, 0, 6) / 6).astype(a.dtype),
               backward=_hardswish_backward, saves=saves_inputs(0), dtype=promote_float,
               saved={"self": SELF})

# torch's kernel takes the slope as 1.0f / 6.0f, a float32 constant, in every dtype
_ONE_SIXTH_FLOAT32 = float(np.float32(1.0) / np.float32(6.0))

# torch has no derivative for hardsigmoid_backward (it raises); this one's is zero, as for the
# other piecewise-linear activations
HARDSIGMOID_BACKWARD = _slope_op(
    "hardsigmoid_backward", "HardsigmoidBackwardBackward0",
    lambda x: np.where((x > -3.0) & (x < 3.0), _ONE_SIXTH_FLOAT32, 0.0))

HARDSIGMOID = Op("hardsigmoid", "HardsigmoidBackward0",
                 forward=lambda a: (np.clip(a + 3, 0, 6) / 6).astype(a.dtype),
                 backward=lambda ctx, g: (apply(HARDSIGMOID_BACKWARD, g, ctx.input(0)),),
                 saves=saves_inputs(0), dtype=promote_float,
                 saved={"self": SELF})


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``."""
    _check_float_kernel(input, "hardswish_cpu")
    return apply(HARDSWISH, input)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``."""
    _check_float_kernel(input, "hardsigmoid_cpu")
    return apply(HARDSIGMOID, input)


# ---- composites, as PyTorch writes them -------------------------------------------------------

def softsign(input):
    """``x / (1 + |x|)``."""
    return input / (abs(input) + 1)


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - tanh(input)


def softmin(input, dim=None, dtype=None):
    """``softmax(-x, dim)``."""
    return softmax(neg(input), dim, dtype)


# ---- in-place forms ----------------------------------------------------------------------------
# Note [In-place activations]
# ``leaky_relu_``, ``elu_`` (and ``selu_``), ``celu_``, ``threshold_`` and ``rrelu_`` are their
# own ops in PyTorch, recorded as ``<Name>Backward1``: the input is overwritten, so the backward
# is computed from the result (``threshold_`` keeps a copy of the input instead). Same values
# and gradients as the out-of-place forms; the node names, the saved values (``_saved_result``)
# and the derivative of the backward follow torch.
# ``relu_``, ``hardtanh_`` and the others that torch records as ``Backward0`` use the
# out-of-place ops. The ``*_result`` functions are what ``gradviz.ops._inplace.inplace`` runs.

LEAKY_RELU_RESULT = Op(
    "leaky_relu_", "LeakyReluBackward1", forward=_leaky_relu_forward,
    backward=lambda ctx, g: (apply(LEAKY_RELU_BACKWARD, g, ctx.output(),
                                   negative_slope=ctx.negative_slope),),
    saves=saves_output, saved={"result": RESULT, "negative_slope": Attr("negative_slope")})


def _scaled_elu_result_backward(ctx, g):
    # with r = scale * alpha * (exp(x * input_scale) - 1) below zero, dr/dx is
    # input_scale * (r + alpha * scale)
    result = ctx.output()
    positive = gt(result, 0)
    negative_slope = g * ctx.input_scale * (result + ctx.alpha * ctx.scale)
    return (_keep(positive, g * ctx.scale) + _keep(logical_not(positive), negative_slope),)


ELU_RESULT = Op("elu_", "EluBackward1", forward=_scaled_elu_forward,
                backward=_scaled_elu_result_backward, saves=saves_output, dtype=promote_float,
                saved={"alpha": Attr("alpha"), "scale": Attr("scale"),
                    "input_scale": Attr("input_scale"), "result": RESULT})
CELU_RESULT = Op("celu_", "CeluBackward1", forward=_scaled_elu_forward,
                 backward=_scaled_elu_result_backward, saves=saves_output, dtype=promote_float,
                 saved={"alpha": Attr("alpha"), "result": RESULT})

# torch's threshold_ keeps the input as it was (its ``_saved_self``) and masks with it
THRESHOLD_RESULT = Op("threshold_", "ThresholdBackward1", forward=THRESHOLD.forward,
                      backward=THRESHOLD.backward, saves=saves_inputs(0),
                      saved={"self": SELF, "threshold": Attr("threshold")})

RRELU_RESULT = Op("rrelu_with_noise_", "RreluWithNoiseBackward1", forward=_rrelu_forward,
                  backward=_rrelu_backward, dtype=promote_float)


def leaky_relu_result(input, negative_slope=0.01):
    _check_float_kernel(input, "leaky_relu_cpu")
    return apply(LEAKY_RELU_RESULT, input, negative_slope=negative_slope)


def elu_result(input, alpha=1.0):
    _check_float_kernel(input, "elu_cpu")
    return apply(ELU_RESULT, input, alpha=alpha, scale=1.0, input_scale=1.0)


def selu_result(input):
    _check_float_kernel(input, "elu_cpu")
    return apply(ELU_RESULT, input, alpha=_SELU_ALPHA, scale=_SELU_SCALE, input_scale=1.0)


def celu_result(input, alpha=1.0):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    _check_float_kernel(input, "elu_cpu")
    return apply(CELU_RESULT, input, alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


def threshold_result(input, threshold, value):
    return apply(THRESHOLD_RESULT, input, threshold=threshold, value=value)


def rrelu_result(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return _rrelu(RRELU_RESULT, input, lower, upper, training)


__all__ = exports(globals(), "softplus", "gelu", "leaky_relu", "elu", "silu", "hardtanh", "relu6",
                  "rrelu", "logsigmoid", "mish", "hardswish", "hardsigmoid", "softsign",
                  "tanhshrink", "softmin")
