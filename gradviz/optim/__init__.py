"""``gradviz.optim``: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adamax``,
``NAdam``, ``RAdam``, ``Adadelta``, ``Rprop``, ``ASGD``, ``LBFGS`` (following ``torch.optim``'s
single-tensor algorithms), ``SparseAdam`` (which refuses dense gradients, gradviz's only kind),
``lr_scheduler`` and ``swa_utils``."""

from . import lr_scheduler, swa_utils
from ._lbfgs import LBFGS
from ._optimizer import (ASGD, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer, RAdam,
                         RMSprop, Rprop, SparseAdam)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "Adadelta", "Rprop", "ASGD", "LBFGS", "SparseAdam", "lr_scheduler", "swa_utils"]
