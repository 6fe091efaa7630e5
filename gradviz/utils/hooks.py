"""``gradviz.utils.hooks``: ``RemovableHandle``, the handle every ``register_*_hook`` returns, as
``torch.utils.hooks``."""

from gradviz_ext._hooks import RemovableHandle

__all__ = ["RemovableHandle"]
