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
        if not specials or trial % 2 == 0:  # np.add.at's bits too (NaN values aside)
            at = out.copy()
            with np.errstate(invalid="ignore"):  # inf + -inf
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


def signed_zeros(*shape, dtype=np.float32):
    """+0.0 and -0.0 at random, with a few ones: sums whose sign of zero shows."""
    values = np.where(rng.random(shape) < 0.5, -0.0, 0.0)
    values[rng.random(shape) < 0.1] = 1.0
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("row_shape", [(16,), (40,), (4, 5), (3,)])
@pytest.mark.parametrize("compiled", [True, False])
def test_add_rows_keeps_add_ats_signed_zeros(dtype, row_shape, compiled, monkeypatch):
    # -0.0 in out plus -0.0 values is -0.0 in add.at (and in PyTorch); the rounds' reduction
    # and the C loop used to start from +0.0, which made it +0.0
    if not compiled:
        monkeypatch.setattr(ext_ops, "add_rows_arrays", lambda *args: False)
    for trial in range(30):
        rows = int(rng.integers(1, 12))
        count = int(rng.integers(1, 40))
        out = signed_zeros(rows, *row_shape, dtype=dtype)
        if trial % 3 == 0:
            out[...] = -0.0
        index = rng.integers(-rows, rows, count)
        values = signed_zeros(count, *row_shape, dtype=dtype)
        if trial % 2:
            values[...] = -0.0
        expected = out.copy()
        np.add.at(expected, index, values)
        got = out.copy()
        add_rows(got, index, values)
        assert got.tobytes() == expected.tobytes()


SIGNED_ZERO_PROGRAMS = {
    "index_add_": lambda m, base, index, values: m.tensor(base).index_add_(
        0, m.tensor(index), m.tensor(values)),
    "index_add dim 1": lambda m, base, index, values: m.tensor(base.T.copy()).index_add(1, m.tensor(index), m.tensor(values.T.copy())),
    "index_put_ accumulate": lambda m, base, index, values: m.tensor(base).index_put_((m.tensor(index),), m.tensor(values), accumulate=True),
    "scatter_add_": lambda m, base, index, values: m.tensor(base).scatter_add_(
        0, m.tensor(index)[:, None].expand(*values.shape), m.tensor(values)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [3, 16, 40])
@pytest.mark.parametrize("name", list(SIGNED_ZERO_PROGRAMS))
@pytest.mark.parametrize("compiled", [True, False])
def test_accumulating_signed_zeros_matches_torch(name, width, dtype, compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(ext_ops, "add_rows_arrays", lambda *args: False)
    program = SIGNED_ZERO_PROGRAMS[name]
    for trial in range(12):
        base = signed_zeros(5, width, dtype=dtype)
        if trial % 3 == 0:
            base[...] = -0.0
        elif trial % 3 == 1:
            base[...] = 0.0
        index = rng.integers(0, 5, int(rng.integers(1, 12)))
        values = signed_zeros(index.size, width, dtype=dtype)
        if trial % 2:
            values[...] = -0.0
        got = program(gradviz, base, index, values).numpy()
        expected = program(torch, base, index, values).numpy()
        assert np.array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("compiled", [True, False])
def test_embedding_backward_of_signed_zeros_and_padding_matches_torch(create_graph, compiled,
                                                                      monkeypatch):
    # the padding row's entries are left out, as PyTorch skips them: an infinity or a NaN
    # there used to become NaN in the padding row (times 0)
    if not compiled:
        monkeypatch.setattr(ext_ops, "add_rows_arrays", lambda *args: False)
    tokens = rng.integers(0, 6, (4, 7))
    tokens[0, :3] = 2
    upstream = signed_zeros(4, 7, 24)
    upstream[0, 0, :3] = np.inf, -np.inf, np.nan
    for padding_idx in (None, 2):
        grads = []
        for module in (gradviz, torch):
            weight = module.zeros(6, 24, requires_grad=True)
            out = module.nn.functional.embedding(module.tensor(tokens), weight,
                                                 padding_idx=padding_idx)
            (grad,) = module.autograd.grad(out, weight, module.tensor(upstream),
                                           create_graph=create_graph)
            grads.append(grad.detach().numpy())
        assert np.array_equal(grads[0], grads[1], equal_nan=True)
        assert np.array_equal(np.signbit(grads[0]), np.signbit(grads[1]))


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
