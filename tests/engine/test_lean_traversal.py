"""Note [Lean traversal] (gradviz_ext/_ops.py): nodes and tensors are traversed by the cycle
collector without their None fields and without the fields that cannot lead back to a node
or tensor. What the collector reaches (``gc.get_referents`` runs the traversal itself) and
what it frees must be what it was with Cython's traversal: every cycle through a graph is
still collected."""

from __future__ import annotations

import gc
import weakref

import gradviz as gv
import gradviz_ext
from gradviz_ext import _engine, _ops


def _referents(obj) -> list:
    return [ref for ref in gc.get_referents(obj) if ref is not None]


def test_the_engine_types_are_traversed_leanly():
    if not gradviz_ext.COMPILED:
        assert not _ops.lean_traversal(_ops.OpNode)  # interpreted: Python's own traversal
        return
    kinds = [_engine.Node, _ops.OpNode, _engine.TensorBase]
    assert [_ops.lean_traversal(kind) for kind in kinds] == [True, True, True]
    y = gv.ones(2, requires_grad=True) * 2
    assert type(y.grad_fn).__name__ == "MulBackward0"
    assert _ops.lean_traversal(type(y.grad_fn)), "node classes inherit OpNode's traversal"


def test_a_node_reaches_its_edges_saved_values_and_attributes_but_not_its_spec():
    x = gv.ones(3, requires_grad=True)
    w = gv.ones(3, requires_grad=True)
    y = (x * w).sum(dim=0, keepdim=True)
    mul = y.grad_fn.next_functions[0][0]
    referents = _referents(mul)
    ids = {id(ref) for ref in referents}
    # both next nodes (AccumulateGrad of x and w) are reached: the edges hold the graph
    for edge_node, _ in mul.next_functions:
        assert id(edge_node) in ids
    assert id(mul._kept_inputs) in ids  # the saved operands, SavedTensors inside
    if gradviz_ext.COMPILED:  # interpreted, Python's traversal reaches every attribute
        assert id(mul.op) not in ids and id(mul.needs_input_grad) not in ids
        assert not any(ref is None for ref in gc.get_referents(mul))
    total = y.grad_fn
    assert id(total.attrs) in {id(ref) for ref in _referents(total)}  # dim, keepdim


def test_a_tensor_reaches_its_node_and_hooks_but_not_its_array():
    x = gv.ones(3, requires_grad=True)
    y = x * 2
    hook = y.register_hook(lambda g: g)
    referents = gc.get_referents(y)
    ids = {id(ref) for ref in referents}
    if not gradviz_ext.COMPILED:  # interpreted, the fields live in the instance's __dict__
        ids |= {id(value) for ref in referents if isinstance(ref, dict) for value in ref.values()}
    assert id(y.grad_fn) in ids
    if gradviz_ext.COMPILED:
        assert id(y._data) not in ids  # numpy arrays are no GC objects
        assert all(ref is not None for ref in referents)
    hook.remove()


def _collected(make) -> bool:
    gc.collect()
    ref = make()
    gc.collect()
    return ref() is None


def test_a_cycle_through_a_node_hook_is_collected():
    def make():
        x = gv.ones(3, requires_grad=True)
        y = x * 2
        node = y.grad_fn
        node.register_hook(lambda grad_inputs, grad_outputs, y=y: None)  # node -> hook -> y -> node
        return weakref.ref(node)
    assert _collected(make)


def test_a_cycle_through_a_tensor_hook_is_collected():
    def make():
        x = gv.ones(3, requires_grad=True)
        y = x * 2
        y.register_hook(lambda g, y=y: g)  # y -> hooks -> closure -> y
        return weakref.ref(y)
    assert _collected(make)


def test_a_cycle_through_a_saved_output_is_collected():
    def make():
        x = gv.ones(3, requires_grad=True)
        y = x.exp()  # saves its result
        y.grad_fn.metadata["me"] = y  # node -> metadata -> y -> node
        return weakref.ref(y.grad_fn)
    assert _collected(make)


def test_a_cycle_through_a_leaf_and_its_accumulator_is_collected():
    def make():
        x = gv.ones(3, requires_grad=True)
        y = x * 2
        accumulate = y.grad_fn.next_functions[0][0]
        accumulate.register_prehook(lambda grads, y=y: None)  # AccumulateGrad -> hook -> y
        x.owner = y  # a leaf's __dict__ (gradviz.Tensor) -> y -> node -> AccumulateGrad -> x
        return weakref.ref(accumulate)
    assert _collected(make)


def test_a_long_chain_in_a_cycle_is_collected_whole():
    def make():
        x = gv.ones(1, requires_grad=True)
        y = x
        for _ in range(2_000):
            y = y * 1.0001 + 0.0001
        first = x * 1.0
        first.grad_fn.metadata["end"] = y  # the chain's first node holds its last tensor
        y.grad_fn.metadata["start"] = first
        return weakref.ref(first.grad_fn)
    assert _collected(make)


def test_a_training_step_frees_its_graph_without_the_collector():
    w = gv.randn(4, 4, requires_grad=True)
    x = gv.randn(2, 4)
    gc.collect()
    gc.disable()
    try:
        for _ in range(20):
            loss = (x @ w).relu().sum()
            loss.backward()
            del loss
        assert gc.collect() == 0
    finally:
        gc.enable()
