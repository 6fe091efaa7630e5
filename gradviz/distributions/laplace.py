"""The Laplace (double exponential) distribution."""

import numbers

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Laplace"]


class Laplace(Distribution):
    """``Laplace(loc, scale)``: density ``exp(-|x - loc| / scale) / (2 scale)``.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions import Laplace
    >>> Laplace(0.0, 1.0).entropy()
    tensor(1.6931)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number):
            batch_shape = gradviz.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Laplace, _instance)
        batch_shape = gradviz.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(Laplace, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=gradviz.Size()):
        shape = self._extended_shape(sample_shape)
        eps = gradviz.finfo(self.loc.dtype).eps
        u = self.loc.new_empty(shape).uniform_(eps - 1, 1)  # (-1, 1), never exactly -1
        return self.loc - self.scale * u.sign() * gradviz.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -gradviz.log(2 * self.scale) - gradviz.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * gradviz.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * gradviz.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + gradviz.log(2 * self.scale)
