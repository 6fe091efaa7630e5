"""Loss modules: ``MSELoss`` and ``CrossEntropyLoss`` (wrappers of :mod:`.functional`)."""

from __future__ import annotations

from . import functional as F
from ._module import Module

__all__ = ["MSELoss", "NLLLoss", "CrossEntropyLoss"]


class MSELoss(Module):
    """Mean squared error; a composite of Sub/Pow/Mean nodes (torch shows ``MseLossBackward0``)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            raise NotImplementedError("size_average and reduce are deprecated; use reduction")
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class NLLLoss(Module):
    """Negative log likelihood of class indices (see :func:`gradviz.nn.functional.nll_loss`)."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__()
        if weight is not None or size_average is not None or reduce is not None:
            raise NotImplementedError("NLLLoss: weight, size_average and reduce are not supported")
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, input, target):
        return F.nll_loss(input, target, ignore_index=self.ignore_index, reduction=self.reduction)


class CrossEntropyLoss(Module):
    """``log_softmax`` + ``nll_loss`` on class indices; composite nodes (torch: ``NllLossBackward0``
    after ``LogSoftmaxBackward0``).

    Examples
    --------
    >>> import gradviz as torch
    >>> loss_fn = torch.nn.CrossEntropyLoss()
    >>> loss_fn(torch.tensor([[2.0, 0.0]]), torch.tensor([1]))
    tensor(2.1269)
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__()
        if weight is not None or size_average is not None or reduce is not None:
            raise NotImplementedError(
                "CrossEntropyLoss: weight, size_average and reduce are not supported")
        if label_smoothing != 0.0:
            raise NotImplementedError("CrossEntropyLoss: label_smoothing is not supported")
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, input, target):
        return F.cross_entropy(input, target, ignore_index=self.ignore_index,
                               reduction=self.reduction)
