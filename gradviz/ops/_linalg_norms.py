"""``torch.linalg``'s norms: ``vector_norm``, ``matrix_norm``, ``norm`` and the condition
number ``cond`` (the vector norm itself is the ``LinalgVectorNormBackward0`` op of
``_reduction.py``, which ``torch.norm`` shares)."""

from __future__ import annotations

import math

import numpy as np

from .._tensor import TYPE_WORDS, _wrap_dim
from ._linalg_factor import svdvals
from ._linalg_solvers import _check_floating, _check_matrix, inv_ex
from ._shape import narrow, squeeze_dim, unsqueeze

__all__ = []

# ---- norms ----------------------------------------------------------------------------------------

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``(sum |x|^ord)^(1/ord)`` over ``dim`` (all dims by default); ``ord`` may be any number
    (0 counts nonzeros, ``inf``/``-inf`` take the largest/smallest magnitude)."""
    from ._reduction import norm

    if isinstance(ord, str) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, "
                        f"not {type(ord).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {TYPE_WORDS[x.dtype.name]}")
    if dtype is not None and _narrows(x.dtype, dtype):
        raise RuntimeError(f"linalg.vector_norm: the dtype of the input "
                           f"({TYPE_WORDS[x.dtype.name]}) should be convertible without narrowing "
                           f"to the specified dtype ({TYPE_WORDS[dtype.name]})")
    if dim is not None and not isinstance(dim, (tuple, list)):  # an int, numpy int, 0-d tensor
        dim = (dim,)
    return norm(x, ord, dim, keepdim, dtype)  # (an empty dim's error: _check_identity)


def _narrows(source, target):
    return np.dtype(source.numpy).itemsize > np.dtype(target.numpy).itemsize


def _matrix_dims(A, dim):
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = _wrap_dim(dim[0], A.ndim), _wrap_dim(dim[1], A.ndim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """A matrix norm over the two dims ``dim``: 'fro' (Frobenius), 'nuc' (sum of singular
    values), 2/-2 (largest/smallest singular value), 1/-1 (largest/smallest column sum of
    magnitudes), ``inf``/``-inf`` (largest/smallest row sum of magnitudes).

    Examples
    --------
    >>> A = gradviz.tensor([[1.0, -2.0], [3.0, 4.0]])
    >>> gradviz.linalg.matrix_norm(A, 1), gradviz.linalg.matrix_norm(A, float("inf"))
    (tensor(6.), tensor(7.))
    """
    from ._compose import movedim
    from ._pointwise import abs
    from ._reduction import amax, amin, sum

    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    _check_floating("linalg.matrix_norm", A)
    d0, d1 = _matrix_dims(A, tuple(dim))
    if dtype is not None:
        A = A.to(dtype)
    if isinstance(ord, str):
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim)
        if ord != "nuc":
            raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    elif ord not in (1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord:g} not supported.")
    if ord in ("nuc", 2, -2):
        values = svdvals(movedim(A, (d0, d1), (-2, -1)))
        # (the largest of no singular values is 0 in torch; the smallest raises amin's error)
        result = (sum(values, -1) if ord == "nuc" or (ord == 2 and values.shape[-1] == 0) else
                  amax(values, -1) if ord == 2 else amin(values, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                result = unsqueeze(result, d)
        return result
    if ord in (math.inf, -math.inf):
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    reduce = amax if ord > 0 else amin
    return reduce(sum(abs(A), d0, keepdim), d1, keepdim)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``linalg.norm``: a vector norm over one dim (or of the flattened input when neither
    ``ord`` nor ``dim`` is given), a matrix norm over two.

    Examples
    --------
    >>> gradviz.linalg.norm(gradviz.tensor([[3.0, 4.0], [0.0, 0.0]]), dim=1)
    tensor([5., 0.])
    """
    if dim is not None and not isinstance(dim, (tuple, list)):  # an int, numpy int, 0-d tensor
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 1:
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got "
                           f"{list(dim)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.ndim}D.")
    if A.ndim == 1:
        if isinstance(ord, str):  # torch reaches matrix_norm's rank check
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                               "dimensions.")
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


def cond(A, p=None):
    """The condition number of ``A`` in the norm ``p``: the ratio of its largest to smallest
    singular value for ``p`` None or 2 (the inverse ratio for -2), else
    ``matrix_norm(A, p) * matrix_norm(inv(A), p)`` (``inf`` for a singular ``A``).

    For those other norms the result is differentiable here; PyTorch 2.13 raises in its
    backward (it modifies the inverse it saved in place)."""
    from ._math import nan_to_num

    if p not in (None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if p in (None, 2, -2):
        _check_matrix("linalg.svd", A)
        values = svdvals(A)
        k = values.shape[-1]
        largest, smallest = narrow(values, -1, 0, 1), narrow(values, -1, k - 1, 1)
        ratio = largest / smallest if p != -2 else smallest / largest
        return squeeze_dim(ratio, -1)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but "
                           f"they are {A.shape[-2] if A.ndim > 1 else 1} by "
                           f"{A.shape[-1] if A.ndim else 1} matrices")
    from .. import ops
    from ._pointwise import where

    inverse, info = inv_ex(A)
    singular = info._data != 0
    if not singular.any():
        return nan_to_num(matrix_norm(A, p) * matrix_norm(inverse, p), nan=math.inf,
                          posinf=math.inf)
    # a singular matrix's condition number is inf (its "inverse" is not used)
    inverse = where(ops.tensor(singular[..., None, None]), 0.0, inverse)
    product = matrix_norm(A, p) * matrix_norm(inverse, p)
    return nan_to_num(where(ops.tensor(singular), math.inf, product), nan=math.inf,
                      posinf=math.inf)


