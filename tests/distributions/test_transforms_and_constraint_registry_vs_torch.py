"""The transforms (Abs, Power, Softplus, Softmax, StickBreaking, LowerCholesky, Independent,
Reshape) and the constraint registry (``biject_to``/``transform_to``) against torch: values,
inverses, log-abs-det-Jacobians and their gradients, shapes and event dimensions, and the
transform each constraint maps to."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz as gv

RNG = np.random.default_rng(19)

TRANSFORMS = {
    "AbsTransform": (lambda T: T.AbsTransform(), RNG.standard_normal((3, 4)), False),
    "PowerTransform": (lambda T: T.PowerTransform(gv_or_torch_tensor(T, [0.5, 2.0, 3.0, -1.0])), RNG.uniform(0.5, 2, (3, 4)), True),
    "SoftplusTransform": (lambda T: T.SoftplusTransform(), RNG.standard_normal((3, 4)), True),
    "SoftmaxTransform": (lambda T: T.SoftmaxTransform(), RNG.standard_normal((3, 4)), False),
    "StickBreakingTransform": (lambda T: T.StickBreakingTransform(), RNG.standard_normal((3, 4)), True),
    "LowerCholeskyTransform": (lambda T: T.LowerCholeskyTransform(), RNG.standard_normal((2, 3, 3)), False),
    "IndependentTransform": (lambda T: T.IndependentTransform(T.ExpTransform(), 1), RNG.standard_normal((3, 4)), True),
    "ReshapeTransform": (lambda T: T.ReshapeTransform((4,), (2, 2)), RNG.standard_normal((3, 4)), True),
}


def gv_or_torch_tensor(T, values):
    return (torch if T is torch.distributions.transforms else gv).tensor(values, dtype=(
        torch if T is torch.distributions.transforms else gv).float64)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transforms_match_torch(name):
    make, data, has_jacobian = TRANSFORMS[name]
    results = []
    for m in (gv, torch):
        t = make(m.distributions.transforms)
        x = m.tensor(data, requires_grad=True)
        y = t(x)
        back = t.inv(y)
        parts = [y, back]
        if has_jacobian:
            parts.append(t.log_abs_det_jacobian(x, y))
        (grad,) = m.autograd.grad(sum(p.sum() for p in parts[:1] + parts[2:]), x)
        results.append(([p.detach().numpy() for p in parts], grad.numpy(), t.bijective,
                        tuple(t.forward_shape(m.Size(data.shape))), t.domain.event_dim, t.codomain.event_dim))
    (gp, gg, *rest), (tp, tg, *trest) = results
    for a, b in zip(gp, tp):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gg, tg, rtol=1e-9, atol=1e-12)
    assert rest == trest


@pytest.mark.parametrize("constraint", ["real", "positive", "nonnegative", "unit_interval", "simplex",
                                        "greater_than(2.0)", "less_than(-1.0)", "interval(-2.0, 3.0)",
                                        "real_vector", "lower_cholesky", "half_open_interval(0.0, 5.0)"])
@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_biject_to_and_transform_to_give_torchs_transform(constraint, registry):
    if registry == "biject_to" and constraint == "lower_cholesky":
        for m in (gv, torch):
            with pytest.raises(NotImplementedError):
                m.distributions.biject_to(m.distributions.constraints.lower_cholesky)
        return
    data = RNG.standard_normal((2, 3, 3)) if constraint == "lower_cholesky" else RNG.standard_normal((2, 4))
    outs = []
    for m in (gv, torch):
        c = eval(f"m.distributions.constraints.{constraint}")  # noqa: S307 - the names above
        t = getattr(m.distributions, registry)(c)
        x = m.tensor(data)
        y = t(x)
        assert bool(c.check(y).all())
        outs.append((type(t).__name__, y.numpy()))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-9, atol=1e-12)


