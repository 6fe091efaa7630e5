"""Conformance sweep, views taken under ``no_grad`` and the classes of graph nodes: the patterns
of training loops and tutorials that slice a parameter inside ``torch.no_grad()`` (weight
updates, clipping, logging a row of a weight), and ``type(y.grad_fn)`` as the autograd
mechanics note prints it.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, registry

program = registry()


@program
def row_of_a_weight_read_under_no_grad(torch, o):
    # logging a row of a weight: the slice still "requires grad" (its base does) but has no
    # grad_fn, so it is a leaf that no gradient reaches
    w = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=True)
    with torch.no_grad():
        row = w[0]
    o("row", row)
    o("printed", repr(row))
    o("grad_fn", row.grad_fn)
    loss = (row * 2).sum() + (w ** 2).sum()
    o("loss", loss)
    loss.backward()
    o("w.grad", w.grad)
    o("row.grad", row.grad)


@program
def sgd_step_through_a_no_grad_view(torch, o):
    # the update written inside no_grad, through a view of the weight: allowed and untracked
    w = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    (w * torch.tensor([1.0, -1.0, 2.0, 0.5])).sum().backward()
    with torch.no_grad():
        head = w[:2]
        head -= 0.1 * w.grad[:2]
    o("w", w)
    o("w version", w._version)
    o("head printed", repr(head))
    o.raises("head is_leaf", lambda: head.is_leaf, "its base or another view of its base")
    o.raises("use head", lambda: head * 2, "its base or another view of its base")
    o("detached", head.detach())


@program
def update_outside_no_grad_is_refused(torch, o):
    # the classic mistake: the view taken under no_grad, the write after leaving it
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    h = w * 1
    with torch.no_grad():
        first = h[0]
        columns = h.unbind(1)
    o.raises("mul_", lambda: first.mul_(0.5), "A view was created in no_grad mode")
    o.raises("piece add_", lambda: columns[0].add_(1), "A view was created in no_grad mode")
    o.raises("view of it", lambda: first[1:].zero_(), "is a view of a view which was created")
    o("h unchanged", h)
    o("first requires grad", first.requires_grad)


@program
def node_classes_of_a_small_graph(torch, o):
    # autograd mechanics: "print(type(y.grad_fn))" and walking next_functions by class name
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x.exp() * 2 + x).mean()
    o("type", str(type(y.grad_fn)))
    o("name", type(y.grad_fn).__name__)
    add = y.grad_fn.next_functions[0][0]
    o("add", type(add).__qualname__)
    o("children", [type(n).__name__ for n, _ in add.next_functions])
    o("same class", type(x.mul(3).grad_fn) is type((x * 5).grad_fn))
    o("leaf", type(add.next_functions[1][0]).__name__)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
