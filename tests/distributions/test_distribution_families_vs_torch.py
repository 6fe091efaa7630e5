"""Fifteen distribution families (Cauchy, HalfNormal, HalfCauchy, StudentT, Gumbel, Weibull,
Pareto, Chi2, InverseGamma, Kumaraswamy, LogisticNormal, FisherSnedecor, Geometric,
NegativeBinomial, Multinomial) and their same-family KL divergences against torch: log_prob,
cdf/icdf, entropy, moments, shapes and the gradients of log_prob and of reparameterised draws;
draws themselves are compared by their statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gradviz as gv

RNG = np.random.default_rng(17)
POS = RNG.uniform(0.6, 3.0, 4)
POS2 = RNG.uniform(2.5, 6.0, 4)
REAL = RNG.standard_normal(4)

# name: (constructor(m, *params), params, values where log_prob is compared, what to compare)
CASES = {
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), (REAL, POS), RNG.standard_normal((3, 4)) * 3, "cdf icdf entropy mode"),
    "HalfNormal": (lambda D, s: D.HalfNormal(s), (POS,), RNG.uniform(0.1, 3, (3, 4)), "cdf icdf entropy mean mode variance"),
    "HalfCauchy": (lambda D, s: D.HalfCauchy(s), (POS,), RNG.uniform(0.1, 3, (3, 4)), "cdf icdf entropy mode"),
    "StudentT": (lambda D, df, a, b: D.StudentT(df, a, b), (POS2, REAL, POS), RNG.standard_normal((3, 4)) * 2,
                 "entropy mean mode variance"),
    "StudentT_small_df": (lambda D, df: D.StudentT(df), (np.array([0.5, 1.0, 1.5, 2.0]),), RNG.standard_normal((3, 4)),
                          "entropy mean variance"),
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), (REAL, POS), RNG.standard_normal((3, 4)) * 2, "entropy mean mode variance stddev"),
    "Weibull": (lambda D, s, c: D.Weibull(s, c), (POS, POS2), RNG.uniform(0.1, 3, (3, 4)), "entropy mean mode variance"),
    "Pareto": (lambda D, s, a: D.Pareto(s, a), (POS, POS2), POS + RNG.uniform(0.1, 3, (3, 4)), "entropy mean mode variance"),
    "Chi2": (lambda D, df: D.Chi2(df), (POS2,), RNG.uniform(0.1, 5, (3, 4)), "entropy mean mode variance cdf"),
    "InverseGamma": (lambda D, c, r: D.InverseGamma(c, r), (POS2, POS), RNG.uniform(0.1, 3, (3, 4)), "entropy mean mode variance"),
    "Kumaraswamy": (lambda D, a, b: D.Kumaraswamy(a, b), (POS2, POS), RNG.uniform(0.05, 0.95, (3, 4)), "entropy mean mode variance"),
    "FisherSnedecor": (lambda D, a, b: D.FisherSnedecor(a, b), (POS2, POS2 + 3), RNG.uniform(0.1, 3, (3, 4)), "mean mode variance"),
    "Geometric": (lambda D, p: D.Geometric(p), (RNG.uniform(0.1, 0.9, 4),), np.array([[0.0, 1, 3, 7]]), "entropy mean mode variance"),
    "Geometric_logits": (lambda D, logit: D.Geometric(logits=logit), (REAL,), np.array([[0.0, 2, 3, 1]]), "entropy mean variance"),
    "NegativeBinomial": (lambda D, n, p: D.NegativeBinomial(n, p), (POS2, RNG.uniform(0.1, 0.9, 4)),
                         np.array([[0.0, 1, 3, 7], [2, 0, 5, 1]]), "mean mode variance"),
    "Multinomial": (lambda D, p: D.Multinomial(6, p.softmax(-1)), (RNG.standard_normal((2, 4)),),
                    np.array([[1.0, 2, 0, 3], [6, 0, 0, 0]]), "entropy mean variance"),
    "LogisticNormal": (lambda D, a, b: D.LogisticNormal(a, b), (RNG.standard_normal(3), POS[:3]),
                       np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]), ""),
}


def _build(m, name, requires_grad=True):
    constructor, params, values, _ = CASES[name]
    leaves = [m.tensor(p, requires_grad=requires_grad) for p in params]
    return constructor(m.distributions, *leaves), leaves, m.tensor(values)


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_and_its_gradients_match_torch(name):
    got, got_leaves, got_values = _build(gv, name)
    want, want_leaves, want_values = _build(torch, name)
    assert tuple(got.batch_shape) == tuple(want.batch_shape)
    assert tuple(got.event_shape) == tuple(want.event_shape)
    lp, tlp = got.log_prob(got_values), want.log_prob(want_values)
    np.testing.assert_allclose(lp.detach().numpy(), tlp.detach().numpy(), rtol=1e-9, atol=1e-12)
    grads = gv.autograd.grad(lp.sum(), got_leaves)
    torch_grads = torch.autograd.grad(tlp.sum(), want_leaves)
    for g, t in zip(grads, torch_grads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_moments_entropy_and_cdfs_match_torch(name):
    got, _, got_values = _build(gv, name, requires_grad=False)
    want, _, want_values = _build(torch, name, requires_grad=False)
    for what in CASES[name][3].split():
        if what in ("cdf", "icdf"):
            points = (got_values, want_values) if what == "cdf" else (gv.tensor(RNG_PROBS), torch.tensor(RNG_PROBS))
            a, b = getattr(got, what)(points[0]), getattr(want, what)(points[1])
        elif what == "entropy":
            a, b = got.entropy(), want.entropy()
        else:
            a, b = getattr(got, what), getattr(want, what)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=what)
    assert repr(got.support).replace("gradviz", "torch") == repr(want.support) or type(got.support).__name__ == type(want.support).__name__


RNG_PROBS = np.random.default_rng(2).uniform(0.05, 0.95, (3, 4))

REPARAMETERISED = ["Cauchy", "HalfNormal", "HalfCauchy", "StudentT", "Gumbel", "Weibull", "Pareto", "Chi2",
                   "InverseGamma", "Kumaraswamy", "FisherSnedecor", "LogisticNormal"]


@pytest.mark.parametrize("name", REPARAMETERISED)
def test_draws_are_reparameterised_in_the_support_with_torchs_has_rsample(name):
    gv.manual_seed(0)
    got, leaves, _ = _build(gv, name)
    want, _, _ = _build(torch, name)
    assert got.has_rsample == want.has_rsample
    draws = got.rsample((5,)) if got.has_rsample else got.sample((5,))
    assert tuple(draws.shape) == (5,) + tuple(want.batch_shape) + tuple(want.event_shape)
    assert bool(got.support.check(draws.detach()).all())
    if got.has_rsample:
        grads = gv.autograd.grad(draws.sum(), leaves, allow_unused=True)
        assert all(g is None or bool(gv.isfinite(g).all()) for g in grads)
        assert any(g is not None for g in grads)


@pytest.mark.parametrize("name, make, mean", [
    ("HalfNormal", lambda D: D.HalfNormal(gv.tensor(2.0)), 2 * math.sqrt(2 / math.pi)),
    ("Gumbel", lambda D: D.Gumbel(gv.tensor(1.0), gv.tensor(2.0)), 1 + 2 * 0.5772156649),
    ("Weibull", lambda D: D.Weibull(gv.tensor(1.5), gv.tensor(2.0)), 1.5 * math.gamma(1.5)),
    ("Pareto", lambda D: D.Pareto(gv.tensor(1.0), gv.tensor(4.0)), 4 / 3),
    ("Chi2", lambda D: D.Chi2(gv.tensor(3.0)), 3.0),
    ("InverseGamma", lambda D: D.InverseGamma(gv.tensor(5.0), gv.tensor(2.0)), 0.5),
    ("Kumaraswamy", lambda D: D.Kumaraswamy(gv.tensor(2.0), gv.tensor(3.0)), None),
    ("StudentT", lambda D: D.StudentT(gv.tensor(6.0), gv.tensor(1.0)), 1.0),
    ("FisherSnedecor", lambda D: D.FisherSnedecor(gv.tensor(6.0), gv.tensor(9.0)), 9 / 7),
    ("Geometric", lambda D: D.Geometric(gv.tensor(0.3)), 0.7 / 0.3),
    ("NegativeBinomial", lambda D: D.NegativeBinomial(gv.tensor(5.0), gv.tensor(0.4)), 5 * 0.4 / 0.6),
])
def test_draws_have_the_distributions_mean(name, make, mean):
    gv.manual_seed(1)
    dist = make(gv.distributions)
    draws = dist.sample((40000,))
    expected = float(dist.mean) if mean is None else mean
    assert float(dist.mean) == pytest.approx(expected, rel=1e-6)
    spread = float(draws.std()) / math.sqrt(40000)
    assert abs(float(draws.mean()) - expected) < 5 * spread


def test_multinomial_draws_count_total_count_and_match_probs():
    gv.manual_seed(2)
    probs = gv.tensor([0.1, 0.2, 0.7])
    counts = gv.distributions.Multinomial(10, probs).sample((3000,))
    assert tuple(counts.shape) == (3000, 3)
    assert bool((counts.sum(-1) == 10).all())
    np.testing.assert_allclose((counts.mean(0) / 10).numpy(), probs.numpy(), atol=0.02)


KL_PAIRS = {
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), (REAL, POS), (REAL[::-1].copy(), POS2)),
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), (REAL, POS), (REAL[::-1].copy(), POS2)),
    "HalfNormal": (lambda D, s: D.HalfNormal(s), (POS,), (POS2,)),
    "Geometric": (lambda D, p: D.Geometric(p), (RNG.uniform(0.1, 0.9, 4),), (RNG.uniform(0.1, 0.9, 4),)),
    "Pareto": (lambda D, s, a: D.Pareto(s, a), (POS, POS2), (POS[::-1].copy(), POS2[::-1].copy())),
    "Chi2": (lambda D, df: D.Chi2(df), (POS2,), (POS2[::-1].copy(),)),
}


@pytest.mark.parametrize("name", sorted(KL_PAIRS))
def test_kl_divergences_and_their_gradients_match_torch(name):
    make, p_params, q_params = KL_PAIRS[name]
    results = []
    for m in (gv, torch):
        leaves = [m.tensor(a, requires_grad=True) for a in p_params + q_params]
        p, q = make(m.distributions, *leaves[:len(p_params)]), make(m.distributions, *leaves[len(p_params):])
        kl = m.distributions.kl_divergence(p, q)
        finite = kl.detach().isfinite() if hasattr(kl, "isfinite") else kl.detach()
        grads = m.autograd.grad(m.where(finite, kl, m.zeros_like(kl)).sum(), leaves, allow_unused=True)
        results.append((kl.detach().numpy(), [None if g is None else g.numpy() for g in grads]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-9, atol=1e-12)
    for a, b in zip(results[0][1], results[1][1]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)
