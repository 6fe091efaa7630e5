"""``gradviz.nn.modules.linear``: the linear layers, where torch code imports them from
``torch.nn.modules.linear``."""

from .. import (  # noqa: F401  (re-exported)
    Bilinear,
    Identity,
    LazyLinear,
    Linear,
)

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]
