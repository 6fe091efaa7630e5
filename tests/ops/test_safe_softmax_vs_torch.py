"""scaled_dot_product_attention's ``_safe_softmax`` (Note [Safe softmax] in
gradviz/ops/_activation.py): a slice of only -inf gives zeros and a zero gradient, as torch's;
every other slice is softmax's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
from gradviz.ops import _activation

RNG = np.random.default_rng(5)


def _scores(shape, dtype):
    """Normal scores with -inf entries, a slice of only -inf, and a NaN."""
    scores = RNG.standard_normal(shape).astype(dtype)
    scores[RNG.random(shape) < 0.3] = -np.inf
    scores[0, ..., 1, :] = -np.inf
    scores.reshape(-1)[-1] = np.nan
    return scores


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim", [((2, 5, 7), -1), ((2, 5, 7), 1), ((3, 2, 4, 1), -1),
                                       ((2, 3, 3), 0)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_safe_softmax_is_softmax_outside_the_masked_slices(dtype, shape, dim, layout):
    scores = _scores(shape, dtype)
    if layout == "transposed":
        scores = np.asfortranarray(scores)
    x = gradviz.tensor(scores, requires_grad=True)
    safe, plain = _activation.safe_softmax(x, dim), gradviz.softmax(x, dim)
    masked = np.all(scores == -np.inf, axis=dim, keepdims=True)
    expected = np.where(masked, 0, plain.detach().numpy())
    np.testing.assert_array_equal(safe.detach().numpy(), expected)
    weights = gradviz.tensor(RNG.standard_normal(shape).astype(dtype))
    (ours,) = gradviz.autograd.grad((safe * weights).sum(), x)
    (plain_grad,) = gradviz.autograd.grad((plain * weights).sum(), x)
    np.testing.assert_array_equal(ours.numpy(), np.where(masked, 0, plain_grad.numpy()))


@pytest.mark.parametrize("dtype,tolerance", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_a_query_masked_from_every_key_matches_torch(dtype, tolerance, causal):
    arrays = [RNG.standard_normal((2, 4, 3)).astype(dtype) for _ in range(3)]
    mask = np.array([[True, False, True, False], [False] * 4, [True] * 4, [False, True, False, False]])
    results = []
    for m in (gradviz, torch):
        q, k, v = (m.tensor(a, requires_grad=True) for a in arrays)
        y = m.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None if causal else m.tensor(mask), is_causal=causal)
        node = y.grad_fn
        while "Softmax" not in node.name():
            node = next(n for n, _ in node.next_functions if n is not None)
        grads = m.autograd.grad((y * y).sum(), (q, k, v))
        results.append((node.name(), node._saved_dim, sorted(n for n in dir(node) if n.startswith("_saved_")),
                        [t.detach().numpy() for t in (y, *grads)]))
    (*ours, our_arrays), (*theirs, their_arrays) = results
    assert ours == theirs
    for got, want in zip(our_arrays, their_arrays):
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
