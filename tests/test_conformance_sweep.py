"""Conformance sweep: small programs of the kind found in autograd tutorials, course notebooks
and blog posts, each run with ``import gradviz as torch`` and with real PyTorch in the same
process, comparing everything observable.

A program is a function ``program(torch, o)``: ``torch`` is the module under test (gradviz or
torch) and ``o`` records observations (``o("name", value)``), errors (``o.raises``) and warnings
(``o.warns``). Observations are normalized at the time they are made (tensors are copied), so a
later in-place change does not alter what was seen. The two runs are then compared:

* tensors: class name, dtype, shape, ``requires_grad``, ``is_leaf`` exactly; values exactly for
  integers and bools, within 1e-6 relative for float32 (1e-12 for float64), unless a program
  declares a looser tolerance (long training loops, where summation order differs);
* ``torch.Size``, dtypes, Python numbers (type included), strings (printed output, with the
  module name ``gradviz`` read as ``torch``), containers (list vs tuple) recursively;
* errors: the exception type, and a key phrase that must appear in both messages (in
  gradviz's with the module name read as ``torch``);
* warnings: the categories, and a key phrase when given.

Programs never depend on torch's random streams: inputs come from ``tensor``/``arange``/
``linspace``/``ones``, and weights are copied into both libraries. Programs that use
``randn`` only check what does not depend on the values (shapes, dtypes, finite differences).
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch as _torch

import gradviz as _gradviz

PROGRAMS = []


def program(rtol=None, *, atol=None):
    """Register a program; ``rtol``/``atol`` loosen the float32 comparison for it."""

    def register(fn):
        fn.tolerance = (rtol, atol)
        PROGRAMS.append(fn)
        return fn

    if callable(rtol):  # used bare: @program
        fn, rtol = rtol, None
        return register(fn)
    return register


# ---- observations ---------------------------------------------------------------------------

_TENSOR_TYPES = (_torch.Tensor, _gradviz.Tensor)


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _text(value: str) -> str:
    return value.replace("gradviz", "torch")


def normalize(value):
    """A plain, comparable description of ``value`` (tensors are copied)."""
    if isinstance(value, _TENSOR_TYPES):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = np.array(value.detach().numpy(), copy=True)
        return ("tensor", type(value).__name__, _dtype_name(value.dtype), tuple(value.shape),
                bool(value.requires_grad), bool(value.is_leaf), data)
    if isinstance(value, (_torch.Size, _gradviz.Size)):
        return ("Size", tuple(value))
    if isinstance(value, (_torch.dtype, _gradviz.dtype)):
        return ("dtype", _dtype_name(value))
    if isinstance(value, str):
        return ("str", _text(value))
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, (int, float)):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.shape, value.copy())
    if isinstance(value, np.generic):
        return ("npscalar", str(value.dtype), value.item())
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return (kind, tuple(normalize(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((_text(str(k)), normalize(v)) for k, v in value.items()))
    raise TypeError(f"cannot observe {type(value).__name__}: {value!r}")


class Observer:
    def __init__(self):
        self.items = []
        self.phrases = {}

    def __call__(self, name, value):
        self.items.append((name, normalize(value)))

    def raises(self, name, fn, phrase, *, args=()):
        """Run ``fn``; record the exception type and message (the phrase must be in both)."""
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - compared with torch's
            self.items.append((name, ("error", type(exc).__name__, str(exc))))
        else:
            self.items.append((name, ("no error",)))
        self.phrases[name] = phrase

    def warns(self, name, fn, phrase=None):
        """Run ``fn`` and record the categories of the warnings it gave; returns its result."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        self.items.append((name, ("warnings", tuple((w.category.__name__, str(w.message))
                                                    for w in caught))))
        self.phrases[name] = phrase
        return result


def run(fn, module):
    o = Observer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(module, o)
        except Exception as exc:  # noqa: BLE001
            o.items.append(("<uncaught>", ("uncaught", type(exc).__name__, str(exc))))
    return o


def _float_tolerance(dtype, tolerance):
    rtol, atol = tolerance
    if dtype == "float64":
        return (rtol if rtol is not None else 1e-12), (atol if atol is not None else 1e-14)
    if dtype == "float16":
        return (rtol if rtol is not None else 1e-3), (atol if atol is not None else 1e-4)
    return (rtol if rtol is not None else 1e-6), (atol if atol is not None else 1e-7)


def compare(gv, th, where, tolerance, phrase, problems):
    if gv[0] != th[0]:
        problems.append(f"{where}: gradviz {gv[:3]!r} vs torch {th[:3]!r}")
        return
    kind = th[0]
    if kind == "tensor":
        _, gcls, gdt, gshape, grg, gleaf, gdata = gv
        _, tcls, tdt, tshape, trg, tleaf, tdata = th
        meta_g, meta_t = (gcls, gdt, gshape, grg, gleaf), (tcls, tdt, tshape, trg, tleaf)
        if meta_g != meta_t:
            problems.append(f"{where}: (class, dtype, shape, requires_grad, is_leaf) gradviz "
                            f"{meta_g} vs torch {meta_t}")
            return
        compare_arrays(gdata, tdata, tdt, where, tolerance, problems)
    elif kind == "ndarray":
        if gv[1:3] != th[1:3]:
            problems.append(f"{where}: ndarray {gv[1:3]} vs torch {th[1:3]}")
            return
        compare_arrays(gv[3], th[3], th[1], where, tolerance, problems)
    elif kind in ("list", "tuple", "dict"):
        if len(gv[1]) != len(th[1]):
            problems.append(f"{where}: {kind} of length {len(gv[1])} vs torch {len(th[1])}")
            return
        for i, (g, t) in enumerate(zip(gv[1], th[1])):
            if kind == "dict":
                if g[0] != t[0]:
                    problems.append(f"{where}: key {g[0]!r} vs torch {t[0]!r}")
                    continue
                compare(g[1], t[1], f"{where}[{t[0]!r}]", tolerance, phrase, problems)
            else:
                compare(g, t, f"{where}[{i}]", tolerance, phrase, problems)
    elif kind == "float":
        rtol, atol = _float_tolerance("float32", tolerance)
        if not (math.isclose(gv[1], th[1], rel_tol=rtol, abs_tol=atol)
                or (math.isnan(gv[1]) and math.isnan(th[1]))):
            problems.append(f"{where}: gradviz {gv[1]!r} vs torch {th[1]!r}")
    elif kind == "error":
        if gv[1] != th[1]:
            problems.append(f"{where}: gradviz raised {gv[1]}: {gv[2]}\n    torch raised {th[1]}: {th[2]}")
        elif phrase is not None and phrase not in _text(gv[2]):
            problems.append(f"{where}: gradviz's message lacks {phrase!r}: {gv[2]}")
        if phrase is not None and phrase not in th[2]:
            problems.append(f"{where}: the phrase {phrase!r} is not torch's: {th[2]}")
    elif kind == "warnings":
        gcat = [c for c, _ in gv[1]]
        tcat = [c for c, _ in th[1]]
        if gcat != tcat:
            problems.append(f"{where}: warnings gradviz {gv[1]} vs torch {th[1]}")
        elif phrase is not None:
            for (_, gm), (_, tm) in zip(gv[1], th[1]):
                if phrase not in tm:
                    problems.append(f"{where}: the phrase {phrase!r} is not torch's: {tm}")
                if phrase not in _text(gm):
                    problems.append(f"{where}: gradviz's warning lacks {phrase!r}: {gm}")
    elif gv != th:
        problems.append(f"{where}: gradviz {gv!r} vs torch {th!r}")


def compare_arrays(g, t, dtype, where, tolerance, problems):
    if g.shape != t.shape:
        problems.append(f"{where}: shape {g.shape} vs torch {t.shape}")
        return
    if dtype.startswith("float"):
        rtol, atol = _float_tolerance(dtype, tolerance)
        if not np.allclose(g, t, rtol=rtol, atol=atol, equal_nan=True):
            problems.append(f"{where}: values differ\n    gradviz {g!r}\n    torch   {t!r}")
    elif not np.array_equal(g, t):
        problems.append(f"{where}: values differ\n    gradviz {g!r}\n    torch   {t!r}")


def check(fn):
    th = run(fn, _torch)
    gv = run(fn, _gradviz)
    problems = []
    uncaught = [v for n, v in th.items if n == "<uncaught>"]
    assert not uncaught, f"the program fails in torch: {uncaught}"
    gv_names = [n for n, _ in gv.items]
    th_names = [n for n, _ in th.items]
    if gv_names != th_names:
        extra = {n: v for n, v in gv.items if n == "<uncaught>"}
        problems.append(f"observations differ: gradviz {gv_names} vs torch {th_names} {extra}")
    for (name, g), (_, t) in zip(gv.items, th.items):
        compare(g, t, name, fn.tolerance, th.phrases.get(name), problems)
    assert not problems, "\n".join(problems)


# =============================================================================================
# Programs
# =============================================================================================

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
    x1 = torch.tensor([2.0]).double(); x1.requires_grad = True
    x2 = torch.tensor([0.0]).double(); x2.requires_grad = True
    w1 = torch.tensor([-3.0]).double(); w1.requires_grad = True
    w2 = torch.tensor([1.0]).double(); w2.requires_grad = True
    b = torch.tensor([6.8813735870195432]).double(); b.requires_grad = True
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


# ---- nn: Linear, Sequential, losses, optimizers -----------------------------------------------

W1 = [[0.2, -0.1, 0.4], [0.3, 0.5, -0.2], [-0.4, 0.1, 0.3], [0.1, -0.3, 0.2]]
B1 = [0.1, -0.1, 0.05, 0.0]
W2 = [[0.3, -0.2, 0.1, 0.4], [-0.1, 0.2, 0.3, -0.3]]
B2 = [0.02, -0.03]
X_DATA = [[0.5, -1.0, 2.0], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.0],
          [0.0, 1.0, -1.0], [1.2, 1.2, 0.5]]
Y_REG = [[1.0, 0.0], [0.5, -0.5], [0.2, 0.3], [-1.0, 0.4], [0.0, 0.0], [0.7, -0.1]]
Y_CLS = [0, 1, 1, 0, 1, 0]


def make_mlp(torch, activation="ReLU"):
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        getattr(torch.nn, activation)(),
        torch.nn.Linear(4, 2),
    )
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(W1))
        model[0].bias.copy_(torch.tensor(B1))
        model[2].weight.copy_(torch.tensor(W2))
        model[2].bias.copy_(torch.tensor(B2))
    return model


@program
def linear_layer_forward_backward(torch, o):
    layer = torch.nn.Linear(3, 4)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W1))
        layer.bias.copy_(torch.tensor(B1))
    x = torch.tensor(X_DATA)
    out = layer(x)
    o("out", out)
    o("shapes", [layer.weight.shape, layer.bias.shape, out.shape])
    out.sum().backward()
    o("grads", [layer.weight.grad, layer.bias.grad])
    o("repr", repr(layer))


@program
def linear_layer_parameter_assignment(torch, o):
    layer = torch.nn.Linear(2, 1)
    layer.weight = torch.nn.Parameter(torch.tensor([[2.0, -1.0]]))
    layer.bias = torch.nn.Parameter(torch.tensor([0.5]))
    x = torch.tensor([[1.0, 1.0], [2.0, 3.0]])
    y = layer(x)
    o("y", y)
    o("params", list(layer.parameters()))
    o("names", [n for n, _ in layer.named_parameters()])


@program
def linear_no_bias(torch, o):
    layer = torch.nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W2)[:, :3])
    o("bias", layer.bias)
    x = torch.tensor(X_DATA[:2])
    o("out", layer(x))
    o("repr", repr(layer))
    o("n params", len(list(layer.parameters())))


@program
def sequential_repr_and_params(torch, o):
    model = make_mlp(torch)
    o("repr", repr(model))
    o("str", str(model))
    o("names", [n for n, _ in model.named_parameters()])
    o("shapes", [p.shape for p in model.parameters()])
    o("count", sum(p.numel() for p in model.parameters()))
    o("state_dict keys", list(model.state_dict().keys()))
    o("len", len(model))
    o("item", repr(model[1]))


@program
def mlp_training_sgd(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    loss_fn = torch.nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(8):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        o(f"loss {step}", loss.item())
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_sgd_momentum_weight_decay(torch, o):
    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-2)
    for step in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        o(f"loss {step}", loss.item())
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_sgd_nesterov(torch, o):
    model = make_mlp(torch, "Sigmoid")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.8, nesterov=True)
    for step in range(6):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    o("loss", loss)
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_adam(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(10):
        opt.zero_grad()
        loss = torch.nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    o("losses", losses)
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_adam_weight_decay_amsgrad(torch, o):
    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.Adam(model.parameters(), lr=0.02, betas=(0.8, 0.99), weight_decay=0.1,
                           amsgrad=True)
    for step in range(8):
        opt.zero_grad()
        loss = torch.nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
    o("loss", loss)
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def classifier_cross_entropy_training(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_CLS)
    criterion = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(10):
        logits = model(x)
        loss = criterion(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        o(f"loss {epoch}", loss.item())
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    o("pred", pred)
    o("accuracy", (pred == y).float().mean().item())
    o("correct", (pred == y).sum().item())


@program
def cross_entropy_values(torch, o):
    logits = torch.tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]], requires_grad=True)
    target = torch.tensor([0, 2])
    F = torch.nn.functional
    for reduction in ("mean", "sum", "none"):
        o(reduction, F.cross_entropy(logits, target, reduction=reduction))
    loss = torch.nn.CrossEntropyLoss()(logits, target)
    loss.backward()
    o("grad", logits.grad)
    o("repr loss", repr(loss.detach()))


@program
def nll_loss_with_log_softmax(torch, o):
    logits = torch.tensor([[1.0, 2.0, 3.0], [1.0, -1.0, 0.0]], requires_grad=True)
    target = torch.tensor([2, 0])
    logp = torch.nn.functional.log_softmax(logits, dim=1)
    loss = torch.nn.functional.nll_loss(logp, target)
    loss.backward()
    o("loss", loss)
    o("grad", logits.grad)
    o("module", torch.nn.NLLLoss()(logp, target))


@program
def mse_loss_reductions(torch, o):
    pred = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    target = torch.tensor([[1.5, 2.0], [2.0, 5.0]])
    for reduction in ("mean", "sum", "none"):
        o(reduction, torch.nn.MSELoss(reduction=reduction)(pred, target))
    torch.nn.functional.mse_loss(pred, target, reduction="sum").backward()
    o("grad", pred.grad)


@program
def mse_loss_broadcast_warning(torch, o):
    pred = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    target = torch.tensor([1.0, 2.5, 2.0])
    loss = o.warns("warn", lambda: torch.nn.functional.mse_loss(pred, target),
                   "that is different to the input size")
    o("loss", loss)
    loss.backward()
    o("grad", pred.grad)


@program
def module_zero_grad_and_optimizer_zero_grad(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    model(x).sum().backward()
    o("grad before", model[0].bias.grad)
    model.zero_grad()
    o("after model.zero_grad", model[0].bias.grad)
    model(x).sum().backward()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad(set_to_none=False)
    o("set_to_none False", model[0].bias.grad)
    opt.zero_grad()
    o("default", model[0].bias.grad)


@program
def custom_module_subclass(torch, o):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(3, 4)
            self.fc2 = torch.nn.Linear(4, 2)
            self.scale = torch.nn.Parameter(torch.tensor(2.0))

        def forward(self, x):
            x = torch.relu(self.fc1(x))
            return self.fc2(x) * self.scale

    net = Net()
    with torch.no_grad():
        net.fc1.weight.copy_(torch.tensor(W1))
        net.fc1.bias.copy_(torch.tensor(B1))
        net.fc2.weight.copy_(torch.tensor(W2))
        net.fc2.bias.copy_(torch.tensor(B2))
    x = torch.tensor(X_DATA)
    out = net(x)
    out.pow(2).mean().backward()
    o("out", out)
    o("names", [n for n, _ in net.named_parameters()])
    o("grads", [p.grad for p in net.parameters()])
    o("repr", repr(net))


@program
def parameter_printing(torch, o):
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    o("repr", repr(p))
    o("str", str(p))
    q = torch.nn.Parameter(torch.tensor([[1.0, 0.5]]), requires_grad=False)
    o("frozen", repr(q))
    o("flags", [p.is_leaf, p.requires_grad, isinstance(p, torch.Tensor)])
    o("times two", repr(p * 2))


@program
def state_dict_and_load(torch, o):
    model = make_mlp(torch)
    sd = model.state_dict()
    o("keys", list(sd.keys()))
    o("values", list(sd.values()))
    other = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    result = other.load_state_dict(sd)
    o("result", [list(result.missing_keys), list(result.unexpected_keys)])
    x = torch.tensor(X_DATA)
    o("same", torch.allclose(model(x), other(x)))


@program
def eval_under_no_grad(torch, o):
    model = make_mlp(torch, "Sigmoid")
    model.eval()
    o("training", model.training)
    with torch.no_grad():
        out = model(torch.tensor(X_DATA))
    o("out", out)
    model.train()
    o("training after", [m.training for m in model])


@program
def functional_activations(torch, o):
    F = torch.nn.functional
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], requires_grad=True)
    outs = [F.relu(x), torch.sigmoid(x), torch.tanh(x), F.softmax(x, dim=0),
            F.log_softmax(x, dim=0), F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x), F.gelu(x),
            F.silu(x)]
    o("outs", outs)
    grads = [torch.autograd.grad(out.sum() if i < 3 else (out * x).sum(), x, retain_graph=True)[0]
             for i, out in enumerate(outs)]
    o("grads", grads)


@program
def activation_modules(torch, o):
    x = torch.tensor([[-1.0, 0.0, 2.0]], requires_grad=True)
    mods = [torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.Sigmoid()]
    o("outs", [m(x) for m in mods])
    o("reprs", [repr(m) for m in mods])


@program
def optimizer_repr_and_state(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    (w ** 2).sum().backward()
    opt.step()
    o("w", w)
    o("buffer", opt.state[w]["momentum_buffer"])
    o("lr", opt.param_groups[0]["lr"])
    opt.param_groups[0]["lr"] = 0.01
    opt.zero_grad()
    (w ** 2).sum().backward()
    opt.step()
    o("w2", w)


@program
def adam_single_param(torch, o):
    w = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        loss = ((w - torch.tensor([0.0, 1.0, 2.0])) ** 2).sum()
        loss.backward()
        opt.step()
        o("w", w)
    o("state step", float(opt.state[w]["step"]))


@program
def sgd_param_groups(torch, o):
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([1.0], requires_grad=True)
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    (3 * a + 3 * b).sum().backward()
    opt.step()
    o("a, b", [a, b])


@program
def optimizer_errors(torch, o):
    o.raises("empty", lambda: torch.optim.SGD([], lr=0.1), "optimizer got an empty parameter list")
    w = torch.tensor([1.0], requires_grad=True)
    o.raises("negative lr", lambda: torch.optim.SGD([w], lr=-1.0), "Invalid learning rate")
    o.raises("adam beta", lambda: torch.optim.Adam([w], betas=(1.5, 0.9)),
             "Invalid beta parameter at index 0")


@program
def closure_step(torch, o):
    w = torch.tensor([2.0], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    o("loss", loss)
    o("w", w)


# ---- tensor creation -------------------------------------------------------------------------

@program
def creation_tensor_dtypes(torch, o):
    o("floats", torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    o("ints", torch.tensor([1, 2, 3]))
    o("bools", torch.tensor([True, False]))
    o("mixed", torch.tensor([1, 2.5]))
    o("scalar", torch.tensor(3.5))
    o("int scalar", torch.tensor(3))
    o("explicit", torch.tensor([1, 2], dtype=torch.float32))
    o("double", torch.tensor([1.0, 2.0], dtype=torch.float64))
    o("int32", torch.tensor([1, 2], dtype=torch.int32))
    o("empty", torch.tensor([]))
    o("bool + int", torch.tensor([True, 2]))


@program
def creation_zeros_ones_full(torch, o):
    o("zeros", torch.zeros(2, 3))
    o("zeros tuple", torch.zeros((2, 3)))
    o("ones", torch.ones(3))
    o("ones list", torch.ones([2, 2]))
    o("ones int", torch.ones(2, dtype=torch.int64))
    o("full int", torch.full((2, 2), 7))
    o("full float", torch.full((2,), 7.0))
    o("full bool", torch.full((2,), True))
    o("empty shape", torch.empty(2, 3).shape)
    o("zeros 0-d", torch.zeros(()))
    o("ones grad", torch.ones(2, requires_grad=True))


@program
def creation_arange(torch, o):
    o("arange 5", torch.arange(5))
    o("arange 1 10 2", torch.arange(1, 10, 2))
    o("arange float", torch.arange(0, 1, 0.1))
    o("arange 5.", torch.arange(5.0))
    o("arange neg", torch.arange(5, 0, -1))
    o("arange dtype", torch.arange(4, dtype=torch.float32))
    o("arange 0.5 step", torch.arange(1, 2.5, 0.5))
    o("arange len", len(torch.arange(0, 10, 3)))


@program
def creation_linspace_eye(torch, o):
    o("linspace", torch.linspace(0, 1, 5))
    o("linspace neg", torch.linspace(-1, 1, steps=4))
    o("linspace one", torch.linspace(2, 3, 1))
    o("linspace f64", torch.linspace(0, 1, 3, dtype=torch.float64))
    o("eye", torch.eye(3))
    o("eye rect", torch.eye(2, 3))
    o("eye int", torch.eye(2, dtype=torch.int64))


@program
def creation_like(torch, o):
    x = torch.tensor([[1, 2], [3, 4]])
    y = torch.tensor([1.5, 2.5], requires_grad=True)
    o("zeros_like", torch.zeros_like(x))
    o("ones_like", torch.ones_like(y))
    o("full_like", torch.full_like(x, 9))
    o("full_like float on int", torch.full_like(x, 2.7))
    o("zeros_like dtype", torch.zeros_like(x, dtype=torch.float32))
    o("empty_like shape", torch.empty_like(y).shape)
    o("ones_like grad", torch.ones_like(y, requires_grad=True))


@program
def creation_conversions(torch, o):
    x = torch.tensor([1.7, -2.3, 0.0])
    o("double", x.double())
    o("float", x.double().float())
    o("long", x.long())
    o("int", x.int())
    o("bool", x.bool())
    o("half", x.half())
    o("to", x.to(torch.float64))
    o("to int", x.to(dtype=torch.int64))
    o("type_as", x.type_as(torch.tensor([1])))
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    z = y.double()
    o("grad through cast", z)
    z.sum().backward()
    o("grad", y.grad)


@program
def tensor_from_tensor_warning(torch, o):
    x = torch.tensor([1.0, 2.0])
    y = o.warns("copy construct", lambda: torch.tensor(x), "To copy construct from a tensor")
    o("y", y)
    y[0] = 5
    o("x unchanged", x)


@program
def creation_errors(torch, o):
    o.raises("ragged", lambda: torch.tensor([[1, 2], [3]]), "expected sequence of length 2 at dim 1 (got 1)")
    o.raises("zeros negative", lambda: torch.zeros(-1), "zeros: Dimension size must be non-negative.")
    o.raises("ones negative", lambda: torch.ones(2, -1), "Trying to create tensor with negative dimension -1: [2, -1]")
    o.raises("randn negative", lambda: torch.randn(-3), "Trying to create tensor with negative dimension -3: [-3]")


@program
def tensor_class_constructor(torch, o):
    o("Tensor list", torch.Tensor([1, 2, 3]))
    o("Tensor nested", torch.Tensor([[1.5, 2], [3, 4]]))
    o("Tensor shape", torch.Tensor(2, 3).shape)
    o("Tensor dtype", torch.Tensor(2).dtype)


# ---- shape queries and printing ------------------------------------------------------------------

@program
def shape_queries(torch, o):
    x = torch.zeros(2, 3, 4)
    o("shape", x.shape)
    o("size", x.size())
    o("size 1", x.size(1))
    o("size -1", x.size(-1))
    o("dim", x.dim())
    o("ndim", x.ndim)
    o("numel", x.numel())
    o("nelement", x.nelement())
    o("len", len(x))
    o("shape[0]", x.shape[0])
    o("shape slice", x.shape[1:])
    o("shape list", list(x.shape))
    o("shape eq", x.shape == (2, 3, 4))
    o("repr shape", repr(x.shape))
    o("str shape", str(x.shape))
    o("print slice", str(x.shape[1:]))
    o("Size", torch.Size([2, 3]))
    o("Size numel", torch.Size([2, 3]).numel())
    o("repr Size", repr(torch.Size([2, 3])))
    o("empty Size", repr(torch.zeros(()).shape))
    o("Size plus tuple", repr(x.shape + (5,)))
    o("torch.numel", torch.numel(x))


@program
def dtype_queries(torch, o):
    x = torch.tensor([1.0])
    o("dtype", x.dtype)
    o("str", str(x.dtype))
    o("repr", repr(torch.int64))
    o("eq", [x.dtype == torch.float32, x.dtype == torch.float, torch.float is torch.float32,
             torch.double == torch.float64, torch.long == torch.int64])
    o("is_floating_point", [x.is_floating_point(), torch.tensor([1]).is_floating_point(),
                            torch.float32.is_floating_point, torch.int32.is_floating_point])
    o("element_size", [x.element_size(), torch.tensor([1]).element_size(),
                       x.double().element_size()])
    o("default", torch.get_default_dtype())
    o("itemsize", torch.float64.itemsize)
    o("f-string", f"{x.dtype}")


@program
def printing_float_tensors(torch, o):
    cases = [
        torch.tensor([1.0, 2.0, 3.0]),
        torch.tensor([1.5, -2.25, 3.0]),
        torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        torch.tensor([0.1, 0.2, 0.3]),
        torch.tensor([1e-5, 1.0]),
        torch.tensor([1e10, 1.0]),
        torch.tensor([123456.0, 0.5]),
        torch.tensor([0.0001, 0.001]),
        torch.tensor(3.14159),
        torch.tensor(-0.0),
        torch.tensor([float("nan"), 1.0, float("inf")]),
        torch.tensor([float("-inf"), 2.5]),
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor([0.1], dtype=torch.float64),
        torch.tensor([1.5], dtype=torch.float16),
        torch.zeros(2, 0),
        torch.tensor([]),
        torch.tensor([-1.0, 1.0]),
        torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]),
        torch.tensor([100.0, 0.001]),
        torch.tensor([1000.5, 2.0]),
        torch.tensor([1e-8]),
        torch.tensor([12345678.0]),
        torch.tensor([0.0, 0.0]),
    ]
    o("repr", [repr(t) for t in cases])
    o("str", [str(t) for t in cases])


@program
def printing_int_bool_tensors(torch, o):
    cases = [
        torch.tensor([1, 2, 3]),
        torch.tensor([-10, 200, 3]),
        torch.tensor([[1, 2], [30, 4]]),
        torch.tensor(7),
        torch.tensor([1, 2], dtype=torch.int32),
        torch.tensor([1, 2], dtype=torch.uint8),
        torch.tensor([1, 2], dtype=torch.int16),
        torch.tensor([True, False, True]),
        torch.tensor([True, True]),
        torch.tensor(False),
        torch.tensor([[True], [False]]),
        torch.tensor([], dtype=torch.int64),
        torch.zeros(0, 3, dtype=torch.int64),
    ]
    o("repr", [repr(t) for t in cases])


@program
def printing_grad_tensors(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    cases = [x, x + 1, x - 1, x * 2, x / 2, x ** 2, -x, x.sum(), x.mean(), x.exp(), x.log(),
             torch.tanh(x), torch.sigmoid(x), torch.relu(x), x.sin(), x.cos(), x.sqrt(),
             x.abs(), x.view(2, 1), x.reshape(1, 2), x.unsqueeze(0), x[0], x[:1], x.clone(),
             x.t() if x.dim() < 2 else x, x @ x, x.double(), x.max(), x.norm(), 2 - x, 1 / x,
             x.pow(3), torch.cat([x, x]), x.expand(2, 2), x.repeat(2),
             x.clamp(min=1.5), torch.softmax(x, 0), x.T, x.squeeze(), x.prod(), x.cumsum(0),
             x.std(), x.var(), torch.where(x > 1, x, 0.0), x.flip(0), x.permute(0),
             x.transpose(0, 0), x.unsqueeze(1).t(), x.masked_fill(x > 1, 0.0), x.detach()]
    o("repr", [repr(t) for t in cases])
    y = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    o("double repr", [repr(y), repr(y * 2)])


@program
def printing_large_tensors(torch, o):
    o("arange 2000", repr(torch.arange(2000)))
    o("float 1500", repr(torch.arange(1500).float()))
    o("matrix", repr(torch.arange(2000).reshape(100, 20)))
    o("wide", repr(torch.arange(30).float()))
    o("wide ints", repr(torch.arange(40)))
    o("wide matrix", repr(torch.linspace(0, 1, 24).reshape(2, 12)))
    o("long decimals", repr(torch.linspace(-1, 1, 15)))


@program
def printing_print_function(torch, o):
    import io
    import contextlib

    buffer = io.StringIO()
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (x ** 2).sum()
    with contextlib.redirect_stdout(buffer):
        print(x)
        print(loss)
        print(x.shape)
        print(x.dtype)
        print("loss:", loss.item())
        print(f"loss = {loss}")
        print([x, x.grad])
        print(torch.tensor([[1, 2], [3, 4]]))
    o("stdout", buffer.getvalue())


@program
def format_specs(torch, o):
    loss = torch.tensor(0.123456)
    o("f .4f", f"{loss:.4f}")
    o("format", "{:.2f}".format(torch.tensor(2.5)))
    o("f item", f"{loss.item():.3f}")
    o("f plain", f"{loss}")
    o("int fmt", f"{torch.tensor(5):d}")
    o("fmt with grad", f"{torch.tensor(1.5, requires_grad=True):.1f}")
    o.raises("vector fmt", lambda: f"{torch.tensor([1.0, 2.0]):.2f}", "unsupported format string")


# ---- views, reshaping ----------------------------------------------------------------------------

@program
def views_and_reshapes(torch, o):
    x = torch.arange(6.0, requires_grad=True)
    a = x.view(2, 3)
    b = x.view(-1, 2)
    c = a.T
    d = a.t()
    e = a.reshape(3, 2)
    f = a.flatten()
    g = a.unsqueeze(0)
    h = g.squeeze(0)
    i = a.permute(1, 0)
    j = a.transpose(0, 1)
    k = a.view(-1)
    o("shapes", [t.shape for t in (a, b, c, d, e, f, g, h, i, j, k)])
    o("values", [a, c, e, i])
    o("names", [t.grad_fn.name() for t in (a, c, d, e, f, g, h, i, j)])
    (c * torch.arange(6.0).view(3, 2)).sum().backward()
    o("grad", x.grad)


@program
def view_errors(torch, o):
    x = torch.arange(6)
    o.raises("bad view", lambda: x.view(4), "shape '[4]' is invalid for input of size 6")
    o.raises("bad reshape", lambda: x.reshape(4, -1), "shape '[4, -1]' is invalid for input of size 6")
    t = torch.arange(6).view(2, 3).t()
    o("is_contiguous", t.is_contiguous())
    o.raises("noncontiguous view", lambda: t.view(6), "view size is not compatible with input tensor's size and stride")
    o("contiguous view", t.contiguous().view(6))
    o("reshape ok", t.reshape(6))


@program
def squeeze_unsqueeze(torch, o):
    x = torch.zeros(1, 3, 1, 2)
    o("squeeze", x.squeeze().shape)
    o("squeeze 0", x.squeeze(0).shape)
    o("squeeze 1", x.squeeze(1).shape)
    o("unsqueeze -1", x.unsqueeze(-1).shape)
    o("None index", torch.arange(3)[None, :, None].shape)
    o("torch.squeeze", torch.squeeze(x, 2).shape)


@program
def expand_and_repeat(torch, o):
    x = torch.tensor([[1.0], [2.0]], requires_grad=True)
    e = x.expand(2, 3)
    o("expand", e)
    r = x.repeat(1, 3)
    o("repeat", r)
    (e * torch.arange(6.0).view(2, 3)).sum().backward()
    o("grad", x.grad)
    o("expand_as", x.expand_as(torch.zeros(2, 4)).shape)
    o("expand -1", x.expand(-1, 4).shape)


@program
def cat_and_stack(torch, o):
    a = torch.tensor([[1.0, 2.0]], requires_grad=True)
    b = torch.tensor([[3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    c = torch.cat([a, b], dim=0)
    o("cat0", c)
    d = torch.cat((b, b), dim=1)
    o("cat1", d)
    s = torch.stack([b, b])
    o("stack", s)
    s1 = torch.stack([b[0], b[1]], dim=1)
    o("stack1", s1)
    (c.sum() + d.sum() * 2 + (s1 ** 2).sum()).backward()
    o("grads", [a.grad, b.grad])
    o.raises("cat mismatch", lambda: torch.cat([a, torch.zeros(1, 3)]), "Sizes of tensors must match except in dimension 0")
    o.raises("stack mismatch", lambda: torch.stack([a, b]), "stack expects each tensor to be equal size")
    o("cat ints floats", torch.cat([torch.tensor([1]), torch.tensor([2.5])]))


@program
def split_chunk_unbind(torch, o):
    x = torch.arange(10.0, requires_grad=True)
    parts = torch.split(x, 3)
    o("split", parts)
    chunks = x.chunk(3)
    o("chunk", chunks)
    rows = torch.arange(6).view(2, 3).unbind(0)
    o("unbind", rows)
    (parts[0].sum() * 2 + chunks[2].sum()).backward()
    o("grad", x.grad)


# ---- indexing ------------------------------------------------------------------------------------

@program
def basic_indexing(torch, o):
    x = torch.arange(12).reshape(3, 4)
    o("x[0]", x[0])
    o("x[-1]", x[-1])
    o("x[1, 2]", x[1, 2])
    o("x[1][2]", x[1][2])
    o("x[:, 0]", x[:, 0])
    o("x[1:3]", x[1:3])
    o("x[:, 1:3]", x[:, 1:3])
    o("x[..., 1]", x[..., 1])
    o("x[::2]", x[::2])
    o("x[:, ::-1] error", None)
    o("x[None]", x[None].shape)
    o("x[:, None]", x[:, None].shape)
    o("x[0, :, None]", x[0, :, None].shape)


@program
def advanced_indexing(torch, o):
    x = torch.arange(12.0).reshape(3, 4)
    o("list", x[[0, 2]])
    o("tensor idx", x[torch.tensor([2, 0])])
    o("pairs", x[[0, 1, 2], [3, 2, 1]])
    o("mask", x[x > 5])
    o("row mask", x[torch.tensor([True, False, True])])
    o("mixed", x[1:, [0, 3]])
    o("neg", x[-1, -1])
    o("bool scalar count", (x > 5).sum())


@program
def indexing_gradients(torch, o):
    x = torch.arange(6.0, requires_grad=True)
    y = x[1:4].sum() + x[[0, 0, 5]].sum() * 2 + x[x > 3].sum() * 10
    y.backward()
    o("grad", x.grad)
    m = torch.arange(6.0).view(2, 3).requires_grad_()
    z = (m[:, 1] * m[1]).sum() if False else (m[:, 1].sum() + m[1, 2])
    z.backward()
    o("matrix grad", m.grad)


@program
def index_errors(torch, o):
    x = torch.arange(3)
    o.raises("out of bounds", lambda: x[5], "index 5 is out of bounds for dimension 0 with size 3")
    o.raises("too many", lambda: x[0, 0], "too many indices for tensor of dimension 1")
    m = torch.zeros(2, 3)
    o.raises("dim", lambda: m.sum(dim=2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)")


@program
def setitem_variants(torch, o):
    x = torch.zeros(3, 4)
    x[0] = 1.0
    x[1, 2] = 5.0
    x[:, 3] = torch.tensor([7.0, 8.0, 9.0])
    x[x == 0] = -1.0
    o("x", x)
    y = torch.arange(5)
    y[1:3] = 0
    o("y", y)
    y[torch.tensor([0, 4])] = torch.tensor([9, 9])
    o("y2", y)
    z = torch.zeros(3)
    z[0] = 2.7
    o("z", z)
    w = torch.zeros(3, dtype=torch.int64)
    w[1] = 2.7
    o("int truncates", w)


@program
def setitem_on_leaf_error_and_clone(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def assign():
        x[0] = 0.0

    o.raises("leaf", assign, "a leaf Variable that requires grad is being used in an in-place operation.")
    y = x.clone()
    y[0] = 0.0
    o("y", y)
    (y * y).sum().backward()
    o("grad", x.grad)


@program
def masked_fill_and_where(torch, o):
    x = torch.tensor([[1.0, -2.0], [-3.0, 4.0]], requires_grad=True)
    m = x.masked_fill(x < 0, 0.0)
    o("masked", m)
    w = torch.where(x > 0, x, torch.zeros_like(x))
    o("where", w)
    w2 = torch.where(x > 0, x * 2, -x)
    o("where2", w2)
    w3 = torch.where(x > 0, x, 0.0)
    o("where scalar", w3)
    (m.sum() + w2.sum()).backward()
    o("grad", x.grad)
    o("where one arg", torch.where(torch.tensor([0, 3, 0, 1]) > 0))
    o("where ints", torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([10, 20])))
    o("where int float", torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), 0.5))


@program
def gather_scatter(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    idx = torch.tensor([[2], [0]])
    g = x.gather(1, idx)
    o("gather", g)
    g.sum().backward()
    o("grad", x.grad)
    s = torch.zeros(2, 3).scatter(1, idx, 1.0)
    o("scatter one-hot", s)
    o("index_select", torch.index_select(x, 0, torch.tensor([1, 1])))


@program
def one_hot_like_eye_indexing(torch, o):
    labels = torch.tensor([2, 0, 1])
    onehot = torch.eye(3)[labels]
    o("onehot", onehot)
    logits = torch.tensor([[0.1, 0.2, 3.0], [2.0, 0.1, 0.0], [0.0, 1.0, 0.5]], requires_grad=True)
    probs = torch.softmax(logits, dim=1)
    loss = -(onehot * torch.log(probs)).sum(dim=1).mean()
    loss.backward()
    o("loss", loss)
    o("grad", logits.grad)
    o("picked", probs[torch.arange(3), labels])


# ---- reductions ----------------------------------------------------------------------------------

@program
def reductions_sum_mean(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    o("sum", x.sum())
    o("sum0", x.sum(0))
    o("sum1 keep", x.sum(dim=1, keepdim=True))
    o("sum tuple", x.sum(dim=(0, 1)))
    o("mean", x.mean())
    o("mean1", x.mean(1))
    o("mean -1 keep", torch.mean(x, dim=-1, keepdim=True))
    o("torch.sum", torch.sum(x, 0))
    (x.sum(0) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("grad", x.grad)


@program
def reductions_int_and_bool(torch, o):
    x = torch.tensor([[1, 2], [3, 4]])
    o("sum int", x.sum())
    o("sum int dim", x.sum(0))
    b = torch.tensor([True, False, True])
    o("sum bool", b.sum())
    o("float mean", x.float().mean())
    o.raises("mean int", lambda: x.mean(), "mean(): could not infer output dtype")
    o("sum dtype", x.sum(dtype=torch.float64))
    o("int32 sum", torch.tensor([1, 2], dtype=torch.int32).sum())
    o("max int", x.max())
    o("prod int", x.prod())
    o("cumsum int", x.cumsum(0))


@program
def max_min_with_dim(torch, o):
    x = torch.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 9.0]], requires_grad=True)
    values, indices = torch.max(x, dim=1)
    o("values", values)
    o("indices", indices)
    r = x.max(dim=0)
    o("named", [r.values, r.indices])
    o("tuple", tuple(r))
    o("repr", repr(r))
    m = x.min(1, keepdim=True)
    o("min keepdim", [m[0], m[1]])
    o("max all", x.max())
    o("argmax", x.argmax())
    o("argmax dim", x.argmax(dim=1))
    o("argmin dim keep", torch.argmin(x, dim=0, keepdim=True))
    values.sum().backward()
    o("grad", x.grad)
    o("max binary", torch.max(x, torch.tensor(4.0)))


@program
def max_ties_gradient(torch, o):
    x = torch.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    o("max all ties", x.grad)
    x.grad = None
    v, i = x.max(0)
    v.backward()
    o("max dim ties", [i, x.grad])
    y = torch.tensor([2.0, 2.0], requires_grad=True)
    torch.amax(y, 0).backward()
    o("amax", y.grad)


@program
def reductions_more(torch, o):
    x = torch.tensor([[1.0, 2.0, 4.0], [3.0, 0.5, -1.0]], requires_grad=True)
    outs = {
        "prod": x.prod(), "prod1": x.prod(1), "std": x.std(), "var": x.var(),
        "std0": x.std(dim=0), "var unbiased False": x.var(unbiased=False),
        "var correction0": x.var(dim=1, correction=0), "cumsum": x.cumsum(dim=1),
        "norm": x.norm(), "norm dim": x.norm(dim=1), "norm p1": x.norm(p=1),
        "logsumexp": torch.logsumexp(x, dim=1), "amax": x.amax(dim=0), "amin": x.amin(),
    }
    o("outs", outs)
    total = sum(v.sum() for v in outs.values())
    total.backward()
    o("grad", x.grad)


@program
def topk_sort(torch, o):
    x = torch.tensor([3.0, 1.0, 4.0, 1.5, 5.0], requires_grad=True)
    v, i = torch.topk(x, 2)
    o("topk", [v, i])
    s = torch.sort(x, descending=True)
    o("sort", [s.values, s.indices])
    o("argsort", torch.argsort(x))
    v.sum().backward()
    o("grad", x.grad)


# ---- broadcasting --------------------------------------------------------------------------------

@program
def broadcasting_shapes_and_grads(torch, o):
    a = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    b = torch.tensor([[10.0, 20.0, 30.0, 40.0]], requires_grad=True)
    c = a + b
    o("c", c)
    (c * c).sum().backward()
    o("grads", [a.grad, b.grad])
    m = torch.ones(2, 3, requires_grad=True)
    v = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (m * v).sum().backward()
    o("row broadcast", [m.grad, v.grad])
    s = torch.tensor(2.0, requires_grad=True)
    (m * s).sum().backward()
    o("scalar tensor", s.grad)


@program
def broadcasting_error(torch, o):
    a = torch.ones(2, 3)
    b = torch.ones(2)
    o.raises("add", lambda: a + b,
             "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")
    o.raises("mul", lambda: torch.ones(4, 2) * torch.ones(3, 1),
             "The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 0")


@program
def broadcasting_batch_norm_like(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]], requires_grad=True)
    mean = x.mean(dim=0, keepdim=True)
    std = x.std(dim=0, keepdim=True)
    z = (x - mean) / (std + 1e-5)
    o("z", z)
    (z * torch.tensor([[1.0, 2.0]])).sum().backward()
    o("grad", x.grad)


# ---- dtype promotion -----------------------------------------------------------------------------

@program
def promotion_int_float(torch, o):
    i = torch.tensor([1, 2, 3])
    f = torch.tensor([0.5, 1.5, 2.5])
    d = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64)
    o("int + float scalar", i + 1.5)
    o("int * int scalar", i * 2)
    o("int + float tensor", i + f)
    o("float32 + float64", f + d)
    o("int / int", i / 2)
    o("int / int tensor", i / i)
    o("int ** 2", i ** 2)
    o("int ** float", i ** 0.5)
    o("float32 * float64 0-d", f * torch.tensor(2.0, dtype=torch.float64))
    o("int * float 0-d", i * torch.tensor(2.5))
    o("int32 + int64", torch.tensor([1], dtype=torch.int32) + torch.tensor([1]))
    o("int32 + int scalar", torch.tensor([1], dtype=torch.int32) + 5)
    o("uint8 + int8", torch.tensor([1], dtype=torch.uint8) + torch.tensor([1], dtype=torch.int8))
    o("float16 + float32", torch.tensor([1.0], dtype=torch.float16) + torch.tensor([1.0]))
    o("int - float", i - f)
    o("float // int", f // 1)
    o("int // int", torch.tensor([7, -7]) // 2)
    o("int % int", torch.tensor([7, -7]) % 3)
    o("float % float", torch.tensor([5.5, -5.5]) % 2.0)


@program
def promotion_bool(torch, o):
    b = torch.tensor([True, False, True])
    i = torch.tensor([1, 2, 3])
    o("bool + int tensor", b + i)
    o("bool * float", b * 1.5)
    o("bool + int scalar", b + 1)
    o("bool.float", b.float())
    o("bool & bool", b & torch.tensor([True, True, False]))
    o("bool | bool", b | torch.tensor([False, True, False]))
    o("~bool", ~b)
    o("bool + bool", b + b)
    o("comparison dtype", (i > 1).dtype)
    o("logical", torch.logical_and(i > 1, b))
    o.raises("neg bool", lambda: -b, "Negation, the `-` operator, on a bool tensor is not supported")
    o.raises("sub bool", lambda: b - b, "Subtraction, the `-` operator, with two bool tensors is not supported")


@program
def promotion_grad_dtypes(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    d = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    y = x * d
    o("y", y)
    y.sum().backward()
    o("grads", [x.grad, d.grad])
    z = torch.tensor([1.0, 2.0], requires_grad=True)
    (z * torch.tensor([1, 2])).sum().backward()
    o("int other", z.grad)


@program
def comparison_ops(torch, o):
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([3.0, 2.0, 1.0])
    o("ops", [a < b, a <= b, a > b, a >= b, a == b, a != b, a > 2, 2 < a, a == 2])
    o("torch fns", [torch.eq(a, b), torch.gt(a, 1.5), torch.lt(a, b)])
    o("equal", torch.equal(a, a.clone()))
    o("allclose", torch.allclose(a, a + 1e-9))
    o("any all", [(a > 2).any(), (a > 0).all(), (a > 0).all().item()])
    o.raises("bool ambiguous", lambda: bool(a > 1), "Boolean value of Tensor with more than one value is ambiguous")
    o("bool single", bool(torch.tensor([2.0]) > 1))


# ---- in-place ops --------------------------------------------------------------------------------

@program
def inplace_basics(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0])
    o("version0", x._version)
    x.add_(1)
    x.mul_(2)
    o("after", x)
    o("version", x._version)
    x.zero_()
    o("zero_", x)
    x.fill_(3.5)
    o("fill_", x)
    x.clamp_(max=2.0)
    o("clamp_", x)
    y = torch.tensor([-1.0, 1.0])
    y.relu_()
    o("relu_", y)
    z = torch.tensor([1.0, 2.0])
    z += 1
    z *= 3
    z -= 1
    z /= 2
    o("augmented", z)
    i = torch.tensor([1, 2])
    i += 1
    o("int +=", i)
    o.raises("int += float", lambda: i.add_(1.5), "result type Float can't be cast to the desired output type Long")


@program
def inplace_saved_tensor_error(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    o.raises("modified", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an inplace operation")
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    c = b * b
    b.mul_(3)
    o.raises("modified2", lambda: c.sum().backward(), "is at version 1; expected version 0 instead")


@program
def inplace_on_nonleaf_ok(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.add_(1)
    o("y", y)
    o("name", y.grad_fn.name())
    y.sum().backward()
    o("grad", x.grad)
    z = x + 0
    z.mul_(2)
    z.sum().backward()
    o("grad2", x.grad)


@program
def inplace_leaf_no_grad_update(torch, o):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        w.mul_(0.5)
        w += 1
    o("w", w)
    o("flags", [w.is_leaf, w.requires_grad])


@program
def copy_and_version(torch, o):
    a = torch.zeros(3)
    a.copy_(torch.tensor([1, 2, 3]))
    o("copy int into float", a)
    b = torch.zeros(2, 3)
    b.copy_(torch.tensor([1.0, 2.0, 3.0]))
    o("broadcast copy", b)
    o("version", b._version)


# ---- matmul ---------------------------------------------------------------------------------------

@program
def matmul_variants(torch, o):
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    b = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], requires_grad=True)
    v = torch.tensor([1.0, -1.0], requires_grad=True)
    outs = [a @ b, torch.matmul(a, b), a.mm(b), torch.mm(a, b), a @ v, torch.mv(a, v), v @ v,
            torch.dot(v, v), b.T @ a.T]
    o("outs", outs)
    sum(t.sum() for t in outs).backward()
    o("grads", [a.grad, b.grad, v.grad])


@program
def matmul_batched(torch, o):
    a = torch.arange(12.0).reshape(2, 2, 3).requires_grad_()
    b = torch.arange(6.0).reshape(3, 2).requires_grad_()
    c = a @ b
    o("c", c)
    d = torch.bmm(a, a.transpose(1, 2))
    o("bmm", d)
    (c.sum() + d.sum()).backward()
    o("grads", [a.grad, b.grad])


@program
def matmul_errors(torch, o):
    a = torch.ones(2, 3)
    o.raises("mm", lambda: a @ torch.ones(2, 3), "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)")
    o.raises("dtype", lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.float64),
             "expected m1 and m2 to have the same dtype")
    o.raises("dot", lambda: torch.dot(torch.ones(2), torch.ones(3)), "inconsistent tensor size")
    o.raises("int float", lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.int64),
             "expected m1 and m2 to have the same dtype")


# ---- softmax / log_softmax -------------------------------------------------------------------

@program
def softmax_dims(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], requires_grad=True)
    s0 = torch.softmax(x, dim=0)
    s1 = x.softmax(dim=1)
    sm = torch.nn.functional.softmax(x, dim=-1)
    ls = torch.log_softmax(x, 1)
    ls2 = x.log_softmax(-1)
    o("outs", [s0, s1, sm, ls, ls2])
    o("row sums", s1.sum(dim=1))
    (s1[:, 0].sum() + ls[:, 2].sum()).backward()
    o("grad", x.grad)


@program
def softmax_implicit_dim_warning(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = o.warns("implicit", lambda: torch.nn.functional.softmax(x), "Implicit dimension choice for softmax")
    o("y", y)


@program
def softmax_numerical_stability(torch, o):
    x = torch.tensor([1000.0, 1001.0, 1002.0], requires_grad=True)
    s = torch.softmax(x, 0)
    o("s", s)
    naive = torch.exp(x) / torch.exp(x).sum()
    o("naive", naive)
    ls = torch.log_softmax(x, 0)
    ls[0].backward()
    o("grad", x.grad)


# ---- misc pointwise ----------------------------------------------------------------------------

@program
def pointwise_functions_and_grads(torch, o):
    x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    fns = {
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "sin": torch.sin,
        "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "abs": torch.abs,
        "neg": torch.neg, "reciprocal": torch.reciprocal, "rsqrt": torch.rsqrt,
        "log1p": torch.log1p, "expm1": torch.expm1, "log2": torch.log2, "log10": torch.log10,
        "exp2": torch.exp2, "erf": torch.erf, "square": lambda t: t ** 2,
        "pow3": lambda t: torch.pow(t, 3), "rpow": lambda t: 2 ** t,
        "clamp": lambda t: torch.clamp(t, 0.8, 1.5), "relu": torch.relu,
        "sign": torch.sign,
    }
    for name, fn in fns.items():
        y = fn(x)
        (g,) = torch.autograd.grad(y.sum(), x)
        o(name, [y, g])


@program
def abs_relu_at_zero(torch, o):
    x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    (torch.abs(x).sum()).backward()
    o("abs", x.grad)
    x.grad = None
    torch.relu(x).sum().backward()
    o("relu", x.grad)
    x.grad = None
    torch.clamp(x, min=0.0).sum().backward()
    o("clamp", x.grad)
    x.grad = None
    x.clamp(-1.0, 1.0).sum().backward()
    o("clamp edges", x.grad)
    y = torch.tensor([0.0], requires_grad=True)
    torch.sqrt(y).backward()
    o("sqrt at 0", y.grad)


@program
def nan_inf_values(torch, o):
    x = torch.tensor([0.0, -1.0, 1.0], requires_grad=True)
    y = torch.log(x)
    o("log", y)
    z = x / 0
    o("div0", z)
    y.sum().backward()
    o("grad", x.grad)
    o("isnan", torch.isnan(y))
    o("isinf", torch.isinf(z))
    o("isfinite", torch.isfinite(y))


@program
def maximum_minimum_and_grads(torch, o):
    a = torch.tensor([1.0, 5.0, 3.0], requires_grad=True)
    b = torch.tensor([2.0, 4.0, 3.0], requires_grad=True)
    m = torch.maximum(a, b)
    n = torch.minimum(a, b)
    o("m", m)
    o("n", n)
    (m.sum() + 2 * n.sum()).backward()
    o("grads", [a.grad, b.grad])


@program
def pow_special_cases(torch, o):
    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    (x ** 2).sum().backward()
    o("pow2", x.grad)
    x.grad = None
    (x ** 0.5).sum().backward()
    o("pow half", x.grad)
    x.grad = None
    (x ** 0).sum().backward()
    o("pow0", x.grad)
    e = torch.tensor([2.0, 3.0, 0.5], requires_grad=True)
    b = torch.tensor([2.0, 2.0, 4.0], requires_grad=True)
    (b ** e).sum().backward()
    o("tensor pow", [b.grad, e.grad])


# ---- randomness-dependent programs: only the structure and finite differences --------------------

def _finite_difference_check(torch, f, x, eps=1e-6):
    x = x.detach().double().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x)
    numeric = torch.zeros_like(x)
    flat = x.detach().view(-1)
    for i in range(flat.numel()):
        plus = flat.clone()
        minus = flat.clone()
        plus[i] += eps
        minus[i] -= eps
        numeric.view(-1)[i] = (f(plus.view(x.shape)) - f(minus.view(x.shape))).item() / (2 * eps)
    return bool(torch.allclose(g, numeric, rtol=1e-5, atol=1e-7))


@program
def randn_shapes_and_fd_gradients(torch, o):
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    o("shape", x.shape)
    o("dtype", x.dtype)
    o("flags", [x.requires_grad, x.is_leaf])
    y = (x ** 2).sum()
    y.backward()
    o("grad is 2x", torch.allclose(x.grad, 2 * x.detach()))
    o("fd tanh", _finite_difference_check(torch, lambda t: torch.tanh(t).pow(3).sum(), torch.randn(5)))
    o("fd softmax", _finite_difference_check(
        torch, lambda t: (torch.softmax(t, dim=1) * torch.arange(4.0, dtype=torch.float64)).sum(),
        torch.randn(2, 4)))
    w = torch.randn(4, 2, dtype=torch.float64)
    o("fd matmul", _finite_difference_check(torch, lambda t: torch.sigmoid(t @ w).sum(), torch.randn(3, 4)))


@program
def rand_functions_run(torch, o):
    torch.manual_seed(42)
    a = torch.rand(2, 3)
    o("rand", [a.shape, a.dtype, bool(((a >= 0) & (a < 1)).all())])
    b = torch.randn(5)
    o("randn", [b.shape, b.dtype])
    c = torch.randint(0, 10, (3,))
    o("randint", [c.shape, c.dtype, bool(((c >= 0) & (c < 10)).all())])
    d = torch.randn_like(a)
    o("randn_like", [d.shape, d.dtype])
    e = torch.rand_like(torch.zeros(2, dtype=torch.float64))
    o("rand_like", [e.shape, e.dtype])
    f = torch.randn(2, 2, dtype=torch.float64)
    o("randn f64", f.dtype)
    torch.manual_seed(1)
    g1 = torch.randn(3)
    torch.manual_seed(1)
    g2 = torch.randn(3)
    o("reproducible", torch.equal(g1, g2))
    o("randint high only", torch.randint(5, (2, 2)).shape)


@program
def random_init_training_reduces_loss(torch, o):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.linspace(-1, 1, 20).view(10, 2)
    y = (x[:, :1] * 2 - x[:, 1:]).detach()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    first = None
    for _ in range(100):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        if first is None:
            first = loss.item()
        loss.backward()
        opt.step()
    o("reduced", loss.item() < first * 0.2)
    o("param shapes", [p.shape for p in model.parameters()])
    o("grad shapes", [p.grad.shape for p in model.parameters()])


# ---- devices, conversions, tensor metadata ----------------------------------------------------

@program
def device_selection_idiom(torch, o):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    o("device", str(device))
    o("repr", repr(device))
    o("type", device.type)
    x = torch.tensor([1.0, 2.0]).to(device)
    o("x", x)
    o("x.device", str(x.device))
    o("same device", x.device == device)
    model = torch.nn.Linear(2, 1).to(device)
    o("model returns itself", isinstance(model, torch.nn.Linear))
    o("cpu", x.cpu().numpy())
    o("to cpu string", x.to("cpu"))
    o("mps", torch.backends.mps.is_available())
    o("cuda count", torch.cuda.device_count())
    o.raises("bad device", lambda: torch.device("gpu"), "Expected one of cpu, cuda")


@program
def model_double_and_dtype_conversion(torch, o):
    model = make_mlp(torch)
    model.double()
    o("dtypes", [p.dtype for p in model.parameters()])
    x = torch.tensor(X_DATA, dtype=torch.float64)
    out = model(x)
    o("out", out)
    model.float()
    o("back", [p.dtype for p in model.parameters()])
    model.to(torch.float64)
    o("to", [p.dtype for p in model.parameters()])
    o("is Parameter", [type(p).__name__ for p in model.parameters()])


@program
def tensor_type_strings(torch, o):
    o("float", torch.tensor([1.0]).type())
    o("long", torch.tensor([1]).type())
    o("bool", torch.tensor([True]).type())
    o("double", torch.tensor([1.0], dtype=torch.float64).type())
    o("int32", torch.tensor([1], dtype=torch.int32).type())
    o("convert", torch.tensor([1.5]).type(torch.float64))
    o("convert str", torch.tensor([1.5]).type("torch.DoubleTensor"))
    o("convert long", torch.tensor([1.5, -2.7]).type(torch.long))


@program
def strides_and_contiguity(torch, o):
    x = torch.arange(6.0).view(2, 3)
    o("stride", x.stride())
    o("stride dim", x.stride(1))
    t = x.t()
    o("t stride", t.stride())
    o("contiguous", [x.is_contiguous(), t.is_contiguous(), t.contiguous().is_contiguous()])
    o("contiguous stride", t.contiguous().stride())


@program
def new_tensor_factories(torch, o):
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    o("new_zeros", x.new_zeros(2, 3))
    o("new_ones", x.new_ones((2,)))
    o("new_full", x.new_full((2, 2), 7.0))
    o("new_tensor", x.new_tensor([1, 2, 3]))
    o("new_tensor dtype", x.new_tensor([1, 2], dtype=torch.int64))
    o("new_empty shape", x.new_empty(4).shape)
    i = torch.tensor([1, 2])
    o("int new_ones", i.new_ones(3))


@program
def legacy_tensor_constructor(torch, o):
    o("list", torch.Tensor([1, 2, 3]))
    o("nested", torch.Tensor([[1, 2], [3, 4]]))
    o("sizes", torch.Tensor(2, 3).shape)
    o("size dtype", torch.Tensor(2).dtype)
    o("Size arg", torch.Tensor(torch.Size([1, 2])).shape)
    o("empty", torch.Tensor())
    o("bools", torch.Tensor([True, False]))
    t = torch.tensor([1, 2])
    o("from tensor", torch.Tensor(t))
    o("FloatTensor-like", torch.Tensor([0.5]).dtype)
    o.raises("scalar", lambda: torch.Tensor(2.5), "data must be a sequence")


@program
def size_arithmetic(torch, o):
    x = torch.zeros(2, 3, 4)
    o("concat", x.shape[:-1] + (5,))
    o("prepend", (1,) + x.shape)
    o("repeat", x.shape[1:] * 2)
    o("reversed", x.shape[::-1])
    o("view with size", x.view(x.shape[0], -1).shape)
    o("view star", x.view(*x.shape).shape)
    o("reshape size", torch.arange(24).reshape(x.size()).shape)
    o("zeros from size", torch.zeros(x.shape[1:]).shape)
    o("ones(size())", torch.ones(x.size()).shape)
    o("unpack", list(x.shape))
    b, c, d = x.shape
    o("unpacked", [b, c, d])
    o("Size is tuple", isinstance(x.shape, tuple))
    o("index", x.shape.index(3) if hasattr(x.shape, "index") else None)
    o("count", x.shape.count(2))


@program
def numpy_roundtrips(torch, o):
    a = np.array([[1.5, 2.5], [3.5, 4.5]], dtype=np.float32)
    t = torch.from_numpy(a)
    o("from_numpy", t)
    o("back", t.numpy())
    o("int64", torch.tensor([1, 2]).numpy())
    o("bool", (torch.tensor([1, 2]) > 1).numpy())
    o("float64 array", torch.tensor(np.array([0.1, 0.2])))
    o("np scalar", torch.tensor(np.float64(2.5)))
    o("list of np floats", torch.tensor([np.float64(1.0), np.float64(2.0)]))
    o("list of np float32", torch.tensor([np.float32(1.0), 2.0]))
    o("as_tensor shares", torch.as_tensor(a) is not None)
    o("np.asarray", np.asarray(torch.tensor([1.0, 2.0])))
    o("mean of numpy", float(np.mean(torch.tensor([1.0, 2.0, 4.0]).numpy())))


# ---- new math functions --------------------------------------------------------------------

@program
def rounding_functions(torch, o):
    x = torch.tensor([-2.5, -1.5, -0.4, 0.5, 1.5, 2.6], requires_grad=True)
    outs = [x.floor(), x.ceil(), x.round(), x.trunc(), x.frac(), torch.round(x, decimals=1),
            torch.floor(x), torch.ceil(x)]
    o("outs", outs)
    total = sum((out * torch.arange(6.0)).sum() for out in outs)
    total.backward()
    o("grad", x.grad)
    o("int floor", torch.tensor([1, 2]).floor())
    o("round decimals", torch.round(torch.tensor([1.2345, 2.5678]), decimals=2))


@program
def remainder_and_floor_division(torch, o):
    a = torch.tensor([7, -7, 7, -7])
    b = torch.tensor([3, 3, -3, -3])
    o("int //", a // b)
    o("int %", a % b)
    o("fmod", torch.fmod(a, b))
    o("remainder", torch.remainder(a, b))
    f = torch.tensor([5.5, -5.5, 2.0])
    o("float //", f // 2)
    o("float %", f % 2)
    o("float % -2", f % -2)
    o("rfloordiv", 10 // torch.tensor([3, 4]))
    o("rmod", 10 % torch.tensor([3, 4]))
    x = torch.tensor([5.5, -3.2], requires_grad=True)
    y = torch.tensor([2.0, 1.5], requires_grad=True)
    (x % y).sum().backward()
    o("grads", [x.grad, y.grad])
    z = x // 2
    o("floordiv requires_grad", z.requires_grad)
    o.raises("floordiv backward", lambda: z.sum().backward(), "derivative for aten::floor_divide is not implemented")


@program
def trig_and_hyperbolic(torch, o):
    x = torch.tensor([-0.5, 0.1, 0.7], dtype=torch.float64, requires_grad=True)
    for name in ("tan", "atan", "asin", "acos", "sinh", "cosh"):
        y = getattr(torch, name)(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
        o(name, [y, g, gg])
        o(name + " repr", repr(getattr(x, name)().detach()))


@program
def square_clamp_min_max(torch, o):
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], requires_grad=True)
    outs = [torch.square(x), x.square(), x.clamp_min(0.0), x.clamp_max(1.0), torch.clamp_min(x, -1.0)]
    o("outs", outs)
    o("names", [t.grad_fn.name() for t in outs])
    sum(t.sum() for t in outs).backward()
    o("grad", x.grad)


@program
def nan_checks_and_isclose(torch, o):
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])
    o("isnan", torch.isnan(x))
    o("isinf", x.isinf())
    o("isfinite", x.isfinite())
    o("any nan", torch.isnan(x).any())
    o("nan != nan", x != x)
    a = torch.tensor([1.0, 2.0, 3.0])
    o("isclose", torch.isclose(a, a + 1e-7))
    o("isclose tol", torch.isclose(a, torch.tensor([1.1, 2.0, 3.5]), atol=0.2))
    o("equal", [torch.equal(a, a.clone()), torch.equal(a, a[:2]), a.equal(a + 1)])


@program
def all_any_count_nonzero(torch, o):
    x = torch.tensor([[1.0, 0.0, 3.0], [0.0, 0.0, 2.0]])
    o("all", x.all())
    o("any", x.any())
    o("all dim", x.all(dim=1))
    o("any dim keep", x.any(dim=0, keepdim=True))
    o("torch.all", torch.all(x > -1))
    o("count_nonzero", torch.count_nonzero(x))
    o("count dim", torch.count_nonzero(x, dim=0))
    o("bool ops", [(x > 0).all().item(), (x > 2).any().item()])
    o("int", torch.tensor([1, 2, 0]).all())


@program
def masked_select_and_nonzero(torch, o):
    x = torch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], requires_grad=True)
    pos = torch.masked_select(x, x > 0)
    o("pos", pos)
    o("method", x.masked_select(x < 0))
    (pos * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("grad", x.grad)
    o("nonzero", (x > 0).nonzero())
    o("nonzero tuple", torch.nonzero(x > 0, as_tuple=True))
    o("argwhere-like", torch.nonzero(torch.tensor([0, 3, 0, 5])))
    o("where 1-arg", torch.where(torch.tensor([[True, False], [False, True]])))


@program
def repeat_and_tile_like(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    r = x.repeat(2, 3)
    o("r", r)
    r3 = x.repeat(2, 1, 1)
    o("r3 shape", r3.shape)
    (r * torch.arange(24.0).view(4, 6)).sum().backward()
    o("grad", x.grad)
    o("1d", torch.tensor([1, 2]).repeat(3))
    o.raises("too few", lambda: x.repeat(2), "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")


@program
def diagonal_trace_triangles(torch, o):
    m = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], requires_grad=True)
    outs = {"trace": m.trace(), "diag": torch.diag(m), "diag1": m.diag(1),
            "diagonal": m.diagonal(), "diagonal -1": torch.diagonal(m, -1), "tril": m.tril(),
            "triu1": torch.triu(m, 1), "tril -1": m.tril(-1)}
    o("outs", outs)
    total = sum((v * (i + 1)).sum() for i, v in enumerate(outs.values()))
    total.backward()
    o("grad", m.grad)
    v = torch.tensor([1.0, 2.0], requires_grad=True)
    d = torch.diag(v)
    o("diag of vector", d)
    (d * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("v.grad", v.grad)
    o("eye trace", torch.eye(4).trace())


@program
def outer_product(torch, o):
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([0.5, -1.0], requires_grad=True)
    p = torch.outer(a, b)
    o("p", p)
    o("name", p.grad_fn.name())
    (p * torch.arange(6.0).view(3, 2)).sum().backward()
    o("grads", [a.grad, b.grad])
    o("ger", torch.ger(b, b))


@program
def logical_xor_and_bitwise(torch, o):
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    o("xor", torch.logical_xor(a, b))
    o("^", a ^ b)
    o("int ^", torch.tensor([5, 3]) ^ torch.tensor([1, 1]))
    o("int &", torch.tensor([5, 3]) & torch.tensor([1, 1]))
    o("int |", torch.tensor([5, 3]) | torch.tensor([2, 4]))
    o("~int", ~torch.tensor([0, 5]))


# ---- printing, more -------------------------------------------------------------------------

@program
def printing_suffix_wrapping(torch, o):
    x = torch.linspace(0, 1, 9, requires_grad=True)
    o("long with grad_fn", repr(x * 2))
    o("long requires_grad", repr(x))
    y = torch.arange(8, dtype=torch.float64, requires_grad=True)
    o("double wrap", repr(y * 1.5))
    o("int32 long", repr(torch.arange(20, dtype=torch.int32)))
    o("float16", repr(torch.linspace(0, 1, 12, dtype=torch.float16)))


@program
def printing_3d_summarized(torch, o):
    o("3d", repr(torch.arange(2 * 600).view(2, 20, 30)))
    o("3d float", repr(torch.arange(1200.0).view(20, 6, 10) / 7))
    o("neg sci", repr(torch.tensor([-1e-5, 2e6, 3.0])))
    o("mixed ints", repr(torch.tensor([-1000000, 5, 42])))
    o("tiny", repr(torch.tensor([1e-10, 2e-10])))
    o("big ints as float", repr(torch.tensor([1e8, 1.0])))
    o("just below 1e8", repr(torch.tensor([99999999.0, 1.0])))
    o("ratio 1000", repr(torch.tensor([0.001, 1.0])))
    o("ratio 1001", repr(torch.tensor([0.001, 1.001])))


@program
def printing_set_printoptions(torch, o):
    try:
        torch.set_printoptions(precision=2)
        o("precision 2", repr(torch.tensor([1.12345, 2.5])))
        torch.set_printoptions(sci_mode=False)
        o("no sci", repr(torch.tensor([1e-5, 1.0])))
        torch.set_printoptions(threshold=5)
        o("threshold", repr(torch.arange(10)))
        torch.set_printoptions(profile="default")
        torch.set_printoptions(linewidth=40)
        o("linewidth", repr(torch.arange(20)))
    finally:
        torch.set_printoptions(profile="default")
        torch.set_printoptions(sci_mode=None)
    o("restored", repr(torch.tensor([1.12345])))


@program
def printing_containers_and_parameters(torch, o):
    import io
    import contextlib

    model = make_mlp(torch)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for name, param in model.named_parameters():
            print(name, param.shape)
        print(list(model.parameters())[1])
        print({"w": torch.tensor([1.0]), "n": torch.tensor(3)})
        print((torch.tensor([1.0]), torch.tensor([True])))
        print(model[0].weight.grad)
        print(model.state_dict()["0.bias"])
    o("stdout", buffer.getvalue())


@program
def printing_after_training_step(torch, o):
    w = torch.tensor([1.0, -1.0], requires_grad=True)
    loss = ((w * torch.tensor([2.0, 3.0])).sum() - 1) ** 2
    loss.backward()
    o("loss", str(loss))
    o("grad", str(w.grad))
    with torch.no_grad():
        w -= 0.1 * w.grad
    o("w", str(w))
    o("f-string", f"loss={loss.item():.4f} w={w.tolist()}")
    o("format loss", "{:.3f}".format(loss))
    o("f vector", f"{w}")


@program
def printing_custom_function_and_leaf_grads(torch, o):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    o("repr", repr(y))
    o("name", y.grad_fn.name())
    z = y.sum()
    o("z", repr(z))
    z.backward()
    o("grad repr", repr(x.grad))


@program
def printing_dtype_and_size_objects(torch, o):
    o("dtypes", [str(d) for d in (torch.float32, torch.float64, torch.int64, torch.int32,
                                   torch.bool, torch.uint8, torch.float16, torch.int16, torch.int8)])
    o("aliases", [repr(torch.float), repr(torch.double), repr(torch.long), repr(torch.int),
                  repr(torch.half), repr(torch.short)])
    o("Size empty", repr(torch.Size([])))
    o("Size str", str(torch.zeros(3, 1).shape))
    o("shape list", str([torch.zeros(2).shape, torch.zeros(1, 2).shape]))


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
    from torch.autograd.function import once_differentiable

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


# ---- nn, more --------------------------------------------------------------------------------

@program
def polynomial_tutorial_flatten(torch, o):
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    o("xx", [xx.shape, xx.dtype])
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, -0.05, 0.02]]))
        model[0].bias.fill_(0.01)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1e-6
    for t in range(30):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    o("loss", loss.item())
    linear_layer = model[0]
    o("weights", [linear_layer.bias.item(), linear_layer.weight[:, 0].item(),
                  linear_layer.weight[:, 1].item(), linear_layer.weight[:, 2].item()])
    o("repr", repr(model))


@program(rtol=1e-5, atol=1e-6)
def polynomial_tutorial_rmsprop(torch, o):
    x = torch.linspace(-math.pi, math.pi, 100)
    y = torch.sin(x)
    xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, -0.05, 0.02]]))
        model[0].bias.fill_(0.01)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    for t in range(20):
        loss = torch.nn.MSELoss(reduction="sum")(model(xx), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    o("loss", loss.item())
    o("params", list(model.parameters()))


@program
def two_layer_net_by_hand(torch, o):
    N, D_in, H, D_out = 4, 3, 5, 2
    x = torch.arange(12.0).view(N, D_in) / 10
    y = torch.arange(8.0).view(N, D_out) / 5
    w1 = (torch.arange(15.0).view(D_in, H) / 20 - 0.3).requires_grad_()
    w2 = (torch.arange(10.0).view(H, D_out) / 10 - 0.4).requires_grad_()
    learning_rate = 1e-2
    for t in range(10):
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        o(f"loss {t}", loss.item())
        loss.backward()
        with torch.no_grad():
            w1 -= learning_rate * w1.grad
            w2 -= learning_rate * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
    o("w1", w1)
    o("w2", w2)


@program(rtol=1e-5, atol=1e-6)
def logistic_regression_bce(torch, o):
    x = torch.tensor([[0.5, 1.0], [1.5, -0.5], [-1.0, 0.3], [2.0, 2.0], [-0.5, -1.5], [0.1, 0.2]])
    y = torch.tensor([[1.0], [1.0], [0.0], [1.0], [0.0], [0.0]])
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, -0.2]]))
        model.bias.zero_()
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(15):
        y_pred = torch.sigmoid(model(x))
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        o(f"loss {epoch}", loss.item())
    with torch.no_grad():
        predicted = (torch.sigmoid(model(x)) >= 0.5).float()
        acc = predicted.eq(y).sum() / float(y.shape[0])
    o("acc", acc)
    o("params", [model.weight, model.bias])


@program(rtol=1e-5, atol=1e-6)
def bce_with_logits_training(torch, o):
    x = torch.tensor([[0.5, 1.0], [1.5, -0.5], [-1.0, 0.3], [2.0, 2.0]])
    y = torch.tensor([1.0, 1.0, 0.0, 1.0])
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.2, -0.1], [0.4, 0.3], [-0.3, 0.5]]))
        model[0].bias.copy_(torch.tensor([0.1, 0.0, -0.1]))
        model[2].weight.copy_(torch.tensor([[0.3, -0.2, 0.6]]))
        model[2].bias.fill_(0.05)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(10):
        opt.zero_grad()
        logits = model(x).squeeze(1)
        loss = loss_fn(logits, y)
        loss.backward()
        opt.step()
    o("loss", loss)
    o("probs", torch.sigmoid(model(x)).squeeze())


@program
def loss_functions_values_and_grads(torch, o):
    F = torch.nn.functional
    pred = torch.tensor([[0.2, 1.5], [-0.7, 3.0]], requires_grad=True)
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    losses = {
        "l1": F.l1_loss(pred, target), "l1 sum": torch.nn.L1Loss(reduction="sum")(pred, target),
        "smooth": F.smooth_l1_loss(pred, target), "smooth beta": F.smooth_l1_loss(pred, target, beta=0.5),
        "huber": torch.nn.HuberLoss(delta=0.8)(pred, target),
        "bce logits": F.binary_cross_entropy_with_logits(pred, torch.tensor([[0.0, 1.0], [1.0, 0.0]])),
        "bce": F.binary_cross_entropy(torch.sigmoid(pred), torch.tensor([[0.0, 1.0], [1.0, 0.0]])),
        "mse none": F.mse_loss(pred, target, reduction="none"),
    }
    o("losses", losses)
    grads = {k: torch.autograd.grad(v.sum(), pred, retain_graph=True)[0] for k, v in losses.items()}
    o("grads", grads)


@program
def bce_errors(torch, o):
    F = torch.nn.functional
    o.raises("range", lambda: F.binary_cross_entropy(torch.tensor([0.5, 1.5]), torch.tensor([1.0, 0.0])),
             "all elements of input should be between 0 and 1")
    o.raises("shape", lambda: torch.nn.BCELoss()(torch.tensor([[0.5], [0.5]]), torch.tensor([1.0, 0.0])),
             "that is different to the input size")
    o.raises("logits shape", lambda: torch.nn.BCEWithLogitsLoss()(torch.tensor([[0.5], [0.5]]), torch.tensor([1.0, 0.0])),
             "must be the same as input size")
    o.raises("long target", lambda: F.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([1, 0])),
             "Found dtype Long but expected Float")


@program
def cross_entropy_errors(torch, o):
    F = torch.nn.functional
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, 2.0]])
    o.raises("out of bounds", lambda: F.cross_entropy(x, torch.tensor([0, 5])), "Target 5 is out of bounds.")
    o.raises("int32", lambda: F.cross_entropy(x, torch.tensor([0, 1], dtype=torch.int32)),
             "expected target dtype to be Long or Byte, but got Int")
    o.raises("float target", lambda: F.cross_entropy(x, torch.tensor([0.0, 1.0])),
             "expected target dtype to be Long or Byte, but got Float")
    o.raises("batch", lambda: F.cross_entropy(x, torch.tensor([0, 1, 2])),
             "Expected input batch_size (2) to match target batch_size (3).")


@program
def cross_entropy_options(torch, o):
    logits = torch.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, 2.0], [0.5, 0.1, -1.0]], requires_grad=True)
    target = torch.tensor([2, 0, 1])
    weight = torch.tensor([1.0, 2.0, 0.5])
    F = torch.nn.functional
    outs = {
        "weight": F.cross_entropy(logits, target, weight=weight),
        "smoothing": F.cross_entropy(logits, target, label_smoothing=0.1),
        "both": torch.nn.CrossEntropyLoss(weight=weight, label_smoothing=0.2)(logits, target),
        "ignore": F.cross_entropy(logits, torch.tensor([2, -100, 1])),
        "probs": F.cross_entropy(logits, torch.tensor([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0], [0.3, 0.3, 0.4]])),
        "none": F.cross_entropy(logits, target, reduction="none", label_smoothing=0.1),
        "nll weight": F.nll_loss(F.log_softmax(logits, 1), target, weight=weight),
        "unbatched": F.cross_entropy(logits[0], target[0]),
    }
    o("outs", outs)
    grads = {k: torch.autograd.grad(v.sum(), logits, retain_graph=True)[0] for k, v in outs.items()}
    o("grads", grads)


@program
def one_hot_and_normalize(torch, o):
    F = torch.nn.functional
    labels = torch.tensor([0, 2, 1, 2])
    o("one_hot", F.one_hot(labels))
    o("one_hot n", F.one_hot(labels, num_classes=4))
    o("one_hot float", F.one_hot(labels).float())
    o.raises("too big", lambda: F.one_hot(torch.tensor([0, 3]), 3), "Class values must be smaller than num_classes.")
    o.raises("float", lambda: F.one_hot(torch.tensor([0.0, 1.0])), "one_hot is only applicable to index tensor")
    x = torch.tensor([[3.0, 4.0], [1.0, 0.0]], requires_grad=True)
    n = F.normalize(x, dim=1)
    o("normalize", n)
    (n * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("grad", x.grad)


@program
def activation_modules_extra(torch, o):
    x = torch.tensor([[-2.0, -0.5, 0.0, 0.5, 2.0]], requires_grad=True)
    mods = [torch.nn.Softmax(dim=1), torch.nn.LogSoftmax(dim=1), torch.nn.LeakyReLU(0.2),
            torch.nn.ELU(), torch.nn.GELU(), torch.nn.SiLU(), torch.nn.Softplus(),
            torch.nn.Identity(), torch.nn.Flatten(0), torch.nn.Dropout(0.0)]
    outs = [m(x) for m in mods]
    o("outs", outs)
    o("reprs", [repr(m) for m in mods])
    sum((out * torch.arange(5.0)).sum() for out in outs).backward()
    o("grad", x.grad)


@program
def dropout_modes(torch, o):
    torch.manual_seed(0)
    d = torch.nn.Dropout(p=0.5)
    x = torch.ones(100)
    y = d(x)
    o("train values", sorted(set(y.tolist())))
    o("train zeros some", bool((y == 0).any()))
    d.eval()
    o("eval", torch.equal(d(x), x))
    o("functional eval", torch.nn.functional.dropout(x, 0.5, training=False))
    o("p=1", torch.nn.functional.dropout(torch.ones(3), p=1.0))
    o.raises("bad p", lambda: torch.nn.Dropout(1.5), "dropout probability has to be between 0 and 1, but got 1.5")


@program
def module_list_and_dict(torch, o):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
            self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 1), "b": torch.nn.Linear(2, 1)})

        def forward(self, x):
            for layer in self.layers:
                x = torch.tanh(layer(x))
            return self.heads["a"](x) + self.heads["b"](x)

    net = Net()
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view(p.shape) * (1 + i / 10))
    out = net(torch.tensor([[1.0, -1.0], [0.5, 2.0]]))
    out.sum().backward()
    o("out", out)
    o("names", [n for n, _ in net.named_parameters()])
    o("grads", [p.grad for p in net.parameters()])
    o("repr", repr(net))
    o("len", [len(net.layers), len(net.heads), "a" in net.heads, list(net.heads.keys())])
    o("slice", repr(net.layers[1:]))


@program
def module_forward_hooks(torch, o):
    model = make_mlp(torch)
    activations = {}

    def save(name):
        def hook(module, inputs, output):
            activations[name] = output.detach()
        return hook

    handles = [model[i].register_forward_hook(save(str(i))) for i in range(3)]
    model(torch.tensor(X_DATA))
    o("activations", activations)
    for h in handles:
        h.remove()
    activations.clear()
    model(torch.tensor(X_DATA))
    o("after remove", len(activations))
    h = model[1].register_forward_hook(lambda m, i, out: out * 0)
    o("replaced", model(torch.tensor(X_DATA)))
    h.remove()
    pre = model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    o("pre", model(torch.tensor(X_DATA)))
    pre.remove()


@program
def nn_init_deterministic(torch, o):
    layer = torch.nn.Linear(3, 3)
    torch.nn.init.zeros_(layer.bias)
    torch.nn.init.eye_(layer.weight)
    o("eye", [layer.weight, layer.bias])
    torch.nn.init.constant_(layer.bias, 0.5)
    torch.nn.init.ones_(layer.weight)
    o("const", [layer.weight, layer.bias])
    o("gains", [torch.nn.init.calculate_gain(n) for n in ("relu", "tanh", "sigmoid", "linear")])
    o("leaky gain", torch.nn.init.calculate_gain("leaky_relu", 0.2))
    torch.manual_seed(0)
    w = torch.empty(4, 6)
    torch.nn.init.xavier_uniform_(w)
    bound = math.sqrt(6.0 / 10)
    o("xavier in range", bool((w.abs() <= bound).all()))
    torch.nn.init.kaiming_normal_(w, nonlinearity="relu")
    o("kaiming shape", w.shape)
    o("is leaf", layer.weight.is_leaf)


@program
def clip_grad_norm_and_value(torch, o):
    model = make_mlp(torch)
    out = model(torch.tensor(X_DATA)).pow(2).sum() * 10
    out.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    o("total", total)
    o("grads", [p.grad for p in model.parameters()])
    new_total = sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5
    o("new total", new_total)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
    o("clipped", [p.grad for p in model.parameters()])
    vec = torch.nn.utils.parameters_to_vector(model.parameters())
    o("vec", vec)


@program(rtol=1e-5, atol=1e-6)
def optimizers_adamw_adagrad_rmsprop(torch, o):
    results = {}
    for name, make in [("adamw", lambda p: torch.optim.AdamW(p, lr=0.05)),
                       ("adamw wd", lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1, amsgrad=True)),
                       ("adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1)),
                       ("adagrad decay", lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
                       ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01)),
                       ("rmsprop momentum centered", lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
                       ("sgd maximize", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.5, dampening=0.1, maximize=True)),
                       ("adam maximize", lambda p: torch.optim.Adam(p, lr=0.01, maximize=True))]:
        model = make_mlp(torch, "Tanh")
        opt = make(model.parameters())
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(torch.tensor(X_DATA)), torch.tensor(Y_REG))
            loss.backward()
            opt.step()
        results[name] = [loss] + list(model.parameters())
    o("results", results)


@program
def optimizer_printing_and_state(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    for opt in (torch.optim.SGD([w], lr=0.1), torch.optim.SGD([w], lr=0.1, momentum=0.9),
                torch.optim.Adam([w]), torch.optim.AdamW([w], lr=0.01), torch.optim.RMSprop([w]),
                torch.optim.Adagrad([w])):
        o(type(opt).__name__ + " repr", repr(opt))
        o(type(opt).__name__ + " keys", list(opt.param_groups[0].keys()))
        o(type(opt).__name__ + " defaults", opt.defaults)
    opt = torch.optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    o("adam state", opt.state[w])
    sd = opt.state_dict()
    o("state_dict groups", sd["param_groups"])
    o("state_dict state keys", list(sd["state"].keys()))


@program
def optimizer_state_dict_roundtrip(torch, o):
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        model(torch.tensor(X_DATA)).pow(2).mean().backward()
        opt.step()
    sd = opt.state_dict()
    model2 = make_mlp(torch)
    model2.load_state_dict(model.state_dict())
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.5, momentum=0.1)
    opt2.load_state_dict(sd)
    o("lr", opt2.param_groups[0]["lr"])
    for m, op in ((model, opt), (model2, opt2)):
        op.zero_grad()
        m(torch.tensor(X_DATA)).pow(2).mean().backward()
        op.step()
    o("same", [torch.allclose(a, b) for a, b in zip(model.parameters(), model2.parameters())])


@program
def lr_schedulers(torch, o):
    def run(make, steps=8):
        w = torch.nn.Parameter(torch.tensor([1.0]))
        opt = torch.optim.SGD([w], lr=0.1)
        sched = make(opt)
        rates = []
        for _ in range(steps):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
            sched.step()
            rates.append(sched.get_last_lr()[0])
        return rates, w

    S = torch.optim.lr_scheduler
    o("step", run(lambda opt: S.StepLR(opt, step_size=3, gamma=0.5)))
    o("multistep", run(lambda opt: S.MultiStepLR(opt, milestones=[2, 5], gamma=0.1)))
    o("exponential", run(lambda opt: S.ExponentialLR(opt, gamma=0.9)))
    o("lambda", run(lambda opt: S.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))))
    o("cosine", run(lambda opt: S.CosineAnnealingLR(opt, T_max=4), steps=10))


@program
def lr_scheduler_order_warning(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    o.warns("early", lambda: sched.step(), "Detected call of `lr_scheduler.step()` before `optimizer.step()`")
    o("lr", opt.param_groups[0]["lr"])


@program
def sequential_ordered_dict_and_indexing(torch, o):
    model = torch.nn.Sequential(OrderedDict([
        ("fc1", torch.nn.Linear(3, 4)), ("act", torch.nn.ReLU()), ("fc2", torch.nn.Linear(4, 2))]))
    o("repr", repr(model))
    o("names", [n for n, _ in model.named_parameters()])
    o("fc1", repr(model.fc1))
    o("index", repr(model[0]))
    o("slice", repr(model[:2]))
    o("children", [type(c).__name__ for c in model.children()])
    o("modules", [type(m).__name__ for m in model.modules()])
    model.append(torch.nn.Sigmoid())
    o("appended", len(model))


@program
def module_train_eval_buffers(torch, o):
    class WithBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running", torch.zeros(2))
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, x):
            if self.training:
                with torch.no_grad():
                    self.running += x.mean(0)
            return self.fc(x - self.running)

    m = WithBuffer()
    with torch.no_grad():
        m.fc.weight.copy_(torch.tensor([[1.0, 0.5], [-0.5, 1.0]]))
        m.fc.bias.zero_()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    o("train out", m(x))
    m.eval()
    o("eval out", m(x))
    o("buffers", list(m.buffers()))
    o("state keys", list(m.state_dict().keys()))
    o("training flags", [m.training, m.fc.training])


# ---- indexing / shapes, more -----------------------------------------------------------------

@program
def batch_slicing_minibatches(torch, o):
    x = torch.arange(20.0).view(10, 2)
    y = torch.arange(10.0)
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(0.1)
        model.bias.fill_(0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    batch_size = 4
    losses = []
    for i in range(0, len(x), batch_size):
        xb, yb = x[i:i + batch_size], y[i:i + batch_size]
        pred = model(xb).squeeze(-1)
        loss = ((pred - yb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    o("losses", losses)
    o("shapes", [x[8:12].shape, x[-3:].shape])


@program
def flip_gradient(torch, o):
    x = torch.arange(6)
    o("flip", torch.flip(x, [0]))
    m = torch.arange(6.0).view(2, 3).requires_grad_()
    f = m.flip(1)
    (f * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("grad", m.grad)


@program
def fancy_index_assignment_patterns(torch, o):
    x = torch.zeros(5)
    idx = torch.tensor([0, 2, 4])
    x[idx] = torch.tensor([1.0, 2.0, 3.0])
    o("x", x)
    m = torch.zeros(3, 3)
    m[torch.arange(3), torch.arange(3)] = 1.0
    o("eye via index", m)
    m[m == 0] = -1
    o("masked", m)
    z = torch.arange(6).view(2, 3)
    z[:, 1] = 0
    o("column", z)
    z[0] += 10
    o("row +=", z)


@program
def gather_for_action_values(torch, o):
    q = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], requires_grad=True)
    actions = torch.tensor([2, 0, 1])
    chosen = q.gather(1, actions.unsqueeze(1)).squeeze(1)
    o("chosen", chosen)
    max_next = q.max(1)[0].detach()
    loss = ((chosen - (1 + 0.9 * max_next)) ** 2).mean()
    loss.backward()
    o("loss", loss)
    o("grad", q.grad)
    o("indexing equivalent", q[torch.arange(3), actions])


@program
def stack_cat_unsqueeze_patterns(torch, o):
    xs = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), torch.tensor([5.0, 6.0])]
    o("stack", torch.stack(xs).shape)
    o("stack dim1", torch.stack(xs, dim=1))
    o("cat unsqueeze", torch.cat([x.unsqueeze(0) for x in xs]))
    o("cat dim -1", torch.cat(xs, dim=-1))
    o("hstack-like", torch.cat([xs[0], xs[1]]))
    scalars = [torch.tensor(1.5), torch.tensor(2.5)]
    o("stack scalars", torch.stack(scalars))
    o("tensor of floats", torch.tensor([s.item() for s in scalars]))


@program
def reshape_errors_and_infer(torch, o):
    x = torch.arange(12)
    o("infer", x.view(3, -1).shape)
    o("infer first", x.reshape(-1, 6).shape)
    o.raises("two -1", lambda: x.view(-1, -1), "only one dimension can be inferred")
    o("flatten", torch.arange(24).view(2, 3, 4).flatten(1).shape)
    o("flatten range", torch.arange(24).view(2, 3, 4).flatten(0, 1).shape)
    o("unflatten-like", x.view(2, 2, 3).shape)


@program
def transpose_permute_matmul_shapes(torch, o):
    a = torch.arange(24.0).view(2, 3, 4)
    o("transpose", a.transpose(1, 2).shape)
    o("permute", a.permute(2, 0, 1).shape)
    o("mT", a.mT.shape)
    o("bmm", torch.bmm(a, a.transpose(1, 2)).shape)
    o("matmul broadcast", (a @ torch.ones(4, 5)).shape)
    o("matmul vec", (a @ torch.ones(4)).shape)
    o.raises("T on 3d", lambda: a.T.shape, None)


# ---- reductions / dtype, more ----------------------------------------------------------------

@program
def mean_std_var_options(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0]], requires_grad=True)
    outs = [x.mean(dim=(0, 1)), x.std(unbiased=False), x.var(dim=0, keepdim=True),
            torch.std(x, dim=1), torch.var(x, 1, unbiased=True), x.std(correction=0)]
    o("outs", outs)
    sum(t.sum() for t in outs).backward()
    o("grad", x.grad)


@program
def argmax_accuracy_pattern(torch, o):
    logits = torch.tensor([[0.1, 2.0, 0.3], [1.5, 0.2, 0.1], [0.0, 0.1, 0.2], [0.3, 0.3, 0.1]])
    labels = torch.tensor([1, 0, 1, 0])
    preds = logits.argmax(dim=1)
    o("preds", preds)
    correct = (preds == labels).sum().item()
    o("correct", correct)
    o("accuracy", correct / len(labels))
    o("acc tensor", (preds == labels).float().mean())
    _, predicted = torch.max(logits, 1)
    o("torch.max", predicted)
    o("ties argmax", torch.tensor([0.3, 0.3, 0.1]).argmax())


@program
def dtype_promotion_more(torch, o):
    o("float16 * int", (torch.tensor([1.5], dtype=torch.float16) * 2).dtype)
    o("int8 + uint8", (torch.tensor([1], dtype=torch.int8) + torch.tensor([1], dtype=torch.uint8)).dtype)
    o("bool * bool", (torch.tensor([True]) * torch.tensor([True])))
    o("int tensor * 0-d float64", (torch.tensor([1, 2]) * torch.tensor(1.5, dtype=torch.float64)))
    o("0-d int * float32", (torch.tensor(2) * torch.tensor([1.5])))
    o("int / 0-d int", torch.tensor([3, 4]) / torch.tensor(2))
    o("pow int int", torch.tensor([2, 3]) ** torch.tensor([2, 2]))
    o("float ** int tensor", torch.tensor([2.0, 3.0]) ** torch.tensor([2, 3]))
    o("int ** negative float", torch.tensor([2, 4]) ** -0.5)
    o("abs int", torch.tensor([-3, 2]).abs())
    o("neg int", -torch.tensor([1, -2]))
    o("sqrt int", torch.sqrt(torch.tensor([4, 9])))
    o("exp int", torch.exp(torch.tensor([0, 1])))
    o("sigmoid int", torch.sigmoid(torch.tensor([0])))
    o("mean float16", torch.tensor([1.0, 2.0], dtype=torch.float16).mean())
    o("sum uint8", torch.tensor([200, 100], dtype=torch.uint8).sum())
    o("cumsum bool", torch.tensor([True, False, True]).cumsum(0))
    o("max of bool", torch.tensor([True, False]).max())
    o("where dtype", torch.where(torch.tensor([True, False]), torch.tensor([1.0]), torch.tensor([2], dtype=torch.int64)))


@program
def int_overflow_and_division_edge(torch, o):
    x = torch.tensor([1.0, -1.0, 0.0])
    o("div zero", x / 0)
    o("int div zero float", torch.tensor([1, 0]) / 0)
    o("log negative", torch.log(torch.tensor([-1.0])))
    o("sqrt negative", torch.sqrt(torch.tensor([-4.0])))
    o("exp large", torch.exp(torch.tensor([100.0])))
    o("uint8 wrap", torch.tensor([250], dtype=torch.uint8) + 10)
    o("int32 max", torch.tensor([2147483647], dtype=torch.int32) + 1)


# ---- in-place, more ------------------------------------------------------------------------

@program
def inplace_variants_and_versions(torch, o):
    x = torch.tensor([1.0, 4.0, 9.0])
    x.sqrt_()
    o("sqrt_", x)
    x.exp_().log_()
    o("exp_ log_", x)
    x.mul_(torch.tensor([1.0, 0.5, 2.0])).add_(1, alpha=2)
    o("chain", x)
    x.clamp_(min=2.5, max=5.0)
    o("clamp_", x)
    x.neg_().abs_()
    o("neg_ abs_", x)
    x.pow_(2).div_(2)
    o("pow_ div_", x)
    o("version", x._version)
    y = x.clone()
    o("clone version", y._version)
    v = x[:2]
    v.fill_(0)
    o("view write", x)
    o("shared version", [x._version, v._version])


@program
def inplace_relu_in_graph(torch, o):
    x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
    y = x * 2
    torch.relu_(y) if hasattr(torch, "relu_") else y.relu_()
    o("y", y)
    o("name", y.grad_fn.name())
    y.sum().backward()
    o("grad", x.grad)


@program
def inplace_on_leaf_view_error(torch, o):
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def write_view():
        w[:2].mul_(2)

    o.raises("view of leaf", write_view, "a view of a leaf Variable that requires grad is being used in an in-place operation.")
    with torch.no_grad():
        w[:2].mul_(2)
    o("w", w)


@program
def zero_grad_patterns(torch, o):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    w.grad.data.zero_()
    o("data zero", w.grad)
    (w * 3).sum().backward()
    o("accum", w.grad)
    w.grad.zero_()
    o("zero_", w.grad)
    w.grad = None
    o("none", w.grad)
    w.grad = torch.tensor([5.0, 5.0])
    (w * 1).sum().backward()
    o("manual grad accum", w.grad)


@program
def lr_scheduler_get_lr_warning(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    o.warns("step", sched.step)
    o.warns("get_lr", sched.get_lr, "please use `get_last_lr()`")
    o("last", sched.get_last_lr())


@program
def printing_losses_and_model_outputs(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    out = model(x)
    o("model out", repr(out))
    o("single sample", repr(model(x[0])))
    o("batched 3d", repr(model(x.view(2, 3, 3))))
    F = torch.nn.functional
    target = torch.tensor(Y_REG)
    labels = torch.tensor(Y_CLS)
    losses = [torch.nn.MSELoss()(out, target), F.mse_loss(out, target, reduction="sum"),
              F.mse_loss(out, target, reduction="none"), torch.nn.CrossEntropyLoss()(out, labels),
              F.cross_entropy(out, labels, reduction="none"), F.nll_loss(F.log_softmax(out, 1), labels),
              torch.nn.L1Loss()(out, target), torch.nn.SmoothL1Loss()(out, target),
              torch.nn.HuberLoss(delta=0.5)(out, target),
              torch.nn.BCELoss()(torch.sigmoid(out), torch.sigmoid(target)),
              torch.nn.BCEWithLogitsLoss()(out, torch.sigmoid(target)),
              F.cross_entropy(out, labels, label_smoothing=0.1)]
    o("losses", [repr(loss) for loss in losses if loss.dim() == 0])
    o("elementwise", [(loss, loss.grad_fn.name()) for loss in losses if loss.dim() > 0])
    o("print", [str(loss) for loss in losses[:2]])
    o("no bias", torch.nn.Linear(3, 2, bias=False)(x).grad_fn.name())


@program(rtol=1e-9)
def loss_double_backward(torch, o):
    x = torch.tensor([[0.2, 0.7], [0.6, 0.3]], dtype=torch.float64, requires_grad=True)
    t = torch.tensor([[0.0, 1.0], [1.0, 0.3]], dtype=torch.float64, requires_grad=True)
    F = torch.nn.functional
    for name, fn in [("mse", lambda: F.mse_loss(x, t)),
                     ("smooth", lambda: F.smooth_l1_loss(x, t, beta=0.5)),
                     ("huber", lambda: F.huber_loss(x, t, delta=0.3)),
                     ("bce", lambda: F.binary_cross_entropy(x, t)),
                     ("bce logits", lambda: F.binary_cross_entropy_with_logits(x, t, pos_weight=torch.tensor([2.0, 1.0], dtype=torch.float64))),
                     ("nll", lambda: F.nll_loss(x, torch.tensor([1, 0]), weight=torch.tensor([1.0, 3.0], dtype=torch.float64))),
                     ("ce", lambda: F.cross_entropy(x, torch.tensor([1, 0])))]:
        loss = fn()
        grads = torch.autograd.grad(loss, [x, t], create_graph=True, allow_unused=True)
        used = [g for g in grads if g is not None and g.requires_grad]
        second = torch.autograd.grad(sum((g * g).sum() for g in used), [x, t], allow_unused=True) if used else None
        o(name, [loss, [g.detach() if g is not None else None for g in grads], second])


@program
def linear_layer_shapes_and_grads(torch, o):
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.1, 0.2, 0.3], [-0.3, 0.2, -0.1]]))
        layer.bias.copy_(torch.tensor([0.5, -0.5]))
    for shape in [(3,), (4, 3), (2, 4, 3), (1, 1, 2, 3)]:
        x = torch.arange(float(np.prod(shape))).view(shape).requires_grad_()
        y = layer(x)
        (y * y).sum().backward()
        o(str(shape), [y, x.grad, y.grad_fn.name()])
    o("weight grad", layer.weight.grad)
    o("bias grad", layer.bias.grad)
    x = torch.arange(12.0).view(3, 4).t()
    o("noncontiguous", layer(x[:, :3].t().t()) if False else layer(x[:3].t()))
    o.raises("dtype", lambda: layer(torch.ones(2, 3, dtype=torch.float64)), "mat1 and mat2 must have the same dtype")
    o.raises("shape", lambda: layer(torch.ones(2, 4)), "mat1 and mat2 shapes cannot be multiplied (2x4 and 3x2)")


@program
def division_rounding_modes(torch, o):
    a = torch.tensor([7, -7, 5, -5])
    b = torch.tensor([2, 2, -3, -3])
    o("floor int", torch.div(a, b, rounding_mode="floor"))
    o("trunc int", torch.div(a, b, rounding_mode="trunc"))
    o("none int", torch.div(a, b, rounding_mode=None))
    f = torch.tensor([7.5, -7.5])
    o("floor float", f.div(2, rounding_mode="floor"))
    o("trunc float", torch.div(f, 2, rounding_mode="trunc"))
    x = torch.tensor([5.0, -5.0], requires_grad=True)
    y = torch.tensor([2.0, 3.0], requires_grad=True)
    z = torch.div(x, y, rounding_mode="floor")
    o("z", z)
    o("grads", torch.autograd.grad(z.sum(), [x, y]))
    o.raises("bad mode", lambda: torch.div(a, 2, rounding_mode="round"), "div expected rounding_mode to be one of None, 'trunc', or 'floor'")


@program
def logspace_and_norm_variants(torch, o):
    o("logspace", torch.logspace(-2, 2, 9))
    o("logspace base 2", torch.logspace(0, 4, 5, base=2))
    o("logspace f64", torch.logspace(0, 1, 4, dtype=torch.float64))
    x = torch.tensor([[1.0, -2.0, 3.0], [0.0, 2.0, -2.0]], requires_grad=True)
    outs = [x.norm(p=float("inf")), x.norm(p=float("-inf"), dim=1), x.norm(p=0), x.norm(3, 1),
            torch.linalg.norm(x), torch.linalg.vector_norm(x, ord=1)]
    o("norms", outs)
    sum((out * (i + 1)).sum() for i, out in enumerate(outs)).backward()
    o("grad", x.grad)


@program
def cumprod_and_repeat_interleave(torch, o):
    x = torch.tensor([2.0, 0.5, 3.0, -1.0], requires_grad=True)
    c = torch.cumprod(x, 0)
    o("cumprod", c)
    (c * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    o("grad", x.grad)
    m = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    o("cumprod dim1", m.cumprod(1))
    o("repeat_interleave", torch.tensor([1, 2, 3]).repeat_interleave(2))
    o("repeat_interleave dim", torch.repeat_interleave(m, 2, dim=0))
    o("repeat_interleave counts", torch.repeat_interleave(torch.tensor([1.0, 2.0]), torch.tensor([1, 3])))
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    y.repeat_interleave(3).sum().backward()
    o("ri grad", y.grad)


@program(rtol=1e-5, atol=1e-6)
def inverse_det_solve(torch, o):
    a = torch.tensor([[4.0, 1.0], [2.0, 3.0]], requires_grad=True)
    inv = torch.inverse(a)
    o("inv", inv)
    o("identity", a @ inv)
    d = torch.det(a)
    o("det", d)
    (inv.sum() + d).backward()
    o("grad", a.grad)
    o("linalg.inv", torch.linalg.inv(torch.tensor([[2.0, 0.0], [0.0, 4.0]])))
    o("solve", torch.linalg.solve(torch.tensor([[3.0, 1.0], [1.0, 2.0]]), torch.tensor([9.0, 8.0])))
    o.raises("singular", lambda: torch.inverse(torch.tensor([[1.0, 2.0], [2.0, 4.0]])),
             "The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular.")
    X = torch.tensor([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    y = torch.tensor([[1.0], [2.0], [2.5]])
    w = torch.inverse(X.T @ X) @ X.T @ y
    o("normal equations", w)


@program
def random_functions_structure(torch, o):
    g = torch.Generator().manual_seed(123)
    o("generator", [type(g).__name__, g.initial_seed()])
    a = torch.randn(3, generator=g)
    g.manual_seed(123)
    b = torch.randn(3, generator=g)
    o("generator reproducible", torch.equal(a, b))
    torch.manual_seed(7)
    o("initial_seed", torch.initial_seed())
    p = torch.randperm(6)
    o("randperm", [p.dtype, p.shape, sorted(p.tolist())])
    n = torch.normal(0.0, 1.0, size=(2, 3))
    o("normal", [n.shape, n.dtype])
    n2 = torch.normal(torch.zeros(4), torch.ones(4))
    o("normal tensors", [n2.shape, n2.dtype])
    b = torch.bernoulli(torch.full((5,), 0.5))
    o("bernoulli", [b.dtype, bool(((b == 0) | (b == 1)).all())])
    o("bernoulli 1", torch.bernoulli(torch.ones(3)))
    e = torch.empty(4).uniform_(-1, 1)
    o("uniform_", bool((e.abs() <= 1).all()))
    o("normal_", torch.empty(2, 2).normal_(0, 0.1).shape)


@program
def dtype_info(torch, o):
    for d in (torch.float32, torch.float64, torch.float16):
        f = torch.finfo(d)
        o(str(d).split(".")[-1], [repr(f), f.bits, f.eps, f.max, f.min, f.tiny, f.resolution, f.dtype])
    for d in (torch.int64, torch.int32, torch.uint8, torch.int8):
        i = torch.iinfo(d)
        o(str(d).split(".")[-1], [repr(i), i.bits, i.max, i.min, i.dtype])
    o("promote", [torch.promote_types(torch.int32, torch.float32), torch.promote_types(torch.uint8, torch.int8)])
    o.raises("finfo int", lambda: torch.finfo(torch.int64), "torch.finfo() requires a floating point input type")


@program
def functional_inplace_activations(torch, o):
    F = torch.nn.functional
    x = torch.tensor([-1.0, 0.5, -2.0])
    F.relu(x, inplace=True)
    o("relu inplace", x)
    y = torch.tensor([-1.0, 0.5])
    F.leaky_relu(y, 0.1, inplace=True)
    o("leaky inplace", y)
    w = torch.tensor([-1.0, 2.0], requires_grad=True)
    h = w * 3
    out = torch.nn.ReLU(inplace=True)(h)
    o("same object", out is h)
    out.sum().backward()
    o("grad", w.grad)


@program
def module_init_errors(torch, o):
    class NoSuper(torch.nn.Module):
        def __init__(self):
            self.fc = torch.nn.Linear(2, 2)

    class NoSuperParam(torch.nn.Module):
        def __init__(self):
            self.w = torch.nn.Parameter(torch.ones(1))

    class NoForward(torch.nn.Module):
        pass

    o.raises("module", NoSuper, "cannot assign module before Module.__init__() call")
    o.raises("parameter", NoSuperParam, "cannot assign parameters before Module.__init__() call")
    o.raises("forward", lambda: NoForward()(torch.ones(1)), 'is missing the required "forward" function')
    o.raises("unknown attribute", lambda: torch.nn.Linear(2, 2).weights, "'Linear' object has no attribute 'weights'")
    o.raises("assign tensor to param", lambda: setattr(torch.nn.Linear(2, 2), "weight", torch.ones(2, 2)),
             "cannot assign 'torch.FloatTensor' as parameter 'weight' (torch.nn.Parameter or None expected)")


@program
def grad_assignment_checks(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)

    def assign(value):
        x.grad = value

    o.raises("int", lambda: assign(3), "assigned grad expected to be a Tensor or None but got grad of type int")
    o.raises("size", lambda: assign(torch.tensor([1.0, 2.0, 3.0])),
             "attempting to assign a gradient of size '[3]' to a tensor of size '[2]'")
    o.raises("dtype", lambda: assign(torch.tensor([1, 2])),
             "attempting to assign a gradient with dtype 'long int' to a tensor with grad_dtype 'Float'")
    assign(torch.tensor([0.5, 0.5]))
    (x * 2).sum().backward()
    o("accumulated onto assigned", x.grad)


@program
def backward_gradient_dtype_cast_and_empty_inputs(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward(torch.tensor([1, 3]))
    o("int gradient cast", x.grad)
    (x * 2).backward(torch.tensor([1.0, 1.0], dtype=torch.float64))
    o("double gradient cast", x.grad)
    o.raises("backward inputs empty", lambda: (x * 2).sum().backward(inputs=[]), "`inputs` argument to `backward()` cannot be empty.")
    o.raises("grad inputs empty", lambda: torch.autograd.grad((x * 2).sum(), []), "`inputs` argument to `grad()` cannot be empty.")


@program
def save_and_load_checkpoint(torch, o):
    import io

    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.tensor(X_DATA)).sum().backward()
    opt.step()
    buffer = io.BytesIO()
    torch.save({"epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(), "loss": torch.tensor(0.25)}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    o("keys", list(checkpoint.keys()))
    o("epoch", checkpoint["epoch"])
    o("loss", checkpoint["loss"])
    restored = make_mlp(torch)
    with torch.no_grad():
        for p in restored.parameters():
            p.zero_()
    result = restored.load_state_dict(checkpoint["model"])
    o("load result", [list(result.missing_keys), list(result.unexpected_keys)])
    o("params", list(restored.parameters()))
    o("state types", [type(v).__name__ for v in checkpoint["model"].values()])
    o("requires grad", [v.requires_grad for v in checkpoint["model"].values()])
    o.raises("strict", lambda: restored.load_state_dict({"0.weight": torch.zeros(4, 3)}), "Missing key(s) in state_dict")


@program
def module_apply_init_pattern(torch, o):
    def init_weights(m):
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.constant_(m.weight, 0.1)
            m.bias.data.fill_(0.01)

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    returned = model.apply(init_weights)
    o("returned", returned is model)
    o("params", list(model.parameters()))
    o("out", model(torch.tensor(X_DATA)))
    o("modules", [type(m).__name__ for m in model.modules()])
    o("named modules", [n for n, _ in model.named_modules()])


@program
def parameter_count_and_summary(torch, o):
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5))
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    o("counts", [total, trainable])
    lines = [f"{name:20s} {str(tuple(p.shape)):10s} {p.numel()}" for name, p in model.named_parameters()]
    o("summary", "\n".join(lines))
    o("first layer", f"{model[0]}")


@program
def training_loop_with_epochs_printing(torch, o):
    import io
    import contextlib

    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_CLS)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for epoch in range(5):
            optimizer.zero_grad()
            outputs = model(x)
            loss = criterion(outputs, y)
            loss.backward()
            optimizer.step()
            _, predicted = torch.max(outputs.data, 1)
            correct = (predicted == y).sum().item()
            print(f"Epoch [{epoch + 1}/5], Loss: {loss.item():.4f}, Acc: {100 * correct / len(y):.1f}%")
        print(loss)
    o("stdout", buffer.getvalue())


@program(rtol=1e-5, atol=1e-6)
def makemore_bigram_neural_net(torch, o):
    chars = ".abcde"
    words = ["abc", "bad", "cab", "dace", "ebb"]
    stoi = {c: i for i, c in enumerate(chars)}
    xs, ys = [], []
    for w in words:
        seq = ["."] + list(w) + ["."]
        for c1, c2 in zip(seq, seq[1:]):
            xs.append(stoi[c1])
            ys.append(stoi[c2])
    xs = torch.tensor(xs)
    ys = torch.tensor(ys)
    num = xs.nelement()
    o("num", num)
    N = torch.zeros((6, 6), dtype=torch.int32)
    for a, b in zip(xs.tolist(), ys.tolist()):
        N[a, b] += 1
    o("counts", N)
    P = (N + 1).float()
    P /= P.sum(1, keepdims=True)
    o("P rows", P.sum(1))
    W = (torch.arange(36.0).view(6, 6) / 36 - 0.5).requires_grad_()
    for k in range(20):
        xenc = torch.nn.functional.one_hot(xs, num_classes=6).float()
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W ** 2).mean()
        W.grad = None
        loss.backward()
        W.data += -10 * W.grad
        if k % 5 == 0:
            o(f"loss {k}", loss.item())
    o("W", W)
    nll = -torch.log(P[xs, ys]).mean()
    o("count-model nll", nll)


@program(rtol=1e-5, atol=1e-6)
def makemore_mlp_embeddings(torch, o):
    X = torch.tensor([[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 0], [0, 0, 4], [0, 4, 2]])
    Y = torch.tensor([2, 3, 0, 1, 2, 0])
    C = (torch.arange(10.0).view(5, 2) / 10 - 0.25).requires_grad_()
    W1 = (torch.linspace(-1, 1, 24).view(6, 4) * 0.5).requires_grad_()
    b1 = torch.zeros(4, requires_grad=True)
    W2 = (torch.linspace(-1, 1, 20).view(4, 5)).requires_grad_()
    b2 = torch.zeros(5, requires_grad=True)
    parameters = [C, W1, b1, W2, b2]
    o("n params", sum(p.nelement() for p in parameters))
    for step in range(15):
        emb = C[X]
        h = torch.tanh(emb.view(-1, 6) @ W1 + b1)
        logits = h @ W2 + b2
        loss = torch.nn.functional.cross_entropy(logits, Y)
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.5 if step < 10 else 0.05
        for p in parameters:
            p.data += -lr * p.grad
    o("emb shape", emb.shape)
    o("loss", loss.item())
    o("params", parameters)
    counts = logits.exp()
    prob = counts / counts.sum(1, keepdims=True)
    o("manual loss", -prob[torch.arange(6), Y].log().mean())


@program(rtol=1e-5, atol=1e-6)
def backprop_ninja_manual_gradients(torch, o):
    n = 4
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0], [0.3, 0.3, 0.3], [2.0, 1.0, -1.0]], requires_grad=True)
    Yb = torch.tensor([1, 2, 0, 0])
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum ** -1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    for t in [logprobs, probs, counts_sum_inv, counts_sum, counts, norm_logits, logit_maxes]:
        t.retain_grad()
    loss.backward()
    dlogprobs = torch.zeros_like(logprobs)
    dlogprobs[range(n), Yb] = -1.0 / n
    dprobs = (1.0 / probs) * dlogprobs
    dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
    dcounts = counts_sum_inv * dprobs
    dcounts_sum = (-counts_sum ** -2) * dcounts_sum_inv
    dcounts += torch.ones_like(counts) * dcounts_sum
    dnorm_logits = counts * dcounts
    dlogits = dnorm_logits.clone()
    dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
    dlogits += torch.nn.functional.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes

    def cmp(s, dt, t):
        ex = bool((dt == t.grad).all().item())
        app = torch.allclose(dt, t.grad)
        maxdiff = (dt - t.grad).abs().max().item()
        return f"{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s}", maxdiff

    results = [cmp("logprobs", dlogprobs, logprobs), cmp("probs", dprobs, probs),
               cmp("counts_sum_inv", dcounts_sum_inv, counts_sum_inv),
               cmp("counts", dcounts, counts), cmp("logit_maxes", dlogit_maxes, logit_maxes),
               cmp("logits", dlogits, logits)]
    o("approximate", [line.split("approximate: ")[1] for line, _ in results])
    o("maxdiff small", [d < 1e-6 for _, d in results])
    o("loss", loss)
    o("fast dlogits", (torch.nn.functional.softmax(logits, 1) - torch.nn.functional.one_hot(Yb, 3)) / n)


@program(rtol=1e-5, atol=1e-6)
def batchnorm_by_hand(torch, o):
    hprebn = torch.tensor([[1.0, 2.0, 0.5], [2.0, 0.0, 1.5], [0.5, 1.0, -1.0], [3.0, 2.5, 0.0]], requires_grad=True)
    bngain = torch.ones((1, 3), requires_grad=True)
    bnbias = torch.zeros((1, 3), requires_grad=True)
    n = hprebn.shape[0]
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff ** 2
    bnvar = 1 / (n - 1) * bndiff2.sum(0, keepdim=True)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    o("hpreact", hpreact)
    o("var matches", torch.allclose(bnvar, hprebn.var(0, keepdim=True, unbiased=True)))
    (hpreact * torch.arange(12.0).view(4, 3)).sum().backward()
    o("grads", [hprebn.grad, bngain.grad, bnbias.grad])


@program
def reductions_zero_dim_and_integer_inputs(torch, o):
    s = torch.tensor(3.0, requires_grad=True)
    outs = [s.sum(0), s.mean(dim=-1), s.prod(0), s.max(0), s.amax(0), s.softmax(0), s.logsumexp(0),
            s.std(0, keepdim=True) if False else s.sum(0, keepdim=True), s.cumsum(0), s.norm(dim=0)]
    o("outs", [tuple(t) if isinstance(t, tuple) else t for t in outs])
    ints = torch.tensor([[1, 2, 3], [4, 5, 6]])
    o("prod int32", torch.tensor([2, 3], dtype=torch.int32).prod())
    o("prod uint8", torch.tensor([200, 2], dtype=torch.uint8).prod())
    o("logsumexp int", ints.logsumexp(1))
    o("all uint8", torch.tensor([1, 0], dtype=torch.uint8).all())
    o.raises("std int", lambda: ints.std(), "std and var only support floating point and complex dtypes")
    o.raises("norm int", lambda: ints.norm(), "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long")
    o.raises("softmax int", lambda: ints.softmax(1), "not implemented for 'Long'")
    o.raises("max empty", lambda: torch.zeros(0, 3).max(), "Expected reduction dim to be specified for input.numel() == 0.")
    o.raises("argmax empty", lambda: torch.zeros(0, 3).argmax(0), "Expected reduction dim 0 to have non-zero size.")


@program
def integer_powers_and_bitwise_errors(torch, o):
    o("int pow tensor", torch.tensor([2, 3, -1, 1]) ** torch.tensor([-1, 1, -3, -2]))
    o("base pow", 2 ** torch.tensor([-1, 0, 3]))
    o.raises("negative scalar power", lambda: torch.tensor([2, 3]) ** -1, "Integers to negative integer powers are not allowed.")
    o("float negative power", torch.tensor([2.0, 4.0]) ** -1)
    o.raises("float &", lambda: torch.tensor([1.0]) & torch.tensor([1.0]), "\"bitwise_and_cpu\" not implemented for 'Float'")
    o.raises("float |", lambda: torch.tensor([1.0]) | torch.tensor([1.0]), "\"bitwise_or_cpu\" not implemented for 'Float'")
    o.raises("float ^", lambda: torch.tensor([1.0]) ^ torch.tensor([True]), "\"bitwise_xor_cpu\" not implemented for 'Float'")
    o.raises("float ~", lambda: ~torch.tensor([1.0]), "~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    o("int ~", ~torch.tensor([0, 5]))


@program
def python_protocols(torch, o):
    import copy

    t = torch.tensor([1.0, 2.0, 3.0])
    o.raises("round", lambda: round(torch.tensor(2.567), 2), "doesn't define __round__ method")
    o("abs", abs(torch.tensor([-1.0, 2.0])))
    o("len iter list", [len(t), list(t), [v.item() for v in t]])
    o("contains", [2 in t, 5 in t])
    o("builtins", [sum(t), max(t), sorted(torch.tensor([3, 1, 2]))])
    o("index", [[10, 20, 30][torch.tensor(1)], list(range(torch.tensor(3)))])
    o("none comparison", [t == None, t != None])  # noqa: E711
    o.raises("float of vector", lambda: float(t), "only one element tensors can be converted to Python scalars")
    o.raises("int of vector", lambda: int(torch.tensor([1, 2])), "only one element tensors can be converted to Python scalars")
    o.raises("bool of empty", lambda: bool(torch.tensor([])), "Boolean value of Tensor with no values is ambiguous")
    o("scalar conversions", [float(torch.tensor([[3.5]])), int(torch.tensor([3.7])), int(torch.tensor(True)), str(complex(torch.tensor(2.0)))])
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    c = copy.deepcopy(w)
    o("deepcopy leaf", [c, c.requires_grad, c.is_leaf, c.grad, c is w])
    o.raises("deepcopy nonleaf", lambda: copy.deepcopy(w * 2), "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol")
    layer = torch.nn.Linear(2, 2)
    clone = copy.deepcopy(layer)
    o("deepcopy module", [clone.weight is layer.weight, torch.equal(clone.weight, layer.weight), type(clone.weight).__name__])


@program
def numpy_ufuncs_and_array_operands(torch, o):
    t = torch.tensor([0.0, 1.0])
    o("np.exp", np.exp(t))
    o("np.sqrt 0-d", np.sqrt(torch.tensor(4.0)))
    o("np.greater", np.greater(t, 0.5))
    o("np.add int", np.add(torch.tensor([1, 2]), 1))
    o("tensor * array", torch.tensor([1.0, 2.0]) * np.array([2.0, 3.0]))
    o("tensor + int array", torch.tensor([1, 2]) + np.array([1, 2]))
    o("tensor - float32 array", torch.tensor([1.0, 2.0]) - np.array([1.0, 1.0], dtype=np.float32))


@program
def grids_stacks_and_tiles(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0, 5.0], requires_grad=True)
    X, Y = torch.meshgrid(x, y, indexing="ij")
    Z = X ** 2 + X * Y
    Z.sum().backward()
    o("ij", [X, Y, Z, x.grad, y.grad])
    Xs, Ys = torch.meshgrid(x.detach(), y.detach(), indexing="xy")
    o("xy", [Xs, Ys])
    o.warns("no indexing", lambda: torch.meshgrid(x.detach(), y.detach()), "it will be required to pass the indexing argument")
    o("stacks", [torch.hstack([x, y]), torch.vstack([x, x]), torch.column_stack([x, x]),
                 torch.hstack([x.view(2, 1), x.view(2, 1)])])
    o("broadcast", [torch.broadcast_to(x, (3, 2)), x.broadcast_to((2, 2)).shape,
                    torch.broadcast_tensors(x, torch.ones(3, 1))[1].shape])
    t = torch.arange(3.0, requires_grad=True)
    tiled = torch.tile(t, (2,)) * torch.arange(6.0)
    tiled.sum().backward()
    o("tile", [torch.tile(t, (2, 2)), t.grad])
    r = torch.arange(6.0).requires_grad_()
    rolled = r.roll(2)
    (rolled * torch.arange(6.0)).sum().backward()
    o("roll", [rolled, r.grad, torch.roll(torch.arange(6).view(2, 3), (1, 1), (0, 1)), torch.arange(5).roll(-1)])


@program
def einsum_basics(torch, o):
    a = torch.arange(6.0).view(2, 3).requires_grad_()
    b = torch.arange(12.0).view(3, 4).requires_grad_()
    c = torch.einsum("ij,jk->ik", a, b)
    (c * c).sum().backward()
    o("matmul", [c.detach(), a.grad, b.grad])
    v = torch.tensor([1.0, 2.0])
    w = torch.tensor([3.0, 4.0, 5.0])
    o("outer", torch.einsum("i,j->ij", v, w))
    o("others", [torch.einsum("ij->ji", a.detach()), torch.einsum("ij->", a.detach()),
                 torch.einsum("ij->j", a.detach()), torch.einsum("ij,ij->i", a.detach(), a.detach()),
                 torch.einsum("i,i->", v, v), torch.einsum("ij", a.detach()),
                 torch.einsum("bij,bjk->bik", torch.arange(24.0).view(2, 3, 4), torch.arange(40.0).view(2, 4, 5))])


# expressions on two (2, 3) tensors x, y that require grad: the name of each result's node
GRAD_FN_EXPRESSIONS = [
    'x+y', 'x-y', 'x*y', 'x/y', 'x**2', 'x**y', '2**x', '-x', 'x+1', '1-x', '2*x', 'x/2', '2/x',
    'x.exp()', 'x.log()', 'x.sin()', 'x.cos()', 'x.tan()', 'x.tanh()', 'x.sigmoid()', 'x.relu()',
    'x.sqrt()', 'x.rsqrt()', 'x.abs()', 'x.sign()', 'x.clamp(0.1, 0.5)', 'x.clamp(min=0.1)',
    'x.clamp(max=0.5)', 'x.sum()', 'x.sum(0)', 'x.sum(1, keepdim=True)', 'x.mean()', 'x.mean(0)',
    'x.prod()', 'x.prod(1)', 'x.max()', 'x.max(0)[0]', 'x.min()', 'x.min(1)[0]', 'x.amax(0)',
    'x.std()', 'x.var(0)', 'x.norm()', 'x.logsumexp(1)', 'x.cumsum(0)', 'x.cumprod(1)',
    'x.softmax(1)', 'x.log_softmax(0)', 'x.t()', 'x.T', 'x.view(-1)', 'x.reshape(3,2)',
    'x.flatten()', 'x.unsqueeze(0)', 'x.squeeze()', 'x.permute(1,0)', 'x.transpose(0,1)',
    'x.expand(2,2,3)', 'x[0]', 'x[:,1]', 'x[0,1]', 'x[[0,1]]', 'x[x>0.3]', 'x.clone()',
    'x.contiguous()', 'x.double()', 'x.float()', 'x@y.t()', 'x.mm(y.t())', 'x[0]@y[0]',
    'x[0].dot(y[0])', 'x.mv(y[0])', 'torch.cat([x,y])', 'torch.where(x>0.3,x,y)',
    'x.masked_fill(x>0.3,0.)', 'x.gather(1,torch.tensor([[0],[1]]))',
    'x.index_select(0,torch.tensor([1]))', 'x.split(1)[0]', 'x.chunk(2,1)[0]', 'x.unbind()[0]',
    'x.flip(0)', 'x.roll(1)', 'x.repeat(2,1)', 'x.maximum(y)', 'x.minimum(y)', 'x.erf()',
    'x.exp2()', 'x.expm1()', 'x.log1p()', 'x.log2()', 'x.log10()', 'x.floor()', 'x.round()',
    'x.trunc()', 'x.frac()', 'x.square()', 'x.reciprocal()', 'x.diag()', 'x.tril()', 'x.trace()',
    'torch.outer(x[0], y[0])', 'x.narrow(1,0,2)', 'x.select(1,0)', 'x.sort(1)[0]', 'x.topk(1)[0]',
    'torch.nn.functional.gelu(x)', 'torch.nn.functional.elu(x)',
    'torch.nn.functional.leaky_relu(x)', 'torch.nn.functional.softplus(x)',
    'torch.nn.functional.silu(x)', 'torch.nn.functional.normalize(x)', 'x.masked_select(x>0.3)',
    'x.repeat_interleave(2)', 'x.tile((2,))', 'x % 0.3', 'x.fmod(0.3)', 'x.atan()', 'x.asin()',
    'x.sinh()', 'torch.nn.functional.dropout(x, 0.0)', 'x.to(torch.float64)',
    'x.type(torch.float64)', 'x.sum(dim=(0,1))', 'x.mean(dim=(0,1))', 'x.sum(-1)', 'x.std(1)',
    'x.var()', 'x.max(1).values', 'torch.max(x,y)', 'torch.min(x,y)', 'x.clamp_min(0.3)',
    'x.clamp_max(0.3)', 'torch.diagonal(x)', 'x.squeeze(0)', 'x.view(3,2).t()', 'x.reshape(6)',
    "torch.einsum('ij->j',x)", 'x.diff()', 'torch.diff(x, dim=0)',
]


@program
def grad_fn_names_of_common_ops(torch, o):
    names = {}
    for expression in GRAD_FN_EXPRESSIONS:
        x = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], requires_grad=True)
        y = torch.tensor([[0.3, 0.1, 0.9], [0.2, 0.7, 0.4]], requires_grad=True)
        result = eval(expression, {"x": x, "y": y, "torch": torch})
        names[expression] = result.grad_fn.name() if result.grad_fn is not None else None
        if expression in ("x*y", "x.softmax(1)", "x@y.t()", "torch.cat([x,y])"):
            names[expression + " repr"] = repr(result)
    o("names", names)


# ---- conformance fixes (session 9) ----

def _node_name(node):
    """A node's name without torch's ``torch::autograd::`` prefix (AccumulateGrad, CopySlices,
    CopyBackwards), which gradviz leaves out."""
    return None if node is None else node.name().replace("torch::autograd::", "")


@program
def stack_records_one_stack_node(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    s = torch.stack([a, b * 2], dim=1)
    o("node", [s.grad_fn.name(), repr(s)])
    o("next", [(_node_name(f), nr) for f, nr in s.grad_fn.next_functions])
    (s * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("grads", [a.grad, b.grad])
    ints = torch.stack([torch.tensor([1, 2]), torch.tensor([3.0, 4.0], requires_grad=True)])
    o("promoted", [ints, ints.grad_fn.name()])
    o("last dim", torch.stack([torch.arange(3), torch.arange(3)], -1))
    o.raises("unequal", lambda: torch.stack([torch.ones(2), torch.ones(3)]), "stack expects each tensor to be equal size")
    o.raises("empty", lambda: torch.stack([]), "stack expects a non-empty TensorList")
    o.raises("dim", lambda: torch.stack([a, b], 2), "Dimension out of range")
    # double backward through stack and unbind: the gradient's graph has their nodes
    x = torch.arange(6.0).view(2, 3).requires_grad_()
    g, = torch.autograd.grad(torch.stack([x[0] * x[1], x[1]]).pow(2).sum(), x, create_graph=True)
    o("grad of stack", [g, g.grad_fn.name()])
    u = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    first, second = u.unbind()
    gu, = torch.autograd.grad((first * second).sum(), u, create_graph=True)
    o("grad of unbind", [gu, gu.grad_fn.name(), gu.grad_fn.next_functions[0][0].name()])
    gu.sum().backward()
    o("second order", u.grad)


@program
def negative_slice_steps_are_errors(torch, o):
    x = torch.arange(6)
    y = torch.arange(6.0).view(2, 3)
    o.raises("reverse", lambda: x[::-1], "step must be greater than zero")
    o.raises("range", lambda: x[5:0:-2], "step must be greater than zero")
    o.raises("second dim", lambda: y[:, ::-1], "step must be greater than zero")
    o.raises("with advanced", lambda: y[[0], ::-1], "step must be greater than zero")
    o.raises("zero step", lambda: x[::0], "slice step cannot be zero")

    def write():
        z = torch.zeros(4)
        z[::-1] = 1.0

    o.raises("setitem", write, "step must be greater than zero")
    o("flip instead", [x.flip(0), y.flip(1), x[::2], y[:, 1::2]])


@program
def cat_of_zero_dim_tensors(torch, o):
    a, b = torch.tensor(1.0), torch.tensor(2.0)
    o.raises("cat 0-d", lambda: torch.cat([a, b]), "zero-dimensional tensor (at position 0) cannot be concatenated")
    o.raises("second is 0-d", lambda: torch.cat([torch.ones(2), b]), "zero-dimensional tensor (at position 1) cannot be concatenated")
    o("stack instead", [torch.stack([a, b]), torch.cat([a.view(1), b.reshape(1)])])


@program
def numpy_axis_keywords(torch, o):
    x = torch.arange(6.0).view(2, 3)
    i = torch.tensor([[0, 1, 0]])
    o("reductions", [x.sum(axis=0), torch.sum(x, axis=1), x.mean(axis=1), torch.mean(x, axis=0, keepdims=True),
                     x.sum(0, keepdims=True), x.prod(axis=0), x.std(axis=0), x.var(axis=0), x.amax(axis=0),
                     x.logsumexp(axis=0), x.cumsum(axis=0), x.argmax(axis=0), x.softmax(axis=0)])
    o("joins", [torch.cat([x, x], axis=1), torch.cat((x, x), axis=0), torch.stack([x, x], axis=1),
                torch.concat([x, x], 1), torch.concatenate([x, x], axis=0)])
    o("squeeze", [x[None].squeeze(axis=0), torch.squeeze(x[None], axis=0), x.unsqueeze(axis=-1),
                  torch.unsqueeze(x, axis=0), x[None].squeeze(axis=(0,)), x[None, :, None].squeeze((0, 2)),
                  x[None].squeeze([0, 1])])
    o("pieces", [x.chunk(2, axis=0), x.unbind(axis=1), x.narrow(axis=1, start=1, length=2), x.select(axis=0, index=1),
                 torch.chunk(x, 3, axis=1), torch.unbind(x, axis=0)])
    o("indexing", [x.gather(axis=0, index=i), torch.gather(x, axis=1, index=i[:, :2]),
                   x.index_select(axis=1, index=torch.tensor([2, 0])), x.sort(axis=0, descending=True).values,
                   x.argsort(axis=1), x.topk(1, axis=0).indices, x.repeat_interleave(2, axis=0),
                   x.scatter(axis=0, index=i, src=x), x.scatter_add(axis=0, index=i, src=x),
                   x.index_add(axis=0, index=torch.tensor([0]), source=x[:1])])
    o("diff", [x.diff(axis=0), torch.diff(x, axis=1)])
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    z = torch.cat([w, w * 2], axis=1).sum(axis=0)
    z.sum().backward()
    o("gradient", [z, z.grad_fn.name(), w.grad])
    o.raises("both names", lambda: x.sum(dim=0, axis=0), "unexpected keyword argument 'axis'")
    o.raises("cat both names", lambda: torch.cat([x], dim=0, axis=0), "unexpected keyword argument 'axis'")
    o.raises("duplicate squeeze dims", lambda: x[None].squeeze((0, 0)), "dim 0 appears multiple times in the list of dims")
    # where torch has no axis= alias it is a TypeError
    o.raises("flip", lambda: x.flip(axis=0), "")
    o.raises("roll", lambda: x.roll(1, axis=0), "unexpected keyword argument 'axis'")
    o.raises("split", lambda: x.split(1, axis=0), "unexpected keyword argument 'axis'")


@program
def integer_tensors_wrap_python_ints(torch, o):
    def u8():
        return torch.tensor([1, 2], dtype=torch.uint8)

    def i8():
        return torch.tensor([1, 100], dtype=torch.int8)

    o("functions", [torch.add(u8(), -1), torch.sub(u8(), 300), torch.mul(i8(), 3000000000),
                    torch.sub(i8(), 200), u8().add(-1, alpha=2), u8().add(1, alpha=-1), u8().sub(-1),
                    torch.mul(torch.tensor([1, 2], dtype=torch.int32), 2 ** 40),
                    torch.add(torch.tensor([1, 2], dtype=torch.int16), 40000),
                    torch.add(torch.tensor([1, 2]), 2 ** 63), torch.add(i8(), 2 ** 64 - 1),
                    torch.add(torch.tensor([True, False]), 300), torch.add(3, u8())])
    o("in place", [u8().add_(-1), u8().sub_(300), u8().mul_(300), i8().add_(200)])
    # fill values are checked: an unsigned dtype takes a negative number down to -max
    o("fills", [u8().fill_(-1), u8().fill_(-255), u8().masked_fill(u8() > 1, -3),
                torch.full((2,), -1, dtype=torch.uint8), torch.full((2,), -2 ** 63, dtype=torch.int64)])
    o.raises("fill too big", lambda: u8().fill_(300), "value cannot be converted to type uint8_t without overflow")
    o.raises("fill too small", lambda: u8().fill_(-256), "value cannot be converted to type uint8_t without overflow")
    o.raises("masked_fill", lambda: i8().masked_fill(i8() > 0, -200), "value cannot be converted to type int8_t without overflow")
    o.raises("full int32", lambda: torch.full((2,), 2 ** 40, dtype=torch.int32), "value cannot be converted to type int without overflow")
    o("reflected", [3 - u8(), 300 - u8(), -1 - i8(), u8() - 3, u8() * 200])
    o("rounded", [u8() // -1, torch.floor_divide(u8(), -1), u8().div(-1, rounding_mode="floor"),
                  u8().div(-1, rounding_mode="trunc"), torch.tensor([-7], dtype=torch.int8) // 300,
                  u8() % -3, torch.remainder(u8(), 300), torch.fmod(i8(), 300)])
    o("true division promotes: no wrap", [u8() / -1, torch.div(u8(), 300)])
    o("comparisons", [u8() > -1, u8() == 257, u8() < 300, u8() >= 256, u8().eq(-255), u8().ne(-1)])
    o("bitwise", [u8() & -1, u8() | -256])
    o.raises("past 64 bits", lambda: torch.add(i8(), 2 ** 64), "int too big to convert")
    o.raises("below -2**63", lambda: torch.add(i8(), -2 ** 63 - 1), "can't convert negative int to unsigned")


@program(0.0, atol=0.0)  # float16 values exactly: a rounding difference is the point
def half_precision_with_python_numbers(torch, o):
    # torch computes float16 arithmetic in float32 and rounds once; a Python number stays in
    # float32 for division (here through div's rounding_mode=None, which takes gradviz's
    # Python path; the operators need the engine change described in ops/_pointwise.py)
    h = torch.tensor([1.0, 2.0, 0.5, -3.1, 1e-3], dtype=torch.float16)
    o("div", [torch.div(h, 1e-5, rounding_mode=None), h.div(1e5, rounding_mode=None),
              h.div(3.0, rounding_mode=None), torch.div(h, 70000, rounding_mode=None)])
    o("add and sub round the number to float16", [h + 1e5, h - 70000.0, h + 1e-4, h + 0.1, 0.1 - h, 65520.0 - h])
    o("two half tensors", [h * h.flip(0), h / h.flip(0), h + h.flip(0)])


@program
def inplace_shape_mismatch_errors(torch, o):
    def zeros():
        return torch.zeros(2, 3)

    def assign(key, value):
        z = zeros()
        z[key] = value
        return z

    o.raises("row too short", lambda: assign(0, torch.ones(2)), "The expanded size of the tensor (3) must match the existing size (2) at non-singleton dimension 0.  Target sizes: [3].  Tensor sizes: [2]")
    o.raises("row too many dims", lambda: assign(0, torch.ones(2, 3)), "the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)")
    o.raises("column", lambda: assign((slice(None), 0), torch.ones(3)), "The expanded size of the tensor (2) must match the existing size (3) at non-singleton dimension 0")
    o.raises("advanced key", lambda: assign([0, 1], torch.ones(3, 3)), "shape mismatch: value tensor of shape [3, 3] cannot be broadcast to indexing result of shape [2, 3]")
    o.raises("mask", lambda: assign(zeros() > 5, torch.ones(2)), "shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of shape [0]")
    o("leading ones are dropped", [assign(0, torch.ones(1, 3)), assign((slice(None), 1), torch.ones(1, 1, 2)),
                                   assign(1, torch.ones(1, 1))])
    o.raises("expand", lambda: torch.ones(2, 3).expand(3), "the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)")
    o.raises("add_ grows", lambda: torch.zeros(3).add_(torch.ones(2, 3)), "output with shape [3] doesn't match the broadcast shape [2, 3]")
    o.raises("mul_ on a view grows", lambda: zeros()[0].mul_(torch.ones(2, 3)), "output with shape [3] doesn't match the broadcast shape [2, 3]")
    o.raises("add_ mismatch", lambda: zeros().add_(torch.ones(3, 2)), "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")
    o.raises("copy_", lambda: zeros().copy_(torch.ones(3, 2)), "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * 1
    o.raises("recorded add_ grows", lambda: y.add_(torch.ones(2, 3)), "output with shape [3] doesn't match the broadcast shape [2, 3]")
    v = torch.tensor([[5.0, 6.0, 7.0]], requires_grad=True)
    y[:] = v
    y.sum().backward()
    o("leading one, gradient", [y, w.grad, v.grad])


@program
def grad_made_with_create_graph_is_a_copy(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x ** 2).sum().backward(create_graph=True)
    node = x.grad.grad_fn
    o("first", [x.grad, _node_name(node), [(_node_name(f), nr) for f, nr in node.next_functions]])
    (x ** 3).sum().backward(create_graph=True)
    node = x.grad.grad_fn
    o("accumulated", [x.grad, _node_name(node), [(_node_name(f), nr) for f, nr in node.next_functions]])
    x.grad.sum().backward()
    o("through the copy", x.grad)
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    g, = torch.autograd.grad((y ** 2).sum(), y, create_graph=True)
    o("autograd.grad", [g, _node_name(g.grad_fn)])


# ---- more teaching programs (session 9) ------------------------------------------------------

@program(rtol=1e-5, atol=1e-6)
def d2l_linear_regression_from_scratch(torch, o):
    import io
    import contextlib

    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    X = torch.stack([torch.linspace(-1, 1, 10), torch.cos(torch.arange(10.0))], dim=1)
    y = torch.matmul(X, true_w) + true_b
    y += 0.01 * torch.sin(torch.arange(10.0))
    y = y.reshape((-1, 1))
    o("features", [X.shape, y.shape, X[0], y[0]])

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    w = torch.zeros(size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)

    def linreg(X, w, b):
        return torch.matmul(X, w) + b

    def squared_loss(y_hat, y):
        return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    lr, num_epochs, batch_size = 0.3, 3, 4
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for epoch in range(num_epochs):
            for Xb, yb in data_iter(batch_size, X, y):
                l = squared_loss(linreg(Xb, w, b), yb)
                l.sum().backward()
                sgd([w, b], lr, batch_size)
            with torch.no_grad():
                train_l = squared_loss(linreg(X, w, b), y)
                print(f'epoch {epoch + 1}, loss {float(train_l.mean()):f}')
        print(f'error in estimating w: {true_w - w.reshape(true_w.shape)}')
        print(f'error in estimating b: {true_b - b}')
    o("stdout", buffer.getvalue())
    o("params", [w, b, w.grad, b.grad])


@program(rtol=1e-5, atol=1e-6)
def d2l_softmax_regression_from_scratch(torch, o):
    X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    o("sums", [X.sum(0, keepdim=True), X.sum(1, keepdim=True)])

    def softmax(X):
        X_exp = torch.exp(X)
        partition = X_exp.sum(1, keepdim=True)
        return X_exp / partition

    X_prob = softmax(torch.tensor([[0.1, 0.5, -0.2, 0.0, 1.0], [1.0, 1.0, 0.2, -0.3, 0.4]]))
    o("softmax", [X_prob, X_prob.sum(1)])
    y = torch.tensor([0, 2])
    y_hat = torch.tensor([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]])
    o("pick", y_hat[[0, 1], y])

    def cross_entropy(y_hat, y):
        return - torch.log(y_hat[range(len(y_hat)), y])

    o("ce", cross_entropy(y_hat, y))

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    o("accuracy", accuracy(y_hat, y) / len(y))

    class Accumulator:
        def __init__(self, n):
            self.data = [0.0] * n

        def add(self, *args):
            self.data = [a + float(b) for a, b in zip(self.data, args)]

        def __getitem__(self, idx):
            return self.data[idx]

    features = torch.tensor([[0.5, -1.0, 2.0, 0.1], [1.5, 0.3, -0.7, 0.2], [-0.2, 0.8, 1.1, -0.5],
                             [0.9, -0.4, 0.0, 1.0], [0.0, 1.0, -1.0, 0.3], [1.2, 1.2, 0.5, -0.8]])
    labels = torch.tensor([2, 0, 1, 0, 1, 2])
    W = torch.linspace(-0.1, 0.1, 12).reshape(4, 3).requires_grad_(True)
    b = torch.zeros(3, requires_grad=True)

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)

    for epoch in range(10):
        metric = Accumulator(3)
        for i in range(0, 6, 3):
            Xb, yb = features[i:i + 3], labels[i:i + 3]
            y_hat = net(Xb)
            l = cross_entropy(y_hat, yb)
            l.sum().backward()
            with torch.no_grad():
                for param in [W, b]:
                    param -= 0.5 * param.grad / 3
                    param.grad.zero_()
            metric.add(float(l.sum()), accuracy(y_hat, yb), yb.numel())
        if epoch % 3 == 0:
            o(f"epoch {epoch}", [metric[0] / metric[2], metric[1] / metric[2]])
    o("W", [W, b])
    o("preds", net(features).argmax(axis=1))


@program
def autograd_functional_jacobian_hessian(torch, o):
    functional = torch.autograd.functional
    hessian, hvp, jacobian, jvp, vhp, vjp = (functional.hessian, functional.hvp, functional.jacobian,
                                             functional.jvp, functional.vhp, functional.vjp)

    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = torch.tensor([[0.1, 0.2], [0.3, -0.4]])
    o("jacobian", jacobian(exp_reducer, inputs))
    o("jacobian create_graph", jacobian(exp_reducer, inputs, create_graph=True))

    def exp_adder(x, y):
        return 2 * x.exp() + 3 * y

    xs = (torch.tensor([0.5, -0.1]), torch.tensor([1.0, 2.0]))
    o("jacobian tuple", jacobian(exp_adder, xs))

    def pow_reducer(x):
        return x.pow(3).sum()

    o("hessian", hessian(pow_reducer, inputs))

    def pow_adder_reducer(x, y):
        return (2 * x.pow(2) + 3 * y.pow(2)).sum()

    o("hessian tuple", hessian(pow_adder_reducer, xs))
    v = torch.ones(2)
    o("vjp", vjp(exp_reducer, inputs, v))
    o("jvp", jvp(exp_reducer, inputs, torch.ones(2, 2)))
    o("vhp", vhp(pow_reducer, inputs, torch.ones(2, 2)))
    o("hvp", hvp(pow_reducer, inputs, torch.ones(2, 2)))
    o("jacobian of linear", jacobian(lambda x: torch.tensor([[1.0, 2.0], [3.0, 4.0]]) @ x, torch.tensor([1.0, 1.0])))
    o("jacobian scalar out", jacobian(lambda x: (x ** 2).sum(), torch.tensor([1.0, 2.0, 3.0])))
    o("jacobian unused", jacobian(lambda x, y: x * 2, (torch.tensor([1.0]), torch.tensor([2.0]))))
    o.raises("strict", lambda: jacobian(lambda x, y: x * 2, (torch.tensor([1.0]), torch.tensor([2.0])), strict=True),
             "Output 0 of the user-provided function is independent of input 1")


@program
def embedding_lookup_module_and_functional(torch, o):
    F = torch.nn.functional

    emb = torch.nn.Embedding(5, 3)
    o("repr", repr(emb))
    o("weight meta", [emb.weight.shape, emb.weight.requires_grad, type(emb.weight).__name__])
    with torch.no_grad():
        emb.weight.copy_(torch.arange(15.0).view(5, 3) / 10)
    idx = torch.tensor([[0, 2, 2], [4, 3, 0]])
    out = emb(idx)
    o("out", out)
    (out * torch.arange(18.0).view(2, 3, 3)).sum().backward()
    o("grad", emb.weight.grad)
    o("grad_fn", out.grad_fn.name())
    o("functional", F.embedding(torch.tensor([1, 4]), emb.weight.detach()))
    pad = torch.nn.Embedding(4, 2, padding_idx=0)
    o("padding row", pad.weight[0])
    o("pad repr", repr(pad))
    with torch.no_grad():
        pad.weight.copy_(torch.arange(8.0).view(4, 2))
    pad(torch.tensor([0, 1, 0, 3])).sum().backward()
    o("padding grad", pad.weight.grad)
    pre = torch.nn.Embedding.from_pretrained(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    o("pretrained", [pre(torch.tensor([1, 0])), pre.weight.requires_grad])
    o.raises("out of range", lambda: emb(torch.tensor([5])), "index out of range in self")
    o.raises("float index", lambda: emb(torch.tensor([1.0])), "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int")


@program(rtol=1e-5, atol=1e-6)
def layer_norm_module_and_functional(torch, o):
    F = torch.nn.functional

    x = torch.tensor([[1.0, 2.0, 4.0], [0.5, -0.5, 3.0]], requires_grad=True)
    ln = torch.nn.LayerNorm(3)
    o("repr", repr(ln))
    o("params", [ln.weight, ln.bias])
    y = ln(x)
    o("y", y)
    o("stats", [y.mean(-1), y.var(-1, unbiased=False)])
    (y * torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])).sum().backward()
    o("grads", [x.grad, ln.weight.grad, ln.bias.grad])
    o("functional", F.layer_norm(x.detach(), (3,)))
    o("functional affine", F.layer_norm(x.detach(), [3], torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 1.0, 0.0]), eps=1e-3))
    plain = torch.nn.LayerNorm([2, 3], elementwise_affine=False)
    o("2d", [plain(x.detach()), repr(plain), list(plain.parameters())])
    manual = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
    o("manual close", torch.allclose(manual, y, atol=1e-6))
    o.raises("bad shape", lambda: ln(torch.ones(2, 4)), "Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[2, 4]")


@program(rtol=1e-5, atol=1e-6)
def batch_norm_1d_train_and_eval(torch, o):
    bn = torch.nn.BatchNorm1d(3)
    o("repr", repr(bn))
    o("buffers", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    o("state keys", list(bn.state_dict().keys()))
    x = torch.tensor([[1.0, 2.0, 0.5], [2.0, 0.0, 1.5], [0.5, 1.0, -1.0], [3.0, 2.5, 0.0]], requires_grad=True)
    y = bn(x)
    o("train out", y)
    (y * torch.arange(12.0).view(4, 3)).sum().backward()
    o("grads", [x.grad, bn.weight.grad, bn.bias.grad])
    o("running", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    bn(x.detach() * 2)
    o("running 2", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    bn.eval()
    o("eval out", bn(torch.tensor([[1.0, 1.0, 1.0]])))
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU())
    o("seq repr", repr(model))
    o("n params", sum(p.numel() for p in model.parameters()))
    o.raises("one sample", lambda: torch.nn.BatchNorm1d(3)(torch.ones(1, 3)), "Expected more than 1 value per channel when training")
    nomom = torch.nn.BatchNorm1d(2, momentum=None, affine=False)
    nomom(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))
    nomom(torch.tensor([[0.0, 2.0], [1.0, 1.0]]))
    o("cumulative average", [nomom.running_mean, nomom.running_var, repr(nomom)])


@program
def dataloader_tensor_dataset_batches(torch, o):
    data = torch.utils.data

    features = torch.arange(20.0).view(10, 2)
    labels = torch.arange(10) % 3
    dataset = data.TensorDataset(features, labels)
    o("len", len(dataset))
    o("item", dataset[3])
    o("slice", dataset[2:4])
    loader = data.DataLoader(dataset, batch_size=4, shuffle=False)
    o("n batches", len(loader))
    batches = [(X, y) for X, y in loader]
    o("batches", batches)
    o("drop_last", [X.shape for X, _ in data.DataLoader(dataset, batch_size=4, drop_last=True)])
    o("len drop_last", len(data.DataLoader(dataset, batch_size=4, drop_last=True)))
    shuffled = data.DataLoader(dataset, batch_size=3, shuffle=True)
    seen = torch.cat([X for X, _ in shuffled])
    o("shuffled covers all", seen.sort(0).values)
    first = next(iter(data.DataLoader(dataset, batch_size=5)))
    o("next iter", first)

    class Squares(data.Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return float(i), i * i

    o("custom", list(data.DataLoader(Squares(5), batch_size=2)))

    class Dicts(data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {"x": torch.tensor([i, i + 1.0]), "label": i}

    o("dict batches", [sorted(b.items()) for b in data.DataLoader(Dicts(), batch_size=2)])
    o("no batching", list(data.DataLoader(dataset, batch_size=None))[:2])
    parts = data.random_split(dataset, [7, 3])
    o("split lengths", [len(p) for p in parts])
    o.raises("mismatched sizes", lambda: data.TensorDataset(torch.zeros(3), torch.zeros(4)), "Size mismatch between tensors")


@program(rtol=1e-5, atol=1e-6)
def cs231n_svm_and_softmax_loss_vectorized(torch, o):
    X = torch.tensor([[0.5, -1.0, 2.0, 1.0], [1.5, 0.3, -0.7, 1.0], [-0.2, 0.8, 1.1, 1.0]])
    y = torch.tensor([2, 0, 1])
    W = torch.linspace(-0.5, 0.5, 12).view(4, 3).requires_grad_()
    reg = 0.1
    num_train = X.shape[0]
    scores = X.mm(W)
    correct = scores[torch.arange(num_train), y].view(-1, 1)
    margins = torch.clamp(scores - correct + 1, min=0)
    margins[torch.arange(num_train), y] = 0
    loss = margins.sum() / num_train + reg * torch.sum(W * W)
    loss.backward()
    o("svm loss", loss)
    o("svm grad", W.grad)
    mask = (margins > 0).float()
    mask[torch.arange(num_train), y] = -mask.sum(dim=1)
    dW = X.t().mm(mask) / num_train + 2 * reg * W.detach()
    o("manual svm grad close", torch.allclose(dW, W.grad))
    o("svm multi_margin", torch.nn.functional.multi_margin_loss(scores.detach(), y))
    W.grad = None
    scores = X @ W
    shifted = scores - scores.max(dim=1, keepdim=True)[0]
    log_probs = shifted - torch.logsumexp(shifted, dim=1, keepdim=True)
    loss = -log_probs[range(num_train), y].mean() + reg * (W ** 2).sum()
    loss.backward()
    probs = log_probs.exp().detach()
    probs[range(num_train), y] -= 1
    dW = X.T @ probs / num_train + 2 * reg * W.detach()
    o("softmax loss", loss)
    o("softmax grad", [W.grad, (dW - W.grad).abs().max().item() < 1e-6])
    o("rel error", ((dW - W.grad).norm() / (dW.norm() + W.grad.norm())).item() < 1e-6)


@program(rtol=1e-5, atol=1e-6)
def fastai_mnist_basics_style(torch, o):
    threes = torch.stack([torch.full((2, 2), 0.2) + 0.1 * i for i in range(3)])
    sevens = torch.stack([torch.tensor([[0.9, 0.1], [0.8, 0.0]]) - 0.05 * i for i in range(3)])
    mean3, mean7 = threes.mean(0), sevens.mean(0)
    o("means", [mean3, mean7])
    a_3 = threes[1]
    o("l1 l2", [(a_3 - mean3).abs().mean(), ((a_3 - mean7) ** 2).mean().sqrt()])
    F = torch.nn.functional
    o("F l1 mse", [F.l1_loss(a_3.float(), mean7), F.mse_loss(a_3, mean7).sqrt()])

    def mnist_distance(a, b):
        return (a - b).abs().mean((-1, -2))

    o("broadcast distance", mnist_distance(sevens, mean3))

    def is_3(x):
        return mnist_distance(x, mean3) < mnist_distance(x, mean7)

    o("is_3", [is_3(a_3), is_3(a_3).float(), is_3(sevens)])
    o("accuracy", [is_3(threes).float().mean(), (1 - is_3(sevens).float()).mean()])
    train_x = torch.cat([threes, sevens]).view(-1, 2 * 2)
    train_y = torch.tensor([1] * len(threes) + [0] * len(sevens)).unsqueeze(1)
    o("shapes", [train_x.shape, train_y.shape])
    dset = list(zip(train_x, train_y))
    x, yy = dset[0]
    o("first", [x.shape, yy])
    weights = (torch.linspace(-1, 1, 4).view(4, 1) * 0.5).requires_grad_()
    bias = torch.zeros(1).requires_grad_()

    def linear1(xb):
        return xb @ weights + bias

    def mnist_loss(predictions, targets):
        predictions = predictions.sigmoid()
        return torch.where(targets == 1, 1 - predictions, predictions).mean()

    def batch_accuracy(xb, yb):
        preds = xb.sigmoid()
        correct = (preds > 0.5) == yb
        return correct.float().mean()

    for epoch in range(5):
        for i in range(0, 6, 2):
            xb, yb = train_x[i:i + 2], train_y[i:i + 2]
            loss = mnist_loss(linear1(xb), yb)
            loss.backward()
            for p in (weights, bias):
                p.data -= p.grad * 1.0
                p.grad.zero_()
        acc = batch_accuracy(linear1(train_x), train_y)
        o(f"epoch {epoch}", [round(acc.item(), 4), loss])
    o("weights", [weights, bias])
    o("sigmoid plot", torch.sigmoid(torch.linspace(-4, 4, 5)))


@program
def common_beginner_mistakes_errors(torch, o):
    F = torch.nn.functional

    model = torch.nn.Linear(3, 2)
    o.raises("int input to Linear", lambda: model(torch.tensor([[1, 2, 3]])), "mat1 and mat2 must have the same dtype")
    o.raises("double input to Linear", lambda: model(torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)), "mat1 and mat2 must have the same dtype")
    o.raises("wrong features", lambda: model(torch.ones(4, 5)), "mat1 and mat2 shapes cannot be multiplied (4x5 and 3x2)")
    o.raises("1d wrong features", lambda: model(torch.ones(5)), "mat1 and mat2 shapes cannot be multiplied (1x5 and 3x2)")
    logits = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1]])
    o.raises("int32 target", lambda: F.cross_entropy(logits, torch.tensor([0, 2], dtype=torch.int32)), "expected target dtype to be Long or Byte, but got Int")
    o.raises("target out of bounds", lambda: F.cross_entropy(logits, torch.tensor([0, 3])), "out of bounds")
    o.raises("float class indices", lambda: F.cross_entropy(logits, torch.tensor([0.0, 2.0])), "expected target dtype to be Long or Byte, but got Float")
    o.raises("one-hot 2d target", lambda: F.nll_loss(logits, torch.tensor([[0], [2]])), "multi-target not supported")
    o("mse int target", F.mse_loss(logits, torch.tensor([[0, 1, 0], [1, 0, 0]])))
    o.raises("bce target range", lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([2.0])), "all elements of target should be between 0 and 1")
    o.raises("stack different sizes", lambda: torch.stack([torch.ones(2), torch.ones(3)]), "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1")
    o.raises("cat different dims", lambda: torch.cat([torch.ones(2, 2), torch.ones(2)]), "Tensors must have same number of dimensions: got 2 and 1")
    o.raises("item on vector", lambda: torch.tensor([1.0, 2.0]).item(), "a Tensor with 2 elements cannot be converted to Scalar")
    o.raises("numpy with grad", lambda: torch.ones(2, requires_grad=True).numpy(), "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    o.raises("bool of vector", lambda: bool(torch.tensor([1, 0])), "Boolean value of Tensor with more than one value is ambiguous")
    o.raises("float of vector", lambda: float(torch.tensor([1.0, 2.0])), "only one element tensors can be converted to Python scalars")
    o.raises("int of vector", lambda: int(torch.tensor([1, 2])), "only one element tensors can be converted to Python scalars")
    w = torch.ones(2, requires_grad=True)
    o.raises("leaf inplace", lambda: w.add_(1), "a leaf Variable that requires grad is being used in an in-place operation.")
    o.raises("grad of nonscalar", lambda: (w * 2).backward(), "grad can be implicitly created only for scalar outputs")
    o.raises("tensor of tensors", lambda: torch.tensor([torch.ones(2), torch.ones(2)]), "only one element tensors can be converted to Python scalars")
    o.raises("ragged list", lambda: torch.tensor([[1, 2], [3]]), "expected sequence of length 2 at dim 1 (got 1)")
    o.raises("string in list", lambda: torch.tensor([1, "a"]), "invalid data type 'str'")
    o.raises("view of transposed", lambda: torch.arange(6).view(2, 3).t().view(6), "view size is not compatible with input tensor's size and stride")
    o.raises("softmax no dim int", lambda: torch.softmax(torch.tensor([1, 2]), 0), "not implemented for 'Long'")
    o.raises("mean of long", lambda: torch.tensor([1, 2, 3]).mean(), "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long")
    o.raises("requires grad int", lambda: torch.tensor([1, 2], requires_grad=True), "Only Tensors of floating point and complex dtype can require gradients")
    o.raises("argmax float compare", lambda: torch.tensor([[1.0, 2.0]]).argmax(dim=2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)")


@program(rtol=1e-5, atol=1e-6)
def gradient_accumulation_micro_batches(torch, o):
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    full = make_mlp(torch)
    torch.nn.functional.mse_loss(full(x), y).backward()
    full_grads = [p.grad.clone() for p in full.parameters()]
    model = make_mlp(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    accumulation_steps = 3
    optimizer.zero_grad()
    losses = []
    for i, (xb, yb) in enumerate(zip(x.split(2), y.split(2))):
        loss = torch.nn.functional.mse_loss(model(xb), yb) / accumulation_steps
        loss.backward()
        losses.append(loss.item())
        if (i + 1) % accumulation_steps == 0:
            o("accumulated equals full", [torch.allclose(p.grad, g, atol=1e-7) for p, g in zip(model.parameters(), full_grads)])
            optimizer.step()
            optimizer.zero_grad()
    o("losses", losses)
    o("sum of losses", [sum(losses), torch.nn.functional.mse_loss(full(x), y).item()])
    o("params", list(model.parameters()))
    o("grads after zero", [p.grad for p in model.parameters()])
    model.zero_grad(set_to_none=False)
    o("grads zero", [p.grad for p in model.parameters()])


@program(rtol=1e-5, atol=1e-6)
def evaluation_loop_no_grad_and_inference_mode(torch, o):
    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_CLS)
    model.eval()
    correct, total, running_loss = 0, 0, 0.0
    criterion = torch.nn.CrossEntropyLoss(reduction="sum")
    with torch.no_grad():
        for xb, yb in zip(x.split(4), y.split(4)):
            outputs = model(xb)
            running_loss += criterion(outputs, yb).item()
            _, predicted = outputs.max(1)
            total += yb.size(0)
            correct += predicted.eq(yb).sum().item()
    o("totals", [correct, total, running_loss / total, 100. * correct / total])
    o("training flag", [model.training, model[0].training])
    with torch.inference_mode():
        out = model(x)
    o("inference out", [out.requires_grad, out.grad_fn is None, (out.argmax(1) == y).float().mean()])
    probs = torch.softmax(out, dim=1)
    conf, pred = probs.max(dim=1)
    o("confidence", [conf, pred])
    o("per-class", [((pred == c) & (y == c)).sum().item() for c in range(2)])
    model.train()
    o("back to train", model.training)
    with torch.no_grad():
        preds = torch.cat([model(xb).argmax(dim=-1) for xb in x.split(2)])
    o("preds", [preds, preds.dtype, preds.tolist()])


@program
def activation_functions_catalog(torch, o):
    F = torch.nn.functional

    names = ["relu6", "hardtanh", "logsigmoid", "softsign", "selu", "celu", "mish", "hardswish",
             "hardsigmoid", "tanhshrink", "softmin"]
    results = {}
    for name in names:
        x = torch.tensor([-4.0, -1.5, -0.5, 0.0, 0.5, 1.5, 4.0, 7.0], requires_grad=True)
        fn = getattr(F, name)
        y = fn(x, dim=0) if name == "softmin" else fn(x)
        (y * torch.arange(1.0, 9.0)).sum().backward()
        results[name] = [y, x.grad]
    o("functional", results)
    modules = [torch.nn.ReLU6(), torch.nn.Hardtanh(-2.0, 2.0), torch.nn.LogSigmoid(),
               torch.nn.Softsign(), torch.nn.SELU(), torch.nn.CELU(alpha=0.5), torch.nn.Mish(),
               torch.nn.Hardswish(), torch.nn.Hardsigmoid(), torch.nn.Tanhshrink(),
               torch.nn.Softmin(dim=1)]
    x = torch.tensor([[-3.0, -0.25, 0.0, 0.25, 3.5]])
    o("modules", [(repr(m), m(x)) for m in modules])
    o("hardtanh args", F.hardtanh(torch.tensor([-3.0, 0.3, 3.0]), min_val=-1.0, max_val=2.0))
    o("celu alpha", F.celu(torch.tensor([-1.0, 1.0]), alpha=2.0))


@program
def activation_second_derivatives(torch, o):
    F = torch.nn.functional

    for name in ["logsigmoid", "softsign", "selu", "celu", "mish", "tanhshrink"]:
        x = torch.tensor([-1.5, -0.3, 0.4, 2.0], requires_grad=True)
        y = getattr(F, name)(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        o(name, [g, h])


@program(rtol=1e-5, atol=1e-6)
def similarity_and_distances(torch, o):
    F = torch.nn.functional

    a = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], requires_grad=True)
    b = torch.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 1.0]])
    cos = F.cosine_similarity(a, b)
    o("cos", cos)
    cos.sum().backward()
    o("cos grad", a.grad)
    o("cos dim0", F.cosine_similarity(a.detach(), b, dim=0))
    o("cos broadcast", F.cosine_similarity(a.detach().unsqueeze(1), b.unsqueeze(0), dim=-1))
    o("cos module", [torch.nn.CosineSimilarity(dim=1)(a.detach(), b), repr(torch.nn.CosineSimilarity())])
    o("cos zeros", F.cosine_similarity(torch.zeros(1, 3), b[:1]))
    manual = (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))
    o("manual", torch.allclose(manual, cos))
    o("pairwise", F.pairwise_distance(a.detach(), b))
    o("cdist", torch.cdist(a.detach(), b))
    o("cdist p1", torch.cdist(a.detach(), b, p=1))
    o("dist", [torch.dist(a.detach(), b), torch.dist(a.detach(), b, p=1)])
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]], requires_grad=True)
    d = torch.cdist(x, x)
    (d ** 2).sum().backward()
    o("cdist grad", [d, x.grad])


@program
def statistics_median_mode_unique_bincount(torch, o):
    t = torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    o("median", [t.median(), torch.median(t)])
    m = torch.tensor([[1.0, 5.0, 2.0], [7.0, 3.0, 3.0]])
    values, indices = m.median(dim=1)
    o("median dim", [values, indices])
    o("median keepdim", torch.median(m, 0, keepdim=True))
    labels = torch.tensor([2, 0, 1, 2, 2, 0])
    o("unique", torch.unique(labels))
    o("unique counts", torch.unique(labels, return_counts=True))
    o("unique inverse", labels.unique(return_inverse=True))
    o("unique sorted float", torch.tensor([2.5, 1.0, 2.5]).unique())
    o("bincount", torch.bincount(labels))
    o("bincount minlength", labels.bincount(minlength=5))
    o("bincount weights", torch.bincount(labels, weights=torch.tensor([0.5, 1.0, 1.0, 0.25, 0.25, 2.0])))
    o("std_mean", torch.std_mean(m, dim=1))
    o("var_mean", torch.var_mean(m))
    o("class weights", 1.0 / torch.bincount(labels).float())
    o.raises("bincount negative", lambda: torch.bincount(torch.tensor([-1, 2])), "bincount only supports 1-d non-negative integral inputs.")
    g = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
    g.median().backward()
    o("median grad", g.grad)


@program(rtol=1e-5, atol=1e-6)
def kl_divergence_and_distillation_losses(torch, o):
    F = torch.nn.functional

    student = torch.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0]], requires_grad=True)
    teacher = torch.tensor([[0.5, 2.5, 0.0], [0.0, -0.5, 1.5]])
    T = 2.0
    soft = F.kl_div(F.log_softmax(student / T, dim=1), F.softmax(teacher / T, dim=1), reduction="batchmean") * T * T
    hard = F.cross_entropy(student, torch.tensor([1, 2]))
    loss = 0.7 * soft + 0.3 * hard
    loss.backward()
    o("losses", [soft, hard, loss])
    o("grad", student.grad)
    p = F.log_softmax(student.detach(), 1)
    q = F.softmax(teacher, 1)
    o("reductions", [F.kl_div(p, q, reduction=r) for r in ("none", "sum", "batchmean")])
    o("log_target", F.kl_div(p, q.log(), reduction="sum", log_target=True))
    o("module", [torch.nn.KLDivLoss(reduction="batchmean")(p, q), repr(torch.nn.KLDivLoss())])
    o.warns("mean warning", lambda: F.kl_div(p, q, reduction="mean"), "reduction: 'mean' divides the total loss by both the batch size and the support size")
    mu = torch.tensor([0.5, -0.2], requires_grad=True)
    logvar = torch.tensor([0.1, -0.3], requires_grad=True)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    kld.backward()
    o("vae kld", [kld, mu.grad, logvar.grad])


@program
def d2l_corr2d_and_pooling_from_scratch(torch, o):
    def corr2d(X, K):
        h, w = K.shape
        Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
        for i in range(Y.shape[0]):
            for j in range(Y.shape[1]):
                Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
        return Y

    X = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
    K = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    o("corr2d", corr2d(X, K))

    class Conv2D(torch.nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(kernel_size) * 0.5)
            self.bias = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return corr2d(x, self.weight) + self.bias

    E = torch.ones((6, 8))
    E[:, 2:6] = 0
    o("edge image", E)
    Kedge = torch.tensor([[1.0, -1.0]])
    Yedge = corr2d(E, Kedge)
    o("edges", [Yedge, corr2d(E.t(), Kedge)])
    conv2d = Conv2D(kernel_size=(1, 2))
    lr = 1e-2
    for i in range(10):
        Y_hat = conv2d(E)
        l = (Y_hat - Yedge) ** 2
        conv2d.zero_grad()
        l.sum().backward()
        conv2d.weight.data[:] -= lr * conv2d.weight.grad
        conv2d.bias.data -= lr * conv2d.bias.grad
        if (i + 1) % 2 == 0:
            o(f"epoch {i + 1}", f"loss {l.sum():.3f}")
    o("learned", [conv2d.weight.data.reshape((1, 2)), conv2d.bias])

    def pool2d(X, pool_size, mode="max"):
        p_h, p_w = pool_size
        Y = torch.zeros((X.shape[0] - p_h + 1, X.shape[1] - p_w + 1))
        for i in range(Y.shape[0]):
            for j in range(Y.shape[1]):
                if mode == "max":
                    Y[i, j] = X[i: i + p_h, j: j + p_w].max()
                elif mode == "avg":
                    Y[i, j] = X[i: i + p_h, j: j + p_w].mean()
        return Y

    o("pools", [pool2d(X, (2, 2)), pool2d(X, (2, 2), "avg")])
    Xg = X.clone().requires_grad_()
    pool2d(Xg, (2, 2)).sum().backward()
    o("pool grad", Xg.grad)

    def corr2d_multi_in_out(X, K):
        return torch.stack([sum(corr2d(x, k) for x, k in zip(X, k_)) for k_ in K], 0)

    Xm = torch.stack([X, X + 1])
    Km = torch.stack([torch.stack([K, K + 1]), torch.stack([K + 1, K + 2])])
    o("multi in out", [Km.shape, corr2d_multi_in_out(Xm, Km)])


@program
def tensor_from_mixed_nested_lists_and_scalars(torch, o):
    o("int float", torch.tensor([[1, 2.0], [3, 4]]))
    o("bool int float", torch.tensor([[True, 2], [3.5, False]]))
    o("bool int", torch.tensor([[True, 0], [1, False]]))
    o("nested tuples", torch.tensor(((1, 2), (3, 4))))
    o("list of 0-d tensors", torch.tensor([torch.tensor(1.5), torch.tensor(2.5)]))
    o("list of 1-elem tensors", torch.tensor([torch.tensor([1]), torch.tensor([2])]))
    o("mixed tensor and float", torch.tensor([torch.tensor(1), 2.5]))
    o("numpy scalars", torch.tensor([np.float32(1.5), np.int64(2)]))
    o("numpy float64 scalar", torch.tensor(np.float64(2.5)))
    o("numpy array float64", torch.tensor(np.array([1.0, 2.0])))
    o("numpy int32", torch.tensor(np.array([1, 2], dtype=np.int32)))
    o("empty nested", torch.tensor([[], []]))
    o("deep", torch.tensor([[[1], [2]], [[3], [4]]]).shape)
    o("large int", torch.tensor([2 ** 40, 1]))
    o("from range", torch.tensor(range(4)))
    o("float from int dtype", torch.tensor([1, 2], dtype=torch.float64))
    o("int from float dtype", torch.tensor([1.7, -2.7], dtype=torch.int64))
    o("bool dtype", torch.tensor([0.0, 2.0], dtype=torch.bool))
    o("shape arithmetic", [torch.zeros(2, 3, 4).shape[1:], torch.zeros(2, 3).shape + (5,),
                           torch.zeros(2, 3).shape[0] * torch.zeros(2, 3).shape[1], torch.zeros(2, 3).shape == (2, 3),
                           list(torch.zeros(2, 3).shape), torch.zeros(2, 3).size(-1), torch.zeros(2, 3).numel()])
    o.raises("too large", lambda: torch.tensor([2 ** 64]), "Overflow when unpacking long")
    o.raises("dict", lambda: torch.tensor({"a": 1}), "Could not infer dtype of dict")


@program(rtol=1e-5, atol=1e-6)
def nanogpt_self_attention_head(torch, o):
    F = torch.nn.functional
    B, T, C = 2, 4, 6
    x = (torch.arange(B * T * C, dtype=torch.float32).view(B, T, C) % 7 - 3) / 3
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T))
    wei = wei.masked_fill(tril == 0, float('-inf'))
    o("masked", wei)
    wei = F.softmax(wei, dim=-1)
    o("averaging weights", wei)
    o("bag of words", [wei @ x, (wei @ x).shape])
    xbow = torch.zeros((B, T, C))
    for b in range(B):
        for t in range(T):
            xbow[b, t] = torch.mean(x[b, :t + 1], 0)
    o("loop equals matmul", torch.allclose(xbow, wei @ x))
    head_size = 3
    key = torch.nn.Linear(C, head_size, bias=False)
    query = torch.nn.Linear(C, head_size, bias=False)
    value = torch.nn.Linear(C, head_size, bias=False)
    with torch.no_grad():
        key.weight.copy_(torch.linspace(-0.5, 0.5, 18).view(3, 6))
        query.weight.copy_(torch.linspace(0.4, -0.3, 18).view(3, 6))
        value.weight.copy_(torch.linspace(-0.2, 0.6, 18).view(3, 6))
    ln = torch.nn.LayerNorm(C)
    xn = ln(x.requires_grad_())
    k, q, v = key(xn), query(xn), value(xn)
    att = q @ k.transpose(-2, -1) * head_size ** -0.5
    att = att.masked_fill(tril[:T, :T] == 0, float('-inf'))
    att = F.softmax(att, dim=-1)
    out = att @ v
    o("att", [att, out.shape, att.grad_fn.name()])
    (out ** 2).sum().backward()
    o("grads", [x.grad, key.weight.grad, query.weight.grad, value.weight.grad, ln.weight.grad])
    o("rows sum to one", att.sum(-1))


@program(rtol=1e-5, atol=1e-6)
def word2vec_skipgram_negative_sampling(torch, o):
    F = torch.nn.functional

    class SkipGram(torch.nn.Module):
        def __init__(self, vocab_size, dim):
            super().__init__()
            self.center = torch.nn.Embedding(vocab_size, dim)
            self.context = torch.nn.Embedding(vocab_size, dim)

        def forward(self, center, context, negatives):
            u = self.center(center)
            v = self.context(context)
            n = self.context(negatives)
            pos = F.logsigmoid((u * v).sum(dim=1))
            neg = F.logsigmoid(-torch.bmm(n, u.unsqueeze(2)).squeeze(2)).sum(dim=1)
            return -(pos + neg).mean()

    model = SkipGram(6, 3)
    with torch.no_grad():
        model.center.weight.copy_(torch.linspace(-1, 1, 18).view(6, 3))
        model.context.weight.copy_(torch.linspace(1, -1, 18).view(6, 3) * 0.5)
    o("model", repr(model))
    center = torch.tensor([0, 1, 2, 3])
    context = torch.tensor([1, 2, 3, 4])
    negatives = torch.tensor([[5, 4], [0, 5], [1, 0], [2, 5]])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(5):
        optimizer.zero_grad()
        loss = model(center, context, negatives)
        loss.backward()
        optimizer.step()
        o(f"loss {step}", round(loss.item(), 5))
    o("embeddings", [model.center.weight, model.context.weight])
    emb = model.center.weight.detach()
    sims = F.cosine_similarity(emb[0].unsqueeze(0), emb, dim=1)
    o("most similar", [sims, sims.topk(3).indices])
    normed = F.normalize(emb, dim=1)
    o("similarity matrix", normed @ normed.T)


@program(rtol=1e-5, atol=1e-6)
def d2l_linear_regression_concise(torch, o):
    data = torch.utils.data
    nn = torch.nn
    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features = torch.stack([torch.linspace(-1, 1, 12), torch.sin(torch.arange(12.0))], 1)
    labels = (features @ true_w + true_b).reshape(-1, 1)

    def load_array(data_arrays, batch_size, is_train=True):
        dataset = data.TensorDataset(*data_arrays)
        return data.DataLoader(dataset, batch_size, shuffle=is_train)

    data_iter = load_array((features, labels), 4, is_train=False)
    o("first batch", next(iter(data_iter)))
    net = nn.Sequential(nn.Linear(2, 1))
    net[0].weight.data.fill_(0.01)
    net[0].bias.data.fill_(0)
    loss = nn.MSELoss()
    trainer = torch.optim.SGD(net.parameters(), lr=0.1)
    for epoch in range(3):
        for X, y in data_iter:
            l = loss(net(X), y)
            trainer.zero_grad()
            l.backward()
            trainer.step()
        l = loss(net(features), labels)
        o(f"epoch {epoch + 1}", f'epoch {epoch + 1}, loss {l:.4f}')
    w = net[0].weight.data
    o("error in w", true_w - w.reshape(true_w.shape))
    b = net[0].bias.data
    o("error in b", true_b - b)
    o("huber", nn.HuberLoss()(net(features), labels))
    o("shuffled epoch shapes", [X.shape for X, _ in load_array((features, labels), 5)])


@program(rtol=1e-5, atol=1e-6)
def d2l_rnn_from_scratch(torch, o):
    F = torch.nn.functional
    vocab_size, num_hiddens = 5, 4
    X = torch.arange(10).reshape((2, 5)) % vocab_size
    o("one-hot shape", F.one_hot(X.T, vocab_size).shape)

    def get_params():
        W_xh = torch.linspace(-0.3, 0.3, vocab_size * num_hiddens).reshape(vocab_size, num_hiddens)
        W_hh = torch.linspace(0.2, -0.2, num_hiddens * num_hiddens).reshape(num_hiddens, num_hiddens)
        b_h = torch.zeros(num_hiddens)
        W_hq = torch.linspace(-0.5, 0.5, num_hiddens * vocab_size).reshape(num_hiddens, vocab_size)
        b_q = torch.zeros(vocab_size)
        params = [W_xh, W_hh, b_h, W_hq, b_q]
        for param in params:
            param.requires_grad_(True)
        return params

    def init_rnn_state(batch_size, num_hiddens):
        return (torch.zeros((batch_size, num_hiddens)),)

    def rnn(inputs, state, params):
        W_xh, W_hh, b_h, W_hq, b_q = params
        H, = state
        outputs = []
        for X in inputs:
            H = torch.tanh(torch.mm(X, W_xh) + torch.mm(H, W_hh) + b_h)
            Y = torch.mm(H, W_hq) + b_q
            outputs.append(Y)
        return torch.cat(outputs, dim=0), (H,)

    def grad_clipping(params, theta):
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm
        return norm

    params = get_params()
    state = init_rnn_state(X.shape[0], num_hiddens)
    Y, new_state = rnn(F.one_hot(X.T, vocab_size).type(torch.float32), state, params)
    o("shapes", [Y.shape, len(new_state), new_state[0].shape])
    targets = (X + 1) % vocab_size
    for step in range(4):
        state = init_rnn_state(X.shape[0], num_hiddens)
        y_hat, state = rnn(F.one_hot(X.T, vocab_size).float(), state, params)
        y = targets.T.reshape(-1)
        l = F.cross_entropy(y_hat, y.long()).mean()
        for p in params:
            p.grad = None
        l.backward()
        norm = grad_clipping(params, 0.5)
        with torch.no_grad():
            for p in params:
                p -= 1.0 * p.grad
        o(f"step {step}", [l, norm, torch.exp(l).item()])
    o("params", params)
    prefix_outputs = [0]
    state = init_rnn_state(1, num_hiddens)
    for _ in range(6):
        inp = torch.tensor([prefix_outputs[-1]]).reshape((1, 1))
        out, state = rnn(F.one_hot(inp.T, vocab_size).float(), state, params)
        prefix_outputs.append(int(out.argmax(dim=1).reshape(1)))
    o("greedy decode", prefix_outputs)


@program(rtol=1e-5, atol=1e-6)
def makemore_mlp_with_nn_modules(torch, o):
    nn = torch.nn
    vocab, block, emb_dim, hidden = 6, 3, 2, 5
    model = nn.Sequential(
        nn.Embedding(vocab, emb_dim), nn.Flatten(), nn.Linear(block * emb_dim, hidden, bias=False),
        nn.BatchNorm1d(hidden), nn.Tanh(), nn.Linear(hidden, vocab))
    with torch.no_grad():
        model[0].weight.copy_(torch.linspace(-1, 1, vocab * emb_dim).view(vocab, emb_dim))
        model[2].weight.copy_(torch.linspace(-0.5, 0.5, hidden * block * emb_dim).view(hidden, block * emb_dim))
        model[5].weight.copy_(torch.linspace(0.3, -0.3, vocab * hidden).view(vocab, hidden))
        model[5].bias.zero_()
        model[-1].weight *= 0.1
    o("model", repr(model))
    o("n params", sum(p.nelement() for p in model.parameters()))
    o("param shapes", [(n, p.shape) for n, p in model.named_parameters()])
    o("buffers", [n for n, _ in model.named_buffers()])
    Xtr = torch.tensor([[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 0, 5], [0, 5, 1]])
    Ytr = torch.tensor([2, 3, 4, 0, 1, 0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(6):
        logits = model(Xtr)
        loss = torch.nn.functional.cross_entropy(logits, Ytr)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 2 == 0:
            o(f"{i:7d}", f"{i:7d}/{6:7d}: {loss.item():.4f}")
    o("running stats", [model[3].running_mean, model[3].running_var, model[3].num_batches_tracked])
    model.eval()
    with torch.no_grad():
        probs = torch.softmax(model(Xtr[:2]), dim=1)
    o("eval probs", probs)
    o("sample argmax", probs.argmax(1).tolist())
    o("state_dict", list(model.state_dict().keys()))


@program
def keepdim_standardization_clamp_where_with_tensors(torch, o):
    X = torch.tensor([[1.0, 200.0, 0.5], [2.0, 180.0, 0.1], [3.0, 260.0, 0.9], [4.0, 220.0, 0.3]])
    mean = X.mean(dim=0, keepdim=True)
    std = X.std(dim=0, keepdim=True)
    Z = (X - mean) / std
    o("standardized", [Z, Z.mean(0), Z.std(0)])
    o("row normalized", X / X.sum(dim=1, keepdim=True))
    o("without keepdim error", (X.sum(1)).shape)
    o.raises("keepdim mistake", lambda: X / X.sum(dim=1), "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1")
    o("minmax", (X - X.min(0).values) / (X.max(0).values - X.min(0).values))
    lo = torch.tensor([1.5, 190.0, 0.2])
    hi = torch.tensor([3.5, 250.0, 0.8])
    x = X.clone().requires_grad_()
    c = torch.clamp(x, min=lo, max=hi)
    c.sum().backward()
    o("clamp tensors", [c, x.grad])
    o("clamp only min tensor", X.clamp(min=lo))
    o("torch.where scalar", torch.where(X > 2, X, 0.0))
    o("torch.where tensors", torch.where(X > mean, X - mean, mean - X))
    o("where int/float", torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([0.5, 1.5])))
    o("where scalar both", torch.where(X[:, 0] > 2, 1.0, -1.0))
    y = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    r = torch.where(y > 0, y ** 2, torch.zeros_like(y))
    r.sum().backward()
    o("where grad", [r, y.grad])
    o("nan_to_num like", torch.where(torch.isnan(torch.tensor([1.0, float('nan')])), torch.tensor(0.0), torch.tensor([1.0, float('nan')])))


@program
def accuracy_integer_and_bool_arithmetic(torch, o):
    preds = torch.tensor([1, 0, 2, 2, 1])
    y = torch.tensor([1, 1, 2, 0, 1])
    eq = preds == y
    o("eq", [eq, eq.dtype, eq.sum(), eq.sum().dtype, eq.sum().item()])
    o("float mean", [eq.float().mean(), eq.double().mean(), eq.float().mean().item()])
    o("bool arithmetic", [eq + eq, eq * 2, eq.int(), eq.long().sum(), torch.sum(eq), eq.to(torch.float32) * 100])
    o("tensor / int", [eq.sum() / len(y), eq.sum() * 100 / len(y), eq.sum() // 2])
    o("int / tensor", [1 / (eq.sum() + 1), 10 - eq.sum()])
    o("negation", [~eq, eq.logical_not(), (~eq).sum(), (~eq).nonzero(), (~eq).nonzero().squeeze()])
    o("any all", [eq.any(), eq.all(), eq.any().item(), bool(eq.any())])
    o("mask counts per class", [((preds == c) & (y == c)).sum().item() for c in range(3)])
    cm = torch.zeros(3, 3, dtype=torch.int64)
    for t, p in zip(y, preds):
        cm[t, p] += 1
    o("confusion", [cm, cm.diag(), cm.diag().float() / cm.sum(1).float(), cm.sum(0)])
    o("bool plus int", [torch.tensor(True) + 1, torch.tensor([True, False]) + torch.tensor([1, 1])])
    o("int true div", [torch.tensor([3, 4]) / 2, torch.tensor([3, 4]) / torch.tensor([2, 2])])
    o("percent string", f"Accuracy: {100 * eq.float().mean():.2f}%")
    o("percent item string", f"{eq.sum().item()}/{len(y)} ({100. * eq.sum().item() / len(y):.0f}%)")
    o.raises("bool subtract", lambda: eq - eq, "Subtraction, the `-` operator, with two bool tensors is not supported")
    o.raises("bool negate", lambda: -eq, "Negation, the `-` operator, on a bool tensor is not supported")


@program
def formatting_and_printing_scalars(torch, o):
    loss = torch.tensor(1.234567, requires_grad=True) * 2
    o("fstring item", f"{loss.item():.4f}")
    o("fstring tensor", f"{loss:.3f}")
    o("format e", f"{torch.tensor(0.000123):.2e}")
    o("format g", "{:g}".format(torch.tensor(2.5)))
    o("percent", "%.2f" % torch.tensor(3.14159))
    o("percent one-element", "%.2f" % torch.tensor([3.14159]))
    o("str repr", [str(loss), repr(torch.tensor(2.5)), str(torch.tensor([1.5]))])
    o("round item", [round(loss.item(), 2), round(float(loss), 1), int(torch.tensor(3.9)), float(torch.tensor([2]))])
    o("int format", f"{torch.tensor(7):03d}")
    o.raises("one-element format", lambda: f"{torch.tensor([1.0]):.3f}", "unsupported format string passed to Tensor.__format__")
    o("print list", str([torch.tensor(1.0), torch.tensor(2)]))
    o("tolist", [torch.tensor([[1.5, 2.0]]).tolist(), torch.tensor(3).tolist(), torch.tensor([True]).tolist()])
    o("item types", [type(torch.tensor(1).item()).__name__, type(torch.tensor(1.0).item()).__name__,
                     type(torch.tensor(True).item()).__name__, type(torch.tensor(1, dtype=torch.int32).item()).__name__])
    o("len and iteration", [len(torch.zeros(3, 2)), [t.shape for t in torch.zeros(2, 3)]])
    o.raises("len of scalar", lambda: len(torch.tensor(1.0)), "len() of a 0-d tensor")
    o.raises("iterate scalar", lambda: list(torch.tensor(1.0)), "iteration over a 0-d tensor")
    o("hex index", [torch.arange(5)[torch.tensor(2)], torch.arange(5)[torch.tensor(2)].shape])
    o("numbers in range", list(range(torch.tensor(3))))


@program
def printing_attention_masks_and_new_modules(torch, o):
    T = 4
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T)).masked_fill(tril == 0, float('-inf'))
    o("masked str", str(wei))
    o("softmax str", str(torch.softmax(wei, dim=-1)))
    o("ninf nan", str(torch.tensor([float('-inf'), float('nan'), 1.5, -2.0])))
    o("big", str(torch.tensor([1e-8, 1.0, 1e8])))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(4)
            self.emb = torch.nn.Embedding(10, 4, padding_idx=0)
            self.ffwd = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.GELU(), torch.nn.Linear(16, 4),
                                            torch.nn.Dropout(0.1))
            self.bn = torch.nn.BatchNorm1d(4, momentum=0.01)

        def forward(self, idx):
            return self.ffwd(self.ln(self.emb(idx)))

    o("block", repr(Block()))
    o("acts", repr(torch.nn.Sequential(torch.nn.ReLU6(), torch.nn.Hardtanh(-2, 2), torch.nn.SELU(inplace=True),
                                       torch.nn.CELU(0.5), torch.nn.Softmin(dim=-1), torch.nn.Mish())))
    o("losses", repr([torch.nn.KLDivLoss(reduction="batchmean"), torch.nn.MultiMarginLoss(), torch.nn.CosineSimilarity(dim=0)]))
    ln = torch.nn.LayerNorm(3)
    o("ln out", str(ln(torch.tensor([[1.0, 2.0, 3.0]]))))
    bn = torch.nn.BatchNorm1d(2)
    o("bn out", str(bn(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))))
    emb = torch.nn.Embedding(3, 2)
    with torch.no_grad():
        emb.weight.fill_(0.5)
    o("emb out", str(emb(torch.tensor([0, 2]))))
    o("emb weight", str(emb.weight))


@program(rtol=1e-5, atol=1e-6)
def training_loop_bookkeeping_idioms(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    norms = []
    for epoch in range(4):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5))
        optimizer.step()
        losses.append(loss)
        for g in optimizer.param_groups:
            g['lr'] *= 0.5
    o("stacked mean", torch.stack(losses).mean())
    o("sum over len", sum(losses) / len(losses))
    o("from floats", torch.tensor([l.item() for l in losses]).mean())
    o("norms", norms)
    o("lr", [g['lr'] for g in optimizer.param_groups])
    o("momentum buffers", [optimizer.state[p]['momentum_buffer'] for p in model.parameters()])
    o("best epoch", int(torch.stack(losses).argmin()))
    o("detached list", [l.detach() for l in losses][-1])
    o.raises("cat empty", lambda: torch.cat([]), "expected a non-empty list of Tensors")
    o.raises("stack empty", lambda: torch.stack([]), "stack expects a non-empty TensorList")
    with torch.no_grad():
        eval_loss = torch.nn.functional.mse_loss(model(x), y)
    o.raises("backward of no_grad loss", lambda: eval_loss.backward(), "element 0 of tensors does not require grad and does not have a grad_fn")
    arr = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = torch.from_numpy(arr).float()
    o("from_numpy float", [t, t.dtype])
    shared = torch.from_numpy(arr)
    arr[0, 0] = 10.0
    o("shared", shared)
    p = torch.nn.Parameter(torch.ones(2))
    (p * 3).sum().backward()
    p.grad.data.zero_()
    o("grad data zero", p.grad)


@program
def seeded_randomness_structure(torch, o):
    torch.manual_seed(42)
    a = torch.randn(3, 4)
    torch.manual_seed(42)
    b = torch.randn(3, 4)
    o("same seed same values", torch.equal(a, b))
    o("randint range", [torch.randint(0, 5, (100,)).min().item() >= 0, torch.randint(0, 5, (100,)).max().item() < 5,
                        torch.randint(5, (3,)).dtype, torch.randint(0, 5, size=(2, 2)).shape])
    perm = torch.randperm(10)
    o("randperm", [perm.sort().values, perm.dtype])
    o("rand range", [bool((torch.rand(50) < 1).all()), bool((torch.rand(50) >= 0).all())])
    o("normal shapes", [torch.normal(0.0, 1.0, size=(2, 3)).shape, torch.normal(torch.zeros(4), torch.ones(4)).shape,
                        torch.normal(mean=torch.zeros(2, 2), std=0.1).shape])
    g = torch.Generator().manual_seed(0)
    o("generator", [torch.randn(2, generator=g).shape, torch.rand(3, generator=g).dtype])
    w = torch.empty(3, 5)
    torch.nn.init.xavier_uniform_(w)
    bound = (6 / (3 + 5)) ** 0.5
    o("xavier bound", bool((w.abs() <= bound).all()))
    torch.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    o("kaiming shape", w.shape)
    idx = torch.multinomial(torch.tensor([0.0, 1.0, 0.0]), num_samples=5, replacement=True)
    o("multinomial deterministic", idx)
    o("bernoulli extremes", torch.bernoulli(torch.tensor([0.0, 1.0, 1.0])))
    drop = torch.nn.Dropout(p=0.5)
    out = drop(torch.ones(1000))
    o("dropout values", sorted(set(out.tolist())))
    o("dropout eval", torch.nn.Dropout(0.5).eval()(torch.ones(3)))
    o("dropout p=1", torch.nn.functional.dropout(torch.ones(3), p=1.0))


def _copy_conv_weights(torch, model):
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            n = p.numel()
            p.copy_(torch.linspace(-0.5, 0.5, n).view(p.shape) * (0.9 ** i))


@program(rtol=1e-4, atol=1e-6)
def d2l_lenet_training(torch, o):
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(1, 2, kernel_size=3, padding=1), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(2, 4, kernel_size=2), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(4, 5), nn.Sigmoid(),
        nn.Linear(5, 3))
    _copy_conv_weights(torch, net)
    X = (torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) % 5) / 5
    shapes = []
    out = X
    for layer in net:
        out = layer(out)
        shapes.append(f"{layer.__class__.__name__} output shape:\t{out.shape}")
    o("shapes", shapes)
    o("net", repr(net))
    y = torch.tensor([0, 2])
    optimizer = torch.optim.SGD(net.parameters(), lr=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        optimizer.zero_grad()
        l = loss_fn(net(X), y)
        l.backward()
        optimizer.step()
        o(f"loss {epoch}", l)
    o("grads", [p.grad for p in net.parameters()])
    o("grad_fn", [net[0](X).grad_fn.name(), net[2](net[0](X)).grad_fn.name()])


@program(rtol=1e-4, atol=1e-6)
def cnn_relu_maxpool_classifier(torch, o):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
            self.conv2 = nn.Conv2d(4, 4, 3, stride=1, padding=1, bias=False)
            self.pool = nn.MaxPool2d(2, 2)
            self.gap = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = F.relu(self.conv2(x))
            x = self.gap(x)
            x = torch.flatten(x, 1)
            return self.fc(x)

    net = Net()
    _copy_conv_weights(torch, net)
    o("repr", repr(net))
    x = torch.cos(torch.arange(2 * 3 * 4 * 4, dtype=torch.float32)).view(2, 3, 4, 4)
    x.requires_grad_()
    out = net(x)
    o("out", out)
    loss = F.cross_entropy(out, torch.tensor([1, 0]))
    loss.backward()
    o("input grad", x.grad)
    o("param grads", [p.grad for p in net.parameters()])
    pooled, indices = F.max_pool2d(x.detach(), 2, return_indices=True)
    o("pool indices", [pooled, indices])
    o("unbatched", net.conv1(x.detach()[0]).shape)
    o("functional conv", F.conv2d(x.detach(), net.conv1.weight.detach(), stride=2).shape)
    o("unfold", F.unfold(x.detach(), kernel_size=2, stride=2).shape)
    o.raises("wrong channels", lambda: net.conv1(torch.ones(1, 1, 4, 4)), "expected input[1, 1, 4, 4] to have 3 channels, but got 1 channels instead")
    o.raises("kernel too big", lambda: F.conv2d(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3)), "Kernel size can't be greater than actual input size")
    o.raises("2d input", lambda: net.conv1(torch.ones(4, 4)), "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [4, 4]")
    o.raises("flatten then fc mismatch", lambda: net.fc(torch.ones(2, 5)), "mat1 and mat2 shapes cannot be multiplied (2x5 and 4x2)")


@program(rtol=1e-4, atol=1e-6)
def lstm_sequence_classifier(torch, o):
    nn = torch.nn

    class SentimentLSTM(nn.Module):
        def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
            self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
            self.fc = nn.Linear(hidden_dim, num_classes)

        def forward(self, x):
            embedded = self.embedding(x)
            output, (hidden, cell) = self.lstm(embedded)
            return self.fc(hidden[-1])

    model = SentimentLSTM(8, 3, 4, 2)
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            p.copy_(torch.linspace(-0.6, 0.6, p.numel()).view(p.shape) * (1 - 0.1 * i))
    o("repr", repr(model))
    o("names", [(n, p.shape) for n, p in model.named_parameters()])
    x = torch.tensor([[1, 4, 2, 0], [3, 3, 5, 7]])
    y = torch.tensor([0, 1])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(3):
        optimizer.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        o(f"loss {step}", loss)
    o("grads", [p.grad for p in model.parameters()])
    out, (h, c) = model.lstm(model.embedding(x))
    o("shapes", [out.shape, h.shape, c.shape, torch.allclose(out[:, -1], h[-1])])


@program(rtol=1e-4, atol=1e-6)
def rnn_and_gru_cells_by_hand(torch, o):
    nn = torch.nn
    rnn = nn.RNN(input_size=2, hidden_size=3, num_layers=2)
    gru = nn.GRU(2, 3, bidirectional=True)
    cell = nn.GRUCell(2, 3)
    for module in (rnn, gru, cell):
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view(p.shape))
    o("reprs", [repr(rnn), repr(gru), repr(cell)])
    seq = torch.sin(torch.arange(10.0)).view(5, 1, 2)
    out, h = rnn(seq)
    o("rnn", [out, h])
    h0 = torch.zeros(2, 1, 3)
    out, h = gru(seq, h0)
    o("gru", [out, h, out.shape])
    hx = torch.zeros(1, 3)
    outputs = []
    for t in range(seq.shape[0]):
        hx = cell(seq[t], hx)
        outputs.append(hx)
    stacked = torch.stack(outputs)
    o("cell loop", stacked)
    o("cell equals layer forward half", torch.allclose(stacked.squeeze(1), out[:, 0, :3], atol=1e-6))
    stacked.sum().backward()
    o("cell grads", [p.grad for p in cell.parameters()])
    o.raises("wrong input size", lambda: rnn(torch.ones(5, 1, 3)), "input.size(-1) must be equal to input_size. Expected 2, got 3")
    o.raises("wrong hidden", lambda: gru(seq, torch.zeros(1, 1, 3)), "Expected hidden size (2, 1, 3), got [1, 1, 3]")


@program(rtol=1e-4, atol=1e-6)
def cnn_with_batchnorm2d(torch, o):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.BatchNorm2d(2), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 2))
    _copy_conv_weights(torch, model)
    o("repr", repr(model))
    x = torch.cos(torch.arange(2 * 16.0)).view(2, 1, 4, 4)
    out = model(x)
    out.sum().backward()
    o("out", out)
    o("grads", [p.grad for p in model.parameters()])
    o("bn stats", [model[1].running_mean, model[1].running_var, model[1].num_batches_tracked])
    model.eval()
    o("eval", model(x))
    o.raises("bn2d on 2d", lambda: nn.BatchNorm2d(2)(torch.ones(3, 2)), "expected 4D input (got 2D input)")


@program(rtol=1e-5, atol=1e-6)
def time_series_windows_ema_and_plateau(torch, o):
    series = torch.sin(torch.arange(12.0) / 2)
    windows = series.unfold(0, 4, 1)
    X, y = windows[:, :3], windows[:, 3:]
    o("windows", [windows.shape, X[:2], y[:2]])
    model = torch.nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, -0.2, 0.3]]))
        model.bias.zero_()
    ema = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)
    for epoch in range(6):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema, model.parameters()):
                e.lerp_(p, 0.1)
        scheduler.step(loss.item() if epoch != 3 else 10.0)
        o(f"epoch {epoch}", [loss, optimizer.param_groups[0]["lr"], scheduler.num_bad_epochs])
    o("ema", ema)
    o("lerp", [torch.lerp(torch.zeros(3), torch.ones(3), 0.25), torch.lerp(torch.zeros(2), torch.ones(2), torch.tensor([0.1, 0.9]))])
    angles = torch.atan2(torch.tensor([1.0, -1.0, 0.0]), torch.tensor([0.0, -1.0, -1.0]))
    o("atan2", [angles, angles * 180 / torch.pi])
    o("constants", [torch.pi, torch.e, torch.inf, -torch.inf, torch.tensor([1.0, 2.0])[:, torch.newaxis].shape,
                    torch.zeros(2).masked_fill(torch.tensor([True, False]), -torch.inf)])
    seqs = [torch.tensor([3, 1, 4]), torch.tensor([1, 5]), torch.tensor([9])]
    padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    lengths = torch.tensor([len(s) for s in seqs])
    mask = torch.arange(padded.shape[1])[None, :] < lengths[:, None]
    o("padded", [padded, mask, padded.float().masked_fill(~mask, float("nan"))])
    o("pad", [torch.nn.functional.pad(torch.ones(2, 2), (1, 1)), torch.nn.functional.pad(torch.arange(3), (2, 0), value=-1)])
    idx = torch.triu_indices(3, 3, offset=1)
    sim = torch.arange(9.0).view(3, 3)
    o("upper pairs", [idx, sim[idx[0], idx[1]]])
    o("nan_to_num", torch.nan_to_num(torch.log(torch.tensor([0.0, 1.0, -1.0])), nan=0.0, neginf=-100.0))
    o("movedim", [torch.zeros(2, 3, 4).movedim(-1, 0).shape, torch.zeros(2, 3).swapaxes(0, 1).shape, torch.zeros(2, 3).ravel().shape])


@program(rtol=1e-5, atol=1e-6)
def parameter_list_and_dict_models(torch, o):
    nn = torch.nn

    class PolyModel(nn.Module):
        def __init__(self, degree):
            super().__init__()
            self.coeffs = nn.ParameterList([nn.Parameter(torch.tensor(0.1 * (i + 1))) for i in range(degree + 1)])
            self.extra = nn.ParameterDict({"scale": nn.Parameter(torch.ones(1)), "shift": nn.Parameter(torch.zeros(1))})

        def forward(self, x):
            y = sum(c * x ** i for i, c in enumerate(self.coeffs))
            return y * self.extra["scale"] + self.extra["shift"]

    model = PolyModel(2)
    o("repr", repr(model))
    o("named", [(n, p.shape) for n, p in model.named_parameters()])
    o("state keys", list(model.state_dict().keys()))
    x = torch.linspace(-1, 1, 5)
    y = 1 + 2 * x - x ** 2
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for step in range(5):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    o("loss", loss)
    o("coeffs", list(model.coeffs))
    o("dict", [(k, v) for k, v in model.extra.items()])
    model.coeffs.append(torch.zeros(()))
    o("appended", [len(model.coeffs), type(model.coeffs[3]).__name__, model.coeffs[3].requires_grad,
                   len(list(model.parameters()))])
    o("contains", ["scale" in model.extra, list(model.extra.keys()), len(model.extra)])
    o("list repr", repr(nn.ParameterList([nn.Parameter(torch.ones(2, 3)), nn.Parameter(torch.zeros(1, dtype=torch.float64))])))


@program(rtol=1e-5, atol=1e-6)
def checkpoint_copy_and_dtype_of_new_modules(torch, o):
    import copy
    import io

    nn = torch.nn
    model = nn.Sequential(nn.Embedding(5, 3), nn.LSTM(3, 2, batch_first=True))
    head = nn.Sequential(nn.Conv2d(1, 2, 2), nn.BatchNorm2d(2), nn.LayerNorm([2, 2, 2]))
    for module in (model, head):
        with torch.no_grad():
            for i, p in enumerate(module.parameters()):
                p.copy_(torch.linspace(-0.3, 0.3, p.numel()).view(p.shape) + 0.01 * i)
    head(torch.arange(18.0).view(2, 1, 3, 3) / 10)
    state = head.state_dict()
    o("keys", list(state.keys()))
    o("num_batches_tracked", [state["1.num_batches_tracked"], state["1.running_mean"]])
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    fresh = nn.Sequential(nn.Conv2d(1, 2, 2), nn.BatchNorm2d(2), nn.LayerNorm([2, 2, 2]))
    result = fresh.load_state_dict(loaded)
    o("load result", [list(result.missing_keys), list(result.unexpected_keys)])
    fresh.eval()
    head.eval()
    x = torch.arange(9.0).view(1, 1, 3, 3) / 9
    o("same eval output", torch.allclose(fresh(x), head(x)))
    twin = copy.deepcopy(model)
    idx = torch.tensor([[0, 3, 4]])
    out, (h, c) = twin[1](twin[0](idx))
    o("deepcopy lstm", [out, h, c])
    o("deepcopy independent", twin[0].weight is not model[0].weight)
    model.double()
    o("double dtypes", [p.dtype for p in model.parameters()])
    head.double()
    o("buffers after double", [(n, b.dtype) for n, b in head.named_buffers()])
    o("double output", head(x.double()).dtype)
    lstm_state = model[1].state_dict()
    o("lstm state", [(k, v.shape, v.dtype) for k, v in lstm_state.items()])
    o.raises("strict mismatch", lambda: nn.LSTM(3, 4).load_state_dict(lstm_state), "size mismatch for weight_ih_l0")


@program(rtol=1e-5, atol=1e-6)
def contrastive_loss_and_fused_attention(torch, o):
    F = torch.nn.functional
    z = torch.tensor([[1.0, 0.2, -0.5], [0.9, 0.1, -0.4], [-0.3, 1.0, 0.2], [-0.2, 0.8, 0.4]], requires_grad=True)
    temperature = 0.5
    zn = F.normalize(z, dim=1)
    sim = zn @ zn.T / temperature
    sim = sim.clone().fill_diagonal_(float("-inf"))
    targets = torch.tensor([1, 0, 3, 2])
    loss = F.cross_entropy(sim, targets)
    loss.backward()
    o("nt-xent", [loss, z.grad])
    o("fill_diagonal", torch.zeros(3, 3).fill_diagonal_(1.0))
    B, T, C, n_head = 1, 4, 6, 2
    x = torch.sin(torch.arange(B * T * C, dtype=torch.float32)).view(B, T, C).requires_grad_()
    q, k, v = x, x * 0.5, x.flip(-1)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    manual = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
    manual = manual.masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0, float("-inf"))
    manual = F.softmax(manual, dim=-1) @ v
    o("sdpa equals manual", torch.allclose(y, manual, atol=1e-6))
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    y.sum().backward()
    o("sdpa", [y, x.grad])
    scores = torch.tensor([0.1, 0.5, 0.35, 0.9, 0.7, 0.2])
    o("quantiles", [torch.quantile(scores, 0.5), scores.quantile(torch.tensor([0.25, 0.75])),
                    torch.quantile(scores.view(2, 3), 0.5, dim=1), torch.median(scores)])
    threshold = torch.quantile(scores, 0.8)
    o("top 20%", (scores >= threshold).nonzero().flatten())


@program
def single_sample_statistics_warnings(torch, o):
    h = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    std = o.warns("std of one sample", lambda: h.std(0, keepdim=True), "degrees of freedom is <= 0")
    o("std", std)
    o.warns("var", lambda: torch.tensor([3.0]).var(), "var(): degrees of freedom is <= 0")
    o.warns("std_mean", lambda: torch.std_mean(torch.tensor([3.0])), "std_mean(): degrees of freedom is <= 0")
    o.warns("biased is fine", lambda: h.var(0, unbiased=False))
    o.warns("batch of two", lambda: torch.tensor([[1.0], [2.0]]).std(0))
    normalized = (h - h.mean(0, keepdim=True)) / (h.var(0, keepdim=True, unbiased=False) + 1e-5).sqrt()
    normalized.sum().backward()
    o("normalized", [normalized, h.grad])
    o.raises("batchnorm one sample", lambda: torch.nn.BatchNorm1d(3)(h), "Expected more than 1 value per channel when training")
    bn = torch.nn.BatchNorm1d(3).eval()
    o("batchnorm eval one sample", bn(h))


@program
def saturated_sigmoid_printing_and_overflow(torch, o):
    logits = torch.tensor([-100.0, -90.0, -20.0, 0.0, 20.0, 100.0], requires_grad=True)
    probs = torch.sigmoid(logits)
    o("probs", probs)
    o("printed", str(probs))
    o("double", str(torch.sigmoid(logits.detach().double())))
    probs.sum().backward()
    o("grad", logits.grad)
    o("module", str(torch.nn.Sigmoid()(torch.tensor([[-88.5, 88.5]]))))
    o("bce saturated", torch.nn.functional.binary_cross_entropy(probs.detach(), torch.tensor([1.0, 0, 0, 1, 1, 0])))
    o.warns("overflow to inf", lambda: torch.tensor([1e40, -1e40]))
    o.warns("cast down", lambda: torch.tensor([1e300], dtype=torch.float64).float())
    o("inf values", [torch.tensor([1e40]), torch.tensor([1e300], dtype=torch.float64).float()])


@program
def d2l_builders_guide_blocks_and_parameters(torch, o):
    import io

    nn = torch.nn
    F = torch.nn.functional

    class MySequential(nn.Module):
        def __init__(self, *args):
            super().__init__()
            for idx, module in enumerate(args):
                self._modules[str(idx)] = module

        def forward(self, X):
            for block in self._modules.values():
                X = block(X)
            return X

    def init_constant(module):
        if type(module) == nn.Linear:
            nn.init.constant_(module.weight, 0.1)
            nn.init.zeros_(module.bias)

    X = torch.arange(8.0).reshape(2, 4) / 8
    net = MySequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    net.apply(init_constant)
    o("my sequential", [net(X), repr(net), [n for n, _ in net.named_parameters()]])

    def block1():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU())

    def block2():
        net = nn.Sequential()
        for i in range(2):
            net.add_module(f'block {i}', block1())
        return net

    rgnet = nn.Sequential(block2(), nn.Linear(4, 1))
    rgnet.apply(init_constant)
    o("rgnet", [repr(rgnet), rgnet(X), rgnet[0][1][0].bias.data])
    o("state", [(k, v.shape) for k, v in rgnet.state_dict().items()][:4])
    o("param access", [type(net._modules["2"].bias).__name__, net._modules["2"].bias.data, net._modules["2"].weight.grad is None])
    o("all params", [(name, param.shape) for name, param in net.named_parameters()])
    o("state_dict bias", net.state_dict()['2.bias'].data)

    def my_init(m):
        if type(m) == nn.Linear:
            nn.init.uniform_(m.weight, -10, 10)
            m.weight.data *= m.weight.data.abs() >= 5

    net.apply(my_init)
    w = net._modules["0"].weight
    o("my_init", bool(((w.abs() >= 5) | (w == 0)).all()))
    net._modules["0"].weight.data[:] += 1
    net._modules["0"].weight.data[0, 0] = 42
    o("edited", net._modules["0"].weight.data[0, 0])
    shared = nn.Linear(8, 8)
    tied = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), shared, nn.ReLU(), shared, nn.ReLU(), nn.Linear(8, 1))
    tied.apply(init_constant)
    tied[2].weight.data[0, 0] = 100
    o("tied", [bool((tied[2].weight.data[0] == tied[4].weight.data[0]).all()), len(list(tied.parameters())),
               len(tied.state_dict())])
    tied(X).sum().backward()
    o("tied grad", tied[2].weight.grad[0])

    class CenteredLayer(nn.Module):
        def forward(self, X):
            return X - X.mean()

    layer = CenteredLayer()
    o("centered", [layer(torch.tensor([1.0, 2, 3, 4, 5])), nn.Sequential(nn.Linear(4, 8), CenteredLayer())(X).mean().abs() < 1e-6])
    x = torch.arange(4)
    buffer = io.BytesIO()
    torch.save([x, torch.zeros(4)], buffer)
    buffer.seek(0)
    x2, y2 = torch.load(buffer)
    o("save list", [x2, y2])
    buffer = io.BytesIO()
    torch.save({'x': x, 'y': torch.zeros(4)}, buffer)
    buffer.seek(0)
    o("save dict", torch.load(buffer))
    clone = MySequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    clone.load_state_dict(net.state_dict())
    clone.eval()
    o("clone equal", bool((clone(X) == net(X)).all()))


@program(rtol=1e-4, atol=1e-6)
def text_cnn_conv1d_classifier(torch, o):
    nn = torch.nn
    F = torch.nn.functional

    class TextCNN(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_filters, kernel_sizes, num_classes):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim)
            self.convs = nn.ModuleList([nn.Conv1d(embed_dim, num_filters, k) for k in kernel_sizes])
            self.pool = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(num_filters * len(kernel_sizes), num_classes)

        def forward(self, x):
            emb = self.embedding(x).permute(0, 2, 1)
            pooled = [F.max_pool1d(F.relu(conv(emb)), conv(emb).shape[-1]).squeeze(-1) for conv in self.convs]
            averaged = [self.pool(F.relu(conv(emb))).squeeze(-1) for conv in self.convs]
            return self.fc(torch.cat(pooled, dim=1)) + 0.1 * self.fc(torch.cat(averaged, dim=1))

    model = TextCNN(10, 4, 3, [2, 3], 2)
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view(p.shape) * (1 - 0.05 * i))
    o("repr", repr(model))
    x = torch.tensor([[1, 5, 2, 7, 0, 3], [4, 4, 9, 1, 2, 8]])
    y = torch.tensor([1, 0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(3):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        o(f"loss {step}", loss)
    o("grads", [p.grad for p in model.parameters()])
    o("shapes", [model.convs[0](model.embedding(x).transpose(1, 2)).shape, nn.MaxPool1d(2)(torch.ones(1, 2, 5)).shape,
                 nn.AvgPool1d(3, stride=1)(torch.arange(5.0).view(1, 1, 5))])
    o.raises("conv1d channels", lambda: model.convs[0](torch.ones(1, 3, 6)), "expected input[1, 3, 6] to have 4 channels, but got 3 channels instead")


# ---- views and in-place (session 9) ----

@program
def view_used_after_its_base_changed_in_place(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v = y[0:1]
    y.mul_(3)
    v.sum().backward()
    o("reported example", [x.grad, _node_name(v.grad_fn), _node_name(v.grad_fn.next_functions[0][0])])
    views = {"select": lambda t: t[1], "view": lambda t: t.view(2, 1), "t": lambda t: t.unsqueeze(0).t(),
             "transpose": lambda t: t.view(2, 1).transpose(0, 1), "unsqueeze": lambda t: t.unsqueeze(0),
             "expand": lambda t: t.expand(3, 2), "narrow": lambda t: t.narrow(0, 1, 1),
             "view of a view": lambda t: t.view(2, 1)[1:]}
    for name, make in views.items():
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        v = make(y)
        y.mul_(3)
        (v * torch.arange(1.0, v.numel() + 1).view(v.shape)).sum().backward()
        o(name, [x.grad, _node_name(v.grad_fn)])


@program
def view_after_base_changed_autograd_grad_and_inplace(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 2
    v = y[1:]
    w = v[1:]
    before = (w * 5).sum()
    v.mul_(3)
    o("grads", list(torch.autograd.grad((w * w).sum(), [x, y], retain_graph=True)))
    o("used before the change", torch.autograd.grad(before, x, retain_graph=True))
    w.add_(x[:2])
    (y * torch.tensor([1.0, 10.0, 100.0, 1000.0])).sum().backward()
    o("in-place on the view", [x.grad, _node_name(w.grad_fn), _node_name(y.grad_fn)])
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    u = p[1:]
    with torch.no_grad():
        p.mul_(2)
    (u * 3).sum().backward()
    o("leaf changed under no_grad", [p.grad, _node_name(u.grad_fn)])


@program
def split_pieces_after_their_base_changed(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 2
    a, b = y.split(2)
    c, d = y.chunk(2)
    e = y.unbind()[3]
    y[0:1].mul_(2)
    for name, piece in (("split", b), ("chunk", c), ("unbind", e)):
        o.raises(name, lambda: (piece * 2).sum().backward(),
                 "is a view and its base or another view of its base has been modified inplace. This "
                 "view is the output of a function that returns multiple views.")
    o.raises("written", lambda: a.mul_(2), "Output 0 of Split is a view and is being modified inplace.")
    with torch.no_grad():
        v = y[1:]
    o.raises("no_grad view written", lambda: v.mul_(2),
             "A view was created in no_grad mode and is being modified inplace with grad mode enabled.")
    y.add_(1)
    o.raises("no_grad view used", lambda: (v * 2).sum().backward(),
             "A view was created in no_grad mode and its base or another view of its base has been "
             "modified inplace with grad mode enabled.")


@program
def modified_by_an_inplace_operation_words(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.tanh()
    y.add_(1)
    o.raises("output", lambda: y.sum().backward(),
             "[torch.FloatTensor [2]], which is output 0 of Tanh, is at version 1; expected version 0 "
             "instead. Hint: enable anomaly detection to find the operation that failed to compute its "
             "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
    a = torch.tensor([1.0, 2.0])
    z = x * a
    a.add_(1)
    o.raises("leaf", lambda: z.sum().backward(),
             "modified by an inplace operation: [torch.FloatTensor [2]] is at version 1; expected version 0 instead.")
    b = x * 1
    c = b[1:] * b[1:]
    b.mul_(2)
    o.raises("view", lambda: c.sum().backward(), "which is output 0 of AsStrided, is at version 1")


@program
def setitem_records_copy_slices(torch, o):
    names = []
    for key in (0, (slice(None), 1), (None, 0), (0, [0, 2]), [0, 1], (slice(None), [0, 2])):
        x = torch.ones(2, 3, requires_grad=True)
        y = x * 2
        y[key] = 0.0
        names.append(_node_name(y.grad_fn))
    o("names", names)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    p = torch.tensor([5.0, 6.0], dtype=torch.float64, requires_grad=True)
    y = x * x
    y[1:] = p * x[:2]
    y[0] = p[1]
    g = torch.autograd.grad((y * y).sum(), [x, p], create_graph=True)
    o("grads", list(g))
    o("second order", list(torch.autograd.grad(g[0].sum() + g[1].sum(), [x, p])))
    z = x * 1
    z[:] = 2.0
    o("whole tensor", [_node_name(z.grad_fn), z])


@program
def inplace_on_a_slice_of_a_non_leaf_names(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y[1:]
    z.add_(1)
    o("own write", [_node_name(z.grad_fn), _node_name(z.grad_fn.next_functions[0][0]), _node_name(y.grad_fn)])
    y.add_(1)
    o("base write", [_node_name(z.grad_fn), _node_name(z.grad_fn.next_functions[0][0])])
    (z * z).sum().backward()
    o("grad", x.grad)


# ---- optimizers, schedulers, norms (session 9) ----

@program
def adam_family_and_adadelta_train_a_classifier(torch, o):
    X = torch.tensor(X_DATA)
    target = torch.tensor([0, 1, 2, 1, 0, 2][:X.shape[0]] * (X.shape[0] // 6 + 1))[:X.shape[0]]
    for name, make in [("Adamax", lambda p: torch.optim.Adamax(p, lr=0.05)),
                       ("NAdam", lambda p: torch.optim.NAdam(p, lr=0.05, weight_decay=0.01)),
                       ("NAdamW", lambda p: torch.optim.NAdam(p, lr=0.05, weight_decay=0.1,
                                                              decoupled_weight_decay=True)),
                       ("RAdam", lambda p: torch.optim.RAdam(p, lr=0.05, betas=(0.9, 0.9))),
                       ("Adadelta", lambda p: torch.optim.Adadelta(p, maximize=False))]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1) / 3)
        opt = make(model.parameters())
        for step in range(6):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(X), target)
            loss.backward()
            opt.step()
        o(f"{name} loss", loss)
        o(f"{name} params", list(model.parameters()))
        o(f"{name} repr", repr(opt))
        o(f"{name} state keys", [list(v) for v in opt.state_dict()["state"].values()])


@program
def warmup_then_cosine_and_one_cycle(torch, o):
    S = torch.optim.lr_scheduler

    def rates(make, steps, opt_kind="sgd"):
        w = torch.nn.Parameter(torch.tensor([1.0]))
        opt = (torch.optim.SGD([w], lr=0.1, momentum=0.9) if opt_kind == "sgd"
               else torch.optim.Adam([w], lr=0.1))
        sched = make(opt)
        seen = []
        for _ in range(steps):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
            sched.step()
            group = opt.param_groups[0]
            seen.append([sched.get_last_lr()[0], group.get("momentum"), group.get("betas")])
        return seen, w

    o("warmup+cosine", rates(lambda opt: S.SequentialLR(
        opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(opt, T_max=5)],
        milestones=[3]), 9))
    o("chained", rates(lambda opt: S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
                                                       S.ExponentialLR(opt, gamma=0.9)]), 5))
    o("polynomial", rates(lambda opt: S.PolynomialLR(opt, total_iters=4, power=2.0), 6))
    o("warm restarts", rates(lambda opt: S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2), 8))
    o("one cycle sgd", rates(lambda opt: S.OneCycleLR(opt, max_lr=1.0, total_steps=8), 8))
    o("one cycle adam linear 3", rates(lambda opt: S.OneCycleLR(
        opt, max_lr=0.5, total_steps=10, anneal_strategy="linear", three_phase=True), 10, "adam"))
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    for _ in range(2):
        opt.step()
        sched.step()
    o.raises("past the end", sched.step, "Tried to step 3 times")


@program(2e-5, atol=2e-6)
def group_norm_and_instance_norm_layers(torch, o):
    rows = torch.tensor(X_DATA[:4])
    x = torch.cat([rows, rows * 0.5 - 1]).reshape(2, 4, 3).detach().requires_grad_()
    gn = torch.nn.GroupNorm(2, 4)
    inorm = torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    o("reprs", [repr(gn), repr(inorm), repr(torch.nn.InstanceNorm2d(3))])
    o("state keys", [list(gn.state_dict()), list(inorm.state_dict()),
                     list(torch.nn.InstanceNorm1d(4).state_dict())])
    y = gn(x)
    z = inorm(x)
    o("outputs", [y, z, _node_name(y.grad_fn), _node_name(z.grad_fn)])
    (y * z).sum().backward()
    o("grads", [x.grad, gn.weight.grad, gn.bias.grad, inorm.weight.grad])
    o("running", [inorm.running_mean, inorm.running_var, inorm.num_batches_tracked])
    inorm.eval()
    o("eval", inorm(x))
    gx, = torch.autograd.grad((gn(x) ** 3).sum(), x, create_graph=True)
    o("second order", torch.autograd.grad((gx * gx).sum(), [x, gn.weight]))
    o.raises("groups", lambda: torch.nn.functional.group_norm(x, 3),
             "Expected number of channels in input to be divisible by num_groups")
    o.raises("instance dims", lambda: inorm(torch.ones(2, 4, 3, 3)), "expected 2D or 3D input")


@program
def mode_big_ints_and_gelu_at_infinity(torch, o):
    x = torch.tensor([[1.0, 2.0, 2.0, 3.0], [3.0, 3.0, 1.0, 1.0]], requires_grad=True)
    values, indices = torch.mode(x)
    o("mode", [values, indices, _node_name(values.grad_fn)])
    values.sum().backward()
    o("mode grad", x.grad)
    o("mode dim 0", list(x.mode(0, keepdim=True)))
    o("big int", [torch.tensor([1.5, 2 ** 70]), torch.tensor([1, 2 ** 70], dtype=torch.float64)])
    o.raises("big int alone", lambda: torch.tensor([1, 2 ** 70]), "Overflow when unpacking long long")
    inf = float("inf")
    F = torch.nn.functional
    o("gelu", [F.gelu(torch.tensor([inf, -inf, float("nan"), 1.0])), F.gelu(torch.tensor(inf)),
               F.gelu(torch.tensor([inf, -inf]), approximate="tanh")])
    with torch.inference_mode():
        o("inference flag", [torch.is_inference_mode_enabled(), torch.is_grad_enabled()])
    o("inference flag after", torch.is_inference_mode_enabled())


# =============================================================================================

@pytest.mark.parametrize("fn", PROGRAMS, ids=[fn.__name__ for fn in PROGRAMS])
def test_program(fn):
    check(fn)


def test_program_names_are_unique():
    names = [fn.__name__ for fn in PROGRAMS]
    assert len(names) == len(set(names))



# Warnings PyTorch gives once per process (TORCH_WARN_ONCE) cannot be compared in this process,
# where torch has already given them: each library runs the program in a fresh interpreter.
WARN_ONCE_PROGRAM = """
import warnings
import {module} as torch
w = torch.tensor([1.0, 2.0], requires_grad=True)
seen = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    (w ** 2).sum().backward(create_graph=True)
    (w ** 2).sum().backward(create_graph=True)
    torch.autograd.grad((w ** 2).sum(), w, create_graph=True)
    float(w.sum())
    float(w[0])
    w.sum().item()
    int(w[1].detach())
for warning in caught:
    print(warning.category.__name__, str(warning.message).split(" (Triggered")[0].replace("\\n", " "))
"""


def test_warn_once_warnings_match_torch():
    import subprocess
    import sys

    outputs = []
    for module in ("gradviz", "torch"):
        result = subprocess.run([sys.executable, "-c", WARN_ONCE_PROGRAM.format(module=module)],
                                capture_output=True, text=True, check=True)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[1].count("UserWarning") == 2


# Tensor.T on a tensor that is not 2-D: two TORCH_WARN_ONCE warnings (0-D, and other ndims)
TRANSPOSE_PROPERTY_PROGRAM = """
import warnings
import {module} as torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    shapes = [tuple(t.T.shape) for t in (torch.ones(2, 3), torch.tensor(1.0), torch.tensor(2.0),
                                         torch.ones(3), torch.ones(2, 3, 4), torch.ones(5))]
    shapes.append(tuple(torch.ones(2, 3, 4).mT.shape))
print(shapes)
for warning in caught:
    print(warning.category.__name__, str(warning.message).split(" (Triggered")[0], warning.filename)
"""


def test_transpose_property_warnings_match_torch():
    import subprocess
    import sys

    outputs = []
    for module in ("gradviz", "torch"):
        result = subprocess.run([sys.executable, "-c", TRANSPOSE_PROPERTY_PROGRAM.format(module=module)],
                                capture_output=True, text=True, check=True)
        outputs.append(result.stdout.replace("gradviz", "torch"))
    assert outputs[0] == outputs[1]
    assert outputs[1].count("UserWarning") == 2 and "Tensor.T is deprecated on 0-D" in outputs[1]
