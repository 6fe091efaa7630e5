"""Debugging: step through a backward pass (``gradviz.debug.backward``)."""

from ._session import NODE_STATES, DebugSession, backward

__all__ = ["DebugSession", "backward", "NODE_STATES"]
