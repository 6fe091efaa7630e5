"""Note [Direct convolution]: the compiled direct 2-D convolution forward against the column
product it replaces (the numpy/BLAS path, which stays for what the kernel does not take) and
against torch. The kernel sums in another order than BLAS (each output from +0.0 over the taps
in (c, ky, kx) order, with fused multiply-adds), so its values are not the column product's
bits: they agree within the rounding bound of a sum of the same terms, and are the same bits
where every partial sum is exact (small integers). NaN and infinities land where they land in
the column product (whether a sum is NaN, +inf or -inf does not depend on its order)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops import _conv
from gradviz_ext import ops as ext_ops

COMPILED = config()["engine"] == "compiled"
RUNS = COMPILED and ext_ops._direct_conv_enable()


def needs_kernel(test):
    """A test of the kernel where it runs (compiled, AVX-512F); elsewhere the same test checks
    that the kernel declines, so the column product computes every convolution."""
    if RUNS:
        return test

    @functools.wraps(test)
    def declined(*args, **kwargs):
        x, w = np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32)
        geometry = _geometry((2, 2))
        assert ext_ops.direct_conv2d_arrays(x, w, None, geometry, geometry.blocks(3, 3)) is None

    return declined


def _geometry(kernel, padding=(0, 0), stride=(1, 1), dilation=(1, 1)):
    return _conv._Geometry(kernel, dilation, padding, stride)


def _column_product(monkeypatch, x, w, b, geometry):
    """The forward without the kernel: the wide columns or im2col and one matmul."""
    with monkeypatch.context() as patch, np.errstate(invalid="ignore"):
        patch.setattr(ext_ops, "direct_conv2d_arrays", lambda *a: None)
        return _conv._conv_forward(x, w, b, geometry)


def _direct(x, w, b, geometry):
    out = ext_ops.direct_conv2d_arrays(x, w, b, geometry, geometry.blocks(*x.shape[2:]))
    assert out is not None
    return out


def _assert_within_rounding(monkeypatch, got, x, w, b, geometry):
    """|got - column product| within twice the bound of either sum's rounding error: each of
    the C * kh * kw + 1 additions errs by at most eps times the sum of the terms' magnitudes."""
    want = _column_product(monkeypatch, x, w, b, geometry)
    assert got.shape == want.shape and got.dtype == want.dtype
    magnitude = _column_product(monkeypatch, np.abs(x), np.abs(w),
                                None if b is None else np.abs(b), geometry)
    terms = w[0].size + 1
    bound = 2 * terms * np.finfo(x.dtype).eps * magnitude
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


def _random_case(rng):
    """A random 2-D convolution: batch, channels, sizes, kernel, padding, stride, dilation."""
    while True:
        n, c, o = int(rng.integers(1, 4)), int(rng.integers(1, 9)), int(rng.integers(1, 40))
        kernel = tuple(int(k) for k in rng.integers(1, 6, 2))
        padding = tuple(int(p) for p in rng.integers(0, 3, 2))
        stride = tuple(int(s) for s in rng.integers(1, 3, 2))
        dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
        size = tuple(int(s) for s in rng.integers(1, 24, 2))
        geometry = _geometry(kernel, padding, stride, dilation)
        if min(geometry.blocks(*size)) > 0:
            return (n, c) + size, (o, c) + kernel, geometry


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_agrees_with_the_column_product_within_rounding(dtype, monkeypatch):
    rng = np.random.default_rng(11)
    for case in range(150):
        x_shape, w_shape, geometry = _random_case(rng)
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal(w_shape[0]).astype(dtype) if case % 3 else None
        _assert_within_rounding(monkeypatch, _direct(x, w, b, geometry), x, w, b, geometry)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_sums_give_the_column_products_bits(dtype, monkeypatch):
    """Small integers: every partial sum is exact in any order, so both paths give the same
    bits, whatever the lanes, blocks and tails."""
    rng = np.random.default_rng(12)
    for case in range(150):
        x_shape, w_shape, geometry = _random_case(rng)
        x = rng.integers(-4, 5, x_shape).astype(dtype)
        w = rng.integers(-4, 5, w_shape).astype(dtype)
        b = rng.integers(-4, 5, w_shape[0]).astype(dtype) if case % 2 else None
        got = _direct(x, w, b, geometry)
        want = _column_product(monkeypatch, x, w, b, geometry)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@needs_kernel
@pytest.mark.parametrize("channels, out_channels", [(1, 1), (1, 6), (3, 16), (6, 16),
                                                    (5, 7), (16, 32), (2, 17), (4, 25)])
@pytest.mark.parametrize("kernel, padding", [((1, 1), (0, 0)), ((3, 3), (1, 1)),
                                             ((5, 5), (2, 2)), ((5, 5), (0, 0)),
                                             ((2, 3), (1, 0)), ((1, 4), (0, 2))])
def test_every_output_width_from_1_to_40(channels, out_channels, kernel, padding, monkeypatch):
    """Output widths 1..40 (tails of the 16-lane vectors, vectors across rows), channel
    counts that are not multiples of any register block, in float32."""
    rng = np.random.default_rng(channels * 100 + out_channels)
    for width in range(1, 41):
        geometry = _geometry(kernel, padding)
        in_width = width + kernel[1] - 1 - 2 * padding[1]
        if in_width < 1:
            continue
        x = rng.standard_normal((2, channels, 3 + kernel[0], in_width)).astype(np.float32)
        w = rng.standard_normal((out_channels, channels) + kernel).astype(np.float32)
        b = rng.standard_normal(out_channels).astype(np.float32)
        got = _direct(x, w, b, geometry)
        assert got.shape[3] == width
        _assert_within_rounding(monkeypatch, got, x, w, b, geometry)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_infinities_land_where_the_column_product_puts_them(dtype, monkeypatch):
    rng = np.random.default_rng(13)
    for case in range(60):
        x_shape, w_shape, geometry = _random_case(rng)
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal(w_shape[0]).astype(dtype)
        target = (x, w, b)[case % 3]
        flat = target.reshape(-1)
        picks = rng.integers(0, flat.size, 3)
        flat[picks[0]], flat[picks[1]], flat[picks[2]] = np.nan, np.inf, -np.inf
        got = _direct(x, w, b, geometry)
        want = _column_product(monkeypatch, x, w, b, geometry)
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(got), test(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


@needs_kernel
def test_padding_is_a_zero_times_the_weight():
    """An infinite weight over a padded place gives NaN (0 * inf), as the column product."""
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.ones((1, 1, 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf
    out = _direct(x, w, None, _geometry((3, 3), (1, 1)))
    assert np.isnan(out[0, 0, 0, 0]) and np.isposinf(out[0, 0, 1, 1])


@needs_kernel
def test_non_contiguous_operands_and_an_empty_batch(monkeypatch):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((6, 9, 4, 3)).astype(np.float32).transpose(2, 3, 0, 1)[:, :, ::2]
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32).transpose(0, 1, 3, 2)
    b = rng.standard_normal(10).astype(np.float32)[::2]
    geometry = _geometry((3, 3), (1, 1))
    got = _conv._conv_forward(x, w, b, geometry)
    want = _direct(np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(b),
                   geometry)
    np.testing.assert_array_equal(got, want)
    empty = _conv._conv_forward(np.zeros((0, 3, 5, 5), np.float32), w, b, geometry)
    assert empty.shape == (0, 5, 5, 5) and empty.dtype == np.float32


def test_the_kernel_declines_what_it_does_not_cover():
    geometry = _geometry((3, 3))
    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((4, 2, 3, 3), np.float32)
    for args in ((x.astype(np.float16), w.astype(np.float16)),   # other dtypes
                 (x, w.astype(np.float64)),                      # mixed dtypes
                 (x[..., ::2], w[..., :2]),                      # strided input
                 (x, np.ones((4, 1, 3, 3), np.float32))):        # grouped weight
        assert ext_ops.direct_conv2d_arrays(*args, None, geometry, (3, 3)) is None
    wide = _geometry((1, 65))
    assert ext_ops.direct_conv2d_arrays(np.ones((1, 1, 1, 70), np.float32),
                                        np.ones((1, 1, 1, 65), np.float32), None, wide,
                                        (1, 6)) is None
    if not RUNS:
        assert ext_ops.direct_conv2d_arrays(x, w, None, geometry, (3, 3)) is None


TORCH_CASES = [
    # x shape, w shape, keyword arguments
    ((64, 1, 28, 28), (6, 1, 5, 5), {"padding": 2}),
    ((64, 6, 14, 14), (16, 6, 5, 5), {}),
    ((32, 3, 32, 32), (16, 3, 3, 3), {"padding": 1}),
    ((32, 16, 16, 16), (32, 16, 3, 3), {"padding": 1}),
    ((1, 3, 7, 5), (5, 3, 3, 2), {"padding": (1, 0)}),
    ((3, 5, 9, 11), (7, 5, 1, 1), {}),
    ((2, 4, 13, 10), (9, 4, 3, 3), {"stride": 2, "padding": 1}),
    ((2, 3, 12, 12), (4, 3, 3, 3), {"dilation": 2, "padding": 2}),
    ((1, 2, 1, 40), (3, 2, 1, 5), {"padding": (0, 2)}),
    ((5, 7, 6, 6), (17, 7, 2, 2), {}),
]


@needs_kernel
@pytest.mark.parametrize("x_shape, w_shape, arguments", TORCH_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_convolution_and_its_gradients_match_torch(x_shape, w_shape, arguments, dtype):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    seed = None
    results = []
    for lib in (gradviz, torch):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        out = lib.nn.functional.conv2d(xt, wt, bt, **arguments)
        if seed is None:
            seed = rng.standard_normal(tuple(out.shape)).astype(dtype)
        out.backward(lib.tensor(seed))
        results.append([out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(*results):  # the weight's gradient sums N * oh * ow terms
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tolerance,
                                   atol=tolerance * float(np.abs(want).max()))


@needs_kernel
def test_a_1d_convolution_takes_the_kernel_and_matches_torch():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((3, 4, 29)).astype(np.float32)
    w = rng.standard_normal((6, 4, 5)).astype(np.float32)
    results = []
    for lib in (gradviz, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        out = lib.nn.functional.conv1d(xt, wt, padding=2)
        out.sum().backward()
        results.append([out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
