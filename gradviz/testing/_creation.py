"""``make_tensor``: a random tensor of a shape and dtype for tests, torch's ranges and checks."""

from __future__ import annotations

import collections.abc
import math
import warnings

from .. import dtypes as _dtypes
from ..ops import empty, randint

__all__ = ["make_tensor"]


def _bounds(dtype, low, high, lowest, highest, default_low, default_high):
    """``low`` and ``high`` checked and clamped into ``[lowest, highest)`` (torch's rules)."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(value, float) and math.isnan(value) for value in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype.is_floating_point:
        warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex types is "
                      "deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
                      FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} "
                         f"only supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if not dtype.is_floating_point:
        return math.ceil(low), math.ceil(high)
    return low, high


def make_tensor(*shape, dtype, device="cpu", low=None, high=None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False, memory_format=None):
    """A tensor of ``shape`` and ``dtype`` filled with values drawn uniformly from ``[low,
    high)``: by default ``[-9, 9)`` for floats, ``[-9, 10)`` for integers (within the dtype's
    range), 0 or 1 for booleans. ``noncontiguous`` returns a strided view; ``exclude_zero``
    replaces zeros with 1 (integers) or the dtype's smallest normal number. Mirrors
    ``torch.testing.make_tensor``.

    Examples
    --------
    >>> import gradviz as torch
    >>> t = torch.testing.make_tensor(2, 3, dtype=torch.float32, low=0, high=1, requires_grad=True)
    >>> t.shape, bool(((t >= 0) & (t < 1)).all()), t.requires_grad
    (gradviz.Size([2, 3]), True, True)
    """
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    integral = not dtype.is_floating_point
    if requires_grad and integral:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got "
                         f"dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is _dtypes.bool:
        low, high = _bounds(dtype, low, high, 0, 2, 0, 2)
        result = randint(low, high, shape, dtype=dtype)
    elif integral:
        info = _dtypes.iinfo(dtype)
        low, high = _bounds(dtype, low, high, info.min, info.max + (1 if dtype is not _dtypes.int64 else 0), -9, 10)
        result = randint(low, high, shape, dtype=dtype)
    else:
        info = _dtypes.finfo(dtype)
        low, high = _bounds(dtype, low, high, info.min, info.max, -9, 9)
        result = empty(shape, dtype=dtype)
        if high - low >= info.max:  # uniform_ needs high - low within the dtype's range
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    if noncontiguous:
        result = result[..., 1::2]
    if exclude_zero:
        result[result == 0] = 1 if integral else _dtypes.finfo(dtype).tiny
    if not integral:
        result.requires_grad = requires_grad
    return result
