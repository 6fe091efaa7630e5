"""Debugging: step through a backward pass (``gradviz.debug.backward``), debug code that calls
``backward()`` itself (``gradviz.debug.runcall``), replay a recorded trace
(``gradviz.debug.ReplaySession``), diagnose gradients of gradviz and real PyTorch graphs
(``gradviz.debug.doctor``, with ``gradviz.debug.capture``), and record a real PyTorch backward
into a trace (``gradviz.debug.record_torch``)."""

from ._breakpoints import Breakpoint
from ._capture import capture, keep_forward_inputs
from ._diff import NodePair, TraceDiff, diff
from ._doctor import FINDING_KINDS, DoctorReport, Entry, Finding, doctor
from ._replay import ReplaySession, replay
from ._session import NODE_STATES, DebugSession, backward
from ._threaded import CallSession, SessionAborted, runcall
from ._torch_recorder import record_torch
from ._torch_scopes import torch_scopes
from ..autograd._scopes import scope
from ..instrument._module_paths import module_path
from ..instrument._rollup import rollup

__all__ = ["DebugSession", "backward", "NODE_STATES", "Breakpoint", "ReplaySession", "replay",
           "CallSession", "runcall", "SessionAborted", "capture", "keep_forward_inputs", "doctor",
           "DoctorReport", "Finding", "Entry", "FINDING_KINDS", "record_torch", "scope",
           "module_path", "torch_scopes", "rollup", "diff", "TraceDiff", "NodePair"]
