"""What a debugger shows, computed from events alone: node states and per-node facts.

Live sessions (``DebugSession``, ``CallSession``) and recorded ones (``ReplaySession``) feed the
events they display, in order, into a :class:`EventView`; so a trace replays to exactly the
picture the live session showed. ``ReplaySession.step_back`` rebuilds a view from the start.
"""

from __future__ import annotations

__all__ = ["EventView", "NODE_STATES"]

NODE_STATES = ("pending", "ready", "running", "done", "released", "error")
# The event kinds that set their node's state (EventView.apply).
_STATE_KINDS = frozenset({"node_ready", "node_started", "node_finished", "saved_released", "error"})


class EventView:
    """Node states and per-node facts after a prefix of the event stream."""

    def __init__(self, node_ids=()):
        self.node_ids = list(node_ids)
        self.states: dict[int, str] = {}
        self.facts: dict[int, dict] = {}
        self.count = 0
        self.last_started: int | None = None   # node whose node_started was the last start
        self.running: int | None = None        # started and not yet finished
        self.task: int | None = None
        # Note [Incremental overlays] (_overlays.py): the nodes the applied events touched,
        # drained by the overlays; `epoch` counts backward passes (each starts every node over).
        self.touched: set[int] = set()
        self.epoch = 0
        # Note [State deltas] (_base.py): every node whose state an applied event set, in
        # order; emptied, with the states, by backward_started (a new epoch).
        self.changed: list[int] = []

    def _facts(self, node_id) -> dict:
        # Note [Facts made on first use]: the lists start as (), shared, and become lists when
        # an event is appended; ``buffer`` starts as None
        facts = self.facts.get(node_id)
        if facts is None:
            facts = self.facts[node_id] = {
                "grads_in": None, "grads_out": None, "materialized": (), "exposed": None,
                "hooks": (), "casts": (), "reductions": (), "contributions": (),
                "released": None, "accumulated": None, "error": None, "created": None,
                "saved_hooks": (), "buffer": None,
            }
        return facts

    def apply(self, event: dict) -> None:
        self.count += 1
        kind = event["kind"]
        node = event["node"]
        if kind == "backward_started":
            # a new backward pass: every node starts over (a trace may hold several)
            self.task = event["task"]
            self.epoch += 1
            self.states = {}
            self.changed = []
            self.running = None
            created = {node_id: facts["created"] for node_id, facts in self.facts.items()}
            self.facts = {}
            for node_id, record in created.items():
                if record is not None:
                    self._facts(node_id)["created"] = record
            return
        if kind == "node_created":
            self._facts(node)["created"] = event
            self.touched.add(node)
            return
        if node is None:
            if kind == "backward_finished":
                self.running = None
            return
        facts = self._facts(node)
        self.touched.add(node)
        if kind in _STATE_KINDS:
            self.changed.append(node)
        if kind == "node_ready":
            self.states[node] = "ready"
        elif kind == "node_started":
            self.states[node] = "running"
            self.running = self.last_started = node
            # the input buffer is handed to the node: nothing is pending any more
            facts.update(grads_in=event["grads_in"], grads_out=None, materialized=(),
                         hooks=(), casts=(), reductions=(), error=None, exposed=None,
                         buffer=None)
        elif kind == "node_finished":
            if self.states.get(node) != "released":
                self.states[node] = "done"
            facts["grads_out"] = event["grads_out"]
            facts["grads_received"] = event.get("grads_in")
            if self.running == node:
                self.running = None
        elif kind == "saved_released":
            self.states[node] = "released"
            facts["released"] = {"count": event["count"], "bytes": event["bytes"],
                                 "seq": event["seq"]}
        elif kind == "error":
            self.states[node] = "error"
            facts["error"] = {"exception": event["exception"], "message": event["message"]}
            self.running = None
        elif kind in ("prehook", "posthook"):
            _append(facts, "hooks", event)
        elif kind == "grads_materialized":
            facts["materialized"] = list(event["slots"])
        elif kind == "buffers_exposed":
            facts["exposed"] = event["inputs"]
        elif kind == "grad_cast":
            _append(facts, "casts", event)
        elif kind == "grad_reduced":
            _append(facts, "reductions", event)
        elif kind == "buffer_added":
            _append(facts, "contributions", event)
            if facts["buffer"] is None:
                facts["buffer"] = {}
            facts["buffer"][event["slot"]] = event.get("sum")
        elif kind == "grad_accumulated":
            facts["accumulated"] = {"before": event["before"], "after": event["after"]}
        elif kind in ("saved_packed", "saved_unpacked"):
            _append(facts, "saved_hooks", event)

    def node_states(self) -> dict[int, str]:
        return {node_id: self.states.get(node_id, "pending") for node_id in self.node_ids}


def _append(facts: dict, key: str, event: dict) -> None:
    items = facts[key]
    if items:
        items.append(event)
    else:
        facts[key] = [event]


# Note [Facts made on first use]
# ------------------------------
# Most nodes of a real model never see a hook, a cast, a reduction or a saved-tensor hook, and
# each of those lists used to be made empty for every node, twice a pass (at its first event
# and again at node_started): about a thousand GC-tracked lists per debugged GPT step that
# lived as long as the session and pushed the collector into full collections
# (bench/README.md, "Fewer objects per debugged pass"). They start as the empty tuple and
# become lists at their first event; readers take them as sequences (``facts.get(key, ())``).
