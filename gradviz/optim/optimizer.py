"""``gradviz.optim.optimizer``: ``Optimizer`` and the ``required`` marker, where custom
optimizers import them from (``from torch.optim.optimizer import Optimizer, required``)."""

from ._optimizer import Optimizer, required

__all__ = ["Optimizer", "required"]
