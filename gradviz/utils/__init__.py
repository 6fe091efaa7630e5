"""``gradviz.utils``: ``data`` (datasets and the ``DataLoader``), ``benchmark`` (``Timer``),
``checkpoint`` (activation checkpointing) and ``hooks`` (``RemovableHandle``), as ``torch.utils``."""

from . import benchmark, checkpoint, data, hooks

__all__ = ["benchmark", "checkpoint", "data", "hooks"]
