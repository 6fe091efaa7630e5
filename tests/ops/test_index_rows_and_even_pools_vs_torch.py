"""The vectorised paths for wide-row ``index_add`` (and the embedding's backward through it) and
for adaptive max pooling over evenly divided inputs, against PyTorch and against the
``np.add.at`` they replace (Note [Adding rows in order], Note [Even adaptive windows])."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz import config
from gradviz.ops._scatter_add import add_rows
from gradviz_ext import ops as ext_ops

COMPILED = config()["engine"] == "compiled"

rng = np.random.default_rng(17)


def spread_values(*shape):
    """Values over many magnitudes, so the order of additions shows in the last bits."""
    return rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 5, shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("row_shape", [(16,), (4, 5), (64,), (3,)])
def test_add_rows_matches_add_at_bit_for_bit(dtype, row_shape):
    for trial in range(40):
        rows = int(rng.integers(1, 30))
        count = int(rng.integers(0, 200))
        out = (spread_values(rows, *row_shape) * (1000 if dtype == np.int64 else 1)).astype(dtype)
        if trial % 5 == 0:
            out[...] = -0.0
        index = rng.integers(-rows, rows, count)
        values = spread_values(count, *row_shape).astype(dtype)
        expected = out.copy()
        np.add.at(expected, index, values)
        got = out.copy()
        add_rows(got, index, values)
        assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("row_shape", [(16,), (64,), (4, 5), (2, 3, 8)])
@pytest.mark.parametrize("specials", [False, True])
def test_the_compiled_rounds_give_the_numpy_rules_bits(dtype, row_shape, specials, monkeypatch):
    # add_rows with its compiled sums (gradviz_ext's add_rows_arrays) against add_rows with
    # the numpy rules: special values (NaN, infinities, zeros of both signs in the input,
    # infinities and zeros in the values, NaN values left to numpy) and every index sign,
    # repeated and dominant targets
    used = 0
    for trial in range(40):
        rows = int(rng.integers(1, 70))
        count = int(rng.integers(0, 600))
        out = spread_values(rows, *row_shape).astype(dtype)
        values = spread_values(count, *row_shape).astype(dtype)
        if specials and values.size:
            flat = values.reshape(-1)
            flat[::7], flat[1::11], flat[2::13] = -0.0, np.inf, -np.inf
            if trial % 2:  # NaN values: the numpy rules' turn
                flat[3::17] = np.nan
            out.reshape(-1)[::5] = -0.0
            out.reshape(-1)[1::9] = np.nan
        index = rng.integers(-rows, rows, count)
        if trial % 4 == 0 and count:
            index[: count * 3 // 4] = int(rng.integers(-rows, rows))  # one target dominates
        with monkeypatch.context() as patch:
            patch.setattr(ext_ops, "add_rows_arrays", lambda *args: False)
            expected = out.copy()
            add_rows(expected, index, values)
        got = out.copy()
        used += ext_ops.add_rows_arrays(got.copy(), index, values)
        add_rows(got, index, values)
        assert got.tobytes() == expected.tobytes()
        if not specials:  # np.add.at's bits too
            at = out.copy()
            np.add.at(at, index, values)
            assert got.tobytes() == at.tobytes()
    assert (used > 0) == COMPILED


def test_the_compiled_rounds_leave_other_cases_to_numpy():
    out = np.zeros((4, 16), np.float32)
    values = np.ones((2, 16), np.float32)
    for index in (np.array([0, 4]), np.array([-5, 1])):  # out of range: nothing written
        assert ext_ops.add_rows_arrays(out, index, values) is False
        assert not out.any()
    assert ext_ops.add_rows_arrays(out, np.array([0, 1], np.int32), values) is False
    assert ext_ops.add_rows_arrays(out, np.array([0, 1]), values.astype(np.float64)) is False
    assert ext_ops.add_rows_arrays(np.zeros((16, 4), np.float32).T, np.array([0, 1]),
                                   values) is False
    assert ext_ops.add_rows_arrays(out, np.array([0, 1]), values[:, ::-1]) is False
    assert ext_ops.add_rows_arrays(out, np.array([0, 1]), values[:, :8]) is False
    assert ext_ops.add_rows_arrays(out.reshape(-1), np.array([0, 1]), values[:, 0]) is False
    assert ext_ops.add_rows_arrays(out.astype(np.int64), np.array([0, 1]),
                                   values.astype(np.int64)) is False
    wide = np.zeros((60, 16), np.float32)
    dominant = np.concatenate([np.zeros(100, np.int64), np.arange(1, 60)])
    assert ext_ops.add_rows_arrays(wide, dominant, np.ones((159, 16), np.float32)) is False
    assert not wide.any()  # one target taking most entries: add.at's turn
    assert ext_ops.add_rows_arrays(out, np.array([0, 1]), np.full((2, 16), np.nan, np.float32)) \
        is False
    assert not out.any()
    with pytest.raises(IndexError):
        add_rows(out, np.array([0, 4]), values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [0, 1])
def test_wide_index_add_with_repeats_matches_torch(dtype, dim):
    base = spread_values(12, 40)
    index = rng.integers(0, base.shape[dim], 300)
    source_shape = (300, 40) if dim == 0 else (12, 300)
    source = spread_values(*source_shape)
    t_in = torch.tensor(base, dtype=dtype, requires_grad=True)
    t_src = torch.tensor(source, dtype=dtype, requires_grad=True)
    g_in = gradviz.tensor(base, dtype=getattr(gradviz, str(dtype).split(".")[-1]), requires_grad=True)
    g_src = gradviz.tensor(source, dtype=g_in.dtype, requires_grad=True)
    t_out = t_in.index_add(dim, torch.tensor(index), t_src, alpha=2)
    g_out = g_in.index_add(dim, gradviz.tensor(index), g_src, alpha=2)
    tolerance = dict(rtol=1e-5, atol=1e-3) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(g_out.detach().numpy(), t_out.detach().numpy(), **tolerance)
    weights = spread_values(*t_out.shape)
    t_out.backward(torch.tensor(weights, dtype=dtype))
    g_out.backward(gradviz.tensor(weights, dtype=g_in.dtype))
    np.testing.assert_allclose(g_in.grad.numpy(), t_in.grad.numpy(), **tolerance)
    np.testing.assert_allclose(g_src.grad.numpy(), t_src.grad.numpy(), **tolerance)


def test_embedding_backward_with_repeated_tokens_matches_torch():
    weight = rng.standard_normal((65, 64)).astype(np.float32)
    tokens = rng.integers(0, 65, (16, 32))
    upstream = rng.standard_normal((16, 32, 64)).astype(np.float32)
    t_weight = torch.tensor(weight, requires_grad=True)
    g_weight = gradviz.tensor(weight, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(tokens), t_weight).backward(torch.tensor(upstream))
    gradviz.nn.functional.embedding(gradviz.tensor(tokens), g_weight).backward(
        gradviz.tensor(upstream))
    np.testing.assert_allclose(g_weight.grad.numpy(), t_weight.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, output_size", [
    ((2, 3, 8, 12), (4, 3)), ((3, 6, 6), 2), ((1, 2, 9, 4), (9, 1)), ((2, 1, 8, 8), (1, 1)),
    ((2, 4, 6, 6), (6, 6))])
def test_even_adaptive_max_pool2d_values_indices_and_grad_match_torch(shape, output_size):
    # small integers give ties (the first maximum wins) and NaNs (the last NaN wins)
    data = rng.integers(0, 4, shape).astype(np.float64)
    data[rng.random(shape) < 0.1] = np.nan
    t_x = torch.tensor(data, requires_grad=True)
    g_x = gradviz.tensor(data, requires_grad=True)
    t_values, t_indices = torch.nn.functional.adaptive_max_pool2d(t_x, output_size, True)
    g_values, g_indices = gradviz.nn.functional.adaptive_max_pool2d(g_x, output_size, True)
    np.testing.assert_array_equal(g_indices.numpy(), t_indices.numpy())
    np.testing.assert_array_equal(g_values.detach().numpy(), t_values.detach().numpy())
    upstream = rng.standard_normal(tuple(t_values.shape))
    t_values.backward(torch.tensor(upstream))
    g_values.backward(gradviz.tensor(upstream))
    np.testing.assert_array_equal(g_x.grad.numpy(), t_x.grad.numpy())


@pytest.mark.parametrize("shape, output_size", [((2, 3, 12), 4), ((3, 10), 5), ((2, 2, 7), 7)])
def test_even_adaptive_max_pool1d_matches_torch(shape, output_size):
    data = rng.integers(0, 3, shape).astype(np.float32)
    data[rng.random(shape) < 0.1] = np.nan
    t_values, t_indices = torch.nn.functional.adaptive_max_pool1d(torch.tensor(data), output_size,
                                                                  True)
    g_values, g_indices = gradviz.nn.functional.adaptive_max_pool1d(gradviz.tensor(data),
                                                                    output_size, True)
    np.testing.assert_array_equal(g_indices.numpy(), t_indices.numpy())
    np.testing.assert_array_equal(g_values.numpy(), t_values.numpy())
