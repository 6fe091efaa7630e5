"""Note [Direct convolution backward]: the compiled gradients of a 2-D convolution (the weight's
by its own kernel, the input's by the direct forward of the output gradient with the weight
transposed and flipped) against the differentiable rule they replace when no graph is recorded
(wide or strided columns and BLAS, which stays for create_graph and what the kernels do not
take), against torch and against finite differences. The kernels sum in another order than
BLAS, so their values are not the rule's bits: they agree within the rounding bound of a sum
of the same terms, and are the same bits where every partial sum is exact (small integers).
NaN and infinities land where they land in the rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops import _conv
from gradviz_ext import ops as ext_ops

COMPILED = config()["engine"] == "compiled"
RUNS = COMPILED and ext_ops._direct_conv_enable()
needs_kernel = pytest.mark.skipif(not RUNS, reason="the direct kernels need the compiled "
                                  "engine and AVX-512F (test_the_kernels_decline checks the "
                                  "rule takes over)")


def _geometry(kernel, padding=(0, 0), stride=(1, 1), dilation=(1, 1)):
    return _conv._Geometry(kernel, dilation, padding, stride)


def _grads(x, w, g, geometry, create_graph=False):
    """(input's, weight's, bias's) gradients of conv2d(x, w, bias) for output gradient g:
    through the kernels, or with ``create_graph`` through the differentiable rule."""
    xt, wt = gradviz.tensor(x, requires_grad=True), gradviz.tensor(w, requires_grad=True)
    bt = gradviz.tensor(np.zeros(w.shape[0], w.dtype), requires_grad=True)
    out = _conv.conv2d(xt, wt, bt, geometry)
    with np.errstate(invalid="ignore", over="ignore"):
        grads = gradviz.autograd.grad(out, [xt, wt, bt], gradviz.tensor(g),
                                      create_graph=create_graph)
    return [grad.detach().numpy() for grad in grads]


def _rule(x, w, g, geometry):
    return _grads(x, w, g, geometry, create_graph=True)


def _output_shape(x_shape, w_shape, geometry):
    return (x_shape[0], w_shape[0]) + geometry.blocks(*x_shape[2:])


def _random_case(rng, stride_one=False):
    """A random 2-D convolution: batch, channels, sizes, kernel, padding, stride, dilation."""
    while True:
        n, c, o = int(rng.integers(1, 4)), int(rng.integers(1, 9)), int(rng.integers(1, 30))
        kernel = tuple(int(k) for k in rng.integers(1, 6, 2))
        padding = tuple(int(p) for p in rng.integers(0, 3, 2))
        stride = (1, 1) if stride_one else tuple(int(s) for s in rng.integers(1, 3, 2))
        dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
        size = tuple(int(s) for s in rng.integers(1, 24, 2))
        geometry = _geometry(kernel, padding, stride, dilation)
        if min(geometry.blocks(*size)) > 0:
            return (n, c) + size, (o, c) + kernel, geometry


def _weight_grad(x, g, w_shape, geometry):
    got = ext_ops.direct_conv2d_weight_grad_arrays(x, g, w_shape[2:], geometry)
    assert got is not None
    return got


def _input_grad(g, w, geometry, size):
    got = _conv._direct_input_grad(g, w, geometry, size)
    assert got is not None
    return got


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernels_agree_with_the_rule_within_rounding(dtype):
    """|kernel - rule| within twice the bound of either sum's rounding error: each addition
    errs by at most eps times the sum of the terms' magnitudes (the rule on |x|, |w|, |g|)."""
    rng = np.random.default_rng(21)
    eps = np.finfo(dtype).eps
    for case in range(120):
        x_shape, w_shape, geometry = _random_case(rng, stride_one=case % 2 == 0)
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        g = rng.standard_normal(_output_shape(x_shape, w_shape, geometry)).astype(dtype)
        want_x, want_w, _ = _rule(x, w, g, geometry)
        size_x, size_w, _ = _rule(np.abs(x), np.abs(w), np.abs(g), geometry)
        got_w = _weight_grad(x, g, w_shape, geometry)
        assert got_w.dtype == want_w.dtype and got_w.shape == want_w.shape
        terms = g[:, 0].size
        assert np.all(np.abs(got_w.astype(np.float64) - want_w) <= 2 * terms * eps * size_w)
        if case % 2 == 0 and min(d * (k - 1) - p for d, k, p in zip(
                geometry.dilation, geometry.kernel, geometry.padding)) >= 0:
            got_x = _input_grad(g, w, geometry, x_shape[2:])
            assert got_x.dtype == want_x.dtype and got_x.shape == want_x.shape
            terms = w[:, 0].size
            assert np.all(np.abs(got_x.astype(np.float64) - want_x) <= 2 * terms * eps * size_x)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_sums_give_the_rules_bits(dtype):
    """Small integers: every partial sum is exact in any order, so the kernels and the rule
    give the same bits, whatever the lanes, blocks, tails and sample groups; the whole
    backward (both kernels and the bias's sum) too."""
    rng = np.random.default_rng(22)
    for case in range(120):
        x_shape, w_shape, geometry = _random_case(rng, stride_one=case % 2 == 0)
        x = rng.integers(-3, 4, x_shape).astype(dtype)
        w = rng.integers(-3, 4, w_shape).astype(dtype)
        g = rng.integers(-3, 4, _output_shape(x_shape, w_shape, geometry)).astype(dtype)
        want = _rule(x, w, g, geometry)
        np.testing.assert_array_equal(_weight_grad(x, g, w_shape, geometry), want[1])
        for got, expected in zip(_grads(x, w, g, geometry), want):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)


@needs_kernel
@pytest.mark.parametrize("out_channels", [1, 2, 5, 8, 13, 32])
@pytest.mark.parametrize("channels, kernel", [(1, (1, 1)), (3, (3, 3)), (2, (5, 5)),
                                              (7, (3, 2)), (16, (3, 3))])
def test_every_plane_size_and_block_edge(out_channels, channels, kernel):
    """Output planes of 1 to 40 pixels and 1,024 (the lanes' tails, one or several samples a
    call), batches of 1 to 6 (a last, partial group of samples), channel and tap counts that
    are no multiple of any block, float32, integers: the rule's bits."""
    rng = np.random.default_rng(out_channels * 100 + channels)
    geometry = _geometry(kernel, (kernel[0] // 2, kernel[1] // 2))
    for width in list(range(1, 41, 3)) + [32]:
        height = 32 if width == 32 else int(rng.integers(1, 4))
        batch = int(rng.integers(1, 7))
        x = rng.integers(-3, 4, (batch, channels, height, width)).astype(np.float32)
        w = rng.integers(-3, 4, (out_channels, channels) + kernel).astype(np.float32)
        g = rng.integers(-3, 4, _output_shape(x.shape, w.shape, geometry)).astype(np.float32)
        for got, want in zip(_grads(x, w, g, geometry), _rule(x, w, g, geometry)):
            np.testing.assert_array_equal(got, want)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_infinities_land_where_the_rule_puts_them(dtype):
    rng = np.random.default_rng(23)
    for case in range(60):
        x_shape, w_shape, geometry = _random_case(rng, stride_one=True)
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        g = rng.standard_normal(_output_shape(x_shape, w_shape, geometry)).astype(dtype)
        flat = (x, g)[case % 2].reshape(-1)
        picks = rng.integers(0, flat.size, 3)
        flat[picks[0]], flat[picks[1]], flat[picks[2]] = np.nan, np.inf, -np.inf
        for got, want in zip(_grads(x, w, g, geometry), _rule(x, w, g, geometry)):
            for test in (np.isnan, np.isposinf, np.isneginf):
                np.testing.assert_array_equal(test(got), test(want))
            finite = np.isfinite(want)
            np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


@needs_kernel
def test_padding_is_a_zero_times_the_gradient_and_a_non_finite_weight_takes_the_rule():
    """The weight's gradient multiplies the padding's zeros (an infinite gradient over a
    padded place gives NaN, as im2col's zero columns); the input's gradient of a weight with
    an infinity is the rule's (the transposed forward would multiply the gradient's padding
    by it)."""
    x = np.ones((1, 1, 3, 3), np.float32)
    g = np.ones((1, 1, 3, 3), np.float32)
    g[0, 0, 0, 0] = np.inf
    got = _weight_grad(x, g, (1, 1, 3, 3), _geometry((3, 3), (1, 1)))
    assert np.isnan(got[0, 0, 0, 0]) and np.isposinf(got[0, 0, 1, 1])
    w = np.ones((1, 1, 3, 3), np.float32)
    w[0, 0, 2, 2] = np.inf
    assert _conv._direct_input_grad(np.ones((1, 1, 3, 3), np.float32), w,
                                    _geometry((3, 3), (1, 1)), (3, 3)) is None
    geometry = _geometry((3, 3), (1, 1))
    for got, want in zip(_grads(x, w, np.ones((1, 1, 3, 3), np.float32), geometry),
                         _rule(x, w, np.ones((1, 1, 3, 3), np.float32), geometry)):
        np.testing.assert_array_equal(got, want)


@needs_kernel
def test_a_backward_without_a_graph_takes_the_kernels(monkeypatch):
    taken = []

    def counted(ctx, g):
        found = direct(ctx, g)
        taken.append(found is not None)
        return found

    direct = _conv._direct_convolution_grads
    monkeypatch.setattr(_conv, "_direct_convolution_grads", counted)
    x, w = np.ones((2, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32)
    g = np.ones((2, 4, 5, 5), np.float32)
    _grads(x, w, g, _geometry((3, 3), (1, 1)))
    assert taken == [True]
    _rule(x, w, g, _geometry((3, 3), (1, 1)))
    assert taken == [True]


@needs_kernel
def test_deterministic():
    rng = np.random.default_rng(24)
    x = rng.standard_normal((32, 16, 16, 16)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    g = rng.standard_normal((32, 32, 16, 16)).astype(np.float32)
    geometry = _geometry((3, 3), (1, 1))
    first = _grads(x, w, g, geometry)
    for _ in range(3):
        for got, want in zip(_grads(x, w, g, geometry), first):
            np.testing.assert_array_equal(got, want)


def test_the_kernels_decline_what_they_do_not_cover():
    geometry = _geometry((3, 3))
    x, g = np.ones((1, 2, 5, 5), np.float32), np.ones((1, 4, 3, 3), np.float32)
    for args in ((x.astype(np.float16), g.astype(np.float16)),   # other dtypes
                 (x, g.astype(np.float64)),                      # mixed dtypes
                 (x[..., ::2], g[..., :2]),                      # strided input
                 (x[:, :, None], g)):                            # 3-D
        assert ext_ops.direct_conv2d_weight_grad_arrays(*args, (3, 3), geometry) is None
    w = np.ones((4, 2, 3, 3), np.float32)
    assert _conv._direct_input_grad(g, w, _geometry((3, 3), stride=(2, 2)), (5, 5)) is None
    assert _conv._direct_input_grad(g, w, _geometry((3, 3), padding=(3, 0)), (9, 3)) is None
    if not RUNS:
        assert ext_ops.direct_conv2d_weight_grad_arrays(x, g, (3, 3), geometry) is None


TORCH_CASES = [
    # x shape, w shape, keyword arguments
    ((32, 3, 32, 32), (16, 3, 3, 3), {"padding": 1}),
    ((32, 16, 16, 16), (32, 16, 3, 3), {"padding": 1}),
    ((64, 1, 28, 28), (6, 1, 5, 5), {"padding": 2}),
    ((64, 6, 14, 14), (16, 6, 5, 5), {}),
    ((1, 3, 7, 5), (5, 3, 3, 2), {"padding": (1, 0)}),
    ((3, 5, 9, 11), (7, 5, 1, 1), {}),
    ((2, 4, 13, 10), (9, 4, 3, 3), {"stride": 2, "padding": 1}),
    ((2, 3, 12, 12), (4, 3, 3, 3), {"dilation": 2, "padding": 2}),
    ((1, 2, 1, 40), (3, 2, 1, 5), {"padding": (0, 2)}),
    ((5, 7, 6, 6), (17, 7, 2, 2), {}),
    ((0, 3, 5, 5), (4, 3, 3, 3), {"padding": 1}),
]


@pytest.mark.parametrize("x_shape, w_shape, arguments", TORCH_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_gradients_match_torch(x_shape, w_shape, arguments, dtype):
    """Both input layouts: contiguous, and a transposed view (copied for the kernels)."""
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    for layout in (x, np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)):
        seed = None
        results = []
        for lib in (gradviz, torch):
            xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (layout, w, b))
            out = lib.nn.functional.conv2d(xt, wt, bt, **arguments)
            if seed is None:
                seed = rng.standard_normal(tuple(out.shape)).astype(dtype)
            out.backward(lib.tensor(seed))
            results.append([xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
        tolerance = 1e-5 if dtype == "float32" else 1e-12
        for got, want in zip(*results):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tolerance,
                                       atol=tolerance * float(np.abs(want).max(initial=1)))


@pytest.mark.parametrize("arguments", [{"padding": 1}, {"padding": (2, 0), "dilation": 2},
                                       {"stride": 2}])
def test_the_gradients_match_finite_differences(arguments):
    """float64, every entry of the input and the weight: central differences of
    sum(conv2d(x, w, b) * seed)."""
    rng = np.random.default_rng(25)
    x = rng.standard_normal((2, 3, 6, 5))
    w = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal(4)
    xt, wt, bt = (gradviz.tensor(a, requires_grad=True) for a in (x, w, b))
    out = gradviz.nn.functional.conv2d(xt, wt, bt, **arguments)
    seed = rng.standard_normal(tuple(out.shape))
    out.backward(gradviz.tensor(seed))

    def loss(xa, wa):
        value = gradviz.nn.functional.conv2d(gradviz.tensor(xa), gradviz.tensor(wa),
                                             gradviz.tensor(b), **arguments)
        return float((value.numpy() * seed).sum())

    step = 1e-6
    for array, grad, at in ((x, xt.grad.numpy(), lambda a: loss(a, w)),
                            (w, wt.grad.numpy(), lambda a: loss(x, a))):
        numeric = np.empty_like(array)
        for index in np.ndindex(*array.shape):
            up, down = array.copy(), array.copy()
            up[index] += step
            down[index] -= step
            numeric[index] = (at(up) - at(down)) / (2 * step)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)
