"""``gradviz.nn.modules.conv``: the convolutions, where torch code imports them from
``torch.nn.modules.conv``."""

from .. import (  # noqa: F401  (re-exported)
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
)

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]
