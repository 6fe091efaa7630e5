"""The engine on one screen: gradviz's backward pass written plainly, to be read first.

The engine that runs ``loss.backward()`` (``gradviz_ext/_task.py``) is the same algorithm made
fast and steppable: counts kept on nodes, a hand-written heap, gradients stolen by reference
count, partial passes, exposed input buffers. This module is the *living definition* of what
it does and in which order (Note [Engine order] there): it runs a graph the way PyTorch's
engine does and calls the same observer methods with the same values, so a ``Recorder``
writes the identical event stream. ``tests/engine/test_reference_engine.py`` checks that on
random programs (hooks, fan-in, multi-output ops, custom Functions, in-place writes, second
passes, several roots, ``create_graph``).

What it leaves out: ``inputs=`` and ``autograd.grad`` (partial passes), anomaly mode, and
``ctx.input_grad_buffers``, which it never exposes (the contract allows None always).

>>> import gradviz as torch
>>> from gradviz.autograd.reference_engine import backward
>>> x = torch.tensor([1.0, 2.0], requires_grad=True)
>>> backward((x * x).sum())
>>> x.grad
tensor([2., 4.])
"""

from __future__ import annotations

import heapq
import time

import numpy as np

from gradviz_ext import engine as _engine

from . import grad_mode
from ._functional import _as_tuple, _make_grads

__all__ = ["backward"]


class _Task:
    """What an observer (and a custom Function's ctx) may ask of a running backward pass."""

    def __init__(self, roots, graph_root, retain_graph, create_graph):
        self.roots, self.graph_root = roots, graph_root
        self.keep_graph, self.create_graph = retain_graph, create_graph
        self.dependencies_left: dict = {}
        self.current = self._exposed_to = None
        self._captures = self._retains = self._exec_info = None  # no partial passes here

    def dependencies(self):
        return {node: count for node, count in self.dependencies_left.items() if count > 0}

    def expose_input_buffers(self, node):
        return [(None, "the reference engine never exposes buffers")] * len(node.next_functions)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, observer=None):
    """``gradviz.autograd.backward`` run by the reference engine, reporting to ``observer``."""
    outputs = _as_tuple(tensors, "tensors")
    if grad_tensors is None:
        grad_tensors = (None,) * len(outputs)
    grads = _make_grads(outputs, _as_tuple(grad_tensors, "grad_tensors"))
    roots = [_engine.gradient_edge(tensor) for tensor in outputs]
    keep = create_graph if retain_graph is None else retain_graph
    if len(roots) == 1:  # the root node itself receives the gradient
        graph_root, first = roots[0][0], [None] * max(roots[0][0].num_inputs, 1)
        first[roots[0][1]] = grads[0]
    else:  # several roots: the engine's GraphRoot hands out the gradients
        graph_root, first = _engine.GraphRoot(roots, list(grads)), []
    task = _Task(roots, graph_root, keep, create_graph)
    # 1. dependencies: how many edges point at each node reachable from the root
    stack = [graph_root]
    while stack:
        for next_node, _ in stack.pop().next_functions:
            if next_node is not None:
                task.dependencies_left[next_node] = task.dependencies_left.get(next_node, 0) + 1
                if task.dependencies_left[next_node] == 1:
                    stack.append(next_node)
    # 2. the ready queue: higher sequence number first, then first come (PyTorch's CPU queue)
    ready: list = []
    pushed = [0]

    def push(node, buffer):
        pushed[0] += 1
        heapq.heappush(ready, (-node._seq, pushed[0], node, buffer))

    buffers: dict = {}  # node -> (grads, owned slots): its input buffer while not ready
    push(graph_root, (first, set()))
    observer = observer or _engine.Observer()
    observer.backward_started(task)
    observer.node_ready(task, graph_root)
    started = time.perf_counter()
    outer = _engine.set_current_graph_task(task)
    try:
        # every node runs in the grad mode create_graph says; numpy stays quiet about inf/NaN
        with grad_mode.set_grad_enabled(create_graph), np.errstate(all="ignore"):
            while ready:
                _, _, node, (grads, owned) = heapq.heappop(ready)
                task.current = node
                try:
                    outputs = _run_node(task, node, list(grads), observer)
                except BaseException as exc:
                    observer.error(task, node, exc)
                    raise
                task.current = None
                _hand_on(task, node, outputs, buffers, push, observer)
    finally:
        _engine.set_current_graph_task(outer)
    observer.backward_finished(task, time.perf_counter() - started)


def _run_node(task, node, grads, observer):
    """One node, in PyTorch's order; returns what it hands to each of its edges."""
    began = time.perf_counter()
    observer.node_started(task, node, list(grads))
    for slot, hooks in list((node._tensor_pre_hooks or {}).items()):  # 1. tensor pre-hooks
        for hook in list(hooks):
            before = _copy(grads[slot])
            result = hook(grads[slot])
            if result is not None:
                grads[slot] = result
            observer.prehook(task, node, hook, slot, before, grads[slot], result is not None)
    for hook in list(node._pre_hooks or ()):  # 2. node pre-hooks
        before = [_copy(g) for g in grads]
        result = hook(tuple(grads))
        if result is not None:
            grads = list(result)
        observer.prehook(task, node, hook, -1, before, list(grads), result is not None)
    hook_grads = grads  # post-hooks see the gradients before zeros are materialized
    if isinstance(node, _engine.AccumulateGrad):  # 3a. a leaf: .grad += gradient
        outputs = []
        if grads and grads[0] is not None:
            _accumulate(task, node, grads[0], observer)
    elif all(g is None for g in grads) and node._kind() == "builtin" and grads:
        outputs = [None] * len(node.next_functions)  # 3b. nothing arrived: nothing to do
    else:
        if node._materializes_grads():  # 3c. zeros for missing gradients, then backward
            grads = _materialize(task, node, grads, observer)
        outputs = _validate(task, node, node._apply_grads(grads), observer)
        if node._kind() == "builtin":  # PyTorch computes nothing for edges without a node
            outputs = [g if edge[0] is not None else None
                       for g, edge in zip(outputs, node.next_functions)]
    for hook in list(node._post_hooks or ()):  # 4. post-hooks
        before = [_copy(g) for g in outputs]
        result = hook(tuple(outputs), tuple(hook_grads))
        if result is not None:
            outputs = list(result)
        observer.posthook(task, node, hook, list(outputs), list(hook_grads), result is not None,
                          before)
    if not task.keep_graph and not node._released:  # 5. free what forward saved
        count, nbytes = node.saved_tensor_count()
        node.release_variables()
        if count:
            observer.saved_released(task, node, count, nbytes)
    observer.node_finished(task, node, list(grads), list(outputs), time.perf_counter() - began)
    return outputs


def _hand_on(task, node, outputs, buffers, push, observer):
    """6. Each result goes to its successor's input buffer; a node is ready at zero."""
    for (next_node, slot), grad in zip(node.next_functions, outputs):
        if next_node is None:
            continue
        task.dependencies_left[next_node] -= 1
        grads, owned = buffers.setdefault(next_node, ([None] * len(next_node._input_metadata), set()))
        if grad is not None:
            if grads[slot] is None:
                how, grads[slot] = "stored", grad
            elif slot in owned and not task.create_graph:  # a sum the engine made itself
                how = "accumulated_in_place"
                with grad_mode.no_grad():
                    grads[slot].add_(grad)
            else:
                how, grads[slot] = "accumulated_out_of_place", grads[slot] + grad
                owned.add(slot)
            observer.buffer_added(task, next_node, slot, node, how, grad, grads[slot])
        if task.dependencies_left[next_node] == 0:
            push(next_node, buffers.pop(next_node))
            observer.node_ready(task, next_node)


def _accumulate(task, node, grad, observer):
    leaf = node.variable
    before = leaf.grad
    if before is None:
        leaf.grad = grad.clone() if task.create_graph else grad.detach().clone()
    elif task.create_graph:
        leaf.grad = before + grad
    else:
        before = before.detach().clone()  # the observer is told the value before the update
        with grad_mode.no_grad():
            leaf.grad.add_(grad)
    for hook in list(leaf._post_accumulate_hooks or ()):
        hook(leaf)
    observer.grad_accumulated(task, node, leaf, before, leaf.grad)


def _materialize(task, node, grads, observer):
    slots = [slot for slot, (g, meta) in enumerate(zip(grads, node._input_metadata))
             if g is None and meta is not None and meta.dtype is not None]
    for slot in slots:
        meta = node._input_metadata[slot]
        grads[slot] = _engine.runtime().zeros(meta.shape, meta.dtype)
    if slots:
        observer.grads_materialized(task, node, slots)
    return grads


def _validate(task, node, outputs, observer):
    """One gradient per edge, each summed to its input's shape and cast to its dtype."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if len(outputs) != len(node.next_functions):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {len(node.next_functions)}, got {len(outputs)})")
    for index, ((next_node, slot), grad) in enumerate(zip(node.next_functions, outputs)):
        if grad is None or next_node is None:
            continue
        meta = next_node._input_metadata[slot]
        if tuple(grad.shape) != tuple(meta.shape):
            shape, grad = tuple(grad.shape), _engine.runtime().sum_to(grad, meta.shape)
            observer.grad_reduced(task, node, index, shape, meta.shape)
        if meta.dtype is not None and grad.dtype != meta.dtype:
            from_dtype, grad = grad.dtype, _engine.runtime().cast(grad, meta.dtype)
            observer.grad_cast(task, node, index, from_dtype, meta.dtype)
        outputs[index] = grad
    return outputs


def _copy(tensor):
    return None if tensor is None else tensor.detach().clone()
