"""The whole-array kernels (Note [Whole-array kernels] in gradviz_ext/_ops.py): ``a + alpha * b``
as one fused multiply-add per element, and relu's backward in one pass. They must give
PyTorch's exact bits (torch's add with an alpha rounds once on CPUs with FMA), and must decline
what they do not cover so that numpy computes it. Compiled engine only, like
tests/test_small_kernels.py, so this file is not run again interpreted.
"""

import numpy as np
import pytest
import torch
from conftest import cpu_has

import gradviz as gv
import gradviz_ext
from gradviz_ext import _ops

SPECIALS = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-40, 3.4e38, 1e-7, -2.5e-45]
SIZES = [0, 1, 7, 8, 13, 64, 1000, 4097, 100_003]  # vector widths, their tails, large arrays


def _values(n, dtype, seed, specials=True):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    if specials:
        pool = np.array(SPECIALS)
        values = np.where(rng.random(n) < 0.2, rng.choice(pool, n), values)
    with np.errstate(all="ignore"):
        return values.astype(dtype)


def _same_bits(got, expected):
    """Equal dtype, shape and bits, NaNs only at the same places."""
    assert type(got) is np.ndarray
    assert got.dtype == expected.dtype and got.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = np.uint32 if got.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got[~nan].view(bits), expected[~nan].view(bits))


def test_fused_add_is_used_on_this_machine():
    # the CI machine and every development machine have FMA; the kernel must be in use there
    assert gradviz_ext.COMPILED and cpu_has("avx2", "fma")
    a = np.ones(3, np.float32)
    assert _ops.fused_add(a, a, 0.5) is not None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("alpha", [0.37, -0.01, 3, -1, 1e-3, 2.0 ** -30])
def test_fused_add_matches_torch_bits(n, dtype, alpha):
    a, b = _values(n, dtype, 1), _values(n, dtype, 2)
    with np.errstate(all="ignore"):
        expected = torch.add(torch.from_numpy(a), torch.from_numpy(b), alpha=alpha).numpy()
    _same_bits(_ops.fused_add(a, b, alpha), expected)
    in_place = a.copy()
    assert _ops.fused_add(in_place, b, alpha, True) is in_place
    _same_bits(in_place, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensor_add_and_sub_with_alpha_match_torch_bits(dtype):
    shape = (33, 17)
    a = _values(33 * 17, dtype, 3, specials=False).reshape(shape)
    b = _values(33 * 17, dtype, 4, specials=False).reshape(shape)
    for alpha in (0.1, -2.5, 7):
        pairs = [
            (gv.add(gv.tensor(a), gv.tensor(b), alpha=alpha),
             torch.add(torch.tensor(a), torch.tensor(b), alpha=alpha)),
            (gv.sub(gv.tensor(a), gv.tensor(b), alpha=alpha),
             torch.sub(torch.tensor(a), torch.tensor(b), alpha=alpha)),
            (gv.tensor(a).add_(gv.tensor(b), alpha=alpha),
             torch.tensor(a).add_(torch.tensor(b), alpha=alpha)),
            (gv.tensor(a).sub_(gv.tensor(b), alpha=alpha),
             torch.tensor(a).sub_(torch.tensor(b), alpha=alpha)),
        ]
        for got, expected in pairs:
            _same_bits(got.numpy(), expected.numpy())


def test_recorded_add_with_alpha_is_fused_and_differentiates_as_torch():
    a = _values(50, "float32", 5, specials=False)
    b = _values(50, "float32", 6, specials=False)
    results = []
    for lib in (gv, torch):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b, requires_grad=True)
        out = lib.add(x * 1, y, alpha=-0.3)
        w = x.detach().clone().requires_grad_()
        w2 = w * 1
        w2.sub_(y, alpha=1.7)  # recorded in place on a non-leaf
        (out.sum() + (w2 * w2).sum()).backward()
        results.append([out.detach().numpy(), w2.detach().numpy(), x.grad.numpy(),
                        y.grad.numpy(), w.grad.numpy()])
    for got, expected in zip(*results):
        _same_bits(got, expected)


@pytest.mark.parametrize("options", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
                                     {"weight_decay": 0.01}], ids=str)
def test_sgd_steps_match_torch_bits(options):
    # the gradients are given, so only the update's arithmetic is compared
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((16, 9)).astype(np.float32)
    grads = [rng.standard_normal((16, 9)).astype(np.float32) for _ in range(3)]
    params = []
    for lib in (gv, torch):
        w = lib.nn.Parameter(lib.tensor(w0))
        opt = lib.optim.SGD([w], lr=0.05, **options)
        for g in grads:
            w.grad = lib.tensor(g)
            opt.step()
        params.append(w.detach().numpy())
    _same_bits(*params)


@pytest.mark.parametrize("case", ["broadcast", "dtypes", "strided", "float16", "ints", "alpha",
                                  "overlap", "readonly", "not arrays"])
def test_fused_add_declines_what_it_does_not_cover(case):
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    cases = {
        "broadcast": [(a, a[0], 2.0)],
        "dtypes": [(a, a.astype(np.float64), 2.0)],
        "strided": [(a.T, a.T, 2.0), (a[:, ::2], a[:, ::2], 2.0)],
        "float16": [(a.astype(np.float16), a.astype(np.float16), 2.0)],
        "ints": [(a.astype(np.int64), a.astype(np.int64), 2)],
        "alpha": [(a, a, np.float32(2.0)), (a, a, 1e300), (a, a, 2 ** 60), (a, a, None),
                  (a, a, True)],
        "not arrays": [(gv.tensor(a), a, 2.0), (a.tolist(), a, 2.0)],
    }
    if case == "overlap":
        flat = np.arange(10.0)
        assert _ops.fused_add(flat[1:], flat[:-1], 2.0, True) is None
        assert _ops.fused_add(flat[:-1], flat[1:], 2.0, True) is None
        return
    if case == "readonly":
        frozen = a.copy()
        frozen.flags.writeable = False
        assert _ops.fused_add(frozen, a, 2.0, True) is None
        assert _ops.fused_add(frozen, a, 2.0) is not None  # out of place reads only
        return
    for x, y, alpha in cases[case]:
        assert _ops.fused_add(x, y, alpha) is None


def test_operands_the_kernel_declines_still_match_torch():
    # a broadcast alpha-add goes to numpy: two roundings, so close to torch, not equal
    m = np.arange(12.0, dtype=np.float32).reshape(3, 4) / 7
    np.testing.assert_allclose(gv.add(gv.tensor(m), gv.tensor(m[0]), alpha=0.5).numpy(),
                               torch.add(torch.tensor(m), torch.tensor(m[0]), alpha=0.5).numpy(),
                               rtol=1e-6)
    # an every-other-element update is not dense: torch runs it, and so does numpy
    results = []
    for lib in (gv, torch):
        t = lib.arange(10.0)
        t[::2].add_(t[1::2], alpha=2.0)
        results.append(t.numpy())
    np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", SIZES)
def test_relu_backward_matches_torch_bits(n, dtype):
    x, g = _values(n, dtype, 8), _values(n, dtype, 9)
    expected = []
    for lib in (gv, torch):
        leaf = lib.tensor(x, requires_grad=True)
        lib.relu(leaf).backward(lib.tensor(g))
        expected.append(leaf.grad.numpy())
    _same_bits(*expected)
    # a NaN input's gradient passes through, as torch's ``result <= 0 ? 0 : g``
    if n:
        assert _ops.threshold_backward_kernel(g, np.full(n, np.nan, dtype)) is not None


def test_relu_double_backward_matches_torch():
    x0 = np.array([[-1.0, 0.0, 2.0], [3.0, -0.5, np.nan]])
    grads = []
    for lib in (gv, torch):
        x = lib.tensor(x0, requires_grad=True)
        (gx,) = lib.autograd.grad((lib.relu(x) ** 2).sum(), x, create_graph=True)
        (ggx,) = lib.autograd.grad((gx * gx).sum(), x)
        grads.append((gx.detach().numpy(), ggx.numpy()))
    for got, expected in zip(*grads):
        np.testing.assert_array_equal(got, expected)


def test_relu_backward_kernel_declines_what_it_does_not_cover():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for g, r in [(a, a.astype(np.float64)), (a, a[0]), (a.T, a.T), (a.astype(np.float16),) * 2,
                 (a.astype(np.int32),) * 2, (a, a.reshape(4, 3))]:
        assert _ops.threshold_backward_kernel(g, r) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (3, 5), (31, 33), (32, 64), (64, 512),
                                   (513, 70), (1, 100)])
def test_transpose_add_matches_numpy_bits(dtype, shape):
    """``t.T + bias`` and ``t.T`` (Note [Product layout]'s copy back): tile edges, specials."""
    t = _values(shape[0] * shape[1], dtype, 5).reshape(shape)
    bias = _values(shape[0], dtype, 6)
    with np.errstate(all="ignore"):
        expected = t.T + bias
    _same_bits(_ops.transpose_add(t, bias), expected)
    _same_bits(_ops.transpose_add(t), np.ascontiguousarray(t.T))
    assert _ops.transpose_add(t, bias).flags.c_contiguous


def test_transpose_add_declines_what_it_does_not_cover():
    t = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for matrix, bias in [(t.T, None), (t[:, ::2], None), (t.astype(np.float16), None),
                         (t.astype(np.int32), None), (t[0], None), (t.reshape(3, 2, 2), None),
                         (t, np.ones(4, np.float32)), (t, np.ones(3, np.float64)),
                         (t, np.ones((3, 1), np.float32)), (t, np.ones(6, np.float32)[::2]),
                         (t, 1.0)]:
        assert _ops.transpose_add(matrix, bias) is None


def _exact_bits(got, expected):
    """Equal dtype, shape and bits, NaN payloads and signs included."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    bits = np.uint32 if got.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got.view(bits), expected.view(bits))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (3, 5), (31, 33), (512, 64), (512, 192),
                                   (513, 70), (1, 100), (7, 0)])
def test_add_row_vector_matches_numpy_bits(dtype, shape):
    """``out += bias`` for a bias without NaN (the matrix with NaN, infinities, zeros of both
    signs): numpy's bits, payloads included."""
    out = _values(shape[0] * shape[1], dtype, 7).reshape(shape)
    bias = _values(shape[1], dtype, 8)
    bias[np.isnan(bias)] = -0.0
    expected = out.copy()
    with np.errstate(all="ignore"):
        np.add(expected, bias, out=expected)
    assert _ops.add_row_vector(out, bias) is True
    _exact_bits(out, expected)


def test_add_row_vector_declines_what_it_does_not_cover():
    out = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    before = out.copy()
    for matrix, bias in [(out.T, np.ones(3, np.float32)), (out[:, ::2], np.ones(2, np.float32)),
                         (out.astype(np.float16), np.ones(4, np.float16)),
                         (out.astype(np.int32), np.ones(4, np.int32)),
                         (out[0], np.ones(4, np.float32)),
                         (out.reshape(3, 2, 2), np.ones(2, np.float32)),
                         (out, np.ones(3, np.float32)), (out, np.ones(4, np.float64)),
                         (out, np.ones((1, 4), np.float32)), (out, np.ones(8, np.float32)[::2]),
                         (out, np.array([1.0, np.nan, 0.0, 2.0], np.float32)), (out, 1.0)]:
        assert _ops.add_row_vector(matrix, bias) is False
    np.testing.assert_array_equal(out, before)
    readonly = out.copy()
    readonly.flags.writeable = False
    assert _ops.add_row_vector(readonly, np.ones(4, np.float32)) is False


@pytest.mark.parametrize("dtype", [gv.float32, gv.float64])
def test_linear_with_the_row_kernel_matches_numpy_and_torch(dtype, monkeypatch):
    """A Linear layer's product plus bias through the row kernel: the bits of numpy's add
    (the layout module's general path) and torch's values."""
    from gradviz.ops import _layout
    rng = np.random.default_rng(9)
    x = rng.standard_normal((512, 64)).astype(dtype.name)
    w = rng.standard_normal((192, 64)).astype(dtype.name)
    b = rng.standard_normal(192).astype(dtype.name)
    out = gv.nn.functional.linear(gv.tensor(x), gv.tensor(w), gv.tensor(b))
    monkeypatch.setattr(_layout, "_add_row_vector", lambda out, bias: False)
    general = gv.nn.functional.linear(gv.tensor(x), gv.tensor(w), gv.tensor(b))
    _exact_bits(out.numpy(), general.numpy())
    reference = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
    np.testing.assert_allclose(out.numpy(), reference.numpy(), rtol=1e-4, atol=1e-4)
