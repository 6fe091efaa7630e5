"""``gradviz.nn.functional``: every functional form of ``torch.nn.functional``.

This module only gathers the namespace (Note [Functional layers] in ``_functional_core.py``):
the forms are defined in ``_functional_core`` and in the modules beside their layers, none of
which imports this one.
"""

from __future__ import annotations

from . import _functional_attention, _functional_composites, _functional_core, _functional_layers
from . import grad  # noqa: F401  (F.grad, the convolution gradients, as torch.nn.functional.grad)
from ._activations_and_pools import (adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
                                     glu, hardshrink, softshrink, threshold)
from ._channel_ops import channel_shuffle, pdist
from ._conv_transpose3d import conv_transpose3d
from ._ctc_loss import ctc_loss
from ._dropout import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from ._embedding_bag import embedding_bag
from ._functional_attention import _canonical_mask, _mha_shape_check, _none_or_dtype  # noqa: F401
from ._functional_attention import multi_head_attention_forward
from ._functional_composites import (adaptive_max_pool1d_with_indices,
                                     adaptive_max_pool2d_with_indices,
                                     adaptive_max_pool3d_with_indices, celu_, elu_, hardtanh_,
                                     leaky_relu_, local_response_norm, lp_pool1d, lp_pool2d,
                                     lp_pool3d, max_pool1d_with_indices, max_pool2d_with_indices,
                                     max_pool3d_with_indices, relu_, rrelu_, selu_, threshold_,
                                     upsample_bilinear, upsample_nearest)
from ._functional_core import *  # noqa: F403  (its __all__: every public form it defines)
from ._functional_core import _check_reduction, _reduce  # noqa: F401  (read as F._reduce)
from ._functional_layers import (bilinear, conv_transpose1d, conv_transpose2d, gumbel_softmax,
                                 interpolate, pixel_shuffle, pixel_unshuffle, prelu, upsample)
from ._margin_and_likelihood_losses import (cosine_embedding_loss, gaussian_nll_loss,
                                            hinge_embedding_loss, margin_ranking_loss,
                                            multilabel_margin_loss, multilabel_soft_margin_loss,
                                            poisson_nll_loss, soft_margin_loss,
                                            triplet_margin_loss, triplet_margin_with_distance_loss)
from ._padding import pad
from ._sampling import affine_grid, grid_sample
from ._unpooling import max_unpool1d, max_unpool2d, max_unpool3d
from ._volumetric import adaptive_avg_pool3d, avg_pool3d, conv3d, max_pool3d

__all__ = (_functional_core.__all__ + _functional_layers.__all__ + _functional_attention.__all__
           + _functional_composites.__all__)
__all__ += ["pad", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
            "channel_shuffle", "pdist"]
__all__ += ["conv3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "affine_grid",
            "grid_sample", "embedding_bag"]
__all__ += ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
            "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
            "multilabel_soft_margin_loss", "multilabel_margin_loss",
            "triplet_margin_with_distance_loss"]
__all__ += ["glu", "threshold", "hardshrink", "softshrink", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "adaptive_max_pool3d"]
__all__ += ["max_unpool1d", "max_unpool2d", "max_unpool3d", "conv_transpose3d", "ctc_loss"]
