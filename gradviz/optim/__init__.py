"""``gradviz.optim``: ``SGD`` and ``Adam``, following ``torch.optim``'s single-tensor algorithms."""

from ._optimizer import SGD, Adam, Optimizer

__all__ = ["Optimizer", "SGD", "Adam"]
