"""``torch.linalg``'s factorizations ``qr``, ``eigh``/``eigvalsh`` and ``svd``/``svdvals``,
and what is built on the SVD: ``pinv``, ``lstsq`` and ``matrix_rank``; the legacy
``torch.qr``, ``torch.svd`` and ``torch.pinverse``.

Forwards in numpy, backwards with differentiable gradviz ops using the formulas of PyTorch's
``FunctionsManual.cpp`` (Note [Backward rules are differentiable]).

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

import numpy as np

from .._tensor import TYPE_WORDS, Tensor, _warn_once
from ._linalg import diag_embed, diagonal, matmul, tril
from ._linalg_solvers import (
    _broadcast_batches,
    _check_floating,
    _check_matrix,
    _check_square,
    _LinAlgError,
    _mT,
    _result_type,
    solve_triangular,
)
from ._registry import Op, apply, declare, exports, saves_inputs
from ._saved import OTHER, REFACTORED, RESULT, SELF, Attr, Computed
from ._shape import cat, expand, narrow, squeeze_dim, unsqueeze

_QR = _result_type("linalg_qr", ("Q", "R"))
_LEGACY_QR = _result_type("qr", ("Q", "R"))
_EIGH = _result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
_SVD = _result_type("linalg_svd", ("U", "S", "Vh"))
_LEGACY_SVD = _result_type("svd", ("U", "S", "V"))
_LSTSQ = _result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))


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
        saves=saves_inputs(0), saved={"Q": REFACTORED, "R": REFACTORED, "mode": Attr("mode")})


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


@declare(method=True)
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
          saves=saves_inputs(0), saved={"eigenvalues": REFACTORED, "eigenvectors": REFACTORED})
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
         saves=saves_inputs(0),
         saved={"U": REFACTORED, "S": REFACTORED, "Vh": REFACTORED,
             "full_matrices": Attr("full_matrices"),
             "S_sym_argsize_minus_1": Computed(
                 lambda node: min(node.input(0).shape[-2:]))})
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


@declare(method=True)
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
          saves=lambda needs: ((0,), True), saved={"self": SELF, "result": RESULT})


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


@declare(method=True)
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
           backward=_lstsq_backward, saves=saves_inputs(0, 1, output=True),
           saved={"self": SELF, "b": OTHER, "solution": RESULT})


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


__all__ = exports(globals())
