"""Reductions (``sum``, ``mean``) and ``matmul`` in all its 1-D, 2-D and batched forms."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _not_a_tensor, _wrap, _wrap_dim
from ._registry import Op, apply, declare, exports, numpy_names, saves_inputs
from ._saved import (
    DIM,
    DIMS,
    KEEPDIM,
    OPTIONAL_DIMS,
    RESULT,
    SELECTED_SAVED,
    SELF,
    SELF_SIZES,
    Attr,
    Computed,
    input_numel,
)
from ._shape import expand, reshape, unsqueeze


def _normalize_dims(dim, ndim):
    """``dim`` as a sorted tuple of non-negative axes; None means all."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(_wrap_dim(d, ndim) for d in dim)
    else:
        dims = (_wrap_dim(dim, ndim),)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
    if ndim == 0:  # a 0-d tensor accepts dim 0 or -1 and has nothing to reduce
        return ()
    return tuple(sorted(dims)) if dims else tuple(range(ndim))


def _expand_back(g, shape, dims, keepdim):
    """Undo a reduction's shape change: unsqueeze the reduced dims, then expand."""
    if not keepdim:
        for d in dims:
            g = unsqueeze(g, d)
    return expand(g, shape)


def _expand_back_array(g, shape, dims, keepdim):
    """``_expand_back`` on a numpy array (fast backward rules)."""
    if not keepdim and dims:
        g = np.expand_dims(g, dims)
    return np.broadcast_to(g, shape)


def sum_to_array(g, shape):
    """``sum_to`` on a numpy array (fast backward rules): the same sums in the same order."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead == 1 and shape and 1 not in shape:  # a bias's gradient: the rows summed
        return _add_reduce(g, 0, g.dtype)
    dims = list(range(lead))
    for i, size in enumerate(shape):
        if size == 1 and g.shape[lead + i] != 1:
            dims.append(lead + i)
    out = _add_reduce(g, tuple(dims), g.dtype, None, True) if dims else g
    return out.reshape(shape)


_add_reduce = np.add.reduce


def _sum_dtype(x, dtype=None):
    if dtype is not None:
        return _dtypes.as_dtype(dtype)
    d = x.dtype
    return _dtypes.int64 if (not d.is_floating_point) else d


def _check_floating(input, what):
    """std, var and the vector norm accept floating-point tensors only, as in PyTorch."""
    if not input.dtype.is_floating_point:
        if what == "norm":
            raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                               f"input. Got {TYPE_WORDS[input.dtype.name]}")
        raise RuntimeError("std and var only support floating point and complex dtypes")


def _make_sum(node, saved=None):
    return Op(f"sum_{node}", node,
              forward=lambda a, dims, keepdim, shape, out_dtype, dims_arg=None: np.add.reduce(  # np.sum's own call
                  a, axis=dims, dtype=out_dtype.numpy, keepdims=keepdim),
              backward=lambda ctx, g: (_expand_back(g, ctx.shape, ctx.dims, ctx.keepdim),),
              fast_backward=_sum_fast, saved=saved)


def _sum_fast(ctx, g):
    attrs = ctx.attrs
    return (_expand_back_array(g, attrs["shape"], attrs["dims"], attrs["keepdim"]),)


_SUM_ALL = _make_sum("SumBackward0", saved={"self_sym_sizes": SELF_SIZES})
_SUM_DIM = _make_sum("SumBackward1", saved={"dim": DIMS, "keepdim": KEEPDIM, "self_sym_sizes": SELF_SIZES})


@declare(method=True, out=True)
@numpy_names
def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001  (torch's name)
    """Sum over ``dim`` (an int, a tuple, or None for all dims)."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "sum")
    dims = _normalize_dims(dim, input.ndim)
    if dim is None:
        return apply(_SUM_ALL, input, dims=dims, keepdim=bool(keepdim), shape=input._data.shape,
                     out_dtype=_sum_dtype(input, dtype))
    return apply(_SUM_DIM, input, dims=dims, keepdim=bool(keepdim), shape=input._data.shape,
                 out_dtype=_sum_dtype(input, dtype), dims_arg=dim)  # Note [Saved ints as passed]


def _mean_forward(a, dims, keepdim, shape, count, dims_arg=None):
    if count == 0:  # the mean of nothing is NaN, as in torch (numpy would also warn)
        return np.sum(a, axis=dims, keepdims=keepdim) * np.nan
    return np.mean(a, axis=dims, keepdims=keepdim)


def _mean_backward(ctx, g):
    return (_expand_back(g, ctx.shape, ctx.dims, ctx.keepdim) / ctx.count,)


def _mean_fast(ctx, g):
    attrs = ctx.attrs
    return (_expand_back_array(g, attrs["shape"], attrs["dims"], attrs["keepdim"]) / attrs["count"],)


_MEAN_ALL = Op("mean", "MeanBackward0", forward=_mean_forward, backward=_mean_backward,
               fast_backward=_mean_fast,
               saved={"self_sym_sizes": SELF_SIZES, "self_sym_numel": Computed(input_numel)})
_MEAN_DIM = Op("mean_dim", "MeanBackward1", forward=_mean_forward, backward=_mean_backward,
               fast_backward=_mean_fast,
               saved={"dim": DIMS, "keepdim": KEEPDIM, "self_sym_sizes": SELF_SIZES,
                   "self_sym_numel": Computed(input_numel)})


@declare(method=True, out=True)
@numpy_names
def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim``; floating-point tensors only, as in PyTorch."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "mean")
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {TYPE_WORDS[input.dtype.name]}"
        )
    dims = _normalize_dims(dim, input.ndim)
    count = 1
    for d in dims:
        count *= input._data.shape[d]
    if dim is None:
        return apply(_MEAN_ALL, input, dims=dims, keepdim=bool(keepdim), shape=input._data.shape, count=count)
    return apply(_MEAN_DIM, input, dims=dims, keepdim=bool(keepdim), shape=input._data.shape, count=count,
                 dims_arg=dim)


def sum_to(grad, shape):
    """Sum ``grad`` down to ``shape`` (which must broadcast to grad's shape); differentiable."""
    shape = tuple(shape)
    if grad._data.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = list(range(lead))
    for i, size in enumerate(shape):
        if size == 1 and grad._data.shape[lead + i] != 1:
            dims.append(lead + i)
    out = sum(grad, dims, keepdim=True) if dims else grad
    return reshape(out, shape)


# ---- more reductions --------------------------------------------------------------------
# Each returns to the input's shape with _expand_back, so the rules stay differentiable.

def _reduce_attrs(input, dim, keepdim):
    dims = _normalize_dims(dim, input.ndim)
    count = 1
    for d in dims:
        count *= input._data.shape[d]
    return dict(dims=dims, keepdim=bool(keepdim), shape=input._data.shape, count=count)


def _keep(value, ctx):
    """A reduced value (out or grad) reshaped so it broadcasts against the input."""
    return _expand_back(value, ctx.shape, ctx.dims, ctx.keepdim)


def _prod_forward(a, dims, keepdim, shape, count, dim_arg=None):
    return np.prod(a, axis=dims, keepdims=keepdim)


def _prod_backward(ctx, g):
    """d prod / d x_i is the product of the other entries of x_i's slice.

    Without zeros that is ``prod / x_i``. With zeros, division fails, so the products of the
    others are formed explicitly (an n-by-n masked product per slice). Both are built from
    differentiable ops, so higher derivatives are exact too.
    """
    x = ctx.input(0)
    if x.ndim == 0:  # torch's prod_backward: the gradient itself (not connected to x)
        return (g,)
    if np.any(x._data == 0):
        others = _prod_of_others(x, ctx.dims)
    else:
        others = _keep(ctx.output(), ctx) / x
    return (_keep(g, ctx) * others,)


def _prod_of_others(x, dims):
    from ._pointwise import where_one
    from ._shape import permute

    kept = [d for d in range(x.ndim) if d not in dims]
    order = kept + list(dims)
    moved = permute(x, *order) if order != list(range(x.ndim)) else x
    lead = moved._data.shape[:len(kept)]
    n = 1
    for d in dims:
        n *= x._data.shape[d]
    rows = expand(unsqueeze(reshape(moved, *lead, n), -2), *lead, n, n)  # row k: the slice
    diagonal = _wrap(np.eye(n, dtype=bool))
    others = apply(_PROD_DIM, where_one(diagonal, rows), **_reduce_attrs(rows, -1, False), dim_arg=-1)
    others = reshape(others, *moved._data.shape)
    if order != list(range(x.ndim)):
        others = permute(others, *np.argsort(order).tolist())
    return others


class _KeepCtx:
    """_keep for a value reduced with keepdim=True."""

    def __init__(self, ctx):
        self.shape, self.dims, self.keepdim = ctx.shape, ctx.dims, True


_PROD_ALL = Op("prod", "ProdBackward0", forward=_prod_forward, backward=_prod_backward,
               saves=lambda needs: ((0,), True), saved={"self": SELF, "result": RESULT})
_PROD_DIM = Op("prod_dim", "ProdBackward1", forward=_prod_forward, backward=_prod_backward,
               saves=lambda needs: ((0,), True),
               saved={"self": SELF, "dim": DIM, "keepdim": KEEPDIM, "result": RESULT})


@declare(method=True, out=True)
@numpy_names
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product of all elements, or along ``dim``. Mirrors ``torch.prod``."""
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point and input.dtype is not _dtypes.int64:
        input = input.to(_dtypes.int64)  # like sum: integers and bools multiply as int64
    if dim is None:
        return apply(_PROD_ALL, input, **_reduce_attrs(input, dim, keepdim))
    return apply(_PROD_DIM, input, **_reduce_attrs(input, dim, keepdim), dim_arg=dim)


def _evenly_backward(ctx, g):
    """amax/amin and full max/min: the gradient is shared equally among tied extreme entries."""
    from ._pointwise import eq

    x = ctx.input(0)
    hit = eq(x, _keep(ctx.output(), ctx)).to(g.dtype)
    share = _keep(sum(hit, list(ctx.dims), keepdim=True), _KeepCtx(ctx))
    return (_keep(g, ctx) * hit / share,)


def _evenly_all_backward(ctx, g):
    """max()/min() of every entry: the gradient is shared equally among the entries equal to
    the result, or, when the result is NaN, among the NaN entries (torch's
    ``evenly_distribute_backward``; ``amax``/``amin`` compare with ``==`` only)."""
    from ._math import isnan
    from ._pointwise import eq

    x = ctx.input(0)
    result = ctx.output()
    hit = (isnan(x) if np.isnan(result._data).any() else eq(x, result)).to(g.dtype)
    return (g * hit / sum(hit),)


def _extreme_op(name, node, fn, saved=None, backward=_evenly_backward):
    return Op(name, node,
              forward=lambda a, dims, keepdim, shape, count, dims_arg=None: fn(a, axis=dims, keepdims=keepdim),
              backward=backward, saves=lambda needs: ((0,), True), saved=saved)


_AMAX = _extreme_op("amax", "AmaxBackward0", np.max,
                    saved={"self": SELF, "dim": DIMS, "keepdim": KEEPDIM, "result": RESULT})
_AMIN = _extreme_op("amin", "AminBackward0", np.min,
                    saved={"self": SELF, "dim": DIMS, "keepdim": KEEPDIM, "result": RESULT})
_MAX_ALL = _extreme_op("max", "MaxBackward1", np.max, saved={"self": SELF, "result": RESULT},
                       backward=_evenly_all_backward)
_MIN_ALL = _extreme_op("min", "MinBackward1", np.min, saved={"self": SELF, "result": RESULT},
                       backward=_evenly_all_backward)


def _check_nonempty(input, dim, what):
    if input.ndim == 0:
        return  # one entry; a dim of 0 or -1 reads it as a vector of one, as in torch
    dims = _normalize_dims(dim, input.ndim)
    empty = [d for d in dims if input._data.shape[d] == 0]
    if empty or (input._data.size == 0 and dim is None):
        # torch's types differ: max(), min(), amax(), amin() of nothing is a RuntimeError, the
        # rest IndexErrors; the message names the first empty dim
        kind = RuntimeError if dim is None and what in ("max", "min", "amax", "amin") else IndexError
        hint = "" if what in ("argmax", "argmin") else (
            " Specify the reduction dim with the 'dim' argument.")
        raise kind(
            f"{what}(): Expected reduction dim to be specified for input.numel() == 0.{hint}"
            if dim is None else
            f"{what}(): Expected reduction dim {empty[0]} to have non-zero size."
        )


@declare(method=True)
@numpy_names
def amax(input, dim=(), keepdim=False):
    """The maximum over ``dim`` (all dims by default); the gradient is shared evenly among ties.

    Mirrors ``torch.amax``."""
    dim_arg = dim  # Note [Saved ints as passed]
    dim = None if isinstance(dim, tuple) and not dim else dim  # (a numpy int is no tuple)
    _check_nonempty(input, dim, "amax")
    return apply(_AMAX, input, **_reduce_attrs(input, dim, keepdim), dims_arg=dim_arg)


@declare(method=True)
@numpy_names
def amin(input, dim=(), keepdim=False):
    """The minimum over ``dim`` (all dims by default); the gradient is shared evenly among ties.

    Mirrors ``torch.amin``."""
    dim_arg = dim
    dim = None if isinstance(dim, tuple) and not dim else dim
    _check_nonempty(input, dim, "amin")
    return apply(_AMIN, input, **_reduce_attrs(input, dim, keepdim), dims_arg=dim_arg)


def _select_backward(ctx, g):
    from ._indexing import _scatter_add_into_zeros

    if not ctx.shape:  # a 0-d input: its one entry was chosen
        return (reshape(g, ()),)
    if not ctx.keepdim:
        g = unsqueeze(g, ctx.dim)
    return (_scatter_add_into_zeros(g, ctx.indices_tensor, ctx.dim, ctx.shape),)


_MAX_DIM = Op("max_dim", "MaxBackward0", forward=lambda a, values, **_: values, backward=_select_backward,
              saved=SELECTED_SAVED)
_MIN_DIM = Op("min_dim", "MinBackward0", forward=lambda a, values, **_: values, backward=_select_backward,
              saved=SELECTED_SAVED)


def _take_along(a, indices, dim):
    """``np.take_along_axis(a, indices, dim)`` for ``indices`` of one entry along ``dim``: the
    same elements, without numpy's Python-level index building for 1-D and 2-D arrays (a
    quarter of ``x.max(dim=1)`` of a small matrix)."""
    if a.ndim == 1:
        return a.take(indices)
    if a.ndim == 2:
        if dim == 1:
            return a[np.arange(a.shape[0])[:, None], indices]
        return a[indices, np.arange(a.shape[1])]
    return np.take_along_axis(a, indices, axis=dim)


def _values_indices(input, dim, keepdim, pick):
    """``(values, indices)`` of the max or min along ``dim``; the gradient goes to the index."""
    from ._indexing import RETURN_TYPES

    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    if not input._data.size:  # only an empty input can raise
        _check_nonempty(input, dim, "max" if pick is np.argmax else "min")
    if input.ndim == 0:
        indices = np.zeros((), np.int64)
        values = input._data.copy()
    else:
        indices = pick(input._data, axis=dim, keepdims=True).astype(np.int64, copy=False)
        values = _take_along(input._data, indices, dim)
    op = _MAX_DIM if pick is np.argmax else _MIN_DIM
    out_values = values if keepdim or input.ndim == 0 else values.squeeze(dim)
    out_indices = indices if keepdim or input.ndim == 0 else indices.squeeze(dim)
    out = apply(op, input, values=out_values, indices_tensor=_wrap(indices), dim=dim,
                keepdim=bool(keepdim) or input.ndim == 0, shape=input._data.shape, dim_arg=dim_arg)
    return RETURN_TYPES["max" if pick is np.argmax else "min"](out, _wrap(out_indices))


@declare(method=True)
@numpy_names
def max(input, dim=None, keepdim=False):  # noqa: A001
    """The maximum; with ``dim``, ``(values, indices)`` along it (the gradient goes to the
    chosen index); without, the gradient is shared among tied maxima, as in PyTorch."""
    if isinstance(dim, Tensor):
        from ._pointwise import maximum

        return maximum(input, dim)
    if dim is None:
        if not input._data.size:  # only an empty input can raise
            _check_nonempty(input, None, "max")
        return apply(_MAX_ALL, input, **_reduce_attrs(input, None, False))
    return _values_indices(input, dim, keepdim, np.argmax)


@declare(method=True)
@numpy_names
def min(input, dim=None, keepdim=False):  # noqa: A001
    """The minimum of all elements, ``(values, indices)`` along ``dim``, or the elementwise minimum
    with a tensor.

    Mirrors ``torch.min``."""
    if isinstance(dim, Tensor):
        from ._pointwise import minimum

        return minimum(input, dim)
    if dim is None:
        if not input._data.size:  # only an empty input can raise
            _check_nonempty(input, None, "min")
        return apply(_MIN_ALL, input, **_reduce_attrs(input, None, False))
    return _values_indices(input, dim, keepdim, np.argmin)


@declare(method=True)
@numpy_names
def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (not differentiable); the flat index when ``dim`` is None."""
    _check_nonempty(input, dim, "argmax")
    if dim is None:
        return _wrap(np.asarray(np.argmax(input._data), dtype=np.int64))
    dim = _wrap_dim(dim, input.ndim)
    return _wrap(np.argmax(input._data, axis=dim, keepdims=keepdim).astype(np.int64))


@declare(method=True)
@numpy_names
def argmin(input, dim=None, keepdim=False):
    """The index of the minimum, over the flattened tensor or along ``dim``.

    Mirrors ``torch.argmin``."""
    _check_nonempty(input, dim, "argmin")
    if dim is None:
        return _wrap(np.asarray(np.argmin(input._data), dtype=np.int64))
    dim = _wrap_dim(dim, input.ndim)
    return _wrap(np.argmin(input._data, axis=dim, keepdims=keepdim).astype(np.int64))


def _var_wide(a, dims, keepdim, shape, count, correction):
    """The variance in float64 for float32 and float16 ``a``, as torch's CPU kernel
    accumulates it in double (its results are the float64 values rounded once to the dtype:
    numpy's float32 variance was a bit off in about a third of rows); in ``a``'s dtype
    otherwise."""
    if a.dtype in (np.float32, np.float16):
        a = a.astype(np.float64)
    if count - correction > 0:
        return np.var(a, axis=dims, keepdims=keepdim, ddof=correction)
    with warnings.catch_warnings():  # torch's own warning was given by _variance
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.var(a, axis=dims, keepdims=keepdim, ddof=correction)


def _var_forward(a, dims, keepdim, shape, count, correction, dims_arg=None, correction_arg=None):
    return _var_wide(a, dims, keepdim, shape, count, correction).astype(a.dtype, copy=False)


def _std_forward(a, dims, keepdim, shape, count, correction, dims_arg=None, correction_arg=None):
    """The square root of :func:`_var_wide`, rounded to ``a``'s dtype after it, as torch's."""
    return np.sqrt(_var_wide(a, dims, keepdim, shape, count, correction)).astype(a.dtype,
                                                                                copy=False)


def _var_backward(ctx, g):
    x = ctx.input(0)
    centered = x - mean(x, list(ctx.dims), keepdim=True)
    # a tensor division: no correction left (one element, correction 1) gives nan, as torch
    return (_keep(g, ctx) * centered * 2.0 / (ctx.count - ctx.correction),)


# what std, var, std_mean and var_mean save under PyTorch's names (Note [Saved correction])
VARIANCE_SAVED = {"self": SELF, "dim": OPTIONAL_DIMS, "correction": Attr("correction_arg"),
                  "keepdim": KEEPDIM}
_VAR = Op("var", "VarBackward0", forward=_var_forward, backward=_var_backward, saves=saves_inputs(0),
          saved=VARIANCE_SAVED)


def _std_backward(ctx, g):
    """As torch's ``std_backward``: ``grad / std`` is zero where the std is zero (all the
    values equal), so a constant slice has a zero gradient, not the NaN of 0/0."""
    from ._pointwise import eq, where_zero

    x, result = ctx.input(0), ctx.output()
    centered = x - mean(x, list(ctx.dims), keepdim=True)
    scaled = where_zero(eq(result, 0), g / result)
    return (_keep(scaled, ctx) * centered / (ctx.count - ctx.correction),)


_STD = Op("std", "StdBackward0", forward=_std_forward,
          backward=_std_backward, saves=lambda needs: ((0,), True),
          saved={**VARIANCE_SAVED, "result": RESULT})


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


# Note [Saved correction]
# ~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's std and var nodes save ``correction`` as the overload the call bound to passed it:
# ``x.var()``, ``x.var(keepdim=True)`` and ``x.var(correction=c)`` bind to the ``correction``
# overload (``_saved_correction`` None, or c); ``x.var(True)``/``x.var(unbiased=False)`` and
# every call with a ``dim`` bind to the ``unbiased`` ones, which pass ``1`` or ``0``. gradviz
# records that value as ``correction_arg``. Two calls it cannot tell apart from others, as
# its defaults are None: ``dim=None`` passed explicitly (PyTorch: 1, gradviz: None) and
# ``correction=None`` passed with a dim (PyTorch: None, gradviz: 1).

def _saved_correction(dim, unbiased, correction):
    """``_saved_correction`` of the call (Note [Saved correction])."""
    if correction is not None:
        return correction
    if unbiased is not None:
        return 1 if unbiased else 0
    return None if dim is None else 1


def _variance(op, name, input, dim, unbiased, keepdim, correction):
    """``var``/``std`` (``op``) with torch's warning, named ``name``, when the correction
    leaves no degrees of freedom (the result is then NaN or inf, as in torch)."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _check_floating(input, name.split("_")[0])
    correction_arg, correction = correction, _correction(unbiased, correction)
    attrs = _reduce_attrs(input, dim, keepdim)
    attrs.update(dims_arg=dim, correction_arg=_saved_correction(dim, unbiased, correction_arg))
    if attrs["count"] - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=4)
    return apply(op, input, correction=correction, **attrs)


@declare(method=True)
@numpy_names
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1)."""
    return _variance(_VAR, "var", input, dim, unbiased, keepdim, correction)


@declare(method=True)
@numpy_names
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation over ``dim`` (all dims by default), with Bessel's correction by
    default.

    Mirrors ``torch.std``."""
    return _variance(_STD, "std", input, dim, unbiased, keepdim, correction)


def _logsumexp_forward(a, dims, keepdim, shape, count, dims_arg=None):
    if a.size == 0:
        return np.log(np.sum(np.exp(a), axis=dims, keepdims=keepdim))
    peak = np.max(a, axis=dims, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    out = np.log(np.sum(np.exp(a - peak), axis=dims, keepdims=True)) + peak
    return out if keepdim else np.squeeze(out, axis=dims)


def _logsumexp_backward(ctx, g):
    from ._pointwise import exp

    return (_keep(g, ctx) * exp(ctx.input(0) - _keep(ctx.output(), ctx)),)


_LOGSUMEXP = Op("logsumexp", "LogsumexpBackward0", forward=_logsumexp_forward,
                backward=_logsumexp_backward, saves=lambda needs: ((0,), True),
                saved={"self": SELF, "dim": DIMS, "keepdim": KEEPDIM, "result": RESULT})


@declare(method=True)
@numpy_names
def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input), dim))``, computed without overflow (integers as the default
    float dtype)."""
    if not input.dtype.is_floating_point:
        input = input.to(_dtypes.get_default_dtype())
    return apply(_LOGSUMEXP, input, **_reduce_attrs(input, dim, keepdim), dims_arg=dim)


def _norm_backward(ctx, g):
    """torch's ``norm_backward`` (:func:`_norm_grad`) for the norm's node."""
    return (_norm_grad(ctx.input(0), ctx.p, _keep(ctx.output(), ctx), _keep(g, ctx),
                       lambda ties: _keep(sum(ties, ctx.dims, ctx.keepdim), ctx)),)


def _norm_grad(x, p, value, g, total):
    """torch's ``norm_backward``, branch by branch: the gradient reaching ``x`` through its
    p-norm ``value`` for the incoming ``g`` (both broadcasting against ``x``); ``total(t)``
    sums ``t`` over the norm's dims, broadcasting against ``x``. Where the norm is zero its
    gradient is masked to zero *after* dividing by the norm, so a second derivative there is
    torch's NaN (0/0 in the division's backward), not a zero."""
    from ._math import isnan
    from ._pointwise import abs, eq, logical_or, pow, sign, to, where_zero

    if p == 1:
        return sign(x) * g
    if p == 2:
        return g * where_zero(eq(value, 0), x / value)
    if p in (math.inf, -math.inf):  # shared evenly among the tied extremes (and NaNs)
        magnitude = abs(x)
        ties = to(logical_or(eq(magnitude, value), isnan(magnitude)), x.dtype)
        return sign(x) * (g / total(ties) * ties)
    if p < 1:
        scaled = sign(x) * where_zero(eq(x, 0), pow(abs(x), p - 1))
        return scaled * g * pow(value, 1 - p)
    scaled = sign(x) * pow(abs(x), p - 1) if p < 2 else x * pow(abs(x), p - 2)
    return scaled * where_zero(eq(value, 0), g / pow(value, p - 1))


def _norm_forward(a, dims, keepdim, shape, count, p, dims_arg=None):
    if p in (math.inf, -math.inf):
        reduce = np.max if p > 0 else np.min
        return reduce(np.abs(a), axis=dims, keepdims=keepdim)
    if p < 0:
        with np.errstate(divide="ignore"):
            return np.power(np.sum(np.abs(a) ** p, axis=dims, keepdims=keepdim), 1.0 / p)
    return _norm_forward_finite(a, dims, keepdim, shape, count, p)


def _norm_forward_finite(a, dims, keepdim, shape, count, p):
    """The p-norm of ``a`` over ``dims`` for a finite, non-negative ``p``."""
    if p == 2:
        return np.sqrt(np.sum(a * a, axis=dims, keepdims=keepdim))
    if p == 1:
        return np.sum(np.abs(a), axis=dims, keepdims=keepdim)
    return np.power(np.sum(np.abs(a) ** p, axis=dims, keepdims=keepdim), 1.0 / p)
_NORM = Op("norm", "LinalgVectorNormBackward0", forward=_norm_forward,
           backward=_norm_backward, saves=lambda needs: ((0,), True),
           saved={"self": SELF, "ord": Attr("p"), "dim": OPTIONAL_DIMS, "keepdim": KEEPDIM,
                  "result": RESULT})


# the count of nonzeros: piecewise constant, so its gradient is undefined (None), as torch's
# (which saves the input and the result all the same)
_NORM_ZERO = Op("norm_zero", "LinalgVectorNormBackward0",
                forward=lambda a, dims, keepdim, shape, count, p, dims_arg=None: np.sum(
                    a != 0, axis=dims, keepdims=keepdim).astype(a.dtype),
                backward=lambda ctx, g: (None,), saves=lambda needs: ((0,), True))


@declare(method=True)
def norm(input, p=2, dim=None, keepdim=False, dtype=None):
    """The vector p-norm over ``dim``: ``p`` = 2 by default, any positive number, ``inf``
    (the largest magnitude), ``-inf`` (the smallest) or 0 (the count of nonzeros)."""
    if p == "fro" or p is None:
        p = 2
    if p == "nuc":  # the sum of singular values
        from ._linalg_norms import matrix_norm

        return matrix_norm(input, "nuc", tuple(range(input.ndim)) if dim is None else dim,
                           keepdim, dtype=dtype)
    if not isinstance(p, (int, float)):
        raise RuntimeError(f"norm(): p must be a number, 'fro' or 'nuc', got {p!r}")
    if dtype is not None:
        input = input.to(dtype)
    _check_floating(input, "norm")
    _check_identity(input, p, dim)
    if p == 0:
        return apply(_NORM_ZERO, input, p=p, **_reduce_attrs(input, dim, keepdim), dims_arg=dim)
    return apply(_NORM, input, p=p, **_reduce_attrs(input, dim, keepdim), dims_arg=dim)


def _check_identity(x, p, dim):
    """PyTorch's error for a norm without an identity (``inf``, negative ``p``) over an empty
    dim, or over an empty tensor (all dims); numpy's would be a ValueError."""
    if not (p < 0 or p == math.inf):
        return
    if dim is None and x.numel() == 0:
        raise RuntimeError(f"linalg.vector_norm cannot compute the {p:g} norm on an empty "
                           "tensor because the operation does not have an identity")
    dims = (dim,) if dim is not None and not isinstance(dim, (tuple, list)) else dim or ()
    for d in dims:  # (torch names the dim as given)
        if x.shape[_wrap_dim(d, x.ndim)] == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {p:g} norm on the "
                               f"dimension {d}because this dimension is empty and the "
                               "operation does not have an identity")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``torch.linalg.vector_norm``: :func:`norm` with ``ord`` for ``p``."""
    return norm(x, ord, dim, keepdim, dtype)


# ---- renorm ----------------------------------------------------------------------------------

# Note [Renorm]
# ~~~~~~~~~~~~~
# ``renorm(input, p, dim, maxnorm)`` scales every slice ``input.select(dim, i)`` whose p-norm
# (over all the other dims) exceeds ``maxnorm`` down to it, as PyTorch's: a factor
# ``maxnorm / (norm + 1e-7)`` where ``norm > maxnorm``, else 1, computed in the input's dtype
# (a float16 input's norm and factor in float32, as PyTorch's accumulate type), then
# ``input * factor``. So a slice ends slightly below ``maxnorm``, a NaN norm leaves its slice
# as it is, and an infinite one makes its finite entries 0 (inf * 0 is NaN). One node,
# ``RenormBackward0``, saving ``self``, ``p``, ``dim`` and ``maxnorm`` (p and maxnorm as
# given); its backward is PyTorch's ``renorm_backward`` written with gradviz ops (the norm
# recomputed from the input, the norm's own gradient by :func:`_norm_grad`), so it
# differentiates again:
#   where(norm > maxnorm, maxnorm / (norm + 1e-7) * (g - nb / (norm + 1e-7)), g),
# ``nb`` the gradient through the norm of ``sum(input * g)`` over the slice.

def _renorm_dims(ndim, dim):
    return tuple(d for d in range(ndim) if d != dim)


def _renorm_forward(a, p, dim, maxnorm, dim_arg=None):
    work = a.astype(np.float32) if a.dtype == np.float16 else a
    value = _norm_forward(work, _renorm_dims(a.ndim, dim), True, None, None, p)
    scalar = work.dtype.type
    with np.errstate(invalid="ignore"):  # a NaN norm: no scaling
        factor = np.where(value > scalar(maxnorm),
                          scalar(maxnorm) / (value + scalar(1e-7)), scalar(1))
    return a * factor.astype(a.dtype, copy=False)


def _renorm_backward(ctx, g):
    from ._pointwise import gt, reciprocal, where

    x = ctx.input(0)
    dims = _renorm_dims(x.ndim, ctx.dim)
    value = norm(x, ctx.p, dims, keepdim=True)
    through_norm = _norm_grad(x, ctx.p, value, sum(x * g, dims, keepdim=True),
                              lambda ties: sum(ties, dims, keepdim=True))
    inverse = reciprocal(value + 1e-7)
    return (where(gt(value, ctx.maxnorm), inverse * ctx.maxnorm * (g - inverse * through_norm),
                  g),)


_RENORM = Op("renorm", "RenormBackward0", forward=_renorm_forward, backward=_renorm_backward,
             saves=saves_inputs(0),
             saved={"self": SELF, "p": Attr("p"), "dim": DIM, "maxnorm": Attr("maxnorm")})


def _renorm_number(value, name, position):
    """``p`` or ``maxnorm`` as given (a 0-d tensor's value), or torch's TypeError."""
    if isinstance(value, Tensor) and value.ndim == 0:
        value = value.item()
    if not isinstance(value, (int, float, complex, np.number)):
        raise TypeError(f"renorm(): argument '{name}' (position {position}) must be Number, "
                        f"not {type(value).__name__}")
    return value


@declare(method=True, inplace=True, out=True)
def renorm(input, p, dim, maxnorm):
    """Each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` scaled down to
    norm ``maxnorm`` (Note [Renorm]). Mirrors ``torch.renorm``."""
    p = _renorm_number(p, "p", 2)
    if not isinstance(dim, (int, np.integer)):
        raise TypeError(f"renorm(): argument 'dim' (position 3) must be int, not "
                        f"{type(dim).__name__}")
    maxnorm = _renorm_number(maxnorm, "maxnorm", 4)
    if np.iscomplexobj(p):
        raise RuntimeError("renorm: p must be real-valued")
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if np.iscomplexobj(maxnorm):
        raise RuntimeError("renorm: maxnorm must be real-valued")
    if not maxnorm >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {float(maxnorm):g}")
    if input.ndim < 2:
        raise RuntimeError(
            f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_floating(input, "norm")
    _check_identity(input, p, _renorm_dims(input.ndim, dim))
    return apply(_RENORM, input, p=p, dim=dim, maxnorm=maxnorm, dim_arg=dim_arg)


def _cumsum_backward(ctx, g):
    from ._shape import flip

    return (flip(cumsum(flip(g, [ctx.dim]), ctx.dim), [ctx.dim]),)


def _widened(a):
    """float32 and float16 ``a`` in float64: torch's CPU scans (cumsum, cumprod) run in
    double for them and round each output once (numpy's float32 running sum was off in 80% of
    the entries of a (37, 230) cumsum, by up to 3.4e-5 relatively)."""
    return a.astype(np.float64) if a.dtype in (np.float32, np.float16) else a


def _cumsum_forward(a, dim, dim_arg=None):
    """``np.cumsum``, whose running sum starts from the first entry, where PyTorch's starts
    from +0.0: the two differ only on a leading run of -0.0, which PyTorch's makes +0.0, and
    adding +0.0 does exactly that (it changes no other value, NaN and infinities included).
    In double for float32 and float16, as torch's (:func:`_widened`)."""
    if not a.ndim:
        return a.copy()
    out = np.cumsum(_widened(a), axis=dim)
    if out.dtype.kind == "f":
        out += 0.0
    return out.astype(a.dtype, copy=False)


def _cumprod_forward(a, dim, dim_arg=None):
    """``np.cumprod``, in double for float32 and float16, as torch's (:func:`_widened`)."""
    if not a.ndim:
        return a.copy()
    return np.cumprod(_widened(a), axis=dim).astype(a.dtype, copy=False)


_CUMSUM = Op("cumsum", "CumsumBackward0", forward=_cumsum_forward,
             backward=_cumsum_backward, saved={"dim": DIM})


@declare(method=True, inplace=True, out=True)
@numpy_names
def cumsum(input, dim, *, dtype=None):
    """The cumulative sum along ``dim``. Mirrors ``torch.cumsum``."""
    if not isinstance(input, Tensor):
        raise _not_a_tensor(input, "cumsum")
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point:
        input = input.to(_dtypes.int64)
    return apply(_CUMSUM, input, dim=_wrap_dim(dim, input.ndim), dim_arg=dim)


def _cumprod_backward(ctx, g):
    """torch's ``cumprod_backward``: without zeros in x, ``reversed_cumsum(out * g) / x`` (the
    saved output in it, so a second derivative reaches the output's hooks as torch's does);
    with zeros, d/dx_i of sum_j g_j prod_{k<=j} x_k = sum_{j>=i} g_j prod_{k<=j, k!=i} x_k,
    computed without dividing by x. Both with gradviz ops (so they differentiate)."""
    from ._creation import ones
    from ._pointwise import where
    from ._shape import cat, flip

    x = ctx.input(0)
    dim = ctx.dim
    if x._data.size <= 1 or x.shape[dim] == 1:  # the gradient itself (not connected to x)
        return (g,)
    if not (x._data == 0).any():
        return (flip(cumsum(flip(ctx.output() * g, [dim]), dim), [dim]) / x,)
    one = ones((), dtype=x.dtype)
    grads = []
    for i in range(x.shape[dim]):
        without_i = cumprod(where(_position_mask(x, dim, i), one, x), dim)
        from_i_on = _after_mask(x, dim, i).to(x.dtype)
        grads.append(sum(g * without_i * from_i_on, dim, keepdim=True))
    return (cat(grads, dim),)


def _position_mask(x, dim, i):
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    mask = np.zeros(shape, dtype=bool)
    mask.reshape(-1)[i] = True
    return _wrap(mask)


def _after_mask(x, dim, i):
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    mask = np.zeros(shape, dtype=bool)
    mask.reshape(-1)[i:] = True
    return _wrap(mask)


_CUMPROD = Op("cumprod", "CumprodBackward0",
              forward=_cumprod_forward,
              backward=_cumprod_backward, saves=lambda needs: ((0,), True),
              saved={"dim": DIM, "self": SELF, "result": RESULT})


@declare(method=True, inplace=True)
@numpy_names
def cumprod(input, dim, *, dtype=None):
    """Cumulative product along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point:
        input = input.to(_dtypes.int64)
    return apply(_CUMPROD, input, dim=_wrap_dim(dim, input.ndim), dim_arg=dim)


# ---- logical reductions (not differentiable) ----------------------------------------------

def _logical_reduction(fn, input, dim, keepdim):
    data = input._data
    out_dtype = np.uint8 if data.dtype == np.uint8 else np.bool_  # torch keeps uint8
    if dim is None:
        return _wrap(np.asarray(fn(data), dtype=out_dtype))
    dims = _normalize_dims(dim, data.ndim)
    return _wrap(np.asarray(fn(data, axis=dims, keepdims=keepdim), dtype=out_dtype))


@declare(method=True)
@numpy_names
def all(input, dim=None, keepdim=False):  # noqa: A001  (torch's name)
    """Whether every element is nonzero (along ``dim``): a bool tensor."""
    return _logical_reduction(np.all, input, dim, keepdim)


@declare(method=True)
@numpy_names
def any(input, dim=None, keepdim=False):  # noqa: A001
    """Whether some element is nonzero (along ``dim``): a bool tensor."""
    return _logical_reduction(np.any, input, dim, keepdim)


@declare(method=True)
@numpy_names
def count_nonzero(input, dim=None):
    """The number of non-zero entries, in all of ``input`` or along ``dim``.

    Mirrors ``torch.count_nonzero``."""
    data = input._data
    if dim is None:
        return _wrap(np.asarray(np.count_nonzero(data), dtype=np.int64))
    dims = _normalize_dims(dim, data.ndim)
    return _wrap(np.asarray(np.count_nonzero(data, axis=dims), dtype=np.int64))


__all__ = exports(globals(), "sum_to", "vector_norm")
