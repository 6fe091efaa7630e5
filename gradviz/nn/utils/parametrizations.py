"""``torch.nn.utils.parametrizations``: ``weight_norm`` as a parametrization (the weight is
``g * v / ||v||``, from the originals ``original0`` = g and ``original1`` = v), and
``orthogonal`` (a weight with orthonormal columns or rows, torch's three maps) and
``spectral_norm`` (the weight over its largest singular value, by power iteration).

Examples
--------
>>> import gradviz as torch
>>> layer = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2))
>>> [name for name, _ in layer.named_parameters()]
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from __future__ import annotations

import numpy as np

from ... import linalg, ops
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...dtypes import finfo
from .. import _functional_core as F
from .. import _weight_norm as _wn
from .._conv import ConvTranspose1d, ConvTranspose2d
from .._module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _wn.weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _wn.norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name: str = "weight", dim=0):
    """Reparametrize ``module.<name>`` as magnitude times direction (Salimans & Kingma), norms
    taken over every dimension but ``dim`` (``None``: over all); returns the module."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ---- orthogonal -------------------------------------------------------------------------------

_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(Q):

    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * finfo(Q.dtype).eps  # torch's tolerance
    return ops.allclose(Q.mH @ Q, ops.eye(k, dtype=Q.dtype), atol=eps)


def _make_orthogonal(A):
    """The Q of ``A = QR`` (``A`` tall) with R's diagonal made non-negative: torch's
    ``geqrf`` + ``householder_product`` normalized by the signs of R's diagonal."""

    Q, R = linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _householder_product(A, tau):
    """torch's ``linalg.householder_product``: the first ``n`` columns of
    ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T`` with ``v_i`` the i-th column of ``A`` below
    the diagonal and 1 on it; composed of differentiable ops."""

    m, n = A.shape[-2], A.shape[-1]
    batch = tuple(A.shape[:-2])
    Q = ops.eye(m, n, dtype=A.dtype).expand(*batch, m, n)
    for i in reversed(range(tau.shape[-1])):
        unit = ops.zeros(*batch, i + 1, dtype=A.dtype)  # v_i: 0 above the diagonal, 1 on it
        unit[..., i] = 1
        v = ops.cat([unit, A[..., i + 1:, i]], -1).unsqueeze(-1)
        Q = Q - tau[..., i, None, None] * (v @ (v.mT @ Q))
    return Q


class _Orthogonal(Module):
    """torch's ``_Orthogonal``: a tall (or transposed wide) matrix mapped to one with
    orthonormal columns by the matrix exponential or the Cayley map of a skew-symmetric
    matrix, or by a product of Householder reflectors; with ``use_trivialization`` the result
    is multiplied by ``base``, which ``right_inverse`` sets (dynamic trivialization)."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):

        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:  # embed into a square matrix
                X = ops.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^-1
                Id = ops.eye(n, dtype=A.dtype)
                Q = linalg.solve(ops.add(Id, A, alpha=-0.5), ops.add(Id, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            # X's diagonal holds 1s and -1s, not differentiated through (cast to int, as torch)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if "base" in self._buffers:  # torch's hasattr(self, "base")
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):

        with no_grad():
            return self._right_inverse(Q, ops)

    def _right_inverse(self, Q, ops):
        if tuple(Q.shape) != tuple(self.shape):
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if "base" not in self._buffers:
            if self.orthogonal_map in ("matrix_exp", "cayley"):
                raise NotImplementedError("It is not possible to assign to the matrix exponential "
                                          "or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            # torch's geqrf, its diagonal made the signs of R's (the reflectors' tau == 0 flips)

            raw, tau = np.linalg.qr(Q.numpy(force=True), mode="raw")
            A = np.swapaxes(raw, -1, -2).copy()
            steps = np.arange(k)
            A[..., steps, steps] = np.sign(A[..., steps, steps]) * np.where(tau == 0.0, -1, 1)
            A = ops.tensor(A.astype(Q.numpy(force=True).dtype))
            return A.mT if transpose else A
        if n == k:
            Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
        else:  # complete Q into an n x n orthogonal matrix (its first k columns are Q's)
            N = ops.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(ops.cat([Q, N], dim=-1))
        self.base = Q
        # -Id: householder(zeros) is eye, and the maps of a zero skew part are the identity
        neg_Id = ops.zeros_like(Q_init)
        neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_Id


def orthogonal(module, name: str = "weight", orthogonal_map=None, *, use_trivialization=True):
    """Constrain ``module.<name>`` (a matrix or a batch) to orthonormal columns (rows if it is
    wide), as ``torch.nn.utils.parametrizations.orthogonal``: ``orthogonal_map`` is
    ``"matrix_exp"`` (the default for a square matrix), ``"cayley"`` or ``"householder"``
    (the default otherwise). The weight starts as the orthogonalized original (its QR's Q);
    assigning a matrix orthogonalizes it the same way.

    Examples
    --------
    >>> import gradviz as torch
    >>> layer = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(3, 3))
    >>> W = layer.weight
    >>> torch.allclose(W @ W.T, torch.eye(3), atol=1e-5)
    True
    """

    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} "
                         "dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---- spectral_norm ----------------------------------------------------------------------------

class _SpectralNorm(Module):
    """torch's ``_SpectralNorm``: the weight divided by ``sigma = u . (W v)``, ``u`` and ``v``
    (buffers ``_u``, ``_v``) the singular vectors estimated by power iteration, updated in
    place ``n_power_iterations`` times per forward in training (15 times at registration)."""

    def __init__(self, weight, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            for _ in range(n_power_iterations):
                self._u = F.normalize(ops.mv(weight_mat, self._v), dim=0, eps=self.eps,
                                      out=self._u)
                self._v = F.normalize(ops.mv(weight_mat.H, self._u), dim=0, eps=self.eps,
                                      out=self._v)

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = ops.vdot(u, ops.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim=None):
    """Divide ``module.<name>`` by its spectral norm (largest singular value), estimated by
    power iteration, as ``torch.nn.utils.parametrizations.spectral_norm``; ``dim`` (default
    0, 1 for transposed convolutions) is the output dimension.

    Examples
    --------
    >>> import gradviz as torch
    >>> layer = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(4, 3))
    >>> round(float(torch.linalg.matrix_norm(layer.weight, 2)), 2)
    1.0
    """

    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(module, name,
                                         _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
