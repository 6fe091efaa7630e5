"""nll_loss's coefficients built in the input's dtype (without their masks when every target
counts with weight 1), and its forward's picked terms by a masked copy: the bits of the
float64-then-astype coefficients and of ``np.where``, over dtypes, weights (zero, negative
zero), ignored targets (or none), -inf and NaN log-probabilities, every reduction; and
torch's values and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
import gradviz.nn.functional as F
from gradviz.ops import _loss


def old_nll_forward(logp, coefficients, reduction, no_weight=False):
    with np.errstate(invalid="ignore"):
        picked = np.sum(np.where(coefficients != 0, logp * coefficients, 0), axis=-1)
    if reduction == "none":
        return picked.astype(logp.dtype)
    if no_weight:
        return np.asarray(np.nan, dtype=logp.dtype)
    return np.asarray(np.sum(picked), dtype=logp.dtype)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                          np.ascontiguousarray(b).view(np.uint8))


def log_probs(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::13] = -np.inf
    flat[5::29] = np.nan
    flat[7::17] = -0.0
    flat[3::19] = 0.0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(512, 65), (7, 3), (1, 2), (4, 1), (5,), (0, 4)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignored", [-100, None, 1])
def test_nll_loss_gives_the_old_bits(dtype, shape, reduction, weighted, ignored):
    rng = np.random.default_rng(3)
    classes = shape[-1]
    x = log_probs(rng, shape, dtype)
    batch = shape[:-1]
    labels = rng.integers(0, classes, batch)
    ignore_index = -100 if ignored is None else ignored
    if labels.size and ignored is not None:
        labels.reshape(-1)[::4] = ignored  # ignored (1: a class index, when there is one)
    weight = None
    if weighted:
        w = rng.random(classes).astype(dtype) + 0.5
        w[::3] = 0.0
        w[1::5] = -0.0
        weight = gradviz.tensor(w)
    captured = {}
    real = _loss.nll_loss

    def spy(logp, coefficients, reduction, no_weight=False, picks=None):
        captured["args"] = (logp, coefficients, reduction, no_weight)
        captured["picks"] = picks
        return real(logp, coefficients, reduction, no_weight, picks)

    leaf = gradviz.tensor(x, requires_grad=True)
    _loss.nll_loss, saved = spy, _loss.nll_loss
    try:
        loss = F.nll_loss(leaf, gradviz.tensor(labels), weight, reduction=reduction,
                          ignore_index=ignore_index)
    finally:
        _loss.nll_loss = saved
    logp, coefficients, _, no_weight = captured["args"]

    # the coefficients as they were built: float64, then cast
    n = labels.reshape(-1).shape[0]
    flat = labels.reshape(-1)
    keep = flat != ignore_index
    safe = np.where(keep, flat, 0)
    scales = (w.astype(np.float64)[safe] if weighted else np.ones(flat.shape))
    scales = np.where(keep, scales, 0.0)
    if reduction == "mean" and keep.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            scales = scales / scales.sum()
    old = np.zeros((n, classes))
    old[np.arange(n), safe] = 0.0 - scales
    old = old.astype(x.dtype).reshape(batch + (classes,))
    same_bits(coefficients, old)
    same_bits(loss._data, old_nll_forward(logp._data, old, reduction, no_weight))
    # the picked products (Note [Picked log-probabilities]) where every target counts
    assert (captured["picks"] is not None) == (
        not weighted and (ignored is None or ignored == -100 and not (labels == -100).any())
        and len(shape) == 2 and shape[0] > 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(dtype, reduction):
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((64, 65)).astype(dtype)
    labels = rng.integers(0, 65, 64)
    labels[::9] = -100
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(logits, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x, lib.tensor(labels), reduction=reduction)
        loss.sum().backward()
        results.append((loss.detach().numpy(), x.grad.numpy()))
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_picked_zeros_nan_and_infinities_give_the_old_bits(dtype, reduction):
    # Note [Picked log-probabilities]: the targets pick -0.0, +0.0, NaN, -inf, +inf, a tiny
    # and an ordinary value; the other entries of their rows are NaN and -inf
    picked = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, 1e-30, -1.5], dtype)
    x = np.full((len(picked), 5), np.nan, dtype)
    x[:, ::2] = -np.inf
    labels = np.array([0, 3, 1, 4, 2, 0, 3])
    x[np.arange(len(picked)), labels] = picked
    for rows in (slice(None), slice(0, 1), slice(0, 2), slice(1, 2), slice(5, 7)):
        logp = x[rows]
        n = logp.shape[0]
        loss = F.nll_loss(gradviz.tensor(logp), gradviz.tensor(labels[rows]), reduction=reduction)
        coefficients = np.zeros(logp.shape)
        coefficients[np.arange(n), labels[rows]] = -(1.0 / n) if reduction == "mean" else -1.0
        same_bits(loss._data, old_nll_forward(logp, coefficients.astype(dtype), reduction))
