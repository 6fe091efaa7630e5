"""The notebook widget of a debug session (the Python half; the view is ``labextension/``).

Python owns all state. The widget copies the session's graph, node states, current node and
status into synced traits; the browser only draws them and sends commands (``step``,
``continue``) as custom messages, which are validated here before anything runs. The message
protocol and the traits are written down in ``docs/widget_protocol.md``.

Note [Widget threading]: a session may run backward in a worker thread and notify from there
(DESIGN.md, "Debugging"). The widget therefore never holds a lock of its own while calling
into the session: it takes a snapshot (``node_states()``, ``current``, ``status``) unlocked,
then publishes it under a short lock, dropping a snapshot that is older than one already
published. The last notification after the last change always wins.
"""

from __future__ import annotations

import logging
import threading
import traceback
import weakref
from typing import Any, Protocol

import anywidget
import traitlets

from ._bundle import load_bundle

__all__ = ["DebuggerWidget", "display_session"]

log = logging.getLogger("gradviz.widget")

PROTOCOL_VERSION = 1
NODE_STATES = frozenset({"pending", "ready", "running", "done", "released", "error"})
NODE_KINDS = frozenset({"builtin", "custom", "accumulate_grad"})
# "running": a session driving user code in a worker thread, between two pauses
SESSION_STATUSES = frozenset({"paused", "running", "finished", "aborted", "error"})
COMMANDS = {"step": "step", "continue": "continue_"}  # message name -> session method


class Session(Protocol):
    """What the widget needs from a debug session (``gradviz.debug.DebugSession``)."""

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


def _is_id(value: object) -> bool:
    # bool is an int subclass; an id of True is a bug, not node 1.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _as_id(value: object) -> int | None:
    """Accept Python and numpy integers as node ids."""
    if _is_id(value):
        return int(value)  # type: ignore[call-overload]
    index = getattr(value, "__index__", None)
    if index is not None and not isinstance(value, bool):
        number = index()
        if isinstance(number, int) and number >= 0:
            return number
    return None


def normalize_graph(raw: object) -> dict[str, Any]:
    """Check ``session.graph()`` and return a fresh JSON-ready copy of it.

    Raises
    ------
    SessionProtocolError
        Naming the first field that does not have the documented shape.
    """
    if not isinstance(raw, dict):
        raise SessionProtocolError(f"session.graph() must return a dict, got {type(raw).__name__}")
    nodes: list[dict[str, Any]] = []
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
        ids.add(node_id)
        nodes.append({"id": node_id, "name": name, "kind": kind, "label": label})
    edges: list[dict[str, int]] = []
    for index, edge in enumerate(raw.get("edges", ())):
        where = f"session.graph()['edges'][{index}]"
        if not isinstance(edge, dict):
            raise SessionProtocolError(f"{where} must be a dict, got {type(edge).__name__}")
        source, target, input_nr = (_as_id(edge.get(key)) for key in ("source", "target", "input_nr"))
        if source not in ids or target not in ids or input_nr is None:
            raise SessionProtocolError(f"{where} must join two node ids with an input_nr >= 0, got {edge!r}")
        edges.append({"source": source, "target": target, "input_nr": input_nr})
    roots = [_as_id(root) for root in raw.get("roots", ())]
    if any(root not in ids for root in roots):
        raise SessionProtocolError(f"session.graph()['roots'] must list node ids, got {raw.get('roots')!r}")
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


def _describe_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()


class DebuggerWidget(anywidget.AnyWidget):
    """A live view of a debug session: the autograd graph, node states, Step and Continue.

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
    """

    # The bundle is set per instance from load_bundle(), which checks that it is fresh.
    _esm = traitlets.Unicode().tag(sync=True)

    protocol_version = traitlets.Int(PROTOCOL_VERSION).tag(sync=True)
    graph = traitlets.Dict().tag(sync=True)
    states = traitlets.Dict().tag(sync=True)
    current = traitlets.Int(None, allow_none=True).tag(sync=True)
    status = traitlets.Unicode("paused").tag(sync=True)
    error = traitlets.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(self, session: Session, **kwargs: Any) -> None:
        super().__init__(_esm=load_bundle(), **kwargs)
        self._session = session
        self._graph_ids: frozenset[int] = frozenset()
        self._publish_lock = threading.Lock()
        self._snapshots_taken = 0
        self._snapshot_published = 0
        self._command_lock = threading.Lock()
        self._listener: Any = None
        self.on_msg(self._on_browser_message)
        # Listen first, then read: a change made in between (by a session thread) is not lost.
        self._listener = session.add_listener(self._on_session_change)
        self._refresh()

    @property
    def session(self) -> Session:
        """The session this widget shows."""
        return self._session

    def close(self) -> None:
        """Stop following the session and close the widget."""
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.remove()
            except Exception:
                log.exception("gradviz: could not remove the widget's session listener")
        super().close()

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
        try:
            states = normalize_states(self._session.node_states())
            current = self._session.current
            status = self._session.status
            if current is not None and _as_id(current) is None:
                raise SessionProtocolError(f"session.current must be a node id or None, got {current!r}")
            if status not in SESSION_STATUSES:
                raise SessionProtocolError(f"session.status must be one of {sorted(SESSION_STATUSES)}, got {status!r}")
            graph = None
            if not self._graph_ids or not {int(key) for key in states} <= self._graph_ids:
                graph = normalize_graph(self._session.graph())
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
                    self._graph_ids = frozenset(node["id"] for node in graph["nodes"])
                    self.graph = graph
                # Dict traits sync only when a new object is assigned (never mutate in place).
                if states != self.states:
                    self.states = states
                self.current = None if current is None else _as_id(current)
                self.status = status

    # ---- browser -> Python ------------------------------------------------------------------

    def _on_browser_message(self, _widget: object, content: object, buffers: object) -> None:
        # Registered with on_msg. Never override ipywidgets' _handle_custom_msg: doing so drops
        # every custom message (FRONTEND_NOTES.md, pitfall 2).
        try:
            name = self._validate_command(content, buffers)
            if name is not None:
                self._run_command(name)
        except Exception as exc:  # never let an exception escape into the comm machinery
            log.exception("gradviz: the widget failed to handle a message from the browser")
            self.error = _describe_exception(exc)

    @staticmethod
    def _validate_command(content: object, buffers: object) -> str | None:
        """The command name of a valid command message, else None (and a logged warning)."""
        if not isinstance(content, dict):
            log.warning("gradviz widget: ignoring a message that is not an object: %.200r", content)
            return None
        if content.get("type") != "command":
            log.warning("gradviz widget: ignoring a message of unknown type %.80r", content.get("type"))
            return None
        if set(content) != {"type", "name"}:
            log.warning("gradviz widget: ignoring a command with fields %s; expected type and name", sorted(map(str, content)))
            return None
        name = content["name"]
        if not isinstance(name, str) or name not in COMMANDS:
            log.warning("gradviz widget: ignoring unknown command %.80r; known: %s", name, ", ".join(COMMANDS))
            return None
        if buffers:
            log.warning("gradviz widget: ignoring the %s command: commands carry no binary buffers", name)
            return None
        return name

    def _ack(self, name: str, ok: bool, reason: str | None = None) -> None:
        self.send({"type": "ack", "name": name, "ok": ok, "reason": reason})

    def _run_command(self, name: str) -> None:
        if not self._command_lock.acquire(blocking=False):
            self._ack(name, False, "another command is still running")
            return
        try:
            status = self._session.status
            if status != "paused":
                self._ack(name, False, f"the session is {status}")
                return
            self.error = None
            try:
                getattr(self._session, COMMANDS[name])()
            except Exception as exc:
                # The usual case is a user's backward raising: show it where the user looks.
                log.warning("gradviz widget: %s raised %s: %s", name, type(exc).__name__, exc)
                self.error = _describe_exception(exc)
                self._refresh()
                self._ack(name, False, f"{type(exc).__name__}: {exc}")
                return
            self._refresh()  # in case the session does not notify its listeners
            self._ack(name, True)
        finally:
            self._command_lock.release()


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
