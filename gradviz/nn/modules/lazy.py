"""``gradviz.nn.modules.lazy``: ``LazyModuleMixin``, as ``torch.nn.modules.lazy``."""

from .._lazy import LazyModuleMixin

__all__ = ["LazyModuleMixin"]
