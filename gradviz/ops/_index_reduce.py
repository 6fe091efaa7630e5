"""``index_reduce`` / ``Tensor.index_reduce_``: slices of ``source`` combined into ``input``
at the positions a vector ``index`` names along ``dim``, by "prod", "mean", "amax" or "amin".

Note [index_reduce as scatter_reduce]
-------------------------------------
``input.index_reduce(dim, index, source, reduce)`` is ``input.scatter_reduce(dim, full,
source, reduce)`` with ``full`` the index vector broadcast to ``source``'s shape along ``dim``:
PyTorch's two backward formulas (``index_reduce_backward``, ``scatter_reduce_backward``) are the
same with ``index_select``/``index_add`` in place of ``gather``/``scatter_add``, so the row
reuses ``scatter_reduce``'s forward and backward rules on ``full`` and only carries its own node
name (``IndexReduceBackward0``), saved names, checks and double-backward error.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _warn_once, _wrap, _wrap_dim
from ._indexing import _DoubleBackwardError, _grid, _scatter_reduce_backward, _scatter_reduce_forward
from ._registry import Op, apply, declare
from ._saved import DIM, OTHER, RESULT, SELF, Attr, Computed, tensor_attr
from ._scatter_add import add_at

__all__ = ["index_reduce"]

_REDUCTIONS = ("prod", "mean", "amax", "amin")
_DOUBLE_BACKWARD_MESSAGE = ("index_reduce(): Double backward is unsupported for source when >1 "
                            "zeros in source are scattered to the same position in self")


def _index_reduce_backward(ctx, g):
    grad_self, grad_source = _scatter_reduce_backward(ctx, g)
    if grad_source is not None and isinstance(grad_source.grad_fn, _DoubleBackwardError):
        grad_source.grad_fn.message = _DOUBLE_BACKWARD_MESSAGE
    return grad_self, grad_source


INDEX_REDUCE = Op("index_reduce", "IndexReduceBackward0", forward=_scatter_reduce_forward,
                  backward=_index_reduce_backward, dtype=lambda a, source, **_: a.dtype,
                  saves=lambda needs: ((0, 1), True),
                  saved={"dim": DIM, "include_self": Attr("include_self"),
                         "index": Computed(tensor_attr("index_vector")), "reduce": Attr("reduce"),
                         "result": RESULT, "self": SELF, "source": OTHER})


def _checked_index(input, dim, index, source, reduce):
    """``index`` as a numpy vector, after PyTorch's checks, in PyTorch's order."""
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin "
                           f"but got {reduce}.")
    if not isinstance(index, Tensor):
        raise TypeError(f"index_reduce(): argument 'index' must be Tensor, not {type(index).__name__}")
    if not isinstance(source, Tensor):
        raise TypeError(f"index_reduce(): argument 'source' must be Tensor, not "
                        f"{type(source).__name__}")
    if index.dtype is not _dtypes.int64 and index.dtype is not _dtypes.int32:
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{TYPE_WORDS[index.dtype.name]}")
    if index.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: "
                         f"{index.ndim} with type: {TYPE_WORDS[index.dtype.name]} and size: "
                         f"{list(index.shape)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({TYPE_WORDS[input.dtype.name]}) and source "
                           f"({TYPE_WORDS[source.dtype.name]}) must have the same scalar type")
    vector = index._data.reshape(-1).astype(np.int64)
    source_size = source.shape[dim] if source.ndim else 1
    if vector.size != source_size:
        raise RuntimeError(f"index_reduce_(): Number of indices ({vector.size}) should be equal to "
                           f"source.size(dim): ({source_size}), for dim: {dim}")
    others = [n for d, n in enumerate(input.shape) if d != dim]
    if input.ndim != source.ndim or others != [n for d, n in enumerate(source.shape) if d != dim]:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(input.shape)} "
                           f"source.shape = {list(source.shape)}")
    if vector.size and (vector.min() < 0 or vector.max() >= input.shape[dim]):
        raise IndexError("index out of range in self")
    return vector


@declare(method=True, inplace=True)
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """``input`` with the slices of ``source`` combined into the slices ``index`` names along
    ``dim``, by ``reduce``: "prod", "mean", "amax" or "amin" (``include_self=False`` leaves
    ``input``'s own values out where something is combined). Mirrors ``torch.index_reduce``.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.ones(3, 2)
    >>> source = torch.tensor([[2.0, 3.0], [4.0, 5.0]])
    >>> x.index_reduce(0, torch.tensor([0, 0]), source, "prod")
    tensor([[ 8., 15.],
            [ 1.,  1.],
            [ 1.,  1.]])
    """
    _warn_once("index_reduce beta", "index_reduce() is in beta and the API may change at any time.")
    if not isinstance(input, Tensor):
        raise TypeError(f"index_reduce(): argument 'input' must be Tensor, not {type(input).__name__}")
    dim = _wrap_dim(dim, max(input.ndim, 1))
    vector = _checked_index(input, dim, index, source, reduce)
    full = np.broadcast_to(vector.reshape([-1 if d == dim else 1 for d in range(source.ndim)]),
                           source._data.shape)
    grid = _grid(full, dim)
    touched = np.zeros(input._data.shape, dtype=bool)
    touched[grid] = True
    counts = np.where(touched & bool(include_self), 1, 0) + np.zeros(input._data.shape, dtype=np.int64)
    add_at(counts, grid, 1)
    return apply(INDEX_REDUCE, input, source, index=full, index_tensor=_wrap(np.ascontiguousarray(full)),
                 index_vector=index, dim=dim, reduce=reduce, include_self=bool(include_self),
                 touched=touched, counts=np.maximum(counts, 1))
