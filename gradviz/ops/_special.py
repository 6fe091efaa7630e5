"""More pointwise math, as in PyTorch: ``addcmul``/``addcdiv`` (what optimizers write),
``hypot``, ``logaddexp``/``logaddexp2``, ``copysign``, ``fmax``/``fmin``, ``heaviside``,
``float_power``, ``sinc``, ``deg2rad``/``rad2deg``, ``logit``, the inverse hyperbolic
functions, ``erfc``/``erfinv``, the gamma family (``lgamma``, ``digamma``, ``polygamma``),
``sgn``, ``signbit``, the predicates ``isposinf``/``isneginf``/``isreal``, numpy-style aliases
(``multiply``, ``greater``, ``arcsin``, ...), and ``ndtr``/``entr`` of ``torch.special``
(the namespace itself is built in ``_special_namespace.py``).

Each backward rule is PyTorch's formula written with gradviz ops, so higher derivatives work
(Note [Backward rules are differentiable] in ``_registry.py``).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special as _scipy_special

from gradviz_ext import ops as _ext_ops

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _wrap
from . import _math
from ._creation import zeros_like
from ._math import _BITWISE_XOR, isnan
from ._pointwise import (
    _BITWISE_AND,
    _BITWISE_NOT,
    _BITWISE_OR,
    _bitwise,
    _broadcasting,
    _check_operand,
    cos,
    div,
    eq,
    erf,
    exp,
    ge,
    gt,
    le,
    log,
    log1p,
    logical_not,
    logical_or,
    lt,
    mul,
    ne,
    pow,
    rsqrt,
    sin,
    sub,
    where,
    where_zero,
)
from ._pointwise import _sign_forward as _pointwise_sign_forward
from ._pointwise import logical_not as _not
from ._registry import Op, apply, declare, exports, promote, promote_float, saves_inputs, saves_output
from ._saved import OTHER, RESULT, SELF, Attr, Input, NotKept


def _floating_only(name, *tensors):
    """PyTorch's kernels for these ops have no integer version: the operands' promoted dtype
    must be floating (an integer tensor with a floating one is computed in the floating dtype)."""
    tensors = [t for t in tensors if isinstance(t, Tensor)]
    if tensors and not any(t.dtype.is_floating_point for t in tensors):
        promoted = _dtypes.result_type(*tensors)
        raise NotImplementedError(
            f'"{name}_cpu" not implemented for \'{TYPE_WORDS[promoted.name]}\': convert the '
            f"input to a floating-point dtype first (x.float())")


# ---- addcmul / addcdiv -----------------------------------------------------------------------

def _addcmul_backward(ctx, g):
    """torch's: ``grad * (tensor2 * value)`` and ``grad * (tensor1 * value)``."""
    _, t1, t2 = ctx.input(0), ctx.input(1), ctx.input(2)
    needs = ctx.needs_input_grad
    return (g if needs[0] else None,
            g * (t2 * ctx.value) if needs[1] else None,
            g * (t1 * ctx.value) if needs[2] else None)


def _addcdiv_backward(ctx, g):
    """torch's: ``grad * (value / tensor2)`` and ``-grad * (value * tensor1 / tensor2**2)``."""
    t1, t2 = ctx.input(1), ctx.input(2)
    needs = ctx.needs_input_grad
    return (g if needs[0] else None,
            g * div(ctx.value, t2) if needs[1] else None,  # a division (``/`` multiplies by 1/t2)
            -g * (ctx.value * t1 / (t2 * t2)) if needs[2] else None)


def _broadcast_failure(a, t1, t2):
    shapes = [list(np.shape(x)) for x in (a, t1, t2)]
    return RuntimeError(f"The size of tensors do not match: shapes {shapes} do not broadcast "
                        "together")


def _addcmul_forward(a, t1, t2, value):
    """torch's ``input + (value * tensor1) * tensor2``, whose last multiply and add its
    vectorized loop fuses (one rounding, Note [Whole-array kernels]) for float32 and float64."""
    try:
        scaled = value * t1
        if scaled.dtype == t2.dtype == a.dtype and a.dtype in (np.float32, np.float64):
            shape = np.broadcast_shapes(scaled.shape, t2.shape, a.shape)
            whole = [np.broadcast_to(x, shape) for x in (scaled, t2, a)]
            fused = _ext_ops.fused_multiply_add(  # 0-d stays 0-d (np.ascontiguousarray: 1-d)
                *(x if x.flags.c_contiguous else np.copy(x, order="C") for x in whole))
            if fused is not None:
                return fused
        return a + scaled * t2
    except ValueError:
        raise _broadcast_failure(a, t1, t2) from None


def _addcdiv_forward(a, t1, t2, value):
    """torch's ``input + (value * tensor1) / tensor2``."""
    try:
        return a + value * t1 / t2
    except ValueError:
        raise _broadcast_failure(a, t1, t2) from None


# each factor is saved for the other's gradient; addcdiv's divisor always (every gradient reads it)
ADDCMUL = Op("addcmul", "AddcmulBackward0", forward=_addcmul_forward,
             backward=_addcmul_backward, saves=saves_inputs(0, 1, 2), dtype=promote,
             saved={"tensor1": Input(1, needed_by=2), "tensor2": Input(2, needed_by=1), "value": Attr("value")})
ADDCDIV = Op("addcdiv", "AddcdivBackward0", forward=_addcdiv_forward,
             backward=_addcdiv_backward, saves=saves_inputs(0, 1, 2), dtype=promote,
             saved={"tensor1": Input(1, needed_by=2), "tensor2": Input(2), "value": Attr("value")})


@declare(method=True, inplace=True)
def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2``; for integer tensors ``value`` is truncated to an
    integer first (torch converts it to the tensors' type: ``value=0.5`` adds nothing)."""
    dtype = _dtypes.result_type(input, tensor1, tensor2)
    if dtype is _dtypes.bool:
        raise NotImplementedError('"addcmul_cpu_out" not implemented for \'Bool\'')
    if not dtype.is_floating_point and isinstance(value, float):
        value = int(value)
    return apply(ADDCMUL, input, tensor1, tensor2, value=value)


@declare(method=True, inplace=True)
def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2`` (integer tensors are an error, as in PyTorch)."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
            "behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2))"
            ".to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for "
            "float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")
    return apply(ADDCDIV, input, tensor1, tensor2, value=value)


# ---- binary functions ---------------------------------------------------------------------------

def _hypot_backward(ctx, g):
    out = ctx.output()
    return (g * ctx.input(0) / out if ctx.needs_input_grad[0] else None,
            g * ctx.input(1) / out if ctx.needs_input_grad[1] else None)


HYPOT = Op("hypot", "HypotBackward0", forward=_broadcasting(np.hypot), backward=_hypot_backward,
           saves=lambda needs: ((0, 1), True), dtype=promote,
           saved={"self": Input(0, needed_by=0), "other": Input(1, needed_by=1), "result": RESULT})


def _logaddexp_backward(base_exp):
    def backward(ctx, g):
        a, b = ctx.input(0), ctx.input(1)
        return (g / (1 + base_exp(b - a)) if ctx.needs_input_grad[0] else None,
                g / (1 + base_exp(a - b)) if ctx.needs_input_grad[1] else None)

    return backward


LOGADDEXP = Op("logaddexp", "LogaddexpBackward0", forward=_broadcasting(np.logaddexp),
               backward=_logaddexp_backward(exp), saves=saves_inputs(0, 1), dtype=promote,
               saved={"self": SELF, "other": OTHER})
LOGADDEXP2 = Op("logaddexp2", "Logaddexp2Backward0", forward=_broadcasting(np.logaddexp2),
                backward=_logaddexp_backward(lambda t: pow(2.0, t)), saves=saves_inputs(0, 1),
                dtype=promote,
                saved={"self": SELF, "other": OTHER})


def _binary_floating(op, name, input, other):
    input, other = _check_operand(input, name), _check_operand(other, name)
    _floating_only(name, input, other)
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(other, Tensor):
        other = _wrap(np.asarray(other, dtype=input._data.dtype))
    return apply(op, input, other)


@declare(method=True, inplace=True)
def hypot(input, other):
    """``sqrt(input**2 + other**2)`` without overflow."""
    return _binary_floating(HYPOT, "hypot", input, other)


@declare(method=True, inplace=True)
def logaddexp(input, other):
    """``log(exp(input) + exp(other))`` without overflow."""
    return _binary_floating(LOGADDEXP, "logaddexp", input, other)


@declare(method=True, inplace=True)
def logaddexp2(input, other):
    """``log2(2**input + 2**other)`` without overflow."""
    return _binary_floating(LOGADDEXP2, "logaddexp2", input, other)


def _copysign_backward(ctx, g):
    """PyTorch's ``copysign_tensor_self_backward``: ``g * result / input``, 0 where the input
    is 0; the sign source gets no gradient."""
    x = ctx.input(0)
    is_zero = eq(x, 0)
    ratio = where_zero(is_zero, ctx.output() / where(is_zero, 1.0, x))
    grads = (g * ratio,)
    if len(ctx.needs_input_grad) == 2:
        grads += (g * 0 if ctx.needs_input_grad[1] else None,)
    return grads


COPYSIGN = Op("copysign", "CopysignBackward0", forward=_broadcasting(np.copysign),
              backward=_copysign_backward, saves=lambda needs: ((0,), True), dtype=promote_float,
              saved={"self": Input(0, needed_by=0), "result": RESULT})
COPYSIGN_NUMBER = Op("copysign_number", "CopysignBackward1",
                     forward=lambda a, other: np.copysign(a, other), backward=_copysign_backward,
                     saves=lambda needs: ((0,), True), dtype=promote_float,
                     saved={"self": SELF, "result": RESULT})


@declare(method=True, inplace=True)
def copysign(input, other):
    """``|input|`` with the sign of ``other`` (integers compute in the default float dtype)."""
    if isinstance(other, Tensor):
        return apply(COPYSIGN, input, other)
    return apply(COPYSIGN_NUMBER, input, other=_check_operand(other, "copysign"))


def _fmax_backward(ctx, g):
    """The gradient to the operand chosen; a NaN loses to a number, as in ``fmax``."""
    a, b = ctx.input(0), ctx.input(1)
    first = logical_or(ge(a, b) if ctx.largest else le(a, b), isnan(b))
    return (where_zero(logical_not(first), g) if ctx.needs_input_grad[0] else None,
            where_zero(first, g) if ctx.needs_input_grad[1] else None)


def _fmax_forward(a, b, largest):
    """torch's fmax (fmin): ``a`` where it is not smaller (larger) than ``b`` or ``b`` is NaN,
    else ``b``. On a tie of +0.0 and -0.0 that is ``a``'s zero; numpy's float32 loop gives
    ``b``'s."""
    keep = np.greater_equal(a, b) if largest else np.less_equal(a, b)
    return np.where(keep | np.isnan(b), a, b)


FMAX = Op("fmax", "FmaxBackward0", forward=_fmax_forward,
          backward=_fmax_backward, saves=saves_inputs(0, 1), dtype=promote,
          saved={"self": SELF, "other": OTHER})
FMIN = Op("fmin", "FminBackward0", forward=_fmax_forward,
          backward=_fmax_backward, saves=saves_inputs(0, 1), dtype=promote,
          saved={"self": SELF, "other": OTHER})


@declare(method=True)
def fmax(input, other):
    """The larger of each pair, ignoring NaN (NaN only where both are NaN)."""
    return apply(FMAX, input, other, largest=True)


@declare(method=True)
def fmin(input, other):
    """The smaller of each pair, ignoring NaN."""
    return apply(FMIN, input, other, largest=False)


def _heaviside_backward(ctx, g):
    raise RuntimeError("derivative for aten::heaviside is not implemented: heaviside is a step, "
                       "its gradient is zero almost everywhere; use a smooth stand-in such as "
                       "sigmoid(k * x) to train through it")


HEAVISIDE = Op("heaviside", "NotImplemented", forward=_broadcasting(np.heaviside),
               backward=_heaviside_backward, dtype=promote)


@declare(method=True, inplace=True)
def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``input > 0``, ``values`` where it is 0."""
    for position, (name, value) in enumerate((("input", input), ("values", values)), 1):
        if not isinstance(value, Tensor):  # torch takes no number here
            raise TypeError(f"heaviside(): argument '{name}' (position {position}) must be "
                            f"Tensor, not {type(value).__name__}")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return apply(HEAVISIDE, input, values)


@declare(method=True)
def float_power(input, exponent):
    """``pow`` computed in float64, as PyTorch's ``float_power`` (the node is ``PowBackward``)."""
    if isinstance(input, Tensor):
        input = input.to(_dtypes.float64)
    else:
        input = float(input)
    if isinstance(exponent, Tensor):
        exponent = exponent.to(_dtypes.float64)
    else:
        exponent = float(exponent)
    return pow(input, exponent)


def _xlog1py_forward(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log1p(y))
    return np.asarray(out, dtype=np.result_type(x, y))


def _xlog1py_backward(ctx, g):
    """PyTorch's formulas: ``g * log1p(other)`` for ``input`` (unmasked, unlike ``xlogy``)."""
    x, y = ctx.input(0), ctx.input(1)
    return (g * log1p(y) if ctx.needs_input_grad[0] else None,
            g * x / (y + 1) if ctx.needs_input_grad[1] else None)


XLOG1PY = Op("xlog1py", "SpecialXlog1PyBackward0", forward=_broadcasting(_xlog1py_forward),
             backward=_xlog1py_backward, saves=saves_inputs(0, 1), dtype=promote_float,
             saved={"self": SELF, "other": OTHER})


@declare(name=False, method=True)
def xlog1py(input, other):
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    return apply(XLOG1PY, _check_operand(input, "xlog1py"), _check_operand(other, "xlog1py"))


# ---- unary functions ---------------------------------------------------------------------------

def _sinc_forward(a):
    return np.sinc(a)


def _sinc_backward(ctx, g):
    """``(cos(pi x) pi x - sin(pi x)) / (pi x^2)``, 0 at 0: PyTorch's formula, so a second
    derivative at 0 is NaN, as in PyTorch."""
    x = ctx.input(0)
    angle = x * math.pi
    return (g * where_zero(eq(x, 0), (angle * cos(angle) - sin(angle)) / (angle * x)),)


SINC = Op("sinc", "SincBackward0", forward=_sinc_forward, backward=_sinc_backward,
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})
DEG2RAD = Op("deg2rad", "Deg2RadBackward0", forward=lambda a: a * (math.pi / 180),
             backward=lambda ctx, g: (g * (math.pi / 180),), dtype=promote_float)
RAD2DEG = Op("rad2deg", "Rad2DegBackward0", forward=lambda a: a * (180 / math.pi),
             backward=lambda ctx, g: (g * (180 / math.pi),), dtype=promote_float)


@declare(method=True, inplace=True)
def sinc(input):
    """``sin(pi x) / (pi x)``, 1 at 0."""
    return apply(SINC, input)


@declare(method=True, inplace=True)
def deg2rad(input):
    """Each element converted from degrees to radians. Mirrors ``torch.deg2rad``."""
    return apply(DEG2RAD, input)


@declare(method=True, inplace=True)
def rad2deg(input):
    """Each element converted from radians to degrees. Mirrors ``torch.rad2deg``."""
    return apply(RAD2DEG, input)


def _logit_forward(a, eps):
    if eps is not None:
        a = np.clip(a, eps, 1 - eps)
    return np.log(a / (1 - a))


def _logit_backward(ctx, g):
    """``g / (x (1 - x))``; outside ``[eps, 1 - eps]`` 0 (NaN outside ``[0, 1]`` without
    ``eps``), as PyTorch's ``logit_backward``."""
    x = ctx.input(0)
    eps = ctx.eps
    low, high = (0.0, 1.0) if eps is None else (eps, 1 - eps)
    outside = logical_or(lt(x, low), gt(x, high))
    inside = g / (x * (1 - x))
    if eps is None:
        return (where(outside, math.nan, inside),)
    return (where_zero(outside, inside),)


LOGIT = Op("logit", "LogitBackward0", forward=_logit_forward, backward=_logit_backward,
           saves=saves_inputs(0), dtype=promote_float,
           saved={"eps": Attr("eps"), "self": SELF})


@declare(method=True, inplace=True)
def logit(input, eps=None):
    """``log(p / (1 - p))``, the inverse of ``sigmoid``; ``eps`` clamps ``p`` into
    ``[eps, 1 - eps]`` first."""
    return apply(LOGIT, input, eps=None if eps is None else float(eps))


ASINH = Op("asinh", "AsinhBackward0", forward=np.arcsinh,
           backward=lambda ctx, g: (g * rsqrt(ctx.input(0) * ctx.input(0) + 1),),
           saves=saves_inputs(0), dtype=promote_float,
           saved={"self": SELF})
ACOSH = Op("acosh", "AcoshBackward0", forward=np.arccosh,
           backward=lambda ctx, g: (g * rsqrt(ctx.input(0) * ctx.input(0) - 1),),
           saves=saves_inputs(0), dtype=promote_float,
           saved={"self": SELF})
ATANH = Op("atanh", "AtanhBackward0", forward=np.arctanh,
           backward=lambda ctx, g: (g / (1 - ctx.input(0) * ctx.input(0)),),
           saves=saves_inputs(0), dtype=promote_float,
           saved={"self": SELF})


@declare(name=("asinh", "arcsinh"), method=("asinh", "arcsinh"), inplace=("asinh_", "arcsinh_"))
def asinh(input):
    """The inverse hyperbolic sine, elementwise; ``arcsinh`` is the same function.

    Mirrors ``torch.asinh``."""
    return apply(ASINH, input)


@declare(name=("acosh", "arccosh"), method=("acosh", "arccosh"), inplace=("acosh_", "arccosh_"))
def acosh(input):
    """The inverse hyperbolic cosine, elementwise; ``arccosh`` is the same function.

    Mirrors ``torch.acosh``."""
    return apply(ACOSH, input)


@declare(name=("atanh", "arctanh"), method=("atanh", "arctanh"), inplace=("atanh_", "arctanh_"))
def atanh(input):
    """The inverse hyperbolic tangent, elementwise; ``arctanh`` is the same function.

    Mirrors ``torch.atanh``."""
    return apply(ATANH, input)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _in_float64(function, a, *leading):
    """``function(*leading, a)`` computed in float64 (as PyTorch's float kernels do inside),
    returned in ``a``'s dtype. ``function`` is a ``scipy.special`` ufunc: one C loop over
    the array (Note [Special functions])."""
    out = function(*leading, a.astype(np.float64, copy=False))
    return np.asarray(out).astype(a.dtype, copy=False)


ERFC = Op("erfc", "ErfcBackward0", forward=lambda a: _in_float64(_scipy_special.erfc, a),
          backward=lambda ctx, g: (-g * _TWO_OVER_SQRT_PI * exp(-ctx.input(0) * ctx.input(0)),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})


def _erfinv_forward(a):
    """The inverse of erf: ``scipy.special.erfinv`` (``±inf`` at ``±1``, NaN outside)."""
    return _in_float64(_scipy_special.erfinv, a)


ERFINV = Op("erfinv", "ErfinvBackward0", forward=_erfinv_forward,
            backward=lambda ctx, g: (g * (math.sqrt(math.pi) / 2) * exp(ctx.output() * ctx.output()),),
            saves=saves_output, dtype=promote_float,
            saved={"self": NotKept("gradviz keeps the result, erfinv(self), which its backward reads, instead")})


@declare(method=True, inplace=True)
def erfc(input):
    """``1 - erf(input)``, accurate where ``erf`` is close to 1."""
    return apply(ERFC, input)


@declare(method=True, inplace=True)
def erfinv(input):
    """The inverse of ``erf`` on ``(-1, 1)`` (``±inf`` at ``±1``, NaN outside)."""
    return apply(ERFINV, input)


# ---- the gamma family --------------------------------------------------------------------------
# Note [Special functions]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# erf, erfc, erfinv and the gamma family are scipy.special's ufuncs (Cephes/xsf in C): one
# compiled loop per array. A per-element Python call (np.frompyfunc(math.erf)) cost ~0.5 µs
# per entry, 90% of a small GPT's training step in its gelu; a shift-and-series written in
# numpy looped while any entry was small and never ended at -inf. They are computed in
# float64 and rounded to the input's dtype. Where scipy's convention differs from PyTorch's,
# the result is patched to PyTorch's: lgamma(-inf) is inf (scipy: -inf), polygamma(n >= 1,
# -inf) is NaN (scipy: inf).


def _digamma_array(x):
    """digamma of a float64 array: -inf at +0, +inf at -0, NaN at the negative integers and
    -inf (scipy's psi, PyTorch's conventions)."""
    return _scipy_special.psi(np.asarray(x, dtype=np.float64))


def _lgamma_array(x):
    """log|Gamma(x)| of a float64 array: inf at the poles and at ±inf."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isneginf(x), np.inf, _scipy_special.gammaln(x))


def _polygamma_array(n, x):
    x = np.asarray(x, dtype=np.float64)
    if n == 0:
        return _digamma_array(x)
    return np.where(np.isneginf(x), np.nan, _scipy_special.polygamma(n, x))


LGAMMA = Op("lgamma", "LgammaBackward0", forward=lambda a: _lgamma_array(a).astype(a.dtype),
            backward=lambda ctx, g: (g * digamma(ctx.input(0)),), saves=saves_inputs(0),
            dtype=promote_float,
            saved={"self": SELF})
DIGAMMA = Op("digamma", "DigammaBackward0",
             forward=lambda a: _digamma_array(a).astype(a.dtype),
             backward=lambda ctx, g: (g * polygamma(1, ctx.input(0)),), saves=saves_inputs(0),
             dtype=promote_float,
             saved={"self": SELF})
POLYGAMMA = Op("polygamma", "PolygammaBackward0",
               forward=lambda a, n: _polygamma_array(n, a).astype(a.dtype),
               backward=lambda ctx, g: (g * polygamma(ctx.n + 1, ctx.input(0)),),
               saves=saves_inputs(0), dtype=promote_float,
               saved={"n": Attr("n"), "self": SELF})


@declare(method=True, inplace=True)
def lgamma(input):
    """``log|Gamma(input)|`` (inf at the poles 0, -1, -2, ...)."""
    return apply(LGAMMA, input)


@declare(method=True, inplace=True)
def digamma(input):
    """``d/dx log Gamma(x)`` (-inf at 0, NaN at the negative integers)."""
    return apply(DIGAMMA, input)


@declare()
def polygamma(n, input):
    """The ``n``-th derivative of ``digamma``."""
    if not isinstance(n, int) or n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n, got {n}.")
    if n == 0:
        return apply(POLYGAMMA, input, n=0)
    return apply(POLYGAMMA, input, n=n)


@declare(name=False, method="polygamma", inplace="polygamma_")
def _polygamma_method(self, n):
    return polygamma(n, self)


# the gradient is zero; PyTorch's node keeps the input and the result all the same
SGN = Op("sgn", "SgnBackward0", forward=_pointwise_sign_forward, backward=lambda ctx, g: (_zeros_like(g),),
         saves=lambda needs: ((0,), True), saved={"self": SELF, "result": RESULT})


def _zeros_like(g):
    """A zero gradient that is a constant, as PyTorch's ``zeros_like(grad)``."""
    return zeros_like(g)


@declare(method=True, inplace=True)
def sgn(input):
    """``sign`` (for real tensors; its gradient is zero)."""
    return apply(SGN, input)


# ---- predicates (not differentiable) ------------------------------------------------------------

@declare(method=True)
def signbit(input):
    """Whether the sign bit is set (true for -0.0)."""
    return _wrap(np.signbit(input._data))


@declare(method=True)
def isposinf(input):
    """Whether each element is +inf, as a bool tensor. Mirrors ``torch.isposinf``."""
    return _wrap(np.isposinf(input._data) if input._data.dtype.kind == "f"
                 else np.zeros(input._data.shape, dtype=bool))


@declare(method=True)
def isneginf(input):
    """Whether each element is -inf, as a bool tensor. Mirrors ``torch.isneginf``."""
    return _wrap(np.isneginf(input._data) if input._data.dtype.kind == "f"
                 else np.zeros(input._data.shape, dtype=bool))


@declare(method=True)
def isreal(input):
    """All true: gradviz has no complex tensors."""
    return _wrap(np.ones(input._data.shape, dtype=bool))


# ---- aliases under numpy's names -----------------------------------------------------------------

@declare(method=True, inplace=True)
def multiply(input, other):
    """Alias of ``mul``: ``input * other`` elementwise. Mirrors ``torch.multiply``."""
    return mul(input, other)


@declare(method=True, inplace=True)
def divide(input, other, *, rounding_mode=None):
    """Alias of ``div``: ``input / other``, with ``rounding_mode`` None, ``'trunc'`` or ``'floor'``.

    Mirrors ``torch.divide``."""
    return div(input, other, rounding_mode=rounding_mode)


@declare(method=True, inplace=True)
def subtract(input, other, *, alpha=1):
    """Alias of ``sub``: ``input - alpha * other`` elementwise. Mirrors ``torch.subtract``."""
    return sub(input, other, alpha=alpha)


@declare(method=True, inplace=True)
def greater(input, other):
    """Alias of ``gt``: ``input > other`` elementwise. Mirrors ``torch.greater``."""
    return gt(input, other)


@declare(method=True, inplace=True)
def greater_equal(input, other):
    """Alias of ``ge``: ``input >= other`` elementwise. Mirrors ``torch.greater_equal``."""
    return ge(input, other)


@declare(method=True, inplace=True)
def less(input, other):
    """Alias of ``lt``: ``input < other`` elementwise. Mirrors ``torch.less``."""
    return lt(input, other)


@declare(method=True, inplace=True)
def less_equal(input, other):
    """Alias of ``le``: ``input <= other`` elementwise. Mirrors ``torch.less_equal``."""
    return le(input, other)


@declare(method=True, inplace=True)
def not_equal(input, other):
    """Alias of ``ne``: ``input != other`` elementwise. Mirrors ``torch.not_equal``."""
    return ne(input, other)


def _math_alias(name):
    return getattr(_math, name)


arcsin, arccos, arctan = _math_alias("asin"), _math_alias("acos"), _math_alias("atan")
arctan2, fix = _math_alias("atan2"), _math_alias("trunc")
arcsinh, arccosh, arctanh = asinh, acosh, atanh


@declare(method=True)
def positive(input):
    """``input`` itself (no node), as in PyTorch; an error for bool tensors."""
    if input.dtype is _dtypes.bool:
        raise TypeError("The `+` operator, on a bool tensor is not supported.")
    return input


@declare(method=("bitwise_and", "__and__"), inplace=("bitwise_and_", "__iand__"), out=True)
def bitwise_and(input, other):
    """The bitwise AND of integer or bool tensors (logical AND for bools).

    Mirrors ``torch.bitwise_and``."""
    return _bitwise(_BITWISE_AND, input, other)


@declare(method=("bitwise_or", "__or__"), inplace=("bitwise_or_", "__ior__"), out=True)
def bitwise_or(input, other):
    """The bitwise OR of integer or bool tensors (logical OR for bools).

    Mirrors ``torch.bitwise_or``."""
    return _bitwise(_BITWISE_OR, input, other)


@declare(method=("bitwise_xor", "__xor__"), inplace=("bitwise_xor_", "__ixor__"), out=True)
def bitwise_xor(input, other):
    """The bitwise XOR of integer or bool tensors (logical XOR for bools).

    Mirrors ``torch.bitwise_xor``."""
    return _bitwise(_BITWISE_XOR, input, other)


@declare(name=False, method="__rand__")
def _reflected_bitwise_and(self, other):
    return bitwise_and(other, self)


@declare(name=False, method="__ror__")
def _reflected_bitwise_or(self, other):
    return bitwise_or(other, self)


@declare(name=False, method="__rxor__")
def _reflected_bitwise_xor(self, other):
    return bitwise_xor(other, self)


@declare(method=True, inplace=True)
def bitwise_not(input):
    """The bitwise NOT of an integer or bool tensor (logical NOT for bools).

    Mirrors ``torch.bitwise_not``."""
    if input.dtype is _dtypes.bool:
        return _not(input)
    if input.dtype.is_floating_point:
        raise NotImplementedError(f'"bitwise_not_cpu" not implemented for \'{TYPE_WORDS[input.dtype.name]}\'')
    return apply(_BITWISE_NOT, input)


# ---- torch.special ---------------------------------------------------------------------------------

def _entr_forward(a):
    with np.errstate(all="ignore"):
        out = np.where(a > 0, -a * np.log(np.where(a > 0, a, 1)), np.where(a == 0, 0.0, -np.inf))
    return np.where(np.isnan(a), np.nan, out).astype(a.dtype)


ENTR = Op("entr", "SpecialEntrBackward0", forward=_entr_forward,
          backward=lambda ctx, g: (g * -(1 + log(ctx.input(0))),), saves=saves_inputs(0),
          dtype=promote_float,
          saved={"self": SELF})


def entr(input):
    """``-x log x`` (0 at 0, -inf for negative x)."""
    return apply(ENTR, input)


# ``tensor * number`` and ``tensor / number`` as PyTorch's C++ code calls them (``mul.Scalar``,
# ``div.Scalar``), for the functions PyTorch composes that way; Python's ``x * 2`` is
# ``MulBackward0`` in PyTorch too, as in gradviz.
MUL_NUMBER = Op("mul_number", "MulBackward1", forward=lambda a, other: a * other,
                backward=lambda ctx, g: (g * ctx.other,))
DIV_NUMBER = Op("div_number", "DivBackward1", forward=lambda a, other: a / other,
                backward=lambda ctx, g: (g / ctx.other,))


def ndtr(input):
    """The standard normal CDF, composed as PyTorch composes it (``mul`` by a number is its
    ``MulBackward1``)."""
    return apply(MUL_NUMBER, 1 + erf(input * (1 / math.sqrt(2))), other=0.5)


__all__ = exports(globals(), "arcsin", "arccos", "arctan", "arctan2", "fix", "xlog1py")
