"""``gradviz.optim``: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adamax``,
``NAdam``, ``RAdam``, ``Adadelta`` (following ``torch.optim``'s single-tensor algorithms) and
``lr_scheduler``."""

from . import lr_scheduler
from ._optimizer import (SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer, RAdam,
                         RMSprop)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "Adadelta", "lr_scheduler"]
