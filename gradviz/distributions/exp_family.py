"""``ExponentialFamily``: distributions with density ``h(x) exp(<t(x), theta> - F(theta))``,
whose entropy and same-family KL divergence follow from the log-normalizer ``F`` by autograd."""

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """The base of Normal, Bernoulli, Exponential and Poisson (as in torch). A subclass gives
    ``_natural_params`` (theta), ``_log_normalizer(*theta)`` (F) and ``_mean_carrier_measure``
    (E[log h(x)]); entropy and ``kl_divergence`` within the family then come from the gradient
    of F (a Bregman divergence)."""

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        result = -self._mean_carrier_measure
        params = [p.detach().requires_grad_() for p in self._natural_params]
        log_normalizer = self._log_normalizer(*params)
        gradients = gradviz.autograd.grad(log_normalizer.sum(), params, create_graph=True)
        result = result + log_normalizer
        for param, gradient in zip(params, gradients):
            result = result - (param * gradient).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
