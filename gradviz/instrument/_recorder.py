"""The recorder: an engine observer that turns engine callbacks into event records.

An event is a plain dict (JSON-ready): ``kind``, ``seq`` (order within the recorder),
``task`` (the graph task's number in this recorder), ``node`` (the node's stable id or None),
``time`` (seconds since the recorder started), ``text`` (one plain-English sentence for
narration) and a kind-specific payload. The types are defined in ``_schema.py`` (one
``TypedDict`` per kind) and documented in ``docs/events.md``.
"""

from __future__ import annotations

import time
import traceback

from gradviz_ext import engine as _engine

from ._nodes import node_created_payload, saved_tensors_of
from ._schema import EVENT_KINDS, SCHEMA_VERSION
from ._summary import SummaryCache

__all__ = ["Recorder", "EVENT_KINDS", "SCHEMA_VERSION"]

_clock = time.perf_counter

_MAX_PENDING_PACKS = 64
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
             "ninth", "tenth")
_HOW_TEXT = {
    "stored": "stored in the buffer",
    "accumulated_in_place": "summed into the buffer in place",
    "accumulated_out_of_place": "summed into the buffer",
}


def _node_id(node):
    return None if node is None else node.node_id


def _ordinal(n: int) -> str:
    return _ORDINALS[n - 1] if n <= len(_ORDINALS) else f"{n}th"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _slots_text(slots) -> str:
    return ", ".join(str(s) for s in slots)


class Recorder(_engine.Observer):
    """Records every event of the tasks it observes into ``self.events``.

    Use it as a graph task's observer (``GraphTask(..., observer=recorder)``) and, to get
    ``node_created`` and ``saved_packed`` too, as the forward observer. Subclasses may
    override :meth:`emit` to react to each event as it happens.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.instrument import Recorder
    >>> from gradviz.autograd._functional import make_graph_task
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> recorder = Recorder()
    >>> make_graph_task((x * x).sum(), observer=recorder).run()
    >>> recorder.events[-1]["text"]
    'Backward finished: 3 nodes ran.'
    """

    def __init__(self):
        self.events: list[dict] = []
        self._origin = _clock()
        self._tasks: dict[int, tuple] = {}          # id(task) -> (task, number)
        self._last_task: tuple = (None, None)       # the entry _task_number returned last
        self._next_task = 0
        self._contributions: dict[tuple, int] = {}  # (task number, node id, slot) -> count
        self._executed: dict[int, int] = {}         # task number -> nodes run
        self._pending_packs: list = []              # (SavedTensor, hook) before node_created
        self._names: dict[int, str] = {}
        self._summary_cache = SummaryCache()        # Note [Summary cost] in _summary.py

    def _summary(self, tensor):
        return self._summary_cache.summarize(tensor)

    def _summaries(self, tensors):
        summarize = self._summary_cache.summarize
        return [summarize(t) for t in tensors]

    def emit(self, event: dict) -> None:
        self.events.append(event)

    def _event(self, kind, task, node, text, **payload):
        # The recorder's hot path (bench/instrument.py): locals and one dict, no helpers.
        event = {
            "kind": kind,
            "seq": len(self.events),
            "task": None if task is None else self._task_number(task),
            "node": None if node is None else node.node_id,
            "time": _clock() - self._origin,
            "text": text,
        }
        event.update(payload)
        self.emit(event)

    def _task_number(self, task):
        last = self._last_task
        if last[0] is task:  # nearly every event belongs to the same task as the one before
            return last[1]
        entry = self._tasks.get(id(task))
        if entry is None or entry[0] is not task:
            entry = (task, self._next_task)
            self._next_task += 1
            self._tasks[id(task)] = entry
        self._last_task = entry
        return entry[1]

    def _forget_task(self, task):
        self._summary_cache.clear()  # hold no gradients once their pass is over
        self._last_task = (None, None)
        entry = self._tasks.pop(id(task), None)
        if entry is not None:
            number = entry[1]
            self._executed.pop(number, None)
            for key in [k for k in self._contributions if k[0] == number]:
                del self._contributions[key]

    # ---- forward --------------------------------------------------------------------
    def node_created(self, node):
        payload = node_created_payload(node)
        node._forward_site = payload["source"]
        name = payload["name"]
        self._names[node.node_id] = name
        where = ""
        source = payload["source"]
        if source is not None:
            where = f" at {source['file'].rsplit('/', 1)[-1]}:{source['line']}"
            if source["code"]:
                where += f" ({source['code']})"
        saved = len(payload["saved"])
        saves = f"; it saves {_plural(saved, 'tensor')} for backward" if saved else ""
        self._event("node_created", None, node, f"Forward recorded {name}{where}{saves}.",
                    **payload)
        if self._pending_packs:
            self._flush_packs(node)

    def saved_packed(self, saved, hook):
        # The node that owns this SavedTensor is created right after it saves its tensors;
        # node_created reports the packs with the node id and slot.
        self._pending_packs.append((saved, hook))

    def _flush_packs(self, node):
        slots = {id(item): (slot, label)
                 for slot, (label, item) in enumerate(saved_tensors_of(node))}
        matched = []
        unmatched = []
        for saved, hook in self._pending_packs:
            found = slots.get(id(saved))
            if found is None:
                # not this node's: a pack hook that records ops of its own (t.clone()) creates
                # nodes before the saving node exists; keep a bounded backlog
                unmatched.append((saved, hook))
            else:
                matched.append((found, hook))
        self._pending_packs = unmatched[-_MAX_PENDING_PACKS:]
        for (slot, label), hook in sorted(matched, key=lambda item: item[0][0]):
            hook_name = _engine._hook_name(hook)
            self._event("saved_packed", None, node,
                        f"{_engine.display_name(node)} packed {label} with the saved-tensor hook {hook_name}.",
                        slot=slot, label=label, hook=hook_name)

    def saved_unpacked(self, task, node, saved, hook):
        slot, label = -1, "a saved tensor"
        for index, (item_label, item) in enumerate(saved_tensors_of(node)):
            if item is saved:
                slot, label = index, item_label
                break
        hook_name = _engine._hook_name(hook)
        self._event("saved_unpacked", task, node,
                    f"{_engine.display_name(node)} unpacked {label} with the saved-tensor hook {hook_name}.",
                    slot=slot, label=label, hook=hook_name)

    # ---- backward -------------------------------------------------------------------
    def backward_started(self, task):
        roots = [{"node": _node_id(n), "input_nr": nr} for n, nr in task.roots]
        dependencies = {str(_node_id(n)): c for n, c in task.dependencies().items()}
        names = ", ".join(_engine.display_name(n) for n, _ in task.roots if n is not None) or "nothing"
        options = f"retain_graph={task.keep_graph}, create_graph={task.create_graph}"
        self._event("backward_started", task, None,
                    f"Backward started from {names} ({options}).",
                    roots=roots, retain_graph=task.keep_graph, create_graph=task.create_graph,
                    inputs=_inputs_of(task), dependencies=dependencies)

    def node_ready(self, task, node):
        name = _engine.display_name(node)
        self._event("node_ready", task, node,
                    f"{name} is ready: every gradient it waits for has arrived.", name=name)

    def buffer_added(self, task, node, slot, producer, how):
        number = self._task_number(task)
        key = (number, node.node_id, slot)
        count = self._contributions.get(key, 0) + 1
        self._contributions[key] = count
        self._event("buffer_added", task, node,
                    f"{_engine.display_name(node)} input {slot}: {_ordinal(count)} contribution, from "
                    f"{_engine.display_name(producer)}, {_HOW_TEXT.get(how, how)}.",
                    slot=slot, producer=_node_id(producer), how=how, contribution=count)

    def buffers_exposed(self, task, node, entries):
        # one entry per edge (tensor input); ``input`` is the forward argument's position
        positions = getattr(node, "_tensor_input_positions", None)
        inputs = []
        parts = []
        for entry in entries:
            edge = entry["edge"]
            position = positions[edge] if positions is not None and edge < len(positions) else edge
            exposed = bool(entry["exposed"])
            inputs.append({"input": position, "edge": edge, "exposed": exposed,
                           "reason": entry["reason"]})
            parts.append(f"input {position} {'exposed' if exposed else 'not exposed'} "
                         f"({entry['reason']})")
        self._event("buffers_exposed", task, node,
                    f"{_engine.display_name(node)} read ctx.input_grad_buffers: {'; '.join(parts) or 'no inputs'}.",
                    inputs=inputs)

    def node_started(self, task, node, grads):
        arrived = sum(1 for g in grads if g is not None)
        name = _engine.display_name(node)
        self._event("node_started", task, node,
                    f"{name} started with {arrived} of {_plural(len(grads), 'incoming gradient')}.",
                    name=name, grads_in=self._summaries(grads))

    def prehook(self, task, node, hook, slot, before, after):
        if slot >= 0:
            replaced = after is not before
            what = f"Tensor pre-hook {_engine._hook_name(hook)} on {_engine.display_name(node)} input {slot}"
            before_list, after_list = [self._summary(before)], [self._summary(after)]
        else:
            replaced = any(a is not b for a, b in zip(after, before)) or len(after) != len(before)
            what = f"Pre-hook {_engine._hook_name(hook)} of {_engine.display_name(node)}"
            before_list, after_list = self._summaries(before), self._summaries(after)
        outcome = "replaced the gradient" if replaced else "left the gradient unchanged"
        self._event("prehook", task, node, f"{what} {outcome}.",
                    hook=_engine._hook_name(hook), slot=slot, replaced=replaced,
                    before=before_list, after=after_list)

    def grads_materialized(self, task, node, slots):
        slots = list(slots)
        self._event("grads_materialized", task, node,
                    f"{_engine.display_name(node)} got no gradient for output {_slots_text(slots)}: "
                    "zeros were materialized.", slots=slots)

    def grad_cast(self, task, node, slot, from_dtype, to_dtype):
        self._event("grad_cast", task, node,
                    f"{_engine.display_name(node)} gradient for input {slot} cast from {from_dtype.name} to "
                    f"{to_dtype.name}, the dtype its successor expects.",
                    slot=slot, from_dtype=from_dtype.name, to_dtype=to_dtype.name)

    def grad_reduced(self, task, node, slot, from_shape, to_shape):
        self._event("grad_reduced", task, node,
                    f"{_engine.display_name(node)} gradient for input {slot} summed from shape "
                    f"{list(from_shape)} to {list(to_shape)} (the input was broadcast).",
                    slot=slot, from_shape=list(from_shape), to_shape=list(to_shape))

    def posthook(self, task, node, hook, grad_inputs, grad_outputs, replaced):
        outcome = "replaced its gradients" if replaced else "left its gradients unchanged"
        self._event("posthook", task, node,
                    f"Post-hook {_engine._hook_name(hook)} of {_engine.display_name(node)} {outcome}.",
                    hook=_engine._hook_name(hook), replaced=replaced,
                    grad_inputs=self._summaries(grad_inputs))

    def node_finished(self, task, node, grads_in, grads_out, duration):
        number = self._task_number(task)
        self._executed[number] = self._executed.get(number, 0) + 1
        produced = sum(1 for g in grads_out if g is not None)
        name = _engine.display_name(node)
        if node._kind() == "accumulate_grad":
            text = f"{name} finished."
        else:
            text = f"{name} finished: {produced} of {_plural(len(grads_out), 'gradient')} out."
        self._event("node_finished", task, node, text, name=name,
                    grads_in=self._summaries(grads_in), grads_out=self._summaries(grads_out),
                    duration=duration)

    def grad_accumulated(self, task, node, variable, before, after):
        shape = list(variable._data.shape)
        what = "stored as" if before is None else "added to"
        self._event("grad_accumulated", task, node,
                    f"AccumulateGrad: the gradient was {what} .grad of the leaf "
                    f"{shape} {variable.dtype.name}.",
                    before=self._summary(before), after=self._summary(after))

    def saved_released(self, task, node, count, nbytes):
        self._event("saved_released", task, node,
                    f"{_engine.display_name(node)} freed {_plural(count, 'saved tensor')} ({nbytes} bytes).",
                    count=count, bytes=nbytes)

    def backward_finished(self, task, duration):
        ran = self._executed.get(self._task_number(task), 0)
        self._event("backward_finished", task, None,
                    f"Backward finished: {_plural(ran, 'node')} ran.", duration=duration)
        self._forget_task(task)

    def error(self, task, node, exc):
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        where = _engine.display_name(node) if node is not None else "backward"
        self._event("error", task, node, f"{where} raised {type(exc).__name__}: {exc}",
                    exception=type(exc).__name__, message=str(exc), traceback=lines)
        self._forget_task(task)


def _inputs_of(task):
    """Node ids of ``autograd.grad``'s inputs or ``backward(inputs=...)``, else None."""
    captures = task._captures
    if captures is None and task._retains is None:
        return None
    ids = set()
    for node in captures or ():
        ids.add(node.node_id)
    for node in task._retains or ():
        ids.add(node.node_id)
    for node, needed in (task._exec_info or {}).items():
        if needed and node._kind() == "accumulate_grad":
            ids.add(node.node_id)
    return sorted(ids)
