"""``gradviz.nn.modules.transformer``: the transformer layers, where torch code imports them from
``torch.nn.modules.transformer``."""

from .. import (  # noqa: F401  (re-exported)
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]
