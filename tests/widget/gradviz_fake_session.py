"""A stand-in for ``gradviz.debug.DebugSession`` with the interface the widget renders.

It walks a fixed graph in the engine's order (dependency counts, then the ready node with the
highest id first, like PyTorch's CPU ready queue ordered by sequence_nr), so that widget and
browser tests do not depend on the engine. Used by tests/widget and tests/browser.

A node that has run is ``released`` when it saved tensors for backward (the engine frees them),
else ``done``; a graph node may say ``"saves": False`` (the widget ignores the key), and an
AccumulateGrad node never saves. ``FakeDebugSession`` adds what a ``DebugSession`` also offers
(breakpoints, ``run_to``, ``abort``). ``tests/widget/test_fake_session_contract.py`` runs the
same commands against these and a real ``gradviz.debug`` session and requires the same traits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class _Handle:
    def __init__(self, listeners: list[Callable[[Any], None]], callback: Callable[[Any], None]) -> None:
        self._listeners = listeners
        self._callback = callback

    def remove(self) -> None:
        if self._callback in self._listeners:
            self._listeners.remove(self._callback)


class FakeSession:
    """A paused backward pass over ``graph``; ``fail_at`` makes that node's backward raise."""

    def __init__(self, graph: dict[str, Any], fail_at: int | None = None) -> None:
        self._graph = graph
        self._fail_at = fail_at
        self._listeners: list[Callable[[Any], None]] = []
        self._kind = {node["id"]: node["kind"] for node in graph["nodes"]}
        self._saves = {node["id"]: node["kind"] != "accumulate_grad" and node.get("saves", True)
                       for node in graph["nodes"]}
        self._successors: dict[int, list[int]] = {node["id"]: [] for node in graph["nodes"]}
        self._dependencies = {node["id"]: 0 for node in graph["nodes"]}
        for edge in graph["edges"]:
            self._successors[edge["source"]].append(edge["target"])
            self._dependencies[edge["target"]] += 1
        self._states = {node["id"]: "pending" for node in graph["nodes"]}
        for root in graph["roots"]:
            self._states[root] = "ready"
        self.status = "paused"
        self.current: int | None = self._next_ready()
        self.steps_run = 0

    @classmethod
    def tiny(cls, **kwargs: Any) -> FakeSession:
        """loss = (x * w + b).sum(), with w and b leaves that require grad: 5 nodes."""
        return cls(
            {
                "nodes": [
                    {"id": 4, "name": "SumBackward0", "kind": "builtin", "label": "loss"},
                    {"id": 3, "name": "AddBackward0", "kind": "builtin", "label": ""},
                    {"id": 2, "name": "MulBackward0", "kind": "builtin", "label": "x * w"},
                    {"id": 1, "name": "AccumulateGrad", "kind": "accumulate_grad", "label": "w"},
                    {"id": 0, "name": "AccumulateGrad", "kind": "accumulate_grad", "label": "b"},
                ],
                "edges": [
                    {"source": 4, "target": 3, "input_nr": 0},
                    {"source": 3, "target": 2, "input_nr": 0},
                    {"source": 3, "target": 0, "input_nr": 1},
                    {"source": 2, "target": 1, "input_nr": 1},
                ],
                "roots": [4],
            },
            **kwargs,
        )

    @classmethod
    def mlp(cls, layers: int = 3, **kwargs: Any) -> FakeSession:
        """A small MLP-like chain with a custom Function and a weight shared by every layer."""
        nodes: list[dict[str, Any]] = []
        edges: list[dict[str, int]] = []
        next_id = 0

        def node(name: str, kind: str, label: str = "") -> int:
            nonlocal next_id
            nodes.append({"id": next_id, "name": name, "kind": kind, "label": label})
            next_id += 1
            return next_id - 1

        shared = node("AccumulateGrad", "accumulate_grad", "scale")
        x = node("AccumulateGrad", "accumulate_grad", "x")
        previous = x
        for layer in range(layers):
            weight = node("AccumulateGrad", "accumulate_grad", f"layer{layer}.weight")
            matmul = node("MmBackward0", "builtin", f"layer{layer}")
            edges += [{"source": matmul, "target": previous, "input_nr": 0}, {"source": matmul, "target": weight, "input_nr": 1}]
            scaled = node("MulBackward0", "builtin", "* scale")
            edges += [{"source": scaled, "target": matmul, "input_nr": 0}, {"source": scaled, "target": shared, "input_nr": 1}]
            act = node("MyReLUBackward", "custom", "MyReLU.apply")
            edges.append({"source": act, "target": scaled, "input_nr": 0})
            previous = act
        loss = node("MeanBackward0", "builtin", "loss")
        edges.append({"source": loss, "target": previous, "input_nr": 0})
        return cls({"nodes": nodes, "edges": edges, "roots": [loss]}, **kwargs)

    # ---- the session interface -------------------------------------------------------------

    def graph(self) -> dict[str, Any]:
        return self._graph

    def node_states(self) -> dict[int, str]:
        return dict(self._states)

    def add_listener(self, callback: Callable[[Any], None]) -> _Handle:
        self._listeners.append(callback)
        return _Handle(self._listeners, callback)

    def step(self) -> None:
        if self.status != "paused" or self.current is None:
            raise RuntimeError(f"cannot step: the session is {self.status}")
        node = self.current
        if node == self._fail_at:
            self._states[node] = "error"
            self.status = "error"
            self.current = None
            self._notify()
            raise ValueError(f"custom backward of node {node} returned a gradient of the wrong shape")
        self._states[node] = "released" if self._saves[node] else "done"
        for successor in self._successors[node]:
            self._dependencies[successor] -= 1
            if self._dependencies[successor] == 0:
                self._states[successor] = "ready"
        self.steps_run += 1
        self.current = self._next_ready()
        if self.current is None:
            self.status = "finished"
        self._notify()

    def continue_(self) -> None:
        while self.status == "paused":
            self.step()

    # ---- helpers ---------------------------------------------------------------------------

    def _next_ready(self) -> int | None:
        ready = [node for node, state in self._states.items() if state == "ready"]
        return max(ready) if ready else None

    def _notify(self) -> None:
        for callback in list(self._listeners):
            callback(self)


class _FakeBreakpoint:
    """What the widget reads of a breakpoint (``node``, ``function``); removable."""

    def __init__(self, owner: list[_FakeBreakpoint], node: int | None, function: str | None) -> None:
        self._owner = owner
        self.node = node
        self.function = function

    def matches(self, node_id: int, name: str) -> bool:
        return (self.node is None or self.node == node_id) and (self.function is None or self.function == name)

    def remove(self) -> None:
        if self in self._owner:
            self._owner.remove(self)


class FakeDebugSession(FakeSession):
    """A FakeSession with a ``DebugSession``'s breakpoints, ``run_to`` and ``abort``: ``continue_``
    stops *before* a node a breakpoint matches (not the one it is paused at) and names the
    breakpoint in ``stopped_at``, which a step clears."""

    def __init__(self, graph: dict[str, Any], fail_at: int | None = None) -> None:
        super().__init__(graph, fail_at)
        self._names = {node["id"]: node["name"] for node in graph["nodes"]}
        self.breakpoints: list[_FakeBreakpoint] = []
        self.stopped_at: _FakeBreakpoint | None = None

    def break_on(self, node: int | None = None, function: str | None = None) -> _FakeBreakpoint:
        breakpoint = _FakeBreakpoint(self.breakpoints, node, function)
        self.breakpoints.append(breakpoint)
        return breakpoint

    def step(self) -> None:
        self.stopped_at = None
        super().step()

    def continue_(self) -> None:
        self.stopped_at = None
        first = True
        while self.status == "paused" and self.current is not None:
            if not first:
                hit = next((b for b in self.breakpoints if b.matches(self.current, self._names[self.current])), None)
                if hit is not None:
                    self.stopped_at = hit
                    self._notify()
                    return
            first = False
            super().step()

    def run_to(self, node: int) -> None:
        if node not in self._names:
            raise KeyError(f"no node with id {node} in this session's graph")
        if self.current == node:
            return
        temporary = self.break_on(node=node)
        try:
            self.continue_()
        finally:
            temporary.remove()
        if self.stopped_at is temporary:
            self.stopped_at = None
            self._notify()

    def abort(self) -> None:
        """Stop here: nodes that have not run never will (their states stay as they are)."""
        self.status = "aborted"
        self.current = None
        self._notify()
