"""reshape's view-or-copy decision from shapes and strides (Note [Reshape without a probe] in
gradviz/ops/_shape.py): numpy's answer, the old probe's results, and torch's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import gradviz
from gradviz.ops._shape import _reshapes_as_view


def numpy_says_view(array, shape):
    probe = array.view()
    try:
        probe.shape = shape
    except AttributeError:
        return False
    return True


def factorizations(n, ndim):
    """Every shape of ``ndim`` positive sizes whose product is ``n``."""
    if ndim == 0:
        return [()] if n == 1 else []
    return [(d,) + rest for d in range(1, n + 1) if n % d == 0
            for rest in factorizations(n // d, ndim - 1)]


def layouts(rng):
    """Nonempty arrays in many layouts: contiguous, transposed, permuted, sliced, expanded
    (stride 0), with sizes of 1 anywhere, and negative strides."""
    base = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    yield base
    for order in itertools.permutations(range(4)):
        yield base.transpose(order)
    yield base[:, ::2]
    yield base[..., ::-1]
    yield base[:, 1:, :, :1]
    yield base[:, :1]
    yield base[None, :, None]
    yield np.broadcast_to(base[:, :1], (2, 3, 4, 2))
    yield np.broadcast_to(np.float32(1.0), (3, 4))
    yield np.arange(12.0).reshape(3, 4)[:, :1].T
    for _ in range(40):
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 4, ndim))
        a = np.arange(int(np.prod(shape)) * 4, dtype=np.float64).reshape(shape + (4,))
        a = a[..., int(rng.integers(0, 4))] if rng.random() < 0.5 else a[..., :2]
        yield a.transpose(rng.permutation(a.ndim))


def test_reshapes_as_view_agrees_with_numpy():
    checked = 0
    for array in layouts(np.random.default_rng(0)):
        for ndim in range(0, 5):
            for shape in factorizations(array.size, ndim):
                assert _reshapes_as_view(array.shape, array.strides, shape) == numpy_says_view(
                    array, shape), (array.shape, array.strides, shape)
                checked += 1
    assert checked > 1000


def old_reshape(x, shape):
    """reshape as it was: numpy's probe, and a copy in the input's own layout, then viewed."""
    probe = x._data.view()
    try:
        probe.shape = shape
    except AttributeError:
        return gradviz.ops.unsafe_view(x.clone(), *shape)
    return gradviz.ops.view(x, *shape) if x.is_contiguous() else gradviz.ops.reshape(x, *shape)


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
    assert np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                          np.ascontiguousarray(b).view(np.uint8))


CASES = [  # (input's shape, how it is laid out, new shape)
    ((16, 32, 4, 16), lambda x: x.transpose(1, 2), (64, 32, 16)),  # attention's q
    ((16, 4, 32, 16), lambda x: x.transpose(-2, -1), (64, 16, 32)),  # its k.T
    ((16, 4, 32, 16), lambda x: x, (64, 32, 16)),
    ((3, 4, 5), lambda x: x.permute(2, 0, 1), (5, 12)),
    ((3, 4, 5), lambda x: x.permute(2, 0, 1), (-1,)),
    ((6, 8), lambda x: x[:, ::2], (24,)),
    ((6, 8), lambda x: x[::2], (3, 2, 4)),
    ((1, 5), lambda x: x.expand(4, 5), (20,)),
    ((1, 5), lambda x: x.expand(4, 5), (2, 2, 5)),
    ((4, 1, 6), lambda x: x.transpose(0, 2), (6, 4)),
    ((0, 3), lambda x: x.t(), (3, 0)),
    ((2, 0, 3), lambda x: x.transpose(0, 2), (0, 6)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,layout,new_shape", CASES)
def test_reshape_matches_the_probe_and_torch(shape, layout, new_shape, dtype):
    values = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    values.reshape(-1)[::7] = -0.0
    results = {}
    for name, reshape in (("new", lambda x: x.reshape(*new_shape)),
                          ("old", lambda x: old_reshape(x, new_shape))):
        leaf = gradviz.tensor(values, requires_grad=True)
        x = layout(leaf)
        y = reshape(x)
        g = np.random.default_rng(2).standard_normal(y.shape).astype(dtype)
        y.backward(gradviz.tensor(g))
        results[name] = (y, leaf.grad, x)
    (new, new_grad, _), (old, old_grad, _) = results["new"], results["old"]
    same_bits(new._data, old._data)
    same_bits(new_grad._data, old_grad._data)
    assert type(new.grad_fn).__name__ == type(old.grad_fn).__name__

    t_leaf = torch.tensor(values, requires_grad=True)
    t_x = layout(t_leaf)
    t_y = t_x.reshape(*new_shape)
    t_y.backward(torch.tensor(g))
    assert np.array_equal(new.detach().numpy(), t_y.detach().numpy())
    assert new.stride() == t_y.stride()
    assert (new._base is not None) == t_y._is_view()
    assert type(new.grad_fn).__name__ == type(t_y.grad_fn).__name__
    if new.grad_fn.next_functions:
        assert ([type(f).__name__ for f, _ in new.grad_fn.next_functions]
                == [type(f).__name__ for f, _ in t_y.grad_fn.next_functions])
    assert np.array_equal(new_grad.numpy(), t_leaf.grad.numpy())


def test_no_op_expand_gives_broadcast_to_s_view():
    from gradviz.ops._shape import _expand_forward
    base = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    arrays = [base, base.transpose(2, 0, 1), base[:, ::2], base[..., ::-1], base[:, :1],
              base[None], np.ones((), np.float32), np.zeros((0, 3)), base.copy(order="F")]
    readonly = base.copy()
    readonly.flags.writeable = False
    arrays.append(readonly)
    for a in arrays:
        for shape in {a.shape, (2,) + a.shape}:
            got, expected = _expand_forward(a, shape, a.shape), np.broadcast_to(a, shape)
            assert got.shape == expected.shape and got.strides == expected.strides
            assert got.dtype == expected.dtype and not got.flags.writeable
            assert got.flags.c_contiguous == expected.flags.c_contiguous
            assert got.flags.f_contiguous == expected.flags.f_contiguous
            assert (np.shares_memory(got, a) or not a.size) and np.array_equal(got, expected)
