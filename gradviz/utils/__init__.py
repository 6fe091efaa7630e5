"""``gradviz.utils``: ``data`` (datasets and the ``DataLoader``) and ``benchmark`` (``Timer``),
as ``torch.utils``."""

from . import benchmark, data

__all__ = ["benchmark", "data"]
