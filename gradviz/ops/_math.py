"""More pointwise math, as in PyTorch: rounding (``floor``, ``ceil``, ``round``, ``trunc``,
``frac``), more trigonometry, ``square``, remainders and integer division (``%``, ``//``),
one-sided clamps, and the predicates ``isnan``, ``isinf``, ``isfinite``, ``isclose``,
``equal``.
"""

from __future__ import annotations

import numpy as np

from gradviz_ext import ops as _ext_ops

from .. import dtypes as _dtypes
from .._tensor import C_TYPE_NAMES, TYPE_WORDS, Tensor, _wrap
from ._creation import zeros_like
from ._pointwise import (
    CLAMP_MAX_TENSOR,
    CLAMP_MIN_TENSOR,
    _broadcast_error,
    _broadcasting,
    _check_operand,
    _clamp_backward,
    _clamp_dtype,
    _clamp_forward,
    _integer_division_check,
    _logical_operands,
    _operands,
    abs,
    clamp_bound,
    div,
    eq,
    ne,
    neg,
    pow,
    reciprocal,
    rsqrt,
    where,
)
from ._registry import Op, apply, declare, exports, promote, promote_float, saves_inputs, saves_output
from ._saved import OTHER, RESULT, SELF, Attr, Input

# ---- rounding, more trigonometry, remainders --------------------------------------------

def _zero_gradient(ctx, g):
    """PyTorch's ``zeros_like(grad)``: a constant, so a gradient through floor, ceil, trunc
    or round does not require grad even under ``create_graph=True``."""
    return (zeros_like(g),)


FLOOR = Op("floor", "FloorBackward0", forward=np.floor, backward=_zero_gradient)
CEIL = Op("ceil", "CeilBackward0", forward=np.ceil, backward=_zero_gradient)
TRUNC = Op("trunc", "TruncBackward0", forward=np.trunc, backward=_zero_gradient)
ROUND = Op("round", "RoundBackward0", forward=np.round, backward=_zero_gradient)
ROUND_DECIMALS = Op("round_decimals", "RoundBackward1",
                    forward=lambda a, decimals: np.round(a, decimals), backward=_zero_gradient)
FRAC = Op("frac", "FracBackward0", forward=lambda a: a - np.trunc(a),
          backward=lambda ctx, g: (g,))
TAN = Op("tan", "TanBackward0", forward=np.tan,
         backward=lambda ctx, g: (g * (1 + ctx.output() * ctx.output()),),
         saves=saves_output, dtype=promote_float,
         saved={"result": RESULT})
ATAN = Op("atan", "AtanBackward0", forward=np.arctan,
          backward=lambda ctx, g: (g / (1 + ctx.input(0) * ctx.input(0)),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})
ASIN = Op("asin", "AsinBackward0", forward=np.arcsin,
          backward=lambda ctx, g: (g * rsqrt(1 - ctx.input(0) * ctx.input(0)),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})
ACOS = Op("acos", "AcosBackward0", forward=np.arccos,
          backward=lambda ctx, g: (-g * rsqrt(1 - ctx.input(0) * ctx.input(0)),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})
SINH = Op("sinh", "SinhBackward0", forward=np.sinh,
          backward=lambda ctx, g: (g * cosh(ctx.input(0)),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})
COSH = Op("cosh", "CoshBackward0", forward=np.cosh,
          backward=lambda ctx, g: (g * sinh(ctx.input(0)),),
          saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})


def _angle_forward(a):
    """A real number's angle: pi for a negative one, 0 otherwise (-0.0 too: +0.0), NaN kept."""
    return np.where(np.isnan(a), a, np.where(a < 0, a.dtype.type(np.pi), a.dtype.type(0)))


# torch's angle_backward of a real input is zeros_like(self), NaN or not; it saves self
ANGLE = Op("angle", "AngleBackward0", forward=_angle_forward,
           backward=lambda ctx, g: (zeros_like(ctx.input(0)),), saves=saves_inputs(0),
           dtype=promote_float, saved={"self": SELF})


@declare(method=True, inplace=True, out=True)
def floor(input):
    """The largest integer not greater than each element (its gradient is zero).

    Mirrors ``torch.floor``."""
    return input if not input.dtype.is_floating_point else apply(FLOOR, input)


@declare(method=True, inplace=True, out=True)
def ceil(input):
    """The smallest integer not less than each element (its gradient is zero).

    Mirrors ``torch.ceil``."""
    return input if not input.dtype.is_floating_point else apply(CEIL, input)


@declare(name=("trunc", "fix"), method=("trunc", "fix"), inplace=("trunc_", "fix_"))
def trunc(input):
    """Each element rounded toward zero (its gradient is zero); ``fix`` is the same function.

    Mirrors ``torch.trunc``."""
    return input if not input.dtype.is_floating_point else apply(TRUNC, input)


@declare(method=True, inplace=True, out=True)
def round(input, *, decimals=0):  # noqa: A001  (torch's name)
    """Round half to even, like PyTorch (``round(2.5) == 2``)."""
    if not input.dtype.is_floating_point:
        return input
    if decimals:
        return apply(ROUND_DECIMALS, input, decimals=int(decimals))
    return apply(ROUND, input)


@declare(method=True, inplace=True)
def frac(input):
    """The fractional part ``input - trunc(input)``, elementwise. Mirrors ``torch.frac``."""
    return apply(FRAC, input)


@declare(method=True, inplace=True)
def tan(input):
    """The tangent, elementwise (radians). Mirrors ``torch.tan``."""
    return apply(TAN, input)


@declare(name=("atan", "arctan"), method=("atan", "arctan"), inplace=("atan_", "arctan_"))
def atan(input):
    """The inverse tangent, elementwise; ``arctan`` is the same function. Mirrors ``torch.atan``."""
    return apply(ATAN, input)


@declare(name=("asin", "arcsin"), method=("asin", "arcsin"), inplace=("asin_", "arcsin_"))
def asin(input):
    """The inverse sine, elementwise; ``arcsin`` is the same function. Mirrors ``torch.asin``."""
    return apply(ASIN, input)


@declare(name=("acos", "arccos"), method=("acos", "arccos"), inplace=("acos_", "arccos_"))
def acos(input):
    """The inverse cosine, elementwise; ``arccos`` is the same function. Mirrors ``torch.acos``."""
    return apply(ACOS, input)


@declare(method=True, inplace=True)
def sinh(input):
    """The hyperbolic sine, elementwise. Mirrors ``torch.sinh``."""
    return apply(SINH, input)


@declare(method=True, inplace=True)
def cosh(input):
    """The hyperbolic cosine, elementwise. Mirrors ``torch.cosh``."""
    return apply(COSH, input)


@declare(method=True, out=True)
def angle(input):
    """The angle of each element as a complex number: pi for a negative real number, 0
    otherwise (NaN stays NaN); its gradient is zero. Integers give the default float dtype.
    Mirrors ``torch.angle`` for real tensors."""
    if input.dtype.is_complex:
        raise NotImplementedError("angle: complex tensors are not supported by gradviz")
    return apply(ANGLE, input)


@declare(method=True, inplace=True, out=True)
def square(input):
    """``input ** 2`` (the node is ``PowBackward0``, as in PyTorch)."""
    return pow(input, 2)


def _remainder_backward(ctx, g, rounding_mode):
    """torch's ``-grad * self.div(other, rounding_mode=...)`` for ``other``: floor for
    remainder, trunc for fmod."""
    a, b = ctx.input(0), ctx.input(1)
    grad_b = None
    if ctx.needs_input_grad[1]:
        grad_b = -g * div(a, b, rounding_mode=rounding_mode)
    return (g if ctx.needs_input_grad[0] else None, grad_b)


def _remainder_forward(a, b):
    """torch's remainder of floats: ``fmod``, plus ``b`` where it is not 0 and its sign is not
    ``b``'s. A zero keeps fmod's sign, the dividend's (``-0.0 % 2`` and ``4.0 % -2`` are -0.0
    and 0.0), where numpy gives it the divisor's. Integers: numpy's, which is torch's."""
    if np.asarray(a).dtype.kind in "iub" and np.asarray(b).dtype.kind in "iub":
        _integer_division_check(a, b)  # numpy's 0 would be a silent wrong value
        return np.remainder(a, b)
    mod = np.fmod(a, b)
    return np.where((mod != 0) & ((mod < 0) != (np.asarray(b) < 0)), mod + b, mod)


def _fmod_forward(a, b):
    _integer_division_check(a, b)
    return np.fmod(a, b)


# As PyTorch's: a tensor divisor is ``RemainderBackward1``/``FmodBackward1``, which saves both
# operands for the divisor's gradient; a number is ``...Backward0``, the node of the overload
# that takes a Scalar: one edge (the number is an attribute, not an input) and nothing saved.
_DIVISOR_SAVED = {"self": Input(0, needed_by=1), "other": Input(1, needed_by=1)}
REMAINDER = Op("remainder", "RemainderBackward1", forward=_broadcasting(_remainder_forward),
               backward=lambda ctx, g: _remainder_backward(ctx, g, "floor"),
               saves=saves_inputs(0, 1), dtype=promote, saved=_DIVISOR_SAVED)
FMOD = Op("fmod", "FmodBackward1", forward=_broadcasting(_fmod_forward),
          backward=lambda ctx, g: _remainder_backward(ctx, g, "trunc"),
          saves=saves_inputs(0, 1), dtype=promote, saved=_DIVISOR_SAVED)
REMAINDER_NUMBER = Op("remainder_number", "RemainderBackward0",
                      forward=lambda a, other: _remainder_forward(a, other),
                      backward=lambda ctx, g: (g,), saved={},
                      dtype=lambda a, other: _dtypes.result_type(a, other))
FMOD_NUMBER = Op("fmod_number", "FmodBackward0", forward=lambda a, other: _fmod_forward(a, other),
                 backward=lambda ctx, g: (g,), saved={},
                 dtype=lambda a, other: _dtypes.result_type(a, other))


def _divisor_op(tensor_op, number_op, name, input, other):
    input, other = _operands(input, other, name)
    if isinstance(input, Tensor) and not isinstance(other, Tensor):
        return apply(number_op, input, other=other)
    return apply(tensor_op, input, other)


def _not_differentiable(name):
    def backward(ctx, g):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")

    return backward


def _floor_divide_forward(a, b):
    _integer_division_check(a, b)
    return np.floor_divide(a, b)


FLOOR_DIVIDE = Op("floor_divide", "NotImplemented", forward=_broadcasting(_floor_divide_forward),
                  backward=_not_differentiable("floor_divide"), dtype=promote)


@declare(method=("remainder", "__mod__"), inplace=True, out=True)
def remainder(input, other):
    """Python's ``%``: the result has the sign of ``other``."""
    return _divisor_op(REMAINDER, REMAINDER_NUMBER, "remainder", input, other)


@declare(method=True, inplace=True, out=True)
def fmod(input, other):
    """C's ``fmod``: the result has the sign of ``input``."""
    return _divisor_op(FMOD, FMOD_NUMBER, "fmod", input, other)


@declare(method=("floor_divide", "__floordiv__"), inplace=True)
def floor_divide(input, other):
    """``input // other`` (rounds toward minus infinity, like Python)."""
    return apply(FLOOR_DIVIDE, *_operands(input, other, "floor_divide"))


@declare(method=True, inplace=True, out=True)
def true_divide(input, other):
    """``input / other`` with true (floating-point) division; the same as ``div``.

    Mirrors ``torch.true_divide``."""
    return div(input, other)


negative = neg
absolute = abs


@declare(method=True, inplace=True)
def clamp_min(input, min):  # noqa: A002
    """``clamp(input, min=min)``: each element limited from below. Mirrors ``torch.clamp_min``."""
    if isinstance(min, Tensor):
        return apply(CLAMP_MIN_TENSOR, input, min, has_min=True, has_max=False)
    input, min = clamp_bound(input, min)
    return apply(CLAMP_MIN, input, min=min, max=None)


@declare(method=True, inplace=True)
def clamp_max(input, max):  # noqa: A002
    """``clamp(input, max=max)``: each element limited from above. Mirrors ``torch.clamp_max``."""
    if isinstance(max, Tensor):
        return apply(CLAMP_MAX_TENSOR, input, max, has_min=False, has_max=True)
    input, max = clamp_bound(input, max)
    return apply(CLAMP_MAX, input, min=None, max=max)


CLAMP_MIN = Op("clamp_min", "ClampMinBackward0", forward=_clamp_forward, backward=_clamp_backward,
               saves=saves_inputs(0), dtype=_clamp_dtype,
               saved={"min": Attr("min"), "self": SELF})
CLAMP_MAX = Op("clamp_max", "ClampMaxBackward0", forward=_clamp_forward, backward=_clamp_backward,
               saves=saves_inputs(0), dtype=_clamp_dtype,
               saved={"max": Attr("max"), "self": SELF})


# ---- predicates (not differentiable) -----------------------------------------------------

@declare(method=True)
def isnan(input):
    """Whether each element is NaN, as a bool tensor. Mirrors ``torch.isnan``."""
    return _wrap(np.isnan(input._data))


@declare(method=True)
def isinf(input):
    """Whether each element is +inf or -inf, as a bool tensor. Mirrors ``torch.isinf``."""
    return _wrap(np.isinf(input._data))


@declare(method=True)
def isfinite(input):
    """Whether each element is finite (not NaN and not +/-inf), as a bool tensor.

    Mirrors ``torch.isfinite``."""
    return _wrap(np.isfinite(input._data))


@declare(method=True)
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether each element of ``input`` is within ``atol + rtol * abs(other)`` of ``other``.

    Mirrors ``torch.isclose``."""
    other_data = other._data if isinstance(other, Tensor) else other
    return _wrap(np.isclose(input._data, other_data, rtol=rtol, atol=atol, equal_nan=equal_nan))


@declare(method=True)
def equal(input, other) -> bool:
    """Whether both tensors have the same shape and the same values (a Python bool)."""
    return bool(input._data.shape == other._data.shape
                and np.array_equal(input._data, other._data))


_XOR = Op("logical_xor", "logical_xor", forward=_broadcasting(np.logical_xor), backward=None)
_BITWISE_XOR = Op("bitwise_xor", "bitwise_xor", forward=_broadcasting(np.bitwise_xor),
                  backward=None, dtype=promote)


@declare(method=True, inplace=True)
def logical_xor(input, other):
    """Elementwise logical XOR of the truth values of ``input`` and ``other``.

    Mirrors ``torch.logical_xor``."""
    _logical_operands("logical_xor", input, other)
    return apply(_XOR, input, other)


# ---- xlogy ---------------------------------------------------------------------------------

def _xlogy_forward(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log(y))
    return np.asarray(out, dtype=np.result_type(x, y))


def _xlogy_backward(ctx, g):
    x, y = ctx.input(0), ctx.input(1)
    grad_x = grad_y = None
    if ctx.needs_input_grad[0]:  # log(y) where x != 0, as torch's xlogy(x != 0, y)
        grad_x = g * xlogy(ne(x, 0).to(g.dtype), y)
    if ctx.needs_input_grad[1]:
        grad_y = g * x / y
    return grad_x, grad_y


XLOGY = Op("xlogy", "XlogyBackward0", forward=_broadcasting(_xlogy_forward),
           backward=_xlogy_backward, saves=saves_inputs(0, 1), dtype=promote_float,
           saved={"self": SELF, "other": OTHER})


@declare(method=True, inplace=True)
def xlogy(input, other):
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    return apply(XLOGY, _check_operand(input, "xlogy"), _check_operand(other, "xlogy"))


# ---- lerp, atan2, nan_to_num ------------------------------------------------------------------

def _lerp_backward(ctx, g):
    start, end = ctx.input(0), ctx.input(1)
    tensor_weight = len(ctx.needs_input_grad) == 3
    weight = ctx.input(2) if tensor_weight else ctx.weight
    grads = (g * (1 - weight) if ctx.needs_input_grad[0] else None,
             g * weight if ctx.needs_input_grad[1] else None)
    if tensor_weight:
        grads += (g * (end - start) if ctx.needs_input_grad[2] else None,)
    return grads


def _lerp_forward(start, end, weight):
    """torch's lerp from the nearer end (Note [Whole-array kernels] in gradviz_ext/_ops.py):
    one fused multiply-add per element where the CPU has FMA, as torch's kernel; elsewhere
    (other dtypes, or no FMA) the same formula in two roundings."""
    if start.dtype in (np.float32, np.float64):
        if type(weight) is np.ndarray and weight.ndim == 0:
            weight = weight.astype(start.dtype).item()  # torch's 0-dim weight: a number
        arrays = (start, end) if type(weight) is not np.ndarray else (start, end, weight)
        arrays = [a if a.flags.c_contiguous else np.copy(a, order="C")  # 0-d stays 0-d
                  for a in np.broadcast_arrays(*arrays)]
        fused = _ext_ops.lerp(arrays[0], arrays[1], arrays[2] if len(arrays) == 3 else weight)
        if fused is not None:
            return fused
    if not isinstance(weight, np.ndarray) and start.dtype in (np.float32, np.float64):
        weight = start.dtype.type(weight)  # torch's number weight, in the dtype: 0.49999999 is 0.5
    small = np.abs(weight) < 0.5
    diff = end - start
    return np.where(small, start + weight * diff, end + (weight - 1) * diff).astype(start.dtype,
                                                                                  copy=False)


LERP_SCALAR = Op("lerp", "LerpBackward0", forward=_lerp_forward,
                 backward=_lerp_backward, saves=saves_inputs(0, 1), dtype=promote,
                 saved={"weight": Attr("weight")})
LERP_TENSOR = Op("lerp_tensor", "LerpBackward1", forward=_lerp_forward,
                 backward=_lerp_backward, saves=saves_inputs(0, 1, 2), dtype=promote,
                 saved={"self": Input(0, needed_by=2), "end": Input(1, needed_by=2), "weight": Input(2)})


def _check_lerp(input, end, weight):
    """torch's checks: ``end`` (and a ``weight`` that is not 0-dim) of ``input``'s dtype, a
    floating dtype, shapes that broadcast."""
    if not isinstance(end, Tensor) or not isinstance(weight, (Tensor, int, float, np.number)):
        got = ", ".join(type(x).__name__ if not isinstance(x, Tensor) else "Tensor"
                        for x in (input, end, weight))
        raise TypeError(f"lerp() received an invalid combination of arguments - got ({got}), but "
                        "expected one of:\n * (Tensor input, Tensor end, Tensor weight, *, Tensor "
                        "out = None)\n * (Tensor input, Tensor end, Number weight, *, Tensor out = "
                        "None)\n")
    dtype = input.dtype
    for label, other in (("end", end), ("weight", weight)):
        if isinstance(other, Tensor) and other.dtype != dtype and (label == "end" or other.ndim):
            raise RuntimeError(f"expected dtype {C_TYPE_NAMES[dtype.name]} for `{label}` but got "
                               f"dtype {C_TYPE_NAMES[other.dtype.name]}")
    if not dtype.is_floating_point:
        kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{TYPE_WORDS[dtype.name]}\'')
    error = _broadcast_error(input._data, end._data)
    if error is None and isinstance(weight, Tensor):
        error = _broadcast_error(np.broadcast_to(0, np.broadcast_shapes(input.shape, end.shape)),
                                 weight._data)
    if error is not None:
        raise error


@declare(method=True, inplace=True)
def lerp(input, end, weight):
    """``input + weight * (end - input)`` (``weight`` a number or a tensor), computed from the
    nearer end as torch does."""
    _check_lerp(input, end, weight)
    if isinstance(weight, Tensor):
        return apply(LERP_TENSOR, input, end, weight)
    return apply(LERP_SCALAR, input, end, weight=weight)


def _atan2_backward(ctx, g):
    """torch's ``atan2_backward``: ``g * x * recip`` and ``g * -y * recip`` with ``recip`` the
    reciprocal of ``x^2 + y^2``, 0 where that is 0 (so atan2(0, 0) has zero gradients)."""
    y, x = ctx.input(0), ctx.input(1)
    denominator = x * x + y * y
    recip = where(eq(denominator, 0), zeros_like(denominator), reciprocal(denominator))
    return (g * x * recip if ctx.needs_input_grad[0] else None,
            g * -y * recip if ctx.needs_input_grad[1] else None)


ATAN2 = Op("atan2", "Atan2Backward0", forward=_broadcasting(np.arctan2), backward=_atan2_backward,
           saves=saves_inputs(0, 1), dtype=promote_float,
           saved={"self": SELF, "other": OTHER})


@declare(name=("atan2", "arctan2"), method=("atan2", "arctan2"), inplace=("atan2_", "arctan2_"))
def atan2(input, other):
    """The angle of the point ``(other, input)``: ``atan(input / other)`` in the right
    quadrant."""
    return apply(ATAN2, _check_operand(input, "atan2"), _check_operand(other, "atan2"))


def _nan_to_num_backward(ctx, g):
    """torch's ``grad * isfinite(self)``: a product, so a NaN gradient at a replaced entry stays
    NaN (a ``where`` would make it zero)."""
    return (g * isfinite(ctx.input(0)).to(g.dtype),)


NAN_TO_NUM = Op("nan_to_num", "NanToNumBackward0",
                forward=lambda a, nan, posinf, neginf: np.nan_to_num(
                    a, nan=nan, posinf=posinf, neginf=neginf) if a.dtype.kind == "f" else a.copy(),
                backward=_nan_to_num_backward, saves=saves_inputs(0),
                saved={"self": SELF})


@declare(method=True, inplace=True)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default the
    dtype's largest and smallest finite values); the gradient is zero at replaced entries."""
    return apply(NAN_TO_NUM, input, nan=nan, posinf=posinf, neginf=neginf)


@declare(name=False, method="__rmod__")
def _reflected_remainder(self, other):
    return remainder(_check_operand(other, "remainder"), self)


@declare(name=False, method="__rfloordiv__")
def _reflected_floor_divide(self, other):
    return floor_divide(_check_operand(other, "floor_divide"), self)


__all__ = exports(globals(), "negative", "absolute")
