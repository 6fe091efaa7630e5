"""``tril`` and ``triu`` compute numpy's ``np.tril``/``np.triu`` with a remembered mask for small
matrices (``_below`` in gradviz/ops/_linalg.py): the same bits and layout as numpy's functions,
and PyTorch's values, for every shape, diagonal, dtype and layout."""

import numpy as np
import pytest
import torch

import gradviz
from gradviz.ops import _linalg

RNG = np.random.default_rng(5)
SHAPES = [(1, 1), (3, 4), (4, 3), (2, 5, 5), (0, 3), (3, 0), (2, 0, 4), (2, 3, 1, 6), (300, 300)]
DIAGONALS = [-7, -2, -1, 0, 1, 3, 9]


def _array(shape, dtype):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    values = RNG.standard_normal(shape) * 3
    if np.dtype(dtype).kind == "f":
        flat = values.reshape(-1)
        flat[::5] = np.nan
        flat[1::7] = -0.0
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_same_bits_and_layout_as_numpy(shape, dtype):
    for base in (_array(shape, dtype), np.swapaxes(_array(shape[:-2] + shape[:-3:-1], dtype), -1, -2)):
        for diagonal in DIAGONALS:
            for ours, numpys in ((_linalg._tril_forward, np.tril), (_linalg._triu_forward, np.triu)):
                got, want = ours(base, diagonal), numpys(base, diagonal)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert got.strides == want.strides
                np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_the_remembered_mask_is_read_only():
    mask = _linalg._below(4, 4, 0)
    assert not mask.flags.writeable
    with pytest.raises(ValueError):
        mask[0, 0] = False


@pytest.mark.parametrize("name", ["tril", "triu"])
@pytest.mark.parametrize("diagonal", DIAGONALS)
def test_values_and_gradients_match_torch(name, diagonal):
    data = RNG.standard_normal((2, 4, 5))
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(data, requires_grad=True)
        y = getattr(x, name)(diagonal)
        (y * lib.tensor(np.arange(40.0).reshape(2, 4, 5))).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), y.grad_fn.name()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2] == results[1][2]
