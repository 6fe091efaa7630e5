"""Debugging: step through a backward pass (``gradviz.debug.backward``), debug code that calls
``backward()`` itself (``gradviz.debug.runcall``), replay a recorded trace
(``gradviz.debug.ReplaySession``), and diagnose gradients (``gradviz.debug.doctor``, with
``gradviz.debug.capture``)."""

from ._breakpoints import Breakpoint
from ._capture import capture
from ._doctor import FINDING_KINDS, DoctorReport, Entry, Finding, doctor
from ._replay import ReplaySession, replay
from ._session import NODE_STATES, DebugSession, backward
from ._threaded import CallSession, SessionAborted, runcall

__all__ = ["DebugSession", "backward", "NODE_STATES", "Breakpoint", "ReplaySession", "replay",
           "CallSession", "runcall", "SessionAborted", "capture", "doctor", "DoctorReport",
           "Finding", "Entry", "FINDING_KINDS"]
