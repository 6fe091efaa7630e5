"""``gradviz.nn.modules.instancenorm``: the instance norms and their base ``_InstanceNorm``, where
torch code imports them from ``torch.nn.modules.instancenorm``."""

from .. import (  # noqa: F401  (re-exported)
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from .._normalization import _InstanceNorm

__all__ = ["_InstanceNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
