"""Probability distributions with torch's API (``torch.distributions``): sampling,
reparameterized sampling, log-densities, entropies and KL divergences, all differentiable with
gradviz's ops (to any order), for VAEs, policy gradients and mixture models.

Draws come from gradviz's own generator (``gradviz.manual_seed``): their values differ from
torch's; everything else (log_prob, entropy, cdf, kl_divergence, mean, variance, shapes,
validation errors) matches torch.
"""

from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .mixture_same_family import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .poisson import Poisson
from .relaxed_bernoulli import RelaxedBernoulli
from .relaxed_categorical import RelaxedOneHotCategorical
from .transformed_distribution import TransformedDistribution
from .transforms import (AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform,
                         TanhTransform, Transform, identity_transform)
from .uniform import Uniform

# torch's list (the constraints and transforms modules are attributes, as in torch)
__all__ = ["AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "ComposeTransform",
           "Dirichlet", "Distribution", "ExpTransform", "Exponential", "ExponentialFamily",
           "Gamma", "Independent", "Laplace", "LogNormal", "MixtureSameFamily",
           "MultivariateNormal", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
           "Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical", "SigmoidTransform",
           "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "identity_transform",
           "kl_divergence", "register_kl"]
