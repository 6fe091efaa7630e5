"""gradviz.distributions against torch.distributions 2.13: on the same parameters, every
quantity that does not depend on random draws (log_prob, entropy, cdf, icdf, mean, mode,
variance, stddev, probs/logits, kl_divergence) in float32 and float64, with first and second
derivatives with respect to the parameters; shapes and dtypes of draws; draws tested
statistically (gradviz's generator is not torch's); the reparameterization gradients of rsample;
validation errors, reprs and expand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gradviz

TOLERANCE = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10)}


def numpy_of(value):
    if isinstance(value, (torch.Tensor, gradviz.Tensor)):
        return value.detach().numpy()
    return np.asarray(value)


def assert_same(gv, th, dtype, what, tolerance=None):
    a, b = numpy_of(gv), numpy_of(th)
    assert a.shape == b.shape, f"{what}: shape {a.shape} (gradviz) vs {b.shape} (torch)"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} (gradviz) vs {b.dtype} (torch)"
    np.testing.assert_allclose(a, b, err_msg=what, equal_nan=True,
                               **(tolerance or TOLERANCE[dtype]))


# torch's float64 trigamma (polygamma(1, x): the derivative of digamma terms, the second
# derivative of lgamma terms) is off by ~5e-10 relative; gradviz's agrees with the series to
# 1e-15. Gradients of the families that use it compare looser in float64.
TRIGAMMA_TOLERANCE = dict(rtol=1e-8, atol=1e-9)


def _uses_trigamma(name):
    return any(family in name for family in ("Gamma", "Beta", "Dirichlet", "Binomial"))


def text(message):
    return message.replace("gradviz", "torch")


# ---- parameters --------------------------------------------------------------------------------

rng = np.random.default_rng(0)
LOC = rng.standard_normal((2, 3))
SCALE = rng.uniform(0.5, 2.0, (2, 3))
VALUE = rng.standard_normal((4, 2, 3))  # a sample dimension in front of the batch shape
QUANTILE = rng.uniform(0.05, 0.95, (4, 2, 3))
PROBS = rng.uniform(0.1, 0.9, (2, 3))
LOGITS = rng.standard_normal((2, 3))
COUNTS = rng.integers(0, 6, (4, 2, 3)).astype(np.float64)
BITS = rng.integers(0, 2, (4, 2, 3)).astype(np.float64)
CLASS_PROBS = rng.uniform(0.1, 1.0, (2, 4))  # unnormalized: Categorical normalizes
CLASS_LOGITS = rng.standard_normal((2, 4))
CLASSES = rng.integers(0, 4, (5, 2)).astype(np.float64)
ONE_HOT = np.eye(4)[rng.integers(0, 4, (5, 2))]
LOW = rng.uniform(-2.0, -1.0, (2, 3))
HIGH = rng.uniform(1.0, 2.0, (2, 3))
INSIDE = rng.uniform(-0.9, 0.9, (4, 2, 3))
POSITIVE = rng.uniform(0.1, 3.0, (4, 2, 3))
_A = rng.standard_normal((3, 3))
COVARIANCE = _A @ _A.T + np.eye(3)
SCALE_TRIL = np.linalg.cholesky(COVARIANCE)
PRECISION = np.linalg.inv(COVARIANCE)
MV_LOC = rng.standard_normal((2, 3))
MV_VALUE = rng.standard_normal((4, 2, 3))
CONCENTRATION = rng.uniform(0.5, 3.0, (2, 3))
UNIT = rng.uniform(0.05, 0.95, (4, 2, 3))
SIMPLEX = UNIT / UNIT.sum(-1, keepdims=True)
SUCCESSES = rng.integers(0, 6, (4, 2, 3)).astype(np.float64)
MIXTURE_VALUE = rng.standard_normal((4, 2))
_U = rng.uniform(0.05, 1.0, (5, 2, 4))
RELAXED_ONE_HOT = _U / _U.sum(-1, keepdims=True)

# name: (build(D, *params), parameter arrays, value for log_prob/cdf, quantiles for icdf)
CASES = {
    "Normal": (lambda D, loc, scale: D.Normal(loc, scale), [LOC, SCALE], VALUE, QUANTILE),
    "Laplace": (lambda D, loc, scale: D.Laplace(loc, scale), [LOC, SCALE], VALUE, QUANTILE),
    "Exponential": (lambda D, rate: D.Exponential(rate), [SCALE], POSITIVE, QUANTILE),
    "Uniform": (lambda D, low, high: D.Uniform(low, high), [LOW, HIGH], INSIDE, QUANTILE),
    "Bernoulli(probs)": (lambda D, p: D.Bernoulli(probs=p), [PROBS], BITS, None),
    "Bernoulli(logits)": (lambda D, l: D.Bernoulli(logits=l), [LOGITS], BITS, None),
    "Categorical(probs)": (lambda D, p: D.Categorical(probs=p), [CLASS_PROBS], CLASSES, None),
    "Categorical(logits)": (lambda D, l: D.Categorical(logits=l), [CLASS_LOGITS], CLASSES,
                            None),
    "OneHotCategorical": (lambda D, l: D.OneHotCategorical(logits=l), [CLASS_LOGITS], ONE_HOT,
                          None),
    "Poisson": (lambda D, rate: D.Poisson(rate), [SCALE], COUNTS, None),
    "Gamma": (lambda D, a, b: D.Gamma(a, b), [CONCENTRATION, SCALE], POSITIVE, None),
    "Beta": (lambda D, a, b: D.Beta(a, b), [CONCENTRATION, SCALE], UNIT, None),
    "Dirichlet": (lambda D, a: D.Dirichlet(a), [CONCENTRATION], SIMPLEX, None),
    "Binomial(probs)": (lambda D, p: D.Binomial(5, probs=p), [PROBS], SUCCESSES, None),
    "Binomial(logits)": (lambda D, l: D.Binomial(5, logits=l), [LOGITS], SUCCESSES, None),
    "MixtureSameFamily": (lambda D, w, loc, scale: D.MixtureSameFamily(
        D.Categorical(logits=w), D.Normal(loc, scale)), [LOGITS, LOC, SCALE], MIXTURE_VALUE,
        None),
    "LogNormal": (lambda D, loc, scale: D.LogNormal(loc, scale), [LOC, SCALE], POSITIVE,
                  QUANTILE),
    "TransformedDistribution(tanh)": (
        lambda D, loc, scale: D.TransformedDistribution(D.Normal(loc, scale),
                                                        [D.TanhTransform()]),
        [LOC, SCALE], INSIDE, QUANTILE),
    "TransformedDistribution(affine, sigmoid)": (
        lambda D, loc, scale: D.TransformedDistribution(
            D.Laplace(loc, 1.0), [D.AffineTransform(0.5, scale), D.SigmoidTransform()]),
        [LOC, SCALE], UNIT, QUANTILE),
    "TransformedDistribution(affine, event_dim=1)": (
        lambda D, loc, scale: D.TransformedDistribution(
            D.Normal(loc, 1.0), [D.AffineTransform(1.0, scale, event_dim=1)]),
        [LOC, SCALE], VALUE, QUANTILE),
    "RelaxedBernoulli": (lambda D, t, p: D.RelaxedBernoulli(t, probs=p),
                         [np.array(0.7), PROBS], UNIT, None),
    "LogitRelaxedBernoulli": (lambda D, t, l: D.relaxed_bernoulli.LogitRelaxedBernoulli(
        t, logits=l),
                              [np.array(0.7), LOGITS], VALUE, None),
    "RelaxedOneHotCategorical": (lambda D, t, l: D.RelaxedOneHotCategorical(t, logits=l),
                                 [np.array(0.6), CLASS_LOGITS], RELAXED_ONE_HOT, None),
    "ExponentialFamily(Normal)": (lambda D, loc, scale: ExpNormal(D)(loc, scale), [LOC, SCALE],
                                  VALUE, None),
    "Independent(Normal)": (lambda D, loc, scale: D.Independent(D.Normal(loc, scale), 1),
                            [LOC, SCALE], VALUE, None),
    "MultivariateNormal(scale_tril)": (
        lambda D, loc, tril: D.MultivariateNormal(loc, scale_tril=tril), [MV_LOC, SCALE_TRIL],
        MV_VALUE, None),
    "MultivariateNormal(covariance)": (
        lambda D, loc, cov: D.MultivariateNormal(loc, covariance_matrix=cov),
        [MV_LOC, COVARIANCE], MV_VALUE, None),
    "MultivariateNormal(precision)": (
        lambda D, loc, prec: D.MultivariateNormal(loc, precision_matrix=prec),
        [MV_LOC, PRECISION], MV_VALUE, None),
}

QUANTITIES = {
    "log_prob": lambda d, value, quantile: d.log_prob(value),
    "entropy": lambda d, value, quantile: d.entropy(),
    "perplexity": lambda d, value, quantile: d.perplexity(),
    "cdf": lambda d, value, quantile: d.cdf(value),
    "icdf": lambda d, value, quantile: d.icdf(quantile),
    "mean": lambda d, value, quantile: d.mean,
    "mode": lambda d, value, quantile: d.mode,
    "variance": lambda d, value, quantile: d.variance,
    "stddev": lambda d, value, quantile: d.stddev,
    "probs": lambda d, value, quantile: d.probs,
    "logits": lambda d, value, quantile: d.logits,
    "covariance_matrix": lambda d, value, quantile: d.covariance_matrix,
    "precision_matrix": lambda d, value, quantile: d.precision_matrix,
    "scale_tril": lambda d, value, quantile: d.scale_tril,
}


# torch cannot differentiate these in every parameter: tested on their own below
SEPARATE = {("Gamma", "cdf")}


def evaluate(lib, case, quantity, dtype, order):
    """``quantity`` of the case's distribution in ``lib``: ("error", type) or the value and
    the first (and second, ``order == 2``) derivatives of a weighted sum of it."""
    build, params, value, quantile = CASES[case]
    D = lib.distributions
    dt = getattr(lib, dtype)
    leaves = [lib.tensor(p, dtype=dt, requires_grad=True) for p in params]
    value = lib.tensor(value, dtype=dt)
    quantile = None if quantile is None else lib.tensor(quantile, dtype=dt)
    try:
        out = QUANTITIES[quantity](build(D, *leaves), value, quantile)
    except (NotImplementedError, AttributeError) as exc:
        return ("error", type(exc).__name__)
    record = {"value": out.detach(), "requires_grad": out.requires_grad}
    if not out.requires_grad:
        return record
    weight = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)), dtype=dt)
    finite = lib.isfinite(out.detach())
    loss = lib.where(finite, out * weight, lib.zeros_like(out)).sum()
    grads = lib.autograd.grad(loss, leaves, create_graph=order == 2, allow_unused=True)
    record["grads"] = grads
    if order == 2:
        second = sum((g * g).sum() for g in grads if g is not None and g.requires_grad)
        if isinstance(second, lib.Tensor):
            record["second"] = lib.autograd.grad(second, leaves, allow_unused=True)
    return record


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("quantity", list(QUANTITIES))
@pytest.mark.parametrize("case", list(CASES))
def test_quantity_and_gradients_match_torch(case, quantity, dtype):
    order = 2 if dtype == "float64" else 1
    if (case, quantity) in SEPARATE:
        return
    expected = evaluate(torch, case, quantity, dtype, order)
    got = evaluate(gradviz, case, quantity, dtype, order)
    if isinstance(expected, tuple):
        assert got == expected, f"{case}.{quantity}: torch raised {expected}, gradviz gave {got}"
        return
    assert not isinstance(got, tuple), f"{case}.{quantity}: gradviz raised {got[1]}"
    what = f"{case}.{quantity} ({dtype})"
    assert_same(got["value"], expected["value"], dtype, what)
    assert got["requires_grad"] == expected["requires_grad"], what
    for key in ("grads", "second"):
        assert (key in got) == (key in expected), f"{what}: {key}"
        for i, (g, t) in enumerate(zip(got.get(key, ()), expected.get(key, ()))):
            if t is None:
                assert g is None or not np.any(numpy_of(g)), f"{what}: {key}[{i}]"
            else:
                assert g is not None, f"{what}: {key}[{i}] is None in gradviz"
                loose = dtype == "float64" and _uses_trigamma(case)
                assert_same(g, t, dtype, f"{what}: {key}[{i}]",
                            TRIGAMMA_TOLERANCE if loose else None)


# ---- kl_divergence -----------------------------------------------------------------------------

LOC_Q = rng.standard_normal((2, 3))
SCALE_Q = rng.uniform(0.5, 2.0, (2, 3))
_B = rng.standard_normal((3, 3))
SCALE_TRIL_Q = np.linalg.cholesky(_B @ _B.T + np.eye(3))

KL_PAIRS = {
    "Normal-Normal": (lambda D, a, b, c, d: (D.Normal(a, b), D.Normal(c, d)),
                      [LOC, SCALE, LOC_Q, SCALE_Q]),
    "Laplace-Laplace": (lambda D, a, b, c, d: (D.Laplace(a, b), D.Laplace(c, d)),
                        [LOC, SCALE, LOC_Q, SCALE_Q]),
    "Exponential-Exponential": (lambda D, a, b: (D.Exponential(a), D.Exponential(b)),
                                [SCALE, SCALE_Q]),
    "Uniform-Uniform": (lambda D, a, b: (D.Uniform(a * 0.5, b * 0.5), D.Uniform(a, b)),
                        [LOW, HIGH]),
    "Uniform-Uniform(infinite)": (lambda D, a, b: (D.Uniform(a, b), D.Uniform(a * 0.5, b)),
                                  [LOW, HIGH]),
    "Bernoulli-Bernoulli": (lambda D, p, l: (D.Bernoulli(probs=p), D.Bernoulli(logits=l)),
                            [PROBS, LOGITS]),
    "Categorical-Categorical": (
        lambda D, p, l: (D.Categorical(probs=p), D.Categorical(logits=l)),
        [CLASS_PROBS, CLASS_LOGITS]),
    "OneHotCategorical-OneHotCategorical": (
        lambda D, p, l: (D.OneHotCategorical(probs=p), D.OneHotCategorical(logits=l)),
        [CLASS_PROBS, CLASS_LOGITS]),
    "Poisson-Poisson": (lambda D, a, b: (D.Poisson(a), D.Poisson(b)), [SCALE, SCALE_Q]),
    "Independent-Independent": (
        lambda D, a, b, c, d: (D.Independent(D.Normal(a, b), 1),
                               D.Independent(D.Normal(c, d), 1)),
        [LOC, SCALE, LOC_Q, SCALE_Q]),
    "MultivariateNormal-MultivariateNormal": (
        lambda D, a, b, c, d: (D.MultivariateNormal(a, scale_tril=b),
                               D.MultivariateNormal(c, scale_tril=d)),
        [MV_LOC, SCALE_TRIL, LOC_Q, SCALE_TRIL_Q]),
    "MultivariateNormal(cov)-MultivariateNormal": (
        lambda D, a, b, c, d: (D.MultivariateNormal(a, covariance_matrix=b),
                               D.MultivariateNormal(c, scale_tril=d)),
        [MV_LOC, COVARIANCE, LOC_Q, SCALE_TRIL_Q]),
    "Normal-Laplace": (lambda D, a, b, c, d: (D.Normal(a, b), D.Laplace(c, d)),
                       [LOC, SCALE, LOC_Q, SCALE_Q]),
    "Laplace-Normal": (lambda D, a, b, c, d: (D.Laplace(a, b), D.Normal(c, d)),
                       [LOC, SCALE, LOC_Q, SCALE_Q]),
    "Exponential-Normal": (lambda D, a, c, d: (D.Exponential(a), D.Normal(c, d)),
                           [SCALE, LOC_Q, SCALE_Q]),
    "Uniform-Normal": (lambda D, a, b, c, d: (D.Uniform(a, b), D.Normal(c, d)),
                       [LOW, HIGH, LOC_Q, SCALE_Q]),
    "Uniform-Exponential": (lambda D, a, b, c: (D.Uniform(a + 3, b + 3), D.Exponential(c)),
                            [LOW, HIGH, SCALE_Q]),
    "Normal-Uniform": (lambda D, a, b, c, d: (D.Normal(a, b), D.Uniform(c, d)),
                       [LOC, SCALE, LOW, HIGH]),
    "Bernoulli-Poisson": (lambda D, p, r: (D.Bernoulli(probs=p), D.Poisson(r)),
                          [PROBS, SCALE_Q]),
    "Poisson-Bernoulli": (lambda D, r, p: (D.Poisson(r), D.Bernoulli(probs=p)),
                          [SCALE, PROBS]),
    "Poisson-Binomial": (lambda D, r, p: (D.Poisson(r), D.Binomial(3, p)), [SCALE, PROBS]),
    "LogNormal-LogNormal": (lambda D, a, b, c, d: (D.LogNormal(a, b), D.LogNormal(c, d)),
                            [LOC, SCALE, LOC_Q, SCALE_Q]),
    "Transformed(tanh)-Transformed(tanh)": (
        lambda D, a, b, c, d: (D.TransformedDistribution(D.Normal(a, b), D.TanhTransform()),
                               D.TransformedDistribution(D.Normal(c, d), D.TanhTransform())),
        [LOC, SCALE, LOC_Q, SCALE_Q]),
    "Gamma-Gamma": (lambda D, a, b, c, d: (D.Gamma(a, b), D.Gamma(c, d)),
                    [CONCENTRATION, SCALE, SCALE_Q, SCALE]),
    "Beta-Beta": (lambda D, a, b, c, d: (D.Beta(a, b), D.Beta(c, d)),
                  [CONCENTRATION, SCALE, SCALE_Q, SCALE]),
    "Dirichlet-Dirichlet": (lambda D, a, b: (D.Dirichlet(a), D.Dirichlet(b)),
                            [CONCENTRATION, SCALE_Q]),
    "Binomial-Binomial": (lambda D, p, l: (D.Binomial(4, p), D.Binomial(4, logits=l)),
                          [PROBS, LOGITS]),
    "Binomial-Binomial(infinite)": (
        lambda D, p, l: (D.Binomial(torch_like(D).tensor([[5.0], [4.0]]), p),
                         D.Binomial(4, logits=l)), [PROBS, LOGITS]),
    "Beta-Exponential": (lambda D, a, b, c: (D.Beta(a, b), D.Exponential(c)),
                         [CONCENTRATION, SCALE, SCALE_Q]),
    "Beta-Gamma": (lambda D, a, b, c, d: (D.Beta(a, b), D.Gamma(c, d)),
                   [CONCENTRATION, SCALE, SCALE_Q, SCALE]),
    "Beta-Normal": (lambda D, a, b, c, d: (D.Beta(a, b), D.Normal(c, d)),
                    [CONCENTRATION, SCALE, LOC_Q, SCALE_Q]),
    "Beta-Uniform": (lambda D, a, b, c, d: (D.Beta(a, b), D.Uniform(c, d)),
                     [CONCENTRATION, SCALE, LOW, HIGH]),
    "Exponential-Gamma": (lambda D, a, c, d: (D.Exponential(a), D.Gamma(c, d)),
                          [SCALE, CONCENTRATION, SCALE_Q]),
    "Gamma-Exponential": (lambda D, a, b, c: (D.Gamma(a, b), D.Exponential(c)),
                          [CONCENTRATION, SCALE, SCALE_Q]),
    "Gamma-Normal": (lambda D, a, b, c, d: (D.Gamma(a, b), D.Normal(c, d)),
                     [CONCENTRATION, SCALE, LOC_Q, SCALE_Q]),
    "Gamma-Uniform": (lambda D, a, b, c, d: (D.Gamma(a, b), D.Uniform(c, d)),
                      [CONCENTRATION, SCALE, LOW, HIGH]),
    "Uniform-Beta": (lambda D, a, b, c, d: (D.Uniform(a * 0.1 + 0.5, b * 0.1 + 0.5),
                                            D.Beta(c, d)), [LOW, HIGH, CONCENTRATION, SCALE]),
    "Laplace-Gamma": (lambda D, a, b, c, d: (D.Laplace(a, b), D.Gamma(c, d)),
                      [LOC, SCALE, CONCENTRATION, SCALE_Q]),
    "Normal-Beta": (lambda D, a, b, c, d: (D.Normal(a, b), D.Beta(c, d)),
                    [LOC, SCALE, CONCENTRATION, SCALE_Q]),
    # no formula registered: the Bregman divergence of the log-normalizer, by autograd
    "ExponentialFamily(Normal)": (
        lambda D, a, b, c, d: (ExpNormal(D)(a, b), ExpNormal(D)(c, d)),
        [LOC, SCALE, LOC_Q, SCALE_Q]),
}


def torch_like(D):
    """The library a distributions module belongs to."""
    return torch if D is torch.distributions else gradviz


_EXP_NORMALS = {}


def ExpNormal(D):  # noqa: N802 - a class factory
    """A Normal subclass that torch and gradviz dispatch to the ExponentialFamily pair."""
    if D not in _EXP_NORMALS:
        def __init__(self, loc, scale):
            self.loc, self.scale = D.utils.broadcast_all(loc, scale)
            D.ExponentialFamily.__init__(self, self.loc.shape)

        borrowed = ("arg_constraints", "support", "_natural_params", "_log_normalizer",
                    "_mean_carrier_measure")
        _EXP_NORMALS[D] = type("ExpNormal", (D.ExponentialFamily,),
                               {"__init__": __init__,
                                **{name: vars(D.Normal)[name] for name in borrowed}})
    return _EXP_NORMALS[D]


def kl_of(lib, pair, dtype, order):
    build, params = KL_PAIRS[pair]
    dt = getattr(lib, dtype)
    leaves = [lib.tensor(p, dtype=dt, requires_grad=True) for p in params]
    out = lib.distributions.kl_divergence(*build(lib.distributions, *leaves))
    record = {"value": out.detach()}
    if out.requires_grad:
        weight = lib.tensor(np.random.default_rng(2).standard_normal(tuple(out.shape)), dtype=dt)
        loss = lib.where(lib.isfinite(out.detach()), out * weight, lib.zeros_like(out)).sum()
        grads = lib.autograd.grad(loss, leaves, create_graph=order == 2, allow_unused=True)
        record["grads"] = grads
        if order == 2:
            second = sum((g * g).sum() for g in grads if g is not None and g.requires_grad)
            if isinstance(second, lib.Tensor):
                record["second"] = lib.autograd.grad(second, leaves, allow_unused=True)
    return record


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("pair", list(KL_PAIRS))
def test_kl_divergence_matches_torch(pair, dtype):
    order = 2 if dtype == "float64" else 1
    expected, got = kl_of(torch, pair, dtype, order), kl_of(gradviz, pair, dtype, order)
    assert_same(got["value"], expected["value"], dtype, pair)
    for key in ("grads", "second"):
        assert (key in got) == (key in expected), f"{pair}: {key}"
        for i, (g, t) in enumerate(zip(got.get(key, ()), expected.get(key, ()))):
            if t is None:
                assert g is None or not np.any(numpy_of(g)), f"{pair}: {key}[{i}]"
            else:
                loose = dtype == "float64" and _uses_trigamma(pair)
                assert_same(g, t, dtype, f"{pair}: {key}[{i}]",
                            TRIGAMMA_TOLERANCE if loose else None)


@pytest.mark.parametrize("p, q", [("Normal(0., 1.)", "Bernoulli(probs=0.5)"),
                                  ("Categorical(logits=torch.zeros(3))", "Normal(0., 1.)"),
                                  ("Exponential(1.)", "Laplace(0., 1.)"),
                                  ("Poisson(1.)", "Exponential(1.)"),
                                  ("Dirichlet(torch.ones(2))", "Beta(1., 1.)"),
                                  ("Binomial(2, torch.tensor(0.5))", "Poisson(1.)"),
                                  ("LogNormal(0., 1.)",
                                   "TransformedDistribution(Normal(0., 1.), TanhTransform())"),
                                  ("MultivariateNormal(torch.zeros(2), torch.eye(2))",
                                   "Independent(Normal(torch.zeros(2), 1.), 1)")])
def test_kl_divergence_of_an_unregistered_pair_raises_like_torch(p, q):
    messages = []
    for lib in (torch, gradviz):
        D = lib.distributions
        scope = {"torch": lib, **{name: getattr(D, name) for name in D.__all__}}
        with pytest.raises(NotImplementedError) as info:
            D.kl_divergence(eval(p, scope), eval(q, scope))
        messages.append(" ".join(str(info.value).split()))  # torch's has a run of spaces
    assert text(messages[1]) == messages[0]


def test_register_kl_takes_the_most_specific_pair():
    D = gradviz.distributions

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl_mine(p, q):
        return gradviz.full(p.batch_shape, 7.0)

    try:
        assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 2.0)).item() == 7.0
        expected = torch.distributions.kl_divergence(torch.distributions.Normal(0.0, 1.0),
                                                     torch.distributions.Normal(0.0, 2.0))
        got = D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 2.0))
        assert_same(got, expected, "float32", "Normal-Normal after registering a subclass")
    finally:
        del D.kl._KL_REGISTRY[MyNormal, D.Normal]
        D.kl._KL_MEMOIZE.clear()
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(int, D.Normal)


# ---- draws -----------------------------------------------------------------------------------

SAMPLED = {
    "Normal": lambda lib: lib.distributions.Normal(lib.tensor(LOC), lib.tensor(SCALE)),
    "Normal(scalars)": lambda lib: lib.distributions.Normal(0.0, 1.0),
    "Laplace": lambda lib: lib.distributions.Laplace(lib.tensor(LOC), lib.tensor(SCALE)),
    "Exponential": lambda lib: lib.distributions.Exponential(lib.tensor(SCALE)),
    "Uniform": lambda lib: lib.distributions.Uniform(lib.tensor(LOW), lib.tensor(HIGH)),
    "Bernoulli": lambda lib: lib.distributions.Bernoulli(lib.tensor(PROBS)),
    "Categorical": lambda lib: lib.distributions.Categorical(lib.tensor(CLASS_PROBS)),
    "Categorical(1d)": lambda lib: lib.distributions.Categorical(
        logits=lib.tensor([0.1, 0.2, 0.3])),
    "OneHotCategorical": lambda lib: lib.distributions.OneHotCategorical(
        lib.tensor(CLASS_PROBS)),
    "Poisson": lambda lib: lib.distributions.Poisson(lib.tensor(SCALE)),
    "Independent": lambda lib: lib.distributions.Independent(
        lib.distributions.Normal(lib.tensor(LOC), lib.tensor(SCALE)), 2),
    "MultivariateNormal": lambda lib: lib.distributions.MultivariateNormal(
        lib.tensor(MV_LOC), lib.tensor(COVARIANCE)),
    "Gamma": lambda lib: lib.distributions.Gamma(lib.tensor(CONCENTRATION), lib.tensor(SCALE)),
    "Beta": lambda lib: lib.distributions.Beta(lib.tensor(CONCENTRATION), lib.tensor(SCALE)),
    "Dirichlet": lambda lib: lib.distributions.Dirichlet(lib.tensor(CONCENTRATION)),
    "Binomial": lambda lib: lib.distributions.Binomial(lib.tensor([[3.0], [7.0]]),
                                                       lib.tensor(PROBS)),
    "MixtureSameFamily": lambda lib: lib.distributions.MixtureSameFamily(
        lib.distributions.Categorical(logits=lib.tensor(LOGITS)),
        lib.distributions.Normal(lib.tensor(LOC), lib.tensor(SCALE))),
    "LogNormal": lambda lib: lib.distributions.LogNormal(lib.tensor(LOC) * 0.3,
                                                         lib.tensor(SCALE) * 0.3),
    "TransformedDistribution": lambda lib: lib.distributions.TransformedDistribution(
        lib.distributions.Normal(lib.tensor(LOC), lib.tensor(SCALE)),
        [lib.distributions.AffineTransform(1.0, 2.0)]),
    "RelaxedBernoulli": lambda lib: lib.distributions.RelaxedBernoulli(
        lib.tensor(0.5), probs=lib.tensor(PROBS)),
    "RelaxedOneHotCategorical": lambda lib: lib.distributions.RelaxedOneHotCategorical(
        lib.tensor(0.5), logits=lib.tensor(CLASS_LOGITS)),
    "OneHotCategoricalStraightThrough": lambda lib: (
        lib.distributions.OneHotCategoricalStraightThrough(lib.tensor(CLASS_PROBS))),
}



@pytest.mark.parametrize("sample_shape", [(), (5,), (2, 3)])
@pytest.mark.parametrize("name", list(SAMPLED))
def test_draws_have_torchs_shapes_and_dtypes(name, sample_shape):
    expected, got = SAMPLED[name](torch), SAMPLED[name](gradviz)
    assert tuple(got.batch_shape) == tuple(expected.batch_shape)
    assert tuple(got.event_shape) == tuple(expected.event_shape)
    assert got.has_rsample == expected.has_rsample
    methods = ["sample"] + (["rsample"] if got.has_rsample else [])
    for method in methods:
        t = getattr(expected, method)(sample_shape)
        g = getattr(got, method)(sample_shape)
        assert tuple(g.shape) == tuple(t.shape), f"{name}.{method}{sample_shape}"
        assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], name
        assert g.requires_grad == t.requires_grad == False  # noqa: E712 (no parameter needs grad)
    if not got.has_rsample:
        with pytest.raises(NotImplementedError):
            got.rsample()


# no closed-form mean/variance in torch (NotImplementedError)
NO_MOMENTS = {"Categorical(1d)", "RelaxedBernoulli", "RelaxedOneHotCategorical",
              "TransformedDistribution"}


@pytest.mark.parametrize("name", [n for n in SAMPLED if n not in NO_MOMENTS])
def test_draws_have_the_distributions_mean_and_variance(name):
    """20000 draws (a fixed seed): their mean and variance agree with the distribution's
    (torch's) to within 5 standard errors."""
    gradviz.manual_seed(1234)
    dist = SAMPLED[name](gradviz)
    reference = SAMPLED[name](torch)
    draws = dist.sample((20000,)).numpy().astype(np.float64)
    mean, variance = reference.mean.numpy(), reference.variance.numpy()
    if name.startswith("Categorical"):  # mean/variance are NaN: compare frequencies
        probs = reference.probs.numpy()
        frequencies = np.stack([(draws == k).mean(0) for k in range(probs.shape[-1])], -1)
        np.testing.assert_allclose(frequencies, probs, atol=5 * 0.5 / math.sqrt(20000))
        return
    standard_error = np.sqrt(variance / 20000)
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * standard_error + 1e-12), name
    fourth = np.mean((draws - draws.mean(0)) ** 4, axis=0)
    assert np.all(np.abs(draws.var(0) - variance)
                  < 5 * np.sqrt((fourth - variance ** 2) / 20000) + 1e-12), name


def test_multivariate_normal_draws_have_the_covariance():
    gradviz.manual_seed(5)
    d = gradviz.distributions.MultivariateNormal(gradviz.tensor(MV_LOC[0]),
                                                 gradviz.tensor(COVARIANCE))
    draws = d.sample((40000,)).numpy()
    np.testing.assert_allclose(np.cov(draws.T), COVARIANCE, atol=0.1 * np.abs(COVARIANCE).max())


def test_sample_is_reproducible_with_manual_seed_and_outside_the_graph():
    loc = gradviz.tensor([0.0, 1.0], requires_grad=True)
    d = gradviz.distributions.Normal(loc, 1.0)
    gradviz.manual_seed(3)
    first = d.sample((3,))
    gradviz.manual_seed(3)
    second = d.sample((3,))
    assert gradviz.equal(first, second)
    assert not first.requires_grad and first.grad_fn is None
    assert d.rsample().requires_grad


# ---- the reparameterization -----------------------------------------------------------------

def _grads(out, leaves):
    return gradviz.autograd.grad(out.sum(), leaves)


def test_normal_rsample_gradient_is_one_for_loc_and_eps_for_scale():
    loc = gradviz.tensor([0.5, -1.0], requires_grad=True)
    scale = gradviz.tensor([2.0, 0.5], requires_grad=True)
    gradviz.manual_seed(11)
    x = gradviz.distributions.Normal(loc, scale).rsample((7,))
    gradviz.manual_seed(11)
    eps = gradviz.randn(7, 2)  # the same noise: rsample is loc + eps * scale
    np.testing.assert_allclose(x.detach().numpy(), (loc + eps * scale).detach().numpy())
    d_loc, d_scale = _grads(x, [loc, scale])
    np.testing.assert_allclose(d_loc.numpy(), [7.0, 7.0])
    np.testing.assert_allclose(d_scale.numpy(), eps.sum(0).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["Laplace", "Exponential", "Uniform", "MultivariateNormal"])
def test_rsample_gradients_are_those_of_the_reparameterization(name):
    """The derivative of a draw with respect to each parameter, at the draw's own noise."""
    D = gradviz.distributions
    gradviz.manual_seed(4)
    if name == "Laplace":
        loc, scale = (gradviz.tensor(v, requires_grad=True) for v in (LOC, SCALE))
        x = D.Laplace(loc, scale).rsample((5,))
        noise = ((x - loc) / scale).detach()
        expected = [np.full(LOC.shape, 5.0), noise.sum(0).numpy()]
        leaves = [loc, scale]
    elif name == "Exponential":
        rate = gradviz.tensor(SCALE, requires_grad=True)
        x = D.Exponential(rate).rsample((5,))
        expected = [(-x / rate).detach().sum(0).numpy()]
        leaves = [rate]
    elif name == "Uniform":
        low, high = (gradviz.tensor(v, requires_grad=True) for v in (LOW, HIGH))
        x = D.Uniform(low, high).rsample((5,))
        u = ((x - low) / (high - low)).detach()
        expected = [(1 - u).sum(0).numpy(), u.sum(0).numpy()]
        leaves = [low, high]
    else:
        loc, tril = (gradviz.tensor(v, requires_grad=True) for v in (MV_LOC[0], SCALE_TRIL))
        x = D.MultivariateNormal(loc, scale_tril=tril).rsample((5,))
        eps = np.linalg.solve(SCALE_TRIL, (x - loc).detach().numpy().T).T
        expected = [np.full(3, 5.0), np.ones((5, 3)).T @ eps]  # d sum(L eps) / dL_ij = sum eps_j
        leaves = [loc, tril]
    for got, want in zip(_grads(x, leaves), expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-9)


def test_straight_through_rsample_is_one_hot_with_the_gradient_of_probs():
    logits = gradviz.tensor(CLASS_LOGITS, requires_grad=True)
    d = gradviz.distributions.OneHotCategoricalStraightThrough(logits=logits)
    draw = d.rsample((3,))
    np.testing.assert_array_equal(draw.detach().numpy().sum(-1), np.ones((3, 2)))
    weight = gradviz.tensor(np.arange(24.0).reshape(3, 2, 4))
    (got,) = gradviz.autograd.grad((draw * weight).sum(), logits)
    t_logits = torch.tensor(CLASS_LOGITS, requires_grad=True)
    probs = torch.softmax(t_logits, -1)
    (expected,) = torch.autograd.grad((probs * torch.tensor(np.arange(24.0).reshape(3, 2, 4))
                                       ).sum(), t_logits)
    assert_same(got, expected, "float64", "straight-through gradient")


def test_standard_gamma_derivative_matches_torchs():
    """dx/dalpha of a Gamma(alpha, 1) draw x, against torch's ``_standard_gamma_grad`` on the
    same (alpha, x) pairs (torch's is an approximation good to ~5e-4 relative)."""
    from gradviz.distributions._gamma_functions import standard_gamma_grad

    draws = np.random.default_rng(3)
    alpha = np.concatenate([draws.uniform(0.05, 1.0, 300), draws.uniform(1.0, 50.0, 300),
                            [0.01, 200.0, 1000.0]])
    x = draws.gamma(alpha)
    for dtype in ("float32", "float64"):
        got = standard_gamma_grad(gradviz.tensor(alpha, dtype=getattr(gradviz, dtype)),
                                  gradviz.tensor(x, dtype=getattr(gradviz, dtype)))
        expected = torch._standard_gamma_grad(torch.tensor(alpha, dtype=getattr(torch, dtype)),
                                              torch.tensor(x, dtype=getattr(torch, dtype)))
        assert str(got.dtype) == f"gradviz.{dtype}"
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-3, atol=1e-30)


@pytest.mark.parametrize("name", ["Gamma", "Beta", "Dirichlet"])
def test_gamma_family_rsample_gradients_are_unbiased(name):
    """E[d f(x) / d theta] = d E[f(x)] / d theta for draws x = rsample(): with f(x) = x and
    x^2 the right-hand side is the derivative of the (torch-checked) mean and second moment."""
    D = gradviz.distributions
    a = gradviz.tensor([0.7, 3.0], dtype=gradviz.float64, requires_grad=True)
    b = gradviz.tensor([1.5, 0.5], dtype=gradviz.float64, requires_grad=True)
    build = {"Gamma": lambda: D.Gamma(a, b), "Beta": lambda: D.Beta(a, b),
             "Dirichlet": lambda: D.Dirichlet(gradviz.stack([a, b], -1))}[name]
    gradviz.manual_seed(17)
    n = 40000
    x = build().rsample((n,))
    moments = (x.sum() / n, (x * x).sum() / n)
    d = build()
    exact = (d.mean.sum(), (d.variance + d.mean ** 2).sum())
    for estimate, truth in zip(moments, exact):
        grads = gradviz.autograd.grad(estimate, [a, b], retain_graph=True)
        want = gradviz.autograd.grad(truth, [a, b], retain_graph=True)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=0.05, atol=0.02)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma_cdf_matches_torch_and_differentiates_in_the_rate_only(dtype):
    results = []
    for lib in (torch, gradviz):
        dt = getattr(lib, dtype)
        concentration = lib.tensor(CONCENTRATION * 10, dtype=dt)
        rate = lib.tensor(SCALE, dtype=dt, requires_grad=True)
        value = lib.tensor(POSITIVE * 5, dtype=dt)
        cdf = lib.distributions.Gamma(concentration, rate).cdf(value)
        (d_rate,) = lib.autograd.grad((cdf * cdf).sum(), rate, create_graph=True)
        (dd_rate,) = lib.autograd.grad((d_rate * d_rate).sum(), rate)
        concentration.requires_grad_()
        with pytest.raises(NotImplementedError) as info:
            lib.distributions.Gamma(concentration, rate).cdf(value).sum().backward()
        results.append((cdf, d_rate, dd_rate, str(info.value), cdf.grad_fn.name()))
    for i, (t, g) in enumerate(zip(*results)):
        if isinstance(t, str):
            assert g == t
        else:
            assert_same(g, t, dtype, f"Gamma.cdf [{i}]",
                        dict(rtol=1e-8, atol=1e-10) if dtype == "float64" else None)


def test_gamma_rsample_has_no_second_derivative_like_torch():
    for lib in (torch, gradviz):
        a = lib.tensor([2.0], requires_grad=True)
        (g,) = lib.autograd.grad(lib.distributions.Gamma(a, 1.0).rsample().sum(), a,
                                 create_graph=True)
        with pytest.raises(NotImplementedError, match="_standard_gamma_grad"):
            lib.autograd.grad(g.sum(), a)


# ---- validation, errors, reprs --------------------------------------------------------------

INVALID = [
    "Normal(0., -1.)",
    "Normal(torch.zeros(2), torch.tensor([1., -1.]))",
    "Normal(torch.tensor([0., float('nan')]), 1.)",
    "Bernoulli(probs=torch.tensor([0.5, 1.5]))",
    "Bernoulli(probs=0.3, logits=0.1)",
    "Bernoulli()",
    "Categorical(probs=torch.tensor([0.5, -0.1, 0.6]))",
    "Categorical(probs=torch.tensor(0.5))",
    "Categorical(logits=torch.tensor(0.5))",
    "Uniform(1., 0.)",
    "Exponential(torch.tensor([1., 0.]))",
    "Laplace(0., 0.)",
    "Poisson(torch.tensor([-1.]))",
    "MultivariateNormal(torch.zeros(2), torch.tensor([[1., 2.], [2., 1.]]))",
    "MultivariateNormal(torch.zeros(2), torch.tensor([[1., 0.5], [0., 1.]]))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1., 0.5], [0., 1.]]))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1., 0.], [0.5, -1.]]))",
    "MultivariateNormal(torch.zeros(2))",
    "MultivariateNormal(torch.tensor(0.), torch.eye(1))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.ones(2))",
    "Independent(Normal(torch.zeros(3), 1.), 2)",
    "Normal(0., 1.).log_prob(torch.zeros(2, 1)).shape and Normal(torch.zeros(3), 1.).log_prob(torch.zeros(2))",
    "Bernoulli(0.5).log_prob(torch.tensor(0.5))",
    "Categorical(logits=torch.zeros(3)).log_prob(torch.tensor([3]))",
    "Exponential(1.).log_prob(torch.tensor(-1.))",
    "Uniform(0., 1.).log_prob(torch.tensor(2.))",
    "MultivariateNormal(torch.zeros(2), torch.eye(2)).log_prob(torch.zeros(3))",
    "Normal(0., 1.).log_prob(0.5)",
    "Distribution(validate_args=False).mode",
    "MultivariateNormal(torch.zeros(2), torch.tensor([[1., 2.], [2., 1.]]), validate_args=False)",
    "MultivariateNormal(torch.zeros(2, 2), torch.tensor([[[1., 0.], [0., 1.]], [[1., 2.], [2., 1.]]]), validate_args=False)",
    "Bernoulli(0.5).rsample()",
    "Normal(0., 1.).expand((2,)).enumerate_support()",
    "Independent(Bernoulli(torch.ones(2) * 0.5), 1).enumerate_support()",
]


def _evaluate(lib, expression):
    D = lib.distributions
    scope = {"torch": lib, **{name: getattr(D, name) for name in D.__all__}}
    try:
        eval(expression, scope)
    except Exception as exc:  # noqa: BLE001 - compared with torch's
        return type(exc).__name__, text(str(exc))
    return None


@pytest.mark.parametrize("expression", INVALID)
def test_errors_match_torchs_type_and_message(expression):
    expected, got = _evaluate(torch, expression), _evaluate(gradviz, expression)
    assert expected is not None, f"torch accepts {expression}"
    assert got is not None, f"gradviz accepts {expression}; torch raised {expected}"
    assert got[0] == expected[0], f"{expression}: gradviz {got} vs torch {expected}"
    if expected[0] in ("ValueError", "_LinAlgError", "LinAlgError") and expected[1]:
        assert got[1] == expected[1]


def test_validation_can_be_turned_off_like_torch():
    D = gradviz.distributions
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    D.Distribution.set_default_validate_args(False)
    try:
        torch.distributions.Distribution.set_default_validate_args(False)
        got = D.Bernoulli(probs=gradviz.tensor(1.5)).log_prob(gradviz.tensor(0.25))
        expected = torch.distributions.Bernoulli(probs=torch.tensor(1.5)).log_prob(
            torch.tensor(0.25))
        assert_same(got, expected, "float32", "unvalidated Bernoulli.log_prob")
    finally:
        D.Distribution.set_default_validate_args(True)
        torch.distributions.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


REPRS = [
    "Normal(0., 1.)",
    "Normal(torch.zeros(2, 3), 1.)",
    "Bernoulli(logits=torch.tensor([0.3]))",
    "Categorical(probs=torch.ones(4))",
    "OneHotCategorical(logits=torch.zeros(2, 3))",
    "Uniform(-1., 1.)",
    "Exponential(torch.tensor(2.))",
    "Laplace(0., 2.)",
    "Poisson(3.)",
    "Independent(Normal(torch.zeros(2, 3), 1.), 1)",
    "MultivariateNormal(torch.zeros(2), torch.eye(2))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.eye(2))",
    "Normal(0., 1.).support",
    "Uniform(0., 1.).support",
    "Categorical(logits=torch.zeros(3)).support",
    "Independent(Normal(torch.zeros(2, 3), 1.), 1).support",
    "Normal(0., 1.).arg_constraints",
    "MultivariateNormal(torch.zeros(2), torch.eye(2)).arg_constraints",
    "Bernoulli(0.3).arg_constraints",
    "Categorical(logits=torch.zeros(3)).arg_constraints",
    "LogNormal(0., 1.)",
    "TransformedDistribution(Normal(0., 1.), [TanhTransform()])",
    "TransformedDistribution(Normal(0., 1.), [TanhTransform()]).support",
    "RelaxedBernoulli(torch.tensor(0.5), logits=torch.zeros(2))",
    "RelaxedOneHotCategorical(torch.tensor(0.5), logits=torch.zeros(2))",
    "ComposeTransform([ExpTransform(), AffineTransform(1., 2.)])",
    "ExpTransform().inv",
    "TanhTransform().codomain",
    "[ExpTransform() == ExpTransform(), ExpTransform().inv == ExpTransform().inv, "
    "AffineTransform(1., 2.) == AffineTransform(1., 2.), AffineTransform(1., 2.).sign]",
]


@pytest.mark.parametrize("expression", REPRS)
def test_reprs_match_torch(expression):
    D = torch.distributions
    expected = repr(eval(expression, {"torch": torch, **{n: getattr(D, n) for n in D.__all__}}))
    G = gradviz.distributions
    got = repr(eval(expression, {"torch": gradviz, **{n: getattr(G, n) for n in G.__all__}}))
    assert text(got) == expected


EXPANDED = [
    ("Normal(torch.zeros(3), torch.ones(3) * 2)", (4, 3), "torch.ones(4, 3)"),
    ("Bernoulli(logits=torch.tensor([0.3]))", (2, 1), "torch.ones(2, 1)"),
    ("Categorical(logits=torch.tensor([0.1, 0.2, 0.7]))", (5,), "torch.tensor([0, 1, 2, 2, 1])"),
    ("OneHotCategorical(probs=torch.tensor([0.1, 0.2, 0.7]))", (2,), "torch.eye(3)[:2]"),
    ("Uniform(0., 2.)", (3,), "torch.ones(3)"),
    ("Exponential(torch.tensor([2.]))", (2, 1), "torch.ones(2, 1)"),
    ("Laplace(0., 2.)", (2,), "torch.ones(2)"),
    ("Poisson(torch.tensor([2.]))", (3,), "torch.arange(3.)"),
    ("Independent(Normal(torch.zeros(3), 1.), 1)", (2,), "torch.ones(2, 3)"),
    ("MultivariateNormal(torch.zeros(2), torch.tensor([[2., 0.5], [0.5, 1.]]))", (3,),
     "torch.ones(3, 2)"),
    ("LogNormal(torch.zeros(1), 1.)", (2, 3), "torch.ones(2, 3)"),
    ("Gamma(torch.tensor([2.]), 1.)", (3,), "torch.ones(3)"),
    ("Beta(torch.tensor([2.]), 3.)", (3,), "torch.ones(3) * 0.5"),
    ("Dirichlet(torch.ones(3))", (2,), "torch.ones(3) / 3"),
    ("Binomial(3, torch.tensor([0.5]))", (2,), "torch.ones(2)"),
    ("MixtureSameFamily(Categorical(logits=torch.zeros(2)), Normal(torch.zeros(2), 1.))", (3,),
     "torch.ones(3)"),
]


@pytest.mark.parametrize("expression, shape, value", EXPANDED)
def test_expand_like_torch(expression, shape, value):
    results = []
    for lib in (torch, gradviz):
        D = lib.distributions
        scope = {"torch": lib, **{n: getattr(D, n) for n in D.__all__}}
        d = eval(expression, scope).expand(shape)
        results.append((tuple(d.batch_shape), tuple(d.event_shape), d.log_prob(eval(value, scope)),
                        d.mean if isinstance(d, (D.Poisson, D.MixtureSameFamily)) else d.entropy(), repr(d)))
    (tb, te, tl, th, tr), (gb, ge, gl, gh, gr) = results
    assert (gb, ge) == (tb, te)
    assert_same(gl, tl, "float32", f"{expression}.expand({shape}).log_prob")
    assert_same(gh, th, "float32", f"{expression}.expand({shape}).entropy")
    assert text(gr) == tr


@pytest.mark.parametrize("expression", [
    "Bernoulli(torch.tensor([0.2, 0.7])).enumerate_support()",
    "Bernoulli(torch.tensor([0.2, 0.7])).enumerate_support(expand=False)",
    "Categorical(logits=torch.zeros(2, 3)).enumerate_support()",
    "Categorical(logits=torch.zeros(2, 3)).enumerate_support(expand=False)",
    "OneHotCategorical(logits=torch.zeros(2, 3)).enumerate_support()",
    "Independent(Bernoulli(torch.ones(2) * 0.5), 0).enumerate_support()",
    "Categorical(probs=torch.tensor([1., 3.])).probs",
    "Categorical(logits=torch.tensor([1., 3.])).logits",
    "Bernoulli(torch.tensor([0., 0.5, 1.])).mode",
    "Bernoulli(torch.tensor([0., 0.5, 1.])).logits",
    "Categorical(probs=torch.tensor([0., 1.])).entropy()",
    "Uniform(0., 1.).log_prob(torch.tensor([0., 0.5]))",
    "Uniform(0., 1.).cdf(torch.tensor([0., 0.5, 1.]))",
    "Normal(0., 1.).cdf(torch.tensor([-1., 0., 2.]))",
    "Normal(torch.tensor([0.], dtype=torch.float64), 1.).log_prob(torch.tensor([1.], dtype=torch.float64))",
])
def test_special_values_match_torch(expression):
    values = []
    for lib in (torch, gradviz):
        D = lib.distributions
        scope = {"torch": lib, **{n: getattr(D, n) for n in D.__all__}}
        values.append(eval(expression, scope))
    expected, got = values
    if isinstance(expected, torch.Size):
        assert tuple(got) == tuple(expected)
        return
    assert_same(got, expected, str(expected.dtype).split(".")[-1] if expected.is_floating_point()
                else "float64", expression)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]


def test_sample_n_warns_like_torch():
    for lib in (torch, gradviz):
        with pytest.warns(FutureWarning, match=r"Use `sample\(\(n,\)\)` instead"):
            assert tuple(lib.distributions.Normal(0.0, 1.0).sample_n(2).shape) == (2,)


def test_constraints_check_like_torch():
    value = np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, float("nan")]])
    names = ["real", "positive", "nonnegative", "unit_interval", "boolean",
             "nonnegative_integer", "positive_integer"]
    for name in names:
        expected = getattr(torch.distributions.constraints, name).check(torch.tensor(value))
        got = getattr(gradviz.distributions.constraints, name).check(gradviz.tensor(value))
        np.testing.assert_array_equal(got.numpy(), expected.numpy(), err_msg=name)
    simplex = np.array([[0.2, 0.8], [0.5, 0.6]])
    np.testing.assert_array_equal(
        gradviz.distributions.constraints.simplex.check(gradviz.tensor(simplex)).numpy(),
        torch.distributions.constraints.simplex.check(torch.tensor(simplex)).numpy())
    assert gradviz.distributions.constraints.is_dependent(
        gradviz.distributions.Uniform(0.0, 1.0).support) is False
    assert gradviz.distributions.constraints.is_dependent(gradviz.distributions.constraints.dependent)
