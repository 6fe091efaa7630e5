"""The exponential distribution."""

import numbers

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """``Exponential(rate)``: density ``rate * exp(-rate * x)`` on ``x >= 0``.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions import Exponential
    >>> Exponential(torch.tensor([2.0])).mean
    tensor([0.5000])
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = gradviz.Size() if isinstance(rate, numbers.Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = gradviz.Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Exponential, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return gradviz.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=gradviz.Size()):
        shape = self._extended_shape(sample_shape)
        u = gradviz.rand(shape, dtype=self.rate.dtype)
        return -gradviz.log1p(-u) / self.rate  # Exp(1) draws by inversion, scaled

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - gradviz.exp(-self.rate * value)

    def icdf(self, value):
        return -gradviz.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - gradviz.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -gradviz.log(-x)
