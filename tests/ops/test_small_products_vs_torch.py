"""The ``beta * input + alpha * product`` family and small batched products against torch 2.13.

* bmm (and matmul of batched operands) of small matrices, inner * rows * columns < 400, sums
  each entry in torch's loop order (Note [Small batched products]): torch's bits, gradients
  included; the compiled loop and the interpreted numpy loop give the same bits.
* addmm with a beta or an alpha other than 1 is one ``AddmmBackward0`` node saving them; beta 0
  ignores the input (NaN and inf included) and alpha 0 the product (NaN in its operands too),
  as BLAS, for addmm, addmv, addbmm and baddbmm (baddbmm's small loop computes ``alpha * sum``,
  so there the product's NaN stays); addr is torch's elementwise kernel (``(alpha * vec1) *
  vec2``, ``beta * input`` fused in).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.ops import _linalg

NAN, INF = float("nan"), float("inf")
DTYPES = ["float32", "float64"]


def _arrays(result):
    return [t.detach().numpy().copy() if hasattr(t, "detach") else t for t in result]


def _assert_same(gv, th):
    for a, b in zip(gv, th, strict=True):
        if isinstance(b, str):
            assert a == b
            continue
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=True)
        assert np.array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)]))


def _assert_close(gv, th):
    """NaN and infinities where torch has them, other values within a few roundings: the
    products beside small bmm are numpy's BLAS and torch's, whose sums may round differently."""
    for a, b in zip(gv, th, strict=True):
        if isinstance(b, str):
            assert a == b
            continue
        assert a.shape == b.shape and a.dtype == b.dtype
        finite = np.abs(b[np.isfinite(b)])
        scale = finite.max() if finite.size else 0.0  # a sum that cancels: the terms' scale
        np.testing.assert_allclose(a, b, rtol=0, atol=8 * np.finfo(b.dtype).eps * scale,
                                   equal_nan=True)


def _both(fn):
    return _arrays(fn(gradviz)), _arrays(fn(torch))


SHAPES = [((50, 3, 5), (50, 5, 4)), ((2, 3, 2), (2, 2, 3)), ((4, 1, 399), (4, 399, 1)),
          ((3, 7, 8), (3, 8, 7)), ((2, 0, 3), (2, 3, 4)), ((2, 3, 0), (2, 0, 4)),
          ((4, 16, 16), (4, 16, 16))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_bmm_and_its_gradients_bit_for_bit(dtype, shapes):
    rng = np.random.default_rng(5)
    first, second = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])

    def fn(m):
        a = m.tensor(first, dtype=getattr(m, dtype), requires_grad=True)
        b = m.tensor(second, dtype=getattr(m, dtype), requires_grad=True)
        y = m.bmm(a, b)
        y.backward(y.detach() * 0.5 + 1)
        transposed = a.detach().transpose(1, 2).contiguous().transpose(1, 2)
        return [y, a.grad, b.grad, transposed @ b.detach()]

    _assert_same(*_both(fn))


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_matmul_of_small_heads(dtype):
    rng = np.random.default_rng(6)
    q, k = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 3, 4))

    def fn(m):
        query = m.tensor(q, dtype=getattr(m, dtype), requires_grad=True)
        key = m.tensor(k, dtype=getattr(m, dtype), requires_grad=True)
        scores = query @ key.transpose(-2, -1)
        scores.sum().backward()
        return [scores, query.grad, key.grad]

    _assert_same(*_both(fn))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_compiled_loop_gives_the_numpy_loops_bits(dtype, monkeypatch):
    rng = np.random.default_rng(7)
    for rows, inner, columns in [(3, 5, 4), (1, 399, 1), (7, 8, 7), (2, 1, 3)]:
        a = rng.standard_normal((5, rows, inner)).astype(dtype)
        b = rng.standard_normal((5, inner, columns)).astype(dtype)
        c = rng.standard_normal((5, rows, columns)).astype(dtype)
        a[0, 0, 0], b[1, 0, 0], c[2, 0, 0] = NAN, INF, NAN
        cases = [(None, 1, 1), (c, 0.0, 1.0), (c, 0.5, -2.0), (c[:1], 1.0, 0.0), (c, 0, 0)]
        compiled = [_linalg.batched_product(a, b, *case) for case in cases]
        with monkeypatch.context() as patch:
            patch.setattr(_linalg._ext_ops, "small_bmm", lambda *args: None)
            with np.errstate(invalid="ignore"):
                interpreted = [_linalg.batched_product(a, b, *case) for case in cases]
        _assert_same(compiled, interpreted)


FACTORS = [(0, 1), (0.0, 2.0), (-0.0, 1), (1, 0), (0, 0), (0.5, 0.0), (1, 1), (0.5, 2.0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta, alpha", FACTORS)
def test_addmm_factors_nan_and_node(dtype, beta, alpha):
    rng = np.random.default_rng(8)
    bias = np.array([[NAN, INF, 1.0], [-INF, 2.0, -0.0]])
    for mat1 in (rng.standard_normal((2, 4)), np.full((2, 4), NAN), np.zeros((2, 4))):
        def fn(m, mat1=mat1):
            inp = m.tensor(bias, dtype=getattr(m, dtype), requires_grad=True)
            a = m.tensor(mat1, dtype=getattr(m, dtype), requires_grad=True)
            b = m.tensor(np.arange(12.0).reshape(4, 3) / 7, dtype=getattr(m, dtype),
                         requires_grad=True)
            y = m.addmm(inp, a, b, beta=beta, alpha=alpha)
            y.backward(m.ones_like(y))
            node = y.grad_fn
            return [y, inp.grad, a.grad, b.grad, node.name(), str(node._saved_alpha),
                    str(node._saved_beta)]

        _assert_close(*_both(fn))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta, alpha", FACTORS)
def test_addmv_addr_baddbmm_factors_and_nan(dtype, beta, alpha):
    rng = np.random.default_rng(9)
    mat_values = np.full((3, 2), NAN) if alpha == 0 else rng.standard_normal((3, 2))
    small = rng.standard_normal((2, 2, 3))

    def fn(m):
        t = lambda a: m.tensor(a, dtype=getattr(m, dtype), requires_grad=True)  # noqa: E731
        inp, mat, vec = t([NAN, INF, -0.0]), t(mat_values), t([0.5, -1.5])
        outs = [m.addmv(inp, mat, vec, beta=beta, alpha=alpha)]
        table, u, v = t([[NAN, 1.0, -0.0], [2.0, -0.0, INF]]), t([0.7, -1.3]), t([0.3, -0.0, 2.1])
        outs.append(m.addr(table, u, v, beta=beta, alpha=alpha))
        batch = t(np.stack([[[NAN, 1.0], [-0.0, 2.0]], [[INF, -0.0], [0.5, -1.0]]]))
        outs.append(m.baddbmm(batch, t(small), t(np.swapaxes(small, 1, 2)), beta=beta, alpha=alpha))
        grads = []
        for out in outs:
            leaves = [leaf for leaf in (inp, mat, vec, table, u, v, batch) if leaf.requires_grad]
            grads += [g for g in m.autograd.grad(out.sum(), leaves, allow_unused=True) if g is not None]
        return outs + grads

    _assert_close(*_both(fn))


@pytest.mark.parametrize("dtype", DTYPES)
def test_addr_rounds_as_torch(dtype):
    """``(alpha * vec1) * vec2``, torch's order: its bits with beta 0; with an input added,
    torch's loop may fuse the addition (an FMA), so within one rounding."""
    rng = np.random.default_rng(10)
    u, v, table = rng.standard_normal(7), rng.standard_normal(9), rng.standard_normal((7, 9))

    def fn(m, pairs):
        d = getattr(m, dtype)
        return [m.addr(m.tensor(table, dtype=d), m.tensor(u, dtype=d), m.tensor(v, dtype=d),
                       beta=b, alpha=a) for b, a in pairs]

    _assert_same(*_both(lambda m: fn(m, [(0, 0.7), (0, 1), (0, -2.5)])))
    _assert_close(*_both(lambda m: fn(m, [(0.3, 0.7), (1, 1), (1.5, 1)])))


@pytest.mark.parametrize("beta, alpha", [(0, 1), (1, 0), (0, 0), (0.5, 2.0)])
def test_addbmm_ignores_what_blas_ignores(beta, alpha):
    def fn(m):
        inp = m.tensor([[NAN, INF], [1.0, -0.0]])
        b1 = m.full((3, 2, 4), NAN) if alpha == 0 else m.ones(3, 2, 4) / 4
        return [m.addbmm(inp, b1, m.ones(3, 4, 2), beta=beta, alpha=alpha)]

    _assert_same(*_both(fn))
