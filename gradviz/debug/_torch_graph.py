"""The gradient doctor on a real PyTorch graph: what :func:`gradviz.debug.doctor` reads from
torch's nodes, and its extra backward pass there.

Note [Doctor on PyTorch graphs]
-------------------------------
``doctor(loss)`` for a ``torch.Tensor`` loss walks torch's graph (``grad_fn``,
``next_functions``) and checks every custom ``torch.autograd.Function`` node with the same
finite differences and hints as a gradviz graph, re-running the Function with torch
(``_torch_rerun``). What differs is how much the graph tells:

- forward arguments: inside :func:`gradviz.debug.capture` every argument was recorded (Note
  [Capturing PyTorch Functions]). Otherwise torch keeps none, so they are rebuilt
  (:func:`recorded_inputs`): a leaf from its ``AccumulateGrad`` (``.variable``); a non-leaf
  from the tensors the Function saved (matched to the input's edge by ``grad_fn`` and
  ``output_nr``), from a tensor another node saved for that edge, or by re-running the custom
  Function that produced it; an input that needs no gradient (no edge) from the saved tensors
  no edge accounts for. A Function with non-tensor arguments cannot be rebuilt (torch keeps
  no trace of them beyond ``needs_input_grad``) and is listed as skipped, with the reason;
- the extra backward pass (``check_backward``): on a graph of built-in nodes only, the
  doctor's own walk (Note [The doctor's own walk]); with a custom Function,
  ``torch.autograd.grad`` with
  ``retain_graph=True`` from the roots to the leaves, so no leaf's ``.grad`` is written and
  the saved tensors are kept, with a pre-hook and a post-hook on every node (removed after)
  to find the first node whose backward produced NaN/Inf and the node whose backward raised.
  ``.grad`` of non-leaf tensors that ``retain_grad()`` is put back as it was. torch casts a
  gradient to its input's dtype inside its engine, where no hook sees it, so a cast is
  reported from the doctor's re-run of the Function instead (its backward's own return
  value, compared with the recorded argument's dtype);
- mutated saved tensors: every saved tensor is unpacked; torch refuses one whose version
  moved since it was saved, and that refusal is the finding (values written through
  ``.data`` bypass the version counter and are not seen).

Nodes are numbered in the order :func:`gradviz.debug.record_torch` numbers them (the order
the walk first meets them), so a report's node ids match a recorded trace of the same graph.
"""

from __future__ import annotations

import gc
import heapq
import math
import re
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from ._arguments import choose_placing
from ._capture import TORCH_RECORD, torch_recording_paused
from ._report import Finding
from ._torch_recorder import _is_accumulate_grad, _saved_of
from ._torch_rerun import TorchRerun, as_array

__all__ = ["TorchGraph", "is_custom", "recorded_inputs", "graph_values", "tensor_positions"]

_HINT = "build the graph inside gradviz.debug.capture() to record them"
_MODIFIED = "modified by an inplace operation"


def is_custom(node):
    """A custom ``torch.autograd.Function``'s node (its ctx)."""
    return isinstance(node, torch.autograd.function.BackwardCFunction)


def tensor_positions(node):
    """The forward argument position of each edge of a custom node, when it can be told."""
    record = getattr(node, TORCH_RECORD, None)
    if record is not None:
        return record.tensor_positions
    if is_custom(node) and len(node.needs_input_grad) == len(node.next_functions):
        return tuple(range(len(node.next_functions)))
    return None


class TorchGraph:
    """The doctor's view of a PyTorch graph (the interface of ``_gradviz_graph.GradvizGraph``)."""

    rerun = TorchRerun
    torch = True

    def __init__(self, roots, nodes):
        self.roots = roots
        self.nodes = nodes
        self.custom = [n for n in nodes if is_custom(n)]
        self.ids = _discovery_ids([r.grad_fn for r in roots if r.grad_fn is not None])
        self._known = None

    def node_id(self, node):
        return self.ids.get(node)

    @contextmanager
    def paused(self):
        with torch_recording_paused():
            yield

    def saved_findings(self):
        return _saved_findings(self.nodes)

    def backward_pass(self, gradient, report):
        return _backward_pass(self.roots, gradient, self.nodes, report)

    def arguments(self, node):
        if self._known is None:
            self._known = graph_values(self.nodes)
        return recorded_inputs(node, self._known)


def _discovery_ids(starts):
    """``{node: id}`` in the order record_torch's walk first meets the nodes."""
    ids: dict[Any, int] = {}
    stack = []
    for node in starts:
        if node not in ids:
            ids[node] = len(ids)
            stack.append(node)
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is not None and child not in ids:
                ids[child] = len(ids)
                stack.append(child)
    return ids


# ---- forward arguments ------------------------------------------------------------------

def graph_values(nodes):
    """``{(node, output_nr): tensor}``: values of graph edges the graph still holds (a leaf's
    current value, every saved tensor still at its saved version, under the edge it is the
    value of)."""
    known = {}
    for node in nodes:
        if _is_accumulate_grad(node):
            known[(node, 0)] = node.variable.detach()
            continue
        for _, tensor in _saved_of(node):  # skips tensors torch refuses to unpack (modified)
            if tensor is not None and tensor.grad_fn is not None:
                known.setdefault((tensor.grad_fn, tensor.output_nr), tensor.detach())
    return known


def recorded_inputs(node, known, trail=()):
    """The node's forward arguments, or ``(None, reason)`` when they cannot be known (Note
    [Doctor on PyTorch graphs])."""
    record = getattr(node, TORCH_RECORD, None)
    if record is not None:
        return tuple(record.args), None
    needs = node.needs_input_grad
    edges = node.next_functions
    if len(needs) != len(edges):
        return None, (f"{len(needs) - len(edges)} of its {len(needs)} forward arguments are "
                      f"not tensors, and PyTorch keeps no record of them ({_HINT})")
    try:
        saved = node.saved_tensors
    except RuntimeError as exc:
        if _MODIFIED in str(exc):
            return None, f"a tensor it saved was modified in place after forward ({_HINT})"
        return None, (f"its saved tensors were freed by a backward without retain_graph=True "
                      f"and its forward arguments were not recorded ({_HINT})")
    args = [None] * len(needs)
    constants = []   # positions of tensor arguments that do not require grad
    used: set[int] = set()  # indices of saved tensors matched to an argument
    for position, (next_node, input_nr) in enumerate(edges):
        if next_node is None:
            constants.append(position)
            continue
        if _is_accumulate_grad(next_node):
            variable = next_node.variable
            args[position] = variable.detach().clone()
            used.update(i for i, t in enumerate(saved) if t is variable)  # a saved leaf
            continue
        match = next((i for i, t in enumerate(saved) if t is not None
                      and t.grad_fn is next_node and t.output_nr == input_nr), None)
        if match is not None:
            args[position] = saved[match].detach().clone()
            used.add(match)
            continue
        value = _edge_value(next_node, input_nr, known, trail + (node,))
        if value is None:
            return None, (f"input {position} (from {next_node.name()}) was not saved for "
                          f"backward and cannot be recomputed ({_HINT})")
        args[position] = value.clone()
    if constants and not _place_constants(node, args, constants, saved, used, known):
        return None, f"input {constants[0]} does not require grad and was not recorded ({_HINT})"
    return tuple(args), None


def _place_constants(node, args, constants, saved, used, known):
    """Fill the arguments that need no gradient from the saved tensors no edge accounts for
    (:func:`gradviz.debug._arguments.choose_placing`)."""
    spare = [t for i, t in enumerate(saved) if t is not None and i not in used
             and t.grad_fn is not node]

    def run(trial):
        with torch.no_grad():
            return node._forward_cls.apply(*_copies(trial))

    def same(output, value):
        return (isinstance(output, torch.Tensor) and output.shape == value.shape
                and torch.allclose(output, value, equal_nan=True))

    return choose_placing(node, args, constants, spare, known,
                          lambda tensor: tensor.detach().clone(), run, same)


def _copies(args):
    """Arguments for a forward run here: tensors cloned (a forward may modify its inputs in
    place), the rest as they are."""
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


# How many custom Functions deep _edge_value re-runs forwards to find one argument.
_RERUN_DEPTH = 16


def _edge_value(node, output_nr, known, trail):
    """The value of edge ``(node, output_nr)``: from ``known``, or for a custom Function's
    output by re-running its forward (without grad) on its rebuilt arguments."""
    value = known.get((node, output_nr))
    if value is not None or not is_custom(node) or node in trail or len(trail) > _RERUN_DEPTH:
        return value
    args, _ = recorded_inputs(node, known, trail)
    if args is None:
        return None
    try:
        with torch.no_grad():
            outputs = node._forward_cls.apply(*_copies(args))
    except Exception:  # noqa: BLE001 - the user's forward may raise anything; then unknown
        return None
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for nr, output in enumerate(outputs):
        if isinstance(output, torch.Tensor):
            known.setdefault((node, nr), output)
    return known.get((node, output_nr))


# ---- mutated saved tensors ----------------------------------------------------------------

def _saved_findings(nodes):
    """A mutated_saved finding per saved tensor torch refuses to unpack because an in-place
    operation moved its version (backward would raise for it)."""
    findings = []
    for node in nodes:
        if _is_accumulate_grad(node):
            continue
        if is_custom(node):
            items = [(f"saved tensor {i}", raw) for i, raw in enumerate(_raw_saved(node))]
        else:
            items = [(f"its saved {name[len('_raw_saved_'):]}", _raw_saved(node, name))
                     for name in sorted(dir(node)) if name.startswith("_raw_saved_")]
        for label, raw in items:
            for item in raw if isinstance(raw, (list, tuple)) else (raw,):
                error = _unpack_error(item)
                if error is not None:
                    findings.append(_mutated_finding(node, label, error))
                    break
    return findings


def _raw_saved(node, name="_raw_saved_tensors"):
    """A node's SavedTensor (or list of them) ``name``; nothing once freed."""
    try:
        return getattr(node, name)
    except RuntimeError:
        return ()


def _unpack_error(item):
    unpack = getattr(item, "unpack", None)
    if unpack is None:
        return None
    try:
        unpack()
    except RuntimeError as exc:
        if _MODIFIED in str(exc):
            return exc
    return None


_VERSION = re.compile(r"modified by an inplace operation: (.*), which is (.*), is at "
                      r"version (\d+); expected version (\d+) instead")


def _mutated_finding(node, label, error):
    """The finding for a saved tensor torch refuses to unpack; torch's message says what the
    tensor is and the versions."""
    match = _VERSION.search(str(error))
    if match is not None:
        tensor, origin, now, saved = match.groups()
        what = f"{label} ({tensor}, {origin})"
        moved = f"moved its version from {saved} to {now}"
    else:
        what, moved = label, f"moved its version ({str(error).split(' Hint:')[0]})"
    message = (f"{node.name()}: {what} was changed after it was saved; an in-place operation "
               f"{moved}, so backward will raise")
    function = node._forward_cls if is_custom(node) else None
    return Finding(kind="mutated_saved", function=function, node=node, input_index=None,
                   message=message, hint="clone the tensor before modifying it in place",
                   details={"saved": label, "version_moved": True})


# ---- the extra backward pass ----------------------------------------------------------------

def _nonfinite(grads):
    """(slot, nan, inf, index of the first) of the first gradient with NaN/Inf entries, or
    None."""
    for slot, grad in enumerate(grads):
        if not isinstance(grad, torch.Tensor) or not grad.dtype.is_floating_point:
            continue
        bad = ~torch.isfinite(grad.detach())
        if bool(bad.any()):
            first = np.unravel_index(int(bad.reshape(-1).nonzero()[0, 0]), tuple(grad.shape))
            return (slot, int(torch.isnan(grad).sum()), int(torch.isinf(grad).sum()),
                    tuple(int(i) for i in first))
    return None


class _TorchPass:
    """What the hooks saw in the doctor's backward pass (the fields ``_pass_findings`` reads
    from gradviz's pass observer)."""

    def __init__(self):
        self.first_nonfinite = None
        self.casts = []       # torch casts inside its engine, unseen (Note [Doctor on ...])
        self.failure = None   # (node, exception) of a backward that raised
        self.grads_in = {}    # custom node -> the gradients it received (arrays)
        self.grads_out = {}   # custom node -> the gradients it returned, by edge (arrays)
        self.running = []
        self.leaf_grads = None  # id(leaf) -> its gradient (a tensor or None), once finished

    def prehook(self, node):
        def hook(grad_outputs):
            self.running.append(node)
            if is_custom(node):
                self.grads_in[node] = [as_array(g) if isinstance(g, torch.Tensor) else None
                                       for g in grad_outputs]
        return hook

    def posthook(self, node):
        def hook(grad_inputs, grad_outputs):
            if self.running and self.running[-1] is node:
                self.running.pop()
            if is_custom(node):
                self.grads_out[node] = [as_array(g) if isinstance(g, torch.Tensor) else None
                                        for g in grad_inputs]
            if self.first_nonfinite is None:
                produced = _nonfinite(grad_inputs)
                if produced is not None:
                    self.first_nonfinite = (node, produced, _nonfinite(grad_outputs), None)
        return hook


def _retained(nodes):
    """``[(tensor, its .grad)]`` for the non-leaf tensors of this graph that ``retain_grad()``:
    ``torch.autograd.grad`` writes their ``.grad`` (torch runs retain_grad hooks in any
    backward), and nothing in the graph leads to them, so they are found among all objects."""
    members = set(nodes)
    found = []
    is_tensor: dict[type, bool] = {}  # by type(), not isinstance(): some objects warn when __class__ is read
    for obj in gc.get_objects():
        kind = type(obj)
        tensor = is_tensor.get(kind)
        if tensor is None:
            tensor = is_tensor[kind] = issubclass(kind, torch.Tensor)
        if tensor and obj.retains_grad and obj.grad_fn in members:
            found.append((obj, obj.grad))
    return found


def _backward_pass(roots, gradient, nodes, report):
    """One backward pass that changes nothing the user sees (Note [Doctor on PyTorch graphs]);
    a graph of built-in nodes only is walked here (Note [The doctor's own walk])."""
    if gradient is None:
        grads = [torch.ones_like(r) for r in roots]
    else:
        grads = [gradient] if isinstance(gradient, torch.Tensor) else list(gradient)
    leaves = [n.variable for n in nodes if _is_accumulate_grad(n)]
    observer = _TorchPass()
    if not leaves:
        return observer
    if all(callable(node) for node in nodes):  # no custom Function (its ctx is not callable)
        return _walk(roots, grads, nodes, observer, report)
    retained = _retained(nodes)
    handles = []
    try:
        for node in nodes:
            if not _is_accumulate_grad(node):
                handles.append(node.register_prehook(observer.prehook(node)))
                handles.append(node.register_hook(observer.posthook(node)))
        captured = torch.autograd.grad(list(roots), leaves, grads, retain_graph=True,
                                       allow_unused=True)
        # the leaves' gradients, for the model-level checks (``_model_checks``)
        observer.leaf_grads = {id(leaf): grad for leaf, grad in zip(leaves, captured)}
    except Exception as exc:  # noqa: BLE001 - the user's backward may raise anything
        if str(exc).startswith("Trying to backward through the graph a second time"):
            report.notes.append(
                "the graph's saved tensors were already freed by a backward() without "
                "retain_graph=True, so the NaN/Inf check could not run")
        elif observer.running:
            observer.failure = (observer.running[-1], exc)
        else:
            report.notes.append(f"the backward pass could not start: {type(exc).__name__}: {exc}")
    finally:
        for handle in handles:
            handle.remove()
        for tensor, grad in retained:
            if tensor.grad is not grad:
                tensor.grad = grad
    return observer


# Note [The doctor's own walk]
# ----------------------------
# torch's engine runs the ``retain_grad()`` hooks of every node it executes, also in
# ``torch.autograd.grad``, and those write ``.grad`` of tensors that nothing in the graph leads
# to: putting them back needs a search among all live objects (``_retained``), which costs far
# more than the backward itself (0.1 s and up in a session with a few hundred thousand
# objects). A graph of built-in nodes only does not need the engine: every built-in node is
# callable (``node(*grad_outputs)`` runs its backward formula and nothing else), so the doctor
# walks it itself, in the engine's order (a node runs once every node above it has; among the
# ready ones, the highest sequence number first, as torch's CPU queue does), adding the
# gradients that meet at a node's input (summed down to the input's shape and cast to its
# dtype, as the engine's ``validate_outputs`` does) and giving ``AccumulateGrad`` nodes' sums
# to the model-level checks instead of writing ``.grad``; a node that receives no gradient
# at all passes none on. No hook runs in this walk (the user's
# tensor and node hooks neither: a hook that changes gradients is not seen), no ``.grad`` is
# written, and the first node whose outputs hold NaN/Inf is found from each output's sum (a
# finite sum means finite entries; a non-finite one is checked entry by entry). A graph with
# a custom Function goes through the engine as before: its node (the Function's ctx) is not
# callable, and the engine's handling of what a custom backward returns (materialized zeros,
# shapes summed down, dtypes cast) is part of what the doctor checks.


def _walk(roots, grads, nodes, observer, report):
    """The doctor's backward pass over a graph of built-in nodes (Note [The doctor's own
    walk]); fills ``observer`` as the engine's hooks would."""
    waiting: dict[Any, int] = {}
    for node in nodes:
        for child, _ in node.next_functions:
            if child is not None:
                waiting[child] = waiting.get(child, 0) + 1
    buffers: dict[Any, list] = {}
    metadata: dict[Any, list] = {}

    def add(node, nr, grad):
        # as the engine's validate_outputs: sum a broadcast gradient down to the input's
        # shape (built-in formulas leave that to the engine), cast to its dtype
        shapes = metadata.get(node)
        if shapes is None:
            shapes = metadata[node] = [(tuple(m.shape), m.dtype) for m in node._input_metadata]
        if nr < len(shapes):
            shape, dtype = shapes[nr]
            if tuple(grad.shape) != shape:
                grad = grad.sum_to_size(shape)
            if grad.dtype != dtype:
                grad = grad.to(dtype)
        buffer = buffers.get(node)
        if buffer is None:
            buffer = buffers[node] = [None] * max(len(shapes), nr + 1)
        buffer[nr] = grad if buffer[nr] is None else buffer[nr] + grad

    for root, grad in zip(roots, grads):
        if root.grad_fn is not None:
            add(root.grad_fn, root.output_nr, grad)
    ready = [(-n._sequence_nr(), order, n) for order, n in enumerate(buffers)
             if waiting.get(n, 0) == 0]
    heapq.heapify(ready)
    leaf_grads: dict[Any, object] = {}
    counter = len(ready)
    with torch.no_grad():
        while ready:
            _, _, node = heapq.heappop(ready)
            buffer = buffers.pop(node, None) or [None]
            if _is_accumulate_grad(node):
                leaf_grads[id(node.variable)] = buffer[0]
                continue
            try:
                if all(grad is None for grad in buffer):
                    outputs = (None,) * len(node.next_functions)
                else:
                    outputs = node(*buffer)
            except Exception as exc:  # noqa: BLE001 - a backward may raise anything
                if str(exc).startswith("Trying to backward through the graph a second time"):
                    report.notes.append(
                        "the graph's saved tensors were already freed by a backward() without "
                        "retain_graph=True, so the NaN/Inf check could not run")
                else:
                    observer.failure = (node, exc)
                return observer
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            if observer.first_nonfinite is None:
                produced = _nonfinite_by_sum(outputs)
                if produced is not None:
                    observer.first_nonfinite = (node, produced, _nonfinite_by_sum(buffer), None)
            for (child, nr), grad in zip(node.next_functions, outputs):
                if child is None:
                    continue
                if grad is not None:
                    add(child, nr, grad)
                left = waiting[child] = waiting[child] - 1
                if left == 0:
                    counter += 1
                    heapq.heappush(ready, (-child._sequence_nr(), counter, child))
    observer.leaf_grads = {id(n.variable): leaf_grads.get(id(n.variable))
                           for n in nodes if _is_accumulate_grad(n)}
    return observer


def _nonfinite_by_sum(grads):
    """:func:`_nonfinite`, looking entry by entry only at a gradient whose sum is not finite."""
    for grad in grads:
        if isinstance(grad, torch.Tensor) and grad.dtype.is_floating_point \
                and not math.isfinite(float(grad.sum())):
            return _nonfinite(grads)
    return None
