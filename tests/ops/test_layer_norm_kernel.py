"""Note [Layer norm kernel]: the compiled layer norm over the last dim gives the numpy code's
output and statistics bit for bit (row lengths 1 to 1,000, float32 and float64, with and
without weight and bias, NaN and infinities), declines other layouts, and the layer still
matches torch, gradients included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops import _nn
from gradviz_ext import ops as ext_ops

COMPILED = config()["engine"] == "compiled"
LENGTHS = list(range(1, 34)) + [63, 64, 65, 127, 128, 129, 136, 255, 256, 257, 300, 768, 1000]


def _numpy(x, weight, bias, eps, monkeypatch):
    statistics = _nn.NormStatistics()
    with monkeypatch.context() as patch:
        patch.setattr(ext_ops, "layer_norm_arrays", lambda *a: None)
        out = _nn._layer_norm_forward(x, weight, bias, (x.ndim - 1,), eps, statistics)
    return out, statistics.mean, statistics.var, statistics.rstd


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_gives_the_numpy_codes_bits(dtype, monkeypatch):
    rng = np.random.default_rng(11)
    for n in LENGTHS:
        for affine in ("both", "weight", "none"):
            x = (rng.standard_normal((3, 2, n)) * 10.0 ** int(rng.integers(-3, 4))
                 + rng.standard_normal() * 5).astype(dtype)
            if n > 3 and affine == "both":
                x[0, 0, 1], x[1, 1, 2] = np.nan, np.inf
            weight = rng.standard_normal(n).astype(dtype) if affine != "none" else None
            bias = rng.standard_normal(n).astype(dtype) if affine == "both" else None
            eps = float(rng.choice([1e-5, 1e-12, 0.1]))
            got = ext_ops.layer_norm_arrays(x, weight, bias, eps)
            if not COMPILED:
                assert got is None
                return
            if bias is None:  # the last step of either path: torch's zero bias added
                got = (_nn._plus_zero(got[0]),) + tuple(got[1:])
            for mine, theirs in zip(got, _numpy(x, weight, bias, eps, monkeypatch)):
                assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
                np.testing.assert_array_equal(mine, theirs)
                assert np.array_equal(np.signbit(mine), np.signbit(theirs))


class _Ctx:
    """What a normalization's backward on arrays reads of its node."""

    mean_ = var = None
    eps = 1e-5

    def __init__(self, x, weight, dims, statistics, needs):
        self.inputs, self.dims, self.statistics, self.needs_input_grad = (
            (x, weight), dims, statistics, needs)

    def data(self, index):
        return self.inputs[index]


def _check_backward(kernel, backward, ctx, g, monkeypatch):
    """``backward(ctx, g)`` with the compiled ``kernel`` (which must apply) gives the numpy
    code's gradients bit for bit, zero signs included."""
    got = backward(ctx, g)
    x, weight = ctx.inputs
    if COMPILED:
        assert getattr(ext_ops, kernel)(x, g, weight, ctx.statistics.mean, ctx.statistics.rstd,
                                        ctx.needs_input_grad) is not None
    with monkeypatch.context() as patch:
        patch.setattr(ext_ops, kernel, lambda *a: None)
        want = backward(ctx, g)
    for mine, theirs in zip(got, want):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert type(mine) is np.ndarray and type(theirs) is np.ndarray  # the fast rule's
            assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs)
            assert np.array_equal(np.signbit(mine), np.signbit(theirs))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, True)])
def test_the_backward_kernel_gives_the_numpy_codes_bits(dtype, needs, monkeypatch):
    rng = np.random.default_rng(12)
    for n in LENGTHS:
        for leading in ((4,), (2, 3), (1,)):
            shape = leading + (n,)
            x = (rng.standard_normal(shape) * 10.0 ** int(rng.integers(-2, 3))).astype(dtype)
            g = np.round(rng.standard_normal(shape), 1).astype(dtype)  # zeros of both signs
            g[..., 0] = -0.0
            if n > 4:
                g.reshape(-1)[3], x.reshape(-1)[2] = np.inf, np.nan
            weight = rng.standard_normal(n).astype(dtype) if needs[1] else None
            statistics = _nn.NormStatistics()
            _nn._layer_norm_forward(x, weight, None, (x.ndim - 1,), 1e-5, statistics)
            _check_backward("layer_norm_backward_arrays", _nn._layer_norm_backward_arrays,
                            _Ctx(x, weight, (x.ndim - 1,), statistics, needs), g, monkeypatch)


def test_the_kernel_declines_what_it_does_not_cover():
    x = np.ones((2, 4), np.float32)
    assert ext_ops.layer_norm_arrays(x, np.ones(4, np.float64), None, 1e-5) is None
    assert ext_ops.layer_norm_arrays(np.ones((4, 2), np.float32).T, None, None, 1e-5) is None
    assert ext_ops.layer_norm_arrays(x.astype(np.float16), None, None, 1e-5) is None
    assert ext_ops.layer_norm_arrays(np.ones((2, 0), np.float32), None, None, 1e-5) is None


@pytest.mark.parametrize("shape", [(16, 32, 64), (5, 7), (3, 130)])
def test_layer_norm_matches_torch(shape):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    weight = rng.standard_normal(shape[-1]).astype(np.float32)
    bias = rng.standard_normal(shape[-1]).astype(np.float32)
    seed = rng.standard_normal(shape).astype(np.float32)
    results = []
    for lib in (gradviz, torch):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, weight, bias))
        out = lib.nn.functional.layer_norm(xt, (shape[-1],), wt, bt)
        out.backward(lib.tensor(seed))
        results.append([out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, True)])
def test_the_batch_norm_backward_kernel_gives_the_numpy_codes_bits(dtype, needs, monkeypatch):
    """A training batch norm's backward on arrays: numpy sums each (n, c) plane pairwise and
    adds the planes in n order from 0; the kernel must give its bits, -0.0 included."""
    rng = np.random.default_rng(13)
    for shape in [(8, 16, 8, 8), (4, 3, 5, 7), (2, 3, 1, 1), (5, 4), (7, 3, 9), (1, 2, 130, 3)]:
        x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
        g = np.round(rng.standard_normal(shape), 1).astype(dtype)
        g.reshape(-1)[0] = -0.0
        weight = rng.standard_normal(shape[1]).astype(dtype) if needs[1] else None
        dims = (0,) + tuple(range(2, len(shape)))
        statistics = _nn.NormStatistics()
        _nn._batch_norm_forward(x, weight, None, dims, 1e-5, None, None, statistics)
        _check_backward("batch_norm_backward_arrays", _nn._batch_norm_backward_arrays,
                        _Ctx(x, weight, dims, statistics, needs), g, monkeypatch)
