"""The recorder: an engine observer that turns engine callbacks into event records.

An event is a plain dict (JSON-ready): ``kind``, ``seq`` (order within the recorder),
``task`` (the graph task's number), ``node`` (the node's stable id or None), ``time``
(seconds since the recorder started) and a kind-specific payload. The full schema is
documented in ``docs/events.md``.
"""

from __future__ import annotations

import itertools
import time

from gradviz_ext import engine as _engine

from ._summary import summarize

__all__ = ["Recorder", "EVENT_KINDS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

EVENT_KINDS = (
    "node_created", "backward_started", "buffer_added", "node_ready", "prehook", "posthook",
    "grad_cast", "grads_materialized", "buffers_exposed", "node_started", "node_finished",
    "grad_accumulated", "saved_released", "backward_finished", "error",
)

_task_numbers = itertools.count()


def _node_id(node):
    return None if node is None else node.node_id


def _summaries(grads):
    return [summarize(g) for g in grads]


class Recorder(_engine.Observer):
    """Records every event of the tasks it observes into ``self.events``.

    Subclasses may override :meth:`emit` to react to each event as it happens.
    """

    def __init__(self):
        self.events: list[dict] = []
        self._origin = time.perf_counter()
        self._task_ids: dict[int, int] = {}

    def emit(self, event: dict) -> None:
        self.events.append(event)

    def _event(self, kind, task, node, **payload):
        event = {
            "kind": kind,
            "seq": len(self.events),
            "task": None if task is None else self._task_number(task),
            "node": _node_id(node),
            "time": time.perf_counter() - self._origin,
        }
        event.update(payload)
        self.emit(event)

    def _task_number(self, task):
        key = id(task)
        number = self._task_ids.get(key)
        if number is None:
            number = self._task_ids[key] = next(_task_numbers)
        return number

    # ---- engine callbacks ------------------------------------------------------------
    def node_created(self, node):
        self._event("node_created", None, node, name=node.name(), node_kind=node._kind(),
                    edges=[[_node_id(n), nr] for n, nr in node.next_functions])

    def backward_started(self, task):
        self._event("backward_started", task, None,
                    roots=[[_node_id(n), nr] for n, nr in task.roots],
                    retain_graph=task.keep_graph, create_graph=task.create_graph,
                    dependencies={str(_node_id(n)): c for n, c in task.dependencies().items()})

    def node_ready(self, task, node):
        self._event("node_ready", task, node, name=node.name())

    def buffer_added(self, task, node, slot, producer, how):
        self._event("buffer_added", task, node, slot=slot, producer=_node_id(producer), how=how)

    def buffers_exposed(self, task, node, entries):
        # one entry per edge (tensor input); ``input`` is the forward argument's position
        positions = getattr(node, "_tensor_input_positions", None)
        inputs = []
        for entry in entries:
            edge = entry["edge"]
            position = positions[edge] if positions is not None and edge < len(positions) else edge
            inputs.append({"input": position, "edge": edge, "exposed": bool(entry["exposed"]),
                           "reason": entry["reason"]})
        self._event("buffers_exposed", task, node, inputs=inputs)

    def node_started(self, task, node, grads):
        self._event("node_started", task, node, name=node.name(), grads_in=_summaries(grads))

    def prehook(self, task, node, hook, slot, before, after):
        replaced = after is not before
        self._event("prehook", task, node, hook=_engine._hook_name(hook), slot=slot,
                    replaced=replaced)

    def grads_materialized(self, task, node, slots):
        self._event("grads_materialized", task, node, slots=list(slots))

    def grad_cast(self, task, node, slot, from_dtype, to_dtype):
        self._event("grad_cast", task, node, slot=slot, from_dtype=from_dtype.name,
                    to_dtype=to_dtype.name)

    def posthook(self, task, node, hook, grad_inputs, grad_outputs, replaced):
        self._event("posthook", task, node, hook=_engine._hook_name(hook), replaced=replaced)

    def node_finished(self, task, node, grads_in, grads_out, duration):
        self._event("node_finished", task, node, name=node.name(),
                    grads_out=_summaries(grads_out), duration=duration)

    def grad_accumulated(self, task, node, variable, before, after):
        self._event("grad_accumulated", task, node, before=summarize(before), after=summarize(after))

    def saved_released(self, task, node, count, nbytes):
        self._event("saved_released", task, node, count=count, bytes=nbytes)

    def backward_finished(self, task, duration):
        self._event("backward_finished", task, None, duration=duration)

    def error(self, task, node, exc):
        self._event("error", task, node, exception=type(exc).__name__, message=str(exc))
