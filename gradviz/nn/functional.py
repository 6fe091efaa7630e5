"""``gradviz.nn.functional``: activations, ``linear`` and the losses, as ``torch.nn.functional``.

``linear`` and the losses are composites of gradviz's primitive ops, so their backward graphs
show the primitives (``MmBackward0``/``TBackward0``/``AddBackward0``, ``SubBackward0``/
``PowBackward0``/``MeanBackward0``, ``LogSoftmaxBackward0``/``GatherBackward0``/...) where
PyTorch shows one fused node (``AddmmBackward0``, ``MseLossBackward0``, ``NllLossBackward0``).
Values and gradients are the same.
"""

from __future__ import annotations

from .. import ops as _ops
from ..ops import elu, gelu, leaky_relu, log_softmax, relu, sigmoid, silu, softmax, softplus, tanh

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "softplus", "gelu", "leaky_relu",
           "elu", "silu", "linear", "mse_loss", "nll_loss", "cross_entropy"]

_REDUCTIONS = ("none", "mean", "sum")


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (weight: (out_features, in_features))."""
    out = _ops.matmul(input, weight.t())
    return out if bias is None else out + bias


def _reduce(loss, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """Mean (or sum, or elementwise) squared error ``(input - target) ** 2``."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average and reduce are deprecated; use reduction")
    if tuple(input.shape) != tuple(target.shape):
        raise NotImplementedError(
            f"mse_loss: target size ({target.shape}) different from input size ({input.shape}) "
            "is not supported by gradviz (torch broadcasts with a warning)")
    return _reduce((input - target) ** 2, reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log likelihood of class indices: ``-input[n, target[n]]``, averaged.

    ``input`` is (N, C) log-probabilities (or (C,) with a 0-d ``target``); ``target`` holds
    class indices. Targets equal to ``ignore_index`` contribute nothing, and the mean is over
    the others, as in PyTorch. ``weight`` is not supported.
    """
    if weight is not None or size_average is not None or reduce is not None:
        raise NotImplementedError("nll_loss: weight, size_average and reduce are not supported")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if target.dtype.is_floating_point:
        raise NotImplementedError("nll_loss: class-probability targets are not supported; "
                                  "pass class indices (int64)")
    unbatched = input.ndim == 1
    if unbatched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    if input.ndim != 2:
        raise NotImplementedError("nll_loss: only (N, C) or (C,) inputs are supported")
    if target.shape[0] != input.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    keep = target.ne(ignore_index)
    ignoring = not bool(keep.numpy().all())
    index = _ops.where(keep, target, 0) if ignoring else target
    picked = -_ops.gather(input, 1, index.unsqueeze(1)).squeeze(1)
    if ignoring:
        picked = _ops.where(keep, picked, 0.0)
    if reduction == "sum":
        return picked.sum()
    if reduction == "mean":
        if ignoring:
            return picked.sum() / keep.sum().to(picked.dtype)
        return picked.mean()
    return picked.squeeze(0) if unbatched else picked


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """``nll_loss(log_softmax(input, 1), target)`` for class-index targets.

    Examples
    --------
    >>> import gradviz as torch
    >>> import gradviz.nn.functional as F
    >>> logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]], requires_grad=True)
    >>> F.cross_entropy(logits, torch.tensor([0, 1]))
    tensor(0.1269, grad_fn=<MeanBackward0>)
    """
    if label_smoothing != 0.0:
        raise NotImplementedError("cross_entropy: label_smoothing is not supported")
    dim = 0 if input.ndim == 1 else 1
    return nll_loss(log_softmax(input, dim), target, weight, size_average, ignore_index, reduce,
                    reduction)
