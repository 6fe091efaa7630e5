"""The exact GELU's compiled float32 kernel (Note [GELU kernels]) against torch.

Float32 inputs go through gradviz_ext/c/gelu.h; float64 inputs through scipy's ndtr. Both are
compared with torch: float32 values and gradients with exact values from torch's float64
``special.log_ndtr`` rounded to float32 (at most ULPS units in the last place apart, the
gradients within GRADIENT_RTOL: the kernel computes in float32), over a sweep of the float32
line as well, and with torch's own float32 gelu at the NN kernels' float32 tolerance; float64
with torch's float64. Inputs cover a wide grid, random values, the kernel's cut at |x| = 15, zeros,
subnormals, huge values, infinities and NaN, contiguous and strided, and second derivatives.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import torch
from conftest import cpu_has

import gradviz
import gradviz_ext
from gradviz_ext import ops as ext_ops

EDGES = [0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, 1e-38, 3e38, -3e38, 14.999, 15.0, 15.001,
         -14.999, -15.0, -15.001, -13.5, -14.2, 38.0, -38.0, -0.7517918, 5.0, -5.0,
         float("inf"), float("-inf"), float("nan")]


# the kernel's accuracy (Note [GELU kernels]): the largest errors a sweep of the float32 line
# found, 8 units in the last place (x near -11) and 3.0e-7 relative for the derivative
ULPS = 8
GRADIENT_RTOL = 4e-7  # 3.0e-7 and the product with the incoming gradient rounded


def inputs(dtype):
    """A grid over [-20, 20], random values of scale 3, and the edge values."""
    rng = np.random.default_rng(17)
    return np.concatenate([np.linspace(-20, 20, 40_001), rng.standard_normal(20_000) * 3,
                           np.array(EDGES)]).astype(dtype)


def values_and_gradient(m, x, probe, dtype):
    t = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
    y = m.nn.functional.gelu(t)
    y.backward(m.tensor(probe, dtype=getattr(m, dtype)))
    return y.detach().numpy(), t.grad.numpy()


def ulps(ours, reference):
    """Units in the last place between two float32 arrays (finite entries)."""
    def ordered(a):
        bits = a.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(ours) - ordered(reference))


def exact_float64(x, probe):
    """``x Phi(x)`` and ``probe (Phi(x) + x phi(x))`` in float64, Phi from torch's
    ``special.log_ndtr`` (accurate in the lower tail, where torch's float64 gelu and ndtr
    compute ``1 + erf`` and give 0 below x = -8.3 instead of -2e-16)."""
    t = torch.tensor(x, dtype=torch.float64)
    cdf = torch.exp(torch.special.log_ndtr(t))
    density = torch.exp(-0.5 * t * t) / np.sqrt(2 * np.pi)
    return (t * cdf).numpy(), (torch.tensor(probe, dtype=torch.float64) * (cdf + t * density)).numpy()


def test_float32_values_are_within_a_few_ulps_of_the_exact_values():
    x = inputs(np.float32)
    probe = np.random.default_rng(3).standard_normal(x.size).astype(np.float32)
    ours, ours_grad = values_and_gradient(gradviz, x, probe, "float32")
    exact, exact_grad = exact_float64(x.astype(np.float64), probe.astype(np.float64))
    exact32 = exact.astype(np.float32)
    assert ours.dtype == np.float32 and ours_grad.dtype == np.float32
    # torch's contiguous float32 kernel gives NaN at +inf
    exact32[np.isposinf(x)] = np.nan
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(exact32))
    finite = np.isfinite(exact32)
    assert ulps(ours[finite], exact32[finite]).max() <= ULPS
    np.testing.assert_array_equal(np.signbit(ours[finite]), np.signbit(exact32[finite]))
    np.testing.assert_array_equal(np.isinf(ours), np.isinf(exact32))
    # the derivative crosses zero near x = -0.75: there the float32 result is exact to 1e-12
    np.testing.assert_array_equal(np.isnan(ours_grad), np.isnan(exact_grad))
    finite = np.isfinite(exact_grad)
    np.testing.assert_allclose(ours_grad[finite], exact_grad[finite], rtol=GRADIENT_RTOL,
                               atol=1e-12)


def test_float32_accuracy_over_a_sweep_of_the_float32_line():
    """Every 1021st float32 bit pattern (all exponents, both signs, subnormals, infinities,
    NaN), every float32 in [-1, -0.5) (the derivative's zero) and every 7th in [-16, -8) (the
    lower tail, down to subnormal results), against scipy's float64 ndtr: values within ULPS,
    the derivative within GRADIENT_RTOL (where it is not below float32's normal range), the
    special values as torch gives them."""
    if not (gradviz_ext.COMPILED and cpu_has("avx2", "fma")):
        pytest.skip("the kernel does not run here")
    def line(low, high, step):
        start, stop = np.float32(low).view(np.int32), np.float32(high).view(np.int32)
        return np.arange(stop, start, step, dtype=np.int32).view(np.float32)
    patterns = np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([patterns, -line(0.5, 1.0, 1), -line(8.0, 16.0, 7),
                        np.array(EDGES, dtype=np.float32)])
    y = ext_ops.gelu_float32(x, False)
    d = ext_ops.gelu_backward_float32(x, np.ones_like(x))
    with np.errstate(invalid="ignore", over="ignore"):
        wide = x.astype(np.float64)
        exact = wide * scipy.special.ndtr(wide)
        exact_d = scipy.special.ndtr(wide) + wide * np.exp(-0.5 * wide * wide) / np.sqrt(2 * np.pi)
    exact32 = exact.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(exact32))
    finite = np.isfinite(exact32)
    assert ulps(y[finite], exact32[finite]).max() <= ULPS
    np.testing.assert_array_equal(np.signbit(y[finite]), np.signbit(exact32[finite]))
    np.testing.assert_array_equal(y[np.isinf(x)], [np.inf if v > 0 else np.nan
                                                   for v in x[np.isinf(x)]])
    np.testing.assert_array_equal(np.isnan(d), np.isnan(exact_d))
    normal = np.isfinite(exact_d) & (np.abs(exact_d) >= np.finfo(np.float32).tiny)
    np.testing.assert_allclose(d[normal], exact_d[normal], rtol=GRADIENT_RTOL, atol=0)
    below = np.isfinite(exact_d) & ~normal  # two steps of the subnormal grid (1.4e-45)
    np.testing.assert_allclose(d[below], exact_d[below], rtol=0, atol=3e-45)


def test_float32_values_match_torch_float32():
    x = inputs(np.float32)
    x = x[~(np.abs(x) > 1e38)]  # torch's float32 kernel overflows to inf at 3e38 (as before)
    probe = np.random.default_rng(4).standard_normal(x.size).astype(np.float32)
    ours, ours_grad = values_and_gradient(gradviz, x, probe, "float32")
    theirs, theirs_grad = values_and_gradient(torch, x, probe, "float32")
    np.testing.assert_allclose(ours, theirs, rtol=2e-4, atol=2e-5, equal_nan=True)
    np.testing.assert_allclose(ours_grad, theirs_grad, rtol=2e-4, atol=2e-5, equal_nan=True)


def test_float64_values_match_torch():
    x = inputs(np.float64)
    probe = np.random.default_rng(5).standard_normal(x.size)
    ours, ours_grad = values_and_gradient(gradviz, x, probe, "float64")
    theirs, theirs_grad = values_and_gradient(torch, x, probe, "float64")
    # torch's float64 gelu loses up to 1e-16 to cancellation in 1 + erf: atol 1e-14 at x = -20
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14, equal_nan=True)
    np.testing.assert_allclose(ours_grad, theirs_grad, rtol=1e-12, atol=1e-14, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["transposed", "strided", "broadcast_gradient"])
def test_strided_inputs_and_gradients_match_torch(dtype, layout):
    base = np.random.default_rng(6).standard_normal((37, 53)) * 4
    base[3, 5], base[7, 1], base[11, 2] = np.inf, -np.inf, np.nan
    results = []
    for m in (gradviz, torch):
        leaf = m.tensor(base, dtype=getattr(m, dtype), requires_grad=True)
        x = {"transposed": leaf.t(), "strided": leaf[:, ::2],
             "broadcast_gradient": leaf}[layout]
        y = m.nn.functional.gelu(x)
        y.sum().backward()  # the gradient reaching gelu is an expanded ones array
        results.append((y.detach().numpy(), leaf.grad.numpy()))
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_second_derivatives_match_torch(dtype):
    x = np.concatenate([np.linspace(-16, 16, 321), [0.0, 15.0, -15.0]])
    probe = np.random.default_rng(8).standard_normal(x.size)
    results = []
    for m in (gradviz, torch):
        t = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        g, = m.autograd.grad(m.nn.functional.gelu(t), t, m.tensor(probe, dtype=t.dtype),
                             create_graph=True)
        gg, = m.autograd.grad((g * g).sum(), t)
        results.append((g.detach().numpy(), gg.numpy()))
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == "float32" else dict(rtol=1e-9, atol=1e-10)
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, **tol)


def test_the_avx512_and_avx2_loops_give_the_same_bits():
    """The loops compiled for AVX-512 and for AVX2 do the same operations per element: the
    same bits (NaN payloads aside), over every 4099th float32 bit pattern (all exponents,
    both signs, NaNs and infinities), the edges, odd lengths and gradients with specials."""
    if ext_ops.gelu_kernels_up_to() != ext_ops.GELU_AVX512:
        pytest.skip("the AVX-512 loops do not run here")
    patterns = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([patterns, np.array(EDGES, dtype=np.float32), inputs(np.float32)])
    rng = np.random.default_rng(9)
    g = rng.standard_normal(x.size).astype(np.float32)
    g[::97], g[1::101], g[2::103], g[3::107] = np.nan, np.inf, -np.inf, -0.0
    results = {}
    try:
        for level in (ext_ops.GELU_AVX512, ext_ops.GELU_AVX2):
            assert ext_ops.gelu_kernels_up_to(level) == level
            results[level] = [ext_ops.gelu_float32(x, True), ext_ops.gelu_float32(x, False),
                              ext_ops.gelu_backward_float32(x, g)]
            for n in (1, 7, 8, 9, 15, 17, 1001):  # the vector loops' remainders
                results[level] += [ext_ops.gelu_float32(x[-n:], True),
                                   ext_ops.gelu_backward_float32(x[-n:], g[-n:])]
    finally:
        ext_ops.gelu_kernels_up_to()
    for wide, narrow in zip(results[ext_ops.GELU_AVX512], results[ext_ops.GELU_AVX2]):
        # NaN payloads aside: of a NaN x and a NaN gradient, which one a product passes on
        # depends on the order the compiler gave its operands
        np.testing.assert_array_equal(np.isnan(wide), np.isnan(narrow))
        numbers = ~np.isnan(wide)
        np.testing.assert_array_equal(wide[numbers].view(np.uint32),
                                      narrow[numbers].view(np.uint32))


def test_the_kernel_runs_where_it_should():
    """Compiled on an AVX2 + FMA CPU, float32 contiguous arrays take the kernel; other dtypes
    and strided arrays are left to numpy (None)."""
    x = np.linspace(-3, 3, 11, dtype=np.float32)
    expected = gradviz_ext.COMPILED and cpu_has("avx2", "fma")
    widest = ext_ops.GELU_AVX512 if cpu_has("avx512f", "avx512dq", "avx512vl", "avx512bw") else ext_ops.GELU_AVX2
    assert ext_ops.gelu_kernels_up_to() == (widest if expected else 0)
    assert (ext_ops.gelu_float32(x) is not None) == expected
    assert (ext_ops.gelu_backward_float32(x, x) is not None) == expected
    assert ext_ops.gelu_float32(x.astype(np.float64)) is None
    assert ext_ops.gelu_float32(x[::2]) is None
    assert ext_ops.gelu_backward_float32(x, x[:5]) is None
