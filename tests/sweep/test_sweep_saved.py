"""Conformance sweep, saved tensors read off the graph: ``grad_fn._saved_<name>`` as the
autograd mechanics note and the "Hooks for autograd saved tensors" tutorial show them.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, registry

program = registry()


@program
def saved_result_of_exp(torch, o):
    # autograd mechanics: "y = x.exp(); y.grad_fn._saved_result" is y's value, another object
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = x.exp()
    o("saved result", y.grad_fn._saved_result)
    o("equal", torch.equal(y, y.grad_fn._saved_result))
    o("same object", y is y.grad_fn._saved_result)
    o("grad_fn is the node", y.grad_fn._saved_result.grad_fn is y.grad_fn)


@program
def saved_self_is_the_input(torch, o):
    # "x = torch.randn(5, requires_grad=True); y = x.pow(2); y.grad_fn._saved_self is x"
    x = torch.tensor([1.0, -2.0, 3.0, 0.5, 4.0], requires_grad=True)
    y = x.pow(2)
    o("saved self is x", y.grad_fn._saved_self is x)
    o("exponent", y.grad_fn._saved_exponent)
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = torch.tensor([[0.5, -1.0], [2.0, 1.5]], requires_grad=True)
    z = a * b
    o("mul self is a", z.grad_fn._saved_self is a)
    o("mul other is b", z.grad_fn._saved_other is b)
    o("names", sorted(n for n in dir(z.grad_fn) if n.startswith("_saved_")))


@program
def saved_other_only_when_needed(torch, o):
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = torch.tensor([4.0, 5.0, 6.0])
    y = a * c
    o("self (c needs no grad)", y.grad_fn._saved_self)
    o("other is c", y.grad_fn._saved_other is c)
    w = a * 3.0
    o("wrapped number", w.grad_fn._saved_other)


@program
def saved_non_tensor_attributes(torch, o):
    x = torch.arange(12.0).reshape(3, 4).requires_grad_()
    o("sum dim", x.sum(dim=1).grad_fn._saved_dim)
    o("sum keepdim", x.sum(dim=1, keepdim=True).grad_fn._saved_keepdim)
    o("sum sizes", x.sum().grad_fn._saved_self_sym_sizes)
    o("mean numel", x.mean().grad_fn._saved_self_sym_numel)
    o("softmax dim", x.softmax(dim=1).grad_fn._saved_dim)
    o("transpose", (x.transpose(0, 1).grad_fn._saved_dim0, x.transpose(0, 1).grad_fn._saved_dim1))
    o("permute", x.permute(1, 0).grad_fn._saved_dims)
    o("view sizes", x.view(2, 6).grad_fn._saved_self_sym_sizes)
    o("select", (x[1].grad_fn._saved_dim, x[1].grad_fn._saved_index))
    o("slice", (x[:, 1:3].grad_fn._saved_start, x[:, 1:3].grad_fn._saved_end))
    o("add alpha", torch.add(x, x, alpha=2).grad_fn._saved_alpha)
    o("clamp", (x.clamp(min=1.0).grad_fn._saved_min, x.clamp(min=1.0).grad_fn._saved_max))
    o("cat dim", torch.cat([x, x], dim=1).grad_fn._saved_dim)


@program
def renorm_of_embedding_rows(torch, o):
    # renorm caps the rows of a weight (as nn.Embedding's max_norm does): values, gradient,
    # the node and what it saves, the in-place method, the errors
    w = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [-6.0, 8.0]], requires_grad=True)
    y = torch.renorm(w, 2, 0, 1.0)
    o("rows", y)
    o("norms", y.norm(dim=1))
    o("node", type(y.grad_fn).__name__ if torch.__name__ == "torch" else y.grad_fn.name())
    o("saved", (y.grad_fn._saved_self is w, y.grad_fn._saved_p, y.grad_fn._saved_dim,
                y.grad_fn._saved_maxnorm))
    (y * torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])).sum().backward()
    o("grad", w.grad)
    o("columns, p=1", w.detach().renorm(1, 1, 5))
    o("inf", w.detach().renorm(float("inf"), -1, 2.5))
    v = w.detach().clone()
    o("in place returns self", v.renorm_(2, 0, 0.5) is v)
    o("in place", v)
    o.raises("p", lambda: torch.renorm(w, 0, 0, 1.0), "non-positive-norm not supported")
    o.raises("maxnorm", lambda: torch.renorm(w, 2, 0, -1.0), "expected maxnorm to be >= 0")
    o.raises("1-D", lambda: torch.renorm(w[0], 2, 0, 1.0), "at least 2 dimensions")
    o.raises("dim", lambda: torch.renorm(w, 2, 2, 1.0), "Dimension out of range")


@program
def saved_tensors_of_a_linear_layer(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = torch.tensor([[0.1, 0.2, 0.3], [-0.1, 0.0, 0.4]], requires_grad=True)
    bias = torch.tensor([0.5, -0.5], requires_grad=True)
    y = torch.nn.functional.linear(x, w, bias)
    node = y.grad_fn
    o("node", type(node).__name__ if torch.__name__ == "torch" else node.name())
    o("mat1 is x", node._saved_mat1 is x)
    o("mat2 (x needs no grad)", node._saved_mat2)
    o("mat1 sizes", node._saved_mat1_sym_sizes)
    o("mat2 sizes", node._saved_mat2_sym_sizes)
    o("alpha beta", (node._saved_alpha, node._saved_beta))
    loss = torch.nn.functional.mse_loss(y, torch.zeros(2, 2))
    o("mse reduction", loss.grad_fn._saved_reduction)
    o("mse target", loss.grad_fn._saved_target)


@program
def saved_after_backward_is_freed(torch, o):
    x = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    y = x.sin()
    o("before", y.grad_fn._saved_self is x)
    y.sum().backward()
    o.raises("after backward", lambda: y.grad_fn._saved_self,
             "Trying to backward through the graph a second time (or directly access saved "
             "tensors after they have already been freed)")
    z = x.tanh()
    z.sum().backward(retain_graph=True)
    o("retained", z.grad_fn._saved_result)


@program
def saved_tensor_modified_in_place(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2
    y = h.cos()
    h.add_(1)
    o.raises("modified", lambda: y.grad_fn._saved_self,
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation")


@program
def saved_result_walk_of_a_small_net(torch, o):
    # the tutorial's loop over a graph: which nodes keep their result
    x = torch.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    w = torch.tensor([[1.0, -0.5], [0.25, 2.0]], requires_grad=True)
    y = torch.tanh(x @ w).relu().exp().sum()
    node = y.grad_fn
    seen = []
    while node is not None:
        name = type(node).__name__ if torch.__name__ == "torch" else node.name()
        names = sorted(n for n in dir(node) if n.startswith("_saved_"))
        seen.append((name, names))
        if "_saved_result" in names:
            o(f"{name} result", node._saved_result)
        nexts = [f for f, _ in node.next_functions if f is not None
                 and not type(f).__name__.startswith("AccumulateGrad")]
        node = nexts[0] if nexts else None
    o("walk", seen)


@program
def raw_saved_tensor_type(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    o("raw type", type(y.grad_fn._raw_saved_result).__name__)
    o("raw names", sorted(n for n in dir(y.grad_fn) if n.startswith("_raw_saved_")))


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
