"""erf, erfc, erfinv and the gamma family against PyTorch, over ordinary values and the
special points (±0, poles, ±inf, NaN): scipy.special computes them (Note [Special
functions] in gradviz/ops/_special.py), patched to PyTorch's conventions where they differ."""

import math

import numpy as np
import pytest
import torch

import gradviz

SPECIAL = [0.0, -0.0, -1.0, -2.0, -2.5, -0.3, 1e-8, -1e-8, 0.5, 1.0, 2.0, 3.7, 30.0, -30.5,
           math.inf, -math.inf, math.nan]


def _values(dtype):
    rng = np.random.default_rng(0)
    return np.concatenate([SPECIAL, rng.standard_normal(300) * 5]).astype(dtype)


def _assert_close(a, b, rtol):
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isposinf(a), np.isposinf(b))
    np.testing.assert_array_equal(np.isneginf(a), np.isneginf(b))
    finite = np.isfinite(a) & np.isfinite(b)
    np.testing.assert_allclose(a[finite], b[finite], rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["erf", "erfc", "lgamma", "digamma"])
def test_unary_special_functions_match_torch(name, dtype):
    x = _values(dtype)
    got = getattr(gradviz, name)(gradviz.tensor(x)).numpy()
    want = getattr(torch, name)(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    _assert_close(got, want, rtol=1e-4 if dtype == "float32" else 1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erfinv_matches_torch(dtype):
    x = np.concatenate([np.linspace(-1, 1, 201), [1.5, -1.5, math.nan, -0.0]]).astype(dtype)
    got = gradviz.erfinv(gradviz.tensor(x)).numpy()
    want = torch.erfinv(torch.tensor(x)).numpy()
    _assert_close(got, want, rtol=1e-4 if dtype == "float32" else 1e-7)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_matches_torch_away_from_its_poles(n):
    """Away from the poles (where torch's trigamma returns large finite numbers and gradviz
    inf) and +inf (where torch has NaN for even n); -inf is NaN in both, and returns."""
    x = _values("float64")
    x = x[~((x <= 0) & (x == np.floor(x))) & ~np.isposinf(x)]
    got = gradviz.polygamma(n, gradviz.tensor(x)).numpy()
    want = torch.polygamma(n, torch.tensor(x)).numpy()
    _assert_close(got, want, rtol=1e-6)
