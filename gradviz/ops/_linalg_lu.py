"""``torch.linalg``'s LU factorization (``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve``,
and the legacy ``torch.lu``, ``torch.lu_unpack``, ``torch.lu_solve``), the matrix exponential
(``matrix_exp``), and ``eig``/``eigvals``, which need complex tensors gradviz does not have.

The LU factorization is LAPACK's ``getrf`` (partial pivoting, the first largest pivot of each
column, multipliers scaled by the pivot's reciprocal), computed for the whole batch one column
at a time. Backward rules are PyTorch's (``linalg_lu_backward``, ``linalg_lu_solve_LU``,
``differential_analytic_matrix_function`` in ``FunctionsManual.cpp``), written with
differentiable gradviz ops, so second derivatives work (Note [Backward rules are
differentiable]). As for ``eigh``, the LU backward refactorizes its saved input (Note
[Recomputed factorizations] in ``_linalg_factor.py``).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from .._tensor import TYPE_WORDS, Tensor, _warn_once
from ._linalg import _batch_element, _check_square, matmul, tril, triu
from ._linalg_solvers import _result_type, solve_triangular
from ._registry import Op, apply, declare, exports, saves_inputs
from ._saved import OTHER, REFACTORED, RESULT, SELF, Attr, Computed
from ._shape import cat, narrow, transpose

_LU_FACTOR = _result_type("linalg_lu_factor", ("LU", "pivots"))
_LU_FACTOR_EX = _result_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
_LU = _result_type("linalg_lu", ("P", "L", "U"))
_LU_UNPACK = _result_type("lu_unpack", ("P", "L", "U"))
_EIG_MESSAGE = ("{what}: the eigenvalues and eigenvectors of a real non-symmetric matrix are "
                "complex in general, and gradviz has no complex tensors, so {what} is not "
                "available. For a symmetric matrix use linalg.eigh / linalg.eigvalsh (real "
                "results); otherwise compute with PyTorch.")


def _mT(x):
    return transpose(x, -2, -1)


def _check_input(what, A):
    if not isinstance(A, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(A.shape)} instead")
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f'"lu_cpu" not implemented for \'{TYPE_WORDS[A.dtype.name]}\'')


def _check_pivot(what, pivot):
    if not pivot:
        raise RuntimeError(f"{what}: LU without pivoting is not implemented on the CPU")


# ---- the factorization ------------------------------------------------------------------------

def _lu_arrays(a):
    """LAPACK's ``getrf`` on each matrix of a batch: ``(LU, pivots, info)``, ``pivots`` the
    1-based row swapped with each of the first ``min(m, n)`` rows, ``info`` 0 or the 1-based
    index of the first zero pivot (U is singular; the factorization is still complete)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    count = int(np.prod(a.shape[:-2]))
    lu = np.array(a, copy=True).reshape(count, m, n)
    pivots = np.empty((count, k), dtype=np.int32)
    info = np.zeros(count, dtype=np.int32)
    rows = np.arange(count)
    with np.errstate(all="ignore"):
        for j in range(k):
            chosen = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
            pivots[:, j] = chosen + 1
            top = lu[rows, j].copy()
            lu[rows, j] = lu[rows, chosen]
            lu[rows, chosen] = top
            pivot = lu[:, j, j]
            zero = pivot == 0  # the whole column below is zero too: nothing to eliminate
            info[(info == 0) & zero] = j + 1
            factors = lu[:, j + 1:, j] * (1 / np.where(zero, 1, pivot))[:, None]
            factors[zero] = 0
            lu[:, j + 1:, j] = factors
            lu[:, j + 1:, j + 1:] -= factors[:, :, None] * lu[:, None, j, j + 1:]
    batch = a.shape[:-2]
    return lu.reshape(a.shape), pivots.reshape(*batch, k), info.reshape(batch)


def _permutation(pivots, m, dtype):
    """The permutation matrices ``P`` (``A = P L U``) of LAPACK's pivots."""
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    order = np.broadcast_to(np.arange(m), (*batch, m)).copy().reshape(-1, m)
    swaps = pivots.reshape(-1, k).astype(np.int64) - 1
    rows = np.arange(order.shape[0])
    for j in range(k):
        target = swaps[:, j]
        held = order[rows, j].copy()
        order[rows, j] = order[rows, target]
        order[rows, target] = held
    permutation = np.zeros((order.shape[0], m, m), dtype=dtype)
    permutation[rows[:, None], order, np.arange(m)[None, :]] = 1  # (P^T A)[i] = A[order[i]]
    return permutation.reshape(*batch, m, m)


def _unpack_arrays(lu, k):
    lower = np.tril(lu[..., :, :k], -1)
    np.einsum("...ii->...i", lower[..., :k, :])[...] = 1
    return lower, np.triu(lu[..., :k, :])


def _lu_backward(g_lower, g_upper, P, L, U):
    """PyTorch's ``linalg_lu_backward`` for ``A = P L U`` (square, wide and tall)."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:
        # gA = P L^-H [L^H gL o 1_L + gU U^H o 1_U] U^-H
        grad = None if g_lower is None else tril(matmul(_mT(L), g_lower), -1)
        if g_upper is not None:
            upper = triu(matmul(g_upper, _mT(U)))
            grad = upper if grad is None else grad + upper
        grad = solve_triangular(_mT(U), grad, upper=False, left=False)
        grad = solve_triangular(_mT(L), grad, upper=True, left=True, unitriangular=True)
        return matmul(P, grad)
    from ._creation import zeros_like

    if m < n:
        # gA1 = P L^-H [gU1 + (L^H gL o 1_L - gU U^H o 1_U) U1^-H], gA2 = P L^-H gU2
        U1 = narrow(U, -1, 0, k)
        grad = None if g_lower is None else matmul(_mT(L), g_lower)
        if g_upper is not None:
            part = -matmul(triu(g_upper), _mT(U))
            grad = part if grad is None else grad + part
        grad = solve_triangular(_mT(U1), tril(grad, -1), upper=False, left=False)
        if g_upper is not None:
            grad = cat([grad + triu(narrow(g_upper, -1, 0, k)), narrow(g_upper, -1, k, n - k)], -1)
        grad = solve_triangular(_mT(L), grad, upper=True, left=True, unitriangular=True)
        if g_upper is None:
            grad = cat([grad, zeros_like(narrow(U, -1, k, n - k))], -1)
        return matmul(P, grad)
    # tall: gA1 = P [gL1 + L^-H (gU U^H o 1_U - L^H gL o 1_L)] U^-H, gA2 = P gL2 U^-H
    L1 = narrow(L, -2, 0, k)
    grad = None if g_upper is None else matmul(g_upper, _mT(U))
    if g_lower is not None:
        part = -matmul(_mT(L), tril(g_lower, -1))
        grad = part if grad is None else grad + part
    grad = solve_triangular(_mT(L1), triu(grad), upper=True, left=True, unitriangular=True)
    if g_lower is not None:
        grad = cat([grad + tril(narrow(g_lower, -2, 0, k), -1), narrow(g_lower, -2, k, m - k)], -2)
    grad = solve_triangular(_mT(U), grad, upper=False, left=False)
    if g_lower is None:
        grad = cat([grad, zeros_like(narrow(L, -2, k, m - k))], -2)
    return matmul(P, grad)


def _refactor(A):
    """``P, L, U`` of ``A`` again, recorded under ``create_graph`` (Note [Recomputed
    factorizations])."""
    P, L, U = linalg_lu(A)
    return P, L, U


def _lu_factor_backward(ctx, g, g_pivots=None, g_info=None):
    """PyTorch's ``lu_factor_ex_backward``: the packed gradient split into L's (strictly
    lower) and U's (upper) parts."""
    P, L, U = _refactor(ctx.input(0))
    m, n = g.shape[-2:]
    k = min(m, n)
    g_lower = tril(narrow(g, -1, 0, k) if n != k else g, -1)
    g_upper = triu(narrow(g, -2, 0, k) if m != k else g)
    return (_lu_backward(g_lower, g_upper, P, L, U),)


def _lu_forward(a):
    lu, pivots, _ = _lu_arrays(a)
    return _unpack_arrays(lu, min(a.shape[-2:]))


LU_FACTOR = Op("linalg_lu_factor_ex", "LinalgLuFactorExBackward0",
               forward=_lu_arrays, backward=_lu_factor_backward, saves=saves_inputs(0),
               saved={"LU": REFACTORED, "pivots": REFACTORED,
                   "pivot": Computed(lambda node: True)})
LU = Op("linalg_lu", "LinalgLuBackward0", forward=_lu_forward,
        backward=lambda ctx, g_lower, g_upper: (
            _lu_backward(g_lower, g_upper, *_refactor(ctx.input(0))),),
        saves=saves_inputs(0),
        saved={"P": REFACTORED, "L": REFACTORED, "U": REFACTORED,
            "pivot": Computed(lambda node: True)})


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """``(LU, pivots, info)``: :func:`lu_factor`'s factors and, per matrix, 0 or the 1-based
    index of the first zero on U's diagonal; raises only with ``check_errors=True``."""
    _check_input("linalg.lu_factor_ex", A)
    _check_pivot("linalg.lu_factor_ex", pivot)
    LU_, pivots, info = apply(LU_FACTOR, A)
    if check_errors and np.any(info._data):
        raise _zero_pivot_error("torch.linalg.lu_factor_ex", info._data)
    return _LU_FACTOR_EX(LU_, pivots, info)


def _zero_pivot_error(what, info):
    flat = info.reshape(-1)
    order = int(flat[np.flatnonzero(flat)[0]])
    # a plain RuntimeError, as PyTorch's (not a LinAlgError)
    return RuntimeError(f"{what}: {_batch_element(info != 0)}U[{order},{order}] is zero and "
                        "using it on lu_solve would result in a division by zero. If you still "
                        "want to perform the factorization, consider calling linalg.lu(A, pivot) "
                        "or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A, *, pivot=True):
    """``(LU, pivots)``: ``A = P L U`` packed as LAPACK's ``getrf`` packs it (L's multipliers
    below the diagonal, U on and above it) with the 1-based row ``pivots`` (int32); a zero
    pivot raises, as a solve with it would divide by zero.

    Examples
    --------
    >>> A = gradviz.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> LU, pivots = gradviz.linalg.lu_factor(A)
    >>> pivots
    tensor([2, 2], dtype=gradviz.int32)
    >>> gradviz.linalg.lu_solve(LU, pivots, gradviz.tensor([[5.0], [11.0]]))
    tensor([[1.],
            [2.]])
    """
    _check_input("linalg.lu_factor", A)
    _check_pivot("linalg.lu_factor", pivot)
    LU_, pivots, info = apply(LU_FACTOR, A)
    if np.any(info._data):
        raise _zero_pivot_error("torch.linalg.lu_factor", info._data)
    return _LU_FACTOR(LU_, pivots)


def linalg_lu(A, *, pivot=True):
    """``(P, L, U)`` with ``A = P @ L @ U``: ``P`` a permutation (it carries no gradient),
    ``L`` unit lower triangular (m x k), ``U`` upper triangular (k x n), ``k = min(m, n)``."""
    _check_input("linalg.lu", A)
    _check_pivot("linalg.lu", pivot)
    L, U = apply(LU, A)
    from .. import ops

    pivots = _lu_arrays(A._data)[1]
    return _LU(ops.tensor(_permutation(pivots, A.shape[-2], A._data.dtype)), L, U)


def _lu_unpack_forward(lu, pivots, shape):
    return _unpack_arrays(lu, min(shape))


def _lu_unpack_backward(ctx, g_lower, g_upper):
    """PyTorch's ``lu_unpack_backward``: L's strictly lower and U's upper gradient packed."""
    m, n = ctx.shape
    k = min(m, n)
    from ._creation import zeros

    dtype = (g_lower if g_lower is not None else g_upper).dtype
    batch = tuple((g_lower if g_lower is not None else g_upper).shape[:-2])
    lower = zeros(*batch, m, k, dtype=dtype) if g_lower is None else tril(g_lower, -1)
    upper = zeros(*batch, k, n, dtype=dtype) if g_upper is None else triu(g_upper)
    if m == n:
        return lower + upper, None
    if m < n:
        return cat([lower, zeros(*batch, m, n - k, dtype=dtype)], -1) + upper, None
    return lower + cat([upper, zeros(*batch, m - k, n, dtype=dtype)], -2), None


LU_UNPACK = Op("lu_unpack", "LuUnpackBackward0", forward=_lu_unpack_forward,
               backward=_lu_unpack_backward,
               saved={"LU_data_sym_argsize_minus_1": Attr("shape", lambda s: s[1]),
                   "LU_data_sym_argsize_minus_2": Attr("shape", lambda s: s[0])})


@declare()
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """``(P, L, U)`` from :func:`lu_factor`'s packed ``LU_data`` and ``LU_pivots``; empty
    tensors for the parts not asked for."""
    from .. import ops

    if LU_pivots.dtype is not dtypes.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                           "torch.int32 dtype.\nNote: this function is intended to be used with "
                           "the output produced by torch.linalg.lu_factor")
    m = LU_data.shape[-2]
    if unpack_data:
        L, U = apply(LU_UNPACK, LU_data, LU_pivots, shape=tuple(LU_data.shape[-2:]))
    else:
        L = U = ops.empty(0, dtype=LU_data.dtype)
    P = ops.tensor(_permutation(LU_pivots._data, m, LU_data._data.dtype)) if unpack_pivots \
        else ops.empty(0, dtype=LU_data.dtype)
    return _LU_UNPACK(P, L, U)


# ---- lu_solve ---------------------------------------------------------------------------------

def _lu_solve_arrays(lu, pivots, b, left, adjoint):
    k = lu.shape[-1]
    lower, upper = _unpack_arrays(lu, k)
    P = _permutation(pivots, k, lu.dtype)
    A = P @ lower @ upper
    if adjoint:
        A = np.swapaxes(A, -1, -2)
    with np.errstate(all="ignore"):
        if left:
            return _solve_or_nan(A, b)
        return np.swapaxes(_solve_or_nan(np.swapaxes(A, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


def _solve_or_nan(A, b):
    try:
        return np.linalg.solve(A, b)
    except np.linalg.LinAlgError:  # a zero pivot: LAPACK's getrs divides by it
        return np.full(np.broadcast_shapes(A.shape[:-1] + (1,), b.shape), np.nan, dtype=A.dtype)


def _lu_solve_backward(ctx, g):
    """PyTorch's ``linalg_lu_solve_LU`` (the factor's gradient) and ``gB = lu_solve(LU,
    pivots, gX, adjoint=not adjoint)``."""
    LU_, pivots, X = ctx.input(0), ctx.input(1), ctx.output()
    left, adjoint = ctx.left, ctx.adjoint
    grad_b = linalg_lu_solve(LU_, pivots, g, left=left, adjoint=not adjoint) \
        if ctx.needs_input_grad[2] else None
    grad_lu = None
    if ctx.needs_input_grad[0]:
        if not left:  # X A = B  <=>  A^T X^T = B^T
            X, g, adjoint = _mT(X), _mT(g), not adjoint
        from .. import ops

        k = LU_.shape[-1]
        lower = tril(LU_, -1) + ops.eye(k, dtype=LU_.dtype)
        upper = triu(LU_)
        P = ops.tensor(_permutation(pivots._data, k, LU_._data.dtype))
        if not adjoint:
            # gR = -U^-H gX X^H, gL = (L^-H gR U^H) o 1_L
            grad_r = solve_triangular(_mT(upper), -matmul(g, _mT(X)), upper=False)
            grad_l = solve_triangular(_mT(lower), matmul(grad_r, _mT(upper)), upper=True,
                                      unitriangular=True)
            grad_lu = tril(grad_l, -1) + triu(grad_r)
        else:
            # A^H X = B: with H = L^-1 P^T gX and W = P^T X,
            # gL = -(W H^H) o 1_L and gU = -(L^H W (U^-1 H)^H) o 1_U
            h = solve_triangular(lower, matmul(_mT(P), g), upper=False, unitriangular=True)
            w = matmul(_mT(P), X)
            grad_l = -matmul(w, _mT(h))
            grad_u = -matmul(matmul(_mT(lower), w), _mT(solve_triangular(upper, h, upper=True)))
            grad_lu = tril(grad_l, -1) + triu(grad_u)
    return grad_lu, None, grad_b


LU_SOLVE = Op("linalg_lu_solve", "LinalgLuSolveBackward0", forward=_lu_solve_arrays,
              backward=_lu_solve_backward, saves=lambda needs: ((0, 1), True),
              saved={"LU": SELF, "pivots": OTHER, "result": RESULT,
                  "left": Attr("left"), "adjoint": Attr("adjoint")})


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """The solution ``X`` of ``A @ X = B`` from :func:`lu_factor`'s ``(LU, pivots)`` of ``A``
    (``X @ A = B`` with ``left=False``; ``A^T`` in place of ``A`` with ``adjoint=True``)."""
    if B.dtype is not LU.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found "
                           f"LU of type {TYPE_WORDS[LU.dtype.name]} and B of type "
                           f"{TYPE_WORDS[B.dtype.name]} instead")
    _check_square("torch.linalg.lu_solve", LU)
    if B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    inner = B.shape[-2] if left else B.shape[-1]
    if inner != LU.shape[-1]:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{equation} ({LU.shape[-2]}x{LU.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError(f"linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the "
                           f"same, but got pivots with shape {list(pivots.shape)} instead")
    batch = tuple(np.broadcast_shapes(tuple(LU.shape[:-2]), tuple(B.shape[:-2])))
    if tuple(LU.shape[:-2]) != batch:
        LU = LU.expand(*batch, *LU.shape[-2:])
        pivots = pivots.expand(*batch, pivots.shape[-1])
    if tuple(B.shape[:-2]) != batch:
        B = B.expand(*batch, *B.shape[-2:])
    return apply(LU_SOLVE, LU, pivots, B, left=bool(left), adjoint=bool(adjoint))


@declare()
def lu_solve(b, LU_data, LU_pivots):
    """``torch.lu_solve`` (deprecated in PyTorch, which warns once): :func:`linalg_lu_solve`
    with its arguments reversed."""
    _warn_once("lu_solve", (
        "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a "
        "future PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\n"
        "X = torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = "
        "torch.linalg.lu_solve(LU, pivots, B)"))
    return linalg_lu_solve(LU_data, LU_pivots, b)


@declare(method=True)
def lu(A, pivot=True, get_infos=False):
    """``torch.lu`` (deprecated in PyTorch, which warns once): ``(LU, pivots)`` of
    :func:`lu_factor`, and ``info`` with ``get_infos=True`` (then a zero pivot does not
    raise)."""
    _warn_once("lu", (
        "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex "
        "and will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, "
        "compute_pivots)\nshould be replaced with\nLU, pivots = torch.linalg.lu_factor(A, "
        "compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)\n"
        "should be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, "
        "compute_pivots)"))
    if get_infos:
        return tuple(lu_factor_ex(A, pivot=pivot))
    return tuple(lu_factor(A, pivot=pivot))


# ---- matrix_exp -------------------------------------------------------------------------------

_TAYLOR_DEGREE = 18  # at ||A / 2^s||_1 <= 1/2 the remainder is below 1e-22 (relative)


def _matrix_exp_forward(a):
    """Scaling and squaring: the Taylor series of ``A / 2^s`` (1-norm at most 1/2), squared
    ``s`` times, ``s`` chosen per matrix; computed in float64."""
    work = a.astype(np.float64)
    n = a.shape[-1]
    with np.errstate(all="ignore"):
        norms = np.abs(work).sum(-2).max(-1) if n else np.zeros(a.shape[:-2])
        norms = np.nan_to_num(norms, nan=0.0, posinf=2.0 ** 1000)
        squarings = np.maximum(0, np.ceil(np.log2(np.maximum(norms, 1e-300) * 2))).astype(np.int64)
        scaled = work / (2.0 ** squarings)[..., None, None]
        identity = np.broadcast_to(np.eye(n), work.shape)
        term, result = identity, identity.copy()
        for k in range(1, _TAYLOR_DEGREE + 1):
            term = (term @ scaled) / k
            result = result + term
        for step in range(int(squarings.max(initial=0))):
            result = np.where((step < squarings)[..., None, None], result @ result, result)
    return result.astype(a.dtype)


def _matrix_exp_backward(ctx, g):
    """PyTorch's ``differential_analytic_matrix_function``: the upper-right block of
    ``exp([[A^T, g], [0, A^T]])``."""
    from ._creation import zeros_like

    A = _mT(ctx.input(0))
    n = A.shape[-1]
    meta = cat([cat([A, g], -1), cat([zeros_like(A), A], -1)], -2)
    return (narrow(narrow(matrix_exp(meta), -2, 0, n), -1, n, n),)


MATRIX_EXP = Op("linalg_matrix_exp", "LinalgMatrixExpBackward0", forward=_matrix_exp_forward,
                backward=_matrix_exp_backward, saves=saves_inputs(0), saved={"self": SELF})


@declare(method=True)
def matrix_exp(A):
    """The matrix exponential ``sum_k A^k / k!`` of each square matrix in ``A``.

    Examples
    --------
    >>> A = gradviz.tensor([[0.0, 1.0], [-1.0, 0.0]])
    >>> gradviz.linalg.matrix_exp(A)  # a rotation by one radian
    tensor([[ 0.5403,  0.8415],
            [-0.8415,  0.5403]])
    """
    _check_square("linalg.matrix_exp", A)
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_exp: Expected a floating point or complex tensor as "
                           f"input. Got {TYPE_WORDS[A.dtype.name]}")
    return apply(MATRIX_EXP, A)


# ---- eig ------------------------------------------------------------------------------------------

def eig(A, *, out=None):
    """Not available: ``torch.linalg.eig`` returns complex tensors (raises TypeError)."""
    raise TypeError(_EIG_MESSAGE.format(what="linalg.eig"))


def eigvals(A, *, out=None):
    """Not available: ``torch.linalg.eigvals`` returns a complex tensor (raises TypeError)."""
    raise TypeError(_EIG_MESSAGE.format(what="linalg.eigvals"))


__all__ = exports(globals())
