"""Reductions (``sum``, ``mean``) and ``matmul`` in all its 1-D, 2-D and batched forms."""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import Tensor, _wrap_dim
from ._registry import Op, apply, promote, saves_inputs
from ._shape import expand, reshape, squeeze_dim, transpose, unsqueeze

__all__ = ["sum", "mean", "matmul", "sum_to"]


def _normalize_dims(dim, ndim):
    """``dim`` as a sorted tuple of non-negative axes; None means all."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(_wrap_dim(int(d), ndim) for d in dim)
    else:
        dims = (_wrap_dim(int(dim), ndim),)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
    return tuple(sorted(dims)) if dims else tuple(range(ndim))


def _expand_back(g, shape, dims, keepdim):
    """Undo a reduction's shape change: unsqueeze the reduced dims, then expand."""
    if not keepdim:
        for d in dims:
            g = unsqueeze(g, d)
    return expand(g, shape)


def _sum_dtype(x, dtype=None):
    if dtype is not None:
        return _dtypes.as_dtype(dtype)
    d = x.dtype
    return _dtypes.int64 if (not d.is_floating_point) else d


def _make_sum(node):
    return Op(f"sum_{node}", node,
              forward=lambda a, dims, keepdim, shape, out_dtype: np.sum(
                  a, axis=dims, keepdims=keepdim, dtype=out_dtype.numpy),
              backward=lambda ctx, g: (_expand_back(g, ctx.shape, ctx.dims, ctx.keepdim),))


_SUM_ALL = _make_sum("SumBackward0")
_SUM_DIM = _make_sum("SumBackward1")


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001  (torch's name)
    """Sum over ``dim`` (an int, a tuple, or None for all dims)."""
    dims = _normalize_dims(dim, input.ndim)
    op = _SUM_ALL if dim is None else _SUM_DIM
    return apply(op, input, dims=dims, keepdim=bool(keepdim), shape=input._data.shape,
                 out_dtype=_sum_dtype(input, dtype))


def _mean_forward(a, dims, keepdim, shape, count):
    return np.mean(a, axis=dims, keepdims=keepdim)


def _mean_backward(ctx, g):
    return (_expand_back(g, ctx.shape, ctx.dims, ctx.keepdim) / ctx.count,)


_MEAN_ALL = Op("mean", "MeanBackward0", forward=_mean_forward, backward=_mean_backward)
_MEAN_DIM = Op("mean_dim", "MeanBackward1", forward=_mean_forward, backward=_mean_backward)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim``; floating-point tensors only, as in PyTorch."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {input.dtype.name.capitalize()}"
        )
    dims = _normalize_dims(dim, input.ndim)
    count = 1
    for d in dims:
        count *= input._data.shape[d]
    op = _MEAN_ALL if dim is None else _MEAN_DIM
    return apply(op, input, dims=dims, keepdim=bool(keepdim), shape=input._data.shape, count=count)


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


# ---- matmul -----------------------------------------------------------------------------

def _mm_backward(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    grad_a = matmul(g, transpose(b, -1, -2)) if ctx.needs_input_grad[0] else None
    grad_b = matmul(transpose(a, -1, -2), g) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _dot_backward(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    return (g * b if ctx.needs_input_grad[0] else None,
            g * a if ctx.needs_input_grad[1] else None)


def _mv_backward(ctx, g):
    a, b = ctx.input(0), ctx.input(1)
    grad_a = matmul(unsqueeze(g, -1), unsqueeze(b, 0)) if ctx.needs_input_grad[0] else None
    grad_b = matmul(transpose(a, -1, -2), g) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _matmul_backward(ctx, g):
    """General case (batched, or a 1-D side against a batch): promote 1-D sides to 2-D."""
    a, b = ctx.input(0), ctx.input(1)
    a2 = unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = unsqueeze(b, -1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = unsqueeze(g2, -2)
    if b.ndim == 1:
        g2 = unsqueeze(g2, -1)
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = matmul(g2, transpose(b2, -1, -2))
        if a.ndim == 1:
            grad_a = squeeze_dim(grad_a, -2)
    if ctx.needs_input_grad[1]:
        grad_b = matmul(transpose(a2, -1, -2), g2)
        if b.ndim == 1:
            grad_b = squeeze_dim(grad_b, -1)
    return grad_a, grad_b


_both = saves_inputs(0, 1)
_DOT = Op("dot", "DotBackward0", forward=np.dot, backward=_dot_backward, saves=_both, dtype=promote)
_MM = Op("mm", "MmBackward0", forward=np.matmul, backward=_mm_backward, saves=_both, dtype=promote)
_MV = Op("mv", "MvBackward0", forward=np.matmul, backward=_mv_backward, saves=_both, dtype=promote)
_MATMUL = Op("matmul", "MatmulBackward0", forward=np.matmul, backward=_matmul_backward,
             saves=_both, dtype=promote)


def matmul(input, other):
    """Matrix product with PyTorch's rules for 1-D, 2-D and batched (broadcast) operands."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(
            "matmul(): arguments must be Tensors, got "
            f"{type(input).__name__} and {type(other).__name__}"
        )
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{input.ndim}D and {other.ndim}D"
        )
    a_shape, b_shape = input._data.shape, other._data.shape
    inner_a = a_shape[-1]
    inner_b = b_shape[0] if other.ndim == 1 else b_shape[-2]
    if inner_a != inner_b:
        if input.ndim == 1 and other.ndim == 1:
            raise RuntimeError(
                "inconsistent tensor size, expected tensor [%d] and src [%d] to have the same "
                "number of elements, but got %d and %d elements respectively"
                % (a_shape[0], b_shape[0], a_shape[0], b_shape[0])
            )
        shown_a = "x".join(map(str, a_shape if input.ndim == 2 else (1,) + a_shape if input.ndim == 1 else a_shape[-2:]))
        shown_b = "x".join(map(str, b_shape if other.ndim == 2 else b_shape + (1,) if other.ndim == 1 else b_shape[-2:]))
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({shown_a} and {shown_b})"
        )
    if input.ndim == 1 and other.ndim == 1:
        op = _DOT
    elif input.ndim == 2 and other.ndim == 2:
        op = _MM
    elif input.ndim == 2 and other.ndim == 1:
        op = _MV
    else:
        op = _MATMUL
    return apply(op, input, other)
