"""``gradviz.nn``: ``Parameter``, ``Module``, the common layers, containers and losses,
``functional``, ``init`` and ``utils``.

Layers and losses record the backward nodes PyTorch records (``AddmmBackward0`` for a
``Linear``, ``MseLossBackward0``, ``NllLossBackward0``, ...; see :mod:`gradviz.nn.functional`).
"""

from . import functional, grad, init, utils
from ._layers import (CELU, ELU, ParameterDict, ParameterList,
                      GELU, SELU, Dropout, Flatten, Hardsigmoid, Hardswish, Hardtanh,
                      Identity, LeakyReLU, Linear, LogSigmoid, LogSoftmax, Mish, ModuleDict,
                      ModuleList, ReLU, ReLU6, Sequential, Sigmoid, SiLU, Softmax, Softmin, Softplus,
                      Softsign, Tanh, Tanhshrink, Unflatten)
from ._loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss,
                    MSELoss, MultiMarginLoss, NLLLoss, SmoothL1Loss)
from ._conv import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, Conv1d, Conv2d,
                    ConvTranspose1d, ConvTranspose2d, MaxPool1d, MaxPool2d)
from ._module import Buffer, Module, Parameter, UninitializedBuffer, UninitializedParameter
from ._dropout import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from ._channel_ops import ChannelShuffle
from ._margin_and_likelihood_losses import (CosineEmbeddingLoss, CosineSimilarity, GaussianNLLLoss, HingeEmbeddingLoss,
                                            MarginRankingLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,
                                            PairwiseDistance, PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss,
                                            TripletMarginWithDistanceLoss)
from ._activations_and_pools import (GLU, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, Fold, Hardshrink,
                                     RReLU, Softmax2d, Softshrink, Threshold, Unfold)
from ._padding import (CircularPad1d, CircularPad2d, ConstantPad1d, ConstantPad2d, ReflectionPad1d,
                       ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, ZeroPad1d, ZeroPad2d)
from ._normalization import (BatchNorm1d, BatchNorm2d, Embedding, GroupNorm, InstanceNorm1d,
                             InstanceNorm2d, LayerNorm, RMSNorm)
from ._rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from ._rnn import _CellBase as RNNCellBase  # torch's public base names
from ._rnn import _RNNBase as RNNBase
from ._transformer import (MultiheadAttention, Transformer, TransformerDecoder,
                           TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from ._embedding_bag import EmbeddingBag
from ._functional_composites import LocalResponseNorm, LPPool1d, LPPool2d, LPPool3d
from ._volumetric import (AdaptiveAvgPool3d, AvgPool3d, BatchNorm3d, CircularPad3d,
                          ConstantPad3d, Conv3d, InstanceNorm3d, MaxPool3d, ReflectionPad3d,
                          ReplicationPad3d, ZeroPad3d)
from ._upsampling import (Bilinear, PixelShuffle, PixelUnshuffle, PReLU, Upsample,
                          UpsamplingBilinear2d, UpsamplingNearest2d)
from ._lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,
                    LazyConvTranspose1d, LazyConvTranspose2d, LazyInstanceNorm1d, LazyInstanceNorm2d,
                    LazyInstanceNorm3d, LazyLinear, LazyModuleMixin)

__all__ = ["functional", "init", "utils", "modules", "Parameter", "UninitializedParameter", "Module", "Identity",
           "Linear", "LazyLinear", "ReLU",
           "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "LeakyReLU", "ELU", "GELU", "SiLU",
           "Softplus", "Flatten", "Unflatten", "Dropout", "Sequential", "ModuleList", "ModuleDict",
           "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "NLLLoss", "CrossEntropyLoss", "ReLU6", "SELU", "Mish", "Hardswish", "Hardsigmoid",
           "Hardtanh", "CELU", "LogSigmoid", "Softsign", "Tanhshrink", "Softmin", "Embedding", "CosineSimilarity",
           "PairwiseDistance", "KLDivLoss", "MultiMarginLoss", "Conv2d", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d", "Conv1d", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "LPPool1d",
           "LPPool2d", "ParameterList", "ParameterDict", "LayerNorm", "BatchNorm1d", "BatchNorm2d",
           "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RNN", "LSTM", "GRU", "RNNCell",
           "LSTMCell", "GRUCell", "ConvTranspose1d", "ConvTranspose2d", "RMSNorm",
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer", "Upsample",
           "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "PReLU",
           "Bilinear", "ConstantPad1d", "ConstantPad2d", "ZeroPad1d", "ZeroPad2d",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
           "CircularPad1d", "CircularPad2d", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss", "CosineEmbeddingLoss",
           "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss",
           "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss", "AdaptiveMaxPool3d",
           "GLU", "Threshold", "Hardshrink", "RReLU", "Softshrink", "Softmax2d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "Unfold", "Fold", "Conv3d", "MaxPool3d", "AvgPool3d",
           "AdaptiveAvgPool3d", "BatchNorm3d", "InstanceNorm3d", "ConstantPad3d", "ZeroPad3d",
           "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d", "EmbeddingBag",
           "LocalResponseNorm", "LPPool1d", "LPPool2d", "LPPool3d", "UninitializedBuffer",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d", "RNNBase", "RNNCellBase", "FeatureAlphaDropout", "ChannelShuffle"]

from ._unpooling import MaxUnpool1d, MaxUnpool2d, MaxUnpool3d  # noqa: E402
from ._conv_transpose3d_layer import ConvTranspose3d, LazyConvTranspose3d  # noqa: E402
from ._ctc_loss import CTCLoss  # noqa: E402
__all__ += ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "ConvTranspose3d", "LazyConvTranspose3d", "CTCLoss"]
__all__ += ["Buffer"]
from ._adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: E402
from . import parallel  # noqa: E402
from .parallel import DataParallel  # noqa: E402
__all__ += ["AdaptiveLogSoftmaxWithLoss", "DataParallel", "parallel"]
from . import modules  # noqa: E402 - it re-exports the classes above
from . import parameter  # noqa: E402 - torch.nn.parameter is an attribute too

