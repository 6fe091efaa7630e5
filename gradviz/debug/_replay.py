"""``ReplaySession``: a recorded trace, stepped through with the session interface, forward and
backward in time.

A replay shows exactly what the live session showed at the same point: both feed the shown
prefix of the event stream into an :class:`~gradviz.debug._view.EventView`. Node boundaries are
the ``node_started`` events; "paused before node N" means every event up to (not including)
N's ``node_started`` is shown. Going back rebuilds the view from the first event (cheap next to
drawing it).
"""

from __future__ import annotations

import bisect
import os

from ..instrument import Trace, load_trace
from ._base import SessionBase
from ._breakpoints import Breakpoint
from ._view import EventView

__all__ = ["ReplaySession", "replay"]


class ReplaySession(SessionBase):
    """Step through a :class:`gradviz.instrument.Trace` like a live :class:`DebugSession`.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, -2.0], requires_grad=True)
    >>> with torch.record() as trace:
    ...     (x.exp() * x).sum().backward()
    >>> replay = torch.debug.ReplaySession(trace)
    >>> replay.step()["name"], replay.step()["name"]
    ('SumBackward0', 'MulBackward0')
    >>> replay.step_back()["name"]
    'MulBackward0'
    >>> replay.node(replay.current)["name"], replay.status
    ('MulBackward0', 'paused')
    >>> replay.continue_()
    >>> replay.status
    'finished'
    """

    def __init__(self, trace: Trace):
        super().__init__()
        if not isinstance(trace, Trace):
            raise TypeError(f"ReplaySession takes a gradviz.instrument.Trace, got "
                            f"{type(trace).__name__}; load a file with gradviz.load_trace(path)")
        self.trace = trace
        self._events = trace.events
        self._nodes = {node["id"]: node for node in trace.graph["nodes"]}
        self._boundaries = [index for index, event in enumerate(self._events)
                            if event["kind"] == "node_started"]
        self._start = self._boundaries[0] if self._boundaries else len(self._events)
        self._view = EventView(self._nodes)
        self._cursor = 0
        self._seek(self._start)
        if getattr(trace, "doctor", None) is not None:
            # a report kept with the trace (record_torch(doctor=True)): Check gradients shows it
            self.doctor = self._recorded_doctor

    def _recorded_doctor(self, progress=None):
        """The gradient doctor's report recorded with the trace (``trace.doctor``), as an
        object with ``to_dict()``; offered as ``doctor`` only when the trace has one."""
        if callable(progress):
            progress(1, 1, "recorded report")
        report = self.trace.doctor
        if report is None:  # offered only when the trace has one (__init__)
            raise RuntimeError("this replay's trace has no gradient doctor report")
        return _RecordedReport(report)

    # ---- position ----------------------------------------------------------------------
    def _seek(self, position: int) -> None:
        position = max(0, min(position, len(self._events)))
        if position < self._cursor:
            self._view = EventView(self._nodes)
            self._cursor = 0
        for event in self._events[self._cursor:position]:
            self._view.apply(event)
        self._cursor = position

    @property
    def position(self) -> int:
        """How many events are shown (0 ... ``len(trace.events)``)."""
        return self._cursor

    def seek(self, position: int) -> None:
        """Show exactly the first ``position`` events (the timeline's scrubber)."""
        if not isinstance(position, int) or isinstance(position, bool):
            raise TypeError(f"seek() takes an event count, got {position!r}")
        self._seek(position)
        self._notify()

    def _next_boundary(self) -> int:
        index = bisect.bisect_right(self._boundaries, self._cursor)
        return self._boundaries[index] if index < len(self._boundaries) else len(self._events)

    def _graph_nodes(self) -> dict:
        return self._nodes

    # ---- state -------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """``"paused"`` until the last event is shown; then ``"finished"``, ``"error"`` (the
        pass failed) or ``"aborted"`` (the trace ends inside a pass)."""
        if self._cursor < len(self._events):
            return "paused"
        for event in reversed(self._events):
            if event["kind"] == "error":
                return "error"
            if event["kind"] == "backward_finished":
                return "finished"
            if event["kind"] == "backward_started":
                return "aborted"
        return "finished"

    @property
    def finished(self) -> bool:
        return self._cursor >= len(self._events)

    @property
    def current(self) -> int | None:
        """The node being shown (mid-node) or the node the next :meth:`step` shows."""
        if self._view.running is not None:
            return self._view.running
        index = bisect.bisect_left(self._boundaries, self._cursor)
        if index < len(self._boundaries):
            return self._events[self._boundaries[index]]["node"]
        return None

    @property
    def events(self) -> list[dict]:
        """The events shown so far."""
        return self._events[:self._cursor]

    def node_states(self) -> dict[int, str]:
        return self._view.node_states()

    def graph(self) -> dict:
        graph = self.trace.graph
        return {"nodes": [dict(n) for n in graph["nodes"]],
                "edges": [dict(e) for e in graph["edges"]], "roots": list(graph["roots"])}

    def node(self, node_id: int) -> dict:
        """What the shown events say about one node (see ``DebugSession.node``; a replay has
        summaries only, no live tensors)."""
        return self._view_node(self._view, node_id)

    # ---- driving -----------------------------------------------------------------------
    def step(self) -> dict | None:
        """Show the next node (all its events); returns that node's graph entry or None.

        After :meth:`step_event`, first shows the rest of the node in progress (even when its
        ``node_finished`` is already shown) and returns that node, as ``DebugSession.step``.
        """
        self.stopped_at = None
        if self._cursor >= len(self._events):
            return None
        # the node whose events are shown: the last node_started at or before the cursor (at a
        # boundary, that is the node this step shows in full)
        index = bisect.bisect_right(self._boundaries, self._cursor) - 1
        running = self._events[self._boundaries[index]]["node"] if index >= 0 else None
        self._seek(self._next_boundary())
        self._notify()
        return None if running is None else self._nodes.get(running)

    def step_event(self) -> dict | None:
        """Show one more event and return it (None at the end)."""
        self.stopped_at = None
        if self._cursor >= len(self._events):
            return None
        event = self._events[self._cursor]
        self._seek(self._cursor + 1)
        self._notify()
        return event

    def step_back(self) -> dict | None:
        """Go back to just before the previous node ran; returns that node's graph entry
        (None when already at the start)."""
        self.stopped_at = None
        index = bisect.bisect_left(self._boundaries, self._cursor) - 1
        if index < 0 or self._boundaries[index] < self._start:
            return None
        target = self._boundaries[index]
        self._seek(target)
        self._notify()
        return self._nodes.get(self._events[target]["node"])

    def step_event_back(self) -> dict | None:
        """Hide the last shown event and return it (None at the first event)."""
        self.stopped_at = None
        if self._cursor == 0:
            return None
        event = self._events[self._cursor - 1]
        self._seek(self._cursor - 1)
        self._notify()
        return event

    def continue_(self) -> None:
        """Show events until a breakpoint matches (as in ``DebugSession.continue_``) or the end."""
        self.stopped_at = None
        first = True
        try:
            while self._cursor < len(self._events):
                event = self._events[self._cursor]
                name = self._node_name(event["node"])
                if event["kind"] == "node_started" and not first:
                    hit = self.breakpoints.node_hit(event["node"], name)
                    if hit is not None:
                        self.stopped_at = hit
                        return
                first = False
                self._seek(self._cursor + 1)
                hit = self.breakpoints.event_hit(event, name)
                if hit is not None:
                    self.stopped_at = hit
                    return
        finally:
            self._notify()

    def run_to(self, node) -> None:
        """Continue until ``node`` (an id) is the next to run, or the end."""
        node_id = node["id"] if isinstance(node, dict) else getattr(node, "node_id", node)
        if node_id not in self._nodes:
            raise KeyError(f"no node with id {node_id} in this trace's graph")
        index = bisect.bisect_left(self._boundaries, self._cursor)
        if index < len(self._boundaries) and self._boundaries[index] == self._cursor and \
                self._events[self._cursor]["node"] == node_id:
            return  # already paused before it (as DebugSession.run_to)
        temporary = self.breakpoints.add(Breakpoint(node=node_id))
        try:
            self.continue_()
        finally:
            temporary.remove()
        if self.stopped_at is temporary:
            self.stopped_at = None
            self._notify()  # listeners saw the temporary breakpoint as the reason of the stop

    def restart(self) -> None:
        """Back to the start: paused before the first node."""
        self._seek(self._start)
        self._notify()

    def __repr__(self) -> str:
        return (f"<ReplaySession {self.status}: event {self._cursor} of {len(self._events)}>")


def replay(trace) -> ReplaySession:
    """A :class:`ReplaySession` of a trace, or of a trace file (path), loaded strictly."""
    if isinstance(trace, (str, os.PathLike)):
        trace = load_trace(trace)
    return ReplaySession(trace)


class _RecordedReport:
    """A doctor report kept as plain data (``DoctorReport.to_dict()``)."""

    def __init__(self, data: dict):
        self._data = data

    def to_dict(self) -> dict:
        return self._data
