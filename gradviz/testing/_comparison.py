"""``assert_close``: whether two values (tensors, numpy arrays, numbers, booleans, None, and
sequences and mappings of them) are close, with torch's default tolerances per dtype, its
attribute checks and its messages, word for word (tests match on them)."""

from __future__ import annotations

import cmath
import collections.abc
import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import Tensor
from ..ops import as_tensor

__all__ = ["assert_close", "assert_allclose"]

# (rtol, atol) by dtype, torch's table; integers and booleans compare for equality
_PRECISIONS = {"float16": (0.001, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}
_NUMBER_DTYPES = {int: "int64", float: "float64", complex: "complex128"}


class _Mismatch(Exception):
    """A failed comparison: the exception type to raise, its message, and where (the path of
    sequence indices and mapping keys to the pair)."""

    def __init__(self, kind: type[Exception], message: str, where: tuple = ()):
        super().__init__(message)
        self.kind, self.message, self.where = kind, message, where

    def error(self, msg: str | Callable[[str], str] | None) -> Exception:
        if isinstance(msg, str):
            return self.kind(msg)
        text = self.message
        if self.where:
            text += f"\n\nThe failure occurred for item {''.join(str([item]) for item in self.where)}"
        return self.kind(msg(text) if callable(msg) else text)


class _Unsupported(Exception):
    """The inputs are not of the kind a comparison handles: try the next one."""


def _tolerances(dtype_names, rtol, atol, where):
    if (rtol is None) ^ (atol is None):
        raise _Mismatch(ValueError, f"Both 'rtol' and 'atol' must be either specified or omitted, "
                                    f"but got no {'rtol' if rtol is None else 'atol'}.", where)
    if rtol is not None:
        return rtol, atol
    rtols, atols = zip(*(_PRECISIONS.get(name, (0.0, 0.0)) for name in dtype_names))
    return max(rtols), max(atols)


def _difference_message(identifier, extra, abs_diff, abs_index, atol, rel_diff, rel_index, rtol):
    equality = rtol == 0 and atol == 0

    def line(kind, diff, index, tolerance):
        text = f"{kind.title()} difference: {diff}" if index is None else \
            f"Greatest {kind} difference: {diff} at index {index}"
        return text + ("" if equality else f" (up to {tolerance} allowed)") + "\n"

    message = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        message += f"{extra.strip()}\n"
    message += line("absolute", abs_diff, abs_index, atol) + line("relative", rel_diff, rel_index, rtol)
    return message.strip()


def _scalar_message(actual, expected, rtol, atol, identifier="Scalars"):
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _difference_message(identifier, f"Expected {expected} but got {actual}.", abs_diff, None, atol,
                               rel_diff, None, rtol)


def _compare_none(actual, expected, where, **_):
    if not (actual is None or expected is None):
        raise _Unsupported
    if not (actual is None and expected is None):
        raise _Mismatch(AssertionError, f"None mismatch: {actual} is not {expected}", where)


def _compare_booleans(actual, expected, where, **_):
    if not all(isinstance(value, (bool, np.bool_)) for value in (actual, expected)):
        raise _Unsupported
    actual, expected = bool(actual), bool(expected)
    if actual is not expected:
        raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}", where)


def _compare_numbers(actual, expected, where, rtol=None, atol=None, equal_nan=False, check_dtype=True, **_):
    kinds = (int, float, complex, np.number)
    if not all(isinstance(value, kinds) and not isinstance(value, bool) for value in (actual, expected)):
        raise _Unsupported
    actual, expected = (value.item() if isinstance(value, np.number) else value for value in (actual, expected))
    rtol, atol = _tolerances([_NUMBER_DTYPES[type(value)] for value in (actual, expected)], rtol, atol, where)
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", where)
    if actual == expected:
        return
    if equal_nan and cmath.isnan(actual) and cmath.isnan(expected):
        return
    abs_diff = abs(actual - expected)
    if cmath.isfinite(abs_diff) and abs_diff <= atol + rtol * abs(expected):
        return
    raise _Mismatch(AssertionError, _scalar_message(actual, expected, rtol, atol), where)


def _dtype_name(array: np.ndarray) -> str:
    return _dtypes.from_numpy(array.dtype).name


def _unravel(flat_index: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat_index, shape)) if shape else ()


def _tensor_message(actual: np.ndarray, expected: np.ndarray, matches: np.ndarray, rtol, atol):
    total = matches.size
    mismatched = total - int(matches.sum())
    extra = f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})"
    actual_flat, expected_flat = actual.reshape(-1), expected.reshape(-1)
    if actual.dtype.kind not in "fc":
        actual_flat, expected_flat = actual_flat.astype(np.int64), expected_flat.astype(np.int64)
    abs_diff = np.abs(actual_flat - expected_flat)
    abs_diff[matches.reshape(-1)] = 0
    abs_index = int(np.argmax(abs_diff))
    # torch divides in the default float dtype for integers, in the tensors' own for floats
    quotient = _dtypes.get_default_dtype().numpy if abs_diff.dtype.kind in "iu" else abs_diff.dtype
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_diff = (abs_diff / np.abs(expected_flat)).astype(quotient)
    rel_diff[matches.reshape(-1)] = 0
    rel_index = int(np.argmax(rel_diff))
    return _difference_message("Tensor-likes", extra, abs_diff[abs_index].item(), _unravel(abs_index, actual.shape),
                               atol, rel_diff[rel_index].item(), _unravel(rel_index, actual.shape), rtol)


def _as_tensor_like(value):
    if isinstance(value, Tensor):
        return value
    try:
        return as_tensor(value)
    except Exception as error:  # noqa: BLE001 - not a tensor-like: another comparison may handle it
        raise _Unsupported from error


def _compare_tensors(actual, expected, where, rtol=None, atol=None, equal_nan=False, check_device=True,
                     check_dtype=True, check_stride=False, allow_subclasses=True, **_):
    if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
        raise _Unsupported
    if not allow_subclasses and type(actual) is not type(expected):
        raise _Unsupported
    if not isinstance(actual, (Tensor, np.ndarray)):
        raise _Unsupported
    actual, expected = _as_tensor_like(actual), _as_tensor_like(expected)
    rtol, atol = _tolerances([actual.dtype.name, expected.dtype.name], rtol, atol, where)

    def differ(attribute, mine, theirs):
        raise _Mismatch(AssertionError,
                        f"The values for attribute '{attribute}' do not match: {mine} != {theirs}.", where)

    if actual.shape != expected.shape:
        differ("shape", actual.shape, expected.shape)
    if check_stride and actual.stride() != expected.stride():
        differ("stride()", actual.stride(), expected.stride())
    if check_device and actual.device != expected.device:
        differ("device", actual.device, expected.device)
    if check_dtype and actual.dtype is not expected.dtype:
        differ("dtype", actual.dtype, expected.dtype)
    a, b = actual.detach().numpy(), expected.detach().numpy()
    if a.dtype != b.dtype:
        common = _dtypes.promote_types(actual.dtype, expected.dtype).numpy
        a, b = a.astype(common), b.astype(common)
    if a.dtype.kind in "fc":
        with np.errstate(invalid="ignore", over="ignore"):
            matches = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    else:
        matches = np.isclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol) \
            if (rtol or atol) else a == b
    if matches.all():
        return
    if a.shape == ():
        raise _Mismatch(AssertionError, _scalar_message(a.item(), b.item(), rtol, atol), where)
    raise _Mismatch(AssertionError, _tensor_message(a, b, np.asarray(matches), rtol, atol), where)


_COMPARISONS = (_compare_none, _compare_booleans, _compare_numbers, _compare_tensors)


def _compare(actual, expected, where: tuple, options: dict) -> None:
    """Compare, recursing through sequences and mappings; raises the first :class:`_Mismatch`."""
    sequence = collections.abc.Sequence
    if isinstance(actual, sequence) and not isinstance(actual, str) and \
            isinstance(expected, sequence) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise _Mismatch(AssertionError,
                            f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", where)
        for index in range(len(actual)):
            _compare(actual[index], expected[index], (*where, index), options)
        return
    mapping = collections.abc.Mapping
    if isinstance(actual, mapping) and isinstance(expected, mapping):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise _Mismatch(AssertionError,
                            f"The keys of the mappings do not match:\n"
                            f"Missing keys in the actual mapping: {sorted(expected_keys - actual_keys)}\n"
                            f"Additional keys in the actual mapping: {sorted(actual_keys - expected_keys)}", where)
        keys: Any = actual_keys
        with contextlib.suppress(Exception):
            keys = sorted(keys)
        for key in keys:
            _compare(actual[key], expected[key], (*where, key), options)
        return
    for comparison in _COMPARISONS:
        try:
            comparison(actual, expected, where, **options)
        except _Unsupported:
            continue
        return
    raise _Mismatch(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and "
                               f"{type(expected)}.", where)


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Assert that ``actual`` and ``expected`` are close: ``|actual - expected| <= atol + rtol *
    |expected|`` elementwise, with torch's defaults per dtype (float32: ``rtol=1.3e-6,
    atol=1e-5``; float64: ``1e-7, 1e-7``; float16: ``1e-3, 1e-5``; integers and booleans:
    equal), after checking shape, device and dtype (``check_dtype=False`` promotes instead).
    Tensors, numpy arrays, numbers, booleans and None, and sequences and mappings of them, are
    compared item by item. Mirrors ``torch.testing.assert_close``, messages included.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.testing.assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]))
    >>> torch.testing.assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 2 (50.0%)
    Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)
    """
    __tracebackhide__ = True
    options = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                   check_device=check_device, check_dtype=check_dtype, check_stride=check_stride)
    try:
        _compare(actual, expected, (), options)
    except _Mismatch as mismatch:
        raise mismatch.error(msg) from None


def assert_allclose(actual, expected, rtol: float | None = None, atol: float | None = None,
                    equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated: ``torch.testing.assert_allclose``, :func:`assert_close` without the dtype
    check and with NaNs equal."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future "
                  "release. Please use `torch.testing.assert_close()` instead. You can find detailed upgrade "
                  "instructions in https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = as_tensor(actual)
    if not isinstance(expected, Tensor):
        expected = as_tensor(expected)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, check_stride=False, msg=msg or None)
