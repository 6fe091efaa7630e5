"""torch.mode, torch.tensor of integers beyond int64 beside floats, and F.gelu at +-inf / NaN,
against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gradviz


def same(a, b, what=""):
    a = a.detach().numpy() if isinstance(a, gradviz.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, equal_nan=True, err_msg=what)


# ---- mode -------------------------------------------------------------------------------------

MODE_DATA = [
    [[1.0, 2.0, 2.0, 3.0], [3.0, 3.0, 1.0, 1.0], [5.0, 4.0, 4.0, 5.0]],
    [[2.0, 7.0, 7.0], [7.0, 2.0, 2.0], [0.5, 0.5, 0.5]],
    [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]],
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("case", range(len(MODE_DATA)))
def test_mode_values_indices_and_gradients(case, dim, keepdim):
    shape = tuple(torch.mode(torch.tensor(MODE_DATA[case]), dim, keepdim=keepdim).values.shape)
    weights = np.random.default_rng(case).standard_normal(shape)
    results = []
    for m in (gradviz, torch):
        x = m.tensor(MODE_DATA[case], dtype=m.float64, requires_grad=True)
        result = m.mode(x, dim, keepdim=keepdim)
        weight = m.tensor(weights, requires_grad=True)
        gx, = m.autograd.grad((result.values * weight).sum(), x, create_graph=True)
        probe = m.tensor(np.arange(x.numel(), dtype=np.float64).reshape(tuple(x.shape)))
        gw, = m.autograd.grad((gx * probe).sum(), weight)
        results.append((result.values, result.indices, gx, gw, result.values.grad_fn.name(),
                        type(result).__name__, x.mode(dim, keepdim).indices))
    g, t = results
    for i in range(4):
        same(g[i], t[i], f"item {i}")
    same(g[6], t[6], "method")
    assert g[4:6] == t[4:6] == ("ModeBackward0", "mode")


@pytest.mark.parametrize("data", [[1, 1, 2, 2, 3], [True, False, True], [2.0, math.nan, math.nan, 1.0],
                                  [3.0, 3.0, math.nan], [4, 1, 4, 1, 1, 4], 3.5, [[9]]])
def test_mode_default_dim_ties_nan_and_dtypes(data):
    g, t = gradviz.mode(gradviz.tensor(data)), torch.mode(torch.tensor(data))
    same(g.values, t.values, "values")
    same(g.indices, t.indices, "indices")
    assert repr(g).replace("gradviz", "torch") == repr(t)


def test_mode_errors_match_torch():
    for m in (torch, gradviz):
        with pytest.raises(IndexError, match="mode\\(\\): Expected reduction dim 0 to have non-zero size"):
            m.mode(m.tensor([]))
        with pytest.raises(IndexError, match="Dimension out of range"):
            m.mode(m.ones(2, 3), 2)


# ---- torch.tensor with integers beyond int64 ---------------------------------------------------

BIG = [
    ([1.5, 2 ** 70], None), ([2 ** 70, 1.5], None), ([[1.5], [2 ** 70]], None), ([1.5, -2 ** 70], None),
    ([1.5, 2 ** 70], "float64"), ([1, 2 ** 70], "float32"), (2 ** 70, "float64"),
    ([2 ** 64, 2.5], "float16"), ([1.5, 2 ** 200], None), ([1.5, 2 ** 200], "float64"),
    ([True, 2 ** 70], "bool"), ([1.5, 2 ** 70], "bool"),
]


@pytest.mark.parametrize("data,dtype", BIG)
def test_tensor_reads_big_ints_as_floats_like_torch(data, dtype):
    g = gradviz.tensor(data, dtype=getattr(gradviz, dtype) if dtype else None)
    t = torch.tensor(data, dtype=getattr(torch, dtype) if dtype else None)
    same(g, t)
    assert repr(g).replace("gradviz", "torch") == repr(t)


@pytest.mark.parametrize("data,dtype,error,phrase", [
    ([1, 2 ** 70], None, ValueError, "Overflow when unpacking long long"),
    (2 ** 70, None, ValueError, "Overflow when unpacking long long"),
    ([True, 2 ** 70], None, ValueError, "Overflow when unpacking long long"),
    ([1.5, 2 ** 70], "int64", ValueError, "Overflow when unpacking long long"),
    ([1.5, 2 ** 70], "int32", ValueError, "Overflow when unpacking long long"),
    ([1.5, 2 ** 1030], None, OverflowError, "int too large to convert to float"),
    ([1.5, 2 ** 1030], "float64", OverflowError, "int too large to convert to float"),
    ([1.5, 2 ** 70, "a"], None, TypeError, "invalid data type 'str'"),
])
def test_tensor_big_int_errors_match_torch(data, dtype, error, phrase):
    for m in (torch, gradviz):
        with pytest.raises(error, match=phrase):
            m.tensor(data, dtype=getattr(m, dtype) if dtype else None)


# ---- gelu at +-inf and NaN -----------------------------------------------------------------------

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("make", [
    lambda m, d: m.tensor([INF, -INF, NAN, 1.0, -30.0, 30.0], dtype=d),
    lambda m, d: m.tensor(INF, dtype=d),
    lambda m, d: m.tensor([INF], dtype=d),
    lambda m, d: m.tensor([-INF], dtype=d),
    lambda m, d: m.tensor([[INF, 1.0, 2.0], [3.0, INF, NAN]], dtype=d).t(),
    lambda m, d: m.tensor([[INF, 1.0, 2.0], [3.0, INF, NAN]], dtype=d)[:, 0],
    lambda m, d: m.tensor([INF, 1.0] * 20, dtype=d),
], ids=["mixed", "scalar", "one", "one_neg", "transposed", "column", "long"])
def test_gelu_at_infinities_and_nan_matches_torch(make, dtype, approximate):
    g = gradviz.nn.functional.gelu(make(gradviz, getattr(gradviz, dtype)), approximate=approximate)
    t = torch.nn.functional.gelu(make(torch, getattr(torch, dtype)), approximate=approximate)
    a, b = g.numpy(), t.numpy()
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a) & (a > 0), np.isinf(b) & (b > 0))
    tol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_gradients_at_infinities_match_torch(dtype, approximate):
    results = []
    for m in (gradviz, torch):
        x = m.tensor([INF, -INF, NAN, 1.0, -30.0, 30.0], dtype=getattr(m, dtype), requires_grad=True)
        g, = m.autograd.grad(m.nn.functional.gelu(x, approximate=approximate).sum(), x, create_graph=True)
        gg, = m.autograd.grad(g.sum(), x)
        results.append((g, gg))
    for i, (a, b) in enumerate(zip(*results)):
        same(a, b, f"order {i + 1}")
