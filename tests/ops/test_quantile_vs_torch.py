"""``quantile`` and ``nanquantile`` against PyTorch: both are torch's composition (Note [Quantile
as torch composes it]), so over shapes, dims, every interpolation, rows with NaN, ties, signed
zeros and non-contiguous inputs the values and gradients have the same bits (the linear and
midpoint modes end in ``lerp``, fused as torch's where the compiled kernel runs on a CPU with
FMA; elsewhere those values are within one rounding), and the graph (node names), shapes, strides and errors (in the same order) are torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import cpu_has

import gradviz
import gradviz_ext

# the fused kernel runs (compiled, a CPU with FMA): torch's bits; otherwise two roundings
FUSED = gradviz_ext.COMPILED and cpu_has("avx2", "fma")

MODES = ("linear", "lower", "higher", "midpoint", "nearest")
NAN = float("nan")


def _chain(t):
    names, node = [], t.grad_fn
    while node is not None:
        names.append(node.name())
        nexts = [n for n, _ in node.next_functions if n is not None]
        node = nexts[0] if nexts else None
    return names


def _arrays(dtype):
    rng = np.random.default_rng(7)
    # NaN and ties among at most 16 values: torch's sort orders equal values (and NaN) as they
    # come there only (a longer row is introsorted, not stably)
    with_nan = rng.standard_normal((3, 5))
    with_nan[0, 1] = with_nan[1, :] = with_nan[2, 4] = np.nan
    ties = np.array([[1.0, -0.0, 0.0, 1.0, -0.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
    return {
        "vector": rng.standard_normal(7),
        "odd": rng.standard_normal((3, 9, 2)),
        "nan rows": with_nan,
        "ties and zeros": ties,
        "inf": np.array([[-np.inf, 1.0, np.inf], [np.inf, np.inf, 0.5]]),
        "one": np.array([3.5]),
        "scalar": np.array(-2.0),
    }


QS = (0.0, 0.3, 0.5, 1.0, 1, 0.123456789)


def _both(fn, data, dtype, transposed=False):
    """``fn(module, x)`` in both libraries on the same values; the outputs and x's gradient
    (of the output times a fixed weight, so every position's gradient counts)."""
    results = []
    for module in (torch, gradviz):
        x = module.tensor(data, dtype=getattr(module, dtype))
        if transposed:
            x = x.t()
        x.requires_grad_()
        y = fn(module, x)
        weight = module.arange(1, y.numel() + 1, dtype=y.dtype).reshape(y.shape)
        (y * weight).sum().backward()
        results.append((y, x.grad))
    return results


def _assert_same_bits(gv, th, lerped=False):
    """The same shape, dtype and bits (NaN where torch has NaN; the sign of zeros); values
    ``lerped`` without the fused lerp within one rounding of the larger end."""
    assert tuple(gv.shape) == tuple(th.shape)
    assert gv.dtype.name == str(th.dtype).split(".")[-1]
    a, b = gv.detach().numpy(), th.detach().numpy()
    if lerped and not FUSED:
        finite = np.abs(b[np.isfinite(b)])
        scale = finite.max() if finite.size else 0.0
        np.testing.assert_allclose(a, b, rtol=0, atol=4 * np.finfo(a.dtype).eps * scale)
        return
    assert np.array_equal(a, b, equal_nan=True)
    assert np.array_equal(np.signbit(a), np.signbit(b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("mode", MODES)
def test_values_gradients_graph_and_strides_match_torch(name, mode, dtype):
    for label, data in _arrays(dtype).items():
        dims = [None] + list(range(-data.ndim, max(data.ndim, 1)))
        for dim in dims:
            for keepdim in (False, True):
                for q in QS + ("tensor",):
                    def fn(m, x, dim=dim, keepdim=keepdim, q=q):
                        qq = m.tensor([0.0, 0.25, 0.7, 1.0], dtype=x.dtype) if q == "tensor" else q
                        return getattr(m, name)(x, qq, dim=dim, keepdim=keepdim, interpolation=mode)

                    (th_y, th_g), (gv_y, gv_g) = _both(fn, data, dtype)
                    where = (label, dim, keepdim, q)
                    _assert_same_bits(gv_y, th_y, mode in ("linear", "midpoint"))
                    _assert_same_bits(gv_g, th_g)
                    assert gv_y.stride() == th_y.stride(), where
                    assert _chain(gv_y)[:-1] == _chain(th_y)[:-1], where


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_non_contiguous_input_and_method(name):
    data = np.random.default_rng(3).standard_normal((5, 4))
    data[1, 2] = np.nan
    for mode in MODES:
        def fn(m, x, mode=mode):
            return getattr(x, name)(0.4, dim=1, interpolation=mode)

        (th_y, th_g), (gv_y, gv_g) = _both(fn, data, "float32", transposed=True)
        _assert_same_bits(gv_y, th_y, mode in ("linear", "midpoint"))
        _assert_same_bits(gv_g, th_g)


def test_nanquantile_ignores_nan_and_quantile_propagates_it():
    rows = [[1.0, NAN, 3.0, 2.0], [NAN] * 4, [4.0, 1.0, 2.0, 5.0]]
    gv = gradviz.tensor(rows)
    assert gradviz.nanquantile(gv, 0.5, dim=1).tolist()[0] == 2.0
    assert np.isnan(gradviz.nanquantile(gv, 0.5, dim=1).tolist()[1])
    # one NaN in the row makes quantile's result NaN, whatever the rank
    assert np.isnan(gradviz.quantile(gv, 0.0, dim=1).tolist()[0])


ERRORS = {
    "integer input": lambda m: m.ones(3, dtype=m.long).QUANTILE(0.5),
    "half input": lambda m: m.ones(3, dtype=m.float16).QUANTILE(0.5),
    "empty": lambda m: m.zeros(0).QUANTILE(0.5),
    "empty rows, non-empty dim": lambda m: m.zeros(2, 0).QUANTILE(0.5, dim=0),
    "q above 1": lambda m: m.ones(3).QUANTILE(1.5),
    "q NaN": lambda m: m.ones(3).QUANTILE(NAN),
    "q tensor below 0": lambda m: m.ones(3).QUANTILE(m.tensor([-0.1])),
    "q tensor NaN": lambda m: m.ones(3).QUANTILE(m.tensor([NAN])),
    "q 2-D": lambda m: m.ones(3).QUANTILE(m.ones(1, 1)),
    "q of another dtype": lambda m: m.ones(3).QUANTILE(m.tensor([0.5], dtype=m.float64)),
    "q integer tensor": lambda m: m.ones(3).QUANTILE(m.tensor([0])),
    "q a list": lambda m: m.ones(3).QUANTILE([0.5]),
    "interpolation": lambda m: m.ones(3).QUANTILE(0.5, interpolation="cubic"),
    "dim out of range": lambda m: m.ones(3).QUANTILE(0.5, dim=1),
    # the order of the checks
    "q above 1 before interpolation": lambda m: m.ones(3).QUANTILE(1.5, interpolation="x"),
    "interpolation before dtype": lambda m: m.ones(3, dtype=m.long).QUANTILE(0.5, interpolation="x"),
    "empty before dtype": lambda m: m.zeros(0, dtype=m.long).QUANTILE(0.5),
    "empty before q 2-D": lambda m: m.zeros(0).QUANTILE(m.ones(1, 1)),
    "dim before q values": lambda m: m.ones(3).QUANTILE(m.tensor([2.0]), dim=2),
}


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_torch(name, case):
    def call(module):
        fn = getattr(module, name)
        code = ERRORS[case]
        try:
            code(_Renamed(module, fn))
        except Exception as error:  # noqa: BLE001
            return type(error), str(error).split("\n")[0]
        return None

    want = call(torch)
    assert want is not None
    assert call(gradviz) == want


class _Renamed:
    """The module, with ``tensor.QUANTILE(...)`` meaning ``fn(tensor, ...)``."""

    def __init__(self, module, fn):
        self._module, self._fn = module, fn

    def __getattr__(self, attr):
        value = getattr(self._module, attr)
        if attr in ("ones", "zeros"):
            fn = self._fn
            return lambda *a, **k: _Called(value(*a, **k), fn)
        return value


class _Called:
    def __init__(self, tensor, fn):
        self._tensor, self._fn = tensor, fn

    def QUANTILE(self, *args, **kwargs):  # noqa: N802
        return self._fn(self._tensor, *args, **kwargs)
