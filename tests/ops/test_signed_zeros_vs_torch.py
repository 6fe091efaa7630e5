"""Signs of zeros (and the other bits) where gradviz's numpy formulas differed from torch's
kernels: values and gradients against torch 2.13, compared with ``np.signbit`` as well as
values, in float32 and float64.

* fmax and fmin of +0.0 and -0.0 keep the first operand's zero (numpy's float32 loop gave the
  second's); maximum and minimum give both operands the whole gradient where one is NaN.
* remainder's zero has the dividend's sign (numpy gives it the divisor's); div with
  ``rounding_mode="floor"`` is the floor division of fmod (``1 // 0.1`` is 9, ``inf // 2`` NaN),
  and so is remainder's gradient for the divisor.
* scatter_reduce with amax or amin keeps the first of tied +0.0 and -0.0, ``self``'s own when
  it counts (numpy's ``maximum.at`` kept the later one).
* average pools sum from +0.0 (a window of -0.0 averages to +0.0) and divide by a window count
  in the data's dtype; layer norm without a bias adds torch's zero one (-0.0 becomes +0.0).
* Bits beside the signs: pow by 3, -2, 0.5 and -0.5 is computed as torch's kernel computes it
  (products, a reciprocal, sqrt), and its gradient in torch's order.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

P, N, NAN, INF = 0.0, -0.0, float("nan"), float("inf")
DTYPES = ["float32", "float64"]


def _arrays(result):
    return [t.detach().numpy().copy() if hasattr(t, "detach") else t for t in result]


def _assert_same(gv, th):
    """The same values, NaN positions and zero signs (a NaN's own sign is not compared)."""
    for a, b in zip(gv, th, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=True)
        assert np.array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)]))


def _both(fn):
    return _arrays(fn(gradviz)), _arrays(fn(torch))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["fmax", "fmin", "maximum", "minimum"])
def test_extrema_of_signed_zeros_and_nan(name, dtype):
    first = [P, N, P, N, 1.0, NAN, N, NAN, 2.0, -3.0]
    second = [P, P, N, N, N, N, NAN, NAN, 2.0, 4.0]

    def fn(m):
        x = m.tensor(first, dtype=getattr(m, dtype), requires_grad=True)
        y = m.tensor(second, dtype=getattr(m, dtype), requires_grad=True)
        z = getattr(m, name)(x, y)
        z.backward(m.arange(1.0, 11.0, dtype=z.dtype))
        return [z, x.grad, y.grad]

    gv, th = _both(fn)
    if name in ("maximum", "minimum"):
        # which zero of a tie torch's maximum keeps depends on whether the pair is in its
        # vectorized body or its scalar tail: values compared up to the sign of zero
        gv[0], th[0] = gv[0] + 0, th[0] + 0
    _assert_same(gv, th)


def test_fmax_keeps_the_first_zero_in_long_and_broadcast_arrays():
    a, b = np.tile([P, N, P, N], 16), np.tile([P, P, N, N], 16)
    for dtype in DTYPES:
        for name in ("fmax", "fmin"):
            _assert_same(*_both(lambda m, n=name, d=dtype: [
                getattr(m, n)(m.tensor(a, dtype=getattr(m, d)), m.tensor(b, dtype=getattr(m, d))),
                getattr(m, n)(m.tensor(a, dtype=getattr(m, d)), m.tensor([N], dtype=getattr(m, d)))]))


DIVIDENDS = [P, N, 3.0, -3.0, 6.0, -6.0, 1e-30, -1e-30, INF, -INF, NAN, 5.5, -5.5, 1.0, 0.7]
DIVISORS = [2.0, -2.0, 3.0, -3.0, INF, -INF, P, N, 0.1, -0.1, 0.7]


@pytest.mark.parametrize("dtype", DTYPES)
def test_remainder_signs_divisors_and_gradients(dtype):
    x, y = (a.ravel() for a in np.meshgrid(DIVIDENDS, DIVISORS))

    def fn(m):
        a = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        b = m.tensor(y, dtype=getattr(m, dtype), requires_grad=True)
        r = m.remainder(a, b)
        r.backward(m.ones_like(r))
        values = m.tensor(DIVIDENDS, dtype=getattr(m, dtype))
        return [r, a.grad, b.grad, values % -2.0, values % 2, m.remainder(-0.0, b.detach()),
                m.div(a.detach(), b.detach(), rounding_mode="floor"), a.detach() // b.detach()]

    _assert_same(*_both(fn))


def test_remainder_of_integers_is_unchanged():
    _assert_same(*_both(lambda m: [m.remainder(m.tensor([0, 5, -5, 7, -7]), m.tensor([3, -3, 3, -2, 2])),
                                   m.div(m.tensor([7, -7]), m.tensor([2, 2]), rounding_mode="floor")]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_keeps_the_first_of_tied_zeros(dtype, reduce, include_self):
    rng = np.random.default_rng(3)
    for trial in range(12):
        dim = trial % 2
        own = rng.choice([P, N, -1.0, 1.0, NAN], size=(4, 5), p=[.4, .4, .1, .05, .05])
        index = rng.integers(0, 4 if dim == 0 else 5, size=(6, 4) if dim == 0 else (4, 7))
        src = rng.choice([P, N, -1.0, 2.0], size=index.shape, p=[.4, .4, .15, .05])

        def fn(m, own=own, src=src, index=index, dim=dim):
            s = m.tensor(own, dtype=getattr(m, dtype), requires_grad=True)
            x = m.tensor(src, dtype=getattr(m, dtype), requires_grad=True)
            y = s.scatter_reduce(dim, m.tensor(index), x, reduce, include_self=include_self)
            y.backward(m.ones_like(y))
            # a src larger than the index: only its leading part is scattered
            wide = m.tensor(np.pad(src, 1), dtype=x.dtype)[1:, 1:]
            return [y, s.grad, x.grad, s.detach().scatter_reduce(dim, m.tensor(index), wide, reduce,
                                                                 include_self=include_self)]

        _assert_same(*_both(fn))


@pytest.mark.parametrize("dtype", DTYPES)
def test_average_pools_of_negative_zeros(dtype):
    def fn(m):
        x = m.zeros(1, 2, 5, 5, dtype=getattr(m, dtype))
        x[0, 1] = -0.0
        x[0, 0, :2] = -3.0
        x.requires_grad_()
        pool = m.nn.functional
        outs = [pool.avg_pool2d(x, 2), pool.avg_pool2d(x, 3, stride=2, padding=1),
                pool.avg_pool2d(x, 2, divisor_override=3), pool.adaptive_avg_pool2d(x, 1),
                pool.avg_pool1d(x[0], 2)]
        grads = [m.autograd.grad(out, x, -m.ones_like(out))[0] for out in outs]
        return outs + grads

    _assert_same(*_both(fn))


@pytest.mark.parametrize("dtype", DTYPES)
def test_average_pool_divides_by_a_count_in_the_dtype(dtype):
    """ceil_mode and count_include_pad=False windows of different sizes: the mean and the
    gradient are divided by the count as a number of the dtype (once rounded), as torch."""
    values = np.random.default_rng(4).standard_normal((2, 3, 7, 7))

    def fn(m):
        x = m.tensor(values, dtype=getattr(m, dtype), requires_grad=True)
        y = m.nn.functional.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        (g,) = m.autograd.grad(y, x, m.ones_like(y) / 3)
        return [y, g]

    gv, th = _both(fn)
    _assert_same(gv[:1], th[:1])
    # torch adds each window's share in the order of the windows, gradviz in the order of the
    # kernel offsets: where three or more windows overlap the sums may differ in the last bit
    np.testing.assert_allclose(gv[1], th[1], rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_of_signed_zeros(dtype, affine):
    rows = np.array([[-1.0, 1.0, N, P], [N, P, 2.0, -2.0], [2.5, 2.5, 2.5, 2.5]])

    def fn(m):
        x = m.tensor(rows, dtype=getattr(m, dtype))
        weight = m.tensor([1.0, -1.0, 0.5, 2.0], dtype=x.dtype) if affine != "none" else None
        bias = m.tensor([0.0, -0.0, 1.0, 0.0], dtype=x.dtype) if affine == "both" else None
        return [m.nn.functional.layer_norm(x, (4,), weight, bias)]

    _assert_same(*_both(fn))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exponent", [2, 3, 3.0, -2, -1, 0.5, -0.5, 1, 4])
def test_pow_by_the_exponents_torch_computes_without_pow(dtype, exponent):
    """torch's pow kernel computes 3 as ``x * x * x``, -2 as ``1 / (x * x)``, 0.5 and -0.5 with
    its sqrt and rsqrt kernels: those values have its bits (0.5 as gradviz's sqrt has torch's,
    compared within a rounding), and the gradients ``grad * (exponent * x ** (exponent - 1))``
    where that power is one of them."""
    values = np.random.default_rng(14).standard_normal(2000) * 3
    values[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e20, -1e-30, 1e-40]
    weights = np.linspace(-2, 2, values.size)

    def fn(m):
        x = m.tensor(values, dtype=getattr(m, dtype), requires_grad=True)
        y = x ** exponent
        y.backward(m.tensor(weights, dtype=y.dtype))
        return [y, x.grad]

    gv, th = _both(fn)
    exact_value = exponent in (1, 2, 3, -1, -2, -0.5)  # 4 and 0.5: pow and sqrt
    exact_grad = exponent - 1 in (0, 1, 2, 3, -1, -2, -0.5)
    for got, want, exact in ((gv[0], th[0], exact_value), (gv[1], th[1], exact_grad)):
        if exact:
            _assert_same([got], [want])
        else:
            np.testing.assert_allclose(got, want, rtol=4 * np.finfo(got.dtype).eps, equal_nan=True)
