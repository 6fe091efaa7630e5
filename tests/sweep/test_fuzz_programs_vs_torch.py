"""Differential fuzzing of the op layer: random programs run in PyTorch and in gradviz.

A seed picks a dtype, two input shapes (the second broadcastable to the first; size-1 and
zero-size dims included), a weight tensor ``w`` of shape (4, 4, 3), and a chain of 2-8 steps:
elementwise ops, broadcasting binary ops with the second input, reductions with dim/keepdim,
shape and indexing ops, products and convolutions with slices of ``w``, pooling, normalization,
losses, scans, scatter/index_put, integer tensors from comparisons, in-place ops on
intermediates and on views of them, ``retain_grad`` and gradient hooks; since round 2 also
fmod/remainder, lerp/addcdiv/addcmul with tensors, atan2/hypot/xlogy/logaddexp2, diff,
triu/tril, diag/diag_embed, einsum diagonals, kron, cross, cdist/dist at zero distance,
repeat_interleave, take, masked_scatter, nan_to_num of infinities, frac/trunc/round, sinc,
std_mean/var_mean, lp_pool and adaptive pooling with overlapping bins, ties under round(). A step that PyTorch
rejects for the current shape is dropped while the program is generated, so every program
runs in PyTorch.

For each program both libraries report: the output's shape, dtype, values and
``requires_grad`` (or the error type); the first gradients of a weighted sum of the output with
``create_graph=True, allow_unused=True`` (``None`` vs tensor compared); the second gradients
of a weighted sum of those first gradients (again ``None`` vs tensor, or the error type, e.g.
"does not require grad"); and, from a fresh run with ``backward()``, the leaves' ``.grad`` and
the ``.grad`` of intermediates that called ``retain_grad()``.

Accepted differences, handled in ``compare``: PyTorch's ZeroTensor gradients are read with
``numpy(force=True)``; a second derivative PyTorch has not implemented ("derivative for
aten::hardsigmoid_backward is not implemented") that gradviz computes; float32 overflow to inf/nan (where PyTorch's result is not finite in
float32, gradviz's need only be non-finite or beyond float32 range too).

``test_fuzz_seed`` runs a fixed range of seeds; every seed must agree. To fuzz more seeds or
shrink a failure, run this file directly::

    PYTHONPATH=. python tests/sweep/test_fuzz_programs_vs_torch.py run 0 5000
    PYTHONPATH=. python tests/sweep/test_fuzz_programs_vs_torch.py shrink 1234
"""

from __future__ import annotations

import random
import sys
import traceback

import numpy as np
import pytest
import torch

import gradviz

# Intermediates that called retain_grad() in the current run (reset by run_forward).
_RETAINED = []


def _bcast_to(a, b):
    """Whether b broadcasts to a's shape (so an in-place op on a with b is allowed)."""
    try:
        return tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape))) == tuple(a.shape)
    except ValueError:
        return False


def _const(L, shape, dtype, phase=0.7):
    """A deterministic constant tensor (no grad) of the given shape."""
    n = int(np.prod(shape)) if shape else 1
    return L.tensor(np.cos(np.arange(n) * phase + 0.3).reshape(shape).tolist(), dtype=dtype)


def _wslice(L, w, *shape):
    """A (differentiable) slice of the weight leaf w reshaped to ``shape``."""
    n = int(np.prod(shape))
    return w.flatten()[:n].reshape(shape).to(w.dtype)


# ---- unary steps: f(L, a) ---------------------------------------------------------------------

UNARY = [
    ("exp", lambda L, a: (a * 0.3).exp()), ("tanh", lambda L, a: a.tanh()), ("sigmoid", lambda L, a: a.sigmoid()),
    ("sin", lambda L, a: a.sin()), ("cos", lambda L, a: L.cos(a)), ("abs", lambda L, a: a.abs()),
    ("relu", lambda L, a: L.relu(a)), ("softplus", lambda L, a: L.nn.functional.softplus(a, beta=2.0)),
    ("gelu", lambda L, a: L.nn.functional.gelu(a)), ("gelu_tanh", lambda L, a: L.nn.functional.gelu(a, approximate="tanh")),
    ("square", lambda L, a: a ** 2), ("sqrt", lambda L, a: (a * a + 1).sqrt()), ("rsqrt", lambda L, a: (a * a + 1).rsqrt()),
    ("log", lambda L, a: (a * a + 1).log()), ("log2", lambda L, a: L.log2(a * a + 1)), ("log1p", lambda L, a: a.abs().log1p()),
    ("clamp", lambda L, a: a.clamp(-0.5, 0.7)), ("clamp_min", lambda L, a: a.clamp(min=0.1)),
    ("leaky", lambda L, a: L.nn.functional.leaky_relu(a, 0.1)), ("erf", lambda L, a: L.erf(a)),
    ("expm1", lambda L, a: (a * 0.5).expm1()), ("atan", lambda L, a: a.atan()), ("sinh", lambda L, a: (a * 0.5).sinh()),
    ("neg", lambda L, a: -a), ("reciprocal", lambda L, a: (a * a + 1).reciprocal()), ("pow3", lambda L, a: a.pow(3)),
    ("elu", lambda L, a: L.nn.functional.elu(a)), ("silu", lambda L, a: L.nn.functional.silu(a)),
    ("mish", lambda L, a: L.nn.functional.mish(a)), ("selu", lambda L, a: L.nn.functional.selu(a)),
    ("hardtanh", lambda L, a: L.nn.functional.hardtanh(a)), ("logsigmoid", lambda L, a: L.nn.functional.logsigmoid(a)),
    ("exp2", lambda L, a: L.exp2(a * 0.3)), ("sign_mul", lambda L, a: a.sign() * a), ("frac_free", lambda L, a: a - a.detach().floor()),
    ("asinh", lambda L, a: a.asinh()), ("tan", lambda L, a: (a * 0.3).tan()), ("cosh", lambda L, a: (a * 0.3).cosh()),
    ("xlogy", lambda L, a: L.xlogy(a, a * a + 1)), ("lerp", lambda L, a: L.lerp(a, a * 2 + 1, 0.3)),
    ("nan_to_num", lambda L, a: L.nan_to_num(a)), ("hardswish", lambda L, a: L.nn.functional.hardswish(a)),
    ("softsign", lambda L, a: L.nn.functional.softsign(a)), ("celu", lambda L, a: L.nn.functional.celu(a, 0.5)),
    ("sigmoid_", lambda L, a: (a * 1).sigmoid_()), ("mul_", lambda L, a: (a + 0).mul_(1.5)),
    ("clamp_", lambda L, a: (a * 1).clamp_(min=-0.3)), ("add_self", lambda L, a: a + a),
    ("addcmul", lambda L, a: L.addcmul(a, a, a, value=0.5)), ("addcdiv", lambda L, a: L.addcdiv(a, a, a * a + 1, value=0.5)),
    ("trunc_free", lambda L, a: a * a.detach().round()), ("polar", lambda L, a: a.exp().log()),
    ("sign", lambda L, a: a.sign()), ("floor", lambda L, a: a.floor()), ("round", lambda L, a: (a * 2).round()),
    ("softmax_all", lambda L, a: L.softmax(a.reshape(-1), 0)), ("hardsigmoid", lambda L, a: L.nn.functional.hardsigmoid(a)),
    ("relu6", lambda L, a: L.nn.functional.relu6(a * 4)), ("threshold", lambda L, a: L.nn.functional.threshold(a, 0.1, -1.0)),
    ("dropout_eval", lambda L, a: L.nn.functional.dropout(a, 0.5, training=False)),
    ("int_mask", lambda L, a: a * (a > 0).long()), ("int_cmp_mix", lambda L, a: a * ((a > 0).int() + (a < 0.5).long() * 2)),
    ("bool_sum", lambda L, a: a + (a > 0).sum()), ("argmax_pick", lambda L, a: a.flatten()[a.flatten().argmax()] * a if a.numel() else a),
    ("to_long", lambda L, a: (a * 3).long()), ("int_arith", lambda L, a: (a * 3).long() * 2 + 1 if a.is_floating_point() else a // 2 - 1),
    ("cmp_eq", lambda L, a: (a == a.flatten()[0]) if a.numel() else a > 0),
    ("retain", lambda L, a: _retain(a)), ("hook", lambda L, a: _hook(a)),
    ("clamp_tensor", lambda L, a: a.clamp(min=_const(L, a.shape[-1:], a.dtype) * 0.5) if a.dim() and a.is_floating_point() else a),
    ("cummin_all", lambda L, a: a.reshape(-1).cummin(0)[0]),
    # round 2
    ("fmod", lambda L, a: L.fmod(a * 3, 1.5)), ("remainder", lambda L, a: L.remainder(a * 3, -1.25)),
    ("frac", lambda L, a: (a * 2).frac()), ("trunc", lambda L, a: (a * 2).trunc() + a),
    ("sinc", lambda L, a: L.sinc(a)), ("round_dec", lambda L, a: a.round(decimals=1)),
    ("diff", lambda L, a: L.diff(a, dim=-1) if a.dim() and a.shape[-1] > 0 else a),
    ("diff2", lambda L, a: a.diff(n=2, dim=0, prepend=a[:1] * 2) if a.dim() and a.shape[0] > 0 else a),
    ("triu", lambda L, a: a.triu(1) if a.dim() >= 2 else a), ("tril_neg", lambda L, a: a.tril(-1) if a.dim() >= 2 else a),
    ("diag_embed", lambda L, a: L.diag_embed(a) if 1 <= a.dim() <= 2 and a.numel() <= 12 else a),
    ("diag_1d", lambda L, a: L.diag(a, 1) if a.dim() == 1 else L.diag(a) if a.dim() == 2 else a),
    ("einsum_diag", lambda L, a: L.einsum("ii->i", a) + L.einsum("ij->j", a) if a.dim() == 2 and a.shape[0] == a.shape[1] else a),
    ("einsum_trace_b", lambda L, a: L.einsum("...ii", a) if a.dim() >= 2 and a.shape[-1] == a.shape[-2] else a),
    ("repeat_interleave", lambda L, a: a.repeat_interleave(2, dim=0) if a.dim() else a),
    ("repeat_interleave_t", lambda L, a: L.repeat_interleave(a, L.arange(a.shape[-1]) % 3, dim=-1) if a.dim() else a),
    ("take", lambda L, a: L.take(a, L.tensor([[0, a.numel() - 1], [a.numel() // 2, 0]])) if a.numel() else a),
    ("masked_scatter", lambda L, a: a.masked_scatter(a > 0, a.flatten().flip(0) * 2) if a.numel() else a),
    ("nan_to_num_inf", lambda L, a: L.nan_to_num(a.log(), neginf=-3.0, nan=0.5)),
    ("logit", lambda L, a: L.logit(a.sigmoid() * 0.9 + 0.05)), ("erfinv", lambda L, a: L.erfinv(a.tanh() * 0.9)),
    ("lgamma", lambda L, a: L.lgamma(a.abs() + 0.5)), ("digamma", lambda L, a: L.digamma(a.abs() + 0.5)),
    ("std_mean_all", lambda L, a: (lambda sm: sm[0] * 2 + sm[1])(L.std_mean(a))),
    ("var_mean_both", lambda L, a: (lambda vm: vm[0] - vm[1])(L.var_mean(a, -1, keepdim=True)) * a if a.dim() else a),
    ("mish_int", lambda L, a: L.nn.functional.mish(a) if a.is_floating_point() else a.float()),
    ("addcmul_int", lambda L, a: L.addcmul(a, a, a, value=0.5) if not a.is_floating_point() else a),
]


def _retain(a):
    if a.requires_grad:
        a.retain_grad()
        _RETAINED.append(a)
    return a


def _hook(a):
    if a.requires_grad:
        a.register_hook(lambda g: g * 0.5 + g.flip(0) * 0.25 if g.dim() else g * 0.5)
    return a * 1 if a.is_floating_point() else a


# ---- binary steps with the second input b: f(L, a, b) -----------------------------------------

BINARY = [
    ("add", lambda L, a, b: a + b), ("sub", lambda L, a, b: a - b), ("mul", lambda L, a, b: a * b),
    ("div", lambda L, a, b: a / (b * b + 1)), ("maximum", lambda L, a, b: L.maximum(a, b)),
    ("minimum", lambda L, a, b: L.minimum(a, b)), ("where", lambda L, a, b: L.where(a > b, a, b * 2)),
    ("pow", lambda L, a, b: (a.abs() + 1).pow(b * 0.5)), ("atan2", lambda L, a, b: L.atan2(a, b + 3)),
    ("hypot", lambda L, a, b: L.hypot(a, b + 1)), ("add_alpha", lambda L, a, b: L.add(a, b, alpha=2.5)),
    ("sub_alpha", lambda L, a, b: L.sub(a, b, alpha=0.5)), ("rsub", lambda L, a, b: 2.0 - a * b),
    ("logaddexp", lambda L, a, b: L.logaddexp(a, b)), ("fmod_free", lambda L, a, b: a * b + a),
    ("mul_inplace", lambda L, a, b: (a * 1).mul_(b) if _bcast_to(a, b) else a * b),
    ("add_inplace", lambda L, a, b: (a + 0).add_(b, alpha=-1) if _bcast_to(a, b) else a - b),
    ("copysign", lambda L, a, b: a.abs() * b.sign()), ("dist", lambda L, a, b: L.dist(a, b)),
    ("mse", lambda L, a, b: L.nn.functional.mse_loss(a, b.expand_as(a)) if _bcast_to(a, b) else a + b),
    ("huber", lambda L, a, b: L.nn.functional.huber_loss(a, b.expand_as(a), reduction="none") if _bcast_to(a, b) else a * b),
    ("l1_loss", lambda L, a, b: L.nn.functional.l1_loss(a, b.expand_as(a)) if _bcast_to(a, b) else a - b),
    ("smooth_l1", lambda L, a, b: L.nn.functional.smooth_l1_loss(a, b.expand_as(a), beta=0.5) if _bcast_to(a, b) else a - b),
    ("bce", lambda L, a, b: L.nn.functional.binary_cross_entropy(a.sigmoid(), b.sigmoid().expand_as(a)) if _bcast_to(a, b) else a),
    ("bce_logits", lambda L, a, b: L.nn.functional.binary_cross_entropy_with_logits(a, b.sigmoid().expand_as(a), reduction="sum") if _bcast_to(a, b) else a),
    ("kl_div", lambda L, a, b: L.nn.functional.kl_div(a.log_softmax(-1), b.expand_as(a).softmax(-1), reduction="batchmean") if a.dim() and _bcast_to(a, b) else a),
    ("where_b", lambda L, a, b: L.where(b > 0, a, L.tensor(0.25, dtype=a.dtype))),
    ("clamp_b", lambda L, a, b: a.clamp(b - 0.5, b + 0.5)), ("clamp_bmax", lambda L, a, b: L.clamp(a, max=b)),
    ("cmp_int", lambda L, a, b: a * ((a > b).long() - (a < b).int())),
    ("outer", lambda L, a, b: a.unsqueeze(-1) @ b.unsqueeze(-2) if a.dim() and b.dim() else a * b),
    ("einsum_dot", lambda L, a, b: L.einsum("...i,...i->...", a, b) if a.dim() and b.dim() else a * b),
    ("einsum_outer", lambda L, a, b: L.einsum("...i,...j->...ij", a, b) if a.dim() and b.dim() else a * b),
    ("cat3", lambda L, a, b: L.cat([a, b.expand_as(a), a.sin()], -1) if a.dim() and _bcast_to(a, b) else a + b),
    ("stack3", lambda L, a, b: L.stack([a, b.expand_as(a), a * a], 0) if _bcast_to(a, b) else a + b),
    ("cosine", lambda L, a, b: L.nn.functional.cosine_similarity(a + 0.5, b + 0.5, dim=-1) if a.dim() and b.dim() else a * b),
    ("view_inplace_b", lambda L, a, b: _view_inplace_b(L, a, b)),
    ("copy_b", lambda L, a, b: _copy_b(L, a, b)),
    # round 2
    ("lerp_b", lambda L, a, b: L.lerp(a, b, 0.3)), ("lerp_t", lambda L, a, b: L.lerp(a, b * 2, b.sigmoid())),
    ("addcdiv_b", lambda L, a, b: L.addcdiv(a, b, b * b + 1.5, value=-0.7)),
    ("addcmul_b", lambda L, a, b: L.addcmul(a, a, b, value=1.5)),
    ("fmod_b", lambda L, a, b: L.fmod(a, b.abs() + 0.5)), ("remainder_b", lambda L, a, b: L.remainder(a * 2, b.abs() + 0.5)),
    ("atan2_b", lambda L, a, b: L.atan2(a, b)), ("hypot_b", lambda L, a, b: L.hypot(a, b)),
    ("xlogy_b", lambda L, a, b: L.xlogy(a, b.abs() + 0.1)), ("logaddexp2", lambda L, a, b: L.logaddexp2(a, b)),
    ("kron", lambda L, a, b: L.kron(a, b) if a.numel() * b.numel() <= 64 else a * b),
    ("cross", lambda L, a, b: L.cross(a, b.expand_as(a), dim=-1) if a.dim() and a.shape[-1] == 3 and _bcast_to(a, b) else a),
    ("dist_b", lambda L, a, b: L.dist(a, b, 3) + L.dist(a, b, 1)), ("dist_eq", lambda L, a, b: L.dist(a, a.detach() + b.detach() * 0)),
    ("cdist_b", lambda L, a, b: L.cdist(a, b.expand_as(a) * 0.5) if a.dim() >= 2 and _bcast_to(a, b) else a),
    ("pairwise", lambda L, a, b: L.nn.functional.pairwise_distance(a, b) if a.dim() else a * b),
    ("maximum_tie", lambda L, a, b: L.maximum(a, a.detach().round() + b * 0)),
]


def _view_inplace_b(L, a, b):
    c = a * 1
    if c.dim() >= 1 and c.numel():
        v = c.transpose(0, -1)[-1]
        v.add_(b.flatten()[:1].expand_as(v) if b.numel() else v.detach())
        c.view(-1)[::2].mul_(2) if c.is_contiguous() else c.mul_(2)
    return c


def _copy_b(L, a, b):
    c = a.clone()
    if c.dim() >= 1 and c.shape[-1] > 0 and b.numel():
        c[..., 0].copy_(b.flatten()[0] * 3)
        c.diagonal(0, 0, -1).zero_() if c.dim() >= 2 else c[:1].zero_()
    return c


# ---- reductions and scans ----------------------------------------------------------------------

def reductions(rng, nd):
    out = [("sum", lambda L, a: a.sum()), ("mean", lambda L, a: a.mean()),
           ("norm", lambda L, a: (a + 0.1).norm()), ("logsumexp_all", lambda L, a: L.logsumexp(a.reshape(-1), 0)),
           ("amax_all", lambda L, a: a.amax()), ("prod_all", lambda L, a: (a * 0.5 + 1).prod()),
           ("max_all", lambda L, a: a.max()), ("median_all", lambda L, a: a.median()),
           ("l1norm_all", lambda L, a: (a + 0.1).norm(p=1)), ("inf_norm", lambda L, a: L.linalg.vector_norm(a, float("inf"))),
           ("count_all", lambda L, a: (a > 0).sum()), ("any", lambda L, a: (a > 0).any()),
           ("argmax", lambda L, a: a.argmax())]
    if nd >= 1:
        d = rng.randrange(-nd, nd)
        k = rng.random() < 0.5
        out += [
            (f"sum{d}{k}", lambda L, a: a.sum(d, keepdim=k)), (f"mean{d}{k}", lambda L, a: a.mean(d, keepdim=k)),
            (f"prod{d}{k}", lambda L, a: (a * 0.5 + 1).prod(d, keepdim=k)), (f"amax{d}{k}", lambda L, a: a.amax(d, keepdim=k)),
            (f"amin{d}{k}", lambda L, a: a.amin(d, keepdim=k)), (f"max{d}{k}", lambda L, a: a.max(d, keepdim=k)[0]),
            (f"min{d}{k}", lambda L, a: a.min(d, keepdim=k).values), (f"var{d}{k}", lambda L, a: a.var(d, keepdim=k, correction=0)),
            (f"std{d}{k}", lambda L, a: (a + 0.01 * L.arange(a.numel(), dtype=a.dtype).reshape(a.shape)).std(d, keepdim=k)),
            (f"lse{d}{k}", lambda L, a: a.logsumexp(d, keepdim=k)), (f"norm{d}{k}", lambda L, a: (a + 0.1).norm(dim=d, keepdim=k)),
            (f"cumsum{d}", lambda L, a: a.cumsum(d)), (f"cumprod{d}", lambda L, a: (a * 0.5 + 1).cumprod(d)),
            (f"softmax{d}", lambda L, a: a.softmax(d)), (f"logsoftmax{d}", lambda L, a: a.log_softmax(d)),
            (f"sort{d}", lambda L, a: a.sort(d)[0]), (f"flip{d}", lambda L, a: a.flip(d)),
            (f"roll{d}", lambda L, a: a.roll(1, d)), (f"median{d}", lambda L, a: a.median(d)[0] if a.shape[d] > 0 else a.sum(d)),
            (f"cummax{d}", lambda L, a: a.cummax(d)[0]), (f"logcumsumexp{d}", lambda L, a: a.logcumsumexp(d)),
            (f"aminmax{d}", lambda L, a: L.aminmax(a, dim=d)[1]), (f"nansum{d}", lambda L, a: a.nansum(d)),
            (f"l1norm{d}", lambda L, a: (a + 0.1).norm(p=1, dim=d)), (f"pnorm{d}", lambda L, a: (a.abs() + 0.1).norm(p=3, dim=d)),
            (f"kth{d}", lambda L, a: a.kthvalue(1, d)[0] if a.shape[d] > 0 else a.sum(d)),
            (f"topk{d}", lambda L, a: a.topk(min(2, a.shape[d]), d)[0]),
            (f"count{d}", lambda L, a: a * (a > 0).sum(d, keepdim=True)),
            (f"cummin{d}", lambda L, a: a.cummin(d).values), (f"rolls{d}", lambda L, a: a.roll((2, -1), (d, 0))),
            (f"argsort{d}", lambda L, a: a.argsort(d)), (f"int_count{d}", lambda L, a: (a > 0).sum(d)),
            (f"mode{d}", lambda L, a: a.mode(d)[0] if a.shape[d] > 0 else a.sum(d)),
            (f"max_idx{d}", lambda L, a: a.max(d)[1] if a.shape[d] > 0 else a.sum(d)),
            (f"nanmean{d}", lambda L, a: a.nanmean(d)), (f"std_mean{d}", lambda L, a: L.std_mean(a, d, correction=0)[0] + 1),
            (f"layer_norm{d}", lambda L, a: L.nn.functional.layer_norm(a, a.shape[-1:])),
            (f"normalize{d}", lambda L, a: L.nn.functional.normalize(a, dim=d)),
            # round 2
            (f"cummax_i{d}", lambda L, a: a.cummax(d)[1]), (f"logcumsumexp_neg{d}", lambda L, a: (-a * 3).logcumsumexp(d)),
            (f"amax_tie{d}", lambda L, a: a.round().amax(d, keepdim=k) + a.sum() * 0),
            (f"norm_zero{d}", lambda L, a: (a - a.detach()).norm(dim=d)), (f"vnorm_inf{d}", lambda L, a: L.linalg.vector_norm(a.round(), float("inf"), d)),
            (f"std_mean_pair{d}", lambda L, a: L.stack(L.std_mean(a, d, keepdim=True)).sum(0) if a.shape[d] > 1 else a),
            (f"var_mean_pair{d}", lambda L, a: L.var_mean(a, d)[1] - L.var_mean(a, d)[0]),
        ]
    return out


# ---- shape, indexing, products, convolutions, pooling, normalization (may use w) ---------------

def shape_ops(rng, shape):
    nd = len(shape)
    out = [("flatten", lambda L, a, w: a.flatten()), ("reshape", lambda L, a, w: a.reshape(-1, 1) if a.numel() else a.reshape(0, 1)),
           ("unsqueeze", lambda L, a, w: a.unsqueeze(0)), ("clone", lambda L, a, w: a.clone()),
           ("contig", lambda L, a, w: a.t().contiguous().t() if a.dim() == 2 else a.contiguous()),
           ("repeat", lambda L, a, w: a.repeat(*([2] + [1] * a.dim()))), ("double", lambda L, a, w: a.double()),
           ("float", lambda L, a, w: a.float()), ("cat", lambda L, a, w: L.cat([a, a * 2], 0) if a.dim() else L.stack([a, a])),
           ("stack", lambda L, a, w: L.stack([a, a.sin()], -1)), ("expand", lambda L, a, w: a.unsqueeze(0).expand(2, *a.shape)),
           ("view_inplace", lambda L, a, w: _view_inplace(L, a)), ("setitem", lambda L, a, w: _setitem(L, a)),
           ("scale_w", lambda L, a, w: a * w[0, 0, 0]), ("mv_w", lambda L, a, w: _mat_w(L, a, w)),
           ("addmm_w", lambda L, a, w: L.addmm(w[0, 0, :2], a, w[1, : a.shape[-1], :2]) if a.dim() == 2 and a.shape[-1] <= 4 else a),
           ("bmm_w", lambda L, a, w: L.bmm(a, _wslice(L, w, 1, a.shape[-1], 2).expand(a.shape[0], -1, -1)) if a.dim() == 3 and a.shape[-1] <= 4 else a),
           ("einsum_w", lambda L, a, w: L.einsum("...i,ij->...j", a, w[1, : a.shape[-1], :]) if a.dim() and a.shape[-1] <= 4 else a),
           ("linear_w", lambda L, a, w: L.nn.functional.linear(a, w[2, :, : a.shape[-1]].t().t(), w[3, 0]) if a.dim() and a.shape[-1] <= 3 else a),
           ("embedding_w", lambda L, a, w: L.nn.functional.embedding(_idx(L, a), w[0]) if a.numel() else a),
           ("embedding_a", lambda L, a, w: L.nn.functional.embedding(L.tensor([[0, a.shape[0] - 1], [a.shape[0] - 1, 0]]), a) if a.dim() == 2 and a.shape[0] else a),
           ("conv1d_w", lambda L, a, w: _conv1d(L, a, w)), ("conv2d_w", lambda L, a, w: _conv2d(L, a, w)),
           ("bn_w", lambda L, a, w: _batch_norm(L, a, w)), ("ln_w", lambda L, a, w: _layer_norm(L, a, w)),
           ("group_norm", lambda L, a, w: L.nn.functional.group_norm(a, 1) if a.dim() >= 2 else a),
           ("cross_entropy", lambda L, a, w: _cross_entropy(L, a)), ("nll", lambda L, a, w: _nll(L, a)),
           ]
    if nd >= 1:
        d = rng.randrange(nd)
        n = shape[d]
        reduce, include_self, accumulate = rng_pick(rng, ["sum", "prod", "mean", "amax", "amin"]), rng.random() < 0.5, rng.random() < 0.5
        out += [("squeeze", lambda L, a, w: a.squeeze(d)), ("unbind", lambda L, a, w: a.unbind(d)[0] if n else a.sum(d)),
                ("select", lambda L, a, w: a.select(d, n - 1) if n else a.sum(d)),
                ("narrow", lambda L, a, w: a.narrow(d, min(1, n), max(n - 1, 0))),
                ("stepslice", lambda L, a, w: a[(slice(None),) * d + (slice(None, None, 2),)]),
                ("negslice", lambda L, a, w: a[(slice(None),) * d + (slice(-2, None),)]),
                ("index_select", lambda L, a, w: a.index_select(d, L.tensor([0, 0] if n else [], dtype=L.long)) if n else a),
                ("adv_index", lambda L, a, w: a[(slice(None),) * d + (L.tensor([n - 1, 0, n - 1]),)] if n else a),
                ("gather", lambda L, a, w: a.gather(d, L.zeros(a.shape, dtype=L.long)) if n else a),
                ("split", lambda L, a, w: a.split(max(1, n // 2), d)[-1] if n else a),
                ("chunk", lambda L, a, w: a.chunk(2, d)[0] if n else a),
                ("masked_fill", lambda L, a, w: a.masked_fill(a > 0.3, 0.5)),
                ("masked_select", lambda L, a, w: a.masked_select(a > 0)),
                ("transpose", lambda L, a, w: a.transpose(0, -1)), ("movedim", lambda L, a, w: a.movedim(0, -1)),
                ("scatter_add", lambda L, a, w: L.zeros_like(a).scatter_add(d, L.zeros(a.shape, dtype=L.long), a) if n else a),
                ("scatter", lambda L, a, w: a.scatter(d, L.zeros((1,) * a.dim(), dtype=L.long), 2.0) if n else a),
                ("index_add", lambda L, a, w: a.index_add(d, L.tensor([0] * 1 if n else [], dtype=L.long), a.narrow(d, 0, 1) * 3) if n else a),
                ("tril", lambda L, a, w: a.tril() if a.dim() == 2 else a),
                ("diag", lambda L, a, w: a.diagonal() if a.dim() == 2 else a), ("trace", lambda L, a, w: a.trace() if a.dim() == 2 else a),
                ("take_along", lambda L, a, w: L.take_along_dim(a, a.argsort(d), d)),
                ("permute", lambda L, a, w: a.permute(*reversed(range(a.dim())))),
                ("T_mm", lambda L, a, w: a @ a.transpose(-1, -2) if a.dim() >= 2 else a @ a if a.dim() == 1 else a * a),
                ("where_scalar", lambda L, a, w: L.where(a > 0, a, 0.0)),
                ("pad", lambda L, a, w: L.nn.functional.pad(a, (1, 2))),
                ("unfold", lambda L, a, w: a.unfold(d, min(2, n), 1) if n else a),
                ("tile", lambda L, a, w: a.tile((2,))), ("rot", lambda L, a, w: a.rot90(1, (0, 1)) if a.dim() >= 2 else a),
                ("scatter_reduce", lambda L, a, w: _scatter_reduce(L, a, d, reduce, include_self)),
                ("index_put", lambda L, a, w: _index_put(L, a, accumulate)),
                ("index_put_w", lambda L, a, w: _index_put_w(L, a, w)),
                ("max_pool1d", lambda L, a, w: L.nn.functional.max_pool1d(a, 2) if a.dim() in (2, 3) else a),
                ("avg_pool1d", lambda L, a, w: L.nn.functional.avg_pool1d(a, 2, stride=1, padding=1, count_include_pad=False) if a.dim() in (2, 3) else a),
                ("max_pool2d", lambda L, a, w: L.nn.functional.max_pool2d(a, 2, stride=1) if a.dim() == 3 else a),
                ("avg_pool2d", lambda L, a, w: L.nn.functional.avg_pool2d(a, (1, 2)) if a.dim() == 3 else a),
                ("adaptive_avg", lambda L, a, w: _adaptive_avg(L, a)),
                ("adaptive_max", lambda L, a, w: L.nn.functional.adaptive_max_pool1d(a, 2) if a.dim() in (2, 3) else a),
                # round 2
                ("lp_pool1d", lambda L, a, w: L.nn.functional.lp_pool1d(a, 2, 2) if a.dim() in (2, 3) and a.shape[-1] >= 2 else a),
                ("lp_pool2d", lambda L, a, w: L.nn.functional.lp_pool2d(a.abs() + 0.1, 1.5, (1, 2), stride=1) if a.dim() == 3 and a.shape[-1] >= 2 else a),
                ("adaptive_avg2d", lambda L, a, w: L.nn.functional.adaptive_avg_pool2d(a, (3, 2)) if a.dim() == 3 and min(a.shape) > 0 else a),
                ("unfold_step", lambda L, a, w: a.unfold(d, min(2, n), 2) if n else a),
                ("roll_neg", lambda L, a, w: a.roll(-2, d)),
                ("triu_diag", lambda L, a, w: L.triu(a, -1) if a.dim() >= 2 else a),
                ]
    return out


def rng_pick(rng, choices):
    return choices[rng.randrange(len(choices))]


def _view_inplace(L, a):
    b = a * 1
    if b.dim() >= 1 and b.shape[0] > 0:
        b[0].mul_(2)
        b[:1] += 1
    return b


def _setitem(L, a):
    b = a.clone()
    if b.dim() >= 1 and b.shape[0] > 0:
        b[0] = a[0] ** 2
        b[b > 1] = 0.0
    return b


def _mat_w(L, a, w):
    if a.dim() == 1 and 0 < a.shape[0] <= 4:
        return w[0, :, : a.shape[0]] @ a  # mv
    if a.dim() >= 2 and a.shape[-1] <= 4:
        return a @ w[1, : a.shape[-1], :]  # matmul (batched for 3-d)
    return a


def _idx(L, a):
    """Integer indices into 4 rows, derived from a's values (so they vary with the data)."""
    return ((a.detach() * 10).abs().long() % 4).flatten()[:6]


def _conv1d(L, a, w):
    if a.dim() not in (2, 3) or a.shape[-2] > 4 or a.shape[-1] < 2:
        return a
    c = a.shape[-2]
    weight = _wslice(L, w, 2, c, 2)
    return L.nn.functional.conv1d(a, weight, w[3, 3, :2], padding=1, stride=rng_stride(a))


def rng_stride(a):
    return 1 + a.shape[-1] % 2


def _conv2d(L, a, w):
    if a.dim() != 3 or a.shape[0] > 4 or min(a.shape[1:]) < 1:
        return a
    weight = _wslice(L, w, 2, a.shape[0], 2, 2)
    return L.nn.functional.conv2d(a.unsqueeze(0), weight, padding=(1, 0), dilation=(1, 1))[0]


def _batch_norm(L, a, w):
    if a.dim() not in (2, 3) or a.shape[1] > 4:
        return a
    c = a.shape[1]
    running_mean, running_var = L.zeros(c, dtype=a.dtype), L.ones(c, dtype=a.dtype)
    return L.nn.functional.batch_norm(a, running_mean, running_var, w[0, 1, :c] if c <= 3 else None, w[0, 2, :c] if c <= 3 else None,
                                      training=True, momentum=0.2, eps=1e-3)


def _layer_norm(L, a, w):
    if a.dim() == 0 or a.shape[-1] > 4:
        return a
    k = a.shape[-1]
    return L.nn.functional.layer_norm(a, (k,), w[2, :k, 0], w[2, :k, 1], eps=1e-3)


def _cross_entropy(L, a):
    if a.dim() != 2 or a.shape[1] == 0:
        return a
    target = L.arange(a.shape[0]) % a.shape[1]
    return L.nn.functional.cross_entropy(a, target, label_smoothing=0.1 if a.shape[0] % 2 else 0.0)


def _nll(L, a):
    if a.dim() != 2 or a.shape[1] == 0:
        return a
    target = (L.arange(a.shape[0]) * 2 + 1) % a.shape[1]
    weight = L.linspace(0.5, 1.5, a.shape[1], dtype=a.dtype)
    return L.nn.functional.nll_loss(a.log_softmax(1), target, weight=weight)


def _scatter_reduce(L, a, d, reduce, include_self):
    n = a.shape[d]
    if not n:
        return a
    index = (L.arange(a.numel()).reshape(a.shape) % n) // 2
    return L.zeros_like(a).add(0.5).scatter_reduce(d, index, a, reduce, include_self=include_self) + a * 0


def _adaptive_avg(L, a):
    """Adaptive average pooling to a size that may not divide the input's (overlapping bins)."""
    if a.dim() not in (2, 3) or a.shape[-1] == 0:
        return a
    n = a.shape[-1]
    return L.nn.functional.adaptive_avg_pool1d(a, max(1, (2 * n) // 3) if n % 2 else n + 1)


def _index_put(L, a, accumulate):
    if a.dim() == 0 or a.shape[0] == 0:
        return a
    n = a.shape[0]
    idx = L.tensor([n - 1, 0, n - 1])
    values = a[idx] * 2 if accumulate else a[:1].expand(3, *a.shape[1:]) * 2
    return a.index_put((idx,), values, accumulate=accumulate)


def _index_put_w(L, a, w):
    b = a * 1
    if b.dim() >= 1 and b.shape[-1] > 0:
        mask = b > 0
        b[mask] = w.flatten()[: int(mask.sum())].to(b.dtype) if int(mask.sum()) <= 48 else b[mask]
    return b


# ---- program generation and observation --------------------------------------------------------

def rand_shape(rng):
    nd = rng.choice([0, 1, 1, 2, 2, 2, 3])
    return tuple(rng.choice([1, 2, 3, 3, 4, 0] if rng.random() < 0.1 else [1, 2, 3, 4]) for _ in range(nd))


def bshape(rng, shape):
    """A shape that broadcasts with ``shape``."""
    s = list(shape)
    for i in range(len(s)):
        if rng.random() < 0.3:
            s[i] = 1
    while s and rng.random() < 0.3:
        s.pop(0)
    return tuple(s)


W_SHAPE = (4, 4, 3)


def make_program(seed):
    """(dtype, input arrays, steps) for a seed; each step is (kind, name, fn)."""
    rng = random.Random(seed)
    dtype = rng.choice(["float64", "float64", "float32"])
    shapes = [rand_shape(rng)]
    shapes.append(bshape(rng, shapes[0]))
    state = np.random.RandomState(seed)
    data = [np.asarray(state.randn(*s)) for s in shapes] + [state.randn(*W_SHAPE)]
    steps = []
    cur_shape = shapes[0]
    for _ in range(rng.randint(2, 9)):
        kind = rng.random()
        if kind < 0.3:
            steps.append(("u",) + rng.choice(UNARY))
        elif kind < 0.55:
            steps.append(("b",) + rng.choice(BINARY))
        elif kind < 0.75:
            steps.append(("r",) + rng.choice(reductions(rng, len(cur_shape))))
        else:
            steps.append(("s",) + rng.choice(shape_ops(rng, cur_shape)))
        try:  # the shape is only known by running: keep steps torch accepts
            cur_shape = tuple(run_forward(torch, data, dtype, steps)[0].shape)
        except Exception:
            steps.pop()
    return dtype, data, steps


def run_forward(L, data, dtype, steps):
    dt = getattr(L, dtype)
    del _RETAINED[:]
    leaves = [L.tensor(d.tolist(), dtype=dt, requires_grad=True) for d in data]
    a, b, w = leaves
    for kind, _name, fn in steps:
        if kind == "b":
            a = fn(L, a, b)
        elif kind == "s":
            a = fn(L, a, w)
        else:
            a = fn(L, a)
    return a, leaves


def _np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True).astype(np.float64) if t.is_floating_point() else t.detach().numpy(force=True).copy()
    return t.detach().numpy().astype(np.float64) if t.is_floating_point() else t.detach().numpy().copy()


def _weights(L, g):
    return L.tensor(np.sin(np.arange(g.numel()) + 1.0).reshape(g.shape).tolist(), dtype=g.dtype)


def observe(L, data, dtype, steps):
    """Everything observable about a program in library L, as plain Python/numpy values."""
    out = {}
    try:
        y, leaves = run_forward(L, data, dtype, steps)
    except Exception as e:
        return {"error": type(e).__name__}
    out["shape"] = tuple(y.shape)
    out["dtype"] = str(y.dtype).split(".")[-1]
    out["value"] = _np(y)
    out["requires_grad"] = y.requires_grad
    if not y.requires_grad:
        return out
    w = _const(L, tuple(y.shape), y.dtype) if y.numel() else L.zeros(y.shape, dtype=y.dtype)
    try:
        grads = L.autograd.grad((y * w).sum(), leaves, create_graph=True, allow_unused=True)
    except Exception as e:
        out["grad_error"] = type(e).__name__
        return out
    out["grads"] = [_np(g) for g in grads]
    out["grads_requires_grad"] = [None if g is None else g.requires_grad for g in grads]
    used = [g for g in grads if g is not None and g.requires_grad]
    if used:
        s = sum((g * _weights(L, g)).sum() for g in used)
        try:
            out["gg"] = [_np(g) for g in L.autograd.grad(s, leaves, allow_unused=True)]
        except Exception as e:
            out["gg_error"] = f"{type(e).__name__}: {str(e)[:100]}"
    # a fresh run with backward(): leaf .grad and retained intermediates' .grad
    y, leaves = run_forward(L, data, dtype, steps)
    retained = list(_RETAINED)
    try:
        (y * w).sum().backward()
    except Exception as e:
        out["backward_error"] = type(e).__name__
        return out
    out["leaf_grads"] = [_np(t.grad) for t in leaves]
    out["retained_grads"] = [_np(t.grad) for t in retained]
    return out


def _close(x, y, tol, float32):
    if x.shape != y.shape:
        return False
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        return x.dtype == y.dtype and np.array_equal(x, y)
    if float32:  # accepted: float32 overflow; where torch is not finite, gradviz must be out of range too
        bad = ~np.isfinite(x)
        if bad.any():
            if not np.all(~np.isfinite(y[bad]) | (np.abs(y[bad]) > 1e30)):
                return False
            x, y = x[~bad], y[~bad]
    return np.allclose(x, y, equal_nan=True, **tol)


def compare(t, g, dtype):
    """The differences between torch's observations t and gradviz's g: [(key, torch, gradviz)]."""
    if "is not implemented" in t.get("gg_error", "") and "gg" in g:
        # accepted: torch lacks some double backwards (hardsigmoid_backward); gradviz has them
        t, g = dict(t), dict(g)
        del t["gg_error"], g["gg"]
    float32 = dtype != "float64"
    tol = dict(rtol=1e-4, atol=1e-5) if float32 else dict(rtol=1e-7, atol=1e-9)
    problems = []
    for k in sorted(set(t) | set(g)):
        a, b = t.get(k, "<missing>"), g.get(k, "<missing>")
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            if not _close(a, b, tol, float32):
                problems.append((k, a, b))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
                    if not _close(x, y, tol, float32):
                        problems.append((f"{k}[{i}]", x, y))
                elif (x is None) != (y is None) or (not isinstance(x, np.ndarray) and x != y):
                    problems.append((f"{k}[{i}]", x, y))
        elif isinstance(a, (np.ndarray, list)) or isinstance(b, (np.ndarray, list)) or a != b:
            problems.append((k, a, b))
    return problems


# steps whose result can be an integer or bool tensor
INTEGER_STEPS = ("to_long", "int_arith", "cmp_eq", "argmax", "count_all", "any", "argsort",
                 "int_count", "max_idx")


def run_seed(seed, steps=None):
    """(program description, problems) for one seed (optionally with a subset of its steps)."""
    dtype, data, all_steps = make_program(seed)
    steps = all_steps if steps is None else steps
    t = observe(torch, data, dtype, steps)
    try:
        g = observe(gradviz, data, dtype, steps)
    except Exception:
        g = {"crash": traceback.format_exc()[-400:]}
    # an integer tensor turned back into floats becomes float32 (the default dtype) in both
    # libraries: float32 rounding, and float32 tolerances, from there on
    float32 = dtype == "float32" or any(s[1] == "float" or s[1].startswith(INTEGER_STEPS) for s in steps)
    desc = f"seed {seed} {dtype} shapes {[d.shape for d in data[:2]]} steps {[s[1] for s in steps]}"
    return desc, compare(t, g, "float32" if float32 else "float64")


def _report(desc, problems):
    lines = [desc]
    for k, a, b in problems[:4]:
        lines.append(f"   {k}: torch {str(a)[:300]} | gradviz {str(b)[:300]}")
    return "\n".join(lines)


SEEDS = range(0, 300)

# programs warn as torch does (std with no degrees of freedom, ...): values are what is compared
pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_seed(seed):
    desc, problems = run_seed(seed)
    assert not problems, _report(desc, problems)


def shrink(seed):
    """Drop steps from a failing seed's program while it still fails; print the result."""
    dtype, data, steps = make_program(seed)
    cur = list(steps)
    changed = True
    while changed:
        changed = False
        for i in range(len(cur)):
            sub = cur[:i] + cur[i + 1:]
            try:
                fails = sub and run_seed(seed, sub)[1]
            except Exception:
                fails = False
            if fails:
                cur, changed = sub, True
                break
    print(_report(*run_seed(seed, cur)))
    print("inputs:", [d.tolist() if d.size < 30 else d.shape for d in data[:2]])


def main(argv):
    import warnings
    warnings.simplefilter("ignore")
    if argv[0] == "shrink":
        for s in argv[1:]:
            shrink(int(s))
        return
    bad = 0
    lo, hi = int(argv[1]), int(argv[2])
    for seed in range(lo, hi):
        desc, problems = run_seed(seed)
        if problems:
            bad += 1
            print(_report(desc, problems), flush=True)
    print("bad", bad, "of", hi - lo)


if __name__ == "__main__":
    main(sys.argv[1:])
