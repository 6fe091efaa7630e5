"""The notebook widget of a debug session (the Python half; the view is ``labextension/``).

Python owns all state. The widget copies the session's graph, node states, current node,
status, latest event and the selected node's details into synced traits; the browser only draws
them and sends commands (``step``, ``continue``, ``select``...) as custom messages, which are
validated here before anything runs. The message protocol and the traits are written down in
``docs/widget_protocol.md``.

Note [Check gradients]: the ``check_gradients`` command runs the gradient doctor
(``session.doctor()``) on the session's live graph, synchronously in the message handler: the
doctor runs its own backward pass over the graph the session is stepping through, so nothing
else may touch that graph meanwhile (the kernel handles no other message, and no cell runs,
until it returns). The browser is not left guessing: the ``doctor`` trait says ``checking``
at once, the doctor's progress callback sends ``progress`` messages (at most ten a second), and
the report (or the error) replaces the trait at the end. Sessions without a live graph (a
replayed trace) do not offer the command.

Note [Widget threading]: a session may run backward in a worker thread and notify from there
(docs/design.md, "Debugging"). The widget therefore never holds a lock of its own while calling
into the session: it takes a snapshot (``node_states()``, ``current``, ``status``) unlocked,
then publishes it under a short lock, dropping a snapshot that is older than one already
published. The last notification after the last change always wins.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol, TypeGuard, cast

import anywidget
import numpy
import traitlets

from ._bundle import load_bundle
from ._docs_pages import docs_embed, write_session_page
from ._output import OutputCapture, describe_exception
from ._panels import MODULE_SELECT, OVERLAY_REQUEST, OverlayPublisher, PanelsMixin, module_inspection
from ._protocol import (
    DoctorState,
    EventLine,
    Graph,
    GraphEdge,
    GraphNode,
    History,
    HistoryEvent,
    Inspection,
    ModuleFields,
    ModuleInspection,
    Overlay,
    Synced,
)

__all__ = ["DebuggerWidget", "display_session"]

log = logging.getLogger("gradviz.widget")

PROTOCOL_VERSION = 5
NODE_STATES = frozenset({"pending", "ready", "running", "done", "released", "error"})
NODE_KINDS = frozenset({"builtin", "custom", "accumulate_grad"})
# "running": a session driving user code in a worker thread, between two pauses
SESSION_STATUSES = frozenset({"paused", "running", "finished", "aborted", "error"})
# Message name -> session method, in toolbar order. A session offers the commands whose method
# it has (the `commands` trait); `select` is the widget's own and always available.
COMMANDS = {
    "step": "step",
    "step_event": "step_event",
    "continue": "continue_",
    "run_to": "run_to",
    "step_back": "step_back",
    "abort": "abort",
    "check_gradients": "doctor",
}
CHECK_GRADIENTS: Final = "check_gradients"
# The statuses in which a command may run. A replay that reached its end can still go back;
# the doctor checks the graph, whatever the pass has done (Note [Check gradients]).
COMMAND_STATUSES = {name: frozenset({"paused"}) for name in COMMANDS}
COMMAND_STATUSES["step_back"] = frozenset({"paused", "finished", "aborted", "error"})
COMMAND_STATUSES[CHECK_GRADIENTS] = frozenset({"paused", "finished", "aborted", "error"})
SELECT = "select"
# Show the first `position` events of a replay (a click in the event history); sessions with seek().
SEEK = "seek"
# At most this many progress messages a second while the doctor runs (the last always goes).
PROGRESS_INTERVAL = 0.1
# Commands whose message carries a "node" field (an id; for select, an id or null).
NODE_COMMANDS = frozenset({"run_to", SELECT})
# The fields of each command message (run_to and select add "node", seek "position").
COMMAND_FIELDS = {name: frozenset({"type", "name"}) for name in COMMANDS}
COMMAND_FIELDS.update({name: frozenset({"type", "name", "node"}) for name in NODE_COMMANDS})
COMMAND_FIELDS[SEEK] = frozenset({"type", "name", "position"})
# The event history keeps at most this many events (the latest, or those around a replay's
# position); the view says how many it leaves out.
HISTORY_LIMIT = 1000
# Bounds for the inspector's JSON copy of session.node(): it is for display, not for analysis.
MAX_INSPECTION_ITEMS = 200
MAX_INSPECTION_DEPTH = 8
MAX_INSPECTION_TEXT = 2000


class Session(Protocol):
    """What the widget needs from a debug session (``gradviz.debug.DebugSession``).

    Optional, used when present: ``step_event()``, ``run_to(node_id)``, ``step_back()``,
    ``abort()``, ``doctor(progress=...)`` returning a ``gradviz.debug.DoctorReport`` (offered as
    commands, see ``COMMANDS``), ``node(node_id)`` (the inspector) and ``events`` (the
    narration).
    """

    @property
    def current(self) -> int | None: ...

    @property
    def status(self) -> str: ...

    def graph(self) -> dict[str, Any]: ...

    def node_states(self) -> dict[int, str]: ...

    def step(self) -> Any: ...

    def continue_(self) -> Any: ...

    def add_listener(self, callback: Any) -> Any: ...


class SessionProtocolError(ValueError):
    """The session reported something that does not fit the widget protocol."""


def _is_id(value: object) -> TypeGuard[int]:
    # bool is an int subclass; an id of True is a bug, not node 1.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _as_id(value: object) -> int | None:
    """Accept Python and numpy integers as node ids."""
    if _is_id(value):
        return int(value)
    index = getattr(value, "__index__", None)
    if index is not None and not isinstance(value, bool):
        number = index()
        if isinstance(number, int) and number >= 0:
            return number
    return None


def _module_fields(node: dict, where: str) -> ModuleFields:
    """The node's module path fields (``module``, ``module_types``, ``module_call``), checked.

    The front end folds the drawing by them (docs/widget_protocol.md, "Module paths").
    """
    fields: ModuleFields = {}
    module = node.get("module")
    if module is None:
        return fields
    if not isinstance(module, (list, tuple)) or not all(isinstance(name, str) for name in module):
        raise SessionProtocolError(f"{where}['module'] must be a list of str (outermost first), got {module!r}")
    fields["module"] = list(module)
    types = node.get("module_types")
    if types is not None:
        if (not isinstance(types, (list, tuple)) or not all(isinstance(name, str) for name in types)
                or len(types) != len(module)):
            raise SessionProtocolError(
                f"{where}['module_types'] must be a list of {len(module)} str (one per module name), got {types!r}")
        fields["module_types"] = list(types)
    call = node.get("module_call")
    if call is not None:
        if _as_id(call) is None:
            raise SessionProtocolError(f"{where}['module_call'] must be a non-negative int, got {call!r}")
        fields["module_call"] = call
    return fields


def normalize_graph(raw: object) -> Graph:
    """Check ``session.graph()`` and return a fresh JSON-ready copy of it.

    Raises
    ------
    SessionProtocolError
        Naming the first field that does not have the documented shape.
    """
    if not isinstance(raw, dict):
        raise SessionProtocolError(f"session.graph() must return a dict, got {type(raw).__name__}")
    nodes: list[GraphNode] = []
    ids: set[int] = set()
    for index, node in enumerate(raw.get("nodes", ())):
        where = f"session.graph()['nodes'][{index}]"
        if not isinstance(node, dict):
            raise SessionProtocolError(f"{where} must be a dict, got {type(node).__name__}")
        node_id = _as_id(node.get("id"))
        if node_id is None:
            raise SessionProtocolError(f"{where}['id'] must be a non-negative int, got {node.get('id')!r}")
        if node_id in ids:
            raise SessionProtocolError(f"{where}['id'] = {node_id} is used by two nodes")
        kind = node.get("kind")
        if kind not in NODE_KINDS:
            raise SessionProtocolError(f"{where}['kind'] must be one of {sorted(NODE_KINDS)}, got {kind!r}")
        name, label = node.get("name"), node.get("label", "")
        if not isinstance(name, str) or not isinstance(label, str):
            raise SessionProtocolError(f"{where}: 'name' and 'label' must be str, got {name!r} and {label!r}")
        entry: GraphNode = {"id": node_id, "name": name, "kind": kind, "label": label}
        leaf_name = node.get("leaf_name")
        if leaf_name is not None:
            if not isinstance(leaf_name, str) or kind != "accumulate_grad":
                raise SessionProtocolError(
                    f"{where}['leaf_name'] must be a str on an accumulate_grad node, got {leaf_name!r} "
                    f"on a {kind} node")
            entry["leaf_name"] = leaf_name
        number = node.get("number")
        if number is not None:  # the node's small display number (Note [Node numbers and labels])
            if _as_id(number) is None:
                raise SessionProtocolError(f"{where}['number'] must be a non-negative int, got {number!r}")
            entry["number"] = number
        entry.update(_module_fields(node, where))
        ids.add(node_id)
        nodes.append(entry)
    edges: list[GraphEdge] = []
    for index, edge in enumerate(raw.get("edges", ())):
        where = f"session.graph()['edges'][{index}]"
        if not isinstance(edge, dict):
            raise SessionProtocolError(f"{where} must be a dict, got {type(edge).__name__}")
        source, target, input_nr = (_as_id(edge.get(key)) for key in ("source", "target", "input_nr"))
        if source not in ids or target not in ids or input_nr is None:
            raise SessionProtocolError(f"{where} must join two node ids with an input_nr >= 0, got {edge!r}")
        edges.append({"source": source, "target": target, "input_nr": input_nr})
    roots: list[int] = []
    for root in raw.get("roots", ()):
        root_id = _as_id(root)
        if root_id is None or root_id not in ids:
            raise SessionProtocolError(f"session.graph()['roots'] must list node ids, got {raw.get('roots')!r}")
        roots.append(root_id)
    return {"nodes": nodes, "edges": edges, "roots": roots}


def normalize_states(raw: object) -> dict[str, str]:
    """Check ``session.node_states()`` and return it keyed by decimal strings (JSON keys)."""
    if not isinstance(raw, dict):
        raise SessionProtocolError(f"session.node_states() must return a dict, got {type(raw).__name__}")
    states: dict[str, str] = {}
    for key, state in raw.items():
        node_id = _as_id(key)
        if node_id is None:
            raise SessionProtocolError(f"session.node_states() has a key that is not a node id: {key!r}")
        if state not in NODE_STATES:
            raise SessionProtocolError(
                f"session.node_states()[{node_id}] must be one of {sorted(NODE_STATES)}, got {state!r}"
            )
        states[str(node_id)] = state
    return states


def json_safe(value: object, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value`` for display: numpy scalars become Python numbers, NaN and
    infinities the strings ``"nan"``, ``"inf"``, ``"-inf"`` (as in event summaries), tuples
    lists, keys strings; other objects their (shortened) ``repr``. Lists longer than
    ``MAX_INSPECTION_ITEMS`` are cut, with a last entry saying how many were left out.

    Examples
    --------
    >>> import numpy
    >>> json_safe({1: (numpy.float32(0.5), float("nan")), "f": len})
    {'1': [0.5, 'nan'], 'f': '<built-in function len>'}
    """
    if isinstance(value, str):
        return value if len(value) <= MAX_INSPECTION_TEXT else value[:MAX_INSPECTION_TEXT] + "…"
    if value is None:
        return None
    if depth >= MAX_INSPECTION_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {str(key): json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [json_safe(item, depth + 1) for item in value[:MAX_INSPECTION_ITEMS]]
        if len(value) > MAX_INSPECTION_ITEMS:
            items.append(f"… {len(value) - MAX_INSPECTION_ITEMS} more")
        return items
    number = _as_number(value)
    if number is not None:
        return number
    return json_safe(repr(value), depth + 1)


def _as_number(value: object) -> bool | int | float | str | None:
    """Python and numpy scalars as JSON numbers (NaN and infinities as text); else None."""
    if isinstance(value, (bool, numpy.bool_)):
        return bool(value)
    if isinstance(value, (int, numpy.integer)):
        return int(value)
    if isinstance(value, (float, numpy.floating)):
        return _finite_or_text(float(value))
    return None


def _finite_or_text(number: float) -> float | str:
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return number


def compact_event(event: object) -> EventLine | None:
    """The narration line's view of an event: ``{seq, kind, node, text}``, JSON-ready."""
    if not isinstance(event, dict):
        return None
    seq, node = _as_id(event.get("seq")), event.get("node")
    kind, text = event.get("kind"), event.get("text")
    return {
        "seq": seq,
        "kind": kind if isinstance(kind, str) else str(kind),
        "node": _as_id(node),
        "text": text if isinstance(text, str) else "",
    }


def delivered_edges(events: Iterable[object] | None, ids: frozenset[int]) -> list[list[int]] | None:
    """The gradients delivered so far, one ``[producer, receiver]`` per shown ``buffer_added``
    event between two nodes of the graph (a pair repeats once per delivery, e.g. the two edges
    of ``x * x``). The view draws an edge as delivered only once its ``buffer_added`` is shown,
    so Step event shows a gradient leave a node and then arrive. None: the session has no
    event stream, and the view falls back to "the source node has run"."""
    if events is None:
        return None
    pairs = []
    for event in events:
        if not isinstance(event, dict) or event.get("kind") != "buffer_added":
            continue
        producer, receiver = _as_id(event.get("producer")), _as_id(event.get("node"))
        if producer in ids and receiver in ids:
            pairs.append([producer, receiver])
    return pairs


def event_history(session: object, shown: Iterable[object] | None) -> tuple[History | None, int]:
    """The ``history`` trait and the ``history_position`` (how many events are shown).

    A replay (a session with ``seek`` and a ``trace``) lists all of its trace's events, so a
    click can jump forward as well as back; a live session lists the events shown so far. At
    most ``HISTORY_LIMIT`` events, around the position; ``start`` is the index of the first.
    None for a session without events.
    """
    if shown is None:
        return None, 0
    shown = list(shown)
    trace_events = getattr(getattr(session, "trace", None), "events", None)
    seekable = callable(getattr(session, "seek", None)) and isinstance(trace_events, list)
    events = trace_events if seekable and isinstance(trace_events, list) else shown
    position = len(shown)
    if seekable:
        start = max(0, min(position - HISTORY_LIMIT // 2, len(events) - HISTORY_LIMIT))
    else:
        start = max(0, position - HISTORY_LIMIT)
    lines: list[HistoryEvent] = []
    for event in events[start:start + HISTORY_LIMIT]:
        line = compact_event(event) or {"seq": None, "kind": "?", "node": None, "text": ""}
        # a JSON array on the wire; a list here, so the trait compares equal to what it synced
        lines.append(cast(HistoryEvent, [line["kind"], line["node"], line["text"]]))
    return {"start": start, "total": len(events), "events": lines, "seekable": seekable}, position


def describe_stop(breakpoint: object, nodes: Iterable[GraphNode] = ()) -> str | None:
    """Why a paused session stopped, in words for the status line ("breakpoint on
    TanhBackward0"); None when it did not stop at a breakpoint (a step, or not yet run).
    ``nodes``: the graph's nodes, to name a node breakpoint by the node's display number."""
    if breakpoint is None:
        return None
    what = []
    node = getattr(breakpoint, "node", None)
    if node is not None:
        shown = next((item for item in nodes if item.get("id") == node), None)
        if shown is None:
            what.append(f"node #{node}")
        else:
            what.append(f"{shown.get('name', 'node')} #{shown.get('number', node)}")
    function = getattr(breakpoint, "function", None)
    if function is not None:
        what.append(str(function))
    event = getattr(breakpoint, "event", None)
    if event is not None:
        what.append(f"{event} event")
    if getattr(breakpoint, "nonfinite", False):
        what.append("NaN/Inf")
    when = getattr(breakpoint, "when", None)
    if when is not None:
        what.append(f"when {getattr(when, '__name__', 'condition')}")
    return "breakpoint" + (f" on {', '.join(what)}" if what else "")


# The error box's text: the user's frames first, then the full traceback (_output.py).
_describe_exception = describe_exception


class DebuggerWidget(PanelsMixin, anywidget.AnyWidget):
    """A live view of a debug session: the autograd graph, node states, an inspector for the
    selected node, a narration of the latest event, and the session's commands.

    Parameters
    ----------
    session : DebugSession
        The paused backward pass to show (see ``gradviz.debug.backward``). The widget follows
        it: ``session.step()`` from a notebook cell updates the view too.

    Raises
    ------
    gradviz.widget._bundle.BundleError
        If the front-end bundle is missing or older than its sources (dev checkouts).

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> session = torch.debug.backward((x * x).sum())
    >>> widget = DebuggerWidget(session)
    >>> [node["name"] for node in widget.graph["nodes"]]
    ['SumBackward0', 'MulBackward0', 'AccumulateGrad']
    >>> widget.status, widget.states[str(widget.current)]
    ('paused', 'ready')
    >>> _ = session.step()          # stepping the session updates the widget
    >>> sorted(widget.states.values())
    ['done', 'pending', 'ready']
    >>> widget.last_event["text"]
    'MulBackward0 is ready: every gradient it waits for has arrived.'
    >>> widget.commands             # what this session offers (a replay adds step_back)
    ['step', 'step_event', 'continue', 'run_to', 'abort', 'check_gradients']
    >>> widget.select(widget.current)
    >>> widget.inspection["name"], widget.inspection["pending_buffer"][0]["shape"]
    ('MulBackward0', [2])
    """

    # The bundle is set per instance from load_bundle(), which checks that it is fresh.
    _esm = traitlets.Unicode().tag(sync=True)

    protocol_version = traitlets.Int(PROTOCOL_VERSION).tag(sync=True)
    # {} until the session's graph is known
    graph = cast("Synced[Graph]", traitlets.Dict().tag(sync=True))
    states = cast("Synced[dict[str, str]]", traitlets.Dict().tag(sync=True))
    current = traitlets.Int(None, allow_none=True).tag(sync=True)
    status = traitlets.Unicode("paused").tag(sync=True)
    error = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    commands = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected = traitlets.Int(None, allow_none=True).tag(sync=True)
    inspection = cast("Synced[Inspection | ModuleInspection | None]",
                      traitlets.Dict(None, allow_none=True).tag(sync=True))
    last_event = cast("Synced[EventLine | None]", traitlets.Dict(None, allow_none=True).tag(sync=True))
    doctor = cast("Synced[DoctorState | None]", traitlets.Dict(default_value=None, allow_none=True).tag(sync=True))
    stopped_at = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    delivered = cast("Synced[list[list[int]] | None]", traitlets.List(None, allow_none=True).tag(sync=True))
    output = traitlets.Unicode("").tag(sync=True)
    history = cast("Synced[History | None]", traitlets.Dict(default_value=None, allow_none=True).tag(sync=True))
    history_position = traitlets.Int(0).tag(sync=True)
    # protocol 5 (gradviz/widget/_panels.py): overlays and the module inspector
    overlays = cast("Synced[dict[str, Overlay] | None]",
                    traitlets.Dict(default_value=None, allow_none=True).tag(sync=True))
    selected_module = traitlets.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(self, session: Session, **kwargs: Any) -> None:
        super().__init__(_esm=load_bundle(), **kwargs)
        self._session: Session = session
        self._graph_ids: frozenset[int] = frozenset()
        self._publish_lock = threading.Lock()
        self._snapshots_taken = 0
        self._snapshot_published = 0
        self._command_lock = threading.Lock()
        self._listener: Any = None
        # The node of a run_to in progress: its temporary breakpoint is not "a stop" to show.
        self._running_to: int | None = None
        self._output = OutputCapture(self._publish_output)
        self._overlay_publisher = OverlayPublisher()
        self._modules: dict | None = None  # rollup of the graph by dotted path, once needed
        self.commands = [name for name, method in COMMANDS.items() if callable(getattr(session, method, None))]
        self.on_msg(self._on_browser_message)
        # Listen first, then read: a change made in between (by a session thread) is not lost.
        self._listener = session.add_listener(self._on_session_change)
        self._refresh()

    @property
    def session(self) -> Session:
        """The session this widget shows."""
        return self._session

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # In a docs build only, also an offline replay page (Note [Widgets in the built docs])
        bundle = super()._repr_mimebundle_(**kwargs)  # data, or (data, metadata)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        embed = docs_embed(self._write_docs_page) if isinstance(data, dict) else None
        if embed is None or not isinstance(data, dict):
            return bundle
        data = {**data, "text/html": embed}
        return (data, *bundle[1:]) if isinstance(bundle, tuple) else data

    def _write_docs_page(self, path: Any, final: bool) -> bool:
        """Write the offline replay page of this widget's session (Note [Widgets in the built
        docs]); False when the session has no trace."""
        return write_session_page(self._session, path, final)

    def close(self) -> None:
        """Stop following the session and close the widget."""
        # getattr: ipywidgets' __del__ calls close() on a widget whose __init__ may have failed.
        listener, self._listener = getattr(self, "_listener", None), None
        if listener is not None:
            try:
                listener.remove()
            except Exception:
                log.exception("gradviz: could not remove the widget's session listener")
        super().close()

    def select(self, node_id: int | None) -> None:
        """Show a node in the inspector (None: show none), as a click on it in the view does.

        Raises
        ------
        KeyError
            If the session's graph has no node with this id.
        """
        if node_id is not None:
            number = _as_id(node_id)
            if number is None or number not in self._graph_ids:
                raise KeyError(f"no node with id {node_id!r} in this session's graph")
            node_id = number
        self.selected = node_id
        if node_id is not None:
            self.selected_module = None
        self._refresh()

    # ---- session -> traits ------------------------------------------------------------------

    def _on_session_change(self, _session: object = None) -> None:
        # Called by the session after every change, possibly from its worker thread; an
        # exception here would surface in the session's code, not in the notebook.
        try:
            self._refresh()
        except Exception as exc:  # _refresh reports its own errors; this is the last resort
            log.exception("gradviz: the widget failed to follow the session")
            self.error = _describe_exception(exc)

    def _refresh(self) -> None:
        """Copy the session's state into the traits (Note [Widget threading])."""
        with self._publish_lock:
            self._snapshots_taken += 1
            ticket = self._snapshots_taken
        selected = self.selected
        try:
            states = normalize_states(self._session.node_states())
            current = self._session.current
            status = self._session.status
            if current is not None and _as_id(current) is None:
                raise SessionProtocolError(f"session.current must be a node id or None, got {current!r}")
            if status not in SESSION_STATUSES:
                raise SessionProtocolError(f"session.status must be one of {sorted(SESSION_STATUSES)}, got {status!r}")
            graph = None
            graph_ids = self._graph_ids
            if not graph_ids or not {int(key) for key in states} <= graph_ids:
                graph = normalize_graph(self._session.graph())
                graph_ids = frozenset(node["id"] for node in graph["nodes"])
            # Sessions without an event stream (test doubles) have no narration. `events`
            # copies the list on each read: O(events) per refresh, small next to drawing.
            events = getattr(self._session, "events", None)
            last_event = compact_event(events[-1]) if events else None
            delivered = delivered_edges(events, graph_ids)
            stop = getattr(self._session, "stopped_at", None)
            if self._running_to is not None and getattr(stop, "node", None) == self._running_to:
                # Run to's own breakpoint, seen mid-command (before run_to clears it): not a stop.
                stop = None
            stopped_at = (describe_stop(stop, (graph or self.graph).get("nodes", ()))
                          if status == "paused" else None)
            history, history_position = event_history(self._session, events)
            if selected is not None and selected not in graph_ids:
                selected = None  # a new graph (a later backward pass) does not have it
            inspection = None
            if selected is not None:
                nodes = (graph or self.graph).get("nodes", ())
                inspection = self._inspect(selected, states.get(str(selected), "pending"), nodes)
            overlays = self._overlay_publisher.trait(self._session)
            selected_module = self.selected_module
            if graph is not None:
                self._modules = None  # a new graph: its modules are read again when needed
            if selected_module is not None:
                modules = self._module_index()
                if selected_module in modules:
                    inspection = json_safe(module_inspection(self._session, modules, selected_module, states))
                else:
                    selected_module = None
        except Exception as exc:
            log.exception("gradviz: cannot read the debug session")
            self.error = _describe_exception(exc)
            return
        with self._publish_lock:
            if ticket < self._snapshot_published:
                return  # a newer snapshot is already on screen
            self._snapshot_published = ticket
            with self.hold_sync():
                if graph is not None:
                    if self._graph_ids and self.doctor is not None and self.doctor.get("state") != "checking":
                        self.doctor = None  # its findings name nodes of the previous graph
                    self._graph_ids = frozenset(node["id"] for node in graph["nodes"])
                    self.graph = graph
                # Dict traits sync only when a new object is assigned (never mutate in place).
                if states != self.states:
                    self.states = states
                self.current = None if current is None else _as_id(current)
                self.status = status
                if last_event != self.last_event:
                    self.last_event = last_event
                if delivered != self.delivered:
                    self.delivered = delivered
                self.stopped_at = stopped_at
                self.selected = selected
                if inspection != self.inspection:
                    self.inspection = inspection
                if history != self.history:
                    self.history = history
                self.history_position = history_position
                if overlays != self.overlays:
                    self.overlays = overlays
                self.selected_module = selected_module

    def _inspect(self, node_id: int, state: str, graph_nodes: Iterable[GraphNode]) -> Inspection:
        """The inspector's content: ``session.node(id)`` made JSON-safe, or, for a session
        without ``node()``, what the graph and the states say."""
        reader = getattr(self._session, "node", None)
        if callable(reader):
            info = json_safe(reader(node_id))
            if not isinstance(info, dict):
                raise SessionProtocolError(f"session.node({node_id}) must return a dict, got {type(info).__name__}")
        else:
            info = {}
        graph_node = next((node for node in graph_nodes if node["id"] == node_id), None)
        for key, value in (graph_node or {}).items():
            info.setdefault(key, value)
        info["id"] = node_id
        info.setdefault("state", state)
        return cast(Inspection, info)  # json_safe(session.node(id)): an open dict of JSON values

    # ---- browser -> Python ------------------------------------------------------------------

    def _on_browser_message(self, _widget: object, content: object, buffers: object) -> None:
        # Registered with on_msg. Never override ipywidgets' _handle_custom_msg: doing so drops
        # every custom message (docs/frontend_notes.md, pitfall 2).
        try:
            if isinstance(content, dict) and content.get("type") in (MODULE_SELECT, OVERLAY_REQUEST):
                self._on_panel_message(content)
                return
            command = self._validate_command(content, buffers)
            if isinstance(command, str):
                log.warning("gradviz widget: ignoring a message: %s", command)
                self.send({"type": "error", "reason": command})
                return
            name, argument = command
            if name == SELECT:
                self._run_select(argument)
            elif name == SEEK:
                assert argument is not None  # _validate_command checked the position
                self._run_seek(argument)
            else:
                self._run_command(name, argument)
        except Exception as exc:  # never let an exception escape into the comm machinery
            log.exception("gradviz: the widget failed to handle a message from the browser")
            self.error = _describe_exception(exc)

    @staticmethod
    def _validate_command(content: object, buffers: object) -> tuple[str, int | None] | str:
        """The name and argument (node id, or seek's position) of a well-formed command
        message; else why it is malformed (the text of the ``error`` reply). Whether the node
        exists is checked when the command runs."""
        known = ", ".join([*COMMANDS, SELECT, SEEK])
        if not isinstance(content, dict):
            return f"a message must be an object, got {type(content).__name__} {content!r:.80}"
        if content.get("type") != "command":
            return f"unknown message type {content.get('type')!r:.80}; expected 'command'"
        name = content.get("name")
        if not isinstance(name, str) or name not in COMMAND_FIELDS and name not in (SELECT, SEEK):
            return f"unknown command {name!r:.80}; known: {known}"
        expected = COMMAND_FIELDS.get(name, frozenset())
        if set(content) != expected:
            missing, extra = sorted(expected - set(content)), sorted(map(str, set(content) - expected))
            what = "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                               f"unexpected {', '.join(extra)}" if extra else "") if part)
            return f"a {name} command has the fields {', '.join(sorted(expected))} ({what})"
        if name == SEEK:
            argument = content.get("position")
            if not _is_id(argument):
                return f"a seek command's position must be an integer >= 0, got {argument!r:.80}"
        else:
            argument = content.get("node")
            # JSON numbers arrive as int; a float, a bool or a string is not a node id.
            if name in NODE_COMMANDS and not (_is_id(argument) or (argument is None and name == SELECT)):
                allowed = "a node id or null" if name == SELECT else "a node id (an integer >= 0)"
                return f"a {name} command's node must be {allowed}, got {argument!r:.80}"
        if buffers:
            return f"the {name} command carries binary buffers; commands carry none"
        return name, argument

    def _ack(self, name: str, ok: bool, reason: str | None = None) -> None:
        self.send({"type": "ack", "name": name, "ok": ok, "reason": reason})

    def _run_select(self, node: int | None) -> None:
        # Selecting only reads the session, so it is allowed in every status.
        if node is not None and node not in self._graph_ids:
            self._ack(SELECT, False, f"no node with id {node} in the graph")
            return
        self.select(node)
        self._ack(SELECT, True)

    def _run_seek(self, position: int) -> None:
        """Show the first ``position`` events of a replay (a click in the event history)."""
        seek = getattr(self._session, "seek", None)
        if not callable(seek):
            self._ack(SEEK, False,
                      f"this session ({type(self._session).__name__}) cannot jump to an event: only a replay can")
            return
        if not self._command_lock.acquire(blocking=False):
            self._ack(SEEK, False, "another command is still running")
            return
        try:
            self.error = None
            try:
                seek(position)
            except Exception as exc:
                self.error = _describe_exception(exc)
                self._refresh()
                self._ack(SEEK, False, f"{type(exc).__name__}: {exc}")
                return
            self._refresh()
            self._ack(SEEK, True)
        finally:
            self._command_lock.release()

    def _publish_output(self, text: str) -> None:
        self.output = text

    def _run_command(self, name: str, node: int | None) -> None:
        if name not in self.commands:
            self._ack(name, False, self._not_offered(name))
            return
        if node is not None and node not in self._graph_ids:
            self._ack(name, False, f"no node with id {node} in the graph")
            return
        if not self._command_lock.acquire(blocking=False):
            self._ack(name, False, "another command is still running")
            return
        try:
            status = self._session.status
            if status not in COMMAND_STATUSES[name]:
                self._ack(name, False, f"the session is {status}")
                return
            self.error = None
            method: Callable[..., object] = (self._check_gradients if name == CHECK_GRADIENTS
                                             else getattr(self._session, COMMANDS[name]))
            self._running_to = node if name == "run_to" else None
            try:
                with self._output.command(name):
                    method() if node is None else method(node)
            except Exception as exc:
                self._running_to = None
                # The usual case is a user's backward raising: show it where the user looks.
                log.warning("gradviz widget: %s raised %s: %s", name, type(exc).__name__, exc)
                self.error = _describe_exception(exc)
                self._refresh()
                self._ack(name, False, f"{type(exc).__name__}: {exc}")
                return
            self._running_to = None
            self._refresh()  # in case the session does not notify its listeners
            self._ack(name, True)
        finally:
            self._running_to = None
            self._command_lock.release()

    def _not_offered(self, name: str) -> str:
        session = type(self._session).__name__
        if name == CHECK_GRADIENTS:
            return (f"this session ({session}) cannot check gradients: the gradient doctor re-runs "
                    "the custom Functions of a live graph (a replayed trace has none); check the "
                    "live graph with gradviz.debug.backward(loss) or gradviz.debug.doctor(loss)")
        return f"this session ({session}) has no {COMMANDS[name]}()"

    def _check_gradients(self) -> None:
        """Run the doctor on the session's graph and publish its report (Note [Check gradients])."""
        run = (0 if self.doctor is None else self.doctor["run"]) + 1
        self.doctor = {"run": run, "state": "checking", "report": None, "error": None}
        try:
            # doctor() is optional in Session: this command is offered only when it exists
            report = self._session.doctor(progress=self._progress_sender())  # type: ignore[attr-defined]
            data = json_safe(report.to_dict())
        except BaseException as exc:  # an interrupted kernel must not leave "checking" forever
            line = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.doctor = {"run": run, "state": "error", "report": None, "error": line}
            raise  # _run_command shows the traceback in `error` and acks with the reason
        self.doctor = {"run": run, "state": "done", "report": data, "error": None}

    def _progress_sender(self) -> Any:
        last = [-math.inf]

        def progress(done: int, total: int, label: object) -> None:
            now = time.monotonic()
            if done < total and now - last[0] < PROGRESS_INTERVAL:
                return
            last[0] = now
            try:
                self.send({"type": "progress", "name": CHECK_GRADIENTS, "done": int(done), "total": int(total),
                           "label": json_safe(str(label))})
            except Exception:  # a lost progress message must not stop the check
                log.exception("gradviz: could not send the gradient doctor's progress")

        return progress


# One widget per live session, so that showing a session twice gives two views of one model.
_widgets_by_session: weakref.WeakValueDictionary[int, DebuggerWidget] = weakref.WeakValueDictionary()


def display_session(session: Session) -> DebuggerWidget:
    """Show a debug session in the notebook and return its widget.

    Showing the same session again shows the same widget (a second view of it). The widget is
    displayed by this call; end a cell with ``widget = display_session(session)`` rather than
    ``display_session(session)`` to avoid a second view from the cell's result.

    Parameters
    ----------
    session : DebugSession
        A paused backward pass, e.g. from ``gradviz.debug.backward(loss)``.

    Returns
    -------
    DebuggerWidget

    Examples
    --------
    In a notebook the widget appears below the cell; elsewhere ``display`` prints its repr.

    >>> import gradviz as torch
    >>> w = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> session = torch.debug.backward((w * w).sum())
    >>> widget = display_session(session)
    <gradviz.widget._widget.DebuggerWidget object at 0x...>
    >>> display_session(session) is widget
    <gradviz.widget._widget.DebuggerWidget object at 0x...>
    True
    """
    from IPython.display import display

    widget = _widgets_by_session.get(id(session))
    if widget is None or widget.session is not session or widget.comm is None:
        widget = DebuggerWidget(session)
        _widgets_by_session[id(session)] = widget
    display(widget)
    return widget
