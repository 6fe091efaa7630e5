"""Compact op nodes (Note [Compact nodes], Note [Rare node fields]): the saved inputs kept as
a tuple (shared between consecutive nodes holding the same numbers), the rare node fields in
one object made on first use. What a reader sees must not change: gradients, saved values,
hooks and metadata, compared with PyTorch."""

from __future__ import annotations

import numpy as np
import torch

import gradviz
from gradviz_ext._engine import Node


def _chain(module, constants):
    x = module.tensor([1.5, -2.0], requires_grad=True)
    y = x
    for c in constants:
        y = y * c
    return x, y


def test_shared_saved_numbers_give_torch_gradients_and_saved_values():
    constants = [2.0, 2.0, 2.0, 0.5, 3.0, 3.0, 0.25]
    gx, gy = _chain(gradviz, constants)
    tx, ty = _chain(torch, constants)
    node, torch_node = gy.grad_fn, ty.grad_fn
    while node is not None and torch_node is not None and node.name() == "MulBackward0":
        assert float(node._saved_other) == float(torch_node._saved_other)  # the saved scalar
        assert node._saved_inputs == {1: float(torch_node._saved_other)}
        node, torch_node = node.next_functions[0][0], torch_node.next_functions[0][0]
    gy.sum().backward()
    ty.sum().backward()
    np.testing.assert_array_equal(gx.grad.numpy(), tx.grad.numpy())


def test_saved_tensors_of_both_operands_are_read_back():
    a = gradviz.tensor([1.0, 2.0], requires_grad=True)
    b = gradviz.tensor([3.0, -4.0], requires_grad=True)
    ta = torch.tensor([1.0, 2.0], requires_grad=True)
    tb = torch.tensor([3.0, -4.0], requires_grad=True)
    out, torch_out = a * b, ta * tb
    saved = out.grad_fn._saved_inputs
    assert sorted(saved) == [0, 1]
    np.testing.assert_array_equal(out.grad_fn._saved_self.detach().numpy(),
                                  torch_out.grad_fn._saved_self.detach().numpy())
    np.testing.assert_array_equal(out.grad_fn._saved_other.detach().numpy(),
                                  torch_out.grad_fn._saved_other.detach().numpy())
    assert out.grad_fn.saved_tensor_count()[0] == 2
    out.sum().backward()
    torch_out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())


def test_a_node_without_saved_inputs_reports_none():
    x = gradviz.tensor([1.0], requires_grad=True)
    assert (x + 1).grad_fn._saved_inputs is None


def test_node_hooks_and_metadata_on_compact_nodes_behave_as_torch():
    calls, torch_calls = [], []
    for module, record in ((gradviz, calls), (torch, torch_calls)):
        x = module.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3.0
        z = y * 3.0  # shares the saved-inputs tuple with y's node in gradviz
        assert y.grad_fn.metadata == {}
        y.grad_fn.metadata["tag"] = "first"
        y.grad_fn.register_prehook(lambda grads: record.append(("pre", grads[0].tolist())))
        y.grad_fn.register_hook(lambda ins, outs: record.append(("post", ins[0].tolist())))
        assert y.grad_fn.metadata == {"tag": "first"} and z.grad_fn.metadata == {}
        z.sum().backward()
        record.append(("grad", x.grad.tolist()))
    assert calls == torch_calls



def _edges_of(next_functions):
    """A node's edges as (name of the next node or None, input_nr), comparable across
    frameworks."""
    return [(None if node is None else node.name().split("::")[-1], nr)
            for node, nr in next_functions]


def _inline_edge_cases(module):
    """A leaf, and nodes with one to four edges, inputs that need no gradient and non-zero
    input_nrs, all reading the leaf."""
    x = module.tensor([1.5, -2.0, 3.0, 0.5], requires_grad=True)
    w = module.tensor([2.0, 1.0, -1.0, 4.0])
    first, second = x.split(2)
    return x, {
        "one edge": (x * 2).exp(),
        "two edges, second without grad": x * w,
        "two edges, first without grad": w - x,
        "two edges into two outputs of one node": second * first,
        "three edges": module.addcmul(x, w, x),
        "four edges": module.stack([x, w, x, x]),
        "a second output": second.exp(),
    }


def test_inline_edges_read_as_torch_next_functions():
    """Note [Inline edges]: up to two edges live in the node's fields; next_functions built
    from them shows what PyTorch's shows (names and input_nrs), and backward agrees."""
    x, ours = _inline_edge_cases(gradviz)
    torch_x, theirs = _inline_edge_cases(torch)
    for label in ours:
        node, torch_node = ours[label].grad_fn, theirs[label].grad_fn
        assert _edges_of(node.next_functions) == _edges_of(torch_node.next_functions), label
        for (next_node, _), (torch_next, _) in zip(node.next_functions, torch_node.next_functions):
            if next_node is not None:
                assert (_edges_of(next_node.next_functions)
                        == _edges_of(torch_next.next_functions)), label
    gradviz.stack([y.sum() for y in ours.values()]).sum().backward()
    torch.stack([y.sum() for y in theirs.values()]).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), torch_x.grad.numpy(), rtol=1e-6)


def test_next_functions_assigned_to_a_node_reads_back():
    """The setter splits a tuple into the node's fields (up to two edges) or keeps it."""
    x = gradviz.tensor([1.0], requires_grad=True)
    accumulate = (x * 1).grad_fn.next_functions[0]
    for edges in [(), (accumulate,), (accumulate, (None, 0)),
                  (accumulate, (None, 0), accumulate)]:
        node = Node(edges)
        assert node.next_functions == edges
        node.next_functions = edges[::-1]
        assert node.next_functions == edges[::-1]
