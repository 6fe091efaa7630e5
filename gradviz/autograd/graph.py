"""``gradviz.autograd.graph``: the graph's node type, as ``torch.autograd.graph``."""

from gradviz_ext import engine as _engine

Node = _engine.Node

__all__ = ["Node"]
