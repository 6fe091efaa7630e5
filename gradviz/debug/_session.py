"""``DebugSession``: a backward pass paused between nodes, driven one node at a time.

The session owns a graph task (the engine's state machine) and a recorder attached to it
as its observer. Everything it reports comes from the engine's public inspection methods
and from the events; it never reaches into private engine state.
"""

from __future__ import annotations

import weakref

from gradviz_ext import engine as _engine

from ..autograd._functional import make_graph_task
from ..instrument import Recorder

__all__ = ["DebugSession", "backward", "NODE_STATES"]

NODE_STATES = ("pending", "ready", "running", "done", "released", "error")


class _SessionRecorder(Recorder):
    """Records events and keeps each node's state up to date."""

    def __init__(self):
        super().__init__()
        self.states: dict[int, str] = {}
        self.grads_in: dict[int, list] = {}
        self.grads_out: dict[int, list] = {}

    def emit(self, event):
        super().emit(event)
        kind, node = event["kind"], event["node"]
        if node is None:
            return
        if kind == "node_ready":
            self.states[node] = "ready"
        elif kind == "node_started":
            self.states[node] = "running"
            self.grads_in[node] = event["grads_in"]
        elif kind == "saved_released":
            self.states[node] = "released"
        elif kind == "node_finished":
            if self.states.get(node) != "released":
                self.states[node] = "done"
            self.grads_out[node] = event["grads_out"]
        elif kind == "error":
            self.states[node] = "error"


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


class DebugSession:
    """A backward pass that runs one node per :meth:`step`.

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
    >>> session.continue_()
    >>> session.status, x.grad
    ('finished', tensor([3., 3.]))
    """

    def __init__(self, task: _engine.GraphTask, recorder: _SessionRecorder):
        self._task = task
        self._recorder = recorder
        self._listeners = _Listeners()
        self._doctor_arguments = None  # (tensors, gradient), set by backward()
        self._nodes, self._edges, self._roots = _walk(task.graph_root)
        if isinstance(task.peek(), _engine.GraphRoot):
            # Several roots: the engine's GraphRoot only hands out the initial gradients. It
            # is not part of the user's graph (torch hides it too), so run it now and pause
            # before the first real node.
            task.step()
        for node_id in self._nodes:
            recorder.states.setdefault(node_id, "pending")
        for node in task.ready_nodes():
            recorder.states[node.node_id] = "ready"

    # ---- state -----------------------------------------------------------------------
    @property
    def status(self) -> str:
        """``"paused"``, ``"finished"``, ``"aborted"`` or ``"error"``."""
        name = self._task.state_name
        return "paused" if name == "running" else name

    @property
    def finished(self) -> bool:
        return self._task.done

    @property
    def current(self) -> int | None:
        """The id of the node the next :meth:`step` runs (None when nothing is left)."""
        node = self._task.peek()
        return None if node is None else node.node_id

    @property
    def events(self) -> list[dict]:
        """Every event recorded so far, in the engine's order."""
        return list(self._recorder.events)

    @property
    def error(self) -> BaseException | None:
        return self._task.error

    def node_states(self) -> dict[int, str]:
        """Each node's state: pending, ready, running, done, released or error."""
        return {node_id: self._recorder.states.get(node_id, "pending") for node_id in self._nodes}

    def node(self, node_id: int) -> dict:
        """What is known about one node: name, kind, state, gradients in and out (summaries)."""
        if node_id not in self._nodes:
            raise KeyError(f"no node with id {node_id} in this session's graph")
        info = dict(self._nodes[node_id])
        info["state"] = self._recorder.states.get(node_id, "pending")
        info["grads_in"] = self._recorder.grads_in.get(node_id)
        info["grads_out"] = self._recorder.grads_out.get(node_id)
        return info

    def graph(self) -> dict:
        """The graph to draw: nodes, edges (from a node to each of its next_functions), roots."""
        return {
            "nodes": [dict(info) for info in self._nodes.values()],
            "edges": [dict(edge) for edge in self._edges],
            "roots": list(self._roots),
        }

    # ---- driving ---------------------------------------------------------------------
    def step(self):
        """Run the next node and return it (None when the pass is over)."""
        try:
            return self._task.step()
        finally:
            self._notify()

    def continue_(self) -> None:
        """Run to the end of the backward pass."""
        try:
            self._task.run()
        finally:
            self._notify()

    def abort(self) -> None:
        """Stop here; nodes that have not run never will."""
        self._task.abort()
        self._notify()

    def doctor(self, **options):
        """Run the gradient doctor (:func:`gradviz.debug.doctor`) on this session's graph.

        The doctor runs its own backward pass, retaining the graph, so this session does not
        move. Call it before a pass without ``retain_graph`` has freed the saved tensors.
        """
        from ._doctor import doctor

        if self._doctor_arguments is None:
            raise RuntimeError("this session was not made by gradviz.debug.backward(), so the "
                               "doctor does not know its roots; call gradviz.debug.doctor(loss)")
        tensors, gradient = self._doctor_arguments
        return doctor(tensors, gradient, **options)

    def add_listener(self, callback):
        """Call ``callback(session)`` after every change; returns a handle with ``remove()``."""
        self._listeners.append(callback)
        return _ListenerHandle(self._listeners, callback)

    def _notify(self):
        for callback in list(self._listeners):
            callback(self)

    def __repr__(self) -> str:
        states = self.node_states()
        done = sum(1 for s in states.values() if s in ("done", "released"))
        return f"<DebugSession {self.status}: {done}/{len(states)} nodes run>"


def _describe_node(node) -> dict:
    """The node as the widget draws it; ``label`` carries what the name does not say."""
    kind = node._kind()
    label = ""
    if kind == "accumulate_grad":
        variable = node.variable
        label = f"{list(variable._data.shape)} {variable.dtype.name}"
    elif node.num_inputs:
        meta = node.input_metadata(0)
        if meta is not None:
            label = f"{list(meta.shape)}"
    return {"id": node.node_id, "name": node.name(), "kind": kind, "label": label}


def _walk(root):
    """Nodes and edges reachable from ``root`` (iteratively; GraphRoot itself is left out)."""
    nodes: dict[int, dict] = {}
    edges: list[dict] = []
    if isinstance(root, _engine.GraphRoot):
        starts = [n for n, _ in root.next_functions if n is not None]
    else:
        starts = [root]
    roots = []
    stack = []
    for node in starts:
        if node.node_id not in nodes:
            nodes[node.node_id] = _describe_node(node)
            roots.append(node.node_id)
            stack.append(node)
    while stack:
        node = stack.pop()
        for next_node, input_nr in node.next_functions:
            if next_node is None:
                continue
            edges.append({"source": node.node_id, "target": next_node.node_id, "input_nr": input_nr})
            if next_node.node_id not in nodes:
                nodes[next_node.node_id] = _describe_node(next_node)
                stack.append(next_node)
    return nodes, edges, roots


def backward(tensors, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Start a backward pass paused before its first node.

    Takes the arguments of :meth:`Tensor.backward` and returns a :class:`DebugSession`.
    Running it to the end has exactly the effect of ``tensors.backward(...)``: the same
    ``.grad`` values, and saved tensors freed unless ``retain_graph``.
    """
    recorder = _SessionRecorder()
    task = make_graph_task(tensors, gradient, retain_graph, create_graph, inputs=inputs,
                           observer=recorder)
    session = DebugSession(task, recorder)
    session._doctor_arguments = (tensors, gradient)
    return session
