"""What every session shares: listeners, breakpoints and the inspector's per-node view.

``DebugSession`` (a live backward pass), ``CallSession`` (user code in a worker thread) and
``ReplaySession`` (a recorded trace) all offer the interface the widget consumes:
``graph()``, ``node_states()``, ``current``, ``status``, ``step()``, ``continue_()`` and
``add_listener()``; plus ``step_event()``, ``break_on()``, ``node()`` and ``events``.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING

from ..instrument._rollup import DEFAULT_MAX_BOXES, rollup
from ._breakpoints import Breakpoint, BreakpointList
from ._overlays import BUILTIN_OVERLAYS, BuiltinOverlays, validate_overlay
from ._view import EventView

__all__ = ["SessionBase"]


class _ListenerHandle:
    def __init__(self, listeners, callback):
        self._listeners = weakref.ref(listeners)
        self._callback = callback

    def remove(self):
        listeners = self._listeners()
        if listeners is not None and self._callback in listeners:
            listeners.remove(self._callback)


class _Listeners(list):
    __slots__ = ("__weakref__",)


class SessionBase:
    """Listeners, breakpoints and node inspection from displayed events."""

    if TYPE_CHECKING:  # provided by each session kind (DebugSession, ReplaySession, CallSession)
        _view: EventView

        def graph(self) -> dict: ...

        def node_states(self) -> dict[int, str]: ...

    def __init__(self):
        self._listeners = _Listeners()
        self.breakpoints = BreakpointList()
        self.stopped_at: Breakpoint | None = None  # the breakpoint of the last stop, if any
        self._user_overlays: dict[str, dict] = {}
        self._builtin_overlays = BuiltinOverlays(self._saved_entries)
        self._overlay_version = 0  # counts changes of the user overlays

    # ---- listeners ---------------------------------------------------------------------
    def add_listener(self, callback):
        """Call ``callback(session)`` after every change; returns a handle with ``remove()``."""
        self._listeners.append(callback)
        return _ListenerHandle(self._listeners, callback)

    def _notify(self):
        for callback in list(self._listeners):
            callback(self)

    # ---- breakpoints -------------------------------------------------------------------
    def break_on(self, node=None, function=None, event: str | None = None,
                 nonfinite: bool = False, when=None) -> Breakpoint:
        """Add a breakpoint and return it (``.remove()`` deletes it).

        Parameters
        ----------
        node : node or int, optional
            Stop before this node runs (or, with ``event`` etc., narrow to its events).
        function : Function class, node class or str, optional
            Stop before any node of this kind runs: ``MyFn`` matches ``MyFnBackward`` nodes,
            ``"MulBackward0"`` matches multiplications.
        event : str, optional
            Stop right after an event of this kind (``"grad_cast"``, ``"saved_released"``...).
        nonfinite : bool
            Stop right after an event that carries a tensor with a NaN or an Inf.
        when : callable, optional
            ``when(event) -> bool``: stop right after an event for which it returns True.

        Examples
        --------
        >>> import gradviz as torch
        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> session = torch.debug.backward((x.exp() * 2).sum())
        >>> bp = session.break_on(function="ExpBackward0")
        >>> session.continue_()
        >>> session.node(session.current)["name"], bp.hits
        ('ExpBackward0', 1)
        """
        return self.breakpoints.add(Breakpoint(node=node, function=function, event=event,
                                               nonfinite=nonfinite, when=when))

    # ---- overlays ----------------------------------------------------------------------
    def overlay(self, name: str, values: dict | None, *, kind: str | None = None,
                scale: str = "linear") -> None:
        """Colour the graph by a value per node: add (or replace) the overlay ``name``;
        ``values=None`` removes it. The widget lists it in its overlay menu beside the
        built-ins (:meth:`overlays`).

        Parameters
        ----------
        name : str
            Shown in the menu and the legend (1 to 80 printable characters, not a built-in's).
        values : dict or None
            ``{node: value}``; a node is an id, a graph node dict or a node object; a value a
            number (``continuous``), a str (``categorical``) or a bool (``boolean``), all of
            one kind. Nodes left out are drawn uncoloured.
        kind : str, optional
            ``"continuous"``, ``"categorical"`` (numbers become category names) or
            ``"boolean"``; inferred from the values when None.
        scale : str
            ``"linear"`` or ``"log"`` (continuous overlays spanning orders of magnitude).

        Raises
        ------
        TypeError
            A key that is not a node, a value that is not a number, bool or str (the message
            names the node), values of mixed kinds.
        KeyError
            A node id this session's graph does not have.
        ValueError
            A bad name, kind or scale.

        Examples
        --------
        >>> import gradviz as torch
        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> session = torch.debug.backward((x * x).sum())
        >>> ids = [node["id"] for node in session.graph()["nodes"]]
        >>> session.overlay("depth", {node: depth for depth, node in enumerate(ids)})
        >>> shown = session.overlays()["depth"]
        >>> shown["kind"], sorted(shown["values"].values())
        ('continuous', [0.0, 1.0, 2.0])
        >>> session.overlay("depth", {ids[0]: [1, 2]})
        Traceback (most recent call last):
        ...
        TypeError: overlay value for node ... must be a number, a bool or a str, got list [1, 2]; ...
        """
        if scale not in ("linear", "log"):
            raise ValueError(f"overlay scale must be 'linear' or 'log', got {scale!r}")
        if values is None:
            if not isinstance(name, str) or name not in self._user_overlays:
                raise KeyError(f"no overlay named {name!r} to remove; have: "
                               f"{', '.join(self._user_overlays) or 'none'}")
            del self._user_overlays[name]
        else:
            kind, checked = validate_overlay(name, values, self._graph_nodes(), kind)
            self._user_overlays[name] = {"kind": kind, "scale": scale, "builtin": False,
                                         "title": name, "description": "", "values": checked,
                                         "edges": None}
        self._overlay_version += 1
        self._notify()

    def overlays(self) -> dict[str, dict]:
        """Every overlay: ``{name: {"kind", "scale", "builtin", "title", "description",
        "values": {node id: value}, "edges": {edge key: value} or None}}``, the built-ins first
        (``grad_norm``, ``max_abs_grad``, ``nonfinite``, ``dtype``, ``saved_bytes``: computed from
        the events shown so far, Note [Incremental overlays]), then the user's in the order added. ``edges``: the
        gradient norm, max |grad| and NaN/Inf of what flowed along each edge (the contributions
        its target received), keyed ``"source:target:input_nr:k"`` (``k``: which of the graph's
        edges joining the same three, in graph order); None for the other overlays.

        Examples
        --------
        >>> import gradviz as torch
        >>> w = torch.tensor([3.0, 4.0], requires_grad=True)
        >>> session = torch.debug.backward((w * 1.0).sum())
        >>> session.continue_()
        >>> leaf = [n["id"] for n in session.graph()["nodes"] if n["kind"] == "accumulate_grad"][0]
        >>> session.overlays()["grad_norm"]["values"][leaf]   # |[1, 1]|
        1.4142135623730951
        """
        with self._overlay_lock():
            values = self._builtin_overlays.update(self._view, self._graph_nodes())
        found = {}
        for name, (kind, scale, title, description) in BUILTIN_OVERLAYS.items():
            found[name] = {"kind": kind, "scale": scale, "builtin": True, "title": title,
                           "description": description, "values": values[name],
                           "edges": self._builtin_overlays.edges.get(name)}
        found.update(self._user_overlays)
        return found

    def _overlay_lock(self):
        """The lock guarding the event view, for sessions that update it from a thread."""
        return contextlib.nullcontext()

    def _saved_entries(self, node_id: int, facts: dict):
        """What a node saved for backward (entries with ``bytes`` or ``shape``/``dtype``),
        from its ``node_created`` event; None when unknown."""
        created = facts.get("created")
        return None if created is None else created.get("saved") or []

    # ---- inspection --------------------------------------------------------------------
    def rollup(self, max_boxes: int = DEFAULT_MAX_BOXES) -> dict:
        """:func:`gradviz.debug.rollup` of :meth:`graph` with the shown :meth:`node_states`:
        the nodes by module (and how many have run), repeated applications and instances,
        and the default fold depth."""
        return rollup(self.graph(), max_boxes, self.node_states())

    def _node_name(self, node_id) -> str | None:
        info = self._graph_nodes().get(node_id)
        return None if info is None else info["name"]

    def _graph_nodes(self) -> dict:
        raise NotImplementedError

    def _view_node(self, view, node_id: int) -> dict:
        """What the displayed events say about one node (the inspector's content)."""
        nodes = self._graph_nodes()
        if node_id not in nodes:
            raise KeyError(f"no node with id {node_id} in this session's graph")
        info = dict(nodes[node_id])
        facts = view.facts.get(node_id, {})
        created = facts.get("created")
        state = view.states.get(node_id, "pending")
        released = facts.get("released")
        saved = None
        if created is not None:
            saved = [dict(entry, held=released is None,
                          released_at=None if released is None else released.get("seq"))
                     for entry in created["saved"]]
        info.update(
            state=state,
            grads_in=facts.get("grads_in"),
            grads_out=facts.get("grads_out"),
            pending_buffer=_pending_buffer(facts, state, created),
            materialized=list(facts.get("materialized") or ()),
            exposed_buffers=facts.get("exposed"),
            hook_runs=[_hook_run(e) for e in facts.get("hooks", ())],
            casts=[{"slot": e["slot"], "from": e["from_dtype"], "to": e["to_dtype"]}
                   for e in facts.get("casts", ())],
            contributions=[{"slot": e["slot"], "producer": e["producer"], "how": e["how"],
                            "contribution": e.get("contribution"), "grad": e.get("grad"),
                            "sum": e.get("sum"), "seq": e["seq"]}
                           for e in facts.get("contributions", ())],
            released=released,
            accumulated=facts.get("accumulated"),
            error=facts.get("error"),
            source=None if created is None else created["source"],
            saved=saved,
        )
        if created is not None:
            info.update(needs_input_grad=created["needs_input_grad"],
                        dirty=created["dirty_outputs"],
                        non_differentiable=created["non_differentiable_outputs"],
                        materialize_grads=created["materialize_grads"],
                        grad_dtypes=created["grad_dtypes"])
        return info


def _pending_buffer(facts: dict, state: str, created: dict | None) -> list | None:
    """A node's input buffer as of the shown events: per input slot, the sum of the
    contributions shown so far (``buffer_added``'s ``sum``); None once the node has started
    or before anything arrived."""
    buffer = facts.get("buffer")
    if state not in ("pending", "ready") or not buffer:
        return None
    size = max(buffer) + 1
    if created is not None:
        size = max(size, len(created["outputs"]))
    return [buffer.get(slot) for slot in range(size)]


def _hook_run(event: dict) -> dict:
    run = {"kind": event["kind"], "hook": event["hook"], "replaced": event["replaced"]}
    run["changed"] = event.get("changed", event["replaced"])
    run["seq"] = event["seq"]
    if event["kind"] == "prehook":
        run.update(slot=event["slot"], before=event["before"], after=event["after"])
    else:
        # a post-hook sees the node's results: ``before`` as it got them, ``after`` as handed on
        run.update(before=event.get("before"), after=event["grad_inputs"],
                   grad_inputs=event["grad_inputs"])
    return run
