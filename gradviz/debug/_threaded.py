"""``gradviz.debug.runcall(fn, *args)``: debug code that calls ``backward()`` itself.

A notebook cell that runs blocks the kernel, so widget clicks could not reach a backward pass
buried in user code. ``runcall`` therefore runs ``fn`` in a worker thread. Every graph task the
worker creates is observed (through :func:`gradviz.instrument.observe`, registered for that
thread only, so other threads' backward passes are untouched) by a recorder that *pauses the
worker* inside the engine's callbacks: before a node runs (``node_started``, before its event
is recorded, so nothing of the node has run yet) and after an event. While the worker waits,
the kernel is free: the returned :class:`CallSession` is driven from cells or the widget with
the session interface, and each command waits until the worker pauses again or ends.

Note [Worker pauses]
--------------------
The worker pauses only inside observer callbacks, on a condition variable, and the controller
only changes ``_state`` / ``_mode`` under that condition. Reads for display take a short data
lock, never the condition, and listeners are called with no lock held (the widget reads the
session back from its listener, possibly from the worker thread). Abort raises
:class:`SessionAborted` (a ``BaseException``, so ``except Exception`` in user code does not
swallow it) at the worker's next pause point; the engine treats it like any exception in a
node (the task fails, its state stays consistent) and it unwinds out of ``fn``.
"""

from __future__ import annotations

import threading
import weakref

from gradviz_ext import engine as _engine

from ..instrument import Recorder, observe
from ..instrument._nodes import walk_graph
from ._base import SessionBase
from ._breakpoints import Breakpoint
from ._release import weak_self
from ._view import EventView

__all__ = ["CallSession", "runcall", "SessionAborted"]


class SessionAborted(BaseException):
    """Raised inside the worker thread of a :class:`CallSession` when it is aborted."""


class _PausingRecorder(Recorder):
    """Records the worker's events and hands control to the session at pause points."""

    def __init__(self, session: CallSession):
        super().__init__()
        self._session = weakref.proxy(session)  # Note [No cycle through a session's error]

    def emit(self, event):
        super().emit(event)
        self._session._on_event(event)

    def backward_started(self, task):
        self.learn_graph(task.graph_root)  # numbers for the session's graph (learnt once)
        self._session._on_backward_started(task)
        super().backward_started(task)

    def node_started(self, task, node, grads):
        self._session._before_node(node)
        super().node_started(task, node, grads)


class CallSession(SessionBase):
    """User code running in a worker thread, paused at breakpoints of its backward passes.

    Made by :func:`runcall`. Offers the session interface (so the widget can show it); the
    graph is that of the backward pass in progress. ``status`` is ``"running"`` while the
    worker runs between pauses, then ``"finished"``, ``"error"`` or ``"aborted"`` when ``fn``
    is over; :meth:`result` returns what ``fn`` returned or raises what it raised.
    """

    def __init__(self, fn, args, kwargs, breakpoints=(), stop_at_first_node=False):
        super().__init__()
        for spec in breakpoints:
            self.breakpoints.add(spec if isinstance(spec, Breakpoint) else Breakpoint(**spec))
        self._fn, self._args, self._kwargs = fn, args, kwargs
        self._cond = threading.Condition()
        self._data = threading.Lock()
        self._state = "running"
        self._mode = "step" if stop_at_first_node else "continue"
        self._abort = False
        self._current: int | None = None
        self._in_progress: int | None = None  # the last node_started's node (worker side)
        self._at_event = False    # paused after an event (mid-node), not before a node
        self._mark: int | None = None     # events recorded when resumed from a mid-node pause
        self._stepped = None              # the node step() ran without pausing before it
        self._run_to: int | None = None   # the node run_to() goes to
        self._nodes: dict = {}
        self._edges: list = []
        self._roots: list = []
        self._live: dict = {}
        self._view = EventView()
        self._events: list[dict] = []
        self._result = None
        self._exception: BaseException | None = None
        self._raised_to_caller = False
        self._recorder = _PausingRecorder(self)
        self._recorder.events = self._events
        self._thread = threading.Thread(target=self._work, name="gradviz-runcall", daemon=True)

    # ---- worker side -------------------------------------------------------------------
    @weak_self  # Note [No cycle through a session's error]
    def _work(self):
        handle = observe(self._recorder, thread=threading.get_ident(), forward=False)
        try:
            self._result = self._fn(*self._args, **self._kwargs)
            final = "finished"
        except SessionAborted:
            final = "aborted"
        except BaseException as exc:  # reported to the controller, re-raised there
            self._exception = exc
            final = "error"
        finally:
            handle.remove()
        with self._cond:
            self._state = final
            self._current = None
            self._cond.notify_all()
        self._notify()

    def _on_backward_started(self, task):
        nodes, edges, roots, live = walk_graph(task.graph_root)
        numbers = self._recorder.numbers
        for node_id, info in nodes.items():
            if node_id in numbers:
                info["number"] = numbers[node_id]
        with self._data:
            self._nodes, self._edges, self._roots, self._live = nodes, edges, roots, live
            self._view = EventView(nodes)
        self._in_progress = None

    def _before_node(self, node):
        if self._abort:
            raise SessionAborted("the debug session was aborted")
        # Resumed after the last event of the node in progress (nothing recorded since): the
        # session was as good as paused before this node, so, as DebugSession does there, a
        # step runs it and a continue does not stop at it (run_to() to it does).
        mark, self._mark = self._mark, None
        fresh = mark is not None and len(self._events) == mark
        if self._mode == "step":
            if fresh:
                self._stepped = self._live.get(node.node_id)
                return
            self._pause(node.node_id)
        elif self._mode == "continue":
            if fresh:
                if node.node_id == self._run_to:
                    self._pause(node.node_id)
                return
            hit = self.breakpoints.node_hit(node.node_id, _engine.display_name(node))
            if hit is not None:
                self.stopped_at = hit
                self._pause(node.node_id)

    def _on_event(self, event):
        with self._data:
            self._view.apply(event)
        if event["kind"] == "node_started":
            self._in_progress = event["node"]
        elif event["kind"] == "backward_finished":
            self._in_progress = None  # the pass is over: no node in progress
        if self._abort:
            return  # unwinding: SessionAborted is on its way
        # mid-node pauses name the node in progress, even once its node_finished is shown
        if event["kind"] == "error":
            self._pause(event["node"], at_event=True)  # stay inspectable at the failing node
        elif self._mode == "event":
            self._pause(self._in_progress, at_event=True)
        elif self._mode == "continue":
            hit = self.breakpoints.event_hit(event, self._node_name(event["node"]))
            if hit is not None:
                self.stopped_at = hit
                self._pause(self._in_progress, at_event=True)

    def _pause(self, node_id, at_event: bool = False):
        # Grad mode is per thread (Note [Per-thread grad mode] in gradviz_ext/_engine.py):
        # the mode the engine set for this node stays the worker's while the controller runs.
        with self._cond:
            self._state = "paused"
            self._current = node_id
            self._at_event = at_event
            self._cond.notify_all()
        self._notify()
        with self._cond:
            while self._state == "paused" and not self._abort:
                self._cond.wait()
        if self._abort:
            raise SessionAborted("the debug session was aborted")

    # ---- controller side ---------------------------------------------------------------
    def _start(self, timeout):
        self._thread.start()
        self._wait_for_stop(timeout)

    def _wait_for_stop(self, timeout) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._state != "running", timeout)

    @weak_self
    def _resume(self, mode: str, timeout) -> None:
        with self._cond:
            if self._state == "finished":
                return  # nothing left to run: commands do nothing, as at the end of a pass
            if self._state != "paused":
                raise RuntimeError(f"the session is {self._state}, not paused")
            self.stopped_at = None
            self._mark = len(self._events) if self._at_event else None
            self._mode = mode
            self._state = "running"
            self._cond.notify_all()
        self._wait_for_stop(timeout)
        self._raise_if_failed()

    def _failure(self) -> BaseException:
        """The exception the pass raised (set whenever the state becomes "error")."""
        assert self._exception is not None, "the session failed without recording why"
        return self._exception

    @weak_self
    def _raise_if_failed(self):
        if self._state == "error" and not self._raised_to_caller:
            self._raised_to_caller = True
            raise self._failure()

    @weak_self
    def step(self, timeout: float | None = None):
        """Let the worker run one node; wait until it pauses before the next one (possibly in
        a later backward pass) or ``fn`` ends. Returns the node that ran.

        After :meth:`step_event` (or an event breakpoint), first lets the worker finish the
        node in progress and returns that node, as ``DebugSession.step`` does; when its last
        event was already shown, runs the next node instead and returns that one.
        """
        node = self._live.get(self._current)
        at_event, seen = self._at_event, len(self._events)
        self._stepped = None
        self._resume("step", timeout)
        if self._stepped is not None:
            return self._stepped
        if at_event and len(self._events) == seen:
            return None  # the node in progress was over, and so was the pass
        return node

    @weak_self
    def step_event(self, timeout: float | None = None) -> dict | None:
        """Let the worker run until its next event; returns that event."""
        seen = len(self._events)
        self._resume("event", timeout)
        return self._events[seen] if len(self._events) > seen else None

    @weak_self
    def continue_(self, timeout: float | None = None) -> None:
        """Let the worker run to the next breakpoint (in any backward pass) or the end of ``fn``."""
        self._resume("continue", timeout)

    @weak_self
    def run_to(self, node, timeout: float | None = None) -> None:
        """Continue until ``node`` (a node or id) is the next to run."""
        node_id = getattr(node, "node_id", node)
        if self._state == "paused" and not self._at_event and self._current == node_id:
            return  # already paused before it
        temporary = self.breakpoints.add(Breakpoint(node=node_id))
        self._run_to = node_id
        try:
            self.continue_(timeout)
        finally:
            self._run_to = None
            temporary.remove()
        if self.stopped_at is temporary:
            self.stopped_at = None
            self._notify()  # listeners saw the temporary breakpoint as the reason of the stop

    def abort(self, timeout: float | None = 10.0) -> None:
        """Stop ``fn``: :class:`SessionAborted` unwinds it from its next pause point."""
        with self._cond:
            if self._state in ("finished", "error", "aborted"):
                return
            self._abort = True
            self._cond.notify_all()
        self._thread.join(timeout)

    @weak_self
    def result(self, timeout: float | None = None):
        """Wait for ``fn`` to end (without resuming a pause) and return its value, or raise
        the exception it raised."""
        with self._cond:
            self._cond.wait_for(lambda: self._state in ("finished", "error", "aborted"), timeout)
            state = self._state
        if state == "error":
            self._raised_to_caller = True
            raise self._failure()
        if state == "aborted":
            raise SessionAborted("the debug session was aborted")
        if state != "finished":
            raise TimeoutError(f"the function is still {state} after {timeout} s")
        return self._result

    # ---- state -------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """``"paused"``, ``"running"``, ``"finished"``, ``"error"`` or ``"aborted"``."""
        return self._state

    @property
    def finished(self) -> bool:
        return self._state in ("finished", "error", "aborted")

    @property
    def error(self) -> BaseException | None:
        return self._exception

    @property
    def current(self) -> int | None:
        return self._current if self._state == "paused" else None

    @property
    def events(self) -> list[dict]:
        with self._data:
            return list(self._events)

    def _graph_nodes(self) -> dict:
        return self._nodes

    def node_states(self) -> dict[int, str]:
        with self._data:
            states = self._view.node_states()
            states.update(self._state_overrides(self._view))
        return states

    def _state_overrides(self, view) -> dict[int, str]:
        # a thread paused before a node: that node runs next
        current = self._current
        if (current is not None and self._state == "paused" and current in self._nodes
                and view.states.get(current, "pending") == "pending"):
            return {current: "ready"}
        return {}

    def graph(self) -> dict:
        with self._data:
            return {"nodes": [dict(n) for n in self._nodes.values()],
                    "edges": [dict(e) for e in self._edges], "roots": list(self._roots)}

    def _overlay_lock(self):
        return self._data

    def node(self, node_id: int) -> dict:
        with self._data:
            return self._view_node(self._view, node_id)

    def __repr__(self) -> str:
        return f"<CallSession {self._state}: {len(self._events)} events>"


def runcall(fn, *args, breakpoints=(), stop_at_first_node: bool = False,
            timeout: float | None = None, **kwargs) -> CallSession:
    """Run ``fn(*args, **kwargs)`` in a worker thread whose backward passes stop at breakpoints.

    Returns once the worker pauses (a breakpoint, or the first node with
    ``stop_at_first_node=True``) or ``fn`` ends; drive the session with ``step()``,
    ``continue_()``... from later cells or the widget. An exception raised by ``fn`` pauses the
    worker at the failing node first (if it came from a backward), then is re-raised by the
    command during which ``fn`` ended, and by :meth:`CallSession.result`.

    Parameters
    ----------
    breakpoints : iterable of dict or Breakpoint
        Each dict holds ``session.break_on`` arguments, e.g. ``{"function": MyFn}``.
    stop_at_first_node : bool
        Pause before the first node of the first backward pass.
    timeout : float, optional
        Return after this many seconds even if the worker is still running.

    Examples
    --------
    >>> import gradviz as torch
    >>> def train(w):
    ...     for _ in range(2):
    ...         (w * w).sum().backward()
    ...     return w.grad
    >>> w = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> session = torch.debug.runcall(train, w, breakpoints=[{"function": "MulBackward0"}])
    >>> session.status, session.node(session.current)["name"]
    ('paused', 'MulBackward0')
    >>> session.continue_()           # to the same node in the second backward pass
    >>> session.continue_()
    >>> session.status, session.result()
    ('finished', tensor([4., 8.]))
    """
    if not callable(fn):
        raise TypeError(f"runcall: fn must be a callable (the function whose backward passes to "
                        f"debug), got {type(fn).__name__}; pass the function and its arguments "
                        f"apart: runcall(train, model) rather than runcall(train(model))")
    session = CallSession(fn, args, kwargs, breakpoints, stop_at_first_node)
    session._start(timeout)
    return session
