"""The margin, embedding and likelihood losses: ``margin_ranking_loss``,
``hinge_embedding_loss``, ``soft_margin_loss``, ``cosine_embedding_loss``,
``triplet_margin_loss``, ``triplet_margin_with_distance_loss``, ``poisson_nll_loss``,
``gaussian_nll_loss``, ``multilabel_soft_margin_loss`` and ``multilabel_margin_loss``, their
modules, and the distance modules they use (``PairwiseDistance``, ``CosineSimilarity``). Each
is written with torch's formula from differentiable gradviz ops (so second derivatives work),
with torch's defaults and errors."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import TYPE_WORDS
from ..autograd.grad_mode import no_grad
from . import _functional_core as F
from ._loss import _Loss
from ._module import Module

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
           "multilabel_margin_loss"]


def margin_ranking_loss(input1, input2, target, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean"):
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` (1 or -1) says which input
    should rank higher."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.shape}, input2: {input2.shape}, "
                           f"target: {target.shape} ")
    return F._reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1 (``input``
    is usually a distance)."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    zeros = _ops.zeros_like(input)
    output_margin = _ops.where(target != 1, (margin - input).clamp_min(0), zeros)
    output_self = _ops.where(target != -1, input, zeros)
    return F._reduce(output_margin + output_self, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """The two-class logistic loss ``log(1 + exp(-target * input))``, ``target`` 1 or -1."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    return F._reduce(_ops.log1p(_ops.exp(-input * target)), reduction)


_COSINE_EPSILON = 1e-12


def cosine_embedding_loss(input1, input2, target, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean"):
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)`` where it is
    -1; rows of (N, D) inputs with a (N,) target, or (D,) inputs with a 0-D target."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    targ_dim = target.ndim
    if targ_dim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if targ_dim == 1 and (input1.ndim != 2 or input2.ndim != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    if targ_dim == 0 and (input1.ndim != 1 or input2.ndim != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    prod_sum = (input1 * input2).sum(targ_dim)
    mag_square1 = (input1 * input1).sum(targ_dim) + _COSINE_EPSILON
    mag_square2 = (input2 * input2).sum(targ_dim) + _COSINE_EPSILON
    cos = prod_sum / (mag_square1 * mag_square2).sqrt()
    zeros = _ops.zeros_like(cos)
    output_pos = _ops.where(target == 1, 1 - cos, zeros)
    output_neg = _ops.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return F._reduce(output_pos + output_neg, reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean"):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the
    ``pairwise_distance`` (``p``-norm, ``eps``); ``swap`` uses the smaller of
    ``d(anchor, negative)`` and ``d(positive, negative)``."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    return triplet_margin_with_distance_loss(
        anchor, positive, negative, distance_function=lambda x, y: _ops.pairwise_distance(x, y, p, eps),
        margin=margin, swap=swap, reduction=reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean"):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with any distance
    ``d(x, y)`` that returns a tensor of distances (default: ``pairwise_distance``); ``swap``
    uses the smaller of ``d(anchor, negative)`` and ``d(positive, negative)``."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {anchor.ndim}D, positive "
                           f"{positive.ndim}D, and negative {negative.ndim}D inputs")
    if distance_function is None:
        distance_function = _ops.pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_neg = _ops.minimum(dist_neg, distance_function(positive, negative))
    return F._reduce(_ops.clamp_min(margin + dist_pos - dist_neg, 0), reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None, reduction: str = "mean"):
    """The negative log-likelihood of ``target`` counts under a Poisson of rate ``exp(input)``
    (``log_input``, the default) or ``input``: ``exp(input) - target * input``, or
    ``input - target * log(input + eps)``; ``full`` adds Stirling's approximation of
    ``log(target!)`` where ``target > 1``."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    if log_input:
        loss = _ops.exp(input) - target * input
    else:
        loss = input - target * _ops.log(input + eps)
    if full:
        stirling = target * _ops.log(target) - target + 0.5 * _ops.log(2 * math.pi * target)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return F._reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean"):
    """The negative log-likelihood of ``target`` under a Gaussian of mean ``input`` and
    variance ``var`` (the input's shape, one dim short, or with one dim of size 1; or a
    float): ``0.5 * (log(var) + (input - target)**2 / var)``, ``var`` clamped to at least
    ``eps`` outside the graph; ``full`` adds ``0.5 * log(2 * pi)``."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * _ops.ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = _ops.unsqueeze(var, -1)
        elif not (input.ndim == var.ndim and
                  sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (_ops.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return F._reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    """Binary cross-entropy on logits of every class of a (N, C) input against a 0/1 (N, C)
    target, averaged over the classes (then reduced over the samples)."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    loss = -(target * F.logsigmoid(input) + (1 - target) * F.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return F._reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None,
                           reduction: str = "mean"):
    """The multi-label hinge loss: for each sample, ``sum max(0, 1 - (x[y[j]] - x[i])) / C``
    over its target classes ``y[j]`` (the entries of its ``target`` row before the first -1)
    and the classes ``i`` that are not targets. ``input`` is (C) or (N, C), ``target`` int64 of
    the same shape."""
    reduction = F.legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(reduction)
    shape = tuple(input.shape)
    if not (input.ndim == 0 or (input.ndim == 1 and shape[0]) or (input.ndim == 2 and shape[1])):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(shape)}")
    if (tuple(target.shape) != shape if input.ndim == 2
            else target.ndim > 1 or target.numel() != input.numel()):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(shape)}")
    if target.dtype != _dtypes.int64:
        raise RuntimeError(f"expected scalar type Long but found {TYPE_WORDS[target.dtype.name]}")
    scores = input.reshape(1, -1) if input.ndim < 2 else input
    labels = target.reshape(scores.shape)
    classes = scores.shape[1]
    label_data = labels.numpy()
    if label_data.size and (label_data.min() < -1 or label_data.max() >= classes):
        raise RuntimeError("argument #2 'target' is out of range")
    # the targets of a row are its entries before the first -1; the other classes are not
    valid = np.cumprod(label_data != -1, axis=1).astype(bool)
    is_target = np.zeros(scores.shape, dtype=bool)
    rows, slots = np.nonzero(valid)
    is_target[rows, label_data[rows, slots]] = True
    pairs = valid[:, :, None] & ~is_target[:, None, :]  # (N, target slot, class)
    picked = scores.gather(1, labels.clamp_min(0))  # x[y[j]] for every slot j
    hinge = F.relu(1 - picked.unsqueeze(2) + scores.unsqueeze(1))  # torch's z > 0
    loss = hinge.masked_fill(_ops.tensor(~pairs), 0.0).sum((1, 2)) / classes
    if input.ndim < 2:
        loss = loss.reshape(())
    return F._reduce(loss, reduction)


# ---- modules ---------------------------------------------------------------------------------

class CosineSimilarity(Module):
    """The cosine similarity of its two inputs along ``dim``.

    Mirrors ``torch.nn.CosineSimilarity``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p-norm distance between the rows of its two inputs.

    Mirrors ``torch.nn.PairwiseDistance``."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)



class MarginRankingLoss(_Loss):
    """``max(0, -y * (x1 - x2) + margin)`` (see :func:`margin_ranking_loss`).

    Examples
    --------
    >>> import gradviz as torch
    >>> loss_fn = torch.nn.MarginRankingLoss(margin=0.5)
    >>> loss_fn(torch.tensor([1.0, 0.2]), torch.tensor([0.0, 0.4]), torch.tensor([1.0, 1.0]))
    tensor(0.3500)
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return margin_ranking_loss(input1, input2, target, margin=self.margin,
                                   reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` for similar pairs (``y = 1``), ``max(0, margin - x)`` for dissimilar ones (see
    :func:`hinge_embedding_loss`)."""

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``log(1 + exp(-y * x))`` (see :func:`soft_margin_loss`)."""

    def forward(self, input, target):
        return soft_margin_loss(input, target, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for ``y = 1``, ``max(0, cos(x1, x2) - margin)`` for ``y = -1`` (see
    :func:`cosine_embedding_loss`)."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(0, margin + d(a, p) - d(a, n))`` (see :func:`triplet_margin_loss`)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                   eps=self.eps, swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """The Poisson negative log-likelihood (see :func:`poisson_nll_loss`)."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """The Gaussian negative log-likelihood of a predicted mean and variance (see
    :func:`gaussian_nll_loss`)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                 reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """Per-class logistic loss averaged over the classes (see
    :func:`multilabel_soft_margin_loss`); ``weight`` rescales each class."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return multilabel_soft_margin_loss(input, target, weight=self.weight,
                                           reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``max(0, margin + d(a, p) - d(a, n))`` with a distance of your choice (see
    :func:`triplet_margin_with_distance_loss`; default: ``nn.PairwiseDistance()``)."""

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean"):
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """The multi-label hinge loss over each sample's target classes (see
    :func:`multilabel_margin_loss`)."""

    def forward(self, input, target):
        return multilabel_margin_loss(input, target, reduction=self.reduction)


__all__ += ["CosineSimilarity", "PairwiseDistance", "MarginRankingLoss", "HingeEmbeddingLoss",
            "SoftMarginLoss", "CosineEmbeddingLoss",
            "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss",
            "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss"]
