"""masked_fill's forward as a copy with the value written where the mask is true (Note [Masked
fill as a copy] in gradviz/ops/_indexing.py): np.where's bits and layout, and torch's values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.ops._indexing import _masked_fill_forward

DTYPES = [np.float32, np.float64, np.int64, np.int8, np.bool_, np.complex64]
# (input's shape, mask's shape): the mask as large, broadcast, or larger than the input
SHAPES = [((), ()), ((0,), (0,)), ((7,), (7,)), ((3, 5), (5,)), ((16, 4, 32, 32), (32, 32)),
          ((2, 3, 4), (1, 3, 1)), ((4, 1), (4, 6)), ((5,), (2, 5)), ((0, 3), (3,))]
VALUES = [0, 1, -1, 0.5, float("-inf"), float("nan"), -0.0, True]


def inputs(shape, mask_shape, dtype, rng):
    a = np.asarray(rng.standard_normal(shape) * 3)
    if np.dtype(dtype).kind == "f":
        flat = a.reshape(-1)
        flat[::5] = np.nan
        flat[1::7] = -0.0
        flat[2::11] = np.inf
    return a.astype(dtype), np.asarray(rng.random(mask_shape) < 0.4)


def same(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.strides == expected.strides
    assert np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                          np.ascontiguousarray(expected).view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,mask_shape", SHAPES)
def test_masked_fill_forward_gives_np_where_bits_and_layout(shape, mask_shape, dtype):
    rng = np.random.default_rng(0)
    a, mask = inputs(shape, mask_shape, dtype, rng)
    cases = [(a, mask)]  # C-contiguous: the copy; the others: np.where itself
    if a.ndim >= 2:
        full_mask = np.asfortranarray(np.broadcast_to(mask, np.broadcast_shapes(a.shape,
                                                                                mask.shape)))
        cases += [(np.asfortranarray(a), mask), (a, full_mask)]
    if a.ndim and a.shape[-1] > 1 and mask.shape[-1] > 1:
        cases.append((a[..., ::2], mask[..., ::2]))
    for x, m in cases:
        for value in VALUES:
            try:
                fill = np.asarray(value, dtype=x.dtype)
            except (OverflowError, ValueError):
                continue
            same(_masked_fill_forward(x, m, value, None), np.where(m, fill, x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_masked_fill_matches_torch_forward_and_backward(dtype):
    rng = np.random.default_rng(1)
    a, mask = inputs((16, 4, 32, 32), (32, 32), dtype, rng)
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(a, requires_grad=True)
        y = x.masked_fill(lib.tensor(mask), float("-inf"))
        y.backward(lib.tensor(np.arange(y.numel(), dtype=dtype).reshape(y.shape)))
        results.append((y.detach().numpy(), x.grad.numpy()))
    for mine, theirs in zip(*results):
        assert np.array_equal(mine, theirs, equal_nan=True)
