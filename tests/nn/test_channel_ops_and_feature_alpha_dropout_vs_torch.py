"""``pdist``, ``channel_shuffle``/``ChannelShuffle`` and ``feature_alpha_dropout``/
``FeatureAlphaDropout`` against torch: values, gradients (equal rows and every ``p``), errors,
and the dropout's per-channel draws and kept statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gradviz as gv

ROWS = np.random.default_rng(4).standard_normal((6, 3))
ROWS[4] = ROWS[1]  # a zero distance


@pytest.mark.parametrize("p", [0, 0.5, 1, 2, 3, math.inf])
def test_pdist_matches_torch(p):
    results = []
    for m in (gv, torch):
        x = m.tensor(ROWS, requires_grad=True)
        out = m.nn.functional.pdist(x, p)
        weights = m.tensor(np.linspace(-1, 1, out.numel()))
        (grad,) = m.autograd.grad((out * weights).sum(), x)
        results.append((out.detach().numpy(), grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)


def test_pdist_errors_match_torch():
    for m in (gv, torch):
        with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 3D"):
            m.nn.functional.pdist(m.ones(2, 2, 2))
        with pytest.raises(RuntimeError, match="pdist only supports non-negative p values"):
            m.nn.functional.pdist(m.ones(2, 2), -1)


@pytest.mark.parametrize("shape, groups", [((2, 6, 3), 3), ((1, 8, 2, 2), 2), ((3, 4, 1, 2, 2), 4)])
def test_channel_shuffle_matches_torch(shape, groups):
    data = np.random.default_rng(1).standard_normal(shape)
    results = []
    for m in (gv, torch):
        x = m.tensor(data, requires_grad=True)
        out = m.nn.ChannelShuffle(groups)(x)
        assert repr(m.nn.ChannelShuffle(groups)) == f"ChannelShuffle(groups={groups})"
        (grad,) = m.autograd.grad((out * m.tensor(np.arange(out.numel()).reshape(shape) * 1.0)).sum(), x)
        results.append((out.detach().numpy(), grad.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    for m in (gv, torch):
        with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
            m.nn.functional.channel_shuffle(m.ones(1, 5, 2), 2)


def test_feature_alpha_dropout_drops_channels_and_keeps_selus_statistics():
    gv.manual_seed(3)
    x = gv.randn(300, 40, 3, 3)
    out = gv.nn.FeatureAlphaDropout(0.2).train()(x)
    alpha_prime = -1.7580993408473766
    a = 1.0 / math.sqrt((alpha_prime ** 2 * 0.2 + 1) * 0.8)
    dropped_value = alpha_prime * a + 1.7580993408473766 * a * 0.2
    per_channel = out.numpy().reshape(300, 40, 9)
    dropped = np.isclose(per_channel, dropped_value, atol=1e-6).all(-1)
    assert 0.17 < dropped.mean() < 0.23, "about p of the channels are dropped, each whole"
    kept = ~dropped
    np.testing.assert_allclose(per_channel[kept], (x.numpy().reshape(300, 40, 9)[kept] * a
                                                    + 1.7580993408473766 * a * 0.2), rtol=1e-5, atol=1e-6)
    assert abs(out.mean().item()) < 0.05 and abs(out.std().item() - 1) < 0.05
    for m in (gv, torch):
        module = m.nn.FeatureAlphaDropout(0.5).eval()
        y = m.ones(2, 3, 4)
        assert module(y) is y
        assert repr(module) == "FeatureAlphaDropout(p=0.5, inplace=False)"
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            m.nn.functional.feature_alpha_dropout(y, 1.5, True)
