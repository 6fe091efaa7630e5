"""The Dirichlet distribution over the probability simplex."""

from gradviz.nn.functional import one_hot

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)
from . import constraints
from ._gamma_functions import standard_gamma
from .exp_family import ExponentialFamily

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """``Dirichlet(concentration)``: probability vectors over the last dimension of
    ``concentration``. ``rsample()`` normalizes reparameterized gamma draws, so its gradient
    is an unbiased estimate of torch's (whose per-draw derivative uses another transport).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.distributions import Dirichlet
    >>> Dirichlet(torch.tensor([1.0, 3.0])).mean
    tensor([0.2500, 0.7500])
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = gradviz.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=gradviz.Size()):
        shape = self._extended_shape(sample_shape)
        gammas = standard_gamma(self.concentration.expand(shape))
        return gammas / gammas.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (gradviz.xlogy(self.concentration - 1.0, value).sum(-1)
                + gradviz.lgamma(self.concentration.sum(-1))
                - gradviz.lgamma(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # all concentrations below 1: the mode is the corner of the largest (torch's choice)
        corner = one_hot(mode.argmax(dim=-1), concentrationm1.shape[-1]).to(mode.dtype)
        below_one = (self.concentration < 1).all(dim=-1, keepdim=True)
        return gradviz.where(below_one, corner, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (gradviz.lgamma(self.concentration).sum(-1) - gradviz.lgamma(a0)
                - (k - a0) * gradviz.digamma(a0)
                - ((self.concentration - 1.0) * gradviz.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - gradviz.lgamma(x.sum(-1))
