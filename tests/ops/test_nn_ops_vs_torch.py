"""The ops behind layers and functions added for teaching code (embedding, normalization,
activations, distances, statistics) against PyTorch: values, first and second derivatives in
float64 and float32, and gradviz's own gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import run_both

import gradviz

rng = np.random.default_rng(99)


def normal(*shape):
    return rng.standard_normal(shape)


def spread(*shape):
    """Values away from an activation's kinks (0, +-1, +-3, 6)."""
    x = rng.uniform(-5.0, 8.0, size=shape)
    for kink in (-3.0, -1.0, 0.0, 1.0, 3.0, 6.0):
        x = np.where(np.abs(x - kink) < 0.05, x + 0.1, x)
    return x


IDX = [[0, 2, 2], [3, 0, 1]]

CASES = [
    ("embedding", lambda m, w: m.nn.functional.embedding(m.tensor(IDX), w) ** 2, (normal(4, 3),)),
    ("embedding_padding", lambda m, w: m.nn.functional.embedding(m.tensor(IDX), w, padding_idx=2).sin(),
     (normal(4, 3),)),
    ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x, (4,)) ** 2, (normal(3, 4),)),
    ("layer_norm_affine", lambda m, x, w, b: m.nn.functional.layer_norm(x, (2, 3), w, b, 1e-3).sin(),
     (normal(2, 2, 3), normal(2, 3), normal(2, 3))),
    ("layer_norm_unbatched", lambda m, x, w: m.nn.functional.layer_norm(x, [3], w) * x,
     (normal(3), normal(3))),
    ("batch_norm_train", lambda m, x, w, b: m.nn.functional.batch_norm(x, None, None, w, b, True) ** 2,
     (normal(5, 3), normal(3), normal(3))),
    ("batch_norm_train_3d", lambda m, x, w: m.nn.functional.batch_norm(x, None, None, w, None, True).sin(),
     (normal(2, 3, 4), normal(3))),
    ("batch_norm_train_4d", lambda m, x, w, b: m.nn.functional.batch_norm(x, None, None, w, b, True).tanh(),
     (normal(2, 3, 2, 2), normal(3), normal(3))),
    ("batch_norm_eval", lambda m, x, w, b: m.nn.functional.batch_norm(
        x, m.tensor([0.5, -0.2, 0.1], dtype=x.dtype), m.tensor([1.5, 0.7, 2.0], dtype=x.dtype), w, b) ** 2,
     (normal(4, 3), normal(3), normal(3))),
]


for name in ["relu6", "hardtanh", "logsigmoid", "softsign", "selu", "celu", "mish", "hardswish",
             "hardsigmoid", "tanhshrink"]:
    CASES.append((name, lambda m, x, n=name: getattr(m.nn.functional, n)(x) * x, (spread(3, 4),)))
CASES += [
    ("hardtanh_range", lambda m, x: m.nn.functional.hardtanh(x, -2.0, 4.0) ** 2, (spread(7),)),
    ("celu_alpha", lambda m, x: m.nn.functional.celu(x, alpha=0.5).sin(), (spread(2, 5),)),
    ("softmin", lambda m, x: m.nn.functional.softmin(x, dim=1) * x, (normal(3, 4),)),
    ("logsigmoid_large", lambda m, x: m.nn.functional.logsigmoid(x * 40), (normal(6),)),
]

CASES += [
    ("median", lambda m, x: x.median() * x, (normal(3, 5),)),
    ("median_ties", lambda m, x: m.median(x) ** 2, (np.array([1.0, 2.0, 2.0, 0.5, 3.0]),)),
    ("median_dim", lambda m, x: x.median(1).values ** 2, (normal(4, 5),)),
    ("median_dim_even_keepdim", lambda m, x: m.median(x, 0, keepdim=True)[0].exp(), (normal(4, 3),)),
    ("std_mean", lambda m, x: m.std_mean(x, 1)[0] * m.std_mean(x, 1)[1], (normal(3, 4),)),
    ("var_mean", lambda m, x: m.var_mean(x, unbiased=False)[0] + m.var_mean(x)[1], (normal(3, 4),)),
]

F_TARGET = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
CASES += [
    ("cosine_similarity", lambda m, a, b: m.nn.functional.cosine_similarity(a, b), (normal(3, 4), normal(3, 4))),
    ("cosine_similarity_broadcast_dim0", lambda m, a, b: m.cosine_similarity(a, b, dim=0) ** 2,
     (normal(3, 4), normal(3, 1))),
    ("pairwise_distance", lambda m, a, b: m.nn.functional.pairwise_distance(a, b), (normal(3, 4), normal(3, 4))),
    ("pairwise_distance_p1_keepdim", lambda m, a, b: m.pairwise_distance(a, b, p=1.0, keepdim=True),
     (normal(2, 5), normal(2, 5))),
    ("cdist", lambda m, a, b: m.cdist(a, b), (normal(3, 2), normal(4, 2))),
    ("cdist_p1_batched", lambda m, a, b: m.cdist(a, b, p=1), (normal(2, 3, 2), normal(2, 2, 2))),
    ("dist", lambda m, a, b: m.dist(a, b) * a.dist(b, 3), (normal(3, 2), normal(3, 2))),
    ("xlogy", lambda m, a, b: m.xlogy(a, b), (normal(2, 3), np.abs(normal(2, 3)) + 0.1)),
    ("kl_div_batchmean", lambda m, a, b: m.nn.functional.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"),
     (normal(2, 3), normal(2, 3))),
    ("kl_div_log_target_none", lambda m, a, b: m.nn.functional.kl_div(a, b, reduction="none", log_target=True),
     (normal(2, 3), normal(2, 3))),
    ("kl_div_sum_probabilities", lambda m, a: m.nn.functional.kl_div(a, m.tensor(F_TARGET, dtype=a.dtype), reduction="sum"),
     (normal(2, 3),)),
    ("multi_margin", lambda m, a: m.nn.functional.multi_margin_loss(a, m.tensor([2, 0, 1])), (normal(3, 4),)),
    ("multi_margin_p2_sum", lambda m, a: m.nn.functional.multi_margin_loss(a, m.tensor([3, 1]), p=2, margin=0.5, reduction="sum"),
     (normal(2, 4),)),
]

CASES += [
    ("conv2d", lambda m, x, w, b: m.nn.functional.conv2d(x, w, b), (normal(2, 3, 5, 4), normal(4, 3, 3, 2), normal(4))),
    ("conv2d_stride_padding", lambda m, x, w: m.nn.functional.conv2d(x, w, stride=2, padding=1).tanh(),
     (normal(1, 2, 5, 5), normal(3, 2, 3, 3))),
    ("conv2d_dilation_same", lambda m, x, w: m.nn.functional.conv2d(x, w, padding="same", dilation=2) ** 2,
     (normal(1, 1, 6, 5), normal(2, 1, 3, 3))),
    ("conv2d_unbatched", lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, padding=(1, 0)), (normal(2, 4, 4), normal(1, 2, 2, 2), normal(1))),
    ("max_pool2d", lambda m, x: m.nn.functional.max_pool2d(x, 2) ** 2, (normal(2, 2, 4, 6),)),
    ("max_pool2d_overlap_padding", lambda m, x: m.nn.functional.max_pool2d(x, 3, stride=2, padding=1) * 3,
     (normal(1, 2, 5, 5),)),
    ("avg_pool2d", lambda m, x: m.nn.functional.avg_pool2d(x, 2) ** 2, (normal(2, 2, 4, 6),)),
    ("avg_pool2d_padding_stride", lambda m, x: m.nn.functional.avg_pool2d(x, (3, 2), stride=1, padding=1).sin(),
     (normal(1, 1, 4, 4),)),
    ("adaptive_avg_pool2d", lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (1, 1)) ** 2, (normal(2, 3, 4, 4),)),
    ("adaptive_avg_pool2d_2x3", lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (2, 3)).exp(), (normal(1, 2, 4, 6),)),
    # sizes that do not divide: torch's overlapping bins floor(i n / m) .. ceil((i + 1) n / m)
    ("adaptive_avg_pool2d_overlapping_bins", lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (3, 4)).exp(),
     (normal(2, 2, 5, 7),)),
    ("adaptive_avg_pool2d_overlapping_unbatched", lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (None, 2)) ** 2,
     (normal(2, 4, 3),)),
    ("unfold_fold", lambda m, x: m.nn.functional.fold(m.nn.functional.unfold(x, 2, padding=1) ** 2, (3, 4), 2, padding=1),
     (normal(1, 2, 3, 4),)),
    ("unfold_fold_unbatched", lambda m, x: m.nn.functional.fold(
        m.nn.functional.unfold(x, (2, 3), padding=1, stride=(1, 2)) ** 2, (3, 5), (2, 3), padding=1,
        stride=(1, 2)), (normal(2, 3, 5),)),
    ("lenet_block", lambda m, x, w: m.nn.functional.avg_pool2d(m.sigmoid(m.nn.functional.conv2d(x, w, padding=2)), 2, 2),
     (normal(2, 1, 6, 6), normal(3, 1, 5, 5) * 0.3)),
]

CASES += [
    ("pad", lambda m, x: m.nn.functional.pad(x, (1, 2)) ** 2, (normal(2, 3),)),
    ("pad_value_2d_crop", lambda m, x: m.nn.functional.pad(x, (-1, 1, 2, 0), value=0.5).sin(), (normal(2, 3, 4),)),
    ("lerp_scalar", lambda m, a, b: m.lerp(a, b, 0.3) ** 2, (normal(2, 3), normal(3))),
    ("lerp_tensor", lambda m, a, b, w: a.lerp(b, w) ** 2, (normal(2, 3), normal(2, 3), normal(3))),
    ("atan2", lambda m, a, b: m.atan2(a, b), (normal(2, 3), normal(2, 3))),
    ("nan_to_num", lambda m, a: m.nan_to_num(a * 2) ** 2, (normal(5),)),
    ("tensor_unfold", lambda m, a: a.unfold(1, 3, 2) ** 2, (normal(2, 7),)),
    ("tensor_unfold_dim0_overlap", lambda m, a: a.unfold(0, 2, 1).exp(), (normal(4, 2),)),
    ("movedim_swapaxes_ravel", lambda m, a: m.movedim(a, 0, -1).swapaxes(0, 1).ravel() ** 2, (normal(2, 3, 4),)),
]

MASK = np.array([[True, False, True, True], [True, True, False, False], [True, False, False, True]])
CASES += [
    ("quantile", lambda m, a: m.quantile(a, 0.3), (normal(7),)),
    ("quantile_dim_keepdim", lambda m, a: a.quantile(0.6, dim=1, keepdim=True) ** 2, (normal(3, 5),)),
    ("quantile_tensor_q", lambda m, a: m.quantile(a, m.tensor([0.2, 0.75], dtype=a.dtype), dim=0), (normal(4, 3),)),
    ("quantile_midpoint", lambda m, a: m.quantile(a, 0.4, dim=-1, interpolation="midpoint"), (normal(2, 6),)),
    ("sdpa", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v),
     (normal(2, 3, 4), normal(2, 4, 4), normal(2, 4, 2))),
    ("sdpa_causal", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
     (normal(1, 2, 4, 3), normal(1, 2, 4, 3), normal(1, 2, 4, 3))),
    ("sdpa_bool_mask_scale", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=m.tensor(MASK), scale=0.5), (normal(3, 2), normal(4, 2), normal(4, 3))),
    ("fill_diagonal_", lambda m, a: (a * 2).fill_diagonal_(0.5) ** 2, (normal(3, 3),)),
]

CASES += [
    ("conv1d", lambda m, x, w, b: m.nn.functional.conv1d(x, w, b), (normal(2, 3, 7), normal(4, 3, 3), normal(4))),
    ("conv1d_stride_padding_dilation", lambda m, x, w: m.nn.functional.conv1d(x, w, stride=2, padding=2, dilation=2).tanh(),
     (normal(1, 2, 9), normal(3, 2, 2))),
    ("conv1d_same_unbatched", lambda m, x, w: m.nn.functional.conv1d(x, w, padding="same") ** 2, (normal(2, 6), normal(1, 2, 3))),
    ("max_pool1d", lambda m, x: m.nn.functional.max_pool1d(x, 2) ** 2, (normal(2, 3, 6),)),
    ("avg_pool1d_padding", lambda m, x: m.nn.functional.avg_pool1d(x, 3, stride=1, padding=1).sin(), (normal(1, 2, 5),)),
    ("adaptive_avg_pool1d", lambda m, x: m.nn.functional.adaptive_avg_pool1d(x, 2).exp(), (normal(2, 2, 6),)),
    ("adaptive_avg_pool1d_overlapping_bins", lambda m, x: m.nn.functional.adaptive_avg_pool1d(x, 4).exp(),
     (normal(2, 2, 5),)),
    ("adaptive_avg_pool1d_upsampling", lambda m, x: m.nn.AdaptiveAvgPool1d(5)(x) ** 2, (normal(3, 3),)),
    ("lp_pool1d_p2", lambda m, x: m.nn.functional.lp_pool1d(x, 2, 3), (normal(2, 3, 7),)),
    ("lp_pool1d_p3_stride", lambda m, x: m.nn.functional.lp_pool1d(x.abs() + 0.1, 3.0, 2, stride=1),
     (normal(3, 5),)),
    ("lp_pool1d_inf", lambda m, x: m.nn.functional.lp_pool1d(x, float("inf"), 2), (normal(2, 2, 6),)),
    ("lp_pool2d_p2", lambda m, x: m.nn.functional.lp_pool2d(x, 2, (2, 3)), (normal(2, 2, 4, 6),)),
    ("lp_pool2d_p1_stride", lambda m, x: m.nn.functional.lp_pool2d(x.exp(), 1, 2, stride=1), (normal(2, 4, 3),)),
    ("lp_pool2d_module", lambda m, x: m.nn.LPPool2d(1.5, 2, stride=(1, 2))(x.exp()), (normal(1, 2, 5, 4),)),
    ("lp_pool1d_module_neg_inf", lambda m, x: m.nn.LPPool1d(float("-inf"), 2)(x), (normal(2, 3, 4),)),
]


# torch has no derivative for these backward kernels (gradgradcheck below checks ours)
NO_DOUBLE_BACKWARD_IN_TORCH = {"hardsigmoid", "cdist", "cdist_p1_batched", "multi_margin",
                               "multi_margin_p2_sum", "sdpa_causal"}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case, dtype):
    name, program, arrays = case
    second = dtype == "float64" and name not in NO_DOUBLE_BACKWARD_IN_TORCH
    run_both(program, arrays, dtype=dtype, create_graph_order=2 if second else 1)


# the padding row of an embedding gets no gradient by definition: not a derivative to check
SMOOTH = [c for c in CASES if c[0] not in ("embedding_padding", "median_ties")]


@pytest.mark.parametrize("case", SMOOTH, ids=[c[0] for c in SMOOTH])
def test_gradcheck_and_gradgradcheck(case):
    _, program, arrays = case
    inputs = tuple(gradviz.tensor(a, requires_grad=True) for a in arrays)

    def f(*xs):
        return program(gradviz, *xs)

    assert gradviz.autograd.gradcheck(f, inputs)
    assert gradviz.autograd.gradgradcheck(f, inputs)


def test_statistics_without_gradients_match_torch():
    import torch

    labels = [3, 0, 1, 3, 3, 0, 7]
    for m in (gradviz, torch):
        t = m.tensor(labels)
        m_results = [t.unique(), m.unique(t, return_counts=True), t.unique(return_inverse=True),
                     m.unique(m.tensor([[2.5, 1.0], [2.5, -1.0]]), return_inverse=True, return_counts=True),
                     m.bincount(t), t.bincount(minlength=10),
                     m.bincount(t, weights=m.tensor([0.5, 1, 2, 3, 4, 5, 6], dtype=m.float64)),
                     m.bincount(t, weights=m.tensor([1, 2, 3, 4, 5, 6, 7])),
                     m.bincount(m.tensor([], dtype=m.int64)), m.median(m.tensor([4, 1, 3, 2])),
                     m.median(m.tensor([[4, 1], [3, 2]]), dim=1)]
        if m is gradviz:
            ours = m_results
        else:
            theirs = m_results

    def flat(x):
        if isinstance(x, tuple):
            return [flat(v) for v in x]
        return (str(x.dtype).split(".")[-1], x.tolist())

    assert [flat(x) for x in ours] == [flat(x) for x in theirs]
    for bad in ([-1, 2], [[1, 2]]):
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs."):
            gradviz.bincount(gradviz.tensor(bad))
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs."):
            torch.bincount(torch.tensor(bad))


def test_index_helpers_and_schedulers_match_torch():
    import torch

    results = []
    for m in (gradviz, torch):
        seqs = [m.tensor([1.0, 2.0, 3.0]), m.tensor([4.0]), m.tensor([5.0, 6.0])]
        p = m.nn.Parameter(m.ones(1))
        optimizer = m.optim.SGD([p], lr=1.0)
        scheduler = m.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1, factor=0.5,
                                                            cooldown=1, min_lr=0.1)
        rates = []
        for value in [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.9, 0.9, 0.9]:
            scheduler.step(value)
            rates.append(optimizer.param_groups[0]["lr"])
        maximize = m.optim.lr_scheduler.ReduceLROnPlateau(m.optim.SGD([p], lr=1.0), "max",
                                                          patience=0, threshold=0.1,
                                                          threshold_mode="abs")
        for value in [0.5, 0.55, 0.7]:
            maximize.step(value)
        results.append([m.triu_indices(3, 4).tolist(), m.tril_indices(4, 3, -1).tolist(),
                        m.triu_indices(3, 3, 1).tolist(),
                        m.nn.utils.rnn.pad_sequence(seqs).tolist(),
                        m.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=-1.0,
                                                    padding_side="left").tolist(),
                        rates, scheduler.get_last_lr(), maximize.get_last_lr(),
                        m.nan_to_num(m.tensor([float("nan"), float("inf"), -float("inf")])).tolist(),
                        m.tensor([1.5, 300.0]).byte().tolist(), m.tensor([1.5, -3.0]).short().dtype.__repr__(),
                        m.arange(10.0).unfold(0, 4, 3).tolist()])
    results[0][10] = results[0][10].replace("gradviz", "torch")
    assert results[0] == results[1]


def _adaptive_to_one(lib, fn, shape):
    x = lib.tensor(np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape), requires_grad=True)
    y = fn(lib.nn.functional, x)
    (g,) = lib.autograd.grad((y * 3.0).sum(), x, create_graph=True)
    facts = [y.grad_fn.name(), list(y.shape), g.tolist(), g.requires_grad]
    try:
        lib.autograd.grad(g.sum(), x)
    except RuntimeError as e:
        facts.append("does not require grad" in str(e))
    return facts


@pytest.mark.parametrize("fn, shape", [
    (lambda F, x: F.adaptive_avg_pool2d(x, (1, 1)), (2, 3, 4, 4)),
    (lambda F, x: F.adaptive_avg_pool2d(x, 1), (3, 2, 5)),
    (lambda F, x: F.adaptive_avg_pool1d(x, 1), (2, 3, 4)),
    (lambda F, x: F.adaptive_avg_pool2d(x, (1, None)), (2, 3, 1, 1)),
])
def test_adaptive_avg_pool_to_one_is_a_mean(fn, shape):
    """torch computes an adaptive average pool to (1, 1) as ``mean(-1, -2, keepdim=True)``
    (MeanBackward1): the gradient of a constant-weighted output is a constant, so
    differentiating it again raises "does not require grad" (found by the op fuzzer, seed 110)."""
    assert _adaptive_to_one(gradviz, fn, shape) == _adaptive_to_one(torch, fn, shape)


@pytest.mark.parametrize("fn, shape", [
    (lambda F, x: F.adaptive_avg_pool1d(x, 2), (3, 3)),
    (lambda F, x: F.adaptive_avg_pool1d(x, 4), (1, 2, 5)),
    (lambda F, x: F.adaptive_avg_pool2d(x, (2, 3)), (2, 3, 4)),
])
def test_adaptive_avg_pool_overlapping_bins_gradient_requires_grad(fn, shape):
    """torch's 2-D adaptive average pool backward takes the input (its derivative there is
    zeros): under create_graph the gradient requires grad and differentiates to zeros, with
    overlapping bins too (found by the op fuzzer, seeds 5453, 6149)."""
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(normal(*shape), requires_grad=True)
        (g,) = lib.autograd.grad((fn(lib.nn.functional, x) * 0.5).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g.detach()).sum(), x)
        results.append([g.requires_grad, g.detach().numpy().round(12).tolist(), gg.numpy(force=True).tolist()])
    assert results[0] == results[1]


def test_embedding_of_zero_width_rows():
    """An embedding weight with zero columns: the gradient is an empty (rows, 0) tensor
    (gradviz's backward reshaped to (-1, 0) and raised; found by the op fuzzer, seed 2576)."""
    results = []
    for lib in (gradviz, torch):
        weight = lib.zeros(3, 0, requires_grad=True)
        out = lib.nn.functional.embedding(lib.tensor([[0, 2], [1, 0]]), weight)
        (g,) = lib.autograd.grad(out.sum(), weight)
        results.append([list(out.shape), list(g.shape)])
    assert results[0] == results[1]


def _embedding_weight(dtype):
    rows = np.random.default_rng(5).standard_normal((7, 5)) * [[0.1], [1], [2], [0.5], [3], [1.5], [40]]
    return rows.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("max_norm, norm_type", [(1.0, 2.0), (0.5, 1.0), (1.2, float("inf")), (2.0, 3.0),
                                                 (0.3, 0.5), (100.0, 2.0), (1.0, 2)])
def test_embedding_max_norm_renormalizes_the_named_rows_in_place(dtype, max_norm, norm_type):
    """torch's embedding_renorm_: the rows the indices name (each once), norm above max_norm,
    scaled in place by max_norm / (norm + 1e-7); one version bump; the other rows untouched;
    then the lookup and its gradient as without max_norm. The bits of the weight and output
    where gradviz's norm has torch's bits (p 1, 0.5, inf); gradviz's p-norms of p 2 and 3 may
    differ from torch's in the last bit, and so may the scale."""
    results = []
    for lib in (torch, gradviz):
        weight = lib.tensor(_embedding_weight(dtype), requires_grad=True)
        version = weight._version
        idx = lib.tensor([[0, 2, 2], [4, 0, 1], [6, 6, 2]])
        out = lib.nn.functional.embedding(idx, weight, max_norm=max_norm, norm_type=norm_type)
        out.backward(lib.arange(45, dtype=out.dtype).reshape(out.shape))
        results.append([weight._version - version, out.grad_fn.name(), weight.detach().numpy().copy(),
                        out.detach().numpy(), weight.grad.numpy()])
    (t_version, t_name, *t_arrays), (g_version, g_name, *g_arrays) = results
    assert (g_version, g_name) == (t_version, t_name) == (1, "EmbeddingBackward0")
    exact = norm_type in (1.0, 0.5, float("inf")) or max_norm == 100.0  # 100: nothing renormed
    for got, want in zip(g_arrays, t_arrays):
        assert got.dtype == want.dtype
        if exact:
            assert np.array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)


def test_embedding_module_max_norm_and_padding():
    results = []
    for lib in (torch, gradviz):
        layer = lib.nn.Embedding(7, 5, padding_idx=3, max_norm=0.5, norm_type=1.0)
        with lib.no_grad():
            layer.weight.copy_(lib.tensor(_embedding_weight("float32")))
        out = layer(lib.tensor([[1, 3, 5], [6, 1, 0]]))
        out.sum().backward()
        results.append([repr(layer), layer.weight.detach().numpy().copy(), out.detach().numpy(),
                        layer.weight.grad.numpy()])
    assert results[0][0] == results[1][0]
    for got, want in zip(results[1][1:], results[0][1:]):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("padding_idx", [None, 1, 2])
def test_embedding_scale_grad_by_freq(dtype, padding_idx):
    """Each gradient row divided by its index's count in the batch (Note [Embedding gradient
    scaled by frequency]): the bits of torch's gradient where the counts are powers of two,
    within one rounding per row added where a count is 3; also under create_graph."""
    indices = {"powers of two": [[0, 2, 2], [4, 0, 1], [2, 2, 5]],
               "three": [[0, 2, 2], [2, 0, 1], [0, 5, 5]]}
    for label, idx in indices.items():
        results = []
        for lib in (torch, gradviz):
            weight = lib.tensor(_embedding_weight(dtype), requires_grad=True)
            out = lib.nn.functional.embedding(lib.tensor(idx), weight, padding_idx=padding_idx,
                                              scale_grad_by_freq=True)
            g = lib.tensor(np.random.default_rng(1).standard_normal(out.shape), dtype=out.dtype)
            (grad,) = lib.autograd.grad(out, weight, g, create_graph=True)
            out.backward(g)
            results.append([weight.grad.numpy(), grad.detach().numpy()])
        for got, want in zip(results[1], results[0]):
            if label == "powers of two":
                assert np.array_equal(got, want), label
            else:
                np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)


EMBEDDING_ERRORS = {
    "padding_idx outside": lambda m, w: m.nn.functional.embedding(m.tensor([0]), w, 9, max_norm=1.0),
    "float indices with max_norm": lambda m, w: m.nn.functional.embedding(m.tensor([0.0]), w, max_norm=1.0),
    "float indices": lambda m, w: m.nn.functional.embedding(m.tensor([0.0]), w),
    "index outside with max_norm": lambda m, w: m.nn.functional.embedding(m.tensor([7, 9]), w, max_norm=1.0),
    "1-d weight with max_norm": lambda m, w: m.nn.functional.embedding(m.tensor([1]), w[0], max_norm=1.0),
    "negative index with max_norm": lambda m, w: m.nn.functional.embedding(m.tensor([-1]), w, max_norm=0.01),
}


@pytest.mark.parametrize("case", sorted(EMBEDDING_ERRORS))
def test_embedding_errors_match_torch(case):
    def error(lib):
        try:
            EMBEDDING_ERRORS[case](lib, lib.tensor(_embedding_weight("float32")))
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e).replace("torch.", "gradviz.")
        return None

    assert error(torch) is not None
    assert error(gradviz) == error(torch)


@pytest.mark.parametrize("name", ["std_mean", "var_mean"])
@pytest.mark.parametrize("used", ["spread", "mean", "both"])
def test_std_mean_is_one_node(name, used):
    """``std_mean``/``var_mean`` record one node for both results (StdMeanBackward0 /
    VarMeanBackward0, as torch), and its gradient and second derivative match torch whichever
    of the results the loss uses (gradviz recorded a StdBackward0 and a MeanBackward1)."""
    x0 = normal(3, 4)
    results = []
    for lib in (gradviz, torch):
        x = lib.tensor(x0, requires_grad=True)
        spread_, mean_ = getattr(lib, name)(x, 1, correction=0)
        loss = {"spread": (spread_ * 1.5).sum(), "mean": mean_.sin().sum(),
                "both": (spread_ * mean_).sum()}[used]
        (g,) = lib.autograd.grad(loss, x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        names = [t.grad_fn.name() for t in (spread_, mean_)]
        results.append((names, g.detach().numpy(), gg.numpy()))
    (names, g, gg), (t_names, t_g, t_gg) = results
    assert names == t_names
    np.testing.assert_allclose(g, t_g, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gg, t_gg, rtol=1e-10, atol=1e-12)


def _convolution_second_derivative(lib, kind, requires, floored, used):
    """Which first gradients of a convolution require grad under create_graph, and the second
    derivative (None for an input that gets none) of a weighted sum of the ``used`` ones."""
    F = lib.nn.functional
    shapes = {"conv1d": ((2, 2, 5), (3, 2, 2)), "conv2d": ((1, 2, 4, 4), (3, 2, 2, 2)),
              "conv_transpose1d": ((1, 2, 4), (2, 3, 2)), "conv_transpose2d": ((1, 2, 3, 3), (2, 3, 2, 2))}[kind]
    rs = np.random.RandomState(0)
    x, w, b = (lib.tensor(rs.randn(*shape), requires_grad=r) for shape, r in zip(shapes + ((3,),), requires))
    xi, wi = (t.floor() if floored == i else t * 1.0 for i, t in enumerate((x, w)))
    y = getattr(F, kind)(xi, wi, b, padding=1) if "transpose" not in kind else getattr(F, kind)(xi, wi, b)
    leaves = [t for t in (x, w, b) if t.requires_grad]
    weights = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
    grads = lib.autograd.grad((y * weights).sum(), leaves, create_graph=True)
    facts = [[g.requires_grad for g in grads]]
    chosen = [g for g, u in zip(grads, used) if u and g.requires_grad]
    if chosen:
        second = lib.autograd.grad(sum((g * g.detach().sin()).sum() for g in chosen), leaves, allow_unused=True)
        facts.append([None if h is None else np.round(h.numpy(), 8).tolist() for h in second])
    return facts


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"])
@pytest.mark.parametrize("requires, floored, used", [
    ((True, True, True), None, (True, True, True)), ((True, True, True), 0, (False, True, True)),
    ((True, True, False), None, (True, False, False)), ((True, True, False), None, (False, True, False)),
    ((True, True, True), 1, (True, False, True)), ((False, True, True), None, (True, True, False)),
    ((True, False, True), None, (True, True, False)), ((True, True, True), 0, (False, False, True))])
def test_convolution_double_backward_connectivity(kind, requires, floored, used):
    """torch's convolution double backward gives the weight a gradient only through the input's
    gradient and the input only through the weight's (each is linear in itself): an input the
    second derivative does not reach this way is None, not zeros; every first gradient of the
    one backward node requires grad when an input or the weight does (gradviz gave zeros and a
    bias gradient not requiring grad; found by the op fuzzer, seed 2698 ``conv1d(x.floor(), w)``)."""
    expected = _convolution_second_derivative(torch, kind, requires, floored, used)
    assert _convolution_second_derivative(gradviz, kind, requires, floored, used) == expected


def _normalization_second_derivative(lib, name, requires):
    F = lib.nn.functional
    rs = np.random.RandomState(0)
    x = lib.tensor(rs.randn(2, 3, 4), requires_grad=requires[0])
    k = 4 if name == "layer_norm" else 3
    w = lib.tensor(rs.randn(k), requires_grad=requires[1])
    b = lib.tensor(rs.randn(k), requires_grad=requires[2])
    y = {"layer_norm": lambda: F.layer_norm(x, (4,), w, b),
         "batch_norm": lambda: F.batch_norm(x, None, None, w, b, True),
         "batch_norm_eval": lambda: F.batch_norm(x, lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64), w, b),
         "group_norm": lambda: F.group_norm(x, 3, w, b),
         "instance_norm": lambda: F.instance_norm(x, weight=w, bias=b)}[name]()
    leaves = [t for t in (x, w, b) if t.requires_grad]
    weights = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
    grads = lib.autograd.grad((y * weights).sum(), leaves, create_graph=True)
    facts = [[g.requires_grad for g in grads]]
    used = [g for g in grads if g.requires_grad]
    if used:
        second = lib.autograd.grad(sum((g * g.detach().sin()).sum() for g in used), leaves, allow_unused=True)
        facts.append([None if h is None else np.round(h.numpy(), 8).tolist() for h in second])
    return facts


@pytest.mark.parametrize("name", ["layer_norm", "batch_norm", "batch_norm_eval", "group_norm", "instance_norm"])
@pytest.mark.parametrize("requires", [(True, True, True), (False, True, True), (True, False, True),
                                      (False, False, True)])
def test_normalization_bias_gradient_requires_grad_as_torch(name, requires):
    """torch's layer/batch norm backward is one node: under create_graph the bias gradient (a sum
    of the upstream) requires grad whenever the input or the weight does (gradviz's did not:
    found by the op fuzzer, seed 4664); group norm's does not; second derivatives agree."""
    expected = _normalization_second_derivative(torch, name, requires)
    assert _normalization_second_derivative(gradviz, name, requires) == expected


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_variance_of_low_precision_floats_has_torchs_bits(name, dtype):
    """torch's CPU variance accumulates float32 and float16 in double and rounds once: the
    float32 results of numpy's own variance were a bit off in about a third of the rows. The
    mean of var_mean/std_mean is torch's double Welford mean rounded, compared within a bit,
    and so is float64, where torch's Welford and numpy's two passes round differently."""
    data = np.random.default_rng(12).standard_normal((40, 9)) * 3 + 1
    results = []
    for lib in (torch, gradviz):
        x = lib.tensor(data, dtype=getattr(lib, dtype))
        out = getattr(lib, name)(x, 1) if name.endswith("mean") else getattr(x, name)(1)
        outs = out if isinstance(out, tuple) else (out,)
        results.append([o.numpy() for o in outs] + [getattr(x, name.split("_")[0])(correction=0).numpy()])
    for i, (got, want) in enumerate(zip(results[1], results[0])):
        assert got.dtype == want.dtype
        if (name.endswith("mean") and i == 1) or dtype == "float64":
            eps = float(np.finfo(got.dtype).eps)  # a mean near 0: the data's scale
            np.testing.assert_allclose(got, want, rtol=4 * eps, atol=8 * eps * np.abs(data).max())
        else:
            assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_and_cumprod_have_torchs_bits(dtype, dim):
    """torch's CPU scans run in double for float32 and float16 and round each output once;
    numpy's float32 running sum drifted (most entries of a long row a few bits off). The
    cumsum's gradient (a reversed cumsum) too; a leading -0.0 still becomes +0.0."""
    rng = np.random.default_rng(13)
    data = rng.standard_normal((9, 70)) * 2
    data[0, :3] = -0.0
    factors = (1 + rng.standard_normal((9, 70)) * 0.01).astype(dtype)
    results = []
    for lib in (torch, gradviz):
        x = lib.tensor(data, dtype=getattr(lib, dtype), requires_grad=True)
        y = x.cumsum(dim)
        y.backward(lib.tensor(data[::-1].copy(), dtype=y.dtype))
        results.append([y.detach().numpy(), x.grad.numpy(), lib.tensor(factors).cumprod(dim).numpy()])
    for got, want in zip(results[1], results[0]):
        assert got.dtype == want.dtype
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


UNIQUE_CASES = {
    "dim 0": lambda m: m.unique(m.tensor([[1, 2], [1, 2], [0, 1], [0, 3]]), dim=0, return_inverse=True,
                                return_counts=True),
    "dim 1": lambda m: m.unique(m.tensor([[1, 2, 1], [1, 2, 1]]), dim=1, return_inverse=True, return_counts=True),
    "dim -1 method": lambda m: m.tensor([[3, 1, 3], [0, 2, 0]]).unique(dim=-1),
    "3-d dim 0": lambda m: m.unique(m.tensor([[[1, 0], [0, 1]], [[1, 0], [0, 1]], [[0, 0], [0, 0]]]), dim=0,
                                    return_inverse=True),
    "3-d dim 2": lambda m: m.unique(m.tensor([[[1, 1], [0, 0]], [[1, 1], [2, 2]]]), dim=2, return_counts=True),
    "rows with NaN stay apart": lambda m: m.unique(m.tensor([[2.0, NAN], [2.0, NAN], [1.0, 0.0]]), dim=0),
    "signed zeros are equal": lambda m: m.unique(m.tensor([[0.0, 1.0], [-0.0, 1.0]]), dim=0, return_counts=True),
    "empty selected dim": lambda m: m.unique(m.zeros(0, 3), dim=0, return_inverse=True, return_counts=True),
    "bool": lambda m: m.unique(m.tensor([[True, False], [True, False]]), dim=0),
    "empty other dim": lambda m: m.unique(m.zeros(2, 0), dim=0),
    "dim out of range": lambda m: m.unique(m.tensor([[1, 2]]), dim=2),
    "0-d with dim": lambda m: m.unique(m.tensor(3), dim=0),
}
NAN = float("nan")


@pytest.mark.parametrize("case", sorted(UNIQUE_CASES))
def test_unique_along_a_dim_matches_torch(case):
    def run(lib):
        try:
            out = UNIQUE_CASES[case](lib)
        except Exception as error:  # noqa: BLE001 - compared with torch's
            return type(error).__name__, str(error)
        outs = out if isinstance(out, tuple) else (out,)
        return [(o.numpy().tolist(), o.numpy().dtype.name, tuple(o.shape)) for o in outs]

    assert str(run(gradviz)) == str(run(torch))


@pytest.mark.parametrize("dim", [None, 0])
def test_unique_of_a_tensor_requiring_grad_records_torchs_node(dim):
    results = []
    for lib in (torch, gradviz):
        y = lib.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]], requires_grad=True)
        values, inverse = lib.unique(y, dim=dim, return_inverse=True)
        try:
            values.sum().backward()
            error = None
        except Exception as e:  # noqa: BLE001 - compared with torch's
            error = (type(e).__name__, str(e))
        results.append([values.grad_fn.name(), values.requires_grad, inverse.requires_grad, error])
    assert results[1] == results[0]


@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (3, 5, 6)], ids=["batched", "unbatched"])
def test_unfold_and_fold_nodes_save_what_torch_saves(shape):
    """Im2ColBackward0 and Col2ImBackward0: one node each, batched or not (torch adds no
    unsqueeze for an unbatched input), with torch's ``_saved_*`` values."""
    def nodes(m):
        x = m.ones(shape, requires_grad=True)
        cols = m.nn.functional.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(1, 2))
        out = m.nn.functional.fold(cols, shape[-2:], (2, 3), dilation=(1, 2), padding=1,
                                   stride=(1, 2))
        return [(node.name(), [next_node.name() for next_node, _ in node.next_functions],
                 {name: getattr(node, name) for name in dir(node) if name.startswith("_saved")})
                for node in (cols.grad_fn, out.grad_fn)]
    assert nodes(gradviz) == nodes(torch)
