"""``gradviz.nn.modules.pooling``: the pooling layers, where torch code imports them from
``torch.nn.modules.pooling``."""

from .. import (  # noqa: F401  (re-exported)
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "LPPool1d", "LPPool2d"]
