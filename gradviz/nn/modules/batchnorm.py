"""``gradviz.nn.modules.batchnorm``: the batch norms and their base ``_BatchNorm`` (``isinstance(m,
_BatchNorm)`` finds every one), where torch code imports them from
``torch.nn.modules.batchnorm``."""

from .. import (  # noqa: F401  (re-exported)
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
)
from .._normalization import _BatchNorm

__all__ = ["_BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d"]
