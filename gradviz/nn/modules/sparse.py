"""``gradviz.nn.modules.sparse``: the embeddings, where torch code imports them from
``torch.nn.modules.sparse``."""

from .. import (  # noqa: F401  (re-exported)
    Embedding,
    EmbeddingBag,
)

__all__ = ["Embedding", "EmbeddingBag"]
