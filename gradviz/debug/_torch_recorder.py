"""``record_torch``: a real PyTorch backward pass, recorded into a gradviz :class:`Trace`.

PyTorch does not report its engine's decisions, so the recorder observes what it can and
derives the rest (Note [What a PyTorch trace observes]). The result is the same trace format
``gradviz.record()`` writes, so ``gradviz.debug.replay`` and the widget show it unchanged.

Note [What a PyTorch trace observes]
------------------------------------
*Observed* with hooks on every node of the graph, while ``torch.autograd.backward`` runs:
the order in which nodes run (``Node.register_prehook``), what each node received and
returned (pre-hook's ``grad_outputs``; post-hook's ``grad_inputs``), a leaf's ``.grad``
before and after its ``AccumulateGrad``, and the input-buffer summation strategy (below).

*Derived* from the graph and the observed order, the way torch's engine does it
(``torch/csrc/autograd/engine.cpp``): dependency counts (one per edge, roots excluded), the
``buffer_added`` and ``node_ready`` events a finished node causes (in ``next_functions``
order, right after its post-hooks, as ``evaluate_function`` does), ``saved_released`` (torch
frees a node's saved variables after it ran unless the graph is retained) and, for several
roots, the ``GraphRoot`` node torch runs first to hand each root its gradient.

How a second contribution was summed: torch's ``InputBuffer::accumulate`` adds in place into
the buffered gradient, or into the new one, when it holds the only reference to it, else out
of place. The recorder keeps a weak reference and the version counter of every contribution;
at the next hook (the sum has happened by then) a bumped version means in place, otherwise out
of place. After an out-of-place sum the buffer is a fresh tensor the recorder never saw; the
next sum into it is in place by the same rule (a fresh dense tensor with one owner, and grad
mode is off because ``create_graph`` is False).

Note [Buffer sums of a PyTorch trace]
-------------------------------------
``buffer_added.sum`` is the slot's value once torch has added the contribution, which torch
does after the producer's post-hook returns, where the recorder cannot look. So the recorder
adds the contributions itself, in torch's order: the first one (still held by torch's buffer,
known through a weak reference, so that torch's reference counts and hence its in-place
decisions are unchanged) plus the second into a tensor of its own, then each next one into
that. Floating-point addition is commutative, so ``a + b`` has the bits of torch's
``b += a`` or ``a += b``: the sums are torch's, bit for bit.

Not visible from outside, hence not in the trace: tensor pre-hooks and node hooks the user
registered (their effect shows in the gradients), zero materialization, dtype casts and the
forward source line (``node_created.source`` is null). Reading a node's saved tensors for
``node_created`` unpacks them, so a ``saved_tensors_hooks`` unpack hook runs once more.
"""

from __future__ import annotations

import time
import types
import weakref

from .._tensor import Tensor
from ..instrument import Trace, summarize
from ..instrument._nodes import named_pairs
from ..instrument._recorder import narration_label
from ._doctor import doctor as run_doctor
from ._torch_scopes import annotate_torch_modules, module_class_names

__all__ = ["record_torch"]

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
             "ninth", "tenth")
_HOW_TEXT = {
    "stored": "stored in the buffer",
    "accumulated_in_place": "summed into the buffer in place",
    "accumulated_out_of_place": "summed into the buffer",
}
_PENDING_HOW = "accumulated_out_of_place"  # replaced when the sum is observed


def _ordinal(n: int) -> str:
    return _ORDINALS[n - 1] if n <= len(_ORDINALS) else f"{n}th"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


# ---- summaries of torch tensors -----------------------------------------------------------

def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def summarize_torch(tensor) -> dict | None:
    """:func:`gradviz.instrument.summarize` of a torch tensor (same dict, torch's dtype name)."""
    if tensor is None:
        return None
    data = tensor.detach()
    if data.is_conj():
        data = data.resolve_conj()
    if data.is_neg():
        data = data.resolve_neg()
    if data.dtype.is_floating_point and data.dtype.itemsize < 4:
        data = data.float()  # numpy has no bfloat16; the statistics do not need 16 bits
    array = data.cpu().numpy()
    # summarize() reads only ``_data`` and ``dtype.name``
    view = types.SimpleNamespace(_data=array,
                                 dtype=types.SimpleNamespace(name=_dtype_name(tensor.dtype)))
    return summarize(view)


def _summaries(tensors) -> list:
    return [summarize_torch(t) for t in tensors]


# ---- the graph ---------------------------------------------------------------------------

def _is_accumulate_grad(node) -> bool:
    return hasattr(node, "variable")


def _node_kind(node) -> str:
    import torch

    if _is_accumulate_grad(node):
        return "accumulate_grad"
    if isinstance(node, torch.autograd.function.BackwardCFunction):
        return "custom"
    return "builtin"


def _node_name(node) -> str:
    return node.name().removeprefix("torch::autograd::")


def _output_meta(node) -> list:
    metadata = getattr(node, "_input_metadata", None)
    if metadata is None:
        return []
    return [{"shape": list(meta.shape), "dtype": _dtype_name(meta.dtype)} for meta in metadata]


def _saved_of(node) -> list:
    """``(label, tensor or None)`` per tensor the node saved for backward, in a fixed order.

    Built-in nodes expose ``_raw_saved_<name>`` (one SavedTensor or a list of them) next to
    ``_saved_<name>`` (unpacked); custom Functions expose ``_raw_saved_tensors``.
    """
    import torch

    saved_type = torch._C._autograd.SavedTensor
    found = []
    for attribute in sorted(dir(node)):
        if not attribute.startswith("_raw_saved_"):
            continue
        name = attribute[len("_raw_saved_"):]
        try:
            raw = getattr(node, attribute)
            unpacked = getattr(node, "_saved_" + name) if name != "tensors" else node.saved_tensors
        except RuntimeError:  # already freed by an earlier backward
            continue
        if isinstance(raw, saved_type):
            raw, unpacked = [raw], [unpacked]
            labels = [name]
        else:  # a list of tensors (cat's inputs, a custom Function's saved_tensors)
            labels = [f"{name}[{index}]" for index in range(len(raw))]
        if name == "tensors":
            labels = [f"saved_tensors[{index}]" for index in range(len(raw))]
        for label, item, tensor in zip(labels, raw, unpacked):
            if isinstance(item, saved_type):
                found.append((label, tensor if isinstance(tensor, torch.Tensor) else None))
    return found


def _describe(node_id: int, node, outputs: list, names: dict) -> dict:
    label = ""
    leaf_name = None
    if _is_accumulate_grad(node):
        variable = node.variable
        label = f"{list(variable.shape)} {_dtype_name(variable.dtype)}"
        named = names.get(id(variable))
        if named is not None and named[0] is variable:
            leaf_name = named[1]
    elif outputs:
        label = f"{outputs[0]['shape']}"
    info = {"id": node_id, "name": _node_name(node), "kind": _node_kind(node), "label": label,
            "number": node_id + 1}
    if leaf_name is not None:
        info["leaf_name"] = leaf_name
    return info


def _module_of(info: dict) -> dict:
    """``node_created``'s optional ``module`` field, as the graph node has it."""
    return {"module": list(info["module"])} if "module" in info else {}


def _parameter_names(params) -> dict:
    """``{id(tensor): (tensor, name)}`` from ``params``: the rules of ``gradviz.debug.backward``'s
    ``params`` (``gradviz.instrument._nodes.parameter_names``) for torch tensors. ``params`` is an
    ``nn.Module`` (its ``named_parameters()``), a dict of name -> Tensor or an iterable of
    ``(name, Tensor)`` pairs; a tensor listed twice keeps its first name."""
    import torch

    names: dict[int, tuple] = {}
    for name, tensor in named_pairs(params, "record_torch: ", "torch.Tensor",
                                    "a torch.nn.Module"):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"record_torch: params[{name!r}] must be a torch.Tensor, got "
                            f"{type(tensor).__module__}.{type(tensor).__name__}; pass the "
                            "torch model's parameters (a gradviz model's go to "
                            "gradviz.debug.backward)")
        names.setdefault(id(tensor), (tensor, str(name)))
    return names


def _root_edges(roots) -> list:
    """``(node, input_nr)`` per root tensor, as torch's ``gradient_edge`` gives it."""
    edges = []
    for tensor in roots:
        if tensor.grad_fn is not None:
            edges.append((tensor.grad_fn, tensor.output_nr))
        elif tensor.requires_grad:
            # a leaf: its AccumulateGrad node (view_as builds or finds it, changing nothing)
            edges.append((tensor.view_as(tensor).grad_fn.next_functions[0][0], 0))
        else:
            raise RuntimeError(
                "record_torch: a root tensor does not require grad and has no grad_fn; "
                "torch.autograd.backward would fail the same way (call requires_grad_() on "
                "a leaf, or compute the loss from tensors that require grad)")
    return edges


# ---- the recording -----------------------------------------------------------------------

class _TorchRecording:
    """One backward pass: the graph walk, the hooks and the events."""

    def __init__(self, roots, gradients, inputs, retain_graph, names=None, module_types=None):
        self.retain_graph = retain_graph
        self.names = names or {}         # id(leaf) -> (leaf, name), from params
        self.module_types = module_types or {}  # module path -> class names, from params
        self.trace = Trace()
        self.nodes: list = []            # id -> torch node
        self.edges: list = []            # id -> [(child id or None, input_nr)]
        self.outputs: list = []          # id -> output metadata
        self.saved: list = []            # id -> [(label, tensor or None)]
        self._origin = time.perf_counter()
        self._handles: list = []
        self._started: dict[int, float] = {}
        self._before: dict[int, dict | None] = {}
        self._contributions: dict[tuple, int] = {}
        self._buffers: dict[tuple, tuple | None] = {}  # (node, slot) -> (weakref, version)
        self._pending: list = []         # buffer_added events whose "how" is not known yet
        # Note [Buffer sums of a PyTorch trace]
        self._firsts: dict[tuple, weakref.ref] = {}  # (node, slot) -> first contribution
        self._sums: dict[tuple, object] = {}          # (node, slot) -> the recorder's own sum
        self._executed = 0
        self.running: int | None = None
        root_edges = _root_edges(roots)
        self._walk([node for node, _ in root_edges])
        self.graph_root = None
        if len(root_edges) > 1:
            # Note [What a PyTorch trace observes]: torch runs a GraphRoot for several roots
            self.graph_root = len(self.nodes)
            self.nodes.append(None)
            self.edges.append([(self._ids[node], nr) for node, nr in root_edges])
            self.outputs.append([])
            self.saved.append([])
        self.root_edges = [(self._ids[node], nr) for node, nr in root_edges]
        self.gradients = gradients
        self.needed = self._needed(inputs)
        self.dependencies = self._count_dependencies()
        self._build_graph()

    # ---- graph -----------------------------------------------------------------------
    def _walk(self, starts) -> None:
        """Assign ids (discovery order, like gradviz's walk) and read every node, iteratively."""
        self._ids: dict = {}
        stack = []

        def visit(node):
            if node not in self._ids:
                self._ids[node] = len(self.nodes)
                self.nodes.append(node)
                self.edges.append(None)
                self.outputs.append(_output_meta(node))
                self.saved.append(_saved_of(node))
                stack.append(node)

        for node in starts:
            visit(node)
        self.starts = [self._ids[node] for node in starts]
        while stack:
            node = stack.pop()
            children = []
            for child, input_nr in node.next_functions:
                if child is not None:
                    visit(child)
                children.append((None if child is None else self._ids[child], input_nr))
            self.edges[self._ids[node]] = children

    def _needed(self, inputs):
        """Ids of the nodes torch runs: all, or those on a path to an input's AccumulateGrad."""
        if inputs is None:
            return None
        targets = set()
        by_variable = {id(node.variable): node_id for node_id, node in enumerate(self.nodes)
                       if node is not None and _is_accumulate_grad(node)}
        for tensor in inputs:
            if tensor.grad_fn is not None or id(tensor) not in by_variable:
                raise ValueError(
                    "record_torch(inputs=...) supports leaf tensors of the graph only; got a "
                    f"{'non-leaf' if tensor.grad_fn is not None else 'unreachable'} tensor of "
                    f"shape {list(tensor.shape)}. Pass inputs=None, or the leaves instead")
            targets.add(by_variable[id(tensor)])
        self.input_ids = sorted(targets)
        needed = set(targets)
        # reverse topological order: a node is needed when any child is (iterative)
        for node_id in reversed(self._topological()):
            if any(child in needed for child, _ in self.edges[node_id] if child is not None):
                needed.add(node_id)
        return needed

    def _topological(self) -> list:
        indegree = [0] * len(self.nodes)
        for children in self.edges:
            for child, _ in children:
                if child is not None:
                    indegree[child] += 1
        order = [node_id for node_id, count in enumerate(indegree) if count == 0]
        for node_id in order:  # grows while iterating
            for child, _ in self.edges[node_id]:
                if child is not None:
                    indegree[child] -= 1
                    if indegree[child] == 0:
                        order.append(child)
        return order

    def _count_dependencies(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for children in self.edges:
            for child, _ in children:
                if child is not None:
                    counts[child] = counts.get(child, 0) + 1
        return counts

    def _build_graph(self) -> None:
        graph = self.trace.graph
        for node_id, node in enumerate(self.nodes):
            if node is None:
                graph["nodes"].append({"id": node_id, "name": "GraphRoot", "kind": "builtin",
                                       "label": "", "number": 0})
            else:
                graph["nodes"].append(_describe(node_id, node, self.outputs[node_id],
                                                self.names))
            for child, input_nr in self.edges[node_id]:
                if child is not None:
                    graph["edges"].append({"source": node_id, "target": child,
                                           "input_nr": input_nr})
        graph["roots"] = [self.graph_root] if self.graph_root is not None else list(self.starts)
        annotate_torch_modules(graph["nodes"], self.nodes, self.names, self.module_types)
        counts: dict[str, int] = {}
        for info in graph["nodes"]:
            counts[info["name"]] = counts.get(info["name"], 0) + 1
        # narration names (Note [Node numbers and labels] in gradviz/instrument/_recorder.py)
        self._labels = [narration_label(info["name"], info.get("leaf_name"), info["number"],
                                        counts[info["name"]] > 1)
                        for info in graph["nodes"]]

    def name(self, node_id: int) -> str:
        return self.trace.graph["nodes"][node_id]["name"]

    def label(self, node_id: int) -> str:
        """How narration names the node (its name, made unambiguous)."""
        return self._labels[node_id]

    # ---- events ----------------------------------------------------------------------
    def event(self, kind, node_id, text, task=0, **payload) -> dict:
        event = {"kind": kind, "seq": len(self.trace.events), "task": task, "node": node_id,
                 "time": time.perf_counter() - self._origin, "text": text}
        event.update(payload)
        self.trace.events.append(event)
        return event

    def node_created_events(self) -> None:
        for node_id, node in enumerate(self.nodes):
            if node is None:
                continue
            name = self.name(node_id)
            saved = self.saved[node_id]
            needs = getattr(node, "needs_input_grad", None)
            if needs is None:
                needs = [child is not None for child, _ in self.edges[node_id]]
            saves = f"; it saves {_plural(len(saved), 'tensor')} for backward" if saved else ""
            self.event(
                "node_created", node_id, f"The PyTorch graph holds {name}{saves}.", task=None,
                name=name, node_kind=_node_kind(node),
                edges=[{"node": child, "input_nr": nr} for child, nr in self.edges[node_id]],
                outputs=self.outputs[node_id], needs_input_grad=[bool(n) for n in needs],
                saved=[{"slot": slot, "label": label,
                        "shape": [] if tensor is None else list(tensor.shape),
                        "dtype": "unknown" if tensor is None else _dtype_name(tensor.dtype),
                        "hooked": False}
                       for slot, (label, tensor) in enumerate(saved)],
                # torch does not let Python read ctx.set_materialize_grads back: the default
                materialize_grads=True,
                dirty_outputs=[], non_differentiable_outputs=[], grad_dtypes=None, source=None,
                **_module_of(self.trace.graph["nodes"][node_id]))

    def backward_started(self) -> None:
        roots = ([{"node": self.graph_root, "input_nr": 0}] if self.graph_root is not None
                 else [{"node": node_id, "input_nr": nr} for node_id, nr in self.root_edges])
        names = ", ".join(self.label(r["node"]) for r in roots)
        self.event("backward_started", None,
                   f"Backward started from {names} (retain_graph={self.retain_graph}, "
                   "create_graph=False).",
                   roots=roots, retain_graph=self.retain_graph, create_graph=False,
                   inputs=None if self.needed is None else self.input_ids,
                   dependencies={str(k): v for k, v in self.dependencies.items()})
        for root in roots:
            self.ready(root["node"])
        if self.graph_root is not None:
            # GraphRoot hands each root the gradient passed to backward
            node_id = self.graph_root
            self.event("node_started", node_id, "GraphRoot started with 0 of 0 incoming "
                       "gradients.", name="GraphRoot", grads_in=[])
            grads = _summaries(self.gradients)
            self._executed += 1
            self.event("node_finished", node_id,
                       f"GraphRoot finished: {len(grads)} of "
                       f"{_plural(len(grads), 'gradient')} out.",
                       name="GraphRoot", grads_in=[], grads_out=grads, duration=0.0)
            self.hand_out(node_id, list(self.gradients))

    def ready(self, node_id: int) -> None:
        if self.needed is not None and node_id not in self.needed:
            return
        name = self.name(node_id)
        self.event("node_ready", node_id,
                   f"{self.label(node_id)} is ready: every gradient it waits for has arrived.",
                   name=name)

    def hand_out(self, producer: int, grads) -> None:
        """What torch's engine does with a finished node's results: per edge, add to the
        successor's buffer and count down its dependencies (Note [What a PyTorch trace
        observes])."""
        for (child, slot), grad in zip(self.edges[producer], grads):
            if child is None:
                continue
            if self.needed is not None and child not in self.needed:
                continue  # torch skips nodes it will not run: no buffer, never ready
            if grad is not None:
                key = (child, slot)
                count = self._contributions.get(key, 0) + 1
                self._contributions[key] = count
                current = (weakref.ref(grad), grad._version)
                how = "stored" if count == 1 else _PENDING_HOW
                grad_summary = summarize_torch(grad)
                event = self.event(
                    "buffer_added", child, "", slot=slot, producer=producer, how=how,
                    contribution=count, grad=grad_summary,
                    sum=grad_summary if count == 1 else self._sum(key, grad))
                if count == 1:
                    self._buffers[key] = current
                    self._firsts[key] = current[0]
                    self._narrate_buffer(event)
                else:
                    self._pending.append((event, key, self._buffers.get(key), current))
            self.dependencies[child] -= 1
            if self.dependencies[child] == 0:
                del self.dependencies[child]
                self.ready(child)

    def _sum(self, key, grad) -> dict | None:
        """Summary of the buffer ``key`` after ``grad`` is added, as torch's InputBuffer will
        sum it (Note [Buffer sums of a PyTorch trace])."""
        import torch

        running = self._sums.get(key)
        if running is None:  # the first contribution, still held by torch's buffer
            first = self._firsts.pop(key, None)
            running = None if first is None else first()
            if running is None:
                return None
        with torch.no_grad():
            total = running + grad
        self._sums[key] = total
        return summarize_torch(total)

    def _narrate_buffer(self, event) -> None:
        event["text"] = (f"{self.label(event['node'])} input {event['slot']}: "
                         f"{_ordinal(event['contribution'])} contribution, from "
                         f"{self.label(event['producer'])}, {_HOW_TEXT[event['how']]}.")

    def resolve_sums(self) -> None:
        """Decide in place / out of place for the sums torch did since the last hook."""
        for event, key, old, new in self._pending:
            new_tensor = new[0]()
            old_tensor = None if old is None else old[0]()
            if new_tensor is not None and new_tensor._version > new[1]:
                how, buffer = "accumulated_in_place", (new[0], new_tensor._version)
            elif old_tensor is not None and old_tensor._version > old[1]:
                how, buffer = "accumulated_in_place", (old[0], old_tensor._version)
            elif old is None:
                # the buffer is the fresh result of an out-of-place sum, so torch sums in place
                # (Note [What a PyTorch trace observes])
                how, buffer = "accumulated_in_place", None
            else:
                how, buffer = "accumulated_out_of_place", None
            del new_tensor, old_tensor
            event["how"] = how
            self._buffers[key] = buffer
            self._narrate_buffer(event)
        self._pending.clear()

    # ---- hooks -----------------------------------------------------------------------
    def attach(self) -> None:
        for node_id, node in enumerate(self.nodes):
            if node is None:
                continue
            self._handles.append(node.register_prehook(self._prehook(node_id)))
            self._handles.append(node.register_hook(self._posthook(node_id)))

    def detach(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    def _prehook(self, node_id):
        def prehook(grad_outputs):
            self.resolve_sums()
            for slot in range(len(grad_outputs)):  # the buffer was handed over
                self._sums.pop((node_id, slot), None)
                self._firsts.pop((node_id, slot), None)
            node = self.nodes[node_id]
            name = self.name(node_id)
            label = self.label(node_id)
            self.running = node_id
            if _is_accumulate_grad(node):
                self._before[node_id] = summarize_torch(node.variable.grad)
            arrived = sum(1 for g in grad_outputs if g is not None)
            self.event("node_started", node_id,
                       f"{label} started with {arrived} of "
                       f"{_plural(len(grad_outputs), 'incoming gradient')}.",
                       name=name, grads_in=_summaries(grad_outputs))
            self._started[node_id] = time.perf_counter()
        return prehook

    def _posthook(self, node_id):
        def posthook(grad_inputs, grad_outputs):
            duration = time.perf_counter() - self._started.pop(node_id, time.perf_counter())
            self.resolve_sums()
            node = self.nodes[node_id]
            name = self.name(node_id)
            accumulate = _is_accumulate_grad(node)
            if accumulate:
                variable = node.variable
                before = self._before.pop(node_id, None)
                what = "stored as" if before is None else "added to"
                leaf = self.trace.graph["nodes"][node_id].get("leaf_name")
                whose = f"{leaf}.grad" if leaf is not None else ".grad of the leaf"
                self.event("grad_accumulated", node_id,
                           f"AccumulateGrad: the gradient was {what} {whose} "
                           f"({list(variable.shape)} {_dtype_name(variable.dtype)}).",
                           before=before, after=summarize_torch(variable.grad))
            saved = self.saved[node_id]
            if saved and not self.retain_graph:
                nbytes = sum(t.numel() * t.element_size() for _, t in saved if t is not None)
                self.event("saved_released", node_id,
                           f"{self.label(node_id)} freed {_plural(len(saved), 'saved tensor')} "
                           f"({nbytes} bytes).",
                           count=len(saved), bytes=nbytes)
            self._executed += 1
            produced = sum(1 for g in grad_inputs if g is not None)
            label = self.label(node_id)
            text = (f"{label} finished." if accumulate else
                    f"{label} finished: {produced} of {_plural(len(grad_inputs), 'gradient')} out.")
            self.event("node_finished", node_id, text, name=name,
                       grads_in=_summaries(grad_outputs), grads_out=_summaries(grad_inputs),
                       duration=duration)
            self.running = None
            self.hand_out(node_id, grad_inputs)
        return posthook

    def backward_finished(self, duration: float) -> None:
        self.resolve_sums()
        self.event("backward_finished", None,
                   f"Backward finished: {_plural(self._executed, 'node')} ran.",
                   duration=duration)

    def error(self, exc: BaseException) -> None:
        import traceback

        self.resolve_sums()
        node_id = self.running
        where = self.label(node_id) if node_id is not None else "backward"
        self.event("error", node_id, f"{where} raised {type(exc).__name__}: {exc}",
                   exception=type(exc).__name__, message=str(exc),
                   traceback=traceback.format_exception(type(exc), exc, exc.__traceback__))


def _as_list(value) -> list:
    import torch

    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        return [value]
    return list(value)


def _gradients(roots, gradient) -> list:
    """The gradient of each root, as ``torch.autograd.backward`` would make it."""
    import torch

    given = _as_list(gradient) if gradient is not None else [None] * len(roots)
    if len(given) != len(roots):
        raise ValueError(f"record_torch: got {len(roots)} root tensors but {len(given)} "
                         "gradients; pass one gradient per root (None for a scalar root)")
    grads = []
    for index, (root, grad) in enumerate(zip(roots, given)):
        if grad is None:
            if root.numel() != 1:
                raise RuntimeError(
                    f"record_torch: root {index} has shape {list(root.shape)}; grad can be "
                    "implicitly created only for scalar outputs. Pass gradient= with one "
                    "tensor of that shape per root")
            grad = torch.ones_like(root, memory_format=torch.preserve_format)
        grads.append(grad)
    return grads


def _record(loss, inputs=None, gradient=None, retain_graph=None, params=None, doctor=False):
    """:func:`record_torch`, also returning the torch nodes by trace id (for tests)."""
    import torch

    if not isinstance(loss, (list, tuple, torch.Tensor)):  # a gradviz tensor, a number, ...
        hint = ("; a gradviz tensor's backward is stepped through with gradviz.debug.backward(loss) "
                "and diagnosed with gradviz.debug.doctor(loss)") if isinstance(loss, Tensor) else ""
        raise TypeError("record_torch takes a torch.Tensor (or a sequence of them) as loss, "
                        f"got {type(loss).__name__}{hint}")
    roots = _as_list(loss)
    if not roots or not all(isinstance(t, torch.Tensor) for t in roots):
        raise TypeError("record_torch takes a torch.Tensor (or a sequence of them) as loss, "
                        f"got {type(loss).__name__}")
    names = _parameter_names(params)  # a bad params fails before the pass runs
    gradients = _gradients(roots, gradient)
    inputs = None if inputs is None else _as_list(inputs)
    retain = bool(retain_graph) if retain_graph is not None else False  # create_graph is False
    report = None
    if doctor:  # before the backward, which frees what the doctor's own pass needs
        report = run_doctor(roots, gradient, params=params).to_dict()
    recording = _TorchRecording(roots, gradients, inputs, retain, names,
                                module_class_names(params))
    recording.trace.doctor = report
    recording.node_created_events()
    recording.attach()
    started = time.perf_counter()
    try:
        recording.backward_started()
        torch.autograd.backward(roots, grad_tensors=gradients, retain_graph=retain,
                                inputs=inputs)
    except Exception as exc:
        recording.error(exc)
        try:
            exc.gradviz_trace = recording.trace  # type: ignore[attr-defined]  # an attribute added to the user's exception
        except AttributeError:  # an exception type without a __dict__
            pass
        raise
    else:
        recording.backward_finished(time.perf_counter() - started)
    finally:
        recording.detach()
    return recording.trace, list(recording.nodes)


def record_torch(loss, inputs=None, gradient=None, retain_graph=None, *, params=None,
                 doctor=False) -> Trace:
    """Run PyTorch's backward from ``loss`` and record it into a gradviz :class:`Trace`.

    The trace holds the real torch graph (names, ``next_functions`` edges) and one event per
    engine step, in torch's real execution order, so :func:`gradviz.debug.replay` and the
    widget step through it like a gradviz backward. The arguments mean what they mean for
    ``torch.autograd.backward``; afterwards every ``.grad`` is what that call leaves, and no
    hook stays attached. What is observed and what is derived: ``docs/events.md``,
    "Traces from PyTorch".

    Parameters
    ----------
    loss : torch.Tensor or sequence of torch.Tensor
        The root(s) of backward.
    inputs : sequence of torch.Tensor, optional
        Accumulate into these leaves only (leaf tensors only).
    gradient : torch.Tensor or sequence, optional
        The gradient of each root (may be omitted for scalar roots).
    retain_graph : bool, optional
        Keep the saved tensors (then no ``saved_released`` events), default False.
    params : torch.nn.Module or dict, optional
        Names for the leaves, as ``gradviz.debug.backward(params=...)`` takes them: a module
        (its ``named_parameters()``, e.g. ``"fc1.weight"``), a dict of name -> Tensor such as
        ``dict(model.named_parameters())``, or ``(name, Tensor)`` pairs. Each leaf it names
        gets ``leaf_name`` in the trace's graph, so the widget and ``save_html`` pages label
        its ``AccumulateGrad`` node ``fc1.weight · AccumulateGrad``; other leaves stay unnamed.
    doctor : bool
        Also run the whole-model gradient doctor (``gradviz.debug.doctor(loss, gradient,
        params=params)``) on the live graph before the backward, and keep its report in
        ``trace.doctor`` (``DoctorReport.to_dict()``; its node ids are the trace's): a replay
        of the trace then offers Check gradients, which shows that report, and so does its
        HTML page.

    Raises
    ------
    Exception
        Whatever torch's backward raised; the partial trace, ending with an ``error`` event,
        is attached to the exception as ``gradviz_trace``.
    TypeError
        If ``params`` is not a module, a dict or ``(name, torch.Tensor)`` pairs (before
        anything runs).

    Examples
    --------
    >>> import torch, gradviz
    >>> w = torch.tensor([0.5, -1.0], requires_grad=True)
    >>> trace = gradviz.debug.record_torch((w * w).sum())
    >>> [n["name"] for n in trace.graph["nodes"]]
    ['SumBackward0', 'MulBackward0', 'AccumulateGrad']
    >>> [e["name"] for e in trace.events if e["kind"] == "node_started"]
    ['SumBackward0', 'MulBackward0', 'AccumulateGrad']
    >>> w.grad
    tensor([ 1., -2.])
    >>> gradviz.debug.replay(trace).continue_()
    >>> layer = torch.nn.Linear(2, 1)
    >>> trace = gradviz.debug.record_torch(layer(w).sum(), params=layer)
    >>> sorted(n["leaf_name"] for n in trace.graph["nodes"] if "leaf_name" in n)
    ['bias', 'weight']
    """
    return _record(loss, inputs=inputs, gradient=gradient, retain_graph=retain_graph,
                   params=params, doctor=doctor)[0]
