"""Similarities and distances, composed from other ops as PyTorch composes them:
``cosine_similarity``, ``pairwise_distance``, ``cdist`` and ``dist``."""

from __future__ import annotations

import numpy as np

from .._grad_mode import no_grad
from .._tensor import _wrap_dim
from ._reduction import norm, sum
from ._registry import declare, exports
from ._shape import unsqueeze


@declare()
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 / |x1| * x2 / |x2|, dim)``, each norm at least ``eps``; as in torch, the norms
    are clamped outside the graph, so the gradient is that of the unclamped formula."""
    _wrap_dim(dim, max(x1.ndim, x2.ndim))  # torch's check first; the ops below take dim as
    # passed, which their nodes keep (Note [Saved ints as passed] in ops/_saved.py)
    if tuple(x1.shape) != tuple(x2.shape):  # torch's expand_outplace: equal shapes stay as they are
        x1, x2 = x1.broadcast_to(_broadcast_shape(x1, x2)), x2.broadcast_to(_broadcast_shape(x1, x2))
    norm1 = norm(x1, 2, dim, keepdim=True).clone()
    norm2 = norm(x2, 2, dim, keepdim=True).clone()
    with no_grad():
        norm1.clamp_(min=eps)
        norm2.clamp_(min=eps)
    return sum((x1 / norm1) * (x2 / norm2), dim)


def _broadcast_shape(a, b):
    try:
        return np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise RuntimeError(f"The size of tensor a ({a.shape[-1]}) must match the size of tensor b "
                           f"({b.shape[-1]}) at non-singleton dimension {max(a.ndim, b.ndim) - 1}"
                           ) from None


@declare()
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``norm(x1 - x2 + eps, p)`` over the last dim."""
    return norm(x1 - x2 + eps, p, max(x1.ndim, x2.ndim) - 1, keepdim)


@declare()
def cdist(x1, x2, p=2.0):
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and each row of ``x2``
    (..., R, M): a (..., P, R) tensor."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X{1 if x1.ndim < 2 else 2} "
                           f"got: {x1.ndim if x1.ndim < 2 else x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
                           f"X2: {x2.shape[-1]}")
    return norm(unsqueeze(x1, -2) - unsqueeze(x2, -3), p, -1)


@declare()
def dist(input, other, p=2):
    """``norm(input - other, p)``."""
    return norm(input - other, p)


@declare(name=False, method="dist")
def _dist_method(self, other, p=2):
    return dist(self, other, p)


__all__ = exports(globals())
