"""torch-style dtypes backed by numpy dtypes.

A :class:`dtype` is a small immutable object named like PyTorch's (``gradviz.float32``
prints as ``gradviz.float32``). Type promotion follows PyTorch's rules, not numpy's:
a Python scalar or a zero-dimensional tensor never widens a dimensioned tensor of the
same category (bool < integer < floating), and a category that appears only in
Python scalars promotes to the default dtype of that category.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "half", "float", "double", "short", "int", "long",
    "get_default_dtype", "set_default_dtype", "as_dtype", "result_type", "promote_types",
    "finfo", "iinfo",
]

_builtin_bool = bool
_builtin_float = float
_builtin_int = int


class dtype:
    """A tensor element type. Compare with ``==``; ``dtype.numpy`` is the numpy dtype."""

    __slots__ = ("name", "numpy", "is_floating_point", "is_signed", "itemsize", "_category")

    def __init__(self, name: str, numpy_dtype, category: int):
        self.name = name
        self.numpy = np.dtype(numpy_dtype)
        self.is_floating_point = category == 2
        self.is_signed = self.numpy.kind in "fib" and self.numpy.kind != "b" and name != "uint8"
        self.itemsize = self.numpy.itemsize
        self._category = category  # 0 bool, 1 integer, 2 floating

    def __repr__(self) -> str:
        return f"gradviz.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))

    @property
    def is_complex(self) -> _builtin_bool:
        return False

    def to_real(self) -> dtype:
        return self


float16 = dtype("float16", np.float16, 2)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
uint8 = dtype("uint8", np.uint8, 1)
bool = dtype("bool", np.bool_, 0)  # noqa: A001  (torch's name, shadows the builtin here only)

half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001

_ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, bool)
_BY_NUMPY = {d.numpy: d for d in _ALL}
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"half": float16, "float": float32, "double": float64,
                 "short": int16, "int": int32, "long": int64})

_default_float = float32


def get_default_dtype() -> dtype:
    """The dtype of floating-point tensors created from Python floats (float32 by default)."""
    return _default_float


def set_default_dtype(d) -> None:
    """Set the default floating-point dtype (``float16``, ``float32`` or ``float64``)."""
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float = d


def as_dtype(value) -> dtype:
    """Convert a gradviz dtype, a numpy dtype, a name or a Python type to a gradviz dtype."""
    if isinstance(value, dtype):
        return value
    if value is _builtin_float:  # torch reads the Python type as a C double
        return float64
    if value is _builtin_int:
        return int64
    if value is _builtin_bool:
        return bool
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    try:
        found = _BY_NUMPY.get(np.dtype(value))
    except TypeError:
        found = None
    if found is None:
        if value is complex or _is_complex_numpy(value):
            raise complex_error(value)
        raise TypeError(f"unsupported dtype {value!r}; gradviz supports {_supported()}")
    return found


def _supported():
    return ", ".join(d.name for d in _ALL)


def complex_error(value) -> TypeError:
    """The error for a complex dtype or number, which gradviz has no tensors for."""
    return TypeError(f"gradviz does not support complex numbers (got {value!r}); it supports "
                     f"{_supported()}. Keep real and imaginary parts as two real tensors.")


def _is_complex_numpy(value):
    try:
        return np.dtype(value).kind == "c"
    except TypeError:
        return False


def from_numpy(np_dtype) -> dtype:
    """The gradviz dtype of a numpy dtype, or a TypeError naming the unsupported one."""
    found = _BY_NUMPY.get(np_dtype)
    if found is None:
        return as_dtype(np_dtype)
    return found


def _scalar_category(value) -> _builtin_int:
    if isinstance(value, (_builtin_bool, np.bool_)):
        return 0
    if isinstance(value, (_builtin_int, np.integer)):
        return 1
    return 2


def result_type(*operands) -> dtype:
    """PyTorch's type promotion over tensors (anything with ``.dtype`` and ``.ndim``) and scalars.

    Tensors with dimensions take precedence over zero-dimensional tensors, which take
    precedence over Python scalars, unless a lower-priority operand is of a higher
    category (bool < integer < floating).
    """
    dim_result = zero_result = None
    scalar_category = -1
    for op in operands:
        d = getattr(op, "dtype", None)
        if isinstance(d, dtype):
            if op.ndim > 0:
                dim_result = d if dim_result is None else _promote(dim_result, d)
            else:
                zero_result = d if zero_result is None else _promote(zero_result, d)
        else:
            scalar_category = max(scalar_category, _scalar_category(op))
    result = dim_result
    if zero_result is not None:
        if result is None or zero_result._category > result._category:
            result = zero_result
    if scalar_category >= 0 and (result is None or scalar_category > result._category):
        result = (bool, int64, _default_float)[scalar_category]
    return result


def _promote(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a._category != b._category:
        # PyTorch: the higher category wins as is (int64 with float32 gives float32; numpy
        # would give float64)
        return a if a._category > b._category else b
    return _BY_NUMPY[np.promote_types(a.numpy, b.numpy)]


def promote_types(type1, type2) -> dtype:
    """The dtype two tensors of these dtypes promote to (``torch.promote_types``)."""
    return _promote(as_dtype(type1), as_dtype(type2))


class finfo:
    """Machine limits of a floating-point dtype, as ``torch.finfo``."""

    def __init__(self, type=None):  # noqa: A002  (torch's name)
        self.dtype = as_dtype(type) if type is not None else _default_float
        if not self.dtype.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use "
                            f"torch.iinfo to handle '{self.dtype.name}'")
        info = np.finfo(self.dtype.numpy)
        self.bits = _builtin_int(info.bits)
        self.eps = _builtin_float(info.eps)
        self.max = _builtin_float(info.max)
        self.min = _builtin_float(info.min)
        self.tiny = self.smallest_normal = _builtin_float(info.smallest_normal)
        self.resolution = 10.0 ** -_builtin_int(info.precision)
        self.dtype = self.dtype.name  # torch gives the name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype, as ``torch.iinfo``."""

    def __init__(self, type):  # noqa: A002
        self.dtype = as_dtype(type)
        if self.dtype.is_floating_point:
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to "
                            f"handle '{self.dtype.name}'")
        info = np.iinfo(self.dtype.numpy) if self.dtype is not bool else None
        self.bits = _builtin_int(info.bits) if info else 8
        self.max = _builtin_int(info.max) if info else 1
        self.min = _builtin_int(info.min) if info else 0
        self.dtype = self.dtype.name  # torch gives the name

    def __repr__(self) -> str:
        return (f"iinfo(min={_builtin_float(self.min):g}, max={_builtin_float(self.max):g}, "
                f"dtype={self.dtype})")
