"""Pointwise ops: arithmetic with broadcasting, unary math, comparisons, dtype conversion.

Each op's backward rule sits right under its forward so one checks the other by eye.
Broadcasting needs no code here: the engine reduces each gradient to its input's shape
(Note [Engine order], step 4), as PyTorch's validate_outputs does.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.special as _scipy_special

from gradviz_ext import ops as _ext_ops

from .. import _memory_format
from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _not_a_tensor, _to_array, _wrap, check_device, device
from . import _shape
from ._registry import Op, apply, check_saveable, declare, exports, promote, promote_float, saves_inputs, saves_output
from ._saved import OTHER, RESULT, SELF, Attr, Computed, Input, clamp_bound_attr, tensor_attr


def _check_operand(value, op_name):
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (complex, np.complexfloating)):
        raise _dtypes.complex_error(value)
    if isinstance(value, np.generic):
        return value.item()  # numpy scalars promote like Python scalars, as in torch
    if isinstance(value, numbers.Number):
        return value
    if isinstance(value, np.ndarray):  # torch converts an array operand to a tensor
        return _wrap(_to_array(value))
    raise TypeError(
        f"{op_name}(): expected a Tensor or a number as operand, got {type(value).__name__}"
    )


# Note [Integer scalars wrap]
# --------------------------
# PyTorch converts a Python int operand of an integer tensor's op to the tensor's dtype as C
# does: through a 64-bit integer (int64, or uint64 from 2**63 on; anything beyond is an
# OverflowError), then modulo 2**bits. So ``uint8_tensor - 3``, ``+ -1`` and ``* 300`` wrap
# around, and even ``uint8_tensor > -1`` compares with 255. numpy instead refuses a Python
# int outside the dtype's range (NEP 50), so the Python entry points convert it first. The
# arithmetic dunders (``x + 300``) go straight to the compiled ``apply_op``, which converts
# nothing: for them numpy's OverflowError remains until the engine converts too.

def integer_scalar(value, tensor):
    """The Python int ``value`` as PyTorch converts it for an op with the integer or bool
    ``tensor`` (Note [Integer scalars wrap]); any other value is returned unchanged."""
    if type(value) is not int or not isinstance(tensor, Tensor):
        return value
    dtype = tensor._data.dtype
    if dtype.kind not in "iub":
        return value
    # a bool tensor and an int compute in int64
    return as_integer(value, np.dtype(np.int64) if dtype.kind == "b" else dtype)


def as_integer(value, dtype):
    """The Python int ``value`` converted to the numpy integer ``dtype`` as PyTorch converts it
    (Note [Integer scalars wrap]), as a Python int."""
    info = np.iinfo(dtype)
    if info.min <= value <= info.max:
        return value
    if value >= 2 ** 64:
        raise OverflowError(f"int too big to convert: {value} does not fit in 64 bits, the widest "
                            f"integer PyTorch converts a Python int through")
    if value < -2 ** 63:
        raise OverflowError(f"can't convert negative int to unsigned: {value} is below -2**63, "
                            f"the smallest integer PyTorch converts a Python int through")
    return _modulo(value, dtype)


_C_TYPES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
            "int64": "int64_t"}


def checked_integer(value, dtype):
    """The Python int ``value`` as a fill value (``fill_``, ``full``, ``masked_fill``) of the
    numpy integer ``dtype``: PyTorch checks these conversions, and lets an unsigned dtype take
    a negative number no larger than its maximum, which wraps (-1 is 255 in uint8). A Python
    float is checked too (NaN, inf, 1e10 in int32 are errors), and truncated by the fill."""
    info = np.iinfo(dtype)
    if type(value) is float:
        if info.min <= value <= info.max:
            return value
        raise RuntimeError(
            f"value cannot be converted to type {_C_TYPES[dtype.name]} without overflow: {value} "
            f"is outside [{info.min}, {info.max}], the range of {dtype.name}")
    if info.min <= value <= info.max:
        return value
    if value >= 2 ** 64:  # beyond what PyTorch's argument parser takes (Note [Integer scalars wrap])
        raise OverflowError(f"int too big to convert: {value} does not fit in 64 bits")
    if value < -2 ** 63:
        raise OverflowError(f"can't convert negative int to unsigned: {value} is below -2**63")
    if info.min == 0 and -info.max <= value < 0:
        return _modulo(value, dtype)
    raise RuntimeError(
        f"value cannot be converted to type {_C_TYPES[dtype.name]} without overflow: {value} "
        f"is outside [{info.min}, {info.max}], the range of {dtype.name}")


def _modulo(value, dtype):
    """``value`` modulo 2**bits of the integer ``dtype``, in its range (C's integer cast)."""
    bits = dtype.itemsize * 8
    wrapped = value % 2 ** bits
    return wrapped - 2 ** bits if dtype.kind == "i" and wrapped >= 2 ** (bits - 1) else wrapped


def _operands(input, other, op_name):
    """Both operands of a binary op checked, a Python int converted as PyTorch does for an
    integer tensor (Note [Integer scalars wrap])."""
    input = _check_operand(input, op_name)
    other = _check_operand(other, op_name)
    if type(other) is int:
        return input, integer_scalar(other, input)
    if type(input) is int:
        return integer_scalar(input, other), other
    return input, other


def _broadcast_error(a, b):
    """PyTorch's error for two operands whose shapes do not broadcast (None if they do).

    Like torch's ``infer_size``, it names the first mismatch from the right, by its dimension
    in the result.
    """
    shape_a, shape_b = np.shape(a), np.shape(b)
    ndim = max(len(shape_a), len(shape_b))
    for dim in range(ndim - 1, -1, -1):
        offset = ndim - 1 - dim
        size_a = shape_a[len(shape_a) - 1 - offset] if offset < len(shape_a) else 1
        size_b = shape_b[len(shape_b) - 1 - offset] if offset < len(shape_b) else 1
        if size_a != size_b and size_a != 1 and size_b != 1:
            return RuntimeError(f"The size of tensor a ({size_a}) must match the size of tensor b "
                                f"({size_b}) at non-singleton dimension {dim}")
    return None


def _broadcasting(fn):
    """``fn(a, b)`` raising PyTorch's RuntimeError, not numpy's ValueError, for operands that
    do not broadcast (the check costs nothing until numpy fails).

    Two fixed positional parameters, not ``*args``: the wrapper sits on the hottest path
    (``x * y``), where packing arguments would cost more than the call itself.
    """

    def forward(a, b):
        try:
            return fn(a, b)
        except ValueError:
            raise _broadcast_error(a, b) or _reraise() from None  # torch's message replaces numpy's

    forward.__name__ = getattr(fn, "__name__", "forward")
    return forward


def _reraise():
    raise  # noqa: PLE0704  (re-raise the ValueError being handled: shapes were not the cause)


def _integer_operand(a, b):
    """``b`` converted for an op with the array ``a`` when ``b`` is a Python int and ``a`` an
    integer array (Note [Integer scalars wrap])."""
    if type(b) is int and type(a) is np.ndarray and a.dtype.kind in "iu":
        return as_integer(b, a.dtype)
    return b


def _scaled(a, b, alpha):
    """``b * alpha`` for ``a + alpha * b``; with a Python int ``b`` and an integer ``a`` the
    product wraps to ``a``'s dtype, as PyTorch's integer arithmetic does."""
    b = _integer_operand(a, b)
    if alpha == 1:
        return b
    product = b * alpha
    if type(product) is int and type(a) is np.ndarray and a.dtype.kind in "iu":
        return _modulo(product, a.dtype)
    return product


# Note [Half precision arithmetic]
# -------------------------------
# PyTorch computes float16 arithmetic in float32 and rounds the result once. numpy does the
# same for two float16 arrays, but a Python number meets a float16 array as float16 (NEP 50),
# so ``half * 1e5`` would be inf where torch gives 49984 for 0.5. PyTorch keeps the number of
# ``mul`` and ``div`` in float32: ``float16(float32(a) * float32(number))``; ``add``, ``sub``
# and ``rsub`` round the number to float16 first, which is numpy's result already. (With an
# ``alpha``, PyTorch's own float16 result depends on the tensor's length: below 32 elements
# ``alpha * b`` is rounded to float16, from 32 on it is not; gradviz keeps numpy's rule.)
# The forwards and fast backward rules of mul and div below follow it. The arithmetic
# dunders go to the compiled kernels, which use numpy's rule: for them the engine has to
# leave float16 to these forwards.

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def _half_with_number(ufunc, a, b):
    """``ufunc(a, b)``, computed in float32 and rounded once when ``a`` is a float16 array and
    ``b`` a Python number (Note [Half precision arithmetic])."""
    if type(a) is np.ndarray and a.dtype == _F16 and (type(b) is float or type(b) is int):
        return ufunc(a.astype(_F32), np.float32(b)).astype(_F16)
    return ufunc(a, b)


def _add_forward(a, b, alpha=1):
    if alpha != 1:  # one rounding, as PyTorch (Note [Whole-array kernels] in gradviz_ext/_ops.py)
        fused = _ext_ops.fused_add(a, b, alpha)
        if fused is not None:
            return fused
    try:
        return np.add(a, _scaled(a, b, alpha))
    except ValueError:
        raise _broadcast_error(a, b) or _reraise() from None  # torch's message replaces numpy's


def _sub_forward(a, b, alpha=1):
    if alpha != 1:
        fused = _ext_ops.fused_add(a, b, -alpha)
        if fused is not None:
            return fused
    try:
        return np.subtract(a, _scaled(a, b, alpha))
    except ValueError:
        raise _broadcast_error(a, b) or _reraise() from None  # torch's message replaces numpy's


def _mul_saves(needs):
    # like PyTorch's MulBackward0: keep `other` only if `self` needs grad, and vice versa
    if needs[0]:
        return ((1, 0) if needs[1] else (1,)), False
    return ((0,) if needs[1] else ()), False


# ---- add / sub --------------------------------------------------------------------------

def _add_fast(ctx, g):
    alpha = ctx.attrs["alpha"]
    return g, (g * alpha if alpha != 1 else g)


def _sub_fast(ctx, g):
    alpha = ctx.attrs["alpha"]
    return g, (-g * alpha if alpha != 1 else -g)


ADD = Op("add", "AddBackward0",
         forward=_add_forward,
         backward=lambda ctx, g: (g, g * ctx.alpha if ctx.alpha != 1 else g),
         fast_backward=_add_fast, dtype=promote, kernel=_ext_ops.KERNEL_ADD, saved={"alpha": Attr("alpha")})

SUB = Op("sub", "SubBackward0",
         forward=_sub_forward,
         backward=lambda ctx, g: (g, -g * ctx.alpha if ctx.alpha != 1 else -g),
         fast_backward=_sub_fast, dtype=promote, kernel=_ext_ops.KERNEL_SUB, saved={"alpha": Attr("alpha")})

def legacy_alpha(name, args, kwargs):
    """``p.add_(-lr, grad)``, the pre-1.5 overload ``(Number alpha, Tensor other)`` of add and
    sub in old optimizer code: rewritten to ``(grad, alpha=-lr)`` with torch's deprecation
    warning (given once per process, as torch's)."""
    if (len(args) == 2 and isinstance(args[0], numbers.Number) and not isinstance(args[0], bool)
            and isinstance(args[1], Tensor) and "alpha" not in kwargs):
        from .._tensor import _warn_once

        _warn_once("deprecated alpha overload",
                   f"This overload of {name} is deprecated:\n\t{name}(Number alpha, Tensor other)\n"
                   f"Consider using one of the following signatures instead:\n\t{name}(Tensor other, "
                   "*, Number alpha = 1)", stacklevel=4)
        return (args[1],), {**kwargs, "alpha": args[0]}
    return args, kwargs


@declare(method=True, inplace=("add_", "__iadd__"), out=True)
def add(input, other, *args, alpha=1):
    """``input + alpha * other`` with broadcasting."""
    if args:
        if alpha != 1 or len(args) != 1:
            raise TypeError("add() received an invalid combination of arguments - got unrecognized "
                            "keyword arguments: alpha" if alpha != 1 else
                            f"add() takes 2 positional arguments but {2 + len(args)} were given")
        rewritten, extra = legacy_alpha("add", (other, *args), {})
        if "alpha" not in extra:  # not (Number, Tensor)
            raise TypeError(f"add() takes 2 positional arguments but {2 + len(args)} were given")
        (other,), alpha = rewritten, extra["alpha"]
    return apply(ADD, *_operands(input, other, "add"), alpha=alpha)


def _check_not_bool(*operands):
    if len(operands) == 2 and all(isinstance(v, Tensor) and v.dtype is _dtypes.bool for v in operands):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
            "or `logical_xor()` operator instead."
        )
    for value in operands:
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, Tensor)
                                                   and value.dtype is _dtypes.bool):
            raise RuntimeError(
                "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead."
            )


@declare(method=True, inplace=("sub_", "__isub__"), out=True)
def sub(input, other, *args, alpha=1):
    """``input - alpha * other`` with broadcasting."""
    if args:
        if alpha != 1 or len(args) != 1:
            raise TypeError("sub() received an invalid combination of arguments - got unrecognized "
                            "keyword arguments: alpha" if alpha != 1 else
                            f"sub() takes 2 positional arguments but {2 + len(args)} were given")
        rewritten, extra = legacy_alpha("sub", (other, *args), {})
        if "alpha" not in extra:  # not (Number, Tensor)
            raise TypeError(f"sub() takes 2 positional arguments but {2 + len(args)} were given")
        (other,), alpha = rewritten, extra["alpha"]
    _check_not_bool(input, other)
    return apply(SUB, *_operands(input, other, "sub"), alpha=alpha)


@declare(name=False, method="__rsub__")
def rsub(input, other):
    """``other - input`` for a Python number ``other`` (``2 - x``)."""
    if isinstance(other, Tensor):
        return sub(other, input)
    _check_not_bool(input, other)
    return apply(RSUB, input, other=integer_scalar(_check_operand(other, "rsub"), input))


RSUB = Op("rsub", "RsubBackward1",
          forward=lambda a, other: np.subtract(other, a),
          backward=lambda ctx, g: (-g,), fast_backward=lambda ctx, g: (-g,),
          dtype=lambda a, other: _dtypes.result_type(a, other), saved={"alpha": Attr("alpha", default=1)})


# ---- mul / div --------------------------------------------------------------------------

@_broadcasting
def _mul_forward(a, b):
    return _half_with_number(np.multiply, _integer_operand(b, a), _integer_operand(a, b))


MUL = Op("mul", "MulBackward0",
         forward=_mul_forward,
         backward=lambda ctx, g: (
             g * ctx.input(1) if ctx.needs_input_grad[0] else None,
             g * ctx.input(0) if ctx.needs_input_grad[1] else None,
         ),
         fast_backward=lambda ctx, g: (
             _half_with_number(np.multiply, g, ctx.data(1)) if ctx.needs_input_grad[0] else None,
             g * ctx.data(0) if ctx.needs_input_grad[1] else None,
         ),
         saves=_mul_saves, dtype=promote, kernel=_ext_ops.KERNEL_MUL, saved={"self": SELF, "other": OTHER})


@declare(method=True, inplace=("mul_", "__imul__"), out=True)
def mul(input, other):
    """Elementwise product with broadcasting."""
    return apply(MUL, *_operands(input, other, "mul"))


def _div_backward(ctx, g):
    b = ctx.input(1)
    grad_a = g / b if ctx.needs_input_grad[0] else None
    grad_b = -g * ctx.input(0) / (b * b) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _div_fast(ctx, g):
    b = ctx.data(1)
    grad_a = _half_with_number(np.true_divide, g, b) if ctx.needs_input_grad[0] else None
    grad_b = -g * ctx.data(0) / (b * b) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


@_broadcasting
def _true_divide_forward(a, b):
    return _half_with_number(np.true_divide, a, b)


DIV = Op("div", "DivBackward0",
         forward=_true_divide_forward, backward=_div_backward, fast_backward=_div_fast,
         saves=lambda needs: ((0, 1) if needs[1] else (1,), False),
         dtype=promote_float, kernel=_ext_ops.KERNEL_DIV, saved={"self": SELF, "other": OTHER})


def _integer_division_check(a, b):
    if np.asarray(b).dtype.kind in "iub" and np.asarray(a).dtype.kind in "iub" and np.any(np.asarray(b) == 0):
        raise RuntimeError("ZeroDivisionError")


_TRUE_DIVISION = object()  # div's rounding_mode when none is passed (torch's div.Tensor)


@declare(method=True, inplace=("div_", "__itruediv__"), out=True)
def div(input, other, *, rounding_mode=_TRUE_DIVISION):
    """Elementwise division with broadcasting: true division (integers give floats), or
    rounded with ``rounding_mode="trunc"`` or ``"floor"`` (integers stay integers)."""
    if rounding_mode is _TRUE_DIVISION:
        return apply(DIV, _check_operand(input, "div"), _check_operand(other, "div"))
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                         f"found '{rounding_mode}'")
    op = DIV_MODE if rounding_mode is None else DIV_ROUNDED
    return apply(op, *_operands(input, other, "div"), mode=rounding_mode)


def _rounded_division_forward(a, b, mode):
    try:
        return _rounded_division(a, b, mode)
    except ValueError:
        raise _broadcast_error(a, b) or _reraise() from None  # torch's message replaces numpy's


def _rounded_division(a, b, mode):
    if np.asarray(a).dtype.kind in "iub" and np.asarray(b).dtype.kind in "iub":
        _integer_division_check(a, b)
        quotient = np.floor_divide(a, b)
        if mode == "trunc":  # round toward zero: undo floor's step down for inexact negatives
            inexact = np.remainder(a, b) != 0
            quotient = quotient + (inexact & ((np.asarray(a) < 0) != (np.asarray(b) < 0)))
        return quotient
    if mode == "floor":  # numpy's floor division is torch's div_floor_floating, step for step
        return np.floor_divide(a, b)  # (the quotient of fmod, not floor(a / b): 1 // 0.1 is 9)
    return np.trunc(np.true_divide(a, b))


def _saves_divisor(needs):
    """The divisor, and the dividend for the divisor's gradient (rounded too, as PyTorch's
    node saves them whatever the mode)."""
    return ((0, 1) if needs[1] else (1,)), False


DIV_MODE = Op("div_mode", "DivBackward2", forward=lambda a, b, mode: _true_divide_forward(a, b),
              backward=_div_backward, saves=_saves_divisor, dtype=promote_float,
              saved={"self": Input(0, needed_by=1), "other": OTHER, "rounding_mode": Attr("mode")})
DIV_ROUNDED = Op("div_rounded", "DivBackward2", forward=_rounded_division_forward,
                 backward=lambda ctx, g: (g * 0 if ctx.needs_input_grad[0] else None,
                                          g * 0 if ctx.needs_input_grad[1] else None),
                 dtype=promote, saves=_saves_divisor)


RECIPROCAL = Op("reciprocal", "ReciprocalBackward0",
                forward=lambda a: np.reciprocal(a),
                backward=lambda ctx, g: (-g * ctx.output() * ctx.output(),),
                fast_backward=lambda ctx, g: (-g * ctx.output_data() * ctx.output_data(),),
                saves=saves_output, dtype=promote_float, saved={"result": RESULT})


@declare(method=True, inplace=True, out=True)
def reciprocal(input):
    """``1 / input``, elementwise (integers are promoted to the default float dtype).

    Mirrors ``torch.reciprocal``."""
    return apply(RECIPROCAL, input)


def rdiv(input, other):
    """``other / input`` as PyTorch's ``Tensor.__rtruediv__`` computes it, for a number or a
    tensor ``other``: ``input.reciprocal() * other`` (its nodes, and its bits, which can differ
    from a division's by one rounding)."""
    if isinstance(other, Tensor):
        return mul(reciprocal(input), other)
    return mul(reciprocal(input), _check_operand(other, "div"))


NEG = Op("neg", "NegBackward0", forward=np.negative, backward=lambda ctx, g: (-g,),
         fast_backward=lambda ctx, g: (-g,), kernel=_ext_ops.KERNEL_NEG, saved={})


@declare(name=("neg", "negative"), method=("neg", "negative"), inplace=("neg_", "negative_"), out=True)
def neg(input):
    """The negation ``-input``, elementwise. Mirrors ``torch.neg``."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "neg")
    if input.dtype is _dtypes.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead.")
    return apply(NEG, input)


# ---- pow --------------------------------------------------------------------------------

def _pow_scalar_backward(ctx, g):
    p = ctx.exponent
    if p == 0:
        return (g * 0,)
    return (g * (p * pow(ctx.input(0), p - 1)),)  # torch's order: grad * (exp * pow)


def _pow_scalar_fast(ctx, g):
    p = ctx.attrs["exponent"]
    if p == 0:
        return (g * 0,)
    return (g * (p * _pow_scalar_forward(ctx.data(0), p - 1)),)


def _integer_power(a, b):
    """``a ** b`` for integers as PyTorch computes it: a negative exponent gives 0, except for
    bases 1 and -1 (numpy refuses negative integer powers)."""
    a, b = np.asarray(a), np.asarray(b)
    negative = b < 0
    if not np.any(negative):
        return np.power(a, b)
    result = np.power(a, np.where(negative, 0, b))
    special = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(negative, special, result).astype(result.dtype)


def _power(a, b):
    if np.asarray(a).dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
        return _integer_power(a, b)
    return np.power(a, b)


def _pow_scalar_forward(a, exponent):
    """``a ** exponent``; for float32 and float64 the exponents torch's CPU kernel computes
    without ``pow``, as it does: 3 as ``a * a * a``, -2 as ``1 / (a * a)``, 0.5 as ``sqrt``
    and -0.5 as ``1 / sqrt`` (its sqrt and rsqrt kernels). numpy's correctly rounded ``pow``
    gave other bits for a third of float32 cubes (2 and -1 were the same already)."""
    if a.dtype.kind in "iub" and isinstance(exponent, int) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if (a.dtype == np.float32 or a.dtype == np.float64) and type(exponent) in (int, float):
        if exponent == 3:
            return a * a * a
        if exponent == -2:
            return 1 / (a * a)
        if exponent == 0.5:
            return np.sqrt(a)
        if exponent == -0.5:
            return 1 / np.sqrt(a)
    return np.power(a, exponent)


POW_SCALAR = Op("pow_scalar", "PowBackward0",
                forward=_pow_scalar_forward,
                backward=_pow_scalar_backward, fast_backward=_pow_scalar_fast,
                saves=saves_inputs(0),
                dtype=lambda a, exponent: _dtypes.result_type(a, exponent),
                saved={"self": SELF, "exponent": Attr("exponent")})


def _pow_tensor_backward(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    grad_a = g * b * pow(a, b - 1) if ctx.needs_input_grad[0] else None
    grad_b = None
    if ctx.needs_input_grad[1]:
        # d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (PyTorch's convention)
        mask = logical_and(eq(a, 0), ge(b, 0))
        grad_b = g * where_zero(mask, ctx.output() * log(where_one(mask, a)))
    return grad_a, grad_b


POW_TENSOR = Op("pow", "PowBackward1",
                forward=_broadcasting(_power), backward=_pow_tensor_backward,
                saves=lambda needs: ((0, 1), bool(needs[1])), dtype=promote,
                saved={"self": SELF, "exponent": OTHER, "result": RESULT})


def _pow_base_backward(ctx, g):
    base = ctx.base
    if base == 0:
        return (g * where_zero(ge(ctx.input(0), 0), ctx.output() * 0.0),)
    return (g * ctx.output() * float(np.log(base)),)


POW_BASE = Op("pow_base", "PowBackward2",
              forward=lambda a, base: _power(base, a),
              backward=_pow_base_backward, saves=lambda needs: ((0,), True),
              dtype=lambda a, base: _dtypes.result_type(a, base),
              saved={"self": Attr("base"), "exponent": SELF, "result": RESULT})


@declare(method=("pow", "__pow__"), inplace=("pow_", "__ipow__"), out=True)
def pow(input, exponent):
    """``input ** exponent``; either side may be a Python number."""
    if not isinstance(input, Tensor):
        return apply(POW_BASE, exponent, base=_check_operand(input, "pow"))
    if isinstance(exponent, Tensor):
        return apply(POW_TENSOR, input, exponent)
    return apply(POW_SCALAR, input, exponent=_check_operand(exponent, "pow"))


# ---- unary math -------------------------------------------------------------------------

EXP = Op("exp", "ExpBackward0", forward=np.exp,
         backward=lambda ctx, g: (g * ctx.output(),),
         fast_backward=lambda ctx, g: (g * ctx.output_data(),),
         saves=saves_output, dtype=promote_float, saved={"result": RESULT})
LOG = Op("log", "LogBackward0", forward=np.log,
         backward=lambda ctx, g: (g / ctx.input(0),),
         fast_backward=lambda ctx, g: (g / ctx.data(0),),
         saves=saves_inputs(0), dtype=promote_float, saved={"self": SELF})
SIN = Op("sin", "SinBackward0", forward=np.sin,
         backward=lambda ctx, g: (g * cos(ctx.input(0)),),
         fast_backward=lambda ctx, g: (g * np.cos(ctx.data(0)),),
         saves=saves_inputs(0), dtype=promote_float, saved={"self": SELF})
COS = Op("cos", "CosBackward0", forward=np.cos,
         backward=lambda ctx, g: (-g * sin(ctx.input(0)),),
         fast_backward=lambda ctx, g: (-g * np.sin(ctx.data(0)),),
         saves=saves_inputs(0), dtype=promote_float, saved={"self": SELF})
def _tanh_backward_data(ctx, g):
    y = ctx.output_data()
    if y.dtype == np.float32:
        # torch's kernel fuses ``1 - y*y`` into one FMA, so a hand-written ``(1 - h**2) * dh``
        # is not bit-equal to the autograd gradient there ("becoming a backprop ninja" shows
        # exact: False for hpreact). y*y is exact in float64: one rounding, as in the FMA.
        if y.ndim and g.dtype == np.float32 and g.shape == y.shape:
            # the same operations on two arrays of our own (Note [Pointwise temporaries])
            wide = y.astype(np.float64)
            np.multiply(wide, wide, out=wide)
            np.subtract(1, wide, out=wide)
            out = wide.astype(np.float32)
            return (np.multiply(g, out, out=out),)
        return (g * (1 - y.astype(np.float64) ** 2).astype(np.float32),)
    return (g * (1 - y * y),)


def _tanh_backward(ctx, g):
    y = ctx.output()
    if y.dtype is _dtypes.float32:  # rounded as _tanh_backward_data (and torch's FMA)
        wide = y.double()
        return (g * (1 - wide * wide).float(),)
    return (g * (1 - y * y),)


TANH = Op("tanh", "TanhBackward0", forward=np.tanh,
          backward=_tanh_backward,
          fast_backward=_tanh_backward_data,
          saves=saves_output, dtype=promote_float, saved={"result": RESULT})
SQRT = Op("sqrt", "SqrtBackward0", forward=np.sqrt,
          backward=lambda ctx, g: (g / (2 * ctx.output()),),
          fast_backward=lambda ctx, g: (g / (2 * ctx.output_data()),),
          saves=saves_output, dtype=promote_float, saved={"result": RESULT})


# Note [Pointwise temporaries]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# sigmoid's forward and backward and tanh's float32 backward run once per gate per time step
# of a recurrent layer: on its small arrays the allocations cost as much as the arithmetic.
# They compute the same operations in the same order, each result rounded as before, but into
# one array of their own (``out=``) instead of a new temporary per operation, so the results
# are bit-identical. 0-d arrays (numpy gives scalars, which take no ``out=``), other dtypes and
# a gradient of another dtype or shape keep the plain expressions.

def _sigmoid_forward(a):
    # torch's formula: exp(-x) overflowing to inf for very negative x gives exactly 0 (a float32
    # sigmoid(-100) is 0 there, not a denormal), and the op is quiet about the overflow
    if a.ndim and a.dtype.kind == "f":  # Note [Pointwise temporaries]
        out = np.negative(a)
        np.exp(out, out=out)
        np.add(1, out, out=out)
        return np.divide(1, out, out=out)
    return 1 / (1 + np.exp(-a))


def _sigmoid_backward_data(ctx, g):
    y = ctx.output_data()
    if y.ndim and g.dtype == y.dtype and g.shape == y.shape:  # Note [Pointwise temporaries]
        out = np.subtract(1, y)
        np.multiply(g, out, out=out)
        return (np.multiply(out, y, out=out),)
    return (g * (1 - y) * y,)


SIGMOID = Op("sigmoid", "SigmoidBackward0", forward=_sigmoid_forward,
             backward=lambda ctx, g: (g * (1 - ctx.output()) * ctx.output(),),
             fast_backward=_sigmoid_backward_data,
             saves=saves_output, dtype=promote_float, saved={"result": RESULT})


def _threshold_backward_forward(g, result):
    out = _ext_ops.threshold_backward_kernel(g, result)  # Note [Whole-array kernels]
    if out is not None:
        return out
    # g * mask is several times faster than np.where on a random mask; "+ 0.0" turns the -0.0
    # of a negative g times False into the 0.0 torch gives. inf or NaN times False would be
    # NaN where torch gives 0, so a gradient that is not finite takes np.where. A NaN result
    # lets g through, as torch's ``result <= 0 ? 0 : g`` does.
    mask = ~(result <= 0)
    if g.dtype.kind != "f" or not np.isfinite(g).all():
        return np.where(mask, g, np.zeros((), dtype=g.dtype))
    out = np.multiply(g, mask, dtype=g.dtype)
    out += 0.0
    return out


# Note [Ties of maximum and minimum]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's relu and clamp with number bounds keep the input where it equals a bound, so
# relu(-0.0) and clamp(-0.0, min=0) are -0.0, at every size and in float32 and float64.
# numpy's maximum and minimum return their second operand where the two are equal (in the
# compiled loops, SIMD or not), so the bound goes first. The sign of a zero is all that
# differs (tests/ops/test_ties_vs_torch.py). Not so for torch.maximum, torch.minimum and
# clamp with tensor bounds: which operand PyTorch returns for a tie depends on the size and
# dtype there (its vectorized body and its scalar tail differ), so they are left as numpy's.
def _relu_forward(a):
    if a.dtype == np.bool_:  # numpy's maximum of bools would be a silent "or"
        raise RuntimeError("Boolean inputs not supported for relu")
    return np.maximum(np.zeros((), dtype=a.dtype), a)


RELU = Op("relu", "ReluBackward0",
          forward=_relu_forward,
          backward=lambda ctx, g: (threshold_backward(g, ctx.output()),),
          fast_backward=lambda ctx, g: (_threshold_backward_forward(g, ctx.output_data()),),
          saves=saves_output, saved={"result": RESULT})

# relu's gradient as an op of its own, like PyTorch: differentiable in the gradient (the same
# mask again) and in the result (zero almost everywhere), so Hessians through relu work.
THRESHOLD_BACKWARD = Op(
    "threshold_backward", "ThresholdBackwardBackward0",
    forward=_threshold_backward_forward,
    backward=lambda ctx, gg: (threshold_backward(gg, ctx.input(1)) if ctx.needs_input_grad[0] else None,
                              gg * 0 if ctx.needs_input_grad[1] else None),
    saves=saves_inputs(1), dtype=promote,
    # relu's (threshold 0, the result as its self) and F.threshold's (the input, its threshold)
    saved={"self": Input(1), "threshold": Attr("threshold", default=0)})


def threshold_backward(grad, result):
    return apply(THRESHOLD_BACKWARD, grad, result)

ABS = Op("abs", "AbsBackward0", forward=np.abs,
         backward=lambda ctx, g: (g * sign(ctx.input(0)),),
         fast_backward=lambda ctx, g: (g * np.sign(ctx.data(0)),), saves=saves_inputs(0),
         saved={"self": SELF})

def _sign_backward(ctx, g):
    """PyTorch's ``zeros_like(grad)``: a constant, so the gradient through sign does not require
    grad even under ``create_graph=True`` (``b.sign() * a``: the gradient for b is a plain zero,
    and a second derivative through it finds b unused)."""
    from ._creation import zeros_like

    return (zeros_like(g),)


def _sign_forward(a):
    """torch's sign: 0 for NaN (numpy gives NaN), a bool tensor unchanged (numpy raises)."""
    if a.dtype == np.bool_:
        return a.copy()
    out = np.sign(a)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        if nan.any():
            out = np.where(nan, np.zeros((), dtype=a.dtype), out)
    return out


SIGN = Op("sign", "SignBackward0", forward=_sign_forward, backward=_sign_backward, saved={})


@declare(method=True, inplace=True, out=True)
def exp(input):
    """The exponential ``e ** input``, elementwise. Mirrors ``torch.exp``."""
    return apply(EXP, input)


@declare(method=True, inplace=True, out=True)
def log(input):
    """The natural logarithm, elementwise (``-inf`` at 0, NaN below). Mirrors ``torch.log``."""
    return apply(LOG, input)


@declare(method=True, inplace=True, out=True)
def sin(input):
    """The sine, elementwise (radians). Mirrors ``torch.sin``."""
    return apply(SIN, input)


@declare(method=True, inplace=True, out=True)
def cos(input):
    """The cosine, elementwise (radians). Mirrors ``torch.cos``."""
    return apply(COS, input)


@declare(method=True, inplace=True, out=True)
def tanh(input):
    """The hyperbolic tangent, elementwise; its derivative is ``1 - tanh(x) ** 2``.

    Mirrors ``torch.tanh``."""
    return apply(TANH, input)


@declare(method=True, inplace=True, out=True)
def sqrt(input):
    """The square root, elementwise (NaN for negative entries). Mirrors ``torch.sqrt``."""
    return apply(SQRT, input)


@declare(method=True, inplace=True, out=True)
def sigmoid(input):
    """The logistic sigmoid ``1 / (1 + exp(-input))``, elementwise. Mirrors ``torch.sigmoid``."""
    return apply(SIGMOID, input)


@declare(method=True, inplace=True)
def relu(input):
    """The rectified linear unit ``max(input, 0)``, elementwise. Mirrors ``torch.relu``."""
    return apply(RELU, input)


@declare(name=("abs", "absolute"), method=("abs", "absolute", "__abs__"), inplace=("abs_", "absolute_"), out=True)
def abs(input):  # noqa: A001  (torch's name)
    """The absolute value, elementwise; ``absolute`` is the same function. Mirrors ``torch.abs``."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "abs")
    if input.dtype is _dtypes.bool:
        raise NotImplementedError('"abs_cpu" not implemented for \'Bool\'')
    return apply(ABS, input)


@declare(method=True, inplace=True, out=True)
def sign(input):
    """The sign (-1, 0 or 1) of each element; its gradient is zero. Mirrors ``torch.sign``."""
    return apply(SIGN, input)


def _clamp_forward(a, min=None, max=None):
    if a.dtype.kind != "f":
        return np.clip(a, min, max)
    # the bounds first: a value equal to a bound stays (Note [Ties of maximum and minimum])
    out = a if min is None else np.maximum(min, a)
    return out if max is None else np.minimum(max, out)


def _clamp_backward(ctx, g):
    x = ctx.input(0)
    keep = None
    if ctx.min is not None:
        keep = ge(x, ctx.min)
    if ctx.max is not None:
        upper = le(x, ctx.max)
        keep = upper if keep is None else logical_and(keep, upper)
    # a select, not a product with the mask: a NaN gradient outside the range stays out, as torch
    return (where_zero(logical_not(keep), g),)


def _clamp_dtype(a, min=None, max=None):  # noqa: A002
    # an integer tensor clamped to a float bound is float, as in torch (clamp(min=2.5))
    return _dtypes.result_type(a, *(bound for bound in (min, max) if bound is not None))


CLAMP = Op("clamp", "ClampBackward1", forward=_clamp_forward, backward=_clamp_backward,
           saves=saves_inputs(0), dtype=_clamp_dtype,
           saved={"self": SELF, "min": Attr("min"), "max": Attr("max")})


def _clamp_tensor_forward(a, *bounds, has_min, has_max):
    low = bounds[0] if has_min else None
    high = bounds[-1] if has_max else None  # (clamp's bounds: both, one of them None)
    out = a
    if low is not None:
        out = np.maximum(out, low)
    if high is not None:
        out = np.minimum(out, high)
    return out


def _clamp_tensor_backward(ctx, g):
    """PyTorch's ``clamp_backward_min_max``: the input's gradient where it is inside the
    bounds; a bound's gradient where it was chosen (``min`` only while it is below ``max``).
    ``clamp`` passes both bounds (one may be None), ``clamp_min``/``clamp_max`` theirs."""
    x = ctx.input(0)
    low = ctx.input(1) if ctx.has_min else None
    high = ctx.input(len(ctx.needs_input_grad) - 1) if ctx.has_max else None
    needs = ctx.needs_input_grad
    both = len(needs) == 3
    grads = []
    if needs[0]:
        keep = None
        if low is not None:
            keep = ge(x, low)
        if high is not None:
            keep = le(x, high) if keep is None else logical_and(keep, le(x, high))
        grads.append(where_zero(logical_not(keep), g))
    else:
        grads.append(None)
    if low is not None:
        chosen = lt(x, low)
        if high is not None:
            chosen = logical_and(chosen, lt(low, high))
        grads.append(where_zero(logical_not(chosen), g) if needs[1] else None)
    elif both:
        grads.append(None)
    if high is not None:
        chosen = gt(x, high)
        if low is not None:
            chosen = logical_or(chosen, lt(high, low))
        grads.append(where_zero(logical_not(chosen), g) if needs[-1] else None)
    elif both:
        grads.append(None)
    return tuple(grads)


def _clamp_tensor_op(name, node, saved=None):
    return Op(name, node, forward=_clamp_tensor_forward, backward=_clamp_tensor_backward,
              dtype=promote, saves=lambda needs: (tuple(range(len(needs))), False), saved=saved)


CLAMP_TENSOR = _clamp_tensor_op("clamp_tensor", "ClampBackward0",
                                saved={"self": SELF, "min": Computed(clamp_bound_attr("min")),
                                    "max": Computed(clamp_bound_attr("max"))})
CLAMP_MIN_TENSOR = _clamp_tensor_op("clamp_min_tensor", "ClampMinBackward1",
                                    saved={"self": SELF, "min": Input(1)})
CLAMP_MAX_TENSOR = _clamp_tensor_op("clamp_max_tensor", "ClampMaxBackward1",
                                    saved={"self": SELF, "max": Input(1)})


def clamp_bound(input, bound):
    """A number bound of ``clamp`` as PyTorch converts it for ``input``'s dtype: an int is
    checked against an integer dtype's range ("value cannot be converted ... without
    overflow"); a float makes an integer input compute in the default float dtype."""
    if bound is None or isinstance(bound, Tensor):
        return input, bound
    if isinstance(bound, np.generic):
        bound = bound.item()
    kind = input._data.dtype.kind
    if type(bound) is int and kind in "iu":
        checked_integer(bound, input._data.dtype)
    elif type(bound) is int:
        checked_integer(bound, np.dtype(np.int64))
    elif isinstance(bound, float) and kind in "iub":
        input = to(input, _dtypes.get_default_dtype())
    return input, bound


@declare(name=("clamp", "clip"), method=("clamp", "clip"), inplace=("clamp_", "clip_"), out=True)
def clamp(input, min=None, max=None):  # noqa: A002
    """Clamp into ``[min, max]`` (numbers or tensors); the gradient passes where the input was
    inside the range, and to a tensor bound where it was chosen."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    for bound in (min, max):
        if isinstance(bound, Tensor):
            check_saveable(bound, input)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if not all(b is None or isinstance(b, Tensor) for b in (min, max)):
            raise TypeError(
                "clamp() received an invalid combination of arguments - got "
                f"(min={type(min).__name__}, max={type(max).__name__}): the bounds must be both "
                "numbers or both tensors (use torch.tensor(number) for the other one)")
        # both bounds, one may be None: torch's node has an edge for each, as here
        return apply(CLAMP_TENSOR, input, min, max, has_min=min is not None,
                     has_max=max is not None)
    input, min = clamp_bound(input, min)
    input, max = clamp_bound(input, max)
    return apply(CLAMP, input, min=min, max=max)


# ---- where with a constant mask (used by backward rules) --------------------------------

WHERE_ZERO = Op("where_zero", "WhereBackward0",
                forward=lambda a, mask, mask_tensor: np.where(mask, np.zeros((), dtype=a.dtype), a),
                backward=lambda ctx, g: (where_zero(ctx.mask_tensor, g),),
                saved={"condition": Computed(tensor_attr("condition_tensor"))})


def where_zero(mask, input):
    """``input`` with zeros where ``mask`` (a bool tensor, not differentiated) is true."""
    return apply(WHERE_ZERO, input, mask=mask._data, mask_tensor=mask)


def where_one(mask, input):
    return where_zero(mask, input) + to(mask, input.dtype)


# ---- comparisons and logic (not differentiable) -----------------------------------------

def _comparison(name, fn, symbol):
    op = Op(name, name, forward=_broadcasting(fn), backward=None, dtype=promote)

    def compare(input, other):
        if other is None and name in ("eq", "ne"):  # ``t == None`` is False, as in torch
            return name == "ne"
        return apply(op, *_operands(input, other, name))

    compare.__name__ = name
    compare.__doc__ = (f"``input {symbol} other`` elementwise, as a bool tensor (broadcasts; not "
                       f"differentiable). Mirrors ``torch.{name}``.")
    return compare


lt = _comparison("lt", np.less, "<")
declare(method=("lt", "__lt__"), inplace=True, out=True)(lt)
le = _comparison("le", np.less_equal, "<=")
declare(method=("le", "__le__"), inplace=True, out=True)(le)
gt = _comparison("gt", np.greater, ">")
declare(method=("gt", "__gt__"), inplace=True, out=True)(gt)
ge = _comparison("ge", np.greater_equal, ">=")
declare(method=("ge", "__ge__"), inplace=True, out=True)(ge)
eq = _comparison("eq", np.equal, "==")
declare(method=("eq", "__eq__"), inplace=True, out=True)(eq)
ne = _comparison("ne", np.not_equal, "!=")
declare(method=("ne", "__ne__"), inplace=True, out=True)(ne)

_AND = Op("logical_and", "logical_and", forward=_broadcasting(np.logical_and), backward=None)
_OR = Op("logical_or", "logical_or", forward=_broadcasting(np.logical_or), backward=None)
_NOT = Op("logical_not", "logical_not", forward=np.logical_not, backward=None)
_BITWISE_AND = Op("bitwise_and", "bitwise_and", forward=_broadcasting(np.bitwise_and),
                  backward=None, dtype=promote)
_BITWISE_OR = Op("bitwise_or", "bitwise_or", forward=_broadcasting(np.bitwise_or), backward=None,
                 dtype=promote)
_BITWISE_NOT = Op("bitwise_not", "bitwise_not", forward=lambda a: _invert_forward(a), backward=None)


@declare(method=True, inplace=True, out=True)
def logical_and(input, other):
    """Elementwise logical AND of the truth values of ``input`` and ``other``.

    Mirrors ``torch.logical_and``."""
    _logical_operands("logical_and", input, other)
    return apply(_AND, input, other)


def _logical_operands(op: str, input, other) -> None:
    """torch's logical binary ops take two tensors, never a number (bitwise ones do)."""
    for position, (name, value) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(value, Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, "
                            f"not {type(value).__name__}")


@declare(method=True, inplace=True, out=True)
def logical_or(input, other):
    """Elementwise logical OR of the truth values of ``input`` and ``other``.

    Mirrors ``torch.logical_or``."""
    _logical_operands("logical_or", input, other)
    return apply(_OR, input, other)


@declare(method=True, inplace=True, out=True)
def logical_not(input):
    """Elementwise logical NOT of the truth values of ``input``. Mirrors ``torch.logical_not``."""
    return apply(_NOT, input)


def _bitwise(op, input, other):
    """``input & other``, ``|`` or ``^``: integer and bool dtypes only (after promotion, so a
    float number is refused too), as PyTorch's ``bitwise_*_cpu`` kernels, which name the dtype
    they lack."""
    input, other = _operands(input, other, op.name)
    result = _dtypes.result_type(input, other)
    if result.is_floating_point:
        raise NotImplementedError(f'"{op.name}_cpu" not implemented for \'{TYPE_WORDS[result.name]}\'')
    return apply(op, input, other)


def _shift_forward(shift, left):
    """numpy's ``shift``, with PyTorch's result where C leaves it undefined: a shift by a
    negative amount or by the dtype's width or more gives 0 to the left, and the sign (0 or
    -1) to the right (``int16(1) << 20`` is 0, ``int64(-8) >> 64`` is -1)."""
    def forward(a, b):
        bits = np.dtype(a.dtype).itemsize * 8 if isinstance(a, np.ndarray) else 64
        out_of_range = (b < 0) | (b >= bits)
        if not np.any(out_of_range):
            return shift(a, b)
        dtype = np.result_type(a, b)
        result = shift(a, np.where(out_of_range, 0, b).astype(dtype, copy=False))
        fill = 0 if left else np.where(np.less(a, 0), -1, 0)
        return np.where(out_of_range, fill, result).astype(dtype, copy=False)
    return forward


_LSHIFT = Op("lshift", "lshift", forward=_broadcasting(_shift_forward(np.left_shift, True)),
             backward=None, dtype=promote)
_RSHIFT = Op("rshift", "rshift", forward=_broadcasting(_shift_forward(np.right_shift, False)),
             backward=None, dtype=promote)


def _shift(op, input, other):
    """``input << other`` or ``>>``: integer dtypes only (after promotion), as PyTorch's
    ``lshift_cpu``/``rshift_cpu`` kernels, which name the dtype they lack."""
    input, other = _operands(input, other, op.name)
    result = _dtypes.result_type(input, other)
    if result.is_floating_point or result is _dtypes.bool:
        raise NotImplementedError(f'"{op.name}_cpu" not implemented for \'{TYPE_WORDS[result.name]}\'')
    return apply(op, input, other)


@declare(method=("bitwise_left_shift", "__lshift__"), inplace=("bitwise_left_shift_", "__ilshift__"),
         out=True)
def bitwise_left_shift(input, other):
    """``input << other`` elementwise on integers (0 where the shift is negative or as wide as
    the dtype). Mirrors ``torch.bitwise_left_shift``."""
    return _shift(_LSHIFT, input, other)


@declare(method=("bitwise_right_shift", "__rshift__"), inplace=("bitwise_right_shift_", "__irshift__"),
         out=True)
def bitwise_right_shift(input, other):
    """``input >> other`` elementwise on integers, arithmetic (the sign where the shift is
    negative or as wide as the dtype). Mirrors ``torch.bitwise_right_shift``."""
    return _shift(_RSHIFT, input, other)


@declare(name=False, method="__rlshift__")
def _reflected_left_shift(self, other):
    return bitwise_left_shift(other, self)


@declare(name=False, method="__rrshift__")
def _reflected_right_shift(self, other):
    return bitwise_right_shift(other, self)


def _invert_forward(a):
    if a.dtype.kind == "f":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return np.invert(a)


# ---- dtype conversion -------------------------------------------------------------------

TO_COPY = Op("to", "ToCopyBackward0",
             forward=lambda a, dtype, source: a.astype(dtype.numpy),
             backward=lambda ctx, g: (to(g, ctx.source),),
             fast_backward=lambda ctx, g: (g.astype(ctx.attrs["source"].numpy),), saved={})


@declare(name=False, method=True)
def to(input, *args, dtype=None, copy=False, **kwargs):
    """Convert to a dtype (``x.to(gradviz.float64)``); ``"cpu"`` devices are accepted."""
    for arg in args:
        if isinstance(arg, Tensor):
            dtype = arg.dtype
        elif isinstance(arg, (str, device)) or arg is None:
            check_device(arg)
        else:
            dtype = _dtypes.as_dtype(arg)
    check_device(kwargs.pop("device", None))
    kwargs.pop("non_blocking", None)
    memory_format = kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    if dtype is None or (_dtypes.as_dtype(dtype) is input.dtype and not copy):
        converted = input
    else:
        dtype = _dtypes.as_dtype(dtype)
        converted = apply(TO_COPY, input, dtype=dtype, source=input.dtype)
    if memory_format is None or memory_format is _memory_format.preserve_format:
        return converted
    return _shape.contiguous(converted, _memory_format.check(memory_format, "to"))


@declare(method=True)
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether all entries satisfy ``|input - other| <= atol + rtol * |other|`` (not differentiable)."""
    return bool(np.allclose(input._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


# ---- more unary math --------------------------------------------------------------------

_LN2 = float(np.log(2.0))
_LN10 = float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2.0 / np.sqrt(np.pi))

RSQRT = Op("rsqrt", "RsqrtBackward0", forward=lambda a: 1.0 / np.sqrt(a),
           backward=lambda ctx, g: (-0.5 * g * pow(ctx.output(), 3),), saves=saves_output,
           dtype=promote_float, saved={"result": RESULT})
EXP2 = Op("exp2", "Exp2Backward0", forward=np.exp2,
          backward=lambda ctx, g: (g * ctx.output() * _LN2,), saves=saves_output, dtype=promote_float,
          saved={"result": RESULT})
EXPM1 = Op("expm1", "Expm1Backward0", forward=np.expm1,
           backward=lambda ctx, g: (g * (ctx.output() + 1),), saves=saves_output, dtype=promote_float,
           saved={"result": RESULT})
LOG1P = Op("log1p", "Log1PBackward0", forward=np.log1p,
           backward=lambda ctx, g: (g / (ctx.input(0) + 1),), saves=saves_inputs(0), dtype=promote_float,
           saved={"self": SELF})
LOG2 = Op("log2", "Log2Backward0", forward=np.log2,
          backward=lambda ctx, g: (g / (ctx.input(0) * _LN2),), saves=saves_inputs(0), dtype=promote_float,
          saved={"self": SELF})
LOG10 = Op("log10", "Log10Backward0", forward=np.log10,
           backward=lambda ctx, g: (g / (ctx.input(0) * _LN10),), saves=saves_inputs(0), dtype=promote_float,
           saved={"self": SELF})


def _erf_float64(a):
    """erf of an array, in float64 (scipy.special's compiled loop; Note [Special functions]
    in ``_special.py``)."""
    return _scipy_special.erf(a.astype(np.float64, copy=False))


ERF = Op("erf", "ErfBackward0",
         forward=lambda a: _erf_float64(a).astype(a.dtype, copy=False),
         backward=lambda ctx, g: (g * _TWO_OVER_SQRT_PI * exp(-ctx.input(0) * ctx.input(0)),),
         saves=saves_inputs(0), dtype=promote_float, saved={"self": SELF})


@declare(method=True, inplace=True, out=True)
def rsqrt(input):
    """``1 / sqrt(input)``, elementwise. Mirrors ``torch.rsqrt``."""
    return apply(RSQRT, input)


@declare(method=True, inplace=True)
def exp2(input):
    """``2 ** input``, elementwise. Mirrors ``torch.exp2``."""
    return apply(EXP2, input)


@declare(method=True, inplace=True)
def expm1(input):
    """``exp(input) - 1``, elementwise, accurate near 0. Mirrors ``torch.expm1``."""
    return apply(EXPM1, input)


@declare(method=True, inplace=True)
def log1p(input):
    """``log(1 + input)``, elementwise, accurate near 0. Mirrors ``torch.log1p``."""
    return apply(LOG1P, input)


@declare(method=True, inplace=True)
def log2(input):
    """The base-2 logarithm, elementwise. Mirrors ``torch.log2``."""
    return apply(LOG2, input)


@declare(method=True, inplace=True)
def log10(input):
    """The base-10 logarithm, elementwise. Mirrors ``torch.log10``."""
    return apply(LOG10, input)


@declare(method=True, inplace=True)
def erf(input):
    """The Gauss error function, elementwise. Mirrors ``torch.erf``."""
    return apply(ERF, input)


# ---- minimum / maximum / where ----------------------------------------------------------

_MAXIMUM_FORWARD = _broadcasting(np.maximum)
_MINIMUM_FORWARD = _broadcasting(np.minimum)


def _extremum_backward(ctx, g):
    """PyTorch's ``where(a == b, grad / 2, grad)`` with the loser's entries zeroed: ties split
    the gradient in half, and where either is NaN (no winner, no tie) both get all of it."""
    a, b = ctx.input(0), ctx.input(1)
    tie = eq(a, b)
    a_wins = gt(a, b) if ctx.largest else lt(a, b)
    b_wins = lt(a, b) if ctx.largest else gt(a, b)
    half = g * 0.5
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = where(tie, half, where_zero(b_wins, g))
    if ctx.needs_input_grad[1]:
        grad_b = where(tie, half, where_zero(a_wins, g))
    return grad_a, grad_b


MAXIMUM = Op("maximum", "MaximumBackward0", forward=lambda a, b, largest: _MAXIMUM_FORWARD(a, b),
             backward=_extremum_backward, saves=saves_inputs(0, 1), dtype=promote,
             saved={"self": SELF, "other": OTHER})
MINIMUM = Op("minimum", "MinimumBackward0", forward=lambda a, b, largest: _MINIMUM_FORWARD(a, b),
             backward=_extremum_backward, saves=saves_inputs(0, 1), dtype=promote,
             saved={"self": SELF, "other": OTHER})


@declare(method=True, out=True)
def maximum(input, other):
    """Elementwise maximum of two tensors (ties share the gradient equally)."""
    return apply(MAXIMUM, input, _check_operand(other, "maximum"), largest=True)


@declare(method=True, out=True)
def minimum(input, other):
    """The elementwise minimum of ``input`` and ``other`` (broadcasts; NaN wins).

    Mirrors ``torch.minimum``."""
    return apply(MINIMUM, input, _check_operand(other, "minimum"), largest=False)


def _where_forward(a, b, condition, condition_tensor):
    return np.where(condition, a, b)


def _where_backward(ctx, g):
    cond = ctx.condition_tensor
    return (where_zero(logical_not(cond), g) if ctx.needs_input_grad[0] else None,
            where_zero(cond, g) if ctx.needs_input_grad[1] else None)


WHERE = Op("where", "WhereBackward0", forward=_where_forward, backward=_where_backward, dtype=promote)


@declare(out=True)
def where(condition, input=None, other=None):
    """``input`` where ``condition`` is true, else ``other`` (broadcast; numbers allowed).

    With only ``condition``, the indices of its true entries (``nonzero(as_tuple=True)``).
    """
    if input is None and other is None:
        return tuple(_wrap(np.asarray(i, dtype=np.int64)) for i in np.nonzero(condition._data))
    if not isinstance(condition, Tensor):
        raise RuntimeError("where expected condition to be a boolean tensor")
    if condition.dtype is not _dtypes.bool:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{TYPE_WORDS.get(condition.dtype.name, condition.dtype.name)}")
    check_saveable(condition, input, other)
    input, other = _check_operand(input, "where"), _check_operand(other, "where")
    for number, tensor in ((input, other), (other, input)):
        # an int beside an integer tensor takes its dtype, checked as PyTorch converts it
        if type(number) is int and isinstance(tensor, Tensor) and tensor._data.dtype.kind in "iu":
            checked_integer(number, tensor._data.dtype)
        elif type(number) is int:
            checked_integer(number, np.dtype(np.int64))
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        # two numbers: numpy would compute in float64 where torch uses the default dtype
        dtype = _dtypes.result_type(input, other)
        input, other = (_wrap(np.asarray(v, dtype=dtype.numpy)) for v in (input, other))
    try:
        return apply(WHERE, input, other, condition=condition._data, condition_tensor=condition)
    except ValueError:
        raise _where_broadcast_error(condition, input, other) from None


def _where_broadcast_error(condition, input, other):
    """PyTorch's RuntimeError for ``where``'s three operands that do not broadcast, naming the
    first pair that does not (numpy's ValueError names none); the ValueError when they do."""
    arrays = [v._data if isinstance(v, Tensor) else np.asarray(v) for v in (condition, input, other)]
    error = _broadcast_error(arrays[0], arrays[1])
    if error is None:
        try:
            both = np.broadcast_to(0, np.broadcast_shapes(arrays[0].shape, arrays[1].shape))
        except ValueError:
            both = arrays[0]
        error = _broadcast_error(both, arrays[2])
    return error or ValueError("where: the operands do not broadcast")


__all__ = exports(globals(), "rsub", "rdiv", "to")
