"""gradviz.func.grad / grad_and_value / vjp / jacrev / jvp / jacfwd against torch.func."""

import numpy as np
import pytest
import torch
import torch.func as tf

import gradviz
import gradviz.func as gf

RNG = np.random.default_rng(2)


def _np(value):
    if isinstance(value, (tuple, list)):
        return [_np(v) for v in value]
    return value.detach().numpy()


def _check(program):
    x = RNG.standard_normal(3).astype(np.float32)
    y = RNG.standard_normal(3).astype(np.float32)
    ours = program(gradviz, gf, gradviz.tensor(x), gradviz.tensor(y))
    theirs = program(torch, tf, torch.tensor(x), torch.tensor(y))
    for o, t in zip(np.atleast_1d(np.asarray(_np(ours), dtype=object)).ravel(),
                    np.atleast_1d(np.asarray(_np(theirs), dtype=object)).ravel()):
        np.testing.assert_allclose(np.asarray(o, dtype=np.float32), np.asarray(t, dtype=np.float32),
                                   rtol=1e-4, atol=1e-5)


PROGRAMS = {
    "grad": lambda m, F, x, y: F.grad(lambda a: (a.sin() * a).sum())(x),
    "grad_argnums": lambda m, F, x, y: F.grad(lambda a, b: (a * b * b).sum(), argnums=(0, 1))(x, y),
    "grad_has_aux": lambda m, F, x, y: F.grad(lambda a: ((a ** 2).sum(), a * 2), has_aux=True)(x),
    "grad_grad": lambda m, F, x, y: F.grad(lambda a: F.grad(lambda b: (b ** 3).sum())(a).sum())(x),
    "grad_and_value": lambda m, F, x, y: F.grad_and_value(lambda a: (a.exp()).sum())(x),
    "vjp": lambda m, F, x, y: F.vjp(lambda a, b: a * b.tanh(), x, y)[1](m.ones(3)),
    "jacrev": lambda m, F, x, y: F.jacrev(lambda a: a.softmax(0))(x),
    "jacrev_argnums": lambda m, F, x, y: F.jacrev(lambda a, b: a * b, argnums=1)(x, y),
    "jvp": lambda m, F, x, y: F.jvp(lambda a: a.sin() * a, (x,), (y,)),
    "jacfwd": lambda m, F, x, y: F.jacfwd(lambda a: a.cumsum(0) * a)(x),
    "vmap_grad": lambda m, F, x, y: F.vmap(F.grad(lambda a: (a * a).sum()))(m.stack([x, y])),
    "grad_of_vmap": lambda m, F, x, y: F.grad(lambda a: F.vmap(lambda r: r.sin())(a).sum())(
        m.stack([x, y])),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_programs_match_torch(name):
    _check(PROGRAMS[name])


def test_grad_of_unused_input_is_zero_and_outer_graph_is_kept():
    for m, F in ((gradviz, gf), (torch, tf)):
        assert F.grad(lambda a, b: (b * 2).sum())(m.ones(2), m.ones(2)).tolist() == [0.0, 0.0]
        x = m.tensor([1.0, 2.0], requires_grad=True)
        g = F.grad(lambda a: (a ** 3).sum())(x)
        g.sum().backward()
        assert x.grad.tolist() == [6.0, 12.0]


def test_grad_errors_match_torch():
    for m, F in ((gradviz, gf), (torch, tf)):
        with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
            F.grad(lambda a: a * 2)(m.ones(2))


def test_ctx_style_function_under_grad_errors_like_torch():
    for m, F in ((gradviz, gf), (torch, tf)):
        class CtxStyle(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        with pytest.raises(RuntimeError, match="it must override the setup_context staticmethod"):
            F.grad(lambda a: CtxStyle.apply(a).sum())(m.ones(2))
