"""The gamma distribution."""

import numbers

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from . import constraints
from ._gamma_functions import gammainc, standard_gamma
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    """``Gamma(concentration, rate)``: density ``rate^a x^(a-1) exp(-rate x) / Gamma(a)``.

    ``rsample()`` is differentiable in both parameters (the implicit reparameterization of
    the gamma CDF, as torch).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions import Gamma
    >>> Gamma(torch.tensor(2.0), torch.tensor(1.0)).log_prob(torch.tensor(1.0))
    tensor(-1.)
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number):
            batch_shape = gradviz.Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = gradviz.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=gradviz.Size()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        with gradviz.no_grad():  # as torch: clamped away from 0 outside the graph
            value.detach().clamp_(min=gradviz.finfo(value.dtype).tiny)
        return value

    def log_prob(self, value):
        value = gradviz.as_tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (gradviz.xlogy(self.concentration, self.rate)
                + gradviz.xlogy(self.concentration - 1, value)
                - self.rate * value - gradviz.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - gradviz.log(self.rate) + gradviz.lgamma(self.concentration)
                + (1.0 - self.concentration) * gradviz.digamma(self.concentration))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return gradviz.lgamma(x + 1) + (x + 1) * gradviz.log(-y.reciprocal())
