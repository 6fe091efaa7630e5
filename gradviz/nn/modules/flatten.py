"""``gradviz.nn.modules.flatten``: ``Flatten`` and ``Unflatten``, where torch code imports them
from ``torch.nn.modules.flatten``."""

from .. import (  # noqa: F401  (re-exported)
    Flatten,
    Unflatten,
)

__all__ = ["Flatten", "Unflatten"]
