"""``DebugSession``: a backward pass paused between nodes, driven one node (or event) at a time.

The session owns a graph task (the engine's state machine) and a recorder attached to it as
its observer. Everything it reports comes from the engine's public inspection methods
(``peek``, ``ready_nodes``, ``pending_buffer``) and from the events; it never reaches into the
engine's private state.

Note [Buffers while the display is behind]
------------------------------------------
Summaries in ``node()`` come from the shown events, so they are right at every position.
Full values (``tensor()``) are live objects, and the engine may be ahead of the display by one
node: its results were already added to its successors' input buffers, some in place. So
before ``step_event()`` runs a node, the session copies the pending buffers of that node's
successors (the only buffers one node can change), and while it runs, the recorder keeps
each ``buffer_added`` sum as it was. ``tensor(node, "buffer")`` then answers from the latest
shown event for that slot, or from the copy taken before the node ran. The cost: one copy per
successor buffer per ``step_event()`` that runs a node; ``step()`` and ``continue_()`` never
leave the display behind and copy nothing.

Note [Stepping by event]
------------------------
The engine's unit of work is one node: ``GraphTask.step()`` runs a node from its pre-hooks to
the hand-over of its results. ``step_event()`` needs no finer engine granularity: when no
recorded event is left to show, it runs one node, which buffers that node's events, and then
shows them one per call. The *display* (``events``, ``node_states()``, ``current``,
``node()``) follows the shown events; the *engine* is then ahead of the display until the
node's last event is shown (a leaf's ``.grad`` is already updated while the display is still
at the node's ``node_started``, for instance). ``step()`` and ``continue_()`` first show the
rest of a node that ``step_event()`` started.
"""

from __future__ import annotations

import sys
import warnings

from gradviz_ext import engine as _engine
from gradviz_ext import task as _task
from gradviz_ext._hooks import hook_name

from ..autograd._functional import make_graph_task
from ..instrument import Recorder, Trace
from ..instrument._nodes import (
    frame_leaf_names,
    name_leaves,
    node_created_payload,
    parameter_names,
    saved_details,
    saved_tensors_of,
    source_text,
    walk_graph,
)
from ..instrument._recorder import same_items
from ..instrument._summary import summarize
from ..instrument._trace import add_to_graph
from ._base import SessionBase
from ._breakpoints import Breakpoint
from ._doctor import doctor
from ._release import weak_self
from ._view import NODE_STATES, EventView

__all__ = ["DebugSession", "backward", "NODE_STATES"]

_TENSOR_KINDS = ("grads_in", "grads_received", "grads_out", "buffer", "saved")


class _SessionRecorder(Recorder):
    """Records events and keeps live references to each node's gradients (for ``tensor()``).

    While ``keep_buffers`` is set (Note [Buffers while the display is behind]), it also keeps
    each ``buffer_added``'s sum as it was at that event, by event index."""

    # Note [Lazy summaries] (gradviz/instrument/_summary.py): the session flushes what the
    # user can reach whenever it returns control (DebugSession._notify), and everything before
    # it hands out a live tensor (DebugSession.tensor)
    lazy_summaries = True
    defer_events = True  # Note [Events when read]
    lazy_after_pass = True

    def __init__(self):
        super().__init__()
        self.live: dict[str, dict[int, list]] = {"grads_in": {}, "grads_received": {},
                                                 "grads_out": {}}
        self.buffer_values: dict[int, object] = {}  # event index -> the slot's sum then
        self.first_walk: tuple | None = None  # walk_graph's result for the pass
        self.first_traversal: tuple | None = None  # traverse_graph's, until described
        # Note [Events when read]: the session's leaf names, applied when the graph is
        # described: (names, the caller's variables' names)
        self._names_later: tuple | None = None

    def _graph_traversed(self, traversal):
        if self.first_traversal is None:
            self.first_traversal = traversal

    def _graph_learned(self, root, walked):
        # the session reads the graph from this walk instead of walking it again
        if self.first_walk is None:
            self.first_walk = walked

    def name_when_described(self, names: dict, frame_names: dict) -> bool:
        """Keep the session's leaf names until the pass's ``backward_started`` event is built
        (it describes the graph); False when it is built already."""
        if self.first_walk is not None or not self._deferred:
            return False
        self._names_later = (names, frame_names)
        return True

    def _build_backward_started(self, record):
        super()._build_backward_started(record)
        if self._names_later is not None:
            (names, frame_names), self._names_later = self._names_later, None
            assert self.first_walk is not None  # _graph_learned, just now
            nodes, _, _, live = self.first_walk
            _name_graph(self, nodes, live, names, frame_names=frame_names)

    @property
    def keep_buffers(self) -> bool:
        return "buffer_added" in self.__dict__

    @keep_buffers.setter
    def keep_buffers(self, keep: bool) -> None:
        # The engine calls buffer_added at every contribution (about 150 in a GPT step): the
        # session's own method is in the way only while it keeps buffers (one step_event()),
        # and the engine appends no record itself meanwhile (Note [Records the engine
        # appends] in gradviz_ext/_task.py)
        if keep:
            self.__dict__["buffer_added"] = self._buffer_added_kept
            self._engine_log = None
        else:
            self.__dict__.pop("buffer_added", None)
            self._engine_log = self._log

    def _buffer_added_kept(self, task, node, slot, producer, how, grad, buffered):
        super().buffer_added(task, node, slot, producer, how, grad, buffered)
        # a stored contribution is never changed in place later; a sum may be
        value = buffered if how == "stored" else _copy(buffered)
        self.buffer_values[self.event_count - 1] = value

    # The engine hands each call lists of its own (Note [Observer cost], _task.py): kept as
    # they are, not copied (one GC-tracked list less per node and kind). Kept when the event
    # is built (Note [Events when read]): tensor() builds every event first.
    def _build_node_started(self, record):
        self.live["grads_in"][record[2].node_id] = _own_list(record[4])
        super()._build_node_started(record)

    def _build_node_finished(self, record):
        node, grads_in, grads_out = record[2], record[4], record[5]
        arrived = self.live["grads_in"].get(node.node_id)
        if arrived is not None and same_items(arrived, grads_in):
            grads_in = arrived  # what its backward got is what arrived: one list for both
        self.live["grads_received"][node.node_id] = _own_list(grads_in)
        self.live["grads_out"][node.node_id] = _own_list(grads_out)
        super()._build_node_finished(record)


class DebugSession(SessionBase):
    """A backward pass that runs one node per :meth:`step` (or one event per
    :meth:`step_event`), stops at breakpoints in :meth:`continue_`, and can be inspected.

    Create one with :func:`gradviz.debug.backward`. In a notebook, displaying the session
    shows the widget.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> session = torch.debug.backward((x * 3).sum())
    >>> session.status
    'paused'
    >>> session.step().name()
    'SumBackward0'
    >>> session.step_event()["text"]
    'MulBackward0 started with 1 of 1 incoming gradient.'
    >>> session.continue_()
    >>> session.status, x.grad
    ('finished', tensor([3., 3.]))
    """

    def __init__(self, task: _task.GraphTask, recorder: _SessionRecorder):
        super().__init__()
        self._task = task
        self._recorder = recorder
        # (tensors, gradient, params), set by backward()
        self._doctor_arguments: tuple[object, object, object] | None = None
        # (nodes, edges, roots): described when first read (Note [Events when read])
        self._described, self._live = _session_graph(task, recorder)
        self._shown_view = EventView(self._live)
        self._applied = 0  # events applied to _shown_view: those before _cursor, when read
        # what each node saved, read before any is released (the inspector lists them after);
        # most saved nothing, and share one empty tuple
        self._saved = {node_id: saved_details(node) or () for node_id, node in self._live.items()}
        self._freed_before = {node_id for node_id, node in self._live.items()
                              if getattr(node, "_released", False)}
        self._cursor = 0
        self._chunk_start = 0  # first event of the engine step step_event() ran last
        # Note [Buffers while the display is behind]: {(node id, slot): value} before the step
        self._buffers_before: dict[tuple, object] = {}
        if isinstance(task.peek(), _engine.GraphRoot):
            # Several roots: the engine's GraphRoot only hands out the initial gradients. It
            # is not part of the user's graph (torch hides it too), so run it now and pause
            # before the first real node.
            task.step()
        self._show_all()

    def _notify(self) -> None:
        # control returns to the user, who may write a leaf's .grad or the gradient they
        # passed to backward (Note [Lazy summaries])
        self._recorder.flush_reachable()
        super()._notify()

    # ---- display ---------------------------------------------------------------------
    @property
    def _view(self) -> EventView:  # type: ignore[override]  # read-only: the others assign theirs
        """What the shown events say: the view, brought up to the cursor when read (Note [A
        view updated when read])."""
        view = self._shown_view
        if self._applied < self._cursor:
            for event in self._recorder.events[self._applied:self._cursor]:
                view.apply(event)
            self._applied = self._cursor
        return view

    # Note [A view updated when read]
    # -------------------------------
    # Showing an event moves the cursor; the EventView applies the shown events when something
    # reads it (node states, ``node()``, the overlays, the widget), in order, so it says the
    # same as a view updated at each event. ``continue_()`` over a GPT step shows about 650
    # events, and with no one reading until the pass ends, the view applies them in one go.

    def _show(self, count: int = 1) -> None:
        recorded = self._recorder.event_count  # Note [Events when read]: none built here
        self._cursor = min(recorded, self._cursor + count)
        if self._cursor == recorded and (self._buffers_before or self._recorder.buffer_values):
            self._buffers_before = {}  # caught up: the live buffers are what is shown
            self._recorder.buffer_values.clear()

    def _show_all(self) -> None:
        self._show(self._recorder.event_count - self._cursor)

    def _behind(self) -> bool:
        return self._cursor < self._recorder.event_count

    def _graph_nodes(self) -> dict:
        return self._nodes

    @property
    def _nodes(self) -> dict:
        return self._description()[0]

    @property
    def _edges(self) -> list:
        return self._description()[1]

    @property
    def _roots(self) -> list:
        return self._description()[2]

    def _description(self) -> tuple:
        described = self._described
        if described is None:
            # building the pass's backward_started event describes the graph
            recorder = self._recorder
            recorder.build_events()
            assert recorder.first_walk is not None
            nodes, edges, roots, _ = recorder.first_walk
            recorder.first_walk = recorder.first_traversal = None
            described = self._described = (nodes, edges, roots)
        return described

    # ---- state -----------------------------------------------------------------------
    @property
    def status(self) -> str:
        """``"paused"``, ``"finished"``, ``"aborted"`` or ``"error"`` (of what is shown)."""
        if self._behind():
            return "paused"
        name = self._task.state_name
        return "paused" if name == "running" else name

    @property
    def finished(self) -> bool:
        return self._task.done and not self._behind()

    @property
    def current(self) -> int | None:
        """The node being shown (after :meth:`step_event`) or the one the next step runs."""
        if self._view.running is not None:
            return self._view.running
        node = self._task.peek()
        return None if node is None else node.node_id

    @property
    def events(self) -> list[dict]:
        """The events shown so far, in the engine's order."""
        return self._recorder.events[:self._cursor]

    @property
    def error(self) -> BaseException | None:
        return self._task.error

    def node_states(self) -> dict[int, str]:
        """Each node's state: pending, ready, running, done, released or error."""
        states = self._view.node_states()
        states.update(self._state_overrides(self._view))
        return states

    def _state_overrides(self, view) -> dict[int, str]:
        # nodes made ready before the session (no node_ready event): ready once caught up
        if self._behind():
            return {}
        return {node.node_id: "ready" for node in self._task.ready_nodes()
                if node.node_id in self._nodes and view.states.get(node.node_id, "pending") == "pending"}

    def _name_nodes(self, names: dict, frame) -> None:
        """Leaf names (``params``, the caller's variables) and display numbers for the graph,
        shared with the recorder's narration (Note [Node numbers and labels]). While the graph
        is not described yet, the caller's variables are read now and the names applied when
        it is (Note [Events when read])."""
        if self._described is None:
            leaves = {id(node.variable): node.variable for node in self._live.values()
                      if isinstance(node, _engine.AccumulateGrad)}
            if self._recorder.name_when_described(names, frame_leaf_names(frame, leaves)):
                return
        _name_graph(self._recorder, self._nodes, self._live, names, frame=frame)

    def graph(self) -> dict:
        """The graph to draw: nodes, edges (from a node to each of its next_functions), roots."""
        return {
            "nodes": [dict(info) for info in self._nodes.values()],
            "edges": [dict(edge) for edge in self._edges],
            "roots": list(self._roots),
        }

    def forward_sources(self) -> dict[int, str]:
        """As ``SessionBase.forward_sources``, and from the live nodes (anomaly mode keeps each
        node's forward site on it, ``_forward_site``)."""
        sources = super().forward_sources()
        for node_id, node in self._live.items():
            if node_id not in sources:
                text = source_text(getattr(node, "_forward_site", None))
                if text is not None:
                    sources[node_id] = text
        return sources

    def _saved_entries(self, node_id: int, facts: dict):
        # read from the live node before anything was released (the forward record may lack it)
        saved = self._saved.get(node_id)
        return saved if saved is not None else super()._saved_entries(node_id, facts)

    def node(self, node_id: int) -> dict:
        """Everything known about one node, for the inspector.

        Keys: ``id``, ``name``, ``kind``, ``label``, ``state``; ``grads_in`` (summaries, as
        they arrived), ``grads_out``; ``pending_buffer`` (summaries of the gradients collected
        so far, for a node that has not run); ``materialized`` slots; ``exposed_buffers``;
        ``hooks`` (registered) and ``hook_runs`` (what each run changed); ``casts``;
        ``contributions``; ``saved`` (each saved tensor and whether it is still held);
        ``released``; ``accumulated``; ``error``; ``source`` (the forward line, when the graph
        was built under ``gradviz.record()`` or another forward observer).
        """
        info = self._view_node(self._view, node_id)
        node = self._live[node_id]
        if info["state"] in ("pending", "ready") and not self._behind():
            # in step with the engine: its buffer is what is shown (a root's first gradient
            # arrived with no buffer_added event)
            buffer = self._task.pending_buffer(node)
            if buffer is not None:
                info["pending_buffer"] = [summarize(g) for g in buffer]
        info["hooks"] = _registered_hooks(node)
        facts = node_created_payload(node, source=False)
        for key, field in (("needs_input_grad", "needs_input_grad"), ("dirty", "dirty_outputs"),
                           ("non_differentiable", "non_differentiable_outputs"),
                           ("materialize_grads", "materialize_grads"),
                           ("grad_dtypes", "grad_dtypes")):
            info.setdefault(key, facts[field])
        released = info["released"]
        if released is None and not node._released:
            saved = saved_details(node)  # versions as of now
            for entry in saved:
                entry.update(held=True, released_at=None)
        else:
            # released as shown (or before this session, or by the engine ahead of the display
            # at a step_event(): then shown as held until its saved_released event is shown)
            shown_held = released is None and node_id not in self._freed_before
            saved = [dict(entry, held=shown_held,
                          released_at=None if released is None else released["seq"])
                     for entry in self._saved.get(node_id, ())]
        info["saved"] = saved
        if info["source"] is None:
            info["source"] = node._forward_site
        return info

    def tensor(self, node_id: int, what: str = "grads_in", slot: int = 0):
        """The full value behind a summary of :meth:`node`, while the session holds it.

        ``what``: ``"grads_in"`` (as the node received them, before hooks),
        ``"grads_received"`` (what its backward got, after hooks and zero-materialization),
        ``"grads_out"``, ``"buffer"`` (a pending node's input buffer) or ``"saved"`` (a saved
        tensor, until it is released).
        """
        if what not in _TENSOR_KINDS:
            raise ValueError(f"tensor(what=...) must be one of {', '.join(_TENSOR_KINDS)}, "
                             f"got {what!r}")
        if node_id not in self._live:
            raise KeyError(f"no node with id {node_id} in this session's graph")
        # the caller may write what it gets: summaries still to compute are computed first
        self._recorder.flush_summaries()  # Note [Lazy summaries]
        node = self._live[node_id]
        shown = self._view.facts.get(node_id, {})
        if what == "buffer":
            if self._behind():
                return self._buffer_as_shown(node, node_id, slot)
            values = self._task.pending_buffer(node)
            if values is None:
                raise LookupError(f"{node.name()} has no pending input buffer (it has either "
                                  "run already or received nothing yet)")
        elif what == "saved":
            saved = saved_tensors_of(node)
            if node._released or not saved:
                when = ("" if shown.get("released") is not None or not node._released else
                        " (at an event not shown yet: step on to see it)")
                raise LookupError(f"{node.name()} holds no saved tensors (none were saved, or "
                                  f"they were released after it ran{when}; use "
                                  "retain_graph=True to keep them)")
            if not 0 <= slot < len(saved):
                raise IndexError(f"{node.name()} saved {len(saved)} tensors; slot {slot} is out "
                                 "of range")
            return saved[slot][1].unpack(node)
        else:
            values = self._recorder.live[what].get(node_id)
            # as shown: before its node_started (or node_finished) is shown, the node has not
            # run, even if the engine already ran it
            key = "grads_in" if what == "grads_in" else "grads_out"
            if values is None or shown.get(key) is None:
                raise LookupError(f"{node.name()} has not run yet, so it has no {what}")
        if not 0 <= slot < len(values):
            raise IndexError(f"{node.name()} has {len(values)} {what}; slot {slot} is out of range")
        return values[slot]

    def _buffer_as_shown(self, node, node_id: int, slot: int):
        """``tensor(node, "buffer", slot)`` while the display is behind the engine
        (Note [Buffers while the display is behind])."""
        facts = self._view.facts.get(node_id, {})
        state = self._view.states.get(node_id, "pending")
        if state not in ("pending", "ready"):
            raise LookupError(f"{node.name()} has no pending input buffer (it has run, as shown)")
        latest = None
        for event in facts.get("contributions", ()):
            if event["slot"] == slot:
                latest = event["seq"]
        kept = self._recorder.buffer_values  # by event index, which is the event's seq
        if latest is not None and latest in kept:
            return kept[latest]
        if (node_id, slot) in self._buffers_before:
            value = self._buffers_before[(node_id, slot)]
            if value is None:
                raise LookupError(f"{node.name()} input {slot} has received nothing yet (as shown)")
            return value
        values = self._task.pending_buffer(node)  # not changed by the step that runs now
        if values is None or not 0 <= slot < len(values) or values[slot] is None:
            raise LookupError(f"{node.name()} input {slot} has received nothing yet (as shown)")
        return values[slot]

    def trace(self) -> Trace:
        """Everything recorded so far as a :class:`gradviz.instrument.Trace` (to save/replay)."""
        graph: dict[str, list] = {"nodes": [], "edges": [], "roots": []}
        add_to_graph(graph, self._task.graph_root, set(), set())
        for node in graph["nodes"]:  # the leaves' names, as graph() shows them
            name = self._nodes.get(node["id"], {}).get("leaf_name")
            if name is not None:
                node["leaf_name"] = name
        return Trace(graph, [dict(e) for e in self._recorder.events])

    # ---- driving ---------------------------------------------------------------------
    @weak_self  # Note [No cycle through a session's error]
    def step(self):
        """Run the next node and return it: the graph node (``.name()``, ``.node_id``,
        ``session.node(node.node_id)`` for what it did). None only when the pass is over.

        After :meth:`step_event`, first finishes showing the node in progress (the rest of its
        events, even when its ``node_finished`` is already shown) and returns that node.
        An exception from the node's backward or hooks propagates (the node is in state
        ``"error"`` and the session stays inspectable).
        """
        self.stopped_at = None
        self._recorder.outside_code_ran()  # Note [Summary epochs]: the user had control
        try:
            if self._behind():
                node_id = self._node_in_progress()
                self._show_all()
                return self._live.get(node_id)
            return self._task.step()
        finally:
            self._show_all()
            self._notify()

    def _node_in_progress(self) -> int | None:
        """The node whose events are partly shown: the one engine step (one node) that
        :meth:`step_event` ran last recorded them; its ``node_started`` (or, when it failed
        before starting, its first event) names it."""
        chunk = self._recorder.events[self._chunk_start:]
        for event in chunk:
            if event["kind"] == "node_started":
                return event["node"]
        return chunk[0]["node"] if chunk else None

    @weak_self
    def step_event(self) -> dict | None:
        """Show the next event and return it (None when nothing is left); Note [Stepping by
        event]. A failing node does not raise here: its ``error`` event is shown in turn and
        :attr:`error` holds the exception."""
        self.stopped_at = None
        self._recorder.outside_code_ran()  # Note [Summary epochs]: the user had control
        try:
            if not self._behind():
                if self._task.done:
                    return None
                self._chunk_start = self._recorder.event_count
                self._keep_buffers_of(self._task.peek())
                try:
                    self._task.step()
                except Exception:
                    pass  # recorded as an error event; shown in order
                finally:
                    self._recorder.keep_buffers = False
                if not self._behind():
                    return None
            event = self._recorder.events[self._cursor]
            self._show(1)
            return event
        finally:
            self._notify()

    def _keep_buffers_of(self, node) -> None:
        """Before ``step_event()`` runs ``node``: copy its successors' pending buffers and have
        the recorder keep each sum it reports (Note [Buffers while the display is behind])."""
        self._buffers_before = {}
        if node is None:
            return
        for next_node, slot in node.next_functions:
            if next_node is None:
                continue
            values = self._task.pending_buffer(next_node)
            value = None if values is None or slot >= len(values) else values[slot]
            self._buffers_before[(next_node.node_id, slot)] = _copy(value)
        self._recorder.keep_buffers = True

    @weak_self
    def continue_(self) -> None:
        """Run until a breakpoint stops the pass, or to its end.

        Stops *before* a node that matches a node or Function breakpoint (not the one the
        session is paused at) and right *after* an event that matches an event, NaN/Inf or
        predicate breakpoint. ``stopped_at`` names the breakpoint. Exceptions propagate as in
        :meth:`step`.
        """
        self.stopped_at = None
        self._recorder.outside_code_ran()  # Note [Summary epochs]: the user had control
        predicates = self.breakpoints.runs_user_code
        first = True
        try:
            while True:
                while self._behind():
                    # the rest of a node step_event() began: the next node is not the one
                    # the session was paused at, so its breakpoints count (as in a replay)
                    first = False
                    if not self.breakpoints:  # nothing can stop between these events
                        self._show_all()
                        break
                    event = self._recorder.events[self._cursor]
                    self._show(1)
                    if predicates:
                        self._recorder.flush_reachable()  # Note [Lazy summaries]
                    hit = self.breakpoints.event_hit(event, self._node_name(event["node"]))
                    if predicates:
                        self._recorder.outside_code_ran()  # a when= predicate ran
                    if hit is not None:
                        self.stopped_at = hit
                        return
                if self._task.done:
                    return
                if not self.breakpoints:
                    # nothing can stop it: the engine runs the rest in one call, as backward()
                    # does (grad mode and numpy's error state set once, not per node); here,
                    # where ``self`` is weak (Note [No cycle through a session's error])
                    try:
                        self._task.run()
                    finally:
                        self._show_all()
                    return
                node = self._task.peek()
                if node is not None and not first and self.breakpoints:
                    hit = self.breakpoints.node_hit(node.node_id, _engine.display_name(node))
                    if hit is not None:
                        self.stopped_at = hit
                        return
                first = False
                try:
                    self._task.step()
                except BaseException:
                    self._show_all()
                    raise
        finally:
            self._notify()

    @weak_self
    def run_to(self, node) -> None:
        """Continue until ``node`` (a node or its id) is the next to run, or the pass ends.

        Other breakpoints still stop on the way.
        """
        node_id = node.node_id if hasattr(node, "node_id") else node
        if node_id not in self._live:
            raise KeyError(f"no node with id {node_id} in this session's graph")
        if self.current == node_id and not self._behind():
            return
        temporary = self.breakpoints.add(Breakpoint(node=node_id))
        try:
            self.continue_()
        finally:
            temporary.remove()
        if self.stopped_at is temporary:
            self.stopped_at = None
            self._notify()  # listeners saw the temporary breakpoint as the reason of the stop

    def abort(self) -> None:
        """Stop here; nodes that have not run never will. The engine stays usable."""
        self._task.abort()
        self._task.observer = None  # Note [No cycle through a session's error]
        self._show_all()
        self._notify()

    def doctor(self, **options):
        """Run the gradient doctor (:func:`gradviz.debug.doctor`) on this session's graph.

        The doctor runs its own backward pass, retaining the graph, so this session does not
        move. Custom Functions are re-run from the inputs their nodes keep (or ``capture()``),
        so this works after the pass too. The ``params`` given to ``gradviz.debug.backward``
        go to the doctor, which then also checks the model (unused parameters, ...).
        """
        if self._doctor_arguments is None:
            raise RuntimeError("this session was not made by gradviz.debug.backward(), so the "
                               "doctor does not know its roots; call gradviz.debug.doctor(loss)")
        tensors, gradient, params = self._doctor_arguments
        if params is not None:  # debug.backward takes a dict too; the doctor takes pairs
            options.setdefault("params", list(params.items()) if isinstance(params, dict)
                               else params)
        return doctor(tensors, gradient, **options)

    def __repr__(self) -> str:
        states = self.node_states()
        done = sum(1 for s in states.values() if s in ("done", "released"))
        return f"<DebugSession {self.status}: {done}/{len(states)} nodes run>"


def _registered_hooks(node) -> dict:
    def names(hooks):
        return [hook_name(h) for h in hooks] if hooks else []

    tensor_hooks = node._tensor_pre_hooks or {}
    return {"pre": names(node._pre_hooks), "post": names(node._post_hooks),
            "tensor_pre": {slot: names(hooks) for slot, hooks in tensor_hooks.items() if hooks}}


def backward(tensors, gradient=None, retain_graph=None, create_graph=False, inputs=None, *,
             params=None):
    """Start a backward pass paused before its first node.

    Takes the arguments of :meth:`Tensor.backward` and returns a :class:`DebugSession`.
    Running it to the end has exactly the effect of ``tensors.backward(...)``: the same
    ``.grad`` values, and saved tensors freed unless ``retain_graph``.

    Leaves (``AccumulateGrad`` nodes) are named in ``graph()`` and ``node()`` (``leaf_name``)
    by ``params``: an ``nn.Module`` (its ``named_parameters()``, e.g. ``"fc.weight"``) or a
    dict of name -> Tensor such as ``dict(model.named_parameters())``. A leaf ``params`` does
    not name gets the name of the caller's variable bound to it, when exactly one is (``w``
    in ``backward((w * x).sum())``); otherwise it has no name.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([2.0], requires_grad=True)
    >>> session = torch.debug.backward((x * x).sum())
    >>> session.run_to(session.graph()["nodes"][-1]["id"])
    >>> session.node(session.current)["name"]
    'AccumulateGrad'
    """
    names = parameter_names(params)  # a bad params fails before the pass is set up
    recorder = _SessionRecorder()
    task = make_graph_task(tensors, gradient, retain_graph, create_graph, inputs=inputs,
                           observer=recorder)
    session = DebugSession(task, recorder)
    session._doctor_arguments = (tensors, gradient, params)
    _warn_if_freed(session)
    caller = sys._getframe(1)
    try:
        session._name_nodes(names, caller)
    finally:
        del caller  # a frame kept alive would keep all its variables alive
    return session


def _own_list(values) -> list:
    return values if type(values) is list else list(values)


def _session_graph(task, recorder: _SessionRecorder) -> tuple:
    """``((nodes, edges, roots), live)`` of the session's graph, from :func:`walk_graph`: the
    recorder's at ``backward_started`` when it is the same (one root; the recorder's includes
    a GraphRoot of several roots, which the session leaves out), else a walk of its own. While
    the recorder defers the pass's ``backward_started`` event, only ``live`` is known: the
    description is None until read (Note [Events when read])."""
    if isinstance(task.graph_root, _engine.GraphRoot):
        nodes, edges, roots, live = walk_graph(task.graph_root)
        return (nodes, edges, roots), live
    first = recorder.first_walk
    if first is not None:
        recorder.first_walk = recorder.first_traversal = None  # the session keeps it
        nodes, edges, roots, live = first
        return (nodes, edges, roots), live
    assert recorder.first_traversal is not None  # backward_started, at the task's making
    return None, recorder.first_traversal[0]


def _name_graph(recorder, nodes: dict, live: dict, names: dict, frame=None,
                frame_names=None) -> None:
    """Name the leaves of a session's graph (:func:`name_leaves`), for its ``graph()`` and for
    the recorder's narration, and give each node its display number."""
    recorder.build_events()  # the numbers come with the pass's backward_started event
    name_leaves(nodes, live, names, frame, frame_names=frame_names)
    numbers = recorder.numbers
    for node_id, info in nodes.items():
        number = numbers.get(node_id)
        if number is not None:
            info["number"] = number
        leaf = info.get("leaf_name")
        if leaf is not None:
            recorder.name_leaf(node_id, leaf)


def _copy(tensor):
    """A detached copy of ``tensor`` (None stays None)."""
    if tensor is None:
        return None
    return tensor.detach().clone()


def _warn_if_freed(session: DebugSession) -> None:
    """Warn when the graph's saved tensors were already freed by an earlier backward pass.

    The session would open paused as if all were well and fail only when it reaches such a
    node (PyTorch raises at ``loss.backward()`` right away). Typically a notebook cell calling
    ``debug.backward(loss)`` was re-run without re-running the forward cell.
    """
    # A node class that keeps the base release_variables saves nothing (AccumulateGrad): its
    # flag says only that a pass went through it, and a second pass through it is fine.
    freed = [node for node in session._live.values()
             if getattr(node, "_released", False)
             and type(node).release_variables is not _engine.Node.release_variables]
    if not freed:
        return
    names = ", ".join(f"{node.name()} #{node.node_id}" for node in freed[:3])
    more = f" and {len(freed) - 3} more" if len(freed) > 3 else ""
    warnings.warn(
        f"this graph was already backpropagated and its saved tensors were freed ({len(freed)} "
        f"node{'s' if len(freed) != 1 else ''}: {names}{more}), so stepping into a node that "
        "needs them raises RuntimeError (Trying to backward through the graph a second time). "
        "Re-run the cell that computes the loss (the forward pass) to "
        "build a fresh graph, or pass retain_graph=True to the earlier backward() or "
        "debug.backward() call.", UserWarning, stacklevel=3)
