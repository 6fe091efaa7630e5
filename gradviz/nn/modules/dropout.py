"""``gradviz.nn.modules.dropout``: the dropout layers and their base ``_DropoutNd``, where torch
code imports them from ``torch.nn.modules.dropout``."""

from .. import (  # noqa: F401  (re-exported)
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
)
from .._dropout import _DropoutNd

__all__ = ["_DropoutNd", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
