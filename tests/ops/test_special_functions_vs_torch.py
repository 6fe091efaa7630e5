"""The Bessel, incomplete gamma, zeta and polynomial families of ``torch.special`` against
PyTorch: values over edge values and dtypes, the degree rules of the polynomials, what is and is
not differentiable, Tensor methods and in-place forms, and the errors (derivatives of first
derivatives and second derivatives are in ``test_every_op_vs_torch.py``)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

import gradviz as gv

EDGES = [-math.inf, -30.0, -2.5, -1.0, -0.3, -1e-12, 0.0, 1e-12, 0.3, 1.0, 2.5, 30.0, 700.0, math.inf, math.nan]
PROBABILITIES = [0.0, 1e-300, 1e-8, 0.025, 0.5, 0.975, 1.0 - 1e-12, 1.0, -0.5, 1.5, math.nan]

UNARY = ["i0", "i0e", "i1", "i1e", "erfcx", "log_ndtr", "airy_ai", "bessel_j0", "bessel_j1",
         "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
         "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
         "spherical_bessel_j0"]
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]
NOT_DIFFERENTIABLE = UNARY[6:] + POLYNOMIALS
# torch's own approximations of these lose accuracy at some edge values (Ai at -2.5 and -30, J0,
# Y0 and Y1 at 700: up to 3e-5 relative; P(30, 31): 5e-10); gradviz's scipy values are the true ones there
# (test_values_where_torch_is_less_accurate_are_the_true_ones)
TORCH_LESS_ACCURATE = {"airy_ai": 5e-5, "bessel_j0": 5e-5, "bessel_y0": 5e-5, "bessel_y1": 5e-5}


def _same(got, want, rtol, atol=0.0):
    assert got.dtype == getattr(gv, str(want.dtype).removeprefix("torch."))
    np.testing.assert_allclose(got.detach().numpy().astype(np.float64), want.detach().numpy().astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", UNARY + ["ndtri"])
def test_values_match_torch_at_edge_values(name, dtype):
    values = PROBABILITIES if name == "ndtri" else EDGES
    # torch's float32 kernels compute in float32 where gradviz computes in float64 and rounds:
    # a few float32 ulps apart, far below anything a gradient check sees
    rtol = 1e-12 if dtype == "float64" else 2e-6
    rtol = max(rtol, TORCH_LESS_ACCURATE.get(name, 0.0))
    got = getattr(gv.special, name)(gv.tensor(values, dtype=getattr(gv, dtype)))
    want = getattr(torch.special, name)(torch.tensor(values, dtype=getattr(torch, dtype)))
    _same(got, want, rtol, atol=1e-300 if dtype == "float64" else 1e-37)


def test_values_where_torch_is_less_accurate_are_the_true_ones():
    truth = {"airy_ai": mpmath.airyai, "bessel_j0": lambda x: mpmath.besselj(0, x),
             "bessel_y0": lambda x: mpmath.bessely(0, x), "bessel_y1": lambda x: mpmath.bessely(1, x)}
    for name, exact in truth.items():
        for x in (-30.0, -2.5, 2.5, 30.0, 700.0):
            if name.startswith("bessel_y") and x < 0:
                continue
            got = float(getattr(gv.special, name)(gv.tensor([x], dtype=gv.float64))[0])
            assert got == pytest.approx(float(exact(x)), rel=1e-12), (name, x)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_of_nan_are_nan_except_degree_zero(name):
    # torch returns a neighbouring lane's value for NaN at degree >= 1 (a vectorisation slip);
    # gradviz gives NaN, and 1 at degree 0 as torch
    fn = getattr(gv.special, name)
    assert np.isnan(fn(gv.tensor([math.nan, 0.5]), 3).numpy()[0])
    assert fn(gv.tensor([math.nan]), 0).item() == getattr(torch.special, name)(torch.tensor([math.nan]), 0).item() == 1.0


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 3, 6, 7, 9, 2.7, -0.5, 25])
def test_polynomial_degrees_match_torch(name, n):
    # the degree is truncated to an integer and a negative one gives 0 (Note [Orthogonal polynomials])
    x = [-2.0, -1.0, -0.7, -1e-9, 0.0, 0.25, 0.5, 1.0, 1.3]
    got = getattr(gv.special, name)(gv.tensor(x, dtype=gv.float64), n)
    want = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float64), n)
    _same(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_with_tensor_degrees_and_mixed_dtypes_match_torch(name):
    x = [0.3, -0.6, 1.0, 2.0]
    for xs, ns in [(gv.tensor(x), gv.tensor([0, 1, 4, 7])),
                   (gv.tensor(x, dtype=gv.float64), gv.tensor([0.9, 3.2, -1.0, 5.0], dtype=gv.float32)),
                   (gv.tensor([1, 2, 0, -1]), gv.tensor([2, 3, 1, 0]))]:
        tx, tn = torch.tensor(xs.numpy()), torch.tensor(ns.numpy())
        _same(getattr(gv.special, name)(xs, ns), getattr(torch.special, name)(tx, tn), rtol=1e-6, atol=1e-9)
    _same(getattr(gv.special, name)(0.5, gv.tensor([0, 2, 3])),
          getattr(torch.special, name)(0.5, torch.tensor([0, 2, 3])), rtol=1e-6)


@pytest.mark.parametrize("name", NOT_DIFFERENTIABLE)
def test_functions_torch_does_not_differentiate_give_results_without_grad(name):
    x = gv.tensor([0.5, 1.5], requires_grad=True)
    args = (x, 3) if name in POLYNOMIALS else (x,)
    out = getattr(gv.special, name)(*args)
    want = getattr(torch.special, name)(*((torch.tensor([0.5, 1.5], requires_grad=True),) + args[1:]))
    assert out.requires_grad is want.requires_grad is False
    assert out.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        out.sum().backward()


@pytest.mark.parametrize("name, node", [("i0", "I0Backward0"), ("i0e", "SpecialI0EBackward0"),
                                        ("i1", "SpecialI1Backward0"), ("i1e", "SpecialI1EBackward0"),
                                        ("erfcx", "SpecialErfcxBackward0"), ("log_ndtr", "SpecialLogNdtrBackward0")])
def test_derivatives_match_torch_including_zero_and_the_tails(name, node):
    values = [-40.0, -3.0, -1e-20, 0.0, 1e-20, 0.4, 3.0, 40.0]
    x = gv.tensor(values, dtype=gv.float64, requires_grad=True)
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    y, u = getattr(gv.special, name)(x), getattr(torch.special, name)(t)
    assert type(y.grad_fn).__name__ == type(u.grad_fn).__name__ == node
    (gx,) = gv.autograd.grad(y.sum(), x)
    (gt,) = torch.autograd.grad(u.sum(), t)
    _same(gx, gt, rtol=1e-10, atol=1e-300)


def test_ndtri_derivative_matches_torch_and_finite_differences():
    p = gv.tensor([1e-6, 0.1, 0.5, 0.9, 1 - 1e-6], dtype=gv.float64, requires_grad=True)
    t = torch.tensor(p.detach().numpy(), requires_grad=True)
    (gp,) = gv.autograd.grad(gv.special.ndtri(p).sum(), p)
    (gt,) = torch.autograd.grad(torch.special.ndtri(t).sum(), t)
    _same(gp, gt, rtol=1e-10)
    assert gv.autograd.gradcheck(gv.special.ndtri, (gv.tensor([0.2, 0.7], dtype=gv.float64, requires_grad=True),))


def test_incomplete_gamma_matches_torch_and_is_differentiable_in_its_second_argument_only():
    a_values = [0.0, 0.5, 1.0, 2.5, 30.0, -1.0, math.inf, math.nan]
    x_values = [1.0, 0.0, 2.0, 2.5, 31.0, 1.0, 3.0, 1.0]
    for gv_fn, torch_fn in [(gv.igamma, torch.igamma), (gv.special.gammaincc, torch.special.gammaincc)]:
        a, x = gv.tensor(a_values, dtype=gv.float64), gv.tensor(x_values, dtype=gv.float64)
        _same(gv_fn(a, x), torch_fn(torch.tensor(a_values, dtype=torch.float64),
                                     torch.tensor(x_values, dtype=torch.float64)), rtol=1e-9)
    # P(30, 31), where torch is 5e-10 off: the true value
    mpmath.mp.dps = 30
    exact = float(mpmath.gammainc(30, 0, 31, regularized=True))
    assert gv.igamma(gv.tensor([30.0], dtype=gv.float64), gv.tensor([31.0], dtype=gv.float64)).item() == pytest.approx(exact, rel=1e-13)
    a = gv.tensor([1.5, 2.0], dtype=gv.float64, requires_grad=True)
    x = gv.tensor([0.5, 3.0], dtype=gv.float64, requires_grad=True)
    ta, tx = torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True), torch.tensor([0.5, 3.0], dtype=torch.float64, requires_grad=True)
    for gv_fn, torch_fn, node in [(gv.igamma, torch.igamma, "IgammaBackward0"),
                                  (gv.igammac, torch.igammac, "IgammacBackward0")]:
        y, u = gv_fn(a, x), torch_fn(ta, tx)
        assert type(y.grad_fn).__name__ == type(u.grad_fn).__name__ == node
        _same(gv.autograd.grad(y.sum(), x, retain_graph=True)[0], torch.autograd.grad(u.sum(), tx, retain_graph=True)[0], rtol=1e-12)
        name = node[:-len("Backward0")].lower()
        with pytest.raises(NotImplementedError, match=f"the derivative for '{name}: input' is not implemented."):
            gv.autograd.grad(y.sum(), a)
        with pytest.raises(NotImplementedError, match=f"the derivative for '{name}: input' is not implemented."):
            torch.autograd.grad(u.sum(), ta)
    # a number for either argument, and the Tensor methods and in-place forms
    _same(gv.igamma(gv.tensor([1.0, 2.0]), 1.5), torch.igamma(torch.tensor([1.0, 2.0]), torch.tensor(1.5)), rtol=1e-6)
    b = gv.tensor([1.0, 2.0])
    assert b.igammac_(gv.tensor([0.5, 0.5])) is b
    _same(b, torch.tensor([1.0, 2.0]).igammac_(torch.tensor([0.5, 0.5])), rtol=1e-6)
    _same(gv.tensor([3.0]).igamma(gv.tensor([1.0])), torch.tensor([3.0]).igamma(torch.tensor([1.0])), rtol=1e-6)


def test_mvlgamma_matches_torch_with_its_derivative_and_error():
    values = [1.2, 2.0, 5.5, 40.0]
    for p in (1, 2, 3, 5):
        x = gv.tensor(values, dtype=gv.float64, requires_grad=True)
        t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        y, u = gv.special.multigammaln(x + 2, p), torch.special.multigammaln(t + 2, p)
        assert type(y.grad_fn).__name__ == type(u.grad_fn).__name__ == "MvlgammaBackward0"
        _same(y, u, rtol=1e-12)
        _same(gv.autograd.grad(y.sum(), x)[0], torch.autograd.grad(u.sum(), t)[0], rtol=1e-12)
    _same(gv.tensor([0.5, 1.0]).mvlgamma(3), torch.tensor([0.5, 1.0]).mvlgamma(3), rtol=1e-6)  # inf, as torch
    x = gv.tensor([2.5, 3.0])
    assert x.mvlgamma_(2) is x
    _same(x, torch.tensor([2.5, 3.0]).mvlgamma_(2), rtol=1e-6)
    for p in (0, -1):
        with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
            gv.mvlgamma(gv.tensor([3.0]), p)
        with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
            torch.mvlgamma(torch.tensor([3.0]), p)


def test_zeta_matches_torch_for_tensors_and_numbers():
    x_values, q_values = [1.0, 0.5, 2.0, 2.0, 3.0, 4.5], [1.0, 1.0, 0.0, -1.5, -2.0, 7.0]
    _same(gv.special.zeta(gv.tensor(x_values, dtype=gv.float64), gv.tensor(q_values, dtype=gv.float64)),
          torch.special.zeta(torch.tensor(x_values, dtype=torch.float64), torch.tensor(q_values, dtype=torch.float64)),
          rtol=1e-12)
    q = gv.tensor([0.5, 2.0, 9.0], dtype=gv.float64, requires_grad=True)
    tq = torch.tensor([0.5, 2.0, 9.0], dtype=torch.float64, requires_grad=True)
    for make in (lambda m, q: m.special.zeta(2.5, q), lambda m, q: m.special.zeta(m.ones_like(q) * 3, q)):
        y, u = make(gv, q), make(torch, tq)
        assert type(y.grad_fn).__name__ == type(u.grad_fn).__name__
        _same(y, u, rtol=1e-12)
        _same(gv.autograd.grad(y.sum(), q)[0], torch.autograd.grad(u.sum(), tq)[0], rtol=1e-12)
    y, u = gv.special.zeta(q + 1, 2.0), torch.special.zeta(tq + 1, 2.0)
    assert type(y.grad_fn).__name__ == type(u.grad_fn).__name__ == "SpecialZetaBackward2"
    _same(y, u, rtol=1e-12)
    with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not implemented."):
        gv.autograd.grad(y.sum(), q)


def test_integer_inputs_are_computed_in_the_default_float_dtype_as_in_torch():
    for name in ["i0", "i1e", "erfcx", "bessel_j1", "modified_bessel_k0"]:
        got, want = getattr(gv.special, name)(gv.tensor([1, 2])), getattr(torch.special, name)(torch.tensor([1, 2]))
        _same(got, want, rtol=1e-6)
    _same(gv.i0(gv.tensor([1.0, 2.0], dtype=gv.float16)), torch.i0(torch.tensor([1.0, 2.0], dtype=torch.float16)), rtol=1e-3)
    x = gv.tensor([0.5, 1.0])
    assert x.i0_() is x
    _same(x, torch.tensor([0.5, 1.0]).i0_(), rtol=1e-6)


def test_the_special_namespace_has_every_torch_special_function():
    public = {name for name in dir(torch.special) if not name.startswith("_")}
    # not functions: the module's imports and docstring fragments
    public -= {"Tensor", "torch", "common_args", "multi_dim_common"}
    assert sorted(public - set(dir(gv.special))) == []
    assert set(gv.special.__all__) <= set(dir(gv.special))
    from gradviz.special import bessel_j0, zeta  # noqa: F401  (an importable module, as torch.special)


def test_gamma_cdf_still_matches_torch():
    concentration, rate, values = [0.5, 2.0, 7.5], [1.0, 0.5, 3.0], [0.2, 4.0, 2.5]
    got = gv.distributions.Gamma(gv.tensor(concentration), gv.tensor(rate)).cdf(gv.tensor(values))
    want = torch.distributions.Gamma(torch.tensor(concentration), torch.tensor(rate)).cdf(torch.tensor(values))
    _same(got, want, rtol=1e-5)
