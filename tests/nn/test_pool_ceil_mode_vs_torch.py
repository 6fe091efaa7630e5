"""``ceil_mode=True`` in 1-D and 2-D max and average pooling (and their modules), against torch:
output sizes, values, indices and gradients, with and without padding, dilation and
``count_include_pad``; a last window that hangs over the input's end is cut at the padding's
end (average pooling divides by what it covers, as torch)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import gradviz

RNG = np.random.default_rng(11)
CASES = [(h, w, k, s, p, d) for h, w, k, s, p, d in itertools.product(
    [5, 6, 7], [5, 8], [2, 3], [2, 3], [0, 1], [1, 2]) if p <= k // 2]


def _weights(lib, shape):
    return lib.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 7 - 3)


def _run(lib, x, pool):
    xt = lib.tensor(x, requires_grad=True)
    out = pool(lib, xt)
    y, indices = out if isinstance(out, tuple) else (out, None)
    (y * _weights(lib, tuple(y.shape))).sum().backward()
    return y.detach().numpy(), None if indices is None else indices.numpy(), xt.grad.numpy()


def _compare(x, pool):
    ours, theirs = _run(gradviz, x, pool), _run(torch, x, pool)
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-6)
    if theirs[1] is not None:
        np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("h, w, k, s, p, d", CASES)
def test_max_pool2d_ceil_mode_matches_torch(h, w, k, s, p, d):
    x = RNG.standard_normal((2, 3, h, w)).astype(np.float32)
    _compare(x, lambda lib, t: lib.nn.functional.max_pool2d(t, k, s, p, d, ceil_mode=True,
                                                            return_indices=True))


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("h, w, k, s, p", sorted({c[:5] for c in CASES}))
def test_avg_pool2d_ceil_mode_matches_torch(h, w, k, s, p, count_include_pad):
    x = RNG.standard_normal((2, 3, h, w)).astype(np.float32)
    _compare(x, lambda lib, t: lib.nn.functional.avg_pool2d(
        t, k, s, p, ceil_mode=True, count_include_pad=count_include_pad))


@pytest.mark.parametrize("length, k, s, p", [(7, 2, 2, 0), (8, 3, 2, 1), (10, 3, 3, 1), (5, 2, 3, 0)])
def test_1d_pools_and_modules_with_ceil_mode_match_torch(length, k, s, p):
    x = RNG.standard_normal((2, 4, length)).astype(np.float32)
    _compare(x, lambda lib, t: lib.nn.functional.max_pool1d(t, k, s, p, ceil_mode=True))
    _compare(x, lambda lib, t: lib.nn.functional.avg_pool1d(t, k, s, p, ceil_mode=True))
    image = RNG.standard_normal((1, 2, length, length)).astype(np.float32)
    _compare(image, lambda lib, t: lib.nn.MaxPool2d(k, s, p, ceil_mode=True)(t))
    _compare(image, lambda lib, t: lib.nn.AvgPool2d(k, s, p, ceil_mode=True)(t))


def test_integer_average_pooling_with_ceil_mode_matches_torch():
    x = RNG.integers(-50, 50, (1, 2, 7, 7))
    got = gradviz.nn.functional.avg_pool2d(gradviz.tensor(x), 3, 2, 1, ceil_mode=True,
                                           count_include_pad=False)
    want = torch.nn.functional.avg_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True,
                                          count_include_pad=False)
    assert got.dtype == gradviz.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
