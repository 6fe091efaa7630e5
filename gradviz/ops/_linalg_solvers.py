"""``torch.linalg``'s inverses, solvers, Cholesky factor and matrix products, and the legacy
``torch.cholesky``, ``cholesky_solve``, ``cholesky_inverse``, ``triangular_solve`` and
``chain_matmul``; the factorizations are in ``_linalg_factor.py`` and the norms in
``_linalg_norms.py``.

Each op computes its forward with numpy (batched over the leading dims) and its backward
with differentiable gradviz ops (Note [Backward rules are differentiable]), using the
formulas of PyTorch's ``FunctionsManual.cpp`` so gradients, and second derivatives through
``create_graph=True``, agree with PyTorch's.
"""

from __future__ import annotations

import math

import numpy as np

from .._tensor import TYPE_WORDS, Tensor, _warn_once, install_methods
from ._linalg import (
    INVERSE,
    _batch_element,
    _check_square,
    _LinAlgError,
    _lu_diagonal,
    _singular_error,
    diagonal,
    matmul,
    mm,
    tril,
    triu,
)
from ._registry import Op, apply, declare, exports
from ._saved import NO_LU, OTHER, RESULT, SELF, Attr
from ._shape import expand, transpose, unsqueeze, view

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
_SOLVE_EX = _result_type("linalg_solve_ex", ("result", "info"))
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


def _check_b_and_A(b, A):
    """The legacy solvers' dtype check (``triangular_solve``, ``cholesky_solve``)."""
    if b.dtype is not A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{TYPE_WORDS[b.dtype.name]} and A of type {TYPE_WORDS[A.dtype.name]} "
                           "instead.")


def _broadcast_batches(A, B):
    """``A`` and ``B`` expanded to their common batch dims (the last two dims are matrices)."""
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    if tuple(A.shape[:-2]) != batch:
        A = expand(A, *batch, *A.shape[-2:])
    if tuple(B.shape[:-2]) != batch:
        B = expand(B, *batch, *B.shape[-2:])
    return A, B


# ---- inverse with info, solve -----------------------------------------------------------------

def _pivot_info(diagonal_u):
    """LAPACK's ``info`` of ``getrf`` per matrix: 0, or the 1-based index of the first zero
    on the diagonal of U."""
    singular = diagonal_u == 0
    return np.where(singular.any(-1), np.argmax(singular, -1) + 1, 0).astype(np.int32)


def _inv_ex_forward(a):
    info = _pivot_info(_lu_diagonal(a)[0])
    if not info.any():
        return np.linalg.inv(a), info
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


def _solve_arrays(a, b, left, vector):
    if vector:
        return np.linalg.solve(a, b[..., None])[..., 0]
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    return np.linalg.solve(a, b)


def _solve_forward(a, b, left, vector):
    try:
        return _solve_arrays(a, b, left, vector)
    except np.linalg.LinAlgError:
        pass
    # solve_ex without check_errors (solve itself raised before): the other matrices of the
    # batch are solved; a singular one's solution is NaN (LAPACK's getrs divides by the zero
    # pivot, so PyTorch's entries there are infinities or NaN)
    singular = (_lu_diagonal(a)[0] == 0).any(-1)
    a = np.where(singular[..., None, None], np.eye(a.shape[-1], dtype=a.dtype), a)
    x = _solve_arrays(a, b, left, vector)
    x[singular] = np.nan
    return x


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
           backward=_solve_backward, saves=lambda needs: ((0,), True),
           saved={"A": SELF, "result": RESULT, "left": Attr("left"),
               "LU": NO_LU, "pivots": NO_LU})


def solve_ex(A, B, *, left=True, check_errors=False):
    """``(result, info)``: :func:`solve`'s solution and 0, or the (1-based) index of the zero
    pivot of a singular ``A`` (then the result is not a solution); raises only with
    ``check_errors=True``."""
    result = solve(A, B, left=left, _singular="torch.linalg.solve_ex" if check_errors else None)
    from .. import ops

    return _SOLVE_EX(result, ops.tensor(_pivot_info(_lu_diagonal(A._data)[0])))


def _check_singular(what, A):
    """Raises PyTorch's error naming the first singular matrix of ``A``'s own batch (before
    broadcasting against ``B``); ``what`` is None for ``solve_ex`` without ``check_errors``."""
    if what is None:
        return
    singular = (_lu_diagonal(A._data)[0] == 0).any(-1)
    if singular.any():
        raise _LinAlgError(f"{what}: {_batch_element(singular)}The solver failed because the "
                           "input matrix is singular.")


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
        A_own = A
        if tuple(A.shape[:-2]) != batch:
            A = expand(A, *batch, *A.shape[-2:])
        if tuple(B.shape[:-1]) != batch:
            B = expand(B, *batch, B.shape[-1])
        _check_singular(_singular, A_own)
        return apply(SOLVE, A, B, left=True, vector=True)
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
    _check_singular(_singular, A)
    A, B = _broadcast_batches(A, B)
    return apply(SOLVE, A, B, left=bool(left), vector=False)


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
                      saves=lambda needs: ((0,), True),
                      saved={"self": SELF, "result": RESULT, "upper": Attr("upper"),
                          "left": Attr("left"),
                          "unitriangular": Attr("unitriangular")})


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
                      saves=lambda needs: ((0, 1), True),
                      saved={"self": SELF, "A": OTHER, "solution": RESULT,
                          "upper": Attr("upper"), "transpose": Attr("transpose"),
                          "unitriangular": Attr("unitriangular")})


@declare(method=True)
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
    _check_b_and_A(b, A)
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
    try:  # the whole batch at once; matrix by matrix only to find which failed
        return (np.linalg.cholesky(a).astype(a.dtype, copy=False),
                np.zeros(a.shape[:-2], dtype=np.int32))
    except np.linalg.LinAlgError:
        pass
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
              backward=_cholesky_backward, saves=lambda needs: ((), True),
              saved={"L": RESULT, "upper": Attr("upper")})
LEGACY_CHOLESKY = Op("cholesky", "CholeskyBackward0", forward=_legacy_cholesky_forward,
                     backward=_cholesky_backward, saves=lambda needs: ((), True),
                     saved={"result": RESULT, "upper": Attr("upper")})


def _not_positive_definite(what, info):
    flat = info.reshape(-1)
    batch = np.flatnonzero(flat)[0]
    order = int(flat[batch])
    where = f"(Batch element {batch}): " if info.ndim else ""  # torch names a batch's matrix
    return _LinAlgError(f"{what}: {where}The factorization could not be completed because the input is "
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


@declare(method=True)
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
                    backward=_cholesky_solve_backward, saves=lambda needs: ((0, 1), True),
                    saved={"self": SELF, "input2": OTHER, "result": RESULT,
                        "upper": Attr("upper")})


@declare(method=True)
def cholesky_solve(input, input2, upper=False):
    """The solution ``X`` of ``A @ X = input`` given the Cholesky factor ``input2`` of ``A``
    (lower, or upper with ``upper=True``)."""
    _check_floating("cholesky_solve", input)
    _check_b_and_A(input, input2)
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
                      saves=lambda needs: ((0,), True),
                      saved={"self": SELF, "result": RESULT, "upper": Attr("upper")})


@declare(method=True)
def cholesky_inverse(input, upper=False):
    """The inverse of ``A`` from its Cholesky factor ``input`` (lower, or upper with
    ``upper=True``): ``(L @ L.mT)^-1``."""
    _check_floating("cholesky_inverse", input)
    if input.ndim < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 "
                           "dimensions.")
    _check_square("cholesky_inverse", input)
    return apply(CHOLESKY_INVERSE, input, upper=bool(upper))


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


@declare()
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

    transposed.__doc__ = (f"``{name}``: the transpose of the last two dims of a matrix or batch "
                          "(real tensors, so also the conjugate transpose). Mirrors "
                          f"``torch.Tensor.{name}``.")
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
declare(name="adjoint", method="adjoint")(adjoint)

install_methods({
    "mH": property(mH),
    "H": property(_conjugate_transpose),
})


def vander(x, *, N=None):
    """``torch.linalg.vander``: the powers ``x ** 0 .. x ** (N - 1)`` of the last dim, in
    increasing order (``N`` defaults to its length), as torch computes them: a column of
    ones joined to the cumulative product of ``x`` repeated.

    Examples
    --------
    >>> gradviz.linalg.vander(gradviz.tensor([1.0, 2.0, 3.0]))
    tensor([[1., 1., 1.],
            [1., 2., 4.],
            [1., 3., 9.]])
    """
    from ._reduction import cumprod
    from ._shape import cat

    if x.dtype.name == "bool":
        raise RuntimeError("linalg.vander supports floating point, complex, and integer tensors, "
                           "but got Bool")
    x = unsqueeze(x, -1) if x.ndim == 0 else x
    shape = list(x.shape)
    n = shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = cumprod(expand(unsqueeze(x, -1), *shape, n - 1), -1)
    return cat([powers.new_ones(*shape, 1), powers], -1)


__all__ = exports(globals())
