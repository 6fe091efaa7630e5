"""The functions PyTorch code calls on ``torch`` itself (``gradviz/_torch_level.py``): the ATen
forms of the layers with ATen's argument orders, the in-place functions, windows and small
queries, each run on gradviz and on torch with the same inputs (values and gradients)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz as gv
from gradviz import _torch_level

RNG = np.random.default_rng(11)
X4 = RNG.standard_normal((2, 3, 6, 6))
X3 = RNG.standard_normal((2, 3, 8))
W2 = RNG.standard_normal((4, 3, 3, 3)) * 0.3
W1 = RNG.standard_normal((4, 3, 3)) * 0.3
WT = RNG.standard_normal((3, 2, 3, 3)) * 0.3
B4 = RNG.standard_normal(4)
C3 = RNG.standard_normal(3)
C3B = RNG.standard_normal(3)
TABLE = RNG.standard_normal((10, 4))
IDX = np.array([[1, 3, 0], [9, 2, 2]])
A = RNG.standard_normal((5, 4))
B = RNG.standard_normal((5, 4))
SIGN = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
PROB = RNG.uniform(0.05, 0.95, (5, 4))
BIL_W = RNG.standard_normal((2, 4, 4)) * 0.3

# name: (program(m, *tensors), inputs); floating inputs are differentiated
CASES = {
    "conv1d": (lambda m, x, w, b: m.conv1d(x, w, b, 2, 1), (X3, W1, B4)),
    "conv2d": (lambda m, x, w, b: m.conv2d(x, w, b, 1, 1, 1, 1), (X4, W2, B4)),
    "conv2d_groups": (lambda m, x, w: m.conv2d(x, w, None, 1, 0, 1, 3), (X4, W2[:3, :1])),
    "conv3d": (lambda m, x, w: m.conv3d(x.unsqueeze(2), w.unsqueeze(2)), (X4, W2)),
    "conv_transpose1d": (lambda m, x, w: m.conv_transpose1d(x, w, None, 2, 1, 1), (X3, WT[:, :, 0])),
    "conv_transpose2d": (lambda m, x, w: m.conv_transpose2d(x, w, None, 2, 1, 1), (X4, WT)),
    "max_pool1d": (lambda m, x: m.max_pool1d(x, 2), (X3,)),
    "max_pool2d": (lambda m, x: m.max_pool2d(x, [3, 3], [], [1, 1], [1, 1], False), (X4,)),
    "max_pool3d": (lambda m, x: m.max_pool3d(x.unsqueeze(0), 2), (X4,)),
    "max_pool1d_with_indices": (lambda m, x: m.max_pool1d_with_indices(x, 3, 2), (X3,)),
    "avg_pool1d": (lambda m, x: m.avg_pool1d(x, 3, 2, 1, False, False), (X3,)),
    "adaptive_avg_pool1d": (lambda m, x: m.adaptive_avg_pool1d(x, 3), (X3,)),
    "adaptive_max_pool1d": (lambda m, x: m.adaptive_max_pool1d(x, 3), (X3,)),
    "layer_norm": (lambda m, x, w, b: m.layer_norm(x, [3], w, b, 1e-5, True), (X3.transpose(0, 2, 1), C3, C3B)),
    "group_norm": (lambda m, x, w, b: m.group_norm(x, 3, w, b, 1e-5, True), (X4, C3, C3B)),
    "batch_norm_train": (lambda m, x, w, b: m.batch_norm(x, w, b, m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64), True, 0.1, 1e-5, True),
                         (X4, C3, C3B)),
    "batch_norm_eval": (lambda m, x, w, b: m.batch_norm(x, w, b, m.full((3,), 0.2, dtype=m.float64),
                                                          m.full((3,), 2.0, dtype=m.float64), False, 0.1, 1e-5, True),
                        (X4, C3, C3B)),
    "instance_norm": (lambda m, x, w, b: m.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, True), (X4, C3, C3B)),
    "rms_norm": (lambda m, x, w: m.rms_norm(x, [8], w, 1e-6), (X3, RNG.standard_normal(8))),
    "embedding": (lambda m, w, i: m.embedding(w, i), (TABLE, IDX)),
    "embedding_padding": (lambda m, w, i: m.embedding(w, i, 2), (TABLE, IDX)),
    "dropout_eval": (lambda m, x: m.dropout(x, 0.5, False), (A,)),
    "alpha_dropout_eval": (lambda m, x: m.alpha_dropout(x, 0.5, False), (A,)),
    "feature_dropout_eval": (lambda m, x: m.feature_dropout(x, 0.5, False), (X4,)),
    "feature_alpha_dropout_eval": (lambda m, x: m.feature_alpha_dropout(x, 0.5, False), (X4,)),
    "pixel_shuffle": (lambda m, x: m.pixel_shuffle(x.repeat(1, 3, 1, 1)[:, :4], 2), (X4,)),
    "pixel_unshuffle": (lambda m, x: m.pixel_unshuffle(x, 2), (X4,)),
    "prelu": (lambda m, x, w: m.prelu(x, w), (X4, np.array([0.1, 0.2, 0.3]))),
    "rrelu_eval": (lambda m, x: m.rrelu(x), (A,)),
    "threshold": (lambda m, x: m.threshold(x, 0.1, -2.0), (A,)),
    "hardshrink": (lambda m, x: m.hardshrink(x, 0.3), (A,)),
    "bilinear": (lambda m, x, y, w: m.bilinear(x, y, w), (A, B, BIL_W)),
    "kl_div": (lambda m, x, t: m.kl_div(x.log_softmax(-1), t), (A, PROB)),
    "kl_div_mean": (lambda m, x, t: m.kl_div(x.log_softmax(-1), t, 1), (A, PROB)),
    "losses_unreduced_by_default": (lambda m, x, y, s: (
        m.cosine_embedding_loss(x, y, s.detach()), m.hinge_embedding_loss(x, s.detach()[:, None].expand(5, 4)),
        m.margin_ranking_loss(x[:, 0], y[:, 0], s.detach()), m.triplet_margin_loss(x, y, x.flip(0)),
        m.binary_cross_entropy_with_logits(x, y.sigmoid().detach())), (A, B, SIGN)),
    "kl_div_sum_log_target": (lambda m, x, t: m.kl_div(x, t.log(), 2, log_target=True), (A, PROB)),
    "cosine_embedding_loss": (lambda m, x, y, s: m.cosine_embedding_loss(x, y, s.detach(), 0.1, 0), (A, B, SIGN)),
    "hinge_embedding_loss": (lambda m, x, s: m.hinge_embedding_loss(x, s.detach()[:, None].expand(5, 4), 1.0, 2), (A, SIGN)),
    "margin_ranking_loss": (lambda m, x, y, s: m.margin_ranking_loss(x[:, 0], y[:, 0], s.detach(), 0.2, 1), (A, B, SIGN)),
    "triplet_margin_loss": (lambda m, a, p, n: m.triplet_margin_loss(a, p, n, 1.0, 2, 1e-6, True, 1), (A, B, A[::-1].copy())),
    "poisson_nll_loss": (lambda m, x, t: m.poisson_nll_loss(x, t.detach(), True, True, 1e-8, 1), (A, PROB * 3)),
    "binary_cross_entropy_with_logits": (lambda m, x, t: m.binary_cross_entropy_with_logits(
        x, t.detach(), None, m.full((4,), 2.0, dtype=m.float64), 0), (A, PROB)),
    "rsub": (lambda m, x, y: m.rsub(x, y, alpha=3), (A, B)),
    "split_with_sizes": (lambda m, x: m.split_with_sizes(x, [1, 3], 1), (A,)),
    "fill": (lambda m, x: m.fill(x, 2.5) * x, (A,)),
    "detach": (lambda m, x: m.detach(x) * x, (A,)),
}


def _run(m, program, arrays):
    inputs = [m.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = program(m, *inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    values = [o.detach().numpy() for o in outs]
    floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    leaves = [x for x in inputs if x.requires_grad]
    grads = []
    if floats:
        total = sum((o * m.tensor(np.linspace(-1, 1, o.numel()).reshape(tuple(o.shape)))).sum() for o in floats)
        grads = [None if g is None else g.numpy() for g in m.autograd.grad(total, leaves, allow_unused=True)]
    return values, grads


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_level_function_matches_torch(name):
    program, arrays = CASES[name]
    values, grads = _run(gv, program, arrays)
    torch_values, torch_grads = _run(torch, program, arrays)
    assert len(values) == len(torch_values)
    for got, want in zip(values, torch_values):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert len(grads) == len(torch_grads)
    for got, want in zip(grads, torch_grads):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", _torch_level._INPLACE_METHODS)
def test_inplace_functions_are_the_tensor_methods(name):
    args = {"clamp_": (-0.5, 0.5), "clamp_max_": (0.3,), "clamp_min_": (-0.3,), "clip_": (-0.2, 0.2),
            "fill_": (1.5,), "index_put_": "index", "xlogy_": "other", "addmv_": "addmv",
            "nan_to_num_": (0.0,)}.get(name, ())
    positive = name in ("acosh_", "arccosh_")
    unit = name in ("acos_", "arccos_", "asin_", "arcsin_", "atanh_", "arctanh_", "logit_")
    base = RNG.uniform(1.1, 2.0, (3, 4)) if positive else RNG.uniform(0.05, 0.9, (3, 4)) if unit else RNG.uniform(0.1, 2.0, (3, 4))
    results = []
    for m in (gv, torch):
        x = m.tensor(base.copy())
        if args == "index":
            extra = ((m.tensor([0, 2]),), m.tensor([5.0, 6.0, 7.0, 8.0], dtype=m.float64))
        elif args == "other":
            extra = (m.tensor(base.T.copy().T),)
        elif args == "addmv":
            x = m.tensor(base[:, 0].copy())
            extra = (m.tensor(base[:3, :3].copy()), m.tensor(base[0, :3].copy()))
        else:
            extra = args
        out = getattr(m, name)(x, *extra)
        assert out is x, f"{m.__name__}.{name} returns its input"
        results.append(x.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"])
@pytest.mark.parametrize("length", [0, 1, 2, 5, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, length, periodic):
    got = getattr(gv, name)(length, periodic)
    want = getattr(torch, name)(length, periodic)
    assert got.dtype == gv.float32 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    double = getattr(gv, name)(length, periodic, dtype=gv.float64)
    np.testing.assert_allclose(double.numpy(), getattr(torch, name)(length, periodic, dtype=torch.float64).numpy(),
                               rtol=1e-12, atol=1e-14)


def test_window_errors_match_torch():
    for m in (gv, torch):
        with pytest.raises(RuntimeError, match="requires non-negative window_length"):
            m.hann_window(-1)
        with pytest.raises(RuntimeError, match="expects floating point dtypes"):
            m.hann_window(4, dtype=m.int64)
    np.testing.assert_allclose(gv.hamming_window(8, True, 0.5, 0.5).numpy(), torch.hamming_window(8, True, 0.5, 0.5).numpy(), rtol=1e-6)


def test_feature_dropout_drops_whole_channels_and_keeps_the_mean():
    gv.manual_seed(0)
    x = gv.ones(200, 50, 3, 3)
    out = gv.feature_dropout(x, 0.3, True)
    per_channel = out.numpy().reshape(200, 50, 9)
    assert np.all(per_channel.min(-1) == per_channel.max(-1)), "a channel is kept or dropped whole"
    assert set(np.unique(per_channel)) <= {0.0, np.float32(1 / 0.7)}
    assert abs(out.mean().item() - 1.0) < 0.05
    alpha = gv.feature_alpha_dropout(gv.randn(400, 60, 2, 2), 0.2, True)
    assert abs(alpha.mean().item()) < 0.1 and abs(alpha.std().item() - 1.0) < 0.1  # SELU's fixed point kept
    y = gv.ones(4, 6, 5)
    assert gv.feature_dropout_(y, 0.5, True) is y
    for m in (gv, torch):
        for function in (m.feature_dropout, m.dropout, m.alpha_dropout_, m.feature_alpha_dropout):
            with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1, but got 1.5"):
                function(m.ones(2, 3), 1.5, True)


def test_integer_reductions_and_queries_match_torch():
    a, b = gv.tensor(A), gv.tensor(B)
    ta, tb = torch.tensor(A), torch.tensor(B)
    for reduction in (0, 1, 2):
        np.testing.assert_allclose(gv.kl_div(a, b.abs(), reduction).numpy(), torch.kl_div(ta, tb.abs(), reduction).numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        gv.kl_div(a, b, 3)
    assert gv.is_same_size(a, b) is torch.is_same_size(ta, tb) is True
    assert gv.is_same_size(a, b[:2]) is torch.is_same_size(ta, tb[:2]) is False
    assert gv.get_device(a) == torch.get_device(ta) == -1
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 4"):
        gv.split_with_sizes(a, [1, 2], 1)
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 4"):
        torch.split_with_sizes(ta, [1, 2], 1)


def test_torch_level_names_are_torchs():
    assert sorted(name for name in _torch_level.__all__ if not hasattr(torch, name)) == []
    assert set(_torch_level.__all__) <= set(gv.__all__)
