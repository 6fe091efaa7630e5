"""``gradviz.optim``: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad`` (following
``torch.optim``'s single-tensor algorithms) and ``lr_scheduler``."""

from . import lr_scheduler
from ._optimizer import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
