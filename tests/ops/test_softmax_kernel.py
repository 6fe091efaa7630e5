"""Note [Softmax kernels]: softmax over the last dim with the compiled shift and scaling (exp
stays numpy's) and the compiled backward give the numpy code's bits over row lengths 1 to
300, float32 and float64 (and log_softmax's compiled shift, row sums and subtraction
the bits of its numpy code), rows with NaN (anywhere in the row maximum's vector loop),
infinities, ties and zero maxima of either sign; other dims keep numpy; and the
op still matches torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops import _activation
from gradviz_ext import ops as ext_ops

COMPILED = config()["engine"] == "compiled"
LENGTHS = list(range(1, 20)) + [23, 24, 25, 31, 32, 33, 47, 48, 49, 64, 127, 128, 129, 257, 300]


def _rows(rng, n, dtype):
    a = (rng.standard_normal((3, 4, n)) * 4).astype(dtype)
    a[0, 0] = np.round(a[0, 0])           # ties
    if n > 2:
        a[1, 1, 1] = np.nan
        a[1, 2, -1] = np.nan              # in the vector loop's last, overlapping vector
        a[1, 3, n // 2] = np.nan
        a[2, 2, 0] = np.inf
        a[2, 3, :] = -np.inf
        a[0, 1, :] = -np.abs(a[0, 1])     # a zero maximum: 0.0 and -0.0 in one row
        a[0, 1, ::3] = 0.0
        a[0, 1, 1::3] = -0.0
        a[0, 2, :] = -0.0
        a[0, 3, -1] = np.inf              # the maximum last
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernels_give_the_numpy_codes_bits(dtype, monkeypatch):
    rng = np.random.default_rng(21)
    for n in LENGTHS:
        a = _rows(rng, n, dtype)
        g = np.round(rng.standard_normal(a.shape), 1).astype(dtype)
        got = _activation._softmax_forward(a, 2)
        back = ext_ops.softmax_backward_arrays(got, g)
        assert (back is not None) == COMPILED
        with monkeypatch.context() as patch:
            patch.setattr(ext_ops, "softmax_arrays", lambda *x: None)
            want = _activation._softmax_forward(a, 2)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
        if COMPILED:
            total = np.sum(g * want, axis=2, keepdims=True)
            expected = np.subtract(g, total)
            expected *= want
            np.testing.assert_array_equal(back, expected)
            assert np.array_equal(np.signbit(back), np.signbit(expected))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_log_softmax_kernel_gives_the_numpy_codes_bits(dtype, monkeypatch):
    rng = np.random.default_rng(22)
    for n in LENGTHS:
        a = _rows(rng, n, dtype)
        for x, dim in ((a, 2), (a, -1), (a[1], 1), (a.reshape(-1), 0)):
            got = _activation._log_softmax_forward(x, dim)
            with monkeypatch.context() as patch:
                patch.setattr(ext_ops, "log_softmax_arrays", lambda *x: None)
                want = _activation._log_softmax_forward(x, dim)
            assert got.dtype == want.dtype and got.strides == want.strides
            np.testing.assert_array_equal(got, want)
            assert np.array_equal(np.signbit(got), np.signbit(want))
    assert (ext_ops.log_softmax_arrays(a) is not None) == COMPILED


def test_other_dims_and_layouts_keep_numpy():
    a = np.ones((3, 4), np.float32)
    assert ext_ops.softmax_arrays(a.T) is None
    assert ext_ops.softmax_arrays(a.astype(np.float16)) is None
    assert ext_ops.softmax_backward_arrays(a, a.astype(np.float64)) is None
    assert ext_ops.log_softmax_arrays(a.T) is None
    assert ext_ops.log_softmax_arrays(a.astype(np.float16)) is None
    np.testing.assert_allclose(_activation._log_softmax_forward(a, 0), np.full((3, 4), -np.log(3)),
                               rtol=1e-6)
    np.testing.assert_allclose(_activation._softmax_forward(a, 0), np.full((3, 4), 1 / 3))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_softmax_matches_torch(dim, name):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6, 32)).astype(np.float32)
    seed = rng.standard_normal(x.shape).astype(np.float32)
    results = []
    for lib in (gradviz, torch):
        xt = lib.tensor(x, requires_grad=True)
        out = getattr(lib, name)(xt, dim)
        out.backward(lib.tensor(seed))
        results.append((out.detach().numpy(), xt.grad.numpy()))
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
