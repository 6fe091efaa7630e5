"""Running and order reductions as in PyTorch: ``cummax``/``cummin`` (``CummaxBackward0``,
``CumminBackward0``), ``logcumsumexp``, ``kthvalue``, ``aminmax`` (one ``AminmaxBackward0``
node with two outputs), ``nansum`` and ``nanmean``.

The ops that pick entries (``cummax``, ``cummin``, ``kthvalue``) send the gradient to the
picked index with a scatter-add, whose own backward is a gather, so every order of
derivative works (Note [Backward rules are differentiable] in ``_registry.py``).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, _wrap, _wrap_dim
from ._indexing import RETURN_TYPES, _scatter_add_into_zeros, _ValuesIndices
from ._math import isnan
from ._pointwise import abs as _abs
from ._pointwise import eq, exp, gt, log, logical_not, lt, where
from ._reduction import _keep, _KeepCtx, _reduce_attrs, _select_backward, sum
from ._registry import Op, apply, declare, exports, numpy_names, saves_inputs
from ._saved import (
    DIM,
    KEEPDIM,
    OPTIONAL_DIMS,
    RESULT,
    SELECTED_SAVED,
    SELF,
    Computed,
    tensor_attr,
    torch_int,
)
from ._shape import flip

for _name in ("cummax", "cummin", "kthvalue", "aminmax"):
    RETURN_TYPES[_name] = type(_name, (_ValuesIndices,),
                               {"__slots__": (), "__module__": "gradviz.return_types"})


class _MinMax(tuple):
    """``(min, max)`` with attribute access, as ``torch.return_types.aminmax``."""

    __slots__ = ()

    def __new__(cls, min, max):  # noqa: A002  (torch's field names)
        return super().__new__(cls, (min, max))

    @property
    def min(self):  # noqa: A003
        return self[0]

    @property
    def max(self):  # noqa: A003
        return self[1]

    def __repr__(self) -> str:
        return f"gradviz.return_types.aminmax(\nmin={self[0]!r},\nmax={self[1]!r})"


_MinMax.__name__ = _MinMax.__qualname__ = "aminmax"
_MinMax.__module__ = "gradviz.return_types"
RETURN_TYPES["aminmax"] = _MinMax


# ---- cummax / cummin -----------------------------------------------------------------------

def _running_extreme(a, dim, largest):
    """The running max (or min) along ``dim`` and the index it came from, as torch's CPU
    kernel: a later equal value takes over the index, and a NaN, once seen, stays."""
    moved = np.moveaxis(a, dim, 0)
    values = np.empty_like(moved)
    indices = np.empty(moved.shape, dtype=np.int64)
    if moved.shape[0] == 0:
        return np.moveaxis(values, 0, dim), np.moveaxis(indices, 0, dim)
    best = moved[0].copy()
    where = np.zeros(moved.shape[1:], dtype=np.int64)
    values[0], indices[0] = best, where
    floating = a.dtype.kind == "f"
    for i in range(1, moved.shape[0]):
        current = moved[i]
        better = current >= best if largest else current <= best
        if floating:
            better = (better & ~np.isnan(best)) | np.isnan(current)
        best = np.where(better, current, best)
        where = np.where(better, i, where)
        values[i], indices[i] = best, where
    return np.moveaxis(values, 0, dim), np.moveaxis(indices, 0, dim)


def _scatter_to_indices(ctx, g, g_indices=None):
    if not ctx.shape:  # a 0-d input is its own running extreme
        return (g,)
    return (_scatter_add_into_zeros(g, ctx.indices_tensor, ctx.dim, ctx.shape),)


# PyTorch's node saves the input (for its shape) and the indices returned
_RUNNING_SAVED = {"self": SELF, "dim": DIM, "indices": Computed(tensor_attr("indices_tensor"))}
_CUMMAX = Op("cummax", "CummaxBackward0", forward=lambda a, values, **_: values,
             backward=_scatter_to_indices, saves=saves_inputs(0), saved=_RUNNING_SAVED)
_CUMMIN = Op("cummin", "CumminBackward0", forward=lambda a, values, **_: values,
             backward=_scatter_to_indices, saves=saves_inputs(0), saved=_RUNNING_SAVED)


def _cumulative_extreme(input, dim, largest):
    name = "cummax" if largest else "cummin"
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        values, indices = input._data.copy(), np.zeros((), np.int64)
    else:
        values, indices = _running_extreme(input._data, dim, largest)
    indices_tensor = _wrap(indices)
    out = apply(_CUMMAX if largest else _CUMMIN, input, values=values,
                indices_tensor=indices_tensor, dim=dim, shape=input._data.shape, dim_arg=dim_arg)
    return RETURN_TYPES[name](out, indices_tensor)


@declare(method=True)
@numpy_names
def cummax(input, dim):
    """``(values, indices)``: the running maximum along ``dim`` and where each came from; the
    gradient goes to those entries."""
    return _cumulative_extreme(input, dim, True)


@declare(method=True)
@numpy_names
def cummin(input, dim):
    """``(values, indices)``: the running minimum along ``dim`` and where each came from."""
    return _cumulative_extreme(input, dim, False)


# ---- logcumsumexp --------------------------------------------------------------------------

def _logcumsumexp_forward(a, dim, dim_arg=None):
    if a.ndim == 0:
        return a.copy()
    return np.logaddexp.accumulate(a, axis=dim)


def _reverse_logcumsumexp(x, dim):
    return flip(logcumsumexp(flip(x, [dim]), dim), [dim])


def _logcumsumexp_backward(ctx, g):
    """``grad_i = sum_{j >= i} g_j exp(x_i - out_j)``, summed in log space separately for the
    positive and the negative parts of ``g`` so nothing overflows (PyTorch's formula)."""
    x, out = ctx.input(0), ctx.output()
    if x.ndim == 0:
        return (g,)
    lowest = float(np.finfo(g.dtype.numpy).min)
    log_abs = log(_abs(g))
    log_positive = where(gt(g, 0), log_abs, lowest)
    log_negative = where(lt(g, 0), log_abs, lowest)
    positive = exp(_reverse_logcumsumexp(log_positive - out, ctx.dim) + x)
    negative = exp(_reverse_logcumsumexp(log_negative - out, ctx.dim) + x)
    return (positive - negative,)


_LOGCUMSUMEXP = Op("logcumsumexp", "LogcumsumexpBackward0", forward=_logcumsumexp_forward,
                   backward=_logcumsumexp_backward, saves=lambda needs: ((0,), True),
                   saved={"self": SELF, "dim": DIM, "result": RESULT})


@declare(method=True)
@numpy_names
def logcumsumexp(input, dim):
    """``log(cumsum(exp(input), dim))`` without overflow; floating-point tensors only, as in
    PyTorch."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f'"logcumsumexp_out_cpu" not implemented for \'{TYPE_WORDS[input.dtype.name]}\': '
            f"convert the input to a floating-point dtype first (x.float())")
    return apply(_LOGCUMSUMEXP, input, dim=_wrap_dim(dim, input.ndim), dim_arg=dim)


# ---- kthvalue ------------------------------------------------------------------------------

_KTHVALUE = Op("kthvalue", "KthvalueBackward0", forward=lambda a, values, **_: values,
               backward=_select_backward, saved=SELECTED_SAVED)


@declare(method=True)
@numpy_names
def kthvalue(input, k, dim=-1, keepdim=False):
    """``(values, indices)``: the ``k``-th smallest value along ``dim`` (``k`` from 1) and
    where it is; the gradient goes to that entry."""
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim] if input.ndim else 1
    if size == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {dim} to have non-zero size.")
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}: "
                           f"k is {k}, the dimension has {size} entries (k counts from 1)")
    if input.ndim == 0:
        indices, values = np.zeros((), np.int64), input._data.copy()
    else:
        order = np.argsort(input._data, axis=dim, kind="stable")  # NaN sorts last, as in torch
        indices = np.take(order, [k - 1], axis=dim).astype(np.int64)
        values = np.take_along_axis(input._data, indices, axis=dim)
    keep = bool(keepdim) or input.ndim == 0
    out_values = values if keep else np.squeeze(values, dim)
    out_indices = indices if keep else np.squeeze(indices, dim)
    out = apply(_KTHVALUE, input, values=out_values, indices_tensor=_wrap(indices), dim=dim,
                keepdim=keep, shape=input._data.shape, dim_arg=dim_arg)
    return RETURN_TYPES["kthvalue"](out, _wrap(out_indices))


# ---- aminmax -------------------------------------------------------------------------------

def _aminmax_forward(a, dims, keepdim, shape, count, low, high, dim_arg=None):
    return (low._data.copy(), high._data.copy())


def _share_among_ties(ctx, g, extreme):
    """The gradient of ``amin``/``amax`` at the entries equal to ``extreme``, shared evenly."""
    hit = eq(ctx.input(0), _keep(extreme, ctx)).to(g.dtype)
    share = _keep(sum(hit, list(ctx.dims), keepdim=True), _KeepCtx(ctx))
    return _keep(g, ctx) * hit / share


def _aminmax_backward(ctx, g_min, g_max):
    grad = None
    for g, extreme in ((g_min, ctx.low), (g_max, ctx.high)):
        if g is not None:
            part = _share_among_ties(ctx, g, extreme)
            grad = part if grad is None else grad + part
    return (grad,)


# the extremes travel as attributes (constants): only their equality with the input matters
_AMINMAX = Op("aminmax", "AminmaxBackward0", forward=_aminmax_forward,
              backward=_aminmax_backward, saves=saves_inputs(0),
              saved={"self": SELF, "keepdim": KEEPDIM,
                     "dim": Computed(lambda node: None if node.attrs["dim_arg"] is None
                                     else torch_int(node.attrs["dim_arg"])),
                     "min": Computed(tensor_attr("low")), "max": Computed(tensor_attr("high"))})


@declare(method=True)
def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` over ``dim`` (all entries by default) in one call; each gradient is
    shared evenly among the tied entries, as for ``amin`` and ``amax``."""
    if input.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dim is not None:
        d = _wrap_dim(dim, input.ndim)
        if input.ndim and input._data.shape[d] == 0:
            raise IndexError(f"aminmax(): Expected reduction dim {d} to have non-zero size.")
    attrs = _reduce_attrs(input, dim, keepdim)
    data = input._data
    low = _wrap(np.asarray(np.min(data, axis=attrs["dims"], keepdims=attrs["keepdim"])))
    high = _wrap(np.asarray(np.max(data, axis=attrs["dims"], keepdims=attrs["keepdim"])))
    low, high = apply(_AMINMAX, input, low=low, high=high, dim_arg=dim, **attrs)
    return _MinMax(low, high)


# ---- nansum / nanmean -----------------------------------------------------------------------

def _nansum_backward(ctx, g):
    """The gradient times "not NaN" (a multiplication, as PyTorch's, so a NaN gradient stays
    NaN everywhere)."""
    return (_keep(g, ctx) * logical_not(isnan(ctx.input(0))).to(g.dtype),)


_NANSUM = Op("nansum", "NansumBackward0",
             forward=lambda a, dims, keepdim, shape, count, out_dtype, dims_arg=None: np.nansum(
                 a, axis=dims, keepdims=keepdim, dtype=out_dtype.numpy),
             backward=_nansum_backward, saves=saves_inputs(0),
             saved={"self": SELF, "dim": OPTIONAL_DIMS, "keepdim": KEEPDIM})


@declare(method=True)
@numpy_names
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """``sum`` that treats NaN as zero (and gives NaN entries no gradient)."""
    out_dtype = _dtypes.as_dtype(dtype) if dtype is not None else (
        input.dtype if input.dtype.is_floating_point else _dtypes.int64)
    if not out_dtype.is_floating_point and input.dtype.is_floating_point:
        input = input.to(out_dtype)
    return apply(_NANSUM, input, out_dtype=out_dtype, **_reduce_attrs(input, dim, keepdim),
                 dims_arg=dim)


@declare(method=True)
@numpy_names
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN entries (NaN where all are NaN): ``nansum`` divided by their
    count, as PyTorch composes it (the node is ``DivBackward0``)."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype "
                           f"but got {TYPE_WORDS[input.dtype.name]}")
    count = sum(logical_not(isnan(input)), dim, keepdim)
    return nansum(input, dim, keepdim) / count


__all__ = exports(globals())
