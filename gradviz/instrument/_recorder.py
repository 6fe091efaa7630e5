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
import weakref

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ops
from gradviz_ext import task as _task

from ._nodes import describe_graph, fill_node_created, forward_line, saved_tensors_of, traverse_graph
from ._schema import EVENT_KINDS, SCHEMA_VERSION
from ._summary import SummaryCache

__all__ = ["Recorder", "EVENT_KINDS", "SCHEMA_VERSION", "narration_label"]

_clock = time.perf_counter
_rt = _engine.runtime()

_MAX_PENDING_PACKS = 64
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
             "ninth", "tenth")
_HOW_TEXT = {
    "stored": "stored in the buffer",
    "accumulated_in_place": "summed into the buffer in place",
    "accumulated_out_of_place": "summed into the buffer",
    "written_by_backward": "added into the buffer in place by its backward "
                           "(ctx.input_grad_buffers)",
}


# Nodes whose backward is the engine's own code (Note [Summary epochs])
_BUILTIN_NODES = (_ops.OpNode, _engine.AccumulateGrad, _engine.GraphRoot)


def _node_id(node):
    return None if node is None else node.node_id


def _ordinal(n: int) -> str:
    return _ORDINALS[n - 1] if n <= len(_ORDINALS) else f"{n}th"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _saves_text(saved: int) -> str:
    """How node_created's sentence ends for a node that saved ``saved`` tensors."""
    return f"; it saves {_plural(saved, 'tensor')} for backward" if saved else ""


_SAVES = tuple(_saves_text(saved) for saved in range(8))


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
        self._events: list[dict] = []
        # Note [Events when read]: records of events not built yet, after those in _events
        self._deferred: list[tuple] = []
        self._deferring = False
        self._number = -1            # while deferring: the number of the task deferred
        self._started_record = -1    # index in _deferred of the last node_started record
        self._grad_snapshot = None   # (a leaf's .grad, its copy) until its node_finished
        # Note [Records the engine appends] (gradviz_ext/_task.py): the deferring pass's log,
        # which also counts what deferred_bytes_limit leaves it; _engine_log, what the engine
        # reads, is the log or None while something must see every callback
        self._log: _task.EventLog | None = None
        # the builders of node_started and node_finished, as the subclass has them
        self._build_started = type(self)._build_node_started
        self._build_finished = type(self)._build_node_finished
        self._origin = _clock()
        self._tasks: dict[int, tuple] = {}          # id(task) -> (weakref to task, number)
        self._last_task: tuple = (None, None)       # the entry _task_number returned last
        self._next_task = 0
        self._contributions: dict[tuple, int] = {}  # (task number, node id, slot) -> count
        self._executed: dict[int, int] = {}         # task number -> nodes run
        self._pending_packs: list = []              # (SavedTensor, hook) before node_created
        self._started: tuple | None = None          # (node, its node_started summaries)
        self._summary_cache = SummaryCache()        # Note [Summary cost] in _summary.py
        # Note [Lazy summaries]: arrays the user can reach this pass, by id
        self._reachable: dict[int, object] = {}
        # Note [Node numbers and labels]
        self.numbers: dict[int, int] = {}           # node id -> small display number
        self.leaf_names: dict[int, str] = {}        # AccumulateGrad node id -> leaf's name
        self._name_counts: dict[str, int] = {}      # display name -> nodes numbered with it
        self._next_number = 0
        self._labels: dict[int, str] = {}           # node id -> label (cleared on changes)

    # Note [Lazy summaries]: a subclass whose owner flushes at every return of control to the
    # user (the debug session) sets this; summaries stay eager otherwise
    lazy_summaries = False
    # Note [Events when read]: set by an owner that reads events only through ``events`` and
    # ``event_count`` (a pass defers only when its initial gradients are the library's own)
    defer_events = False
    # the most bytes of gradients a deferring pass's records may hold; past it the pass goes
    # on eagerly (None: no bound, for an owner that keeps every gradient anyway)
    deferred_bytes_limit: int | None = None
    # whether summaries built after their pass stay pending until read (a debug session: a
    # person reads a few of them), or are computed as the events are built
    lazy_after_pass = False

    @property
    def events(self) -> list[dict]:
        """Every event recorded so far, in order (records not built yet are built now)."""
        self.build_events()
        return self._events

    @events.setter
    def events(self, events: list[dict]) -> None:
        self.build_events()
        self._events = events

    def build_events(self) -> None:
        """Build the events deferred so far (Note [Events when read]); the graph of a pass
        whose ``backward_started`` was deferred is described then."""
        if self._deferred:
            self._build_deferred()

    @property
    def event_count(self) -> int:
        """``len(self.events)``, without building the events not built yet."""
        return len(self._events) + len(self._deferred)

    def _build_deferred(self) -> None:
        """Build the deferred records into events, in order (Note [Events when read])."""
        records, self._deferred = self._deferred, []
        if self._log is not None:
            self._log.records = self._deferred  # where the engine appends from now on
        self._started_record = -1
        cache = self._summary_cache
        over = not self._deferring and not self._tasks
        if over:
            # Note [Lazy summaries]: what the records hold is still unreachable (the leaves'
            # .grad are copies), so their large summaries may wait to be read too, tracked
            # until session.tensor() hands out a live tensor
            cache.lazy = self.lazy_after_pass
        built = 0
        try:
            for record in records:
                record[0](self, record)
                built += 1
        finally:
            if built < len(records):  # a builder raised: it and the rest stay deferred
                self._deferred[:0] = records[built:]
            if over:
                cache.lazy = False
                cache.clear()  # the pass is over: hold no gradients (as _forget_task)

    def _stop_deferring(self) -> None:
        """From here on, every event is built at once; those deferred are built now."""
        self._deferring = False
        self._log = self._engine_log = None
        self.build_events()

    def _eager_from_here(self) -> None:
        """Build what is deferred and compute every pending summary now; the rest of the pass
        is summarized eagerly (Note [Lazy summaries])."""
        self._stop_deferring()
        self._summary_cache.flush()
        self._summary_cache.lazy = False

    def _summary(self, tensor):
        return self._summary_cache.summarize(tensor)

    def flush_summaries(self) -> None:
        """Compute every pending summary now (Note [Lazy summaries] in _summary.py), and build
        every deferred event (Note [Events when read]): before handing out a live tensor, or
        before code the engine does not control runs."""
        self.build_events()
        self._summary_cache.flush()

    def flush_reachable(self) -> None:
        """Compute now the pending summaries of memory the user can reach without the
        recorder's help: the pass's initial gradients and the leaves' ``.grad`` (Note [Lazy
        summaries] in _summary.py). Call before control returns to the user."""
        if self._reachable:
            self._summary_cache.flush_owners(self._reachable.values())

    def outside_code_ran(self) -> None:
        """Code the engine does not control may have written tensors behind their version
        counters (Note [Summary epochs] in _summary.py): summarize everything afresh. The
        recorder calls it at hooks and custom backwards; a debug session, each time the user
        had control."""
        self._summary_cache.new_epoch()

    def _summaries(self, tensors):
        summarize = self._summary_cache.summarize
        return [summarize(t) for t in tensors]

    def emit(self, event: dict) -> None:
        self._events.append(event)

    def _event(self, kind, task, node, text, **payload):
        """Record an event now; the deferred ones come first (Note [Events when read])."""
        if self._deferred:
            self._build_deferred()
        self._add(kind, None if task is None else self._task_number(task), node, _clock(),
                  text, payload)

    def _add(self, kind, number, node, clock, text, payload):
        # The recorder's hot path (bench/instrument.py): locals and one dict, no helpers.
        event = {
            "kind": kind,
            "seq": len(self._events),
            "task": number,
            "node": None if node is None else node.node_id,
            "time": clock - self._origin,
            "text": text,
        }
        event.update(payload)
        self.emit(event)

    def _record(self, record: tuple) -> None:
        """An event of the hot path, as a record ``(builder, task number, node, clock,
        ...)``: built now, or deferred (Note [Events when read])."""
        if self._deferring:
            self._deferred.append(record)
        else:
            if self._deferred:
                self._build_deferred()
            record[0](self, record)

    def _task_number(self, task):
        # The task holds its observer: the recorder refers to the task weakly, so that a
        # paused session the user drops is freed at once (no task <-> recorder cycle).
        last = self._last_task
        if last[0] is not None and last[0]() is task:  # nearly always the task of the last event
            return last[1]
        entry = self._tasks.get(id(task))
        if entry is None or entry[0]() is not task:
            entry = (weakref.ref(task), self._next_task)
            self._next_task += 1
            self._tasks[id(task)] = entry
        self._last_task = entry
        return entry[1]

    def _forget_task(self, task):
        # Note [Lazy summaries]: what the user can reach is computed now; the rest stays
        # pending, tracked until read or until the session hands out a live tensor
        if self.lazy_after_pass:
            self.flush_reachable()
        else:
            self._summary_cache.flush()
        self._reachable = {}
        self._deferring = False  # the records stay deferred (Note [Events when read])
        self._log = self._engine_log = None
        self._grad_snapshot = None
        cache = self._summary_cache
        cache.lazy = False
        cache.clear()  # hold no gradients once their pass is over
        self._labels.clear()
        self._last_task = (None, None)
        self._tasks.pop(id(task), None)

    def _forget_counts(self, number: int) -> None:
        """Drop a finished task's counts, once its last event is built."""
        self._executed.pop(number, None)
        for key in [k for k in self._contributions if k[0] == number]:
            del self._contributions[key]

    # ---- node numbers and labels (Note [Node numbers and labels]) ----------------------
    def learn_graph(self, root, traversal=None):
        """Number the nodes reachable from ``root`` that have no number yet; returns
        :func:`walk_graph`'s ``(nodes, edges, roots, live)`` (GraphRoot included), each node's
        description carrying its ``number`` (and ``leaf_name`` when known). ``traversal``:
        :func:`traverse_graph`'s result for ``root``, when already made."""
        self.build_events()  # their narration uses the names and numbers known now
        live, edges, roots = traversal or traverse_graph(root, include_graph_root=True)
        nodes = describe_graph(live)
        numbers = self.numbers
        counts = self._name_counts
        for node_id, info in nodes.items():
            number = numbers.get(node_id)
            if number is None:
                self._labels.clear()  # a name may now be shared
                if isinstance(live[node_id], _engine.GraphRoot):
                    number = 0
                else:
                    self._next_number += 1
                    number = self._next_number
                    name = info["name"]
                    counts[name] = counts.get(name, 0) + 1
                numbers[node_id] = number
            info["number"] = number
            leaf = self.leaf_names.get(node_id)
            if leaf is not None:
                info["leaf_name"] = leaf
            elif "leaf_name" in info:  # a module's parameter (Note [Module paths])
                self.name_leaf(node_id, info["leaf_name"])
        return nodes, edges, roots, live

    def name_leaf(self, node_id: int, name: str) -> None:
        """Name the leaf of AccumulateGrad node ``node_id`` in narration from now on."""
        self.build_events()  # events before this keep the name they had
        self.leaf_names[node_id] = name
        self._labels.pop(node_id, None)

    def _graph_learned(self, root, walked) -> None:
        """Called with :meth:`learn_graph`'s result for a pass from ``root`` (its graph root)
        when its ``backward_started`` event is built (for subclasses)."""

    def label(self, node_id: int, name: str) -> str:
        """How narration names a node: ``AccumulateGrad for w`` for a named leaf; the name
        with ``#number`` when another numbered node has the same name; else the name."""
        return narration_label(name, self.leaf_names.get(node_id), self.numbers.get(node_id),
                               self._name_counts.get(name, 0) > 1)

    def _label(self, node) -> str:
        # per event, so cached (the recorder's hot path, bench/instrument.py)
        node_id = node.node_id
        label = self._labels.get(node_id)
        if label is None:
            label = self._labels[node_id] = self.label(node_id, _engine.display_name(node))
        return label

    # ---- forward --------------------------------------------------------------------
    def node_created(self, node):
        # Note [The cost of node_created] in _nodes.py: the event in one dict, filled in place;
        # the search for the user's line starts above this method
        source, place = forward_line(2)
        node._forward_site = source
        if self._deferred:  # Note [Events when read]: the deferred events come first
            self._build_deferred()
        event = fill_node_created({"kind": "node_created", "seq": len(self._events),
                                   "task": None, "node": node.node_id,
                                   "time": _clock() - self._origin, "text": None},
                                  node, source)
        count = len(event["saved"])
        event["text"] = (f"Forward recorded {event['name']}{place}"
                         f"{_SAVES[count] if count < len(_SAVES) else _saves_text(count)}.")
        self.emit(event)
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
        self._summary_cache.new_epoch()  # the unpack hook ran (Note [Summary epochs])
        slot, label = -1, "a saved tensor"
        for index, (item_label, item) in enumerate(saved_tensors_of(node)):
            if item is saved:
                slot, label = index, item_label
                break
        hook_name = _engine._hook_name(hook)
        self._event("saved_unpacked", task, node,
                    f"{self._label(node)} unpacked {label} with the saved-tensor hook {hook_name}.",
                    slot=slot, label=label, hook=hook_name)

    # ---- backward -------------------------------------------------------------------
    def backward_started(self, task):
        # Note [Events when read]: the events of an earlier pass first, with the summaries it
        # had (a trace's records of one pass at a time)
        self.build_events()
        # Note [Lazy summaries]: not where the pass hands gradients to the user as it runs
        # (autograd.grad's captures, backward(inputs=) into non-leaves) or builds a graph of
        # them (create_graph: their nodes save them)
        lazy = self._summary_cache.lazy = (self.lazy_summaries and not task.create_graph
                                           and task._captures is None and task._retains is None)
        # not a pass from the caller's gradients (they may write them)
        defer = lazy and self.defer_events and task.made_grads
        # The graph is walked now (its nodes are read before they release what they saved);
        # described, numbered and named when the event is built (Note [Events when read]).
        root = task.graph_root
        traversal = traverse_graph(root, include_graph_root=True)
        self._graph_traversed(traversal)
        record = (type(self)._build_backward_started, self._task_number(task), None, _clock(), root,
                  traversal, list(task.roots), task.dependencies(), task.keep_graph,
                  task.create_graph, _inputs_of(task))
        if defer:
            self._deferring = True
            self._number = record[1]
            self._deferred.append(record)
            self._log = _task.EventLog(self._deferred, self._number, Recorder._build_node_ready,
                                       Recorder._build_buffer_added, self._build_started,
                                       self._build_finished, self.deferred_bytes_limit)
            if _logs_in_engine(type(self)):
                self._engine_log = self._log
        else:
            self._record(record)

    def _graph_traversed(self, traversal) -> None:
        """Called at ``backward_started`` with :func:`traverse_graph`'s result for the pass
        (for subclasses)."""

    def _build_backward_started(self, record):
        (_, number, _, clock, root, traversal, task_roots, dependencies, keep_graph, create_graph,
         inputs) = record
        self._graph_learned(root, self.learn_graph(root, traversal))
        names = ", ".join(self._label(n) for n, _ in task_roots if n is not None) or "nothing"
        options = f"retain_graph={keep_graph}, create_graph={create_graph}"
        self._add("backward_started", number, None, clock,
                  f"Backward started from {names} ({options}).",
                  {"roots": [{"node": _node_id(n), "input_nr": nr} for n, nr in task_roots],
                   "retain_graph": keep_graph, "create_graph": create_graph, "inputs": inputs,
                   "dependencies": {str(_node_id(n)): c for n, c in dependencies.items()}})

    # The four callbacks of every node defer in line (bench/instrument.py): while deferring,
    # the task is the one of backward_started (a session's recorder observes one task), and
    # the counts are kept by the builders, which run in order.
    def node_ready(self, task, node):
        if self._deferring:
            self._deferred.append((Recorder._build_node_ready, self._number, node, _clock()))
        else:
            self._record((Recorder._build_node_ready, self._task_number(task), node, _clock()))

    def _build_node_ready(self, record):
        _, number, node, clock = record
        self._add("node_ready", number, node, clock,
                  f"{self._label(node)} is ready: every gradient it waits for has arrived.",
                  {"name": _engine.display_name(node)})

    def buffer_added(self, task, node, slot, producer, how, grad, buffered):
        if how == "written_by_backward":
            self._stop_deferring()  # a custom backward wrote it
            self._summary_cache.new_epoch()  # (Note [Summary epochs])
        # Note [Lazy summaries]: the engine adds the next contribution into a sum in place,
        # so a sum is summarized now (a stored contribution is the sum: Note [Shared summaries])
        total = None if buffered is grad else self._summary_cache.summarize(buffered, now=True)
        if self._deferring:
            self._deferred.append((Recorder._build_buffer_added, self._number, node, _clock(),
                                   slot, producer, how, grad, total))
        else:
            self._record((Recorder._build_buffer_added, self._task_number(task), node, _clock(),
                          slot, producer, how, grad, total))

    def _build_buffer_added(self, record):
        _, number, node, clock, slot, producer, how, grad, total = record
        key = (number, node.node_id, slot)
        count = self._contributions.get(key, 0) + 1
        self._contributions[key] = count
        grad_summary = self._summary(grad)
        self._add("buffer_added", number, node, clock,
                  f"{self._label(node)} input {slot}: {_ordinal(count)} contribution, from "
                  f"{self._label(producer)}, {_HOW_TEXT.get(how, how)}.",
                  {"slot": slot, "producer": _node_id(producer), "how": how,
                   "contribution": count, "grad": grad_summary,
                   "sum": grad_summary if total is None else total})

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
                    f"{self._label(node)} read ctx.input_grad_buffers: {'; '.join(parts) or 'no inputs'}.",
                    inputs=inputs)

    def node_started(self, task, node, grads):
        if self._summary_cache.lazy:
            if _runs_outside_code(node):
                self._eager_from_here()  # Note [Lazy summaries]: its code may write any tensor
            elif node is task.graph_root and not self._deferring:
                self._reach(grads)  # the initial gradients are the caller's
        # (..., grads, shown): the gradients, and what the event describes (the same list but
        # for a leaf's .grad, Note [Events when read])
        if self._deferring:
            deferred = self._deferred
            self._started_record = len(deferred)
            deferred.append((self._build_started, self._number, node, _clock(), grads, grads))
        else:
            self._record((self._build_started, self._task_number(task), node, _clock(), grads,
                          grads))

    def _build_node_started(self, record):
        _, number, node, clock, grads, shown = record
        arrived = len(grads) - grads.count(None)  # the engine passes lists
        summaries = self._summaries(shown)
        self._started = (node, summaries)
        self._add("node_started", number, node, clock,
                  f"{self._label(node)} started with {arrived} of "
                  f"{_plural(len(grads), 'incoming gradient')}.",
                  {"name": _engine.display_name(node), "grads_in": summaries})

    def prehook(self, task, node, hook, slot, before, after, replaced):
        self._summary_cache.new_epoch()  # the hook ran (Note [Summary epochs])
        if slot >= 0:
            what = f"Tensor pre-hook {_engine._hook_name(hook)} on {self._label(node)} input {slot}"
            before_list, after_list = [self._summary(before)], [self._summary(after)]
        else:
            what = f"Pre-hook {_engine._hook_name(hook)} of {self._label(node)}"
            before_list, after_list = self._summaries(before), self._summaries(after)
        changed = replaced or before_list != after_list
        self._event("prehook", task, node, f"{what} {_hook_outcome(replaced, changed, 'gradient')}.",
                    hook=_engine._hook_name(hook), slot=slot, replaced=replaced,
                    changed=changed, before=before_list, after=after_list)

    def grads_materialized(self, task, node, slots):
        self._record((Recorder._build_grads_materialized, self._task_number(task), node,
                      _clock(), list(slots)))

    def _build_grads_materialized(self, record):
        _, number, node, clock, slots = record
        self._add("grads_materialized", number, node, clock,
                  f"{self._label(node)} got no gradient for output {_slots_text(slots)}: "
                  "zeros were materialized.", {"slots": slots})

    def grad_cast(self, task, node, slot, from_dtype, to_dtype):
        self._record((Recorder._build_grad_cast, self._task_number(task), node, _clock(), slot,
                      from_dtype.name, to_dtype.name))

    def _build_grad_cast(self, record):
        _, number, node, clock, slot, from_dtype, to_dtype = record
        self._add("grad_cast", number, node, clock,
                  f"{self._label(node)} gradient for input {slot} cast from {from_dtype} to "
                  f"{to_dtype}, the dtype its successor expects.",
                  {"slot": slot, "from_dtype": from_dtype, "to_dtype": to_dtype})

    def grad_reduced(self, task, node, slot, from_shape, to_shape):
        self._record((Recorder._build_grad_reduced, self._task_number(task), node, _clock(),
                      slot, list(from_shape), list(to_shape)))

    def _build_grad_reduced(self, record):
        _, number, node, clock, slot, from_shape, to_shape = record
        self._add("grad_reduced", number, node, clock,
                  f"{self._label(node)} gradient for input {slot} summed from shape "
                  f"{from_shape} to {to_shape} (the input was broadcast).",
                  {"slot": slot, "from_shape": from_shape, "to_shape": to_shape})

    def posthook(self, task, node, hook, grad_inputs, grad_outputs, replaced, before):
        self._summary_cache.new_epoch()  # the hook ran (Note [Summary epochs])
        after_list = self._summaries(grad_inputs)
        before_list = self._summaries(before)
        changed = replaced or before_list != after_list
        self._event("posthook", task, node,
                    f"Post-hook {_engine._hook_name(hook)} of {self._label(node)} "
                    f"{_hook_outcome(replaced, changed, 'gradients', 'its ')}.",
                    hook=_engine._hook_name(hook), replaced=replaced, changed=changed,
                    before=before_list, grad_inputs=after_list)

    def node_finished(self, task, node, grads_in, grads_out, duration):
        if not isinstance(node, _BUILTIN_NODES):
            self._summary_cache.new_epoch()  # its backward was user code (Note [Summary epochs])
        if node is task.graph_root and self._summary_cache.lazy and not self._deferring:
            self._reach(grads_out)  # several roots: the GraphRoot hands out the caller's
        if self._deferring:
            index = self._started_record
            if index >= 0:
                started = self._deferred[index]
                if started[2] is node and same_items(started[4], grads_in):
                    # what its backward got is what arrived: the records hold one list (one
                    # object less per node for the collector to walk until they are built)
                    grads_in = started[4]
            shown = grads_in
            snapshot = self._grad_snapshot
            if snapshot is not None:  # an AccumulateGrad whose .grad is the gradient it got
                self._grad_snapshot = None
                shown = [snapshot[1] if g is snapshot[0] else g for g in grads_in]
            self._deferred.append((self._build_finished, self._number, node, _clock(), grads_in,
                                   grads_out, duration, shown))
            log = self._log
            assert log is not None  # set with _deferring
            if log.bytes_left is not None:  # the new gradients are held until they are built
                left = log.bytes_left
                for grad in grads_out:
                    if grad is not None:
                        left -= grad._data.nbytes
                log.bytes_left = left
                if left < 0:
                    self._eager_from_here()
        else:
            self._record((self._build_finished, self._task_number(task), node, _clock(),
                          grads_in, grads_out, duration, grads_in))

    def _build_node_finished(self, record):
        _, number, node, clock, grads_in, grads_out, duration, shown = record
        self._executed[number] = self._executed.get(number, 0) + 1
        produced = len(grads_out) - grads_out.count(None)
        label = self._label(node)
        if node._kind() == "accumulate_grad":
            text = f"{label} finished."
        else:
            text = f"{label} finished: {produced} of {_plural(len(grads_out), 'gradient')} out."
        self._add("node_finished", number, node, clock, text,
                  {"name": _engine.display_name(node),
                   "grads_in": self._same_as_started(node, self._summaries(shown)),
                   "grads_out": self._summaries(grads_out), "duration": duration})

    def _same_as_started(self, node, summaries: list) -> list:
        """``node_started``'s list of summaries when ``summaries`` holds the same ones (the
        usual case: no hook replaced a gradient), so that the two events share one list."""
        started = self._started
        self._started = None
        if started is not None and started[0] is node:
            before = started[1]
            if len(before) == len(summaries) and all(
                    a is b for a, b in zip(before, summaries)):
                return before
        return summaries

    def grad_accumulated(self, task, node, variable, before, after):
        if variable._post_accumulate_hooks:
            self._summary_cache.new_epoch()  # they ran (Note [Summary epochs])
        if after is not None and self._deferring:
            # Note [Events when read]: the user may write the leaf's .grad before this event
            # is built; it describes a copy. When .grad is the gradient the node got (a sum
            # the engine made), its node_started and node_finished events describe it too.
            index = self._started_record
            started = self._deferred[index] if index >= 0 else None
            got = started[4] if started is not None and started[2] is node else None
            if before is None and got and got[0] is not None and got[0] is not after:
                # the engine stored a copy of the gradient the node got: that gradient, held
                # by the node's records and written by no one, is the copy (Note [A stored
                # .grad's copy])
                after = got[0]
            else:
                copy = _rt.make(after._data.copy(order="K"))
                self._grad_snapshot = (after, copy)
                if started is not None and got is not None and any(g is after for g in started[5]):
                    self._deferred[index] = started[:5] + ([copy if g is after else g
                                                            for g in started[5]],)
                after = copy
                log = self._log
                assert log is not None  # set with _deferring
                if log.bytes_left is not None:
                    log.bytes_left -= (copy._data.nbytes
                                       + (0 if before is None else before._data.nbytes))
        elif after is not None and self._summary_cache.lazy:
            self._reach((after,))  # the leaf's .grad
        self._record((Recorder._build_grad_accumulated, self._task_number(task), node, _clock(),
                      list(variable._data.shape), variable.dtype.name, before, after))

    def _build_grad_accumulated(self, record):
        _, number, node, clock, shape, dtype, before, after = record
        what = "stored as" if before is None else "added to"
        leaf = self.leaf_names.get(node.node_id)
        whose = f"{leaf}.grad" if leaf is not None else ".grad of the leaf"
        self._add("grad_accumulated", number, node, clock,
                  f"AccumulateGrad: the gradient was {what} {whose} ({shape} {dtype}).",
                  {"before": self._summary(before), "after": self._summary(after)})

    def _reach(self, tensors) -> None:
        for tensor in tensors:
            if tensor is not None:
                self._reachable[id(tensor._data)] = tensor._data

    def saved_released(self, task, node, count, nbytes):
        self._record((Recorder._build_saved_released, self._task_number(task), node, _clock(),
                      count, nbytes))

    def _build_saved_released(self, record):
        _, number, node, clock, count, nbytes = record
        self._add("saved_released", number, node, clock,
                  f"{self._label(node)} freed {_plural(count, 'saved tensor')} ({nbytes} bytes).",
                  {"count": count, "bytes": nbytes})

    def backward_finished(self, task, duration):
        self._record((Recorder._build_backward_finished, self._task_number(task), None, _clock(),
                      duration))
        self._forget_task(task)

    def _build_backward_finished(self, record):
        _, number, _, clock, duration = record
        ran = self._executed.get(number, 0)
        self._add("backward_finished", number, None, clock,
                  f"Backward finished: {_plural(ran, 'node')} ran.", {"duration": duration})
        self._forget_counts(number)

    def error(self, task, node, exc):
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        where = self._label(node) if node is not None else "backward"
        self._event("error", task, node, f"{where} raised {type(exc).__name__}: {exc}",
                    exception=type(exc).__name__, message=str(exc), traceback=lines)
        self._forget_counts(self._task_number(task))
        self._forget_task(task)


# Note [Events when read]
# -----------------------
# ``continue_()`` over a GPT step records about 650 events, and a person then opens a few nodes.
# Building each event at its callback (a sentence, a dict, summaries) cost more than the pass
# itself, so a debug session's recorder defers them: a hot callback (backward_started,
# node_ready, buffer_added, node_started, node_finished, grad_accumulated, saved_released,
# grad_reduced, grad_cast, grads_materialized, backward_finished) appends a record ``(builder,
# task number, node, clock, ...)`` and ``events`` builds the records in order when something
# reads it; ``event_count`` counts without building. The builder is the code that builds the
# event at once when nothing is deferred, so both give the same events; the counts
# (contributions, nodes run) are the builders' too, kept in order. A record keeps what may
# change before it is built: the clock, the task's number (the recorder forgets a task at its
# end), a buffer's sum's summary (the engine adds into a sum in place), and a copy of a leaf's
# new ``.grad`` (the user may write it once they have control; when the ``.grad`` is the sum the
# engine made, the node's node_started and node_finished records describe the copy too).
# Everything else a record holds is an intermediate gradient that nothing writes (Note [Lazy
# summaries] in _summary.py has the writers), and node names and numbers, for which
# ``name_leaf`` and ``learn_graph`` build what is deferred before they change them. While it
# defers, the engine appends the records of the commonest callbacks itself (``_engine_log``,
# Note [Records the engine appends] in gradviz_ext/_task.py).
#
# The pass's ``backward_started`` record carries the graph as :func:`traverse_graph` found it
# (the nodes must be known before they release what they saved); describing it (node dicts,
# module paths, numbers, the module parameters' names: ``learn_graph``) is its builder's work.
# A debug session takes its graph from that description when first read, and keeps the leaf
# names it knows (``params``, and the caller's variables, read at once) until then
# (``_SessionRecorder.name_when_described``): they are applied right after the event is built,
# as they were right after it was recorded.
#
# The deferring stops (what is deferred is built, the rest is built at once) where the lazy
# summaries stop: before a node that runs code the engine does not control, and for passes
# that hand gradients to the user while they run. It never starts when the caller passed the
# initial gradients (they may write them: ``GraphTask.made_grads`` is False). Before
# ``session.tensor()`` hands out a live tensor, every record is built and every pending
# summary computed (``flush_summaries``). A builder that raises leaves its record and the
# rest deferred.
#
# ``gradviz.record()`` defers too (``_TraceRecorder``; not with ``all_threads``, whose passes
# may interleave): the trace builds the records when read (``Trace.events``, ``Trace.graph``),
# and the recorder builds them at the latest when the next pass starts (``backward_started``
# builds what is deferred first) or the next op is recorded (``node_created``), so a trace
# defers one pass at a time. Unlike a session's, its records hold gradients nobody else keeps,
# so they are bounded: past ``deferred_bytes_limit`` (64 MiB) of gradients held, the pass is
# built and goes on eagerly; and what it builds after the pass is summarized then
# (``lazy_after_pass`` False), not left pending. The leaves' names from the caller's variables
# are read at ``backward_started`` (``_graph_traversed``), while the caller's frame is the one
# that called backward. On the GPT step of bench/models.py recording went from 2.7x a plain
# backward to 1.4x; reading the trace afterwards costs about 6 ms (bench/README.md).
# tests/instrument/test_lazy_summaries.py compares deferred sessions and traces with eager
# ones under each kind of write.
#
# Note [A stored .grad's copy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A leaf whose ``.grad`` was None gets either the gradient its AccumulateGrad received (stolen,
# or a sum the engine made) or a copy of it. While a pass is observed, the records hold that
# gradient, so the engine copies (Note [Stealing the gradient] counts references). The copy's
# values are the gradient's, and the gradient is an intermediate that nothing writes: the
# record of ``grad_accumulated`` describes it instead of copying ``.grad`` a second time (one
# copy of every weight's gradient less per observed training step).


# Note [Node numbers and labels]
# ------------------------------
# Node ids are the engine's, unique in the process: a 7-node graph may hold #0 and #176. What a
# person reads uses a *number* instead: 1, 2, 3... in the order the recorder first walks each
# graph (the root first; 0 for the engine's GraphRoot of several roots), kept for the
# recorder's life, so a trace of several passes numbers each node once. Narration names a node
# by its display name, adding ``#number`` only when another numbered node has the same name
# ("SumBackward0 #3 is ready"), and names a leaf's AccumulateGrad by the leaf when known
# ("AccumulateGrad for fc1.weight"): ``name_leaf`` is called by whoever knows the names (the
# debug session from ``params`` and the caller's variables, ``gradviz.record()`` from the
# frame that called backward).


def narration_label(name: str, leaf_name: str | None, number: int | None, shared: bool) -> str:
    """A node as narration names it (Note [Node numbers and labels]): ``AccumulateGrad for w``
    for a named leaf; ``name #number`` when another node has the same name (``shared``)."""
    if leaf_name is not None:
        return f"{name} for {leaf_name}"
    if shared and number is not None:
        return f"{name} #{number}"
    return name


def _hook_outcome(replaced: bool, changed: bool, what: str, whose: str = "the ") -> str:
    if replaced:
        return f"replaced {whose}{what}" + ("" if changed else " (with equal values)")
    if changed:
        return f"changed {whose}{what} in place"
    return f"left {whose}{what} unchanged"


_runs_outside_code = _task.runs_outside_code
same_items = _task.same_items

_ENGINE_LOGGED = ("node_ready", "buffer_added", "node_started", "node_finished")


def _logs_in_engine(cls) -> bool:
    """Whether the engine may append ``cls``'s records of its commonest events itself (Note
    [Records the engine appends] in gradviz_ext/_task.py): not for a subclass that overrides
    one of their callbacks."""
    return all(getattr(cls, name) is getattr(Recorder, name) for name in _ENGINE_LOGGED)


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
