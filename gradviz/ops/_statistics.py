"""Statistics of a tensor: ``median`` (``MedianBackward0``/``MedianBackward1``), ``mode``
(``ModeBackward0``), ``quantile`` and ``nanquantile``
(from ``sort``, as torch composes them), ``unique``, ``bincount``, ``std_mean`` and
``var_mean``, ``histogram`` and ``histc``."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _wrap, _wrap_dim
from ._compose import diff
from ._creation import _linspace_values
from ._indexing import RETURN_TYPES, gather, sort
from ._linalg import mm
from ._math import _not_differentiable
from ._pointwise import clamp, sqrt
from ._reduction import (
    VARIANCE_SAVED,
    _check_nonempty,
    _evenly_backward,
    _mean_backward,
    _reduce_attrs,
    _select_backward,
    _std_backward,
    _var_backward,
    _var_wide,
    _variance,
    mean,
)
from ._reduction import sum as _sum
from ._registry import Op, apply, declare, exports
from ._saved import RESULT, SELECTED_SAVED, SELF
from ._shape import flatten, narrow, select, squeeze, t, transpose, unsqueeze, view
from ._special import DIV_NUMBER, MUL_NUMBER


def _lower_median(array):
    """The lower of the two middle values (torch's median), NaN if there is one."""
    flat = array.reshape(-1)
    if np.isnan(flat).any():
        return np.asarray(np.nan, dtype=array.dtype)
    return np.asarray(np.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2])


_MEDIAN_ALL = Op("median", "MedianBackward0",
                 forward=lambda a, dims, keepdim, shape, count: _lower_median(a),
                 backward=_evenly_backward, saves=lambda needs: ((0,), True),
                 saved={"self": SELF, "result": RESULT})
_MEDIAN_DIM = Op("median_dim", "MedianBackward1", forward=lambda a, values, **_: values,
                 backward=_select_backward, saved=SELECTED_SAVED)


@declare(method=True)
def median(input, dim=None, keepdim=False):
    """The lower median of all values (the gradient shared among the entries equal to it, as
    in torch); with ``dim``, ``(values, indices)`` along it (the gradient to the index)."""
    if dim is None:
        if input.numel() == 0:
            return _wrap(np.asarray(np.nan, dtype=input._data.dtype))
        return apply(_MEDIAN_ALL, input, **_reduce_attrs(input, None, False))
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_nonempty(input, dim, "median")
    if input.ndim == 0:
        indices = np.zeros((), np.int64)
        values = input._data.copy()
    else:
        size = input._data.shape[dim]
        order = np.argsort(input._data, axis=dim, kind="stable")
        indices = np.take(order, [(size - 1) // 2], axis=dim).astype(np.int64)
        values = np.take_along_axis(input._data, indices, axis=dim)
    keep = bool(keepdim) or input.ndim == 0
    out_values = values if keep else np.squeeze(values, dim)
    out_indices = indices if keep else np.squeeze(indices, dim)
    out = apply(_MEDIAN_DIM, input, values=out_values, indices_tensor=_wrap(indices), dim=dim,
                keepdim=keep, shape=input._data.shape, dim_arg=dim_arg)
    return RETURN_TYPES["median"](out, _wrap(out_indices))


_MODE = Op("mode", "ModeBackward0", forward=lambda a, values, **_: values,
            backward=_select_backward)


def _row_mode(row):
    """The most frequent value of a 1-D array (the smallest of the most frequent ones) and
    where it is, as torch's CPU kernel finds them: sort, then the first longest run of equal
    values (NaN equals nothing, so each NaN is a run of one), its index the last of the run."""
    order = np.argsort(row, kind="stable")
    ordered = row[order]
    ends = np.flatnonzero(np.append(ordered[1:] != ordered[:-1], True))
    longest = int(np.argmax(np.diff(ends, prepend=-1)))
    return ordered[ends[longest]], order[ends[longest]]


@declare(method=True)
def mode(input, dim=-1, keepdim=False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest if several
    are as frequent) and an index of it; the gradient goes to that index.

    Torch's CPU kernel sorts with ``std::sort``, which is stable only for short rows (16
    values or fewer); there its index is the last occurrence, as here. For longer rows torch
    may return another occurrence of the same value.
    """
    dim = _wrap_dim(dim, input.ndim)
    _check_nonempty(input, dim, "mode")
    if input.ndim == 0:
        indices = np.zeros((), np.int64)
        values = input._data.copy()
    else:
        data = np.moveaxis(input._data, dim, -1)
        rows = data.reshape(-1, data.shape[-1])
        values = np.empty(rows.shape[0], dtype=input._data.dtype)
        indices = np.empty(rows.shape[0], dtype=np.int64)
        for i, row in enumerate(rows):
            values[i], indices[i] = _row_mode(row)
        values = np.expand_dims(values.reshape(data.shape[:-1]), dim)
        indices = np.expand_dims(indices.reshape(data.shape[:-1]), dim)
    keep = bool(keepdim) or input.ndim == 0
    out_values = values if keep else np.squeeze(values, dim)
    out_indices = indices if keep else np.squeeze(indices, dim)
    out = apply(_MODE, input, values=out_values, indices_tensor=_wrap(indices), dim=dim,
                keepdim=keep, shape=input._data.shape)
    return RETURN_TYPES["mode"](out, _wrap(out_indices))


def _no_derivative(name):
    """torch's backward of an op it has no derivative for: NotImplementedError."""
    def backward(ctx, g):
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")

    return backward


# the values as a node of torch's name whose gradient raises, when the input requires grad
_UNIQUE = Op("unique", "Unique2Backward0", forward=lambda a, values: values,
             backward=_no_derivative("_unique2"))
_UNIQUE_DIM = Op("unique_dim", "UniqueDimBackward0", forward=lambda a, values: values,
                 backward=_no_derivative("unique_dim"))


def _unique_slices(data, dim):
    """The distinct slices of ``data`` along ``dim`` in lexicographic order, each slice's
    group and each group's count, as torch's ``unique_dim``: slices are equal when all their
    entries are (a NaN equals nothing, so slices with a NaN stay apart)."""
    moved = np.moveaxis(data, dim, 0)
    count = moved.shape[0]
    rows = moved.reshape(count, math.prod(moved.shape[1:]))
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(count)
    ordered = rows[order]
    starts = np.ones(count, dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    groups = np.cumsum(starts) - 1
    inverse = np.empty(count, dtype=np.int64)
    inverse[order] = groups
    counts = np.diff(np.append(np.flatnonzero(starts), count)).astype(np.int64)
    values = np.moveaxis(ordered[starts].reshape((-1,) + moved.shape[1:]), 0, dim)
    return np.ascontiguousarray(values), inverse, counts


@declare(method=True)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values (sorted); with ``return_inverse``, where each entry went; with
    ``return_counts``, how often each value occurs. With ``dim``, the distinct slices along
    it, in lexicographic order. Not differentiable (torch's node, whose backward raises)."""
    data = input._data
    if dim is None:
        values, inverse, counts = np.unique(data, return_inverse=True, return_counts=True)
        values, inverse = values.astype(data.dtype), inverse.reshape(data.shape)
        op = _UNIQUE
    else:
        if not input.ndim:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        dim = _wrap_dim(dim, input.ndim)
        if data.size == 0 and data.shape[dim] != 0:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                               "unique cannot be applied")
        values, inverse, counts = _unique_slices(data, dim)
        op = _UNIQUE_DIM
    result = [apply(op, input, values=values) if input.requires_grad else _wrap(values)]
    if return_inverse:
        result.append(_wrap(inverse.astype(np.int64)))
    if return_counts:
        result.append(_wrap(counts.astype(np.int64)))
    return result[0] if len(result) == 1 else tuple(result)


@declare(method=True)
def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in a 1-D non-negative integer tensor (the sums
    of ``weights`` there, when given)."""
    if (input.ndim != 1 or input.dtype.is_floating_point or input.dtype is _dtypes.bool
            or (input.numel() and input._data.min() < 0)):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    counts = np.bincount(input._data, None if weights is None else weights._data, minlength)
    if weights is None:
        return _wrap(counts.astype(np.int64))
    dtype = weights._data.dtype if weights.dtype.is_floating_point else np.float64
    return _wrap(counts.astype(np.float64 if dtype == np.float64 else dtype))


def _moments_forward(spread):
    """``(spread, mean)`` as torch's one kernel gives them: both from double sums for float32
    and float16, rounded once to the dtype (``spread`` of the float64 variance)."""
    def forward(a, dims, keepdim, shape, count, correction, dims_arg=None, correction_arg=None):
        wide = a.astype(np.float64) if a.dtype in (np.float32, np.float16) else a
        return (spread(_var_wide(a, dims, keepdim, shape, count, correction)).astype(a.dtype, copy=False),
                np.mean(wide, axis=dims, keepdims=keepdim).astype(a.dtype, copy=False))
    return forward


def _moments_backward(spread_backward):
    """The gradient of ``(spread, mean)``: each part's rule, summed (either may be None)."""
    def backward(ctx, g_spread, g_mean):
        pairs = ((spread_backward, g_spread), (_mean_backward, g_mean))
        parts = [rule(ctx, g)[0] for rule, g in pairs if g is not None]
        return (parts[0] if len(parts) == 1 else parts[0] + parts[1],)
    return backward


# one node for both results, as torch's; std's rule reads the saved std (outputs[0])
_STD_MEAN = Op("std_mean", "StdMeanBackward0", forward=_moments_forward(np.sqrt),
               backward=_moments_backward(_std_backward), saves=lambda needs: ((0,), True),
               saved={**VARIANCE_SAVED, "result0": RESULT})
_VAR_MEAN = Op("var_mean", "VarMeanBackward0", forward=_moments_forward(lambda v: v),
               backward=_moments_backward(_var_backward), saves=lambda needs: ((0,), False),
               saved=VARIANCE_SAVED)


@declare()
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``, one ``StdMeanBackward0`` node."""
    return _variance(_STD_MEAN, "std_mean", input, dim, unbiased, keepdim, correction)


@declare()
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``, one ``VarMeanBackward0`` node."""
    return _variance(_VAR_MEAN, "var_mean", input, dim, unbiased, keepdim, correction)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


# Note [Quantile as torch composes it]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``quantile`` and ``nanquantile`` are torch's ``quantile_compute``, op for op, so the graph has
# its nodes (``SortBackward0``, ``ViewBackward0``, ``GatherBackward0``, ``LerpBackward1``, then
# the in-place ``UnsqueezeBackward1``/``TransposeBackward1``/``SqueezeBackward4``), the output
# its strides, and the values its bits: the reduced dim goes last and is sorted (NaN last), each
# q becomes a rank ``q * (n - 1)`` computed in the input's dtype (a number q is a tensor of that
# dtype), the mode rounds it, and the values at the ranks below and above are lerped by its
# fraction (0.5 for midpoint). A row with a NaN has the rank of its last value (so the result
# is NaN) for ``quantile``; ``nanquantile`` counts only the values that are not NaN (a row of
# NaN has rank 0, its NaN). The ranks are not differentiable and are computed on arrays.

def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    """torch's ``quantile_compute`` (Note [Quantile as torch composes it]); its checks in its
    order, with its messages (``quantile()`` for ``nanquantile`` too)."""
    if not isinstance(q, Tensor):
        if not isinstance(q, (int, float, np.integer, np.floating)):
            function = "nanquantile" if ignore_nan else "quantile"
            raise TypeError(f"{function}() received an invalid combination of arguments - got "
                            f"(Tensor, {type(q).__name__}), but expected one of:\n"
                            f" * (Tensor input, Tensor q, int dim = None, bool keepdim = False, *, "
                            f"str interpolation = \"linear\", Tensor out = None)\n"
                            f" * (Tensor input, float q, int dim = None, bool keepdim = False, *, "
                            f"str interpolation = \"linear\", Tensor out = None)")
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {float(q):g}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if isinstance(q, Tensor) and q.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    dtype = input._data.dtype
    if dtype not in (np.float32, np.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor) and q._data.dtype != dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
    ndim = input.ndim
    wrapped = None if dim is None else _wrap_dim(dim, ndim)
    if wrapped is not None and ndim:
        out_shape = list(input.shape)
        if keepdim:
            out_shape[wrapped] = 1
        else:
            del out_shape[wrapped]
    else:
        out_shape = [1] * ndim if keepdim else []
    qs = q._data if isinstance(q, Tensor) else np.asarray(q, dtype=dtype)
    if not ((qs >= 0) & (qs <= 1)).all():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")

    if wrapped is None:
        ordered = sort(flatten(input)).values
    elif wrapped == ndim - 1:
        ordered = sort(input).values
    else:
        ordered = sort(transpose(unsqueeze(input, -1), wrapped, -1)).values
    ordered = view(ordered, (*out_shape, ordered.shape[-1]))
    size = ordered.shape[-1]
    if size > 2 ** 24:
        raise RuntimeError("quantile() input tensor is too large")
    nan = np.isnan(ordered._data)
    if ignore_nan:
        ranks = qs.reshape(-1) * (size - nan.sum(-1, keepdims=True) - 1).astype(dtype)
        ranks[ranks < 0] = 0
    else:
        ranks = np.broadcast_to(qs.reshape(-1) * dtype.type(size - 1),
                                ordered.shape[:-1] + (qs.size,)).copy()
        ranks[nan.any(-1)] = size - 1
    if interpolation == "lower":
        np.floor(ranks, out=ranks)
    elif interpolation == "higher":
        np.ceil(ranks, out=ranks)
    elif interpolation == "nearest":
        np.round(ranks, out=ranks)  # half to even, as torch's round_
    below = ranks.astype(np.int64)
    result = gather(ordered, -1, _wrap(below))
    if interpolation in ("linear", "midpoint"):
        weights = np.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below.astype(dtype)
        above = gather(ordered, -1, _wrap(np.ceil(ranks).astype(np.int64)))
        result.lerp_(above, _wrap(weights))
    if qs.ndim == 0:
        return result.squeeze_(-1)
    return result.unsqueeze_(0).transpose_(0, -1).squeeze_(-1)


@declare(method=True)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles (``q`` a number or a 1-D tensor in [0, 1]) over ``dim`` (all
    values when None), between the sorted values as ``interpolation`` says (linear, lower,
    higher, midpoint or nearest); NaN where the values have a NaN. A tensor ``q`` puts its dim
    first. Composed as torch composes it (Note [Quantile as torch composes it])."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


@declare(method=True)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """:func:`quantile` of the values that are not NaN (NaN where all are). Mirrors
    ``torch.nanquantile``.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.nanquantile(torch.tensor([1.0, float("nan"), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


# ---- histogram, histc ------------------------------------------------------------------

# torch records a NotImplemented node for an input that requires grad (makemore's
# ``torch.histogram(layer.out, density=True)`` gives outputs with a grad_fn, then .detach()es)
_HISTOGRAM = Op("histogram", "NotImplemented", forward=lambda a, result: result,
                backward=_not_differentiable("histogram"))


class _Histogram(tuple):
    """``(hist, bin_edges)`` with attribute access, as ``torch.return_types.histogram``."""

    __slots__ = ()

    def __new__(cls, hist, bin_edges):
        return super().__new__(cls, (hist, bin_edges))

    @property
    def hist(self):
        return self[0]

    @property
    def bin_edges(self):
        return self[1]

    n_fields = 2

    def __repr__(self) -> str:
        return f"gradviz.return_types.histogram(\nhist={self[0]!r},\nbin_edges={self[1]!r})"


_Histogram.__module__ = "gradviz.return_types"
_Histogram.__name__ = _Histogram.__qualname__ = "histogram"


def _check_histogram_input(input, kernel):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{TYPE_WORDS[input.dtype.name]}\'')


def _data_range(data):
    if data.size == 0:
        return 0.0, 1.0
    return float(data.min()), float(data.max())


@declare(method=True)
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """Counts of ``input``'s values in ``bins`` equal bins over ``range`` (the data's min and
    max by default), or in the bins between the edges of a 1-D tensor ``bins``; returns
    ``(hist, bin_edges)``. The rightmost bin includes its right edge; values outside are left
    out. ``weight`` sums weights instead of counting; ``density`` normalizes to a density.

    Examples
    --------
    >>> import gradviz as torch
    >>> hist, edges = torch.histogram(torch.tensor([0.0, 0.1, 0.6, 1.0]), bins=2)
    >>> hist, edges
    (tensor([2., 2.]), tensor([0.0000, 0.5000, 1.0000]))
    """
    _check_histogram_input(input, "histogramdd")
    data = input._data.reshape(-1)
    if weight is not None and weight.dtype is not input.dtype:
        torch_names = {"float64": "double", "float32": "float"}
        raise RuntimeError("torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
                           "should have the same dtype, but got "
                           f"input({torch_names.get(input.dtype.name, input.dtype.name)}), "
                           f"and weight({torch_names.get(weight.dtype.name, weight.dtype.name)})")
    if isinstance(bins, Tensor):
        edges = bins._data.astype(data.dtype)
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        low, high = (float(range[0]), float(range[1])) if range is not None else _data_range(data)
        if low > high:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {low:g} max "
                               f"{high:g} for dimension 0")
        if not (np.isfinite(low) and np.isfinite(high)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{low:g}, {high:g}] is not finite")
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges = _linspace_values(low, high, int(bins) + 1, data.dtype)
    count = edges.shape[0] - 1
    inside = (data >= edges[0]) & (data <= edges[-1])
    values = data[inside]
    positions = np.minimum(np.searchsorted(edges, values, side="right") - 1, count - 1)
    weights = None if weight is None else weight._data.reshape(-1)[inside].astype(np.float64)
    hist = np.bincount(positions, weights, minlength=count).astype(data.dtype)
    if density:
        hist = hist / (hist.sum() * np.diff(edges))
    return _Histogram(apply(_HISTOGRAM, input, result=hist.astype(data.dtype)),
                      apply(_HISTOGRAM, input, result=edges.astype(data.dtype)))


@declare(method=True)
def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """Counts of ``input``'s values in ``bins`` equal bins between ``min`` and ``max`` (both 0:
    the data's min and max); values outside are left out. Not differentiable."""
    _check_histogram_input(input, "histogram_cpu")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    data = input._data.reshape(-1)
    low, high = float(min), float(max)
    if low == high and data.size:
        low, high = _data_range(data)
    if low == high:
        low, high = low - 1, high + 1
    if low > high:
        raise RuntimeError("torch.histc: max must be larger than min")
    if not (np.isfinite(low) and np.isfinite(high)):
        raise RuntimeError(f"torch.histc: range of [{low:g}, {high:g}] is not finite")
    left, right = data.dtype.type(low), data.dtype.type(high)
    values = data[(data >= left) & (data <= right)]
    # torch's linear interpolation, in the input's dtype: (x - min) * bins / (max - min)
    positions = ((values - left) * data.dtype.type(bins) / (right - left)).astype(np.int64)
    positions = np.minimum(positions, bins - 1)
    return _wrap(np.bincount(positions, minlength=bins).astype(data.dtype))


# ---- nanmedian ----------------------------------------------------------------------------------

def _lower_nanmedian(array):
    """The lower median of the non-NaN values (NaN if there are none)."""
    flat = array.reshape(-1)
    flat = flat[~np.isnan(flat)]
    if flat.size == 0:
        return np.asarray(np.nan, dtype=array.dtype)
    return np.asarray(np.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2])


_NANMEDIAN_ALL = Op("nanmedian", "NanmedianBackward0",
                    forward=lambda a, dims, keepdim, shape, count: _lower_nanmedian(a),
                    backward=_evenly_backward, saves=lambda needs: ((0,), True),
                    saved={"self": SELF, "result": RESULT})
_NANMEDIAN_DIM = Op("nanmedian_dim", "NanmedianBackward1", forward=lambda a, values, **_: values,
                    backward=_select_backward, saved=SELECTED_SAVED)


@declare(method=True)
def nanmedian(input, dim=None, keepdim=False):
    """``median`` of the non-NaN values; NaN only where all are NaN."""
    if dim is None:
        if input.numel() == 0:
            return _wrap(np.asarray(np.nan, dtype=input._data.dtype))
        return apply(_NANMEDIAN_ALL, input, **_reduce_attrs(input, None, False))
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_nonempty(input, dim, "median")  # torch's message names median
    if input.ndim == 0:
        indices, values = np.zeros((), np.int64), input._data.copy()
    else:
        order = np.argsort(input._data, axis=dim, kind="stable")  # NaN sorts last
        present = np.sum(~np.isnan(input._data), axis=dim, keepdims=True)
        middle = np.maximum((present - 1) // 2, 0)
        indices = np.take_along_axis(order, middle, axis=dim).astype(np.int64)
        values = np.take_along_axis(input._data, indices, axis=dim)
    keep = bool(keepdim) or input.ndim == 0
    out_values = values if keep else np.squeeze(values, dim)
    out_indices = indices if keep else np.squeeze(indices, dim)
    out = apply(_NANMEDIAN_DIM, input, values=out_values, indices_tensor=_wrap(indices), dim=dim,
                keepdim=keep, shape=input._data.shape, dim_arg=dim_arg)
    return RETURN_TYPES["nanmedian"](out, _wrap(out_indices))


# ---- cov, corrcoef, trapezoid ------------------------------------------------------------------------

@declare(method=True)
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (observations in the
    columns), optionally weighted; composed as PyTorch composes it."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    x = view(input, (1, -1)) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(_dtypes.get_default_dtype())
    observations = x.shape[1]
    weights = None
    if fweights is not None:
        weights = fweights
    if aweights is not None:
        weights = aweights if weights is None else weights * aweights
    if weights is None:
        weight_sum = float(observations)
        average = mean(x, 1)
    else:
        weights = weights.to(x.dtype)
        weight_sum = _sum(weights)
        average = _sum(x * weights, 1) / weight_sum
    if weights is not None and aweights is not None and correction != 0:
        norm = weight_sum - correction * _sum(weights * aweights) / weight_sum
    else:
        norm = weight_sum - correction
    norm_value = float(norm._data) if isinstance(norm, Tensor) else norm
    if norm_value <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
        norm = norm * 0 if isinstance(norm, Tensor) else 0.0
    centered = x - average.unsqueeze(1)
    product = mm(centered, t(centered if weights is None else centered * weights))
    return squeeze(product / norm)


@declare(method=True)
def corrcoef(input):
    """The Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    stddev = sqrt(c.diagonal())
    c = c / view(stddev, (-1, 1))
    c = c / view(stddev, (1, -1))
    return clamp(c, -1, 1)


@declare(name=("trapezoid", "trapz"))
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of ``y`` along ``dim`` by the trapezoid rule, with sample points ``x`` or
    a spacing ``dx`` (1 by default)."""
    dim = _wrap_dim(dim, y.ndim)
    length = y.shape[dim]
    if x is not None:
        if dx is not None:
            raise RuntimeError("trapezoid: received both x and dx; pass only one of them")
        if length == 0:
            return _sum(y, dim) * 0
        spacing = diff(x, dim=-1 if x.ndim == 1 else dim)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[dim] = -1
            spacing = spacing.reshape(shape)
        pairs = narrow(y, dim, 1, length - 1) + narrow(y, dim, 0, length - 1)
        return apply(DIV_NUMBER, _sum(spacing * pairs, dim), other=2.0)
    if length == 0:
        return _sum(y, dim) * 0
    ends = (select(y, dim, 0) + select(y, dim, -1)) * 0.5
    return apply(MUL_NUMBER, _sum(y, dim) - ends, other=1.0 if dx is None else dx)


__all__ = exports(globals())
