"""``torch.linalg``'s factorizations, solvers and norms, and the legacy ``torch.cholesky``,
``qr``, ``svd``, ``pinverse``, ``triangular_solve`` and ``chain_matmul``.

Each op computes its forward with numpy (batched over the leading dims) and its backward
with differentiable gradviz ops (Note [Backward rules are differentiable]), using the
formulas of PyTorch's ``FunctionsManual.cpp`` so gradients, and second derivatives through
``create_graph=True``, agree with PyTorch's.

Note [Recomputed factorizations]
--------------------------------
The engine saves one output per node, but the backward of ``eigh``, ``svd`` and ``qr`` needs
all the factors. Those ops save their input and their backward factorizes it again with the
differentiable function: run without ``create_graph`` that is one more numpy call; with it,
the recomputed factors are recorded, so the gradient's graph reaches the input through them
(second derivatives). numpy is deterministic, so the factors (and their signs) are the ones
the forward returned.
"""

from __future__ import annotations

import math

import numpy as np

from .._tensor import TYPE_WORDS, Tensor, _warn_once, _wrap_dim, install_methods
from ._linalg import (INVERSE, _check_square, _LinAlgError, _lu_diagonal, _singular_error,
                      diag_embed, diagonal, matmul, mm, tril, triu)
from ._registry import Op, apply, saves_inputs
from ._shape import cat, expand, narrow, squeeze_dim, transpose, unsqueeze, view

__all__ = ["adjoint", "chain_matmul", "cholesky", "cholesky_inverse", "cholesky_solve", "qr",
           "svd", "pinverse", "triangular_solve"]

LinAlgError = _LinAlgError


def _mT(x):
    return transpose(x, -2, -1)


def _result_type(name, fields):
    """A tuple with named fields that prints as ``torch.return_types.<name>``."""

    def __repr__(self):
        body = ",\n".join(f"{field}={value!r}" for field, value in zip(fields, self))
        return f"gradviz.return_types.{name}(\n{body})"

    namespace = {"__slots__": (), "__module__": "gradviz.return_types", "__repr__": __repr__,
                 "__new__": lambda cls, *values: tuple.__new__(cls, values)}
    for i, field in enumerate(fields):
        namespace[field] = property(lambda self, i=i: self[i])
    return type(name, (tuple,), namespace)


_INV_EX = _result_type("linalg_inv_ex", ("inverse", "info"))
_CHOLESKY_EX = _result_type("linalg_cholesky_ex", ("L", "info"))
_QR = _result_type("linalg_qr", ("Q", "R"))
_LEGACY_QR = _result_type("qr", ("Q", "R"))
_EIGH = _result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
_SVD = _result_type("linalg_svd", ("U", "S", "Vh"))
_LEGACY_SVD = _result_type("svd", ("U", "S", "V"))
_SOLVE_EX = _result_type("linalg_solve_ex", ("result", "info"))
_LSTSQ = _result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_TRIANGULAR_SOLVE = _result_type("triangular_solve", ("solution", "cloned_coefficient"))


# ---- checks -----------------------------------------------------------------------------------

def _check_floating(what, A):
    if not isinstance(A, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(A).__name__}")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{what}: Expected a floating point or complex tensor as input. "
                           f"Got {TYPE_WORDS[A.dtype.name]}")


def _check_matrix(what, A):
    _check_floating(what, A)
    if A.ndim < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")


def _check_same_dtype(what, A, B, names=("A", "B")):
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{what}: Expected {names[0]} and {names[1]} to have the same dtype, "
                           f"but found {names[0]} of type {TYPE_WORDS[A.dtype.name]} and "
                           f"{names[1]} of type {TYPE_WORDS[B.dtype.name]} instead")


def _broadcast_batches(A, B):
    """``A`` and ``B`` expanded to their common batch dims (the last two dims are matrices)."""
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    if tuple(A.shape[:-2]) != batch:
        A = expand(A, *batch, *A.shape[-2:])
    if tuple(B.shape[:-2]) != batch:
        B = expand(B, *batch, *B.shape[-2:])
    return A, B


def _each_matrix(a, fn, out_shape=None, dtype=None):
    """``fn`` applied to every matrix of the batch ``a``."""
    matrices = a.reshape(-1, *a.shape[-2:])
    results = [fn(m) for m in matrices]
    return np.stack(results).reshape(*a.shape[:-2], *results[0].shape) if results else \
        np.zeros((*a.shape[:-2], *(out_shape or a.shape[-2:])), dtype=dtype or a.dtype)


# ---- inverse with info, solve -----------------------------------------------------------------

def _inv_ex_forward(a):
    diagonal_u, _ = _lu_diagonal(a)
    singular = diagonal_u == 0
    info = np.where(singular.any(-1), np.argmax(singular, -1) + 1, 0).astype(np.int32)
    with np.errstate(all="ignore"):
        inverse = np.empty_like(a)
        count = int(np.prod(a.shape[:-2]))
        flat, out = a.reshape(count, *a.shape[-2:]), inverse.reshape(count, *a.shape[-2:])
        for k, (matrix, failed) in enumerate(zip(flat, info.reshape(-1))):
            out[k] = np.nan if failed else np.linalg.inv(matrix)
    return inverse, info


INV_EX = Op("linalg_inv_ex", "LinalgInvExBackward0", forward=_inv_ex_forward,
            backward=lambda ctx, g, g_info: INVERSE.backward(ctx, g),
            saves=lambda needs: ((), True))


def inv_ex(A, *, check_errors=False):
    """``(inverse, info)``: ``info`` is 0, or the (1-based) index of the zero pivot that
    makes the matrix singular; a singular matrix raises only with ``check_errors=True``."""
    _check_floating("linalg.inv_ex", A)
    _check_square("linalg.inv", A)
    inverse, info = apply(INV_EX, A)
    if check_errors and np.any(info._data):
        raise _singular_error("linalg.inv_ex", _lu_diagonal(A._data)[0])
    return _INV_EX(inverse, info)


def _solve_forward(a, b, left, vector, what="torch.linalg.solve"):
    diagonal_u, _ = _lu_diagonal(a)
    if np.any(diagonal_u == 0):
        if what is not None:
            raise _LinAlgError(f"{what}: The solver failed because the input matrix is singular.")
        # solve_ex without check_errors: LAPACK's getrs divides by the zero pivot
        shape = np.broadcast_shapes(b.shape, a.shape[:-1] if vector else b.shape)
        return np.full(shape, np.nan, dtype=a.dtype)
    if vector:
        return np.linalg.solve(a, b[..., None])[..., 0]
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    return np.linalg.solve(a, b)


def _solve_backward(ctx, g):
    """``gB = A^-T gX`` and ``gA = -gB X^T`` (``X A = B``: ``gB = gX A^-T``, ``gA = -X^T gB``)."""
    A, X, left = ctx.input(0), ctx.output(), ctx.left
    grad_b = solve(_mT(A), g, left=left)
    grad_a = None
    if ctx.needs_input_grad[0]:
        if ctx.vector:
            grad_a = -unsqueeze(grad_b, -1) * unsqueeze(X, -2)
        else:
            grad_a = -matmul(grad_b, _mT(X)) if left else -matmul(_mT(X), grad_b)
    return grad_a, grad_b if ctx.needs_input_grad[1] else None


SOLVE = Op("linalg_solve", "LinalgSolveExBackward0", forward=_solve_forward,
           backward=_solve_backward, saves=lambda needs: ((0,), True))


def solve_ex(A, B, *, left=True, check_errors=False):
    """``(result, info)``: :func:`solve`'s solution and 0, or the (1-based) index of the zero
    pivot of a singular ``A`` (then the result is not a solution); raises only with
    ``check_errors=True``."""
    diagonal_u = _lu_diagonal(A._data)[0] if A.dtype.is_floating_point and A.ndim >= 2 and \
        A.shape[-1] == A.shape[-2] else None
    if diagonal_u is None or not np.any(diagonal_u == 0):
        result = solve(A, B, left=left)
        info = np.zeros(A.shape[:-2], dtype=np.int32)
    else:
        result = solve(A, B, left=left, _singular=None if not check_errors else
                       "torch.linalg.solve_ex")
        singular = diagonal_u == 0
        info = np.where(singular.any(-1), np.argmax(singular, -1) + 1, 0).astype(np.int32)
    from .. import ops

    return _SOLVE_EX(result, ops.tensor(info))


def solve(A, B, *, left=True, _singular="torch.linalg.solve"):
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` with ``left=False``), batched and
    broadcast; ``B`` may be a (batch of) vectors.

    Examples
    --------
    >>> A = gradviz.tensor([[3.0, 1.0], [1.0, 2.0]])
    >>> gradviz.linalg.solve(A, gradviz.tensor([9.0, 8.0]))
    tensor([2., 3.])
    """
    _check_floating("linalg.solve", A)
    _check_floating("linalg.solve", B)
    _check_same_dtype("linalg.solve", A, B)
    _check_square("linalg.solve", A)
    vector = left and (B.ndim == 1 or (B.ndim == A.ndim - 1
                                       and tuple(B.shape) == tuple(A.shape[:-1])))
    if vector:
        if B.shape[-1] != A.shape[-1]:
            raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                               f"AX = B ({A.shape[-2]}x{A.shape[-1]} and {B.shape[-1]}x1)")
        batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-1])))
        if tuple(A.shape[:-2]) != batch:
            A = expand(A, *batch, *A.shape[-2:])
        if tuple(B.shape[:-1]) != batch:
            B = expand(B, *batch, B.shape[-1])
        return apply(SOLVE, A, B, left=True, vector=True, what=_singular)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is not "
                           "supported for left=False. In this case linalg.solve is equivalent to "
                           "B / A.squeeze(-1)")
    inner = B.shape[-2] if left else B.shape[-1]
    if inner != A.shape[-1]:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{equation} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    A, B = _broadcast_batches(A, B)
    return apply(SOLVE, A, B, left=bool(left), vector=False, what=_singular)


# ---- triangular solves ------------------------------------------------------------------------

def _triangle(a, upper, unitriangular):
    m = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        m = m.copy()
        np.einsum("...ii->...i", m)[...] = 1
    return m


def _solve_triangular_forward(a, b, upper, left, unitriangular):
    m = _triangle(a, upper, unitriangular)
    if not left:  # X M = B  <=>  M^T X^T = B^T
        m, b = np.swapaxes(m, -1, -2), np.swapaxes(b, -1, -2)
    with np.errstate(all="ignore"):
        try:
            x = np.linalg.solve(m, b)
        except np.linalg.LinAlgError:  # LAPACK's trtrs divides by the zero: infinities
            x = np.full(np.broadcast_shapes(m.shape[:-1] + (1,), b.shape), np.nan, dtype=a.dtype)
    return np.swapaxes(x, -1, -2) if not left else x


def _solve_triangular_backward(ctx, g):
    """PyTorch's linalg_solve_triangular backward: ``gB = A^-T gX`` (left) or ``gX A^-T``;
    ``gA = -gB X^T`` (or ``-X^T gB``) kept on the triangle that was read."""
    A, X = ctx.input(0), ctx.output()
    upper, left, unit = ctx.upper, ctx.left, ctx.unitriangular
    grad_b = solve_triangular(_mT(A), g, upper=not upper, left=left, unitriangular=unit)
    grad_a = None
    if ctx.needs_input_grad[0]:
        grad_a = -matmul(grad_b, _mT(X)) if left else -matmul(_mT(X), grad_b)
        offset = (1 if upper else -1) if unit else 0
        grad_a = triu(grad_a, offset) if upper else tril(grad_a, offset)
    return grad_a, grad_b if ctx.needs_input_grad[1] else None


SOLVE_TRIANGULAR = Op("linalg_solve_triangular", "LinalgSolveTriangularBackward0",
                      forward=_solve_triangular_forward, backward=_solve_triangular_backward,
                      saves=lambda needs: ((0,), True))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` with ``left=False``) for a triangular
    ``A``: only its ``upper`` (or lower) triangle is read, its diagonal taken as ones with
    ``unitriangular=True``.

    Examples
    --------
    >>> L = gradviz.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> gradviz.linalg.solve_triangular(L, gradviz.tensor([[2.0], [3.0]]), upper=False)
    tensor([[1.],
            [2.]])
    """
    _check_floating("linalg.solve_triangular", A)
    _check_square("linalg.solve_triangular", A)
    if B.dtype is not A.dtype:  # torch computes in A's dtype
        B = B.to(A.dtype)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 "
                           "dimensions.")
    inner = B.shape[-2] if left else B.shape[-1]
    if inner != A.shape[-1]:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                           f"equation {equation} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    A, B = _broadcast_batches(A, B)
    return apply(SOLVE_TRIANGULAR, A, B, upper=bool(upper), left=bool(left),
                 unitriangular=bool(unitriangular))


def _triangular_solve_forward(b, a, upper, transpose, unitriangular):
    coefficient = np.swapaxes(a, -1, -2) if transpose else a
    solution = _solve_triangular_forward(coefficient, b, upper != transpose, True, unitriangular)
    return solution, np.array(a, copy=True)


def _triangular_solve_backward(ctx, g_solution, g_coefficient):
    """PyTorch's triangular_solve_backward: ``gb = op(A)^-T gX`` and ``gA = -gb X^T`` (its
    transpose for ``transpose=True``) on the triangle read; the clone's gradient added."""
    b_grad = a_grad = None
    A, X = ctx.input(1), ctx.output()
    upper, transposed, unit = ctx.upper, ctx.transpose, ctx.unitriangular
    if g_solution is not None:
        b_grad = solve_triangular(A if transposed else _mT(A), g_solution,
                                  upper=not upper if not transposed else upper,
                                  unitriangular=unit)
        if ctx.needs_input_grad[1]:
            a_grad = -matmul(X, _mT(b_grad)) if transposed else -matmul(b_grad, _mT(X))
            offset = (1 if upper else -1) if unit else 0
            a_grad = triu(a_grad, offset) if upper else tril(a_grad, offset)
    if g_coefficient is not None and ctx.needs_input_grad[1]:
        a_grad = g_coefficient if a_grad is None else a_grad + g_coefficient
    return b_grad if ctx.needs_input_grad[0] else None, a_grad


TRIANGULAR_SOLVE = Op("triangular_solve", "TriangularSolveBackward0",
                      forward=_triangular_solve_forward, backward=_triangular_solve_backward,
                      saves=lambda needs: ((1,), True))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """``torch.triangular_solve`` (deprecated in PyTorch, which warns once):
    ``(solution, cloned_coefficient)`` of ``op(A) @ X = b``, ``op`` transposing with
    ``transpose=True``."""
    _warn_once("triangular_solve", (
        "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will "
        "be removed in a future PyTorch release.\ntorch.linalg.solve_triangular has its "
        "arguments reversed and does not return a copy of one of the inputs.\nX = "
        "torch.triangular_solve(B, A).solution\nshould be replaced with\nX = "
        "torch.linalg.solve_triangular(A, B)."))
    _check_floating("triangular_solve", b)
    _check_same_dtype("triangular_solve", b, A, ("self", "A"))
    if b.ndim < 2 or A.ndim < 2:
        raise RuntimeError(f"torch.triangular_solve: Expected b to have at least 2 dimensions, "
                           f"but it has {b.ndim} dimensions instead" if b.ndim < 2 else
                           f"torch.triangular_solve: Expected A to have at least 2 dimensions, "
                           f"but it has {A.ndim} dimensions instead")
    _check_square("triangular_solve", A)
    if A.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"Incompatible matrix sizes for triangular_solve: each A matrix is "
                           f"{A.shape[-1]} by {A.shape[-1]} but each b matrix is {b.shape[-2]} "
                           f"by {b.shape[-1]}")
    b, A = _broadcast_batches(b, A)
    solution, coefficient = apply(TRIANGULAR_SOLVE, b, A, upper=bool(upper),
                                  transpose=bool(transpose), unitriangular=bool(unitriangular))
    return _TRIANGULAR_SOLVE(solution, coefficient)


# ---- cholesky ---------------------------------------------------------------------------------

def _failed_order(matrix):
    """The order of the first leading minor that is not positive-definite."""
    for k in range(1, matrix.shape[-1] + 1):
        try:
            np.linalg.cholesky(matrix[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return 0


def _cholesky_arrays(a):
    """The lower factors of a batch and, per matrix, 0 or the order of the first leading
    minor that is not positive-definite."""
    n = a.shape[-1]
    flat = a.reshape(int(np.prod(a.shape[:-2])), n, n)  # (0x0 matrices too)
    factor = np.zeros_like(flat)
    info = np.zeros(flat.shape[0], dtype=np.int32)
    for k, matrix in enumerate(flat):
        try:
            factor[k] = np.linalg.cholesky(matrix)  # reads the lower triangle, as LAPACK's potrf
        except np.linalg.LinAlgError:
            info[k] = _failed_order(matrix)
            factor[k] = np.nan
    return factor.reshape(a.shape), info.reshape(a.shape[:-2])


def _cholesky_forward(a, upper):
    """``(factor, info)``; with ``upper`` the factor ``U`` (``A = U^T U``) is computed from
    ``A``'s upper triangle, as LAPACK's potrf with uplo 'U' reads it."""
    if not upper:
        return _cholesky_arrays(a)
    factor, info = _cholesky_arrays(np.swapaxes(a, -1, -2))
    return np.swapaxes(factor, -1, -2).copy(), info


def _legacy_cholesky_forward(a, upper):
    factor, info = _cholesky_forward(a, upper)
    if np.any(info):
        raise _not_positive_definite("cholesky", info)
    return factor


def _cholesky_backward(ctx, g, g_info=None):
    """PyTorch's cholesky_backward: ``gA = L^-T Phi(L^T gL) L^-1``, symmetric, where ``Phi``
    keeps the lower triangle with its diagonal halved."""
    L = ctx.output()
    if ctx.upper:  # U = L^T
        L, g = _mT(L), _mT(g)
    grad = tril(matmul(_mT(L), g))
    grad = 0.5 * (grad + _mT(tril(grad, -1)))
    grad = solve_triangular(_mT(L), grad, upper=True, left=True)
    return (solve_triangular(L, grad, upper=False, left=False),)


CHOLESKY = Op("linalg_cholesky_ex", "LinalgCholeskyExBackward0", forward=_cholesky_forward,
              backward=_cholesky_backward, saves=lambda needs: ((), True))
LEGACY_CHOLESKY = Op("cholesky", "CholeskyBackward0", forward=_legacy_cholesky_forward,
                     backward=_cholesky_backward, saves=lambda needs: ((), True))


def _not_positive_definite(what, info):
    order = int(info.reshape(-1)[np.flatnonzero(info.reshape(-1))[0]])
    return _LinAlgError(f"{what}: The factorization could not be completed because the input is "
                        f"not positive-definite (the leading minor of order {order} is not "
                        "positive-definite).")


def cholesky_ex(A, *, upper=False, check_errors=False):
    """``(L, info)``: the Cholesky factor and 0, or the order of the first leading minor that
    is not positive-definite (then ``L`` is not a factor); raises only with
    ``check_errors=True``."""
    _check_floating("linalg.cholesky_ex", A)
    _check_square("linalg.cholesky_ex", A)
    L, info = apply(CHOLESKY, A, upper=bool(upper))
    if check_errors and np.any(info._data):
        raise _not_positive_definite("linalg.cholesky_ex", info._data)
    return _CHOLESKY_EX(L, info)


def linalg_cholesky(A, *, upper=False):
    """The lower-triangular ``L`` with ``A = L @ L.mT`` of a symmetric positive-definite ``A``,
    whose lower triangle alone is read (``upper=True``: ``U`` with ``A = U.mT @ U``, from the
    upper triangle).

    Examples
    --------
    >>> gradviz.linalg.cholesky(gradviz.tensor([[4.0, 2.0], [2.0, 5.0]]))
    tensor([[2., 0.],
            [1., 2.]])
    """
    _check_floating("linalg.cholesky", A)
    _check_square("linalg.cholesky", A)
    L, info = apply(CHOLESKY, A, upper=bool(upper))
    if np.any(info._data):
        raise _not_positive_definite("linalg.cholesky", info._data)
    return L


def cholesky(input, upper=False):
    """``torch.cholesky`` (deprecated in PyTorch, which warns once): the factor of
    :func:`linalg_cholesky`, recorded as PyTorch's ``CholeskyBackward0``."""
    _warn_once("cholesky", (
        "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in "
        "a future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = "
        "torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be replaced "
        "with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent results "
        "for all valid (symmetric positive definite) inputs."))
    _check_floating("cholesky", input)
    _check_square("cholesky", input)
    return apply(LEGACY_CHOLESKY, input, upper=bool(upper))


def _cholesky_solve_forward(b, factor, upper):
    triangle = np.triu(factor) if upper else np.tril(factor)
    product = np.swapaxes(triangle, -1, -2) @ triangle if upper else \
        triangle @ np.swapaxes(triangle, -1, -2)
    with np.errstate(all="ignore"):
        return np.linalg.solve(product, b)


def _cholesky_solve_backward(ctx, g):
    """PyTorch's cholesky_solve_backward: ``gB = cholesky_solve(gX, L)`` and
    ``gL = -(gB X^T + X gB^T) L`` (``-U (...)`` for an upper factor)."""
    factor, X, upper = ctx.input(1), ctx.output(), ctx.upper
    grad_b = cholesky_solve(g, factor, upper)
    grad_factor = None
    if ctx.needs_input_grad[1]:
        common = matmul(grad_b, _mT(X))
        common = common + _mT(common)
        grad_factor = -matmul(factor, common) if upper else -matmul(common, factor)
    return grad_b if ctx.needs_input_grad[0] else None, grad_factor


CHOLESKY_SOLVE = Op("cholesky_solve", "CholeskySolveBackward0", forward=_cholesky_solve_forward,
                    backward=_cholesky_solve_backward, saves=lambda needs: ((1,), True))


def cholesky_solve(input, input2, upper=False):
    """The solution ``X`` of ``A @ X = input`` given the Cholesky factor ``input2`` of ``A``
    (lower, or upper with ``upper=True``)."""
    _check_floating("cholesky_solve", input)
    _check_same_dtype("cholesky_solve", input, input2, ("self", "A"))
    if input.ndim < 2 or input2.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {input.ndim} dimensions "
                           "instead" if input.ndim < 2 else
                           f"u should have at least 2 dimensions, but has {input2.ndim} "
                           "dimensions instead")
    _check_square("cholesky_solve", input2)
    if input2.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           f"{input2.shape[-1]} by {input2.shape[-1]} but each b matrix is "
                           f"{input.shape[-2]} by {input.shape[-1]}")
    input, input2 = _broadcast_batches(input, input2)
    return apply(CHOLESKY_SOLVE, input, input2, upper=bool(upper))


def _cholesky_inverse_forward(factor, upper):
    triangle = np.triu(factor) if upper else np.tril(factor)
    product = np.swapaxes(triangle, -1, -2) @ triangle if upper else \
        triangle @ np.swapaxes(triangle, -1, -2)
    with np.errstate(all="ignore"):
        return np.linalg.inv(product) if product.size else product


def _cholesky_inverse_backward(ctx, g):
    """PyTorch's cholesky_inverse_backward: ``gL = -inv (g + g^T) inv L`` (``-U (...)`` for
    an upper factor)."""
    factor, inverse = ctx.input(0), ctx.output()
    common = matmul(inverse, matmul(g + _mT(g), inverse))
    return (-matmul(factor, common) if ctx.upper else -matmul(common, factor),)


CHOLESKY_INVERSE = Op("cholesky_inverse", "CholeskyInverseBackward0",
                      forward=_cholesky_inverse_forward, backward=_cholesky_inverse_backward,
                      saves=lambda needs: ((0,), True))


def cholesky_inverse(input, upper=False):
    """The inverse of ``A`` from its Cholesky factor ``input`` (lower, or upper with
    ``upper=True``): ``(L @ L.mT)^-1``."""
    _check_floating("cholesky_inverse", input)
    if input.ndim < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 "
                           "dimensions.")
    _check_square("cholesky_inverse", input)
    return apply(CHOLESKY_INVERSE, input, upper=bool(upper))


# ---- qr -------------------------------------------------------------------------------------------

_QR_MODES = ("reduced", "complete", "r")


def _qr_forward(a, mode):
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        q = np.empty((0,), dtype=a.dtype)
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


def _copyltu(M):
    """The symmetric matrix whose lower triangle is ``M``'s."""
    return tril(M) + _mT(tril(M, -1))


def _qr_backward(ctx, gQ, gR):
    A, mode = ctx.input(0), ctx.mode
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                           "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                           "differentiate through linalg.qr.")
    m, n = A.shape[-2], A.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                           "nrows > ncols.")
    Q, R = linalg_qr(A, mode)  # Note [Recomputed factorizations]
    from ._creation import zeros_like

    gQ = zeros_like(Q) if gQ is None else gQ
    gR = zeros_like(R) if gR is None else gR
    if m >= n:
        return (_qr_tall_backward(Q, R, gQ, gR),)
    # wide: A = [X | Y], R = [U | V]; X = QU is square, Y = QV
    Y = narrow(A, -1, m, n - m)
    U = narrow(R, -1, 0, m)
    gV = narrow(gR, -1, m, n - m)
    grad_y = matmul(Q, gV)
    grad_x = _qr_tall_backward(Q, U, gQ + matmul(Y, _mT(gV)), narrow(gR, -1, 0, m))
    return (cat([grad_x, grad_y], -1),)


def _qr_tall_backward(Q, R, gQ, gR):
    """``gA = (gQ + Q copyltu(M)) R^-T`` with ``M = R gR^T - gQ^T Q`` (A = QR with at least as
    many rows as columns, reduced)."""
    M = matmul(R, _mT(gR)) - matmul(_mT(gQ), Q)
    return solve_triangular(_mT(R), gQ + matmul(Q, _copyltu(M)), upper=False, left=False)


QR = Op("linalg_qr", "LinalgQrBackward0", forward=_qr_forward, backward=_qr_backward,
        saves=saves_inputs(0))


def linalg_qr(A, mode="reduced"):
    """``(Q, R)`` with ``A = Q @ R``, ``Q`` orthonormal columns and ``R`` upper triangular;
    ``mode`` 'reduced' (k = min(m, n) columns), 'complete' (``Q`` square) or 'r' (``Q`` empty).

    Examples
    --------
    >>> A = gradviz.tensor([[3.0, 1.0], [4.0, 2.0], [0.0, 5.0]])
    >>> Q, R = gradviz.linalg.qr(A)
    >>> tuple(Q.shape), tuple(R.shape), gradviz.allclose(Q @ R, A, atol=1e-6)
    ((3, 2), (2, 2), True)
    """
    _check_matrix("linalg.qr", A)
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    Q, R = apply(QR, A, mode=mode)
    return _QR(Q, R)


def qr(input, some=True):
    """``torch.qr``: :func:`linalg_qr`, reduced with ``some=True``, complete otherwise."""
    _warn_once("qr", (
        "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
        "PyTorch release.\nThe boolean parameter 'some' has been replaced with a string "
        "parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced with\nQ, R = "
        "torch.linalg.qr(A, 'reduced' if some else 'complete')"))
    return _LEGACY_QR(*linalg_qr(input, "reduced" if some else "complete"))


# ---- eigh -----------------------------------------------------------------------------------------

def _check_eigh_input(A):
    if A.ndim < 2:
        raise RuntimeError("linalg.eigh: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:  # torch has no integer kernel (NotImplementedError)
        raise NotImplementedError(f'"linalg_eigh_cpu" not implemented for '
                                  f"'{TYPE_WORDS[A.dtype.name]}'")
    _check_square("linalg.eigh", A)


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_forward(a, UPLO, vectors):
    values, vecs = np.linalg.eigh(a, UPLO=UPLO)
    values = values.astype(a.dtype, copy=False)
    return (values, vecs.astype(a.dtype, copy=False)) if vectors else values


def _eigh_gradient(A, UPLO, g_values, g_vectors):
    """PyTorch's linalg_eig_backward for a symmetric matrix:
    ``gA = V (skew(V^T gV) / E + diag(gL)) V^T`` with ``E[i, j] = L[j] - L[i]`` (off the
    diagonal): defined when the eigenvalues are distinct."""
    L, V = linalg_eigh(A, UPLO)  # Note [Recomputed factorizations]
    if g_vectors is None:
        inner = diag_embed(g_values)
    else:
        VtgV = matmul(_mT(V), g_vectors)
        skew = 0.5 * (VtgV - _mT(VtgV))
        E = unsqueeze(L, -2) - unsqueeze(L, -1)
        E = E + diag_embed(1 - diagonal(E, 0, -2, -1))  # ones on the diagonal
        inner = skew / E
        if g_values is not None:
            inner = inner + diag_embed(g_values)
    return matmul(V, matmul(inner, _mT(V)))


EIGH = Op("linalg_eigh", "LinalgEighBackward0", forward=_eigh_forward,
          backward=lambda ctx, g_values, g_vectors: (
              _eigh_gradient(ctx.input(0), ctx.UPLO, g_values, g_vectors),),
          saves=saves_inputs(0))
EIGVALSH = Op("linalg_eigvalsh", "LinalgEighBackward0", forward=_eigh_forward,
              backward=lambda ctx, g_values: (
                  _eigh_gradient(ctx.input(0), ctx.UPLO, g_values, None),),
              saves=saves_inputs(0))


def linalg_eigh(A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of a symmetric ``A`` (only its ``UPLO`` triangle is
    read), eigenvalues ascending; each eigenvector is defined up to its sign.

    Examples
    --------
    >>> values, vectors = gradviz.linalg.eigh(gradviz.tensor([[2.0, 1.0], [1.0, 2.0]]))
    >>> values
    tensor([1., 3.])
    """
    _check_eigh_input(A)
    _check_uplo(UPLO)
    values, vectors = apply(EIGH, A, UPLO=UPLO, vectors=True)
    return _EIGH(values, vectors)


def eigvalsh(A, UPLO="L"):
    """The eigenvalues, ascending, of a symmetric ``A`` (only its ``UPLO`` triangle is read)."""
    _check_eigh_input(A)
    _check_uplo(UPLO)
    return apply(EIGVALSH, A, UPLO=UPLO, vectors=False)


# ---- svd ------------------------------------------------------------------------------------------

def _svd_forward(a, full_matrices, vectors):
    """LAPACK's answers: a NaN raises, a matrix holding an infinity gets NaN factors."""
    if np.isnan(a).any():
        raise _LinAlgError("linalg.svd: The algorithm failed to converge because the input "
                           "matrix contained non-finite values.")
    infinite = np.isinf(a).any(axis=(-2, -1))
    if infinite.any():
        a = np.where(infinite[..., None, None], 0, a)
    if not vectors:
        factors = (np.linalg.svd(a, compute_uv=False),)
    else:
        factors = np.linalg.svd(a, full_matrices=full_matrices)
    factors = tuple(np.where(infinite.reshape(infinite.shape + (1,) * (f.ndim - infinite.ndim)),
                             np.nan, f).astype(a.dtype, copy=False) for f in factors)
    return factors if vectors else factors[0]


def _svd_gradient(A, gU, gS, gVh):
    """PyTorch's svd_backward (real case), on the reduced factors."""
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    U, S, Vh = linalg_svd(A, full_matrices=False)  # Note [Recomputed factorizations]
    if gU is not None and gU.shape[-1] != k:  # full_matrices: the extra columns have no say
        gU = narrow(gU, -1, 0, k)
    if gVh is not None and gVh.shape[-2] != k:
        gVh = narrow(gVh, -2, 0, k)
    if gU is None and gVh is None:
        return matmul(U, unsqueeze(gS, -1) * Vh)
    V = _mT(Vh)
    gV = None if gVh is None else _mT(gVh)
    S2 = S * S
    E = unsqueeze(S2, -2) - unsqueeze(S2, -1)
    E = E + diag_embed(1 - diagonal(E, 0, -2, -1))
    UhgU = None
    if gU is not None:
        UhgU = matmul(_mT(U), gU)
        UhgU = UhgU - _mT(UhgU)
    VhgV = None
    if gV is not None:
        VhgV = matmul(Vh, gV)
        VhgV = VhgV - _mT(VhgV)
    if UhgU is not None and VhgV is not None:
        grad = (UhgU * unsqueeze(S, -2) + unsqueeze(S, -1) * VhgV) / E
    elif UhgU is not None:
        grad = (UhgU / E) * unsqueeze(S, -2)
    else:
        grad = unsqueeze(S, -1) * (VhgV / E)
    if gS is not None:
        grad = grad + diag_embed(gS)
    if m > n and gU is not None:
        grad = matmul(U, grad)
        gU_over_S = gU / unsqueeze(S, -2)
        grad = grad + gU_over_S - matmul(U, matmul(_mT(U), gU_over_S))
        return matmul(grad, Vh)
    if m < n and gV is not None:
        grad = matmul(grad, Vh)
        gV_over_S = gV / unsqueeze(S, -2)
        grad = grad + _mT(gV_over_S) - matmul(matmul(_mT(gV_over_S), V), Vh)
        return matmul(U, grad)
    return matmul(U, matmul(grad, Vh)) if m >= n else matmul(matmul(U, grad), Vh)


SVD = Op("linalg_svd", "LinalgSvdBackward0", forward=_svd_forward,
         backward=lambda ctx, gU, gS, gVh: (_svd_gradient(ctx.input(0), gU, gS, gVh),),
         saves=saves_inputs(0))
SVDVALS = Op("linalg_svdvals", "LinalgSvdBackward0", forward=_svd_forward,
             backward=lambda ctx, gS: (_svd_gradient(ctx.input(0), None, gS, None),),
             saves=saves_inputs(0))


def linalg_svd(A, full_matrices=True, *, driver=None):
    """``(U, S, Vh)`` with ``A = U @ diag(S) @ Vh``, ``S`` descending; ``full_matrices=False``
    keeps ``k = min(m, n)`` columns of ``U`` and rows of ``Vh``. Each singular-vector pair is
    defined up to its sign.

    Examples
    --------
    >>> U, S, Vh = gradviz.linalg.svd(gradviz.tensor([[3.0, 0.0], [0.0, -2.0], [0.0, 0.0]]))
    >>> S, tuple(U.shape), tuple(Vh.shape)
    (tensor([3., 2.]), (3, 3), (2, 2))
    """
    _check_matrix("linalg.svd", A)
    U, S, Vh = apply(SVD, A, full_matrices=bool(full_matrices), vectors=True)
    return _SVD(U, S, Vh)


def svdvals(A, *, driver=None):
    """The singular values of ``A``, descending."""
    _check_matrix("linalg.svdvals", A)
    return apply(SVDVALS, A, full_matrices=False, vectors=False)


def svd(input, some=True, compute_uv=True):
    """``torch.svd``: ``(U, S, V)`` (``V``, not ``Vh``); ``some=False`` gives square ``U`` and
    ``V``; ``compute_uv=False`` gives zero matrices for them."""
    from ._creation import zeros

    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        return _LEGACY_SVD(zeros(*batch, m, m, dtype=input.dtype), svdvals(input),
                           zeros(*batch, n, n, dtype=input.dtype))
    U, S, Vh = linalg_svd(input, full_matrices=not some)
    return _LEGACY_SVD(U, S, _mT(Vh))


# ---- pinv, lstsq, matrix_rank -----------------------------------------------------------------

def _tolerance(a_dtype, m, n, atol, rtol):
    """PyTorch's default: ``rtol = eps * max(m, n)`` when neither is given, else 0."""
    eps = float(np.finfo(a_dtype).eps)
    atol = atol._data if isinstance(atol, Tensor) else atol
    rtol = rtol._data if isinstance(rtol, Tensor) else rtol
    if rtol is None:
        rtol = eps * max(m, n) if atol is None or np.all(np.asarray(atol) <= 0) else 0.0
    return (0.0 if atol is None else atol), rtol


def _pinv_forward(a, atol, rtol, hermitian):
    if not hermitian and np.isnan(a).any():
        raise _LinAlgError("linalg.svd: The algorithm failed to converge because the input "
                           "matrix contained non-finite values.")
    if hermitian:
        values, vectors = np.linalg.eigh(a)
        magnitudes = np.abs(values)
        limit = np.maximum(atol, rtol * magnitudes.max(-1, initial=0, keepdims=True))
        with np.errstate(divide="ignore"):
            inverse = np.where(magnitudes > limit, 1 / np.where(magnitudes > limit, values, 1), 0)
        return ((vectors * inverse[..., None, :]) @ np.swapaxes(vectors, -1, -2)).astype(a.dtype)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    limit = np.maximum(atol, rtol * s.max(-1, initial=0, keepdims=True))
    inverse = np.where(s > limit, 1 / np.where(s > limit, s, 1), 0)
    return ((np.swapaxes(vh, -1, -2) * inverse[..., None, :]) @ np.swapaxes(u, -1, -2)).astype(
        a.dtype)


def _pinv_backward(ctx, g):
    return (_pinv_gradient(g, ctx.output(), ctx.input(0)),)


def _pinv_gradient(g, pinvA, A):
    """PyTorch's pinv_backward: the gradient through ``pinvA = pinv(A)`` of ``g``."""
    m, n = A.shape[-2], A.shape[-1]
    pinvAh, gh = _mT(pinvA), _mT(g)
    if m <= n:
        K = matmul(gh, pinvA)
        KpinvAh = matmul(K, pinvAh)
        return (-_mT(matmul(pinvA, K)) + KpinvAh - matmul(matmul(A, pinvA), KpinvAh)
                + matmul(matmul(pinvAh, pinvA), gh - matmul(K, A)))
    K = matmul(pinvA, gh)
    pinvAhK = matmul(pinvAh, K)
    return (-_mT(matmul(K, pinvA)) + pinvAhK - matmul(matmul(pinvAhK, pinvA), A)
            + matmul(matmul(gh - matmul(A, K), pinvA), pinvAh))


PINV = Op("linalg_pinv", "LinalgPinvBackward0", forward=_pinv_forward, backward=_pinv_backward,
          saves=lambda needs: ((0,), True))


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """The Moore-Penrose pseudo-inverse: singular values up to ``max(atol, rtol * largest)``
    count as zero (default ``rtol = eps * max(m, n)``); ``rcond`` is the older name of
    ``rtol``; ``hermitian=True`` uses the eigendecomposition of a symmetric ``A``.

    Examples
    --------
    >>> gradviz.linalg.pinv(gradviz.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    tensor([[1.0000, 0.0000, 0.0000],
            [0.0000, 0.5000, 0.0000]])
    """
    if not isinstance(A, Tensor) or A.ndim < 2 or not A.dtype.is_floating_point:
        described = (f"{TYPE_WORDS.get(A.dtype.name, A.dtype.name)}{{{list(A.shape)}}}"
                     if isinstance(A, Tensor) else type(A).__name__)
        raise RuntimeError(f"linalg.pinv({described}): expected a tensor with 2 or more "
                           "dimensions of float, double, cfloat or cdouble types")
    if rcond is not None:
        rtol = float(rcond)
    atol, rtol = _tolerance(A._data.dtype, A.shape[-2], A.shape[-1], atol, rtol)
    return apply(PINV, A, atol=_limit(atol), rtol=_limit(rtol), hermitian=bool(hermitian))


def _limit(tolerance):
    """A tolerance as a number, or as an array of one per matrix (kept for broadcasting)."""
    array = np.asarray(tolerance, dtype=np.float64)
    return float(array) if array.ndim == 0 else array[..., None]


def pinverse(input, rcond=1e-15):
    """``torch.pinverse``: :func:`pinv` with ``rcond`` as its relative tolerance."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values (eigenvalue magnitudes with ``hermitian=True``) above
    ``max(atol, rtol * largest)``, default ``rtol = eps * max(m, n)``; an int64 tensor."""
    from .. import ops

    if A.ndim >= 2 and not A.dtype.is_floating_point:
        raise RuntimeError("This function doesn't handle types other than float and double")
    _check_matrix("linalg.matrix_rank", A)
    atol, rtol = _tolerance(A._data.dtype, A.shape[-2], A.shape[-1], atol, rtol)
    if hermitian:
        values = np.abs(np.linalg.eigvalsh(A._data))
    else:
        values = _svd_forward(A._data, False, False)
    limit = np.maximum(_limit(atol), _limit(rtol) * values.max(-1, initial=0, keepdims=True))
    return ops.tensor(np.sum(values > limit, axis=-1).astype(np.int64))


def _lstsq_forward(a, b, atol, rtol, vector):
    pseudo_inverse = _pinv_forward(a, atol, rtol, False)
    return (pseudo_inverse @ b[..., None])[..., 0] if vector else pseudo_inverse @ b


def _lstsq_backward(ctx, g):
    """PyTorch's linalg_lstsq_backward: through ``pinv(A) @ B``, with ``pinv``'s default
    tolerance: ``gA = pinv_backward(gX B^T)``, ``gB = pinv(A)^T gX``."""
    A, B, vector = ctx.input(0), ctx.input(1), ctx.vector
    if vector:
        g, B = unsqueeze(g, -1), unsqueeze(B, -1)
    pinvA = pinv(A)
    grad_a = _pinv_gradient(matmul(g, _mT(B)), pinvA, A) if ctx.needs_input_grad[0] else None
    grad_b = None
    if ctx.needs_input_grad[1]:
        grad_b = matmul(_mT(pinvA), g)
        grad_b = squeeze_dim(grad_b, -1) if vector else grad_b
    return grad_a, grad_b


LSTSQ = Op("linalg_lstsq", "LinalgLstsqBackward0", forward=_lstsq_forward,
           backward=_lstsq_backward, saves=saves_inputs(0, 1))


def lstsq(A, B, rcond=None, *, driver=None):
    """``(solution, residuals, rank, singular_values)`` of ``min ||A X - B||``: the
    minimum-norm solution ``pinv(A) @ B`` (singular values up to ``rcond`` times the largest
    count as zero); with the default driver 'gelsy', ``residuals`` and ``singular_values``
    are empty as in PyTorch, and ``rank`` is computed."""
    from ._creation import empty

    _check_floating("torch.linalg.lstsq", A)
    if A.dtype is not B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {TYPE_WORDS[A.dtype.name]} and other's "
                           f"dtype {TYPE_WORDS[B.dtype.name]}")
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if not (A.ndim >= B.ndim and A.ndim - B.ndim <= 1):
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = B.ndim == A.ndim - 1  # torch's rule here (linalg.solve compares the shapes too)
    if (B.shape[-1] if vector else B.shape[-2]) != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2], A.shape[-1]
    atol, rtol = _tolerance(A._data.dtype, m, n, None, rcond)
    if vector:
        batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-1])))
        A = expand(A, *batch, m, n) if tuple(A.shape[:-2]) != batch else A
        B = expand(B, *batch, m) if tuple(B.shape[:-1]) != batch else B
    else:
        A, B = _broadcast_batches(A, B)
    solution = apply(LSTSQ, A, B, atol=atol, rtol=rtol, vector=vector)
    rank = matrix_rank(A, rtol=rtol)
    values = svdvals(A).detach() if driver in ("gelsd", "gelss") else empty(0, dtype=A.dtype)
    if driver not in (None, "gelsy") and m > n and bool(np.all(rank._data == n)):
        fitted = matmul(A, unsqueeze(solution, -1)) if vector else matmul(A, solution)
        residuals = ((fitted - (unsqueeze(B, -1) if vector else B)) ** 2).sum(-2)
        residuals = squeeze_dim(residuals, -1) if vector else residuals
    else:
        residuals = empty(0, dtype=A.dtype)
    return _LSTSQ(solution, residuals, rank, values)


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
    if isinstance(dim, int):
        dim = (dim,)
    if ord < 0 or ord == math.inf:  # no identity: an empty reduction has no value
        if dim is None and x.numel() == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on an empty "
                               "tensor because the operation does not have an identity")
        for d in dim or ():  # (torch names the dim as given)
            if x.shape[_wrap_dim(d, x.ndim)] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on the "
                                   f"dimension {d}because this dimension is empty and the "
                                   "operation does not have an identity")
    return norm(x, ord, dim, keepdim, dtype)


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
    if ord == "nuc" or abs_(ord) == 2:
        values = svdvals(movedim(A, (d0, d1), (-2, -1)))
        # (the largest of no singular values is 0 in torch; the smallest raises amin's error)
        result = (sum(values, -1) if ord == "nuc" or (ord == 2 and values.shape[-1] == 0) else
                  amax(values, -1) if ord == 2 else amin(values, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                result = unsqueeze(result, d)
        return result
    if abs_(ord) == math.inf:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    reduce = amax if ord > 0 else amin
    return reduce(sum(abs(A), d0, keepdim), d1, keepdim)


def abs_(x):
    return x if x >= 0 else -x


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``linalg.norm``: a vector norm over one dim (or of the flattened input when neither
    ``ord`` nor ``dim`` is given), a matrix norm over two.

    Examples
    --------
    >>> gradviz.linalg.norm(gradviz.tensor([[3.0, 4.0], [0.0, 0.0]]), dim=1)
    tensor([5., 0.])
    """
    if isinstance(dim, int):
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


# ---- products -------------------------------------------------------------------------------------

def vecdot(x, y, *, dim=-1):
    """``sum(x * y, dim)``: the dot products of the vectors along ``dim`` (broadcast)."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x "
                           f"of type {TYPE_WORDS[x.dtype.name]} and y of type "
                           f"{TYPE_WORDS[y.dtype.name]} instead")
    return (x * y).sum(dim)


def _chain_order(shapes):
    """The split points of the cheapest parenthesization (the matrix-chain DP)."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _multiply_chain(matrices, split, i, j):
    if i == j:
        return matrices[i]
    k = split[i][j]
    return mm(_multiply_chain(matrices, split, i, k), _multiply_chain(matrices, split, k + 1, j))


def multi_dot(tensors):
    """The product of a chain of matrices, multiplied in the cheapest order; the first may
    be a row vector (1-D) and the last a column vector (1-D).

    Examples
    --------
    >>> A, B = gradviz.ones(2, 3), gradviz.ones(3, 4)
    >>> gradviz.linalg.multi_dot([A, B, gradviz.ones(4)])
    tensor([12., 12.])
    """
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first, last = tensors[0], tensors[-1]
    if first.ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first.ndim}D")
    if last.ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last.ndim}D")
    for i in range(1, n - 1):
        if tensors[i].ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {tensors[i].ndim}D")
    for i in range(1, n):
        if tensors[i].dtype is not first.dtype:
            from .._tensor import C_TYPE_NAMES

            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {C_TYPE_NAMES[first.dtype.name]} and tensor {i} "
                               f"{C_TYPE_NAMES[tensors[i].dtype.name]}")
    out_shape = ([first.shape[0]] if first.ndim == 2 else []) + \
        ([last.shape[1]] if last.ndim == 2 else [])
    matrices = list(tensors)
    if first.ndim == 1:
        matrices[0] = unsqueeze(first, 0)
    if last.ndim == 1:
        matrices[-1] = unsqueeze(last, -1)
    for i in range(n - 1):
        if matrices[i].shape[1] != matrices[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(tensors[i].shape)} and {list(tensors[i + 1].shape)} "
                               "cannot be multiplied")
    if n == 2:
        product = mm(matrices[0], matrices[1])
    elif n == 3:  # PyTorch's two-way choice
        a, b = matrices[0].shape
        c, d = matrices[2].shape[0], matrices[2].shape[1]
        if a * c * (b + d) > b * d * (a + c):
            product = mm(matrices[0], mm(matrices[1], matrices[2]))
        else:
            product = mm(mm(matrices[0], matrices[1]), matrices[2])
    else:
        product = _multiply_chain(matrices, _chain_order([tuple(m.shape) for m in matrices]),
                                  0, n - 1)
    return view(product, *out_shape)


def chain_matmul(*matrices):
    """``torch.chain_matmul`` (deprecated in PyTorch, which warns once): :func:`multi_dot` of
    two or more matrices given as arguments."""
    _warn_once("chain_matmul", (
        "torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
        "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather "
        "than multiple parameters."))
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: :func:`diagonal` defaulting to the last two dims."""
    return diagonal(A, offset, dim1, dim2)


def _matrix_transpose(name):
    def transposed(self):
        if self.ndim < 2:
            raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of "
                               f"matrices. Got {self.ndim}-D tensor.")
        return transpose(self, -2, -1)

    return transposed


def _conjugate_transpose(self):
    """``tensor.H`` (real tensors: the transpose of a matrix)."""
    if self.ndim != 2:
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.ndim}-D tensor." + (" For batches of matrices, consider "
                                                       "using tensor.mH" if self.ndim > 2 else ""))
    return transpose(self, 0, 1)


mT = _matrix_transpose("mT")
mH = _matrix_transpose("mH")
adjoint = _matrix_transpose("adjoint")  # ``Tensor.adjoint()``: the conjugate transpose

install_methods({"cholesky_inverse": cholesky_inverse, "mH": property(mH),
                 "H": property(_conjugate_transpose), "adjoint": adjoint})
install_methods({"cholesky": cholesky, "cholesky_solve": cholesky_solve, "qr": qr, "svd": svd,
                 "pinverse": pinverse, "triangular_solve": triangular_solve})
