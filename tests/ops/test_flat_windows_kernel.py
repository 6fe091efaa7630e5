"""Note [Flat windows]: the compiled wide columns (im2col) and their adjoint (col2im) of a
stride-1 2-D convolution give the numpy paths' bits, over random sizes, kernels, dilations and
paddings, float32 and float64, with NaN, infinities and negative zeros; 3-D windows and other
dtypes keep numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops import _conv
from gradviz.ops import _flat_windows as flat
from gradviz_ext import ops as ext_ops

COMPILED = config()["engine"] == "compiled"


def _cases(count, seed):
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        shape = tuple(int(v) for v in (rng.integers(1, 4), rng.integers(1, 5),
                                       rng.integers(1, 12), rng.integers(1, 12)))
        kernel = tuple(int(k) for k in rng.integers(1, 6, 2))
        dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
        padding = tuple(int(p) for p in rng.integers(0, 3, 2))
        windows = flat.flat_windows(_conv._Geometry(kernel, dilation, padding, (1, 1),
                                                    ceil_mode=False), shape[2:])
        if windows is not None:
            found.append((shape, windows))
    return found


def _special(rng, shape, dtype):
    a = np.round(rng.standard_normal(shape), 2).astype(dtype)
    flat_view = a.reshape(-1)
    picks = rng.integers(0, a.size, 3)
    flat_view[picks[0]], flat_view[picks[1]], flat_view[picks[2]] = np.nan, -np.inf, -0.0
    return a


def _numpy(monkeypatch, function, *args):
    with monkeypatch.context() as patch:
        patch.setattr(ext_ops, "unfold_wide_arrays", lambda *a: None)
        patch.setattr(ext_ops, "fold_wide_arrays", lambda *a: None)
        return function(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_compiled_columns_and_their_adjoint_give_the_numpy_paths_bits(dtype, monkeypatch):
    rng = np.random.default_rng(7)
    checked = 0
    for shape, windows in _cases(120, 8):
        x = _special(rng, shape, dtype)
        cols = flat._unfold_wide(x, windows)
        want = _numpy(monkeypatch, flat._unfold_wide, x, windows)
        np.testing.assert_array_equal(cols, want)
        assert np.array_equal(np.signbit(cols), np.signbit(want))
        back = _special(rng, cols.shape, dtype)
        got = flat._fold_wide(back, windows)
        want = _numpy(monkeypatch, flat._fold_wide, back, windows)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
        checked += ext_ops.unfold_wide_arrays(x, windows) is not None
    assert checked == (120 if COMPILED else 0)


def test_the_kernels_decline_what_they_do_not_cover():
    windows = flat.flat_windows(_conv._Geometry((2, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1),
                                                ceil_mode=False), (3, 3, 3))
    assert ext_ops.unfold_wide_arrays(np.ones((1, 1, 3, 3, 3), np.float32), windows) is None
    windows = flat.flat_windows(_conv._Geometry((2, 2), (1, 1), (0, 0), (1, 1), ceil_mode=False),
                                (3, 3))
    assert ext_ops.unfold_wide_arrays(np.ones((1, 1, 3, 3), np.float16), windows) is None
    assert ext_ops.unfold_wide_arrays(np.ones((1, 1, 3, 6), np.float32)[..., ::2], windows) is None


@pytest.mark.parametrize("padding, dilation", [(1, 1), (0, 2), (2, 1)])
def test_a_convolution_over_the_compiled_windows_matches_torch(padding, dilation):
    rng = np.random.default_rng(padding + 3 * dilation)
    x = rng.standard_normal((3, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    seed = None
    results = []
    for lib in (gradviz, torch):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        out = lib.nn.functional.conv2d(xt, wt, bt, padding=padding, dilation=dilation)
        if seed is None:
            seed = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        out.backward(lib.tensor(seed))
        results.append([out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
