"""``embedding_bag`` as one op (``EmbeddingBagBackward0``, as torch), its inputs the weight and
the optional ``per_sample_weights``.

The forward looks the bag members' rows up in numpy and reduces them: ``"sum"`` and ``"mean"``
multiply by a (bags, members) matrix (ones, or ``1 / count``; zero for ``padding_idx``
members), ``"max"`` takes each bag's maximum per coordinate and remembers the weight row it
came from (the first maximum, as torch's kernel). The backward is written with ``matmul``,
``index_add`` and ``scatter_add`` (Note [Backward rules are differentiable]).
"""

from __future__ import annotations

import numpy as np

from .._tensor import _wrap
from ._creation import zeros
from ._indexing import index_add, index_select, scatter_add
from ._linalg import matmul
from ._reduction import sum
from ._registry import Op, apply
from ._saved import SAVED, Attr, Computed, Input
from ._shape import reshape, transpose, unsqueeze

__all__ = ["embedding_bag"]


def _forward(weight, per_sample_weights, indices, matrix, mode, rows, **_):
    members = weight[indices]
    if per_sample_weights is not None:
        members = members * per_sample_weights.reshape(-1, 1)
    if mode == "max":
        out = np.zeros(rows.shape, dtype=weight.dtype)
        filled = rows >= 0
        out[filled] = weight[rows[filled], np.nonzero(filled)[1]]
        return out
    return (matrix.astype(weight.dtype) @ members).astype(weight.dtype, copy=False)


def _backward(ctx, g):
    weight_shape = ctx.weight_shape
    indices = _wrap(ctx.indices)
    grad_w = grad_psw = None
    if ctx.mode == "max":
        filled = ctx.rows >= 0
        src = g * _wrap(filled.astype(ctx.np_dtype))
        grad_w = scatter_add(zeros(weight_shape, dtype=g.dtype), 0,
                             _wrap(np.where(filled, ctx.rows, 0)), src)
        return grad_w, None
    grad_members = matmul(transpose(_wrap(ctx.matrix.astype(ctx.np_dtype)), 0, 1), g)  # (M, D)
    if ctx.needs_input_grad[1]:
        looked_up = index_select(ctx.input(0), 0, indices)
        grad_psw = reshape(sum(grad_members * looked_up, 1), ctx.psw_shape)
    if ctx.needs_input_grad[0]:
        if ctx.psw_shape is not None:
            grad_members = grad_members * unsqueeze(reshape(ctx.input(1), (-1,)), 1)
        grad_w = index_add(zeros(weight_shape, dtype=g.dtype), 0, indices, grad_members)
    return grad_w, grad_psw


def _saves(needs):
    """The weight for the per-sample weights' gradient, and those for the weight's."""
    return ((0,) if needs[1] else ()) + ((1,) if needs[0] else ()), False


EMBEDDING_BAG = Op("embedding_bag", "EmbeddingBagBackward0", forward=_forward,
                   backward=_backward, saves=_saves,
                   saved={
                       "weight": Input(0), "indices": SAVED("indices"), "offsets": SAVED("offsets"),
                       "mode": Attr("mode", ("sum", "mean", "max").index),
                       "padding_idx": SAVED("padding_idx", lambda i: 2 ** 64 - 1 if i is None else i),
                       "per_sample_weights": SAVED("per_sample_weights"),
                       "result1": SAVED("results", lambda r: r[0]), "result2": SAVED("results", lambda r: r[1]),
                       "result3": SAVED("results", lambda r: r[2]),
                       "scale_grad_by_freq": Computed(lambda node: False),  # gradviz supports neither
                       "sparse": Computed(lambda node: False),
                       "weight_sym_argsize_0": Attr("weight_shape", lambda shape: shape[0])})


def _torch_results(indices, bags, keep, mode, rows, padding_idx, float32):
    """torch's CPU kernel's extra results, which its node saves (``_saved_result1`` to
    ``3``): ``offset2bag`` (each member's bag; empty on the fast path, a float32 sum without
    padding), ``bag_size`` (kept members per bag; zeros for sum) and ``max_indices`` (max: the
    chosen rows, 0 for an empty bag; mean: ``bag_size``; sum: zeros)."""
    count = len(bags)
    if mode == "sum" and padding_idx is None and float32:
        offset2bag = np.zeros(0, dtype=np.int64)
    else:
        offset2bag = np.zeros(indices.size, dtype=np.int64)
        for b, (start, end) in enumerate(bags):
            offset2bag[start:end] = b
        if bags:  # members after the last bag (include_last_offset) stay in it
            offset2bag[bags[-1][1]:] = count - 1
    if mode == "sum":
        return offset2bag, np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
    bag_size = np.array([int(keep[start:end].sum()) for start, end in bags], dtype=np.int64)
    if mode == "mean":
        return offset2bag, bag_size, bag_size.copy()
    return offset2bag, bag_size, np.maximum(rows, 0)


def embedding_bag(weight, per_sample_weights, indices, bags, keep, mode, saved=None):
    """(bags, D): each bag of rows of ``weight`` (``indices`` an int64 array, ``bags`` (start,
    end) pairs into it, ``keep`` False for ``padding_idx`` members) summed (weighted by
    ``per_sample_weights``), averaged or maximized per coordinate; an empty bag gives zeros.
    ``saved``: what the node shows as torch's ``_saved_*`` (``indices`` and ``offsets``
    tensors, ``padding_idx``)."""
    data = weight._data
    matrix = rows = None
    if mode == "max":
        rows = np.full((len(bags), data.shape[1]), -1, dtype=np.int64)
        for b, (start, end) in enumerate(bags):
            chosen = indices[start:end][keep[start:end]]
            if chosen.size:
                rows[b] = chosen[np.argmax(data[chosen], axis=0)]
    else:
        matrix = np.zeros((len(bags), indices.size))
        for b, (start, end) in enumerate(bags):
            kept = keep[start:end]
            count = int(kept.sum())
            if count:
                matrix[b, start:end] = kept / count if mode == "mean" else kept
    saved = dict(saved or {})
    if saved:
        results = _torch_results(indices, bags, keep, mode, rows, saved.get("padding_idx"),
                                 data.dtype == np.float32)
        index_dtype = saved["indices"].numpy(force=True).dtype  # torch's are the indices' type
        saved.update(results=tuple(_wrap(r.astype(index_dtype)) for r in results),
                     per_sample_weights=per_sample_weights)
    return apply(EMBEDDING_BAG, weight, per_sample_weights, indices=indices, matrix=matrix,
                 mode=mode, rows=rows, weight_shape=tuple(data.shape), np_dtype=data.dtype,
                 psw_shape=None if per_sample_weights is None else
                 tuple(per_sample_weights.shape), saved=saved)
