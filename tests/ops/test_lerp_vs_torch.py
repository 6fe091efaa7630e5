"""``lerp`` against PyTorch: torch's kernel starts from the nearer end, ``fma(w, end - start,
start)`` for ``|w| < 0.5`` else ``fma(w - 1, end - start, end)``, so the values have its bits on
a CPU with FMA (the one these tests expect; Note [Whole-array kernels] in gradviz_ext/_ops.py),
infinities included (``lerp(1, inf, 0.7)`` is NaN); gradients, dtypes and errors are torch's.
Without the kernel (no FMA, float16) the same formula in two roundings agrees within one
rounding and on every NaN and infinity. addcmul's fused multiply-add (the same kernels) and
addcdiv's order of operations are torch's too."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import cpu_has

import gradviz
import gradviz_ext
from gradviz.ops import _math

INF, NAN = float("inf"), float("nan")


# the fused kernel runs (compiled, a CPU with FMA): torch's bits; otherwise two roundings
FUSED = gradviz_ext.COMPILED and cpu_has("avx2", "fma")


def _values(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    special = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 1e30, -1e-30, 0.5, 2.0, 3.0]
    x[:12] = special[:n]
    return x


def _weights(n, seed):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1.5, 2.5, n)
    special = [0.0, -0.0, 0.5, -0.5, 0.49999997, 1.0, 1.5, -1.0, NAN, INF, -INF, 0.7, 0.3, 0.25]
    w[:14] = special[:n]
    return w


def _same_bits(a, b):
    return np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))


def _same_values(a, b, scale=None):
    """Torch's bits with the fused kernel; without it NaN and infinities where torch has them
    and the rest within one rounding of ``scale`` (the operands' size; by default the larger
    end, the result's largest)."""
    if FUSED:
        return _same_bits(a, b)
    finite = np.isfinite(a) & np.isfinite(b)
    if scale is None:
        scale = np.max(np.abs(b[finite]), initial=0.0)
    return (np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~finite & ~np.isnan(a)], b[~finite & ~np.isnan(b)])
            and bool((np.abs(a[finite] - b[finite]) <= 4 * np.finfo(a.dtype).eps * scale).all()))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 7, 14, 33, 1000])
def test_tensor_weight_values_and_gradients_match_torch_bit_for_bit(dtype, n):
    start, end, weight = _values(n, 1), np.roll(_values(n, 2), 5), _weights(n, 3)
    results = []
    for m in (torch, gradviz):
        s, e, w = (m.tensor(a, dtype=getattr(m, dtype), requires_grad=True) for a in (start, end, weight))
        y = m.lerp(s, e, w)
        y.backward(m.arange(1, n + 1, dtype=y.dtype))
        results.append([y.detach().numpy(), s.grad.numpy(), e.grad.numpy(), w.grad.numpy(), y.grad_fn.name()])
    for i, (th, gv) in enumerate(zip(*results)):
        same = _same_values if i == 0 else _same_bits
        assert same(gv, th) if isinstance(th, np.ndarray) else gv == th


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("weight", [0.0, -0.0, 0.3, 0.49999999, 0.5, 0.7, 1.0, -0.25, 1.75, 1, NAN, INF])
def test_number_weight_matches_torch_bit_for_bit(dtype, weight):
    start, end = _values(50, 4), np.roll(_values(50, 5), 3)
    results = []
    for m in (torch, gradviz):
        s, e = (m.tensor(a, dtype=getattr(m, dtype), requires_grad=True) for a in (start, end))
        y = m.lerp(s, e, weight)
        y.backward(m.arange(1, 51, dtype=y.dtype))
        results.append([y.detach().numpy(), s.grad.numpy(), e.grad.numpy(), y.grad_fn.name()])
    for i, (th, gv) in enumerate(zip(*results)):
        same = _same_values if i == 0 else _same_bits
        assert same(gv, th) if isinstance(th, np.ndarray) else gv == th


@pytest.mark.parametrize("case", ["broadcast", "transposed", "0-dim double weight", "in place", "0-dim"])
def test_layouts_match_torch_bit_for_bit(case):
    a, b, w = _values(12, 6).reshape(3, 4), _values(12, 7).reshape(3, 4), _weights(12, 8).reshape(3, 4)
    outs = []
    for m in (torch, gradviz):
        s, e, x = m.tensor(a, dtype=m.float32), m.tensor(b, dtype=m.float32), m.tensor(w, dtype=m.float32)
        if case == "broadcast":
            out = m.lerp(s[:, :1], e[0], x)
        elif case == "transposed":
            out = m.lerp(s.t(), e.t(), x.t())
        elif case == "0-dim double weight":
            out = m.lerp(s, e, m.tensor(0.6, dtype=m.float64))
        elif case == "0-dim":
            out = m.stack([m.lerp(s[0, 0], e[0, 1], x[0, 2]), m.lerp(s[1, 0], e[1, 1], 0.75)])
        else:
            out = s.clone()
            out.lerp_(e.t().contiguous().t(), 0.8)
        outs.append((out.numpy(), out.dtype.__repr__().split(".")[-1]))
    assert _same_values(outs[1][0], outs[0][0]) and outs[1][1] == outs[0][1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_formula_without_the_kernel_is_within_one_rounding(dtype, monkeypatch):
    start, end, weight = (x.astype(dtype) for x in (_values(500, 9), _values(500, 10), _weights(500, 11)))
    fused = _math._lerp_forward(start, end, weight)
    monkeypatch.setattr(_math._ext_ops, "lerp", lambda *args: None)
    with np.errstate(invalid="ignore"):  # inf - inf, as gradviz's ops run it
        plain = _math._lerp_forward(start, end, weight)
    assert plain.dtype == fused.dtype == dtype
    assert np.array_equal(np.isnan(plain), np.isnan(fused))
    finite = np.isfinite(fused)
    assert np.array_equal(plain[~finite & ~np.isnan(fused)], fused[~finite & ~np.isnan(fused)])
    # one more rounding, of a product no larger than the operands
    scale = np.maximum(np.abs(start), np.abs(end))[finite]
    assert (np.abs(plain[finite] - fused[finite]) <= 4 * np.finfo(dtype).eps * scale).all()


ERRORS = [
    lambda m: m.lerp(m.ones(2), m.ones(2, dtype=m.float64), 0.5),
    lambda m: m.lerp(m.ones(2, dtype=m.float64), m.ones(2), 0.5),
    lambda m: m.lerp(m.ones(2), m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: m.lerp(m.ones(2), m.ones(2), m.ones(2, dtype=m.float16)),
    lambda m: m.lerp(m.ones(2, dtype=m.long), m.ones(2, dtype=m.long), 1),
    lambda m: m.lerp(m.ones(2, dtype=m.long), m.ones(2, dtype=m.long), m.ones(2, dtype=m.long)),
    lambda m: m.lerp(m.ones(2, dtype=m.bool), m.ones(2, dtype=m.bool), 1),
    lambda m: m.lerp(m.ones(2), m.ones(3), 0.5),
    lambda m: m.lerp(m.ones(2), m.ones(2), m.ones(3)),
    lambda m: m.lerp(m.ones(2, 1), m.ones(3), m.ones(4)),
    lambda m: m.ones(2).lerp_(m.ones(2, 2), 0.5),
    lambda m: m.lerp(m.ones(2), 1.0, 0.5),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_match_torch(index):
    def error(m):
        try:
            ERRORS[index](m)
        except Exception as e:  # noqa: BLE001
            return type(e), str(e).split("\n")[0]
        return None

    assert error(torch) is not None
    assert error(gradviz) == error(torch)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("value", [0.3, 1, 2.5, -1])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("broadcast", [False, True, "0-d"])
def test_addcmul_and_addcdiv_match_torch(dtype, value, name, broadcast):
    """addcmul is torch's ``input + (value * tensor1) * tensor2`` with the last multiply and
    add fused (the same kernel as lerp's: torch's bits with it), addcdiv ``input + (value *
    tensor1) / tensor2``; the gradients are torch's formulas (``grad * (value / tensor2)`` a
    division): their bits, but for a broadcast operand's, summed over the rows (gradviz's sum
    and torch's add in other orders)."""
    arrays = [_values(400, 16 + i).reshape(40, 10) for i in range(3)]
    if broadcast == "0-d":
        arrays = [a[3, 5] for a in arrays]
    elif broadcast:
        arrays[2] = arrays[2][0]
    weight = np.linspace(-1, 1, 400).reshape(40, 10) if broadcast != "0-d" else np.array(0.75)
    results = []
    for m in (torch, gradviz):
        inputs = [m.tensor(a, dtype=getattr(m, dtype), requires_grad=True) for a in arrays]
        y = getattr(m, name)(*inputs, value=value)
        y.backward(m.tensor(weight, dtype=y.dtype))
        results.append([y.detach().numpy()] + [t.grad.numpy() for t in inputs])
    (ty, *tg), (gy, *gg) = results
    if name == "addcmul":
        sizes = [np.max(np.abs(a[np.isfinite(a)]), initial=0.0) for a in arrays]
        assert _same_values(gy, ty, scale=sizes[0] + abs(value) * sizes[1] * sizes[2])
    else:
        assert _same_bits(gy, ty)
    for i, (got, want) in enumerate(zip(gg, tg)):
        if broadcast is True and i == 2:
            np.testing.assert_allclose(got, want, rtol=1e-5, equal_nan=True)
        else:
            assert _same_bits(got, want), i
