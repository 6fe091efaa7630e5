"""The order in which backward runs nodes, compared with PyTorch's CPU engine.

Each program runs in gradviz and in torch. A node pre-hook on every node of the graph records
the node's label when it runs; the label is the node's name plus its position in a
breadth-first walk of ``next_functions`` (so two ``MulBackward0`` nodes are told apart, and the
same position means the same node in both graphs). The recorded sequences must be equal.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import torch

import gradviz


def node_name(node):
    # torch's AccumulateGrad.name() is "torch::autograd::AccumulateGrad"; gradviz says
    # "AccumulateGrad" (torch's class is also named AccumulateGrad). Only the namespace differs.
    return node.name().replace("torch::autograd::", "")


def label_graph(roots):
    """{node: "Name#k"} for every node reachable from ``roots`` (breadth-first, edge order)."""
    labels = {}
    queue = deque(r for r in roots if r is not None)
    while queue:
        node = queue.popleft()
        if node in labels:
            continue
        labels[node] = f"{node_name(node)}#{len(labels)}"
        for next_node, _ in node.next_functions:
            if next_node is not None and next_node not in labels:
                queue.append(next_node)
    return labels


def record_order(roots):
    """Attach a pre-hook to every node reachable from ``roots``; return the list it fills.

    The handles are kept on the returned list so the hooks stay registered.
    """
    order = []
    labels = label_graph(roots)

    def make_hook(label):
        def hook(grad_outputs):
            order.append(label)
        return hook

    order_handles = [node.register_prehook(make_hook(label)) for node, label in labels.items()]
    return order, order_handles, labels


def run_program(module, program, arrays):
    leaves = [module.tensor(a, requires_grad=True) for a in arrays]
    outputs = program(module, *leaves)
    roots = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    order, handles, labels = record_order([r.grad_fn for r in roots])
    if len(roots) == 1:
        roots[0].backward()
    else:
        module.autograd.backward(list(roots))  # scalar roots: implicit gradients
    grads = [leaf.grad for leaf in leaves]
    return order, sorted(labels.values()), grads


def diamond(m, x):
    a = x * 2
    b = a.exp()
    c = a.sin()
    return (b + c).sum()


def diamond_uneven(m, x):
    a = x.tanh()
    long_branch = ((a * 3).exp() * 0.5).sigmoid()
    short_branch = a * a
    return (long_branch * short_branch).sum()


def fan_in(m, x):
    a = x * 1.5
    return (a.sin() + a.cos() + a.exp() + a * a + a.tanh()).sum()


def shared_leaves(m, x, w):
    h = (x * w).tanh()
    g = (x + w).sigmoid()
    return (h * g + x * 3 - w).sum()


def two_roots(m, x, w):
    h = x * w
    return [(h.sin()).sum(), (h * x).sum()]


def three_roots_shared(m, x):
    a = x.exp()
    return [a.sum(), (a * 2).mean(), (x * a).sum()]


def roots_independent(m, x, w):
    return [(x * 2).sum(), (w.exp()).sum()]


def nested_diamonds(m, x):
    a = x * 2
    b = a.sin() + a.cos()
    c = b.exp() * b
    d = c.tanh() - c.sigmoid()
    return (d * a).sum()


def leaf_used_everywhere(m, x):
    y = x
    for _ in range(4):
        y = y * x + x
    return y.sum()


def matrix_program(m, x, w):
    h = (x @ w).relu()
    return (h @ w.t()).sum() + (w * w).sum()


# Wide fan-outs: one node makes many successors ready at once, in the order of its inputs,
# which may be the order their nodes run in, its reverse, or a shuffle (Note [Ready queue]:
# the ready queue keeps such pushes on a run beside its heap, and must still run torch's order)
def wide_stack(m, x):
    return m.stack([x * (i + 1) for i in range(12)]).sum()


def wide_stack_reversed(m, x):
    ys = [(x * (i + 1)).sin() for i in range(12)]
    return m.cat(ys[::-1]).sum()


def wide_stack_shuffled(m, x):
    ys = [x * (i + 1) for i in range(12)]
    order = [5, 0, 11, 3, 7, 1, 9, 2, 10, 4, 8, 6]
    return (m.stack([ys[i] for i in order]) * x).sum()


def unbind_then_stack(m, x):
    pieces = x.unbind(0)
    ys = [p.exp() * (i + 1) for i, p in enumerate(reversed(pieces))]
    return m.stack(ys[::2] + ys[1::2]).sum() + pieces[2].sum()


def nested_fan_outs(m, x):
    rows = [x * (i + 1) for i in range(5)]
    halves = [m.stack([r.sin(), r.cos()]) for r in rows]
    return m.cat(halves[::-1]).sum() + m.stack(rows[1::2]).sum()


RNG = np.random.default_rng(7)
PROGRAMS = [
    ("diamond", diamond, [RNG.standard_normal(3)]),
    ("diamond_uneven", diamond_uneven, [RNG.standard_normal(3)]),
    ("fan_in", fan_in, [RNG.standard_normal(4)]),
    ("shared_leaves", shared_leaves, [RNG.standard_normal(3), RNG.standard_normal(3)]),
    ("two_roots", two_roots, [RNG.standard_normal(3), RNG.standard_normal(3)]),
    ("three_roots_shared", three_roots_shared, [RNG.standard_normal(3)]),
    ("roots_independent", roots_independent, [RNG.standard_normal(3), RNG.standard_normal(2)]),
    ("nested_diamonds", nested_diamonds, [RNG.standard_normal(3)]),
    ("leaf_used_everywhere", leaf_used_everywhere, [RNG.standard_normal(3)]),
    ("matrix", matrix_program, [RNG.standard_normal((2, 3)), RNG.standard_normal((3, 3))]),
    ("wide_stack", wide_stack, [RNG.standard_normal(3)]),
    ("wide_stack_reversed", wide_stack_reversed, [RNG.standard_normal(3)]),
    ("wide_stack_shuffled", wide_stack_shuffled, [RNG.standard_normal(3)]),
    ("unbind_then_stack", unbind_then_stack, [RNG.standard_normal((6, 3))]),
    ("nested_fan_outs", nested_fan_outs, [RNG.standard_normal(4)]),
]


@pytest.mark.parametrize("name,program,arrays", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_execution_order_matches_torch(name, program, arrays):
    gv_order, gv_nodes, gv_grads = run_program(gradviz, program, arrays)
    th_order, th_nodes, th_grads = run_program(torch, program, arrays)
    assert gv_nodes == th_nodes, "the graphs differ; the order cannot be compared"
    assert gv_order == th_order
    for g, t in zip(gv_grads, th_grads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,program,arrays", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_every_node_runs_exactly_once(name, program, arrays):
    gv_order, gv_nodes, _ = run_program(gradviz, program, arrays)
    th_order, _, _ = run_program(torch, program, arrays)
    assert sorted(gv_order) == gv_nodes
    assert sorted(gv_order) == sorted(th_order)


def _grad_order(module, inputs_of):
    x = module.tensor([0.3, -0.7, 1.1], dtype=module.float64, requires_grad=True)
    w = module.tensor([1.2, 0.4, -0.5], dtype=module.float64, requires_grad=True)
    a = x * w
    y = (a.exp() + a.sin() * x + w.tanh()).sum()
    order, handles, _ = record_order([y.grad_fn])
    grads = module.autograd.grad(y, inputs_of(x, w, a))
    return order, grads


@pytest.mark.parametrize("which", ["x", "w", "a", "x_and_a"])
def test_autograd_grad_runs_only_needed_nodes_in_torch_order(which):
    pick = {
        "x": lambda x, w, a: [x],
        "w": lambda x, w, a: [w],
        "a": lambda x, w, a: [a],
        "x_and_a": lambda x, w, a: [x, a],
    }[which]
    gv_order, gv_grads = _grad_order(gradviz, pick)
    th_order, th_grads = _grad_order(torch, pick)
    assert gv_order == th_order
    for g, t in zip(gv_grads, th_grads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def _backward_inputs_order(module):
    x = module.tensor([0.3, -0.7], dtype=module.float64, requires_grad=True)
    w = module.tensor([1.2, 0.4], dtype=module.float64, requires_grad=True)
    y = ((x * w).exp() + w.sin()).sum()
    order, handles, _ = record_order([y.grad_fn])
    y.backward(inputs=[w])
    return order, x.grad, w.grad


def test_backward_with_inputs_runs_the_same_nodes_as_torch():
    gv_order, gv_x, gv_w = _backward_inputs_order(gradviz)
    th_order, th_x, th_w = _backward_inputs_order(torch)
    assert gv_order == th_order
    assert gv_x is None and th_x is None
    np.testing.assert_allclose(gv_w.numpy(), th_w.numpy(), rtol=1e-12)
