"""Conformance sweep, autograd basics: scalars, .grad accumulation, retain_grad, detach, no_grad, hooks, autograd.grad, custom Functions.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_harness import X_DATA, check, make_mlp, registry

program = registry()


# ---- micrograd-style scalars ----------------------------------------------------------------

@program
def scalar_polynomial(torch, o):
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 2 + 3 * x + 1
    y.backward()
    o("y", y)
    o("x.grad", x.grad)
    o("y.item", y.item())
    o("repr y", repr(y))


@program
def scalar_exp_log(torch, o):
    x = torch.tensor(3.0, requires_grad=True)
    y = torch.exp(x) * torch.log(x)
    y.backward()
    o("y", y)
    o("grad", x.grad)


@program
def micrograd_neuron_tanh(torch, o):
    x1 = torch.tensor([2.0]).double(); x1.requires_grad = True  # noqa: E702 - micrograd's lines, as the course writes them
    x2 = torch.tensor([0.0]).double(); x2.requires_grad = True  # noqa: E702 - micrograd's lines, as the course writes them
    w1 = torch.tensor([-3.0]).double(); w1.requires_grad = True  # noqa: E702 - micrograd's lines, as the course writes them
    w2 = torch.tensor([1.0]).double(); w2.requires_grad = True  # noqa: E702 - micrograd's lines, as the course writes them
    b = torch.tensor([6.8813735870195432]).double(); b.requires_grad = True  # noqa: E702 - micrograd's lines, as the course writes them
    n = x1 * w1 + x2 * w2 + b
    out = torch.tanh(n)
    o("out.data.item", out.data.item())
    out.backward()
    for name, t in [("x2", x2), ("w2", w2), ("x1", x1), ("w1", w1)]:
        o(name, t.grad.item())
    o("repr out", repr(out))


@program
def micrograd_neuron_exp_formula(torch, o):
    x1 = torch.tensor(2.0, requires_grad=True)
    w1 = torch.tensor(-3.0, requires_grad=True)
    b = torch.tensor(6.8813735870195432, requires_grad=True)
    n = x1 * w1 + b
    e = (2 * n).exp()
    out = (e - 1) / (e + 1)
    out.backward()
    o("out", out)
    o("grads", [x1.grad, w1.grad, b.grad])


@program
def micrograd_readme_no_inplace(torch, o):
    a = torch.tensor([-4.0]).double()
    b = torch.tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    c = a + b
    d = a * b + b ** 3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e ** 2
    g = f / 2.0
    g = g + 10.0 / f
    g.backward()
    o("g", g.data.item())
    o("a.grad", a.grad.item())
    o("b.grad", b.grad.item())


@program
def micrograd_readme_inplace(torch, o):
    a = torch.tensor([-4.0]).double()
    b = torch.tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    c = a + b
    d = a * b + b ** 3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e ** 2
    g = f / 2.0
    g += 10.0 / f
    g.backward()
    o("g", g)
    o("a.grad", a.grad)
    o("b.grad", b.grad)


@program
def variable_used_twice(torch, o):
    a = torch.tensor(3.0, requires_grad=True)
    b = a + a
    b.backward()
    o("a.grad", a.grad)
    x = torch.tensor(-2.0, requires_grad=True)
    y = torch.tensor(3.0, requires_grad=True)
    d = x * y
    e = x + y
    f = d * e
    f.backward()
    o("x.grad", x.grad)
    o("y.grad", y.grad)


@program
def scalar_division_and_power(torch, o):
    x = torch.tensor(4.0, requires_grad=True)
    y = torch.tensor(2.0, requires_grad=True)
    z = x / y + y ** x - x.sqrt()
    z.backward()
    o("z", z)
    o("dx", x.grad)
    o("dy", y.grad)


@program
def scalar_sigmoid_manual_vs_builtin(torch, o):
    x = torch.tensor(0.5, requires_grad=True)
    manual = 1 / (1 + torch.exp(-x))
    manual.backward()
    g1 = x.grad.clone()
    x.grad = None
    builtin = torch.sigmoid(x)
    builtin.backward()
    o("values", [manual, builtin])
    o("grads", [g1, x.grad])
    o("repr", [repr(manual), repr(builtin)])


# ---- .grad accumulation, zeroing, retain_graph ------------------------------------------------

@program
def grad_accumulates(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for _ in range(3):
        y = (x * 2).sum()
        y.backward()
        o("grad", x.grad)
    x.grad.zero_()
    o("zeroed", x.grad)
    (x ** 2).sum().backward()
    o("after zero", x.grad)
    x.grad = None
    o("none", x.grad)
    (x ** 3).sum().backward()
    o("after none", x.grad)


@program
def grad_data_zero(torch, o):
    w = torch.tensor([0.5, -0.5], requires_grad=True)
    loss = (w * torch.tensor([2.0, 4.0])).sum()
    loss.backward()
    o("grad", w.grad)
    w.grad.data.zero_()
    o("zeroed", w.grad)
    o("grad requires_grad", w.grad.requires_grad)


@program
def backward_twice_error(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    o.raises("second backward", y.backward,
             "Trying to backward through the graph a second time")
    o("grad", x.grad)


@program
def backward_twice_retain_graph(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    o("first", x.grad)
    y.backward()
    o("second", x.grad)


@program
def backward_twice_no_saved_tensors(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x + 2).sum()
    y.backward()
    y.backward()
    o("grad", x.grad)


@program
def backward_nonscalar_error(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    o.raises("implicit", y.backward, "grad can be implicitly created only for scalar outputs")


@program
def backward_nonscalar_with_gradient(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(v)
    o("grad", x.grad)
    z = x ** 2
    z.backward(gradient=torch.ones_like(z))
    o("grad2", x.grad)


@program
def pytorch_tutorial_vector_jacobian(torch, o):
    x = torch.tensor([0.3, -1.2, 0.8], requires_grad=True)
    y = x * 2
    steps = 0
    while y.data.norm() < 1000:
        y = y * 2
        steps += 1
    o("steps", steps)
    o("y", y)
    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(v)
    o("x.grad", x.grad)


@program
def backward_no_requires_grad_error(torch, o):
    x = torch.tensor([1.0, 2.0])
    y = (x * 2).sum()
    o.raises("backward", y.backward, "does not require grad and does not have a grad_fn")


@program
def backward_gradient_shape_mismatch(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    o.raises("mismatch", lambda: y.backward(torch.ones(2)), "Mismatch in shape")


@program
def backward_on_leaf(torch, o):
    x = torch.tensor(5.0, requires_grad=True)
    x.backward()
    o("grad", x.grad)


@program
def backward_scalar_shape_one(torch, o):
    x = torch.tensor([2.0], requires_grad=True)
    y = x * 3
    y.backward()
    o("grad", x.grad)


@program
def backward_with_inputs(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    loss = (a * b).sum()
    loss.backward(inputs=[a])
    o("a.grad", a.grad)
    o("b.grad", b.grad)


@program
def autograd_backward_function(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    y1 = (a ** 2).sum()
    y2 = (a * 3).sum()
    torch.autograd.backward([y1, y2])
    o("grad", a.grad)


# ---- retain_grad, non-leaf grads, leaves ----------------------------------------------------------

@program
def retain_grad_intermediate(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    z = (y ** 2).sum()
    z.backward()
    o("y.grad", y.grad)
    o("x.grad", x.grad)
    o("retains", [y.retains_grad, x.retains_grad])


@program
def nonleaf_grad_warning(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.sum().backward()
    g = o.warns("access", lambda: y.grad, "is not a leaf Tensor")
    o("value", g)


@program
def leaf_status(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([1.0, 2.0])
    c = a * 2
    d = b * 2
    e = a.detach()
    o("is_leaf", [a.is_leaf, b.is_leaf, c.is_leaf, d.is_leaf, e.is_leaf])
    o("requires_grad", [a.requires_grad, b.requires_grad, c.requires_grad, d.requires_grad,
                        e.requires_grad])
    o("grad_fn is None", [t.grad_fn is None for t in (a, b, c, d, e)])
    o("grad_fn name", c.grad_fn.name())


@program
def grad_fn_next_functions(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    c = (a * b + a).sum()
    names = []
    fn = c.grad_fn
    names.append(fn.name())
    nxt = fn.next_functions[0][0]
    names.append(nxt.name())
    names.append([f.name().split("::")[-1] if f is not None else None
                  for f, _ in nxt.next_functions])
    o("names", names)
    o("variable", nxt.next_functions[1][0].variable is a)


@program
def requires_grad_on_nonleaf_false_error(torch, o):
    x = torch.tensor([1.0], requires_grad=True)
    y = x * 2

    def clear():
        y.requires_grad = False

    o.raises("set", clear, "you can only change requires_grad flags of leaf variables")


@program
def requires_grad_int_error(torch, o):
    o.raises("tensor", lambda: torch.tensor([1, 2, 3], requires_grad=True),
             "Only Tensors of floating point and complex dtype can require gradients")
    x = torch.arange(3)
    o.raises("method", lambda: x.requires_grad_(),
             "only Tensors of floating point dtype can require gradients")

    def set_flag():
        x.requires_grad = True

    o.raises("setter", set_flag, "only Tensors of floating point and complex dtype can require gradients")
    o.raises("factory", lambda: torch.zeros(2, dtype=torch.int64, requires_grad=True),
             "Only Tensors of floating point and complex dtype can require gradients")
    o.raises("parameter", lambda: torch.nn.Parameter(torch.tensor([1, 2])),
             "Only Tensors of floating point and complex dtype can require gradients")


@program
def requires_grad_underscore_chain(torch, o):
    x = torch.ones(3).requires_grad_()
    o("x", x)
    y = torch.zeros(2, 2).requires_grad_(True)
    o("y", y)
    x.requires_grad_(False)
    o("x after", x)


# ---- detach, clone, .data, item, tolist, numpy ----------------------------------------------------

@program
def detach_basics(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y.detach()
    o("z", z)
    o("z flags", [z.requires_grad, z.is_leaf, z.grad_fn is None])
    w = (y * z).sum()
    w.backward()
    o("x.grad", x.grad)


@program
def detach_shares_storage(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d = x.detach()
    d[0] = 10.0
    o("x", x)
    o("d", d)


@program
def clone_keeps_graph(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    o("y", y)
    o("name", y.grad_fn.name())
    (y * y).sum().backward()
    o("grad", x.grad)
    z = x.detach().clone()
    o("z", z)


@program
def data_attribute_update(torch, o):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (w ** 2).sum()
    loss.backward()
    w.data -= 0.1 * w.grad.data
    o("w", w)
    o("w.data", w.data)
    o("is_leaf", w.is_leaf)
    w.data = torch.tensor([5.0, 6.0])
    o("w after set", w)


@program
def item_and_conversions(torch, o):
    a = torch.tensor(3.5)
    b = torch.tensor([7])
    c = torch.tensor(True)
    o("items", [a.item(), b.item(), c.item()])
    o("float/int", [float(a), int(a), float(b), int(b)])
    o("bool", bool(c))
    o.raises("multi", lambda: torch.tensor([1.0, 2.0]).item(),
             "a Tensor with 2 elements cannot be converted to Scalar")
    x = torch.tensor(2.0, requires_grad=True)
    y = x * 3
    o("grad item", y.item())


@program
def tolist_values(torch, o):
    o("floats", torch.tensor([[0.1, 0.2], [0.3, 0.4]]).tolist())
    o("ints", torch.arange(6).reshape(2, 3).tolist())
    o("bools", (torch.arange(4) > 1).tolist())
    o("scalar", torch.tensor(2.5).tolist())
    o("double", torch.tensor([0.1], dtype=torch.float64).tolist())
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o("requires grad", (x * 2).tolist())


@program
def numpy_interop(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0])
    a = x.numpy()
    o("array", a)
    a[0] = 100.0
    o("shared", x)
    w = torch.tensor([1.0], requires_grad=True)
    o.raises("requires grad", w.numpy, "Can't call numpy() on Tensor that requires grad")
    o("detached", w.detach().numpy())
    n = np.array([1.0, 2.0])
    t = torch.from_numpy(n)
    o("from_numpy", t)
    n[1] = -1.0
    o("from_numpy shared", t)
    o("as_tensor", torch.as_tensor(np.array([1, 2], dtype=np.int32)))
    o("tensor from np float32", torch.tensor(np.array([1.5], dtype=np.float32)))


@program
def numpy_arithmetic_with_tensor(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * np.float64(2.0)
    o("y", y)
    z = x + np.float32(1.0)
    o("z", z)


# ---- no_grad, manual parameter updates ---------------------------------------------------------

@program
def no_grad_manual_sgd(torch, o):
    X = torch.tensor([1.0, 2.0, 3.0, 4.0])
    Y = torch.tensor([2.0, 4.0, 6.0, 8.0])
    w = torch.tensor(0.0, requires_grad=True)
    lr = 0.01
    for epoch in range(10):
        y_pred = w * X
        loss = ((y_pred - Y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
        w.grad.zero_()
        o(f"epoch {epoch}", [w.item(), loss.item()])
    o("w", w)
    o("f(5)", (w * 5).item())


@program
def no_grad_linear_regression_two_params(torch, o):
    x = torch.linspace(0, 1, 10)
    y = 3 * x + 2
    w = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for _ in range(20):
        loss = ((w * x + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.5 * w.grad
            b -= 0.5 * b.grad
            w.grad.zero_()
            b.grad.zero_()
    o("w", w)
    o("b", b)
    o("loss", loss)


@program
def inplace_update_leaf_without_no_grad(torch, o):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()

    def update():
        w -= 0.1 * w.grad  # noqa: F823

    def update2():
        w.sub_(0.1 * w.grad)

    o.raises("sub_", update2, "a leaf Variable that requires grad is being used in an in-place operation.")
    o("w", w)


@program
def no_grad_flags(torch, o):
    x = torch.tensor([1.0], requires_grad=True)
    with torch.no_grad():
        y = x * 2
        o("enabled inside", torch.is_grad_enabled())
    o("enabled after", torch.is_grad_enabled())
    o("y", y)
    o("y flags", [y.requires_grad, y.grad_fn is None])
    with torch.no_grad():
        with torch.enable_grad():
            z = x * 2
    o("z", z)
    with torch.set_grad_enabled(False):
        w = x * 2
    o("w", w)
    torch.set_grad_enabled(False)
    v = x * 2
    torch.set_grad_enabled(True)
    o("v", v)
    o("final", torch.is_grad_enabled())


@program
def no_grad_decorator(torch, o):
    @torch.no_grad()
    def double(t):
        return t * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o("result", double(x))
    with torch.inference_mode():
        y = x + 1
    o("inference", y.requires_grad)


# ---- hooks ---------------------------------------------------------------------------------------

@program
def tensor_hook_doubles(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    handle = x.register_hook(lambda grad: grad * 2)
    (x ** 2).sum().backward()
    o("grad", x.grad)
    handle.remove()
    x.grad = None
    (x ** 2).sum().backward()
    o("after remove", x.grad)


@program
def hook_on_intermediate_records(torch, o):
    seen = []
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: seen.append(g.clone()))
    z = (y * y).sum()
    z.backward()
    o("seen", seen)
    o("x.grad", x.grad)


@program
def hook_modifies_intermediate_grad(torch, o):
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g.clamp(min=0.0, max=0.5))
    (y * torch.tensor([1.0, -1.0, 2.0])).sum().backward()
    o("x.grad", x.grad)


@program
def module_like_gradient_clipping_hook(torch, o):
    w = torch.tensor([3.0, -4.0], requires_grad=True)
    w.register_hook(lambda g: g / g.norm())
    ((w * 10) ** 2).sum().backward()
    o("w.grad", w.grad)


@program
def hook_on_tensor_without_grad_error(torch, o):
    x = torch.tensor([1.0])
    o.raises("hook", lambda: x.register_hook(lambda g: g),
             "cannot register a hook on a tensor that doesn't require gradient")


# ---- autograd.grad and higher order ------------------------------------------------------------

@program
def autograd_grad_first(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x ** 3).sum()
    (g,) = torch.autograd.grad(y, x)
    o("g", g)
    o("x.grad untouched", x.grad)


@program
def autograd_grad_second_derivative(torch, o):
    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 3
    (dy,) = torch.autograd.grad(y, x, create_graph=True)
    o("dy", dy)
    (d2y,) = torch.autograd.grad(dy, x, create_graph=True)
    o("d2y", d2y)
    (d3y,) = torch.autograd.grad(d2y, x)
    o("d3y", d3y)
    o("repr dy", repr(dy))


@program
def autograd_grad_sin_derivatives(torch, o):
    x = torch.linspace(0, 3, 4, requires_grad=True)
    y = torch.sin(x)
    g1 = torch.autograd.grad(y.sum(), x, create_graph=True)[0]
    g2 = torch.autograd.grad(g1.sum(), x, create_graph=True)[0]
    g3 = torch.autograd.grad(g2.sum(), x)[0]
    o("derivs", [g1, g2, g3])


@program
def autograd_grad_tanh_second(torch, o):
    x = torch.tensor([-1.0, 0.0, 0.5], dtype=torch.float64, requires_grad=True)
    y = torch.tanh(x)
    g = torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)[0]
    h = torch.autograd.grad(g, x, torch.ones_like(g))[0]
    o("g", g)
    o("h", h)


@program
def autograd_grad_multiple_inputs(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    out = (a * b ** 2).sum()
    ga, gb = torch.autograd.grad(out, [a, b])
    o("grads", (ga, gb))


@program
def autograd_grad_unused(torch, o):
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([2.0], requires_grad=True)
    out = (a * 2).sum()
    o.raises("unused", lambda: torch.autograd.grad(out, [a, b], retain_graph=True),
             "appears to not have been used in the graph")
    o("allowed", torch.autograd.grad(out, [a, b], allow_unused=True))


@program
def autograd_grad_nonscalar(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x ** 2
    o.raises("implicit", lambda: torch.autograd.grad(y, x),
             "grad can be implicitly created only for scalar outputs")
    (g,) = torch.autograd.grad(y, x, grad_outputs=torch.ones_like(y))
    o("g", g)


@program
def hessian_vector_product(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    f = (x ** 2).prod() + (x ** 3).sum()
    (g,) = torch.autograd.grad(f, x, create_graph=True)
    v = torch.tensor([1.0, 0.0, -1.0])
    (hv,) = torch.autograd.grad(g @ v, x)
    o("g", g)
    o("hv", hv)


@program
def hessian_by_rows(torch, o):
    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)

    def f(t):
        return t[0] ** 2 * t[1] + torch.sin(t[1]) * t[0]

    y = f(x)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    rows = []
    for i in range(2):
        (row,) = torch.autograd.grad(g[i], x, retain_graph=True)
        rows.append(row)
    o("hessian", torch.stack(rows))


@program
def double_backward_via_backward(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    g = x.grad
    o("g", g)
    o("g flags", [g.requires_grad, g.grad_fn is not None])
    x.grad = None
    g.sum().backward()
    o("second", x.grad)


@program
def gradient_penalty_style(torch, o):
    w = torch.tensor([[0.5, -0.2], [0.1, 0.3]], requires_grad=True)
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    out = torch.tanh(x @ w).sum()
    (gx,) = torch.autograd.grad(out, x, create_graph=True)
    penalty = ((gx.norm() - 1) ** 2)
    penalty.backward()
    o("penalty", penalty)
    o("w.grad", w.grad)


@program
def jacobian_by_loop_backward(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = torch.stack([x[0] * x[1], x[1] ** 2, x.sum()])
    rows = []
    for i in range(3):
        x.grad = None
        y[i].backward(retain_graph=True)
        rows.append(x.grad.clone())
    o("jacobian", torch.stack(rows))


@program
def jacobian_by_loop_grad_softmax(torch, o):
    x = torch.tensor([1.0, 2.0, 0.5], requires_grad=True)
    y = torch.softmax(x, dim=0)
    rows = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(3)]
    o("jacobian", torch.stack(rows))
    o("diag check", torch.stack(rows).diagonal() if hasattr(torch.Tensor, "diagonal") else None)


@program
def jacobian_by_unit_vectors(torch, o):
    x = torch.tensor([0.2, 0.4], requires_grad=True)
    y = torch.stack([x[0] ** 2 + x[1], torch.exp(x[0]) * x[1]])
    J = torch.zeros(2, 2)
    for i in range(2):
        v = torch.zeros(2)
        v[i] = 1.0
        (row,) = torch.autograd.grad(y, x, grad_outputs=v, retain_graph=True)
        J[i] = row
    o("J", J)


# ---- custom autograd.Function (PyTorch docs) ---------------------------------------------------

@program
def function_exp_docs(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            (result,) = ctx.saved_tensors
            return grad_output * result

    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    o("y", y)
    o("repr", repr(y))
    o("name", y.grad_fn.name())
    y.sum().backward()
    o("grad", x.grad)


@program
def function_linear_docs(torch, o):
    class LinearFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    x = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], requires_grad=True)
    w = torch.tensor([[0.1, 0.2, 0.3], [-0.3, 0.2, -0.1]], requires_grad=True)
    b = torch.tensor([0.5, -0.5], requires_grad=True)
    out = LinearFunction.apply(x, w, b)
    o("out", out)
    (out ** 2).sum().backward()
    o("grads", [x.grad, w.grad, b.grad])
    x.grad = None
    w.grad = None
    out2 = LinearFunction.apply(x, w)
    out2.sum().backward()
    o("no bias", [out2, x.grad, w.grad])


@program
def function_mul_constant_docs(torch, o):
    class MulConstant(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor, constant):
            ctx.constant = constant
            return tensor * constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = MulConstant.apply(x, 5.5)
    y.sum().backward()
    o("y", y)
    o("grad", x.grad)


@program
def function_mycube_double_backward(torch, o):
    def _backward(ctx, grad_output, grad_dx):
        x, = ctx.saved_tensors
        return grad_output * 3 * x ** 2 + grad_dx * 6 * x

    class MyCube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            dx = 3 * x ** 2
            result = x ** 3
            return result, dx

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, = inputs
            result, dx = output
            ctx.save_for_backward(x, dx)

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            result = grad_output * dx + grad_dx * 6 * x
            return result

    def my_cube(x):
        result, dx = MyCube.apply(x)
        return result

    x = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    y = my_cube(x)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (gg,) = torch.autograd.grad(g, x)
    o("y", y)
    o("g", g)
    o("gg", gg)


@program
def function_my_relu_tutorial(torch, o):
    class MyReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return input.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad_input[input < 0] = 0
            return grad_input

    x = torch.tensor([-1.0, 0.5, 2.0, -0.1], requires_grad=True)
    y = MyReLU.apply(x)
    (y * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    o("y", y)
    o("grad", x.grad)


@program
def function_legendre_training(torch, o):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    dtype = torch.float
    x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
    y = torch.sin(x)
    a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    for t in range(50):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t % 10 == 9:
            o(f"loss {t}", loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    o("params", [a, b, c, d])
    o("result", f"Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)"[:9])


@program
def function_wrong_number_of_grads(torch, o):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([2.0], requires_grad=True)
    y = Bad.apply(a, b).sum()
    o.raises("backward", y.backward, "returned an incorrect number of gradients (expected 2, got 1)")


@program
def function_needs_input_grad(torch, o):
    seen = []

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen.append(tuple(ctx.needs_input_grad))
            return (g * b if ctx.needs_input_grad[0] else None,
                    g * a if ctx.needs_input_grad[1] else None)

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0])
    Mul.apply(a, b).sum().backward()
    o("seen", seen)
    o("grad", a.grad)
    o("b.grad", b.grad)


@program
def function_forward_without_ctx_usage(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 2 * x * grad_output

    x = torch.tensor([3.0], requires_grad=True)
    y = Square.apply(x)
    o("requires_grad", y.requires_grad)
    z = Square.apply(y)
    z.backward()
    o("grad", x.grad)
    with torch.no_grad():
        w = Square.apply(x)
    o("no grad", w)


# ---- autograd patterns, more -------------------------------------------------------------------

@program
def retain_grad_with_hook_order(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 10)
    (y * y).sum().backward()
    o("y.grad", y.grad)
    o("x.grad", x.grad)


@program
def post_accumulate_grad_hook(torch, o):
    seen = []
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    (w * 3).sum().backward()
    (w * 4).sum().backward()
    o("seen", seen)
    o("grad", w.grad)


@program
def hook_handle_context_and_multiple_hooks(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    order = []
    x.register_hook(lambda g: order.append("first"))
    h2 = x.register_hook(lambda g: (order.append("second"), g * 3)[1])
    (x * x).sum().backward()
    o("order", order)
    o("grad", x.grad)
    h2.remove()
    x.grad = None
    (x * x).sum().backward()
    o("after", x.grad)


@program
def autograd_grad_retain_and_reuse(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x ** 2).sum()
    g1 = torch.autograd.grad(y, x, retain_graph=True)
    g2 = torch.autograd.grad(y, x)
    o("grads", [g1, g2])
    o.raises("third", lambda: torch.autograd.grad(y, x), "Trying to backward through the graph a second time")


@program
def autograd_grad_list_outputs(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y1 = x.sum()
    y2 = (x * x).sum()
    (g,) = torch.autograd.grad([y1, y2], x)
    o("summed", g)
    (g2,) = torch.autograd.grad([x * 2, x ** 3], [x], grad_outputs=[torch.ones(2), torch.tensor([1.0, 0.5])])
    o("weighted", g2)


@program
def autograd_grad_materialize_and_errors(torch, o):
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([2.0], requires_grad=True)
    y = (a * 3).sum()
    o("materialize", torch.autograd.grad(y, [a, b], materialize_grads=True))
    c = torch.tensor([1.0])
    o.raises("no grad input", lambda: torch.autograd.grad((a * 2).sum(), c),
             "One of the differentiated Tensors does not require grad")


@program
def higher_order_polynomial_taylor(torch, o):
    x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    y = torch.exp(x) * torch.sin(x)
    derivs = []
    current = y
    for _ in range(4):
        (current,) = torch.autograd.grad(current, x, create_graph=True)
        derivs.append(current)
    o("derivs", derivs)


@program
def newton_method_sqrt2(torch, o):
    x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    history = []
    for _ in range(5):
        f = x ** 2 - 2
        (df,) = torch.autograd.grad(f, x)
        with torch.no_grad():
            x -= f / df
        history.append(x.item())
    o("history", history)


@program
def gradient_descent_rosenbrock(torch, o):
    p = torch.tensor([-1.0, 1.5], requires_grad=True)
    opt = torch.optim.SGD([p], lr=1e-3)
    for _ in range(50):
        opt.zero_grad()
        loss = (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2
        loss.backward()
        opt.step()
    o("p", p)
    o("loss", loss)


@program
def detach_in_target_network_style(torch, o):
    w = torch.tensor([0.5, -0.5], requires_grad=True)
    x = torch.tensor([1.0, 2.0])
    q = (w * x).sum()
    target = (q * 0.9 + 1.0).detach()
    loss = (q - target) ** 2
    loss.backward()
    o("target flags", [target.requires_grad, target.is_leaf])
    o("grad", w.grad)


@program
def requires_grad_toggle_freezing(torch, o):
    model = make_mlp(torch)
    for p in model[0].parameters():
        p.requires_grad = False
    out = model(torch.tensor(X_DATA)).sum()
    out.backward()
    o("frozen grads", [model[0].weight.grad, model[0].bias.grad])
    o("trainable grads", [model[2].weight.grad, model[2].bias.grad])
    o("requires", [p.requires_grad for p in model.parameters()])
    model.requires_grad_(False)
    o("all frozen", [p.requires_grad for p in model.parameters()])
    trainable = [p for p in model.parameters() if p.requires_grad]
    o("n trainable", len(trainable))


@program
def no_grad_inside_function_and_is_grad_enabled(torch, o):
    x = torch.tensor([1.0], requires_grad=True)

    def evaluate(t):
        with torch.no_grad():
            return t * 2, torch.is_grad_enabled()

    y, inside = evaluate(x)
    o("inside", inside)
    o("y", y)

    @torch.enable_grad()
    def force(t):
        return t * 3

    with torch.no_grad():
        z = force(x)
    o("z", z)
    with torch.set_grad_enabled(True):
        w = x * 4
    o("w", w)


@program
def custom_function_once_differentiable_and_non_diff(torch, o):
    once_differentiable = torch.autograd.function.once_differentiable  # this library's

    class SortValues(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort()
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        @once_differentiable
        def backward(ctx, g_values, g_indices):
            (indices,) = ctx.saved_tensors
            grad = torch.zeros_like(g_values)
            grad[indices] = g_values
            return grad

    x = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
    values, indices = SortValues.apply(x)
    o("values", values)
    o("indices", indices)
    o("indices requires grad", indices.requires_grad)
    (values * torch.tensor([1.0, 10.0, 100.0])).sum().backward()
    o("grad", x.grad)


@program
def custom_function_multiple_outputs(torch, o):
    class SplitSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return g1 * 2 * x + g2 * 3

    x = torch.tensor([1.0, -2.0], requires_grad=True)
    a, b = SplitSquare.apply(x)
    o("names", [a.grad_fn.name(), b.grad_fn is a.grad_fn])
    (a.sum() + b.sum() * 2).backward()
    o("grad", x.grad)
    x.grad = None
    a2, _ = SplitSquare.apply(x)
    a2.sum().backward()
    o("only first", x.grad)


@program
def custom_function_gradcheck_like(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.tensor([0.3, -0.7, 1.2], dtype=torch.float64, requires_grad=True)
    o("gradcheck", torch.autograd.gradcheck(Cube.apply, (x,)))
    o("gradgradcheck", torch.autograd.gradgradcheck(Cube.apply, (x,)))


@program
def custom_function_save_non_tensor_error(torch, o):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0], requires_grad=True)
    o.raises("save int", lambda: Bad.apply(x), "save_for_backward can only save variables, but argument 1 is of type int")


@program
def backward_inputs_non_leaf_that_retains_grad(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()  # and named in inputs=: its gradient is stored once, not twice
    (y * 3).sum().backward(inputs=[y], retain_graph=True)
    o("y.grad", y.grad)
    o("x.grad", x.grad)
    (y * y).sum().backward(inputs=[y])  # accumulates, once
    o("y.grad again", y.grad)
    z = x * 5  # named in inputs= only: no warning on reading its .grad
    (z * z).sum().backward(inputs=[z])
    o("z.grad", o.warns("z.grad read", lambda: z.grad))


@program
def return_values_of_grad_modes_and_setitem(torch, o):
    with torch.no_grad() as entered:
        o("no_grad enters as", entered)
    with torch.enable_grad() as entered:
        o("enable_grad enters as", entered)
    with torch.set_grad_enabled(False) as entered:
        o("set_grad_enabled enters as", entered)
    with torch.inference_mode() as entered:
        o("inference_mode enters as", entered)
    x = torch.zeros(3)
    o("__setitem__ returns", x.__setitem__(1, 2.0))
    o("x", x)


@program
def function_ctx_dirty_tensors_and_requires_grad(torch, o):
    class Double_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            o("requires_grad", ctx.requires_grad)
            o("dirty before", ctx.dirty_tensors)
            a.mul_(2)
            ctx.mark_dirty(a)
            o("dirty after", len(ctx.dirty_tensors))
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

    w = torch.ones(2, requires_grad=True)
    Double_.apply(w.clone()).sum().backward()
    o("w.grad", w.grad)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
