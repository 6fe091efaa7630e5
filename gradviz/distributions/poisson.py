"""The Poisson distribution."""

import numbers

import numpy as np

from gradviz.ops._creation import _rng

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """``Poisson(rate)``: counts ``k`` with probability ``rate**k exp(-rate) / k!``.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions import Poisson
    >>> Poisson(torch.tensor(2.0)).log_prob(torch.tensor(0.0))
    tensor(-2.)
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = gradviz.Size() if isinstance(rate, numbers.Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = gradviz.Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=gradviz.Size()):
        shape = tuple(self._extended_shape(sample_shape))
        rate = np.broadcast_to(self.rate.detach().numpy(), shape)
        counts = _rng(None).poisson(rate, size=shape)  # gradviz's default stream
        return gradviz.tensor(counts.astype(rate.dtype), dtype=self.rate.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (gradviz.log(self.rate),)

    def _log_normalizer(self, x):
        return gradviz.exp(x)
