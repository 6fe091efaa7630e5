"""torch-style tensor creation: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``,
``randn``, ``rand``, ``empty``, ``eye``, ``linspace`` and the ``*_like`` variants."""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import Tensor, _to_array, _wrap
from ._shape import _shape_arg

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange",
           "linspace", "eye", "randn", "rand", "randint", "manual_seed", "zeros_like",
           "ones_like", "full_like", "empty_like", "randn_like", "rand_like"]

_generator = np.random.default_rng()


def manual_seed(seed: int):
    """Seed gradviz's random generator (its streams differ from PyTorch's)."""
    global _generator
    _generator = np.random.default_rng(int(seed))
    return _generator


def _finish(array, requires_grad):
    out = _wrap(array)
    if requires_grad:
        out._set_requires_grad(True, "Only Tensors of floating point and complex dtype")
    return out


def _dtype_or_default(dtype):
    return _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, a numpy array or a Tensor).

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.tensor([1.0, 2.0]).dtype
    gradviz.float32
    >>> torch.tensor([1, 2]).dtype
    gradviz.int64
    """
    _check_device(device)
    if isinstance(data, Tensor):
        array = data._data.astype(_dtypes.as_dtype(dtype).numpy if dtype is not None else data._data.dtype)
    else:
        array = np.array(_to_array(data, dtype), copy=True)
    return _finish(array, requires_grad)


def as_tensor(data, dtype=None, device=None):
    _check_device(device)
    if isinstance(data, Tensor) and (dtype is None or _dtypes.as_dtype(dtype) is data.dtype):
        return data
    return _wrap(_to_array(data, dtype))


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    _dtypes.from_numpy(array.dtype)
    return _wrap(array)


def _check_device(device):
    if device not in (None, "cpu"):
        raise RuntimeError(f"gradviz runs on the CPU only; got device {device!r}")


def _filled(size, value, dtype, requires_grad, device):
    _check_device(device)
    shape = _shape_arg(size)
    return _finish(np.full(shape, value, dtype=_dtype_or_default(dtype).numpy), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 0, dtype, requires_grad, device)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 1, dtype, requires_grad, device)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 0, dtype, requires_grad, device)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = _dtypes.result_type(fill_value)
    return _filled((size,) if isinstance(size, int) else size, fill_value, dtype, requires_grad, device)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive); int64 unless an argument is a float."""
    _check_device(device)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype is None:
        dtype = _dtypes.result_type(start, end, step)
    dtype = _dtypes.as_dtype(dtype)
    count = max(0, int(np.ceil((end - start) / step)))
    if dtype.is_floating_point:
        array = _arange_values(float(start), float(step), count, dtype.numpy)
    else:
        array = (start + step * np.arange(count, dtype=np.int64)).astype(dtype.numpy)
    return _finish(array, requires_grad)


def _arange_values(start, step, count, np_dtype):
    """Floating ``arange`` bit for bit as PyTorch's CPU kernel computes it: ``start + step * i``
    in double precision (one fused multiply-add), except that whole blocks of two 256-bit
    vectors start each vector at a value rounded to the dtype and count up from there."""
    index = np.arange(count, dtype=np.float64)
    scalar = _fused_multiply_add(step, index, start)
    if np_dtype.itemsize not in (4, 8):
        return scalar.astype(np_dtype)
    lanes = 32 // np_dtype.itemsize
    vectorized = count - count % (2 * lanes)
    lane = index % lanes
    chunk_start = _fused_multiply_add(step, index - lane, start).astype(np_dtype).astype(np.float64)
    blocked = _fused_multiply_add(step, lane, chunk_start)
    return np.where(index < vectorized, blocked, scalar).astype(np_dtype)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end``, bit for bit as PyTorch's CPU
    kernel computes them (the first half counts up from ``start``, the second half down from
    ``end``, each value one fused multiply-add)."""
    _check_device(device)
    dtype = _dtype_or_default(dtype)
    steps = int(steps)
    if steps < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    return _finish(_linspace_values(start, end, steps, dtype.numpy), requires_grad)


def _linspace_values(start, end, steps, np_dtype):
    if steps <= 1:
        return np.full((steps,), start).astype(np_dtype)
    if np_dtype.kind != "f":
        # integral dtypes: the ends are truncated first, the step is a double, each value
        # truncated
        start, end = int(start), int(end)
        step = (float(end) - float(start)) / (steps - 1)
        index = np.arange(steps, dtype=np.float64)
        up = _fused_multiply_add(step, index, float(start))
        down = _fused_multiply_add(-step, steps - 1 - index, float(end))
        return np.trunc(np.where(index < steps // 2, up, down)).astype(np_dtype)
    first, last = np_dtype.type(start), np_dtype.type(end)
    step = (last - first) / np_dtype.type(steps - 1)  # in the tensor's dtype, like torch
    index = np.arange(steps, dtype=np.float64)
    up = _fused_multiply_add(np.float64(step), index, np.float64(first))
    down = _fused_multiply_add(-np.float64(step), steps - 1 - index, np.float64(last))
    return np.where(index < steps // 2, up, down).astype(np_dtype)


def _fused_multiply_add(a, b, c):
    """``a * b + c`` rounded once, in float64 (Dekker's product and Knuth's sum, which are exact):
    what the C++ compiler emits for torch's ``start + step * idx``."""
    product = a * b
    split = 134217729.0  # 2**27 + 1
    a_big = a * split
    a_hi = a_big - (a_big - a)
    a_lo = a - a_hi
    b_big = b * split
    b_hi = b_big - (b_big - b)
    b_lo = b - b_hi
    product_error = ((a_hi * b_hi - product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    total = product + c
    virtual = total - product
    sum_error = (product - (total - virtual)) + (c - virtual)
    return total + (sum_error + product_error)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return _finish(np.eye(n, m, dtype=_dtype_or_default(dtype).numpy), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples (gradviz's own generator: values differ from PyTorch's)."""
    _check_device(device)
    rng = generator if generator is not None else _generator
    array = rng.standard_normal(_shape_arg(size)).astype(_dtype_or_default(dtype).numpy)
    return _finish(array, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    _check_device(device)
    rng = generator if generator is not None else _generator
    array = rng.random(_shape_arg(size)).astype(_dtype_or_default(dtype).numpy)
    return _finish(array, requires_grad)


def randint(low, high=None, size=(), *, dtype=None, device=None, generator=None):
    _check_device(device)
    if high is None:
        low, high = 0, low
    rng = generator if generator is not None else _generator
    dtype = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.int64
    return _wrap(rng.integers(low, high, size=_shape_arg(size)).astype(dtype.numpy))


def _like(input, dtype):
    return input._data.shape, (_dtypes.as_dtype(dtype) if dtype is not None else input.dtype)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return ones(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return empty(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return full(shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return randn(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return rand(shape, dtype=dtype, device=device, requires_grad=requires_grad)
