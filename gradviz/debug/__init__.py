"""Debugging: step through a backward pass (``gradviz.debug.backward``) and diagnose it
(``gradviz.debug.doctor``, with ``gradviz.debug.capture``)."""

from ._capture import capture
from ._doctor import FINDING_KINDS, DoctorReport, Entry, Finding, doctor
from ._session import NODE_STATES, DebugSession, backward

__all__ = ["DebugSession", "backward", "NODE_STATES", "capture", "doctor", "DoctorReport",
           "Finding", "Entry", "FINDING_KINDS"]
