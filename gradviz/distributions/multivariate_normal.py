"""The multivariate normal distribution, from a covariance, precision or scale_tril matrix."""

import math

from gradviz.linalg import cholesky

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat, bvec):
    """Matrix-vector products over broadcast batch dimensions."""
    return gradviz.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _tril_inverse(lower):
    """The inverse of a lower-triangular matrix, reading only its lower triangle (as torch's
    ``solve_triangular``: the upper triangle gets no gradient)."""
    return gradviz.inverse(lower.tril())


def _batch_mahalanobis(scale_tril, x):
    """``x^T (L L^T)^-1 x`` over the batch dimensions of ``x`` (``L`` broadcast to them)."""
    solved = _batch_mv(_tril_inverse(scale_tril), x)
    return solved.pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    # as torch: the Cholesky factor of the flipped precision gives the covariance's factor
    flipped = cholesky(gradviz.flip(precision, (-2, -1)))
    lower_inverse = gradviz.flip(flipped, (-2, -1)).transpose(-2, -1)
    return _tril_inverse(lower_inverse)


class MultivariateNormal(Distribution):
    """``MultivariateNormal(loc, covariance_matrix=S)`` (or ``precision_matrix=P``, or
    ``scale_tril=L`` with ``S = L L^T``): the Gaussian over vectors. Everything is computed from
    ``scale_tril`` (the Cholesky factor of ``S``).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions import MultivariateNormal
    >>> d = MultivariateNormal(torch.zeros(2), torch.eye(2))
    >>> d.log_prob(torch.zeros(2))
    tensor(-1.8379)
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if ((covariance_matrix is not None) + (scale_tril is not None)
                + (precision_matrix is not None)) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with "
                                 "optional leading batch dimensions")
            batch_shape = gradviz.broadcast_shapes(scale_tril.shape[:-2], loc.shape[:-1])
            self.scale_tril = scale_tril.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, with "
                                 "optional leading batch dimensions")
            batch_shape = gradviz.broadcast_shapes(covariance_matrix.shape[:-2],
                                                   loc.shape[:-1])
            self.covariance_matrix = covariance_matrix.expand(batch_shape + (-1, -1))
        else:
            if precision_matrix.dim() < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, with "
                                 "optional leading batch dimensions")
            batch_shape = gradviz.broadcast_shapes(precision_matrix.shape[:-2],
                                                   loc.shape[:-1])
            self.precision_matrix = precision_matrix.expand(batch_shape + (-1, -1))
        batch_shape = gradviz.Size(batch_shape)
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = gradviz.Size(batch_shape)
        loc_shape = batch_shape + self.event_shape
        cov_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape,
                                                validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(
            self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        lower = self._unbroadcasted_scale_tril
        return gradviz.matmul(lower, lower.transpose(-2, -1)).expand(
            self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        # torch's cholesky_inverse: (L L^T)^-1, differentiated through the whole of L
        lower = self._unbroadcasted_scale_tril
        return gradviz.inverse(gradviz.matmul(lower, lower.transpose(-2, -1))).expand(
            self._batch_shape + self._event_shape + self._event_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=gradviz.Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        mahalanobis = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return (-0.5 * (self._event_shape[0] * math.log(2 * math.pi) + mahalanobis)
                - self._half_log_det())

    def entropy(self):
        entropy = (0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi))
                   + self._half_log_det())
        if len(self._batch_shape) == 0:
            return entropy
        return entropy.expand(self._batch_shape)
