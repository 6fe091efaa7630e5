"""``gradviz.nn.modules.loss``: the loss modules and their base ``_Loss``, where torch code imports
them from ``torch.nn.modules.loss``."""

from .. import (  # noqa: F401  (re-exported)
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .._loss import _Loss

__all__ = ["_Loss", "L1Loss", "MSELoss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "SmoothL1Loss", "HuberLoss", "MultiMarginLoss",
           "MultiLabelSoftMarginLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
           "CosineEmbeddingLoss", "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "SoftMarginLoss"]
