"""F.linear on inputs of 3+ dims records its two views with sizes it computes (and matmul's
batched path its expand, reshape, bmm and unsafe view, Note [Batched matmul] in
gradviz/ops/_linalg.py): the bits, strides and nodes of the parsed calls, and torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
import gradviz.nn.functional as F


def names(fn, depth=4):
    if fn is None or depth == 0:
        return []
    return [type(fn).__name__] + [names(f, depth - 1) for f, _ in fn.next_functions]


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
    assert np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                          np.ascontiguousarray(b).view(np.uint8))


def parsed_linear(input, weight, bias):
    """F.linear's general calls: the views with their sizes parsed."""
    flat = input.view(-1, input.shape[-1])
    return gradviz.addmm(bias, flat, weight.t()).view(*input.shape[:-1], weight.shape[0])


def run(lib, fn, x, w, b, g):
    leaves = [lib.tensor(v, requires_grad=True) for v in (x, w, b)]
    out = fn(*leaves)
    out.backward(lib.tensor(g))
    return out, [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4), (16, 32, 64), (1, 1, 4), (2, 3, 5, 4), (0, 3, 4)])
def test_linear_views_match_the_parsed_calls_and_torch(shape, dtype):
    rng = np.random.default_rng(7)
    features, outputs = shape[-1], 5
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((outputs, features)).astype(dtype)
    b = rng.standard_normal(outputs).astype(dtype)
    g = rng.standard_normal(shape[:-1] + (outputs,)).astype(dtype)
    fast, fast_grads = run(gradviz, F.linear, x, w, b, g)
    slow, slow_grads = run(gradviz, parsed_linear, x, w, b, g)
    same_bits(fast._data, slow._data)
    for mine, theirs in zip(fast_grads, slow_grads):
        same_bits(mine._data, theirs._data)
    assert names(fast.grad_fn) == names(slow.grad_fn)
    assert fast._base is not None and fast._base.grad_fn is not None
    reference, reference_grads = run(torch, torch.nn.functional.linear, x, w, b, g)
    assert names(fast.grad_fn) == names(reference.grad_fn)
    assert fast.stride() == reference.stride()
    np.testing.assert_allclose(fast.detach().numpy(), reference.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    for mine, theirs in zip(fast_grads, reference_grads):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_linear_keeps_the_other_paths_and_errors():
    x = gradviz.randn(2, 3, 4)
    w, b = gradviz.randn(5, 4), gradviz.randn(5)
    strided = x.transpose(0, 1)  # not contiguous: matmul and an add, as torch
    assert type(F.linear(strided, w, b).grad_fn).__name__ == type(
        torch.nn.functional.linear(torch.randn(2, 3, 4).transpose(0, 1), torch.randn(5, 4),
                                   torch.randn(5)).grad_fn).__name__
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        F.linear(x, gradviz.randn(5, 3), b)
    with pytest.raises(RuntimeError) as mine:
        F.linear(x, w, gradviz.randn(2, 6, 5))  # a bias that broadcasts larger
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.functional.linear(torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(2, 6, 5))
    assert type(mine.value) is type(theirs.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [
    ((16, 4, 32, 16), (16, 4, 16, 32)), ((2, 3, 4, 5), (3, 5, 2)), ((3, 4, 5), (1, 5, 2)),
    ((2, 1, 4, 5), (1, 3, 5, 2)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)), ((0, 2, 3), (0, 3, 4)),
])
def test_batched_matmul_matches_torch(shapes, dtype):
    rng = np.random.default_rng(8)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    results = []
    for lib in (gradviz, torch):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        out = (x.transpose(-2, -1).transpose(-2, -1) if x.ndim > 1 else x) @ y
        out.backward(lib.ones_like(out))
        results.append((out, x.grad, y.grad))
    (out, *grads), (reference, *reference_grads) = results
    assert names(out.grad_fn, 6) == names(reference.grad_fn, 6)
    assert out.stride() == reference.stride()  # an empty product's too
    np.testing.assert_allclose(out.detach().numpy(), reference.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    for mine, theirs in zip(grads, reference_grads):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def test_batched_matmul_errors_match_torch():
    for first, second in (((2, 3, 4), (2, 5, 6)), ((2, 3, 4), (3, 4, 5))):
        with pytest.raises(RuntimeError) as mine:
            gradviz.randn(*first) @ gradviz.randn(*second)
        with pytest.raises(RuntimeError) as theirs:
            torch.randn(*first) @ torch.randn(*second)
        assert str(mine.value) == str(theirs.value)
    with pytest.raises(RuntimeError) as mine:
        gradviz.randn(2, 3, 4) @ gradviz.randn(2, 4, 5, dtype=gradviz.float64)
    with pytest.raises(RuntimeError) as theirs:
        torch.randn(2, 3, 4) @ torch.randn(2, 4, 5, dtype=torch.float64)
    assert str(theirs.value) in str(mine.value)  # "expected scalar type Float but found Double"


def parsed_batched_matmul(x, y):
    """matmul's batched path (both operands 3+ dims) through the parsing calls."""
    batch = tuple(np.broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2])))
    count = int(np.prod(batch))
    n, m, p = x.shape[-2], x.shape[-1], y.shape[-1]
    a3 = x.expand(*batch, n, m).reshape(count, n, m)
    b3 = y.expand(*batch, m, p).reshape(count, m, p)
    return gradviz.ops.unsafe_view(gradviz.bmm(a3, b3), *batch, n, p)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((16, 4, 32, 16), (16, 4, 16, 32)), ((2, 1, 4, 5), (1, 3, 5, 2)),
                                    ((3, 4, 5), (3, 5, 2))])
def test_batched_matmul_matches_the_parsed_calls(shapes, dtype):
    rng = np.random.default_rng(9)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    g = rng.standard_normal(np.broadcast_shapes(shapes[0][:-2], shapes[1][:-2])
                            + (shapes[0][-2], shapes[1][-1])).astype(dtype)
    results = []
    for fn in (lambda x, y: x @ y, parsed_batched_matmul):
        x, y = gradviz.tensor(a, requires_grad=True), gradviz.tensor(b, requires_grad=True)
        # a column-major operand (copied by its reshape) and a strided view of a view
        out = fn(x.transpose(-2, -1).contiguous().transpose(-2, -1),
                 y.transpose(0, 1).transpose(0, 1))
        out.backward(gradviz.tensor(g))
        results.append((out, x.grad, y.grad))
    for mine, theirs in zip(*results):
        same_bits(mine._data, theirs._data)
    assert names(results[0][0].grad_fn, 6) == names(results[1][0].grad_fn, 6)
