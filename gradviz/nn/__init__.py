"""``gradviz.nn``: for now, the functional activations (``gradviz.nn.functional``)."""

from . import functional

__all__ = ["functional"]
