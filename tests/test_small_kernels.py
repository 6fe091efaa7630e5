"""The small kernels (Note [Small kernels] in gradviz_ext/_ops.py) compute add, sub, mul, div
and neg of small float arrays in C. They must give numpy's exact bits, including for special
values, and must decline everything they do not cover, so that numpy's ufunc computes it. They are
part of the compiled engine only, so this file is not in the suites that
tests/test_interpreted_mode.py runs again interpreted.
"""

import numpy as np
import pytest
import torch

import gradviz as gv
import gradviz_ext
from gradviz_ext import _ops

KERNELS = {
    "add": (_ops.KERNEL_ADD, np.add),
    "sub": (_ops.KERNEL_SUB, np.subtract),
    "mul": (_ops.KERNEL_MUL, np.multiply),
    "div": (_ops.KERNEL_DIV, np.true_divide),
}
SPECIALS = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-40, -1e-310, 3.4e38, 1e308,
            -2.5e-45, 7.0, 1e-7]
SHAPES = [(), (1,), (16,), (3, 4), (0,), (2, 0, 3), (4096,)]

def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    with np.errstate(all="ignore"):
        pool = np.array(SPECIALS, dtype=dtype)
        values = np.where(rng.random(size) < 0.3, rng.choice(pool, size),
                          (rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)))
    return values.astype(dtype).reshape(shape)


def _same_bits(got, expected):
    """Equal dtype, shape and bits; NaNs only need to be NaN at the same places (numpy's own
    loops do not promise which NaN payload or sign comes out)."""
    assert type(got) is np.ndarray
    assert got.dtype == expected.dtype and got.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = np.uint32 if got.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got[~nan].view(bits), expected[~nan].view(bits))


def test_enabled_in_the_compiled_engine():
    assert gradviz_ext.COMPILED
    assert _ops.small_kernels_enabled()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_two_arrays_and_array_with_number_match_numpy_bits(name, shape, dtype):
    kernel, ufunc = KERNELS[name]
    a = _values(shape, dtype, 1)
    b = _values(shape, dtype, 2)
    scalar = np.array(SPECIALS[3], dtype=dtype)  # a 0-d array: how saved numbers are kept
    cases = [(a, b), (a, scalar), (scalar, a), (a, 0.1), (0.1, a), (a, 3), (-7, a),
             (a, np.array(-0.0, dtype)), (a, float("inf")), (a, float("nan"))]
    for x, y in cases:
        with np.errstate(all="ignore"):
            expected = np.asarray(ufunc(x, y))
        _same_bits(_ops.small_arith(kernel, x, y), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_negation_matches_numpy_bits(shape, dtype):
    a = _values(shape, dtype, 3)
    _same_bits(_ops.small_arith(_ops.KERNEL_NEG, a), np.negative(a))


def _splat(value, shape, dtype):
    """One element broadcast to ``shape``: all strides 0, as the gradient of a sum is (a
    special value beyond float32 becomes inf, as numpy converts it)."""
    with np.errstate(over="ignore"):
        return np.broadcast_to(np.array(value, dtype=dtype), shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (16,), (3, 4), (2, 1, 5), (4096,)], ids=str)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_splat_operands_match_numpy_bits_and_layout(name, shape, dtype):
    """A splat (all strides 0) with a splat, a C-contiguous array of its shape, a 0-d array or
    a number, on either side: numpy's bits, and numpy's layout (a new C-contiguous array)."""
    kernel, ufunc = KERNELS[name]
    array = _values(shape, dtype, 4)
    for value in SPECIALS:
        splat = _splat(value, shape, dtype)
        with np.errstate(over="ignore"):
            same = np.array(value, dtype=dtype)
        others = [array, _splat(SPECIALS[3], shape, dtype), _splat(-0.0, shape, dtype),
                  same, np.array(-0.0, dtype=dtype), 0.1, -3, 2.0]
        for other in others:
            for x, y in ((splat, other), (other, splat)):
                with np.errstate(all="ignore"):
                    expected = np.asarray(ufunc(x, y))
                got = _ops.small_arith(kernel, x, y)
                _same_bits(got, expected)
                assert got.strides == expected.strides and got.flags.writeable
                assert not np.shares_memory(got, splat)


def test_splats_that_do_not_fit_are_declined():
    column = np.broadcast_to(np.ones((3, 1)), (3, 4))  # strides (8, 0): not one element
    splat = _splat(2.0, (3, 4), np.float64)
    cases = [(column, 1.0), (splat, np.ones((1, 4))), (splat, np.ones((4, 3))),
             (splat, _splat(1.0, (4, 3), np.float64)), (splat, _splat(1.0, (3, 4), np.float32)),
             (_splat(2.0, (3, 4), np.float16), 1.0), (_splat(1.0, (4097,), np.float64), 1.0),
             (splat, np.float64(2.0)), (splat, grid_t())]
    for a, b in cases:
        assert _ops.small_arith(_ops.KERNEL_MUL, a, b) is None
        assert _ops.small_arith(_ops.KERNEL_MUL, b, a) is None


def grid_t():
    return np.arange(12.0).reshape(4, 3).T


def test_a_sums_gradient_through_products_has_torchs_bits():
    """``stack([x * c_i]).sum()``: every piece of the stack's gradient is a splat of the sum's
    gradient, which each product's backward multiplies by its number."""
    results = []
    for lib in (torch, gv):
        x = lib.full((16,), 1.5, dtype=lib.float32, requires_grad=True)
        lib.stack([x * (0.1 * (i + 1)) for i in range(40)]).sum().backward()
        results.append(x.grad.numpy())
    np.testing.assert_array_equal(results[1].view(np.uint32), results[0].view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (2, 5), (32, 200), (3, 4, 7), (2, 1, 3), (16, 4096)],
                         ids=str)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_row_vector_on_either_side_matches_numpy_bits_and_layout(name, shape, dtype):
    """An array of 2+ dims and a 1-D array of its last dim's length (``x @ W + b``): numpy's
    bits and numpy's new C-contiguous array, with specials in the array (NaN included)."""
    kernel, ufunc = KERNELS[name]
    array = _values(shape, dtype, 5)
    vector = _values(shape[-1:], dtype, 6)
    vector[np.isnan(vector)] = 1.5  # the vector holds no NaN (see the declined cases)
    for x, y in ((array, vector), (vector, array)):
        with np.errstate(all="ignore"):
            expected = ufunc(x, y)
        got = _ops.small_rows(kernel, x, y)
        _same_bits(got, expected)
        assert got.strides == expected.strides and got.flags.writeable
        assert not np.shares_memory(got, array)


def test_row_vectors_that_do_not_fit_are_declined():
    matrix = np.ones((3, 4))
    row = np.arange(4.0)
    with_nan = row.copy()
    with_nan[2] = np.nan
    cases = [(matrix, with_nan), (matrix, np.arange(3.0)), (matrix, row.astype(np.float32)),
             (matrix.T.copy().T, row), (matrix, np.arange(8.0)[::2]), (np.ones(4), row),
             (np.ones((3, 0)), np.ones(0)), (np.ones((65537, 1)), np.ones(1)),
             (matrix, row[None, :]), (matrix.astype(np.float16), row.astype(np.float16)),
             (matrix, 2.0)]
    for a, b in cases:
        for kernel in (_ops.KERNEL_ADD, _ops.KERNEL_MUL, _ops.KERNEL_NEG):
            assert _ops.small_rows(kernel, a, b) is None
            assert _ops.small_rows(kernel, b, a) is None


@pytest.mark.parametrize("op", ["__add__", "__sub__", "__mul__", "__truediv__", "__radd__",
                                "__rsub__", "__rmul__", "__rtruediv__"])
def test_a_bias_on_every_row_has_torchs_bits_and_gradients(op):
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((32, 20)).astype(np.float32)
    row = rng.standard_normal(20).astype(np.float32)
    results = []
    for lib in (gv, torch):
        x = lib.tensor(matrix, requires_grad=True)
        b = lib.tensor(row, requires_grad=True)
        y = getattr(x, op)(b)
        y.backward(lib.ones_like(y))
        results.append((y.detach().numpy(), x.grad.numpy(), b.grad.numpy()))
    np.testing.assert_array_equal(results[0][0].view(np.uint32), results[1][0].view(np.uint32))
    for ours, theirs in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_result_is_a_new_writeable_array():
    a = np.arange(4.0)
    out = _ops.small_arith(_ops.KERNEL_ADD, a, 0.0)
    assert out is not a and not np.shares_memory(out, a) and out.flags.writeable
    assert out.flags.c_contiguous and out.base is None


def _declined_cases():
    f32 = np.arange(6, dtype=np.float32)
    grid = np.arange(12.0).reshape(3, 4)
    unaligned = np.frombuffer(b"\0" + np.arange(4.0).tobytes(), dtype=np.float64, offset=1)
    return {
        "strided view": (f32[::2], f32[:3]),
        "transposed (not C-contiguous)": (grid.T, grid.T.copy()),
        "broadcasting shapes": (np.ones((3, 1)), np.ones((1, 4))),
        "mixed float dtypes": (f32, f32.astype(np.float64)),
        "float16": (f32.astype(np.float16), 1.0),
        "int64": (np.arange(3), 2),
        "complex": (np.ones(2, np.complex128), 1.0),
        "more than 4096 elements": (np.ones(4097), 1.0),
        "a subclass": (np.ma.masked_array(np.ones(3)), 1.0),
        "unaligned data": (unaligned, 1.0),
        "an int beyond 2**53": (np.ones(2), 2 ** 60),
        "a float that overflows float32": (f32, 1e300),
        "a numpy scalar": (f32, np.float32(2.0)),
        "a bool": (np.ones(2), True),
        "a non-native byte order": (np.ones(3, dtype=">f8"), 1.0),
        "two numbers": (2.0, 3.0),
    }


@pytest.mark.parametrize("case", sorted(_declined_cases()))
def test_declines_what_it_does_not_cover(case):
    a, b = _declined_cases()[case]
    assert _ops.small_arith(_ops.KERNEL_MUL, a, b) is None
    assert _ops.small_arith(_ops.KERNEL_MUL, b, a) is None


def test_declined_operands_still_compute_through_numpy():
    grid = gv.tensor(np.arange(12.0).reshape(3, 4))
    column = gv.tensor(np.arange(3.0).reshape(3, 1))
    np.testing.assert_array_equal((grid.t() * 2.0).numpy(), np.arange(12.0).reshape(3, 4).T * 2)
    np.testing.assert_array_equal((grid - column).numpy(),
                                  np.arange(12.0).reshape(3, 4) - np.arange(3.0).reshape(3, 1))
    big = gv.ones(5000, dtype=gv.float32)
    assert float((big / 4).sum()) == 1250.0


def test_float32_tensor_and_python_number_round_like_torch():
    values = [1.0, 1e-8, 3.3, -2.7, 1e30]
    for number in (0.1, 1.0001, 1e-3, -7, 3):
        for op in ("__add__", "__sub__", "__mul__", "__truediv__", "__rsub__", "__rtruediv__"):
            got = getattr(gv.tensor(values, dtype=gv.float32), op)(number).numpy()
            want = getattr(torch.tensor(values, dtype=torch.float32), op)(number).numpy()
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32),
                                          err_msg=f"{op} {number}")


# ---- the engine's input buffers: a += b in place (gradviz_small_add_into) -------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1,), (16,), (3, 5), (4096,), (4097,), (0,)])
def test_fan_in_sums_with_torchs_bits(shape, dtype):
    """A leaf used by many products: the engine sums their gradients into one buffer in
    place (by the kernel up to 4,096 elements, by numpy above), in torch's order, so the
    gradient has torch's exact bits."""

    rng = np.random.default_rng(0)
    coefficients = [float(c) for c in rng.standard_normal(7)]
    upstream = [rng.standard_normal(shape).astype(dtype) for _ in coefficients]
    results = []
    for lib in (torch, gv):
        x = lib.zeros(shape, dtype=getattr(lib, dtype), requires_grad=True)
        products = [x * c for c in coefficients]
        lib.autograd.backward(products, [lib.tensor(u) for u in upstream])
        (x * 2).sum().backward()  # and once more into the existing .grad
        results.append(x.grad.numpy())
    assert results[1].dtype == results[0].dtype
    np.testing.assert_array_equal(results[1], results[0])


def test_fan_in_with_broadcast_and_mixed_contributions():
    """Contributions the kernel does not cover (summed down from a broadcast, float64 into a
    float32 buffer) still add up as in torch."""

    results = []
    for lib in (torch, gv):
        x = lib.ones(3, requires_grad=True)
        y = x * 2 + (x.reshape(3, 1) * lib.ones(3, 4)).sum(1) + (x.double() * 3).float()
        y.sum().backward()
        results.append(x.grad.numpy().tolist())
    assert results[1] == results[0]
