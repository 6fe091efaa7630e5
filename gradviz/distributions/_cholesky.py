"""A differentiable Cholesky factorization for ``MultivariateNormal`` (gradviz.linalg has none
yet): an op-table row like the built-in linear-algebra ops, so its backward records a graph and
second derivatives work."""

import numpy as np

import gradviz
from gradviz.ops._registry import Op, apply


def _cholesky_forward(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        pass
    matrices = a.reshape((-1,) + a.shape[-2:])
    for batch, matrix in enumerate(matrices):
        for order in range(1, matrix.shape[-1] + 1):
            try:
                np.linalg.cholesky(matrix[:order, :order])
            except np.linalg.LinAlgError:
                where = f"(Batch element {batch}): " if a.ndim > 2 else ""
                raise gradviz.linalg.LinAlgError(
                    f"linalg.cholesky: {where}The factorization could not be completed because "
                    "the input is not positive-definite (the leading minor of order "
                    f"{order} is not positive-definite).") from None
    raise gradviz.linalg.LinAlgError("linalg.cholesky: the factorization failed")


def _cholesky_backward(ctx, grad):
    # torch's cholesky_backward: gA = L^-T Phi(L^T gL) L^-1, Phi = the lower triangle with the
    # diagonal halved (symmetrized as 0.5 (X + tril(X, -1)^T)).
    lower = ctx.output()
    lower_t = lower.transpose(-2, -1)
    phi = (lower_t @ grad).tril()
    phi = 0.5 * (phi + phi.tril(-1).transpose(-2, -1))
    inverse_t = gradviz.inverse(lower_t)
    return (inverse_t @ phi @ inverse_t.transpose(-2, -1),)


CHOLESKY = Op("cholesky", "LinalgCholeskyExBackward0", forward=_cholesky_forward,
              backward=_cholesky_backward, saves=lambda needs: ((), True))


def cholesky(matrix):
    """The lower-triangular ``L`` with ``L @ L.mT == matrix`` (of each matrix in a batch)."""
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise RuntimeError("linalg.cholesky: A must be batches of square matrices, but they "
                           f"are {matrix.shape[-2] if matrix.dim() >= 2 else 1} by "
                           f"{matrix.shape[-1] if matrix.dim() else 1} matrices")
    return apply(CHOLESKY, matrix)
