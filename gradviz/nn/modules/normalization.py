"""``gradviz.nn.modules.normalization``: the layer-wise norms, where torch code imports them from
``torch.nn.modules.normalization``."""

from .. import (  # noqa: F401  (re-exported)
    GroupNorm,
    LayerNorm,
    LocalResponseNorm,
    RMSNorm,
)

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm"]
