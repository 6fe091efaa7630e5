"""``nn.functional.ctc_loss`` and ``nn.CTCLoss``: the connectionist temporal classification
loss of (T, N, C) log-probabilities against unaligned targets (op in :mod:`gradviz.ops._ctc`,
Note [CTC forward-backward] there).

As PyTorch's ``at::ctc_loss``: the per-sample losses are ``CtcLossBackward0``'s output;
``zero_infinity`` replaces infinite ones by zero (``WhereBackward0``); ``reduction="mean"``
divides each by its target length (at least 1) and averages (``DivBackward0``,
``MeanBackward0``), ``"sum"`` adds them up. Targets are padded (N, S) or concatenated (sum of
the target lengths,); lengths are tensors of integers or sequences of ints. Unbatched (T, C)
log-probabilities are one sample.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import TYPE_WORDS, Tensor
from ..ops import _ctc
from ._module import Module

__all__ = ["ctc_loss", "CTCLoss"]

_CHECKING = " (while checking arguments for ctc_loss_allocate_outputs)"


def _lengths(lengths, what):
    """Lengths as a tuple of ints: a tensor of integers (any shape) or a sequence of ints."""
    if isinstance(lengths, Tensor):
        if lengths.dtype.is_floating_point or lengths.dtype is _dtypes.bool:
            raise RuntimeError(f"{what} must be integral")
        return tuple(int(n) for n in lengths._data.reshape(-1))
    if isinstance(lengths, (int, np.integer)):
        raise TypeError(f"ctc_loss(): argument '{what}' must be tuple of ints, not int")
    return tuple(int(n) for n in lengths)


def _split_targets(targets, target_lengths, batch):
    """One int64 array of labels per sample, with PyTorch's size checks."""
    labels = targets._data.astype(np.int64)
    if labels.ndim == 1:
        total = int(np.sum(target_lengths, dtype=np.int64))
        if labels.shape[0] != total:
            raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got size "
                               f"{labels.shape[0]} for argument #2 'targets'{_CHECKING}")
        ends = np.cumsum(target_lengths, dtype=np.int64)
        return [labels[end - n:end] for end, n in zip(ends, target_lengths)]
    longest = max(target_lengths, default=0)
    if labels.shape[1] < longest:
        raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but "
                           f"got size {labels.shape[1]} for argument #2 'targets'{_CHECKING}")
    if labels.shape[0] < batch:
        raise RuntimeError(f"Expected tensor to have size at least {batch} at dimension 0, but "
                           f"got size {labels.shape[0]} for argument #2 'targets'{_CHECKING}")
    return [labels[sample, :n] for sample, n in enumerate(target_lengths)]


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False):
    """The CTC loss of (T, N, C) (or unbatched (T, C)) ``log_probs`` (log-softmax outputs)
    against ``targets``. Mirrors ``torch.nn.functional.ctc_loss``.

    Examples
    --------
    >>> import gradviz as torch
    >>> log_probs = torch.zeros(3, 1, 2).log_softmax(2)       # 3 frames, 2 classes, blank 0
    >>> loss = torch.nn.functional.ctc_loss(log_probs, torch.tensor([[1]]), [3], [1], reduction="sum")
    >>> round(loss.item(), 4)                                  # -log(6 paths / 8)
    0.2877
    """
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated, please use reduction='mean' "
                      "instead.", UserWarning, stacklevel=2)
        reduction = "mean"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if isinstance(input_lengths, Tensor) != isinstance(target_lengths, Tensor):
        raise TypeError("ctc_loss() received an invalid combination of arguments: input_lengths and "
                        "target_lengths must both be tensors or both be sequences of ints, got "
                        f"{type(input_lengths).__name__} and {type(target_lengths).__name__}")
    input_lengths = _lengths(input_lengths, "input_lengths")
    target_lengths = _lengths(target_lengths, "target_lengths")
    if log_probs.dtype not in (_dtypes.float32, _dtypes.float64):
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for '
                                  f"'{TYPE_WORDS[log_probs.dtype.name]}'")
    batched = log_probs.ndim == 3
    if not batched:
        log_probs = log_probs.unsqueeze(1)
        if targets.ndim == 1:
            targets = targets.unsqueeze(0)
    frames, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    if len(input_lengths) != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(target_lengths) != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    labels = _split_targets(targets, target_lengths, batch)
    for length in input_lengths:
        if length < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                               f"{length}{_CHECKING}")
        if length > frames:
            raise RuntimeError(f"Expected input_lengths to have value at most {frames}, but got "
                               f"value {length}{_CHECKING}")
    for sample in labels:
        if sample.size and (sample.min() < 0 or sample.max() >= classes):
            # PyTorch reads outside log_probs here; gradviz refuses
            raise IndexError(f"ctc_loss(): target label {int(sample[(sample < 0) | (sample >= classes)][0])} "
                             f"is out of range for {classes} classes")
    losses = _ctc.ctc_loss(log_probs, labels, targets, input_lengths, target_lengths, blank,
                           zero_infinity)
    if zero_infinity:
        losses = _ops.where(losses == float("inf"), _ops.zeros((), dtype=losses.dtype), losses)
    if reduction == "mean":
        divisor = _ops.tensor(target_lengths, dtype=losses.dtype).clamp_min(1)
        return (losses / divisor).mean()
    if reduction == "sum":
        return losses.sum()
    return losses if batched else losses.squeeze(0)


class CTCLoss(Module):
    """The connectionist temporal classification loss: ``forward(log_probs, targets,
    input_lengths, target_lengths)``. Mirrors ``torch.nn.CTCLoss``."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__()
        self.reduction = reduction
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)
