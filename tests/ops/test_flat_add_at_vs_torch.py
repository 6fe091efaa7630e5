"""Scatter-adds through flat positions (Note [Flat positions] in
``gradviz/ops/_scatter_add.py``): advanced-index backward, ``index_put`` with
``accumulate=True``, ``scatter_add``/``gather`` backward and ``scatter_reduce`` means, with
duplicate indices, against PyTorch; and ``add_at`` adding exactly what ``np.add.at`` adds."""

import numpy as np
import pytest
import torch

import gradviz as gv
from gradviz.ops._scatter_add import add_at

TOLERANCES = {np.float32: (1e-5, 1e-5), np.float64: (1e-12, 1e-12)}


def _pair(array, requires_grad=True):
    return (gv.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def _close(got, want, dtype):
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_advanced_index_backward_with_duplicates(dtype):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((27, 10)).astype(dtype)
    rows = rng.integers(0, 27, (64, 3))            # makemore's C[X]: many repeats
    columns = rng.integers(-10, 10, (64, 3))
    for key in ((rows,), (rows, columns), (slice(None), columns[:, :2]), (rows[:, :1], slice(2, 9, 3))):
        g_table, t_table = _pair(table)
        g_key = tuple(gv.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
        t_key = tuple(torch.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
        g_out, t_out = g_table[g_key], t_table[t_key]
        seed = rng.standard_normal(tuple(t_out.shape)).astype(dtype)
        g_out.backward(gv.tensor(seed))
        t_out.backward(torch.tensor(seed))
        _close(g_table.grad, t_table.grad, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_put_accumulate_with_duplicates_on_a_non_contiguous_input(dtype):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((9, 12)).astype(dtype)
    rows, columns = rng.integers(0, 6, 200), rng.integers(0, 9, 200)
    values = rng.standard_normal(200).astype(dtype)
    g_base, t_base = _pair(base)
    g_values, t_values = _pair(values)
    g_view, t_view = g_base.t(), t_base.t()  # (12, 9), not contiguous
    g_out = g_view.index_put((gv.tensor(rows), gv.tensor(columns)), g_values, accumulate=True)
    t_out = t_view.index_put((torch.tensor(rows), torch.tensor(columns)), t_values, accumulate=True)
    _close(g_out, t_out, dtype)
    seed = rng.standard_normal(tuple(t_out.shape)).astype(dtype)
    g_out.backward(gv.tensor(seed))
    t_out.backward(torch.tensor(seed))
    _close(g_base.grad, t_base.grad, dtype)
    _close(g_values.grad, t_values.grad, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_and_gather_backward_with_duplicates(dtype, dim):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((6, 40, 5)).astype(dtype)
    index_shape = [6, 40, 5]
    index_shape[dim] = 70
    index = rng.integers(0, base.shape[dim], index_shape)
    source = rng.standard_normal(index_shape).astype(dtype)
    g_base, t_base = _pair(base)
    g_source, t_source = _pair(source)
    g_out = g_base.scatter_add(dim, gv.tensor(index), g_source)
    t_out = t_base.scatter_add(dim, torch.tensor(index), t_source)
    _close(g_out, t_out, dtype)
    gathered_g = gv.gather(g_out, dim, gv.tensor(index))
    gathered_t = torch.gather(t_out, dim, torch.tensor(index))
    seed = rng.standard_normal(index_shape).astype(dtype)
    gathered_g.backward(gv.tensor(seed))
    gathered_t.backward(torch.tensor(seed))
    _close(g_base.grad, t_base.grad, dtype)
    _close(g_source.grad, t_source.grad, dtype)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_mean_counts_duplicates(include_self):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((5, 8))
    index = rng.integers(0, 8, (5, 30))
    source = rng.standard_normal((5, 30))
    got = gv.tensor(base).scatter_reduce(1, gv.tensor(index), gv.tensor(source), "mean",
                                          include_self=include_self)
    want = torch.tensor(base).scatter_reduce(1, torch.tensor(index), torch.tensor(source),
                                             "mean", include_self=include_self)
    _close(got, want, np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
def test_add_at_adds_exactly_what_np_add_at_adds(dtype):
    # the same additions in the same order: bit-identical, duplicates and all
    rng = np.random.default_rng(4)
    rows = rng.integers(0, 27, (320, 3))
    grid = list(np.indices((16, 50), sparse=True))
    grid[1] = rng.integers(0, 90, (16, 50))
    cases = [((27, 10), rows, (320, 3, 10)), ((27, 10), (rows, rows % 10), (320, 3)),
             ((5, 6, 7), (slice(None), rng.integers(-6, 6, 40)), (5, 40, 7)),
             ((5, 6, 7), (rng.integers(0, 5, (8, 1)), slice(None), rng.integers(0, 7, (1, 9))),
              (8, 9, 6)),
             ((5, 6, 7), rng.random((5, 6, 7)) > 0.5, (1,)), ((16, 90), tuple(grid), (16, 50)),
             ((10_000, 4), rng.integers(0, 10_000, 3), (3, 4))]  # sparse: add.at as is
    for shape, key, values_shape in cases:
        out = (rng.standard_normal(shape) * 100).astype(dtype)
        values = (rng.standard_normal(values_shape) * 1e3).astype(dtype)
        want = out.copy()
        np.add.at(want, key, values)
        add_at(out, key, values)
        assert out.tobytes() == want.tobytes(), (shape, values_shape)
