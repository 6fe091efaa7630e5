"""What every session shares: listeners, breakpoints and the inspector's per-node view.

``DebugSession`` (a live backward pass), ``CallSession`` (user code in a worker thread) and
``ReplaySession`` (a recorded trace) all offer the interface the widget consumes:
``graph()``, ``node_states()``, ``current``, ``status``, ``step()``, ``continue_()`` and
``add_listener()``; plus ``step_event()``, ``break_on()``, ``node()`` and ``events``.
"""

from __future__ import annotations

import weakref

from ..instrument._rollup import DEFAULT_MAX_BOXES, rollup
from ._breakpoints import Breakpoint, BreakpointList

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

    def __init__(self):
        self._listeners = _Listeners()
        self.breakpoints = BreakpointList()
        self.stopped_at: Breakpoint | None = None  # the breakpoint of the last stop, if any

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
        info.update(
            state=view.states.get(node_id, "pending"),
            grads_in=facts.get("grads_in"),
            grads_out=facts.get("grads_out"),
            materialized=list(facts.get("materialized") or ()),
            exposed_buffers=facts.get("exposed"),
            hook_runs=[_hook_run(e) for e in facts.get("hooks", ())],
            casts=[{"slot": e["slot"], "from": e["from_dtype"], "to": e["to_dtype"]}
                   for e in facts.get("casts", ())],
            contributions=[{"slot": e["slot"], "producer": e["producer"], "how": e["how"]}
                           for e in facts.get("contributions", ())],
            released=facts.get("released"),
            accumulated=facts.get("accumulated"),
            error=facts.get("error"),
            source=None if created is None else created["source"],
            saved=None if created is None else created["saved"],
        )
        return info


def _hook_run(event: dict) -> dict:
    run = {"kind": event["kind"], "hook": event["hook"], "replaced": event["replaced"]}
    if event["kind"] == "prehook":
        run.update(slot=event["slot"], before=event["before"], after=event["after"])
    else:
        run["grad_inputs"] = event["grad_inputs"]
    return run
