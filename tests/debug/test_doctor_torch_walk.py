"""The doctor's own walk of a PyTorch graph of built-in nodes (Note [The doctor's own walk]
in gradviz/debug/_torch_graph.py): the leaves' gradients it finds are torch's own
(``torch.autograd.grad``), it writes no ``.grad`` (a ``retain_grad()`` non-leaf's neither, with
no search for it), and it finds the first node whose backward made NaN/Inf, as the engine
pass with hooks does."""

from __future__ import annotations

import numpy as np
import torch

import gradviz
from gradviz.debug import _doctor
from gradviz.debug._torch_graph import _backward_pass, _TorchPass, _walk


class _Report:
    def __init__(self):
        self.notes = []


def graph():
    """Multi-output nodes (split, unbind), a node shared by two paths, broadcasting, an
    in-place op on a view, two roots."""
    rng = np.random.default_rng(7)
    w = torch.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    b = torch.tensor(rng.standard_normal(6), requires_grad=True)
    x = torch.tensor(rng.standard_normal((5, 4)))
    h = torch.tanh(x @ w + b)
    h.retain_grad()
    first, second = h.split(3, dim=1)
    rows = second.unbind(0)
    shared = first * first
    view = shared.clone()
    view[:, 0] *= 2.0
    root1 = (view.sum() + rows[1].sum() * shared.mean())
    root2 = (torch.sigmoid(first) * b[:3]).sum()
    return (root1, root2), (w, b), h


def test_the_walk_gives_torchs_leaf_gradients_and_writes_no_grad():
    roots, leaves, h = graph()
    nodes = _doctor._walk([r.grad_fn for r in roots])
    gradients = [torch.tensor(1.5, dtype=torch.float64), torch.tensor(-0.5, dtype=torch.float64)]
    observer = _walk(roots, gradients, nodes, _TorchPass(), _Report())
    expected = torch.autograd.grad(roots, leaves, gradients, retain_graph=True)
    h.grad = None   # torch.autograd.grad wrote the retained non-leaf's .grad
    for leaf, want in zip(leaves, expected):
        assert torch.allclose(observer.leaf_grads[id(leaf)], want, rtol=1e-12, atol=0)
    assert observer.first_nonfinite is None and observer.failure is None
    report = gradviz.debug.doctor(list(roots), params=[("w", leaves[0]), ("b", leaves[1])])
    assert h.grad is None and leaves[0].grad is None and leaves[1].grad is None
    assert report.ok, str(report)


def test_the_walk_finds_the_first_nonfinite_node_as_the_engine_pass_does():
    w = torch.tensor([[0.0, 1.0], [2.0, 0.0]], requires_grad=True)
    y = torch.sqrt(w * w) * 3.0          # sqrt at 0: an infinite derivative
    loss = torch.log(y.sum()) + y.mean()
    nodes = _doctor._walk([loss.grad_fn])
    walked = _walk((loss,), [torch.ones_like(loss)], nodes, _TorchPass(), _Report())
    observer = _TorchPass()              # the engine pass, hooks on every node
    handles = [h for n in nodes if not hasattr(n, "variable")
               for h in (n.register_prehook(observer.prehook(n)),
                         n.register_hook(observer.posthook(n)))]
    torch.autograd.grad(loss, w, retain_graph=True)
    for handle in handles:
        handle.remove()
    assert walked.first_nonfinite[0] is observer.first_nonfinite[0]
    assert walked.first_nonfinite[0].name() == "SqrtBackward0"
    assert walked.first_nonfinite[1] == observer.first_nonfinite[1]


def test_a_backward_error_in_the_walk_names_the_node():
    w = torch.ones(3, requires_grad=True)
    y = torch.sigmoid(w)
    y.mul_(2.0)                           # SigmoidBackward0's saved result is overwritten
    loss = y.sum()
    observer = _backward_pass((loss,), None, _doctor._walk([loss.grad_fn]), _Report())
    assert observer.failure[0].name() == "SigmoidBackward0"
    assert "modified by an inplace operation" in str(observer.failure[1])
