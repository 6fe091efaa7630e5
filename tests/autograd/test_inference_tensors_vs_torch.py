"""Inference tensors (``inference_mode``, ``Tensor.is_inference``) against torch 2.13: which
tensors are inference tensors, what they refuse outside inference mode (error type and key
phrase), and what stays allowed (values, gradients, flags, version counters).

Each program runs with ``m`` = gradviz and ``m`` = torch; ``o(name, value)`` records what is
observed (tensors as dtype, shape, flags and values), ``o.raises(name, fn, phrase)`` the
exception type and message, which must contain ``phrase`` in both libraries.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
import torch

import gradviz

INFERENCE_SAVED = "Inference tensors cannot be saved for backward."
INFERENCE_INPLACE = "Inplace update to inference tensor outside InferenceMode is not allowed."
INFERENCE_REQUIRES_GRAD = (
    "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
INFERENCE_VERSION = "Inference tensors do not track version counter."


class Observations:
    def __init__(self):
        self.items = []

    def __call__(self, name, value):
        self.items.append((name, _describe(value)))

    def raises(self, name, fn, phrase):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - compared with torch's
            self.items.append((name, ("error", type(exc).__name__, str(exc), phrase)))
        else:
            self.items.append((name, ("no error",)))


def _describe(value):
    if isinstance(value, (torch.Tensor, gradviz.Tensor)):
        data = np.array(value.detach().numpy(), copy=True)
        if data.dtype.kind == "f":  # float32 to 6 significant digits (exp's last bit differs)
            data = np.array([float(f"{v:.6g}") for v in data.ravel()]).reshape(data.shape)
        return ("tensor", type(value).__name__, str(value.dtype).split(".")[-1],
                tuple(value.shape), value.requires_grad, value.is_leaf, value.is_inference(),
                data.tolist())
    if isinstance(value, (list, tuple)):
        return tuple(_describe(v) for v in value)
    assert value is None or isinstance(value, (bool, int, float, str)), value
    return value


def _compare(gv, th):
    problems = []
    assert [name for name, _ in gv.items] == [name for name, _ in th.items]
    for (name, g), (_, t) in zip(gv.items, th.items):
        if t and isinstance(t, tuple) and t[0] == "error":
            phrase = t[3]
            if g[0] != "error" or g[1] != t[1]:
                problems.append(f"{name}: gradviz {g[:3]} vs torch {t[:3]}")
            elif phrase not in g[2].replace("gradviz", "torch"):
                problems.append(f"{name}: gradviz's message lacks {phrase!r}: {g[2]}")
            if phrase not in t[2]:
                problems.append(f"{name}: {phrase!r} is not torch's phrase: {t[2]}")
        elif g != t:
            problems.append(f"{name}: gradviz {g!r}\n    vs torch {t!r}")
    return problems


PROGRAMS = []


def program(fn):
    PROGRAMS.append(fn)
    return fn


@pytest.mark.parametrize("fn", PROGRAMS, ids=[fn.__name__ for fn in PROGRAMS])
def test_program_matches_torch(fn):
    th = Observations()
    fn(torch, th)
    gv = Observations()
    fn(gradviz, gv)
    problems = _compare(gv, th)
    assert not problems, "\n".join(problems)


# ---- which tensors are inference tensors ----------------------------------------------------

@program
def made_inside_are_inference(m, o):
    x = m.ones(3)
    with m.inference_mode():
        a = m.ones(3)
        b = a * 2 + 1
        c = m.tensor([1.0, 2.0])
        d = m.arange(3)
        e = x.exp()
        views = [a.view(3), a[:2], a.t(), a.unsqueeze(0), a.detach()]
        normal_views = [x[:2], x.view(3), x.detach(), x.data]
        with m.no_grad():
            f = m.zeros(2)
        with m.inference_mode(False):
            g = m.ones(2)
            h = a * 2
            o("inner flags", [m.is_inference_mode_enabled(), m.is_grad_enabled()])
        with m.enable_grad():
            w = m.ones(2, requires_grad=True)
            ww = w * 2  # nothing is recorded in inference mode, even under enable_grad
            o("enable_grad inside", [m.is_grad_enabled(), m.is_inference_mode_enabled(), ww])
        o("made inside", [a, b, c, d, e, f])
        o("views inside", views)
        o("views of a normal tensor", normal_views)
    o("made in inference_mode(False)", [g, h])
    o("w", w)
    o("x stays normal", x)
    o("torch.is_inference", [m.is_inference(a), m.is_inference(x)])
    o("outside: views of an inference tensor", [a.view(3), a[1:], a.detach(), a.data])
    o("outside: results of ops on it", [a * 2, a.clone(), a.double(), m.cat([a, x])])
    o("conversions that return it", [a.float() is a, a.contiguous() is a])
    o("copies", [copy.deepcopy(a), m.tensor(a.tolist()), a.numpy().tolist()])


@program
def decorator_and_threads(m, o):
    @m.inference_mode()
    def predict(t):
        return t * 2

    @m.inference_mode(False)
    def normal(t):
        return t * 2

    x = m.ones(2)
    o("decorated", [predict(x), normal(x)])
    seen = []
    with m.inference_mode():
        thread = threading.Thread(target=lambda: seen.append(m.ones(1).is_inference()))
        thread.start()
        thread.join()
        o("made in another thread", seen)

        def inside_thread():
            with m.inference_mode():
                seen.append(m.ones(1).is_inference())
            seen.append(m.ones(1).is_inference())

        thread = threading.Thread(target=inside_thread)
        thread.start()
        thread.join()
    o("thread with its own inference_mode", seen)
    o("main thread after", m.ones(1))


# ---- what an inference tensor refuses outside inference mode --------------------------------

@program
def saved_for_backward_raises(m, o):
    with m.inference_mode():
        x = m.tensor([1.0, 2.0, 3.0])
        target = m.tensor([0.5, 0.5, 0.5])
        label = m.tensor([1])
    w = m.tensor([2.0, 3.0, 4.0], requires_grad=True)
    o.raises("w * x", lambda: w * x, INFERENCE_SAVED)
    o.raises("x * w", lambda: x * w, INFERENCE_SAVED)
    o.raises("w @ x", lambda: w @ x, INFERENCE_SAVED)
    o.raises("w.pow(x)", lambda: w.pow(x), INFERENCE_SAVED)
    o.raises("mse_loss", lambda: m.nn.functional.mse_loss(w, target), INFERENCE_SAVED)
    o.raises("linear", lambda: m.nn.functional.linear(
        x.view(1, 3), m.ones(2, 3, requires_grad=True)), INFERENCE_SAVED)
    o.raises("cross_entropy target", lambda: m.nn.functional.cross_entropy(
        m.ones(1, 2, requires_grad=True), label), INFERENCE_SAVED)
    # ops whose backward does not need the inference tensor are fine, as in torch
    y = w + x
    z = (w - x).sum() + m.cat([w, x]).sum() + m.stack([w, x]).sum() + (x * 3).sum()
    (y.sum() + z).backward()
    o("not saved: fine", [y, z, w.grad])
    with m.no_grad():
        o("no_grad: fine", w * x)
    with m.inference_mode():
        o("inside inference_mode: fine", w * x)
    o("clone is the workaround", w * x.clone())


@program
def inplace_raises(m, o):
    with m.inference_mode():
        a = m.ones(4)
        v = a[:2]
        i = m.arange(3)
    o.raises("add_", lambda: a.add_(1), INFERENCE_INPLACE)
    o.raises("mul_ by tensor", lambda: a.mul_(m.ones(4)), INFERENCE_INPLACE)
    o.raises("setitem", lambda: a.__setitem__(0, 5.0), INFERENCE_INPLACE)
    o.raises("zero_", lambda: a.zero_(), INFERENCE_INPLACE)
    o.raises("copy_", lambda: a.copy_(m.zeros(4)), INFERENCE_INPLACE)
    o.raises("view add_", lambda: v.add_(1), INFERENCE_INPLACE)
    o.raises("+=", lambda: a.__iadd__(1), INFERENCE_INPLACE)
    o.raises("int add_", lambda: i.add_(1), INFERENCE_INPLACE)
    with m.no_grad():
        o.raises("add_ under no_grad", lambda: a.add_(1), INFERENCE_INPLACE)
        o.raises("sub_ with alpha under no_grad", lambda: a.sub_(m.ones(4), alpha=2),
                 INFERENCE_INPLACE)
    with m.inference_mode():
        with m.inference_mode(False):
            o.raises("inference_mode(False)", lambda: a.add_(1), INFERENCE_INPLACE)
        a.add_(1)
        a[0] = 7.0
        v.mul_(3)
        i += 1
    o("written inside inference mode", [a, v, i])


@program
def version_counter(m, o):
    x = m.ones(3)
    with m.inference_mode():
        a = m.ones(3)
        x.add_(1)  # a normal tensor written inside: allowed, and counted
        o("normal tensor's version inside", x._version)
        o.raises("inference tensor's version inside", lambda: a._version, INFERENCE_VERSION)
        xv = x[:2]
    o("after", [x, x._version, xv._version])
    o.raises("inference tensor's version", lambda: a._version, INFERENCE_VERSION)
    o.raises("its view's version", lambda: a[:1]._version, INFERENCE_VERSION)
    o("a result's version", (a * 2)._version)


@program
def requires_grad_rules(m, o):
    with m.inference_mode():
        a = m.ones(3)
        b = m.ones(3)
        i = m.arange(3)
        c = m.ones(3, requires_grad=True)  # allowed inside
        b.requires_grad_()
        o("inside", [c, b])
    o.raises("requires_grad_()", lambda: a.requires_grad_(), INFERENCE_REQUIRES_GRAD)
    o.raises("requires_grad = True", lambda: setattr(a, "requires_grad", True),
             INFERENCE_REQUIRES_GRAD)
    with m.no_grad():
        o.raises("requires_grad_() under no_grad", lambda: a.requires_grad_(),
                 INFERENCE_REQUIRES_GRAD)
    o.raises("an int tensor: the dtype error first", lambda: i.requires_grad_(),
             "only Tensors of floating point dtype can require gradients")
    o("requires_grad_(False) is fine", a.requires_grad_(False))
    o("clone().requires_grad_()", a.clone().requires_grad_())
    # an inference leaf that requires grad (made inside) works where nothing saves it
    (c * 2 + 1).sum().backward()
    o("gradient of an inference leaf", [c.grad, c.grad.is_inference()])
    o.raises("saved", lambda: c * m.ones(3, requires_grad=True), INFERENCE_SAVED)
    o.raises("leaf in-place: the leaf error first", lambda: c.add_(1),
             "a leaf Variable that requires grad is being used in an in-place operation.")
    with m.no_grad():
        o.raises("leaf in-place under no_grad", lambda: c.add_(1), INFERENCE_INPLACE)


# ---- custom Functions --------------------------------------------------------------------------

def _scale(m):
    class Scale(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x)
            return x * w

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return None, g * x

    return Scale


def _add_one(m):
    class AddOne(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.mark_dirty(x)
            x.add_(1)
            return x

        @staticmethod
        def backward(ctx, g):
            return g, None

    return AddOne


@program
def custom_function(m, o):
    scale = _scale(m)
    with m.inference_mode():
        x = m.tensor([1.0, 2.0])
        o("applied inside", scale.apply(x, m.ones(2, requires_grad=True)))
    w = m.tensor([3.0, 4.0], requires_grad=True)
    o.raises("save_for_backward of an inference tensor", lambda: scale.apply(x, w),
             INFERENCE_SAVED)
    o("nothing requires grad: nothing saved", scale.apply(x, x))
    out = scale.apply(x.clone(), w)
    out.sum().backward()
    o("clone works", [out, w.grad])
    o.raises("mark_dirty of an inference tensor", lambda: _add_one(m).apply(x, w),
             INFERENCE_INPLACE)


# ---- modules, optimizers, and the no_grad difference -------------------------------------------

def _linear(m):
    lin = m.nn.Linear(2, 2)
    with m.no_grad():
        lin.weight.copy_(m.tensor([[0.5, -1.0], [2.0, 0.25]]))
        lin.bias.copy_(m.tensor([0.1, -0.2]))
    return lin


@program
def module_parameters_in_inference_mode(m, o):
    lin = _linear(m)
    with m.inference_mode():
        out = lin(m.tensor([[1.0, 2.0]]))
        lin.weight.add_(1)  # a parameter (normal tensor) updated inside: allowed
        lin.bias.mul_(2)
        o("versions inside", [lin.weight._version, lin.bias._version])
    o("out", out)
    o("parameters stay normal", [lin.weight, lin.bias, lin.weight._version])
    o.raises("the output fed to training", lambda: lin(out), INFERENCE_SAVED)
    loss = lin(out.clone()).sum()
    loss.backward()
    o("training on a clone", [loss, lin.weight.grad, lin.bias.grad])


@program
def module_made_in_inference_mode(m, o):
    with m.inference_mode():
        lin = _linear(m)
        p = m.nn.Parameter(m.ones(2))
    o("parameters are inference tensors", [lin.weight, lin.bias, p])
    # ops that do not save them: backward reaches them
    loss = (lin.weight * 2).sum() + (lin.bias + 1).sum() + (p * 3).sum()
    loss.backward()
    o("backward reaches them", [loss, lin.weight.grad, lin.bias.grad])
    opt = m.optim.SGD(lin.parameters(), lr=0.1)
    o.raises("optimizer step", opt.step, INFERENCE_INPLACE)
    with m.inference_mode():
        a = m.ones(2)
    o.raises("Parameter of an inference tensor", lambda: m.nn.Parameter(a),
             INFERENCE_REQUIRES_GRAD)
    o("Parameter(requires_grad=False)", m.nn.Parameter(a, requires_grad=False))


@program
def no_grad_versus_inference_mode(m, o):
    lin = _linear(m)
    x = m.tensor([[1.0, -1.0], [0.5, 2.0]])
    with m.no_grad():
        features = lin(x)
    with m.inference_mode():
        frozen = lin(x)
    o("both", [features, frozen])
    head = m.tensor([1.0, 2.0], requires_grad=True)
    loss = (features * head).sum()
    loss.backward()
    o("no_grad output trains", [loss, head.grad])
    o.raises("inference output does not", lambda: (frozen * head).sum(), INFERENCE_SAVED)
    features.add_(1)
    o("no_grad output in place", [features, features._version])
    o.raises("inference output in place", lambda: frozen.add_(1), INFERENCE_INPLACE)


# ---- views created in inference mode of a normal tensor ----------------------------------------

@program
def views_made_in_inference_mode(m, o):
    leaf = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = leaf * 2
    plain = m.ones(3)
    with m.inference_mode():
        yv = y[:2]
        pv = plain[:2]
    o("views of normal tensors are normal", [yv.is_inference(), pv.is_inference()])
    o.raises("in-place on it in normal mode", lambda: yv.add_(1),
             "A view was created in inference mode and is being modified inplace in normal "
             "mode.")
    o("no autograd involved: fine", pv.add_(1))
    o("plain", plain)
    with m.inference_mode():
        yv2 = y[1:]
    with m.no_grad():
        yv.mul_(2)
    o.raises("its base changed", lambda: (yv2 * 2).sum().backward(),
             "A view was created in inference mode and its base or another view of its base "
             "has been modified inplace in normal mode.")


@program
def normal_tensor_written_inside_then_backward(m, o):
    leaf = m.tensor([0.5, 1.0], requires_grad=True)
    z = leaf * 2
    s = z.exp()
    u = leaf * 3
    view = u[:1]
    with m.inference_mode():
        z.add_(1)  # not recorded, but counted: the saved output of exp is now stale
        u.mul_(2)
    o("z", [z, z._version])
    o.raises("saved tensor modified", lambda: s.sum().backward(),
             "modified by an inplace operation")
    (view * 3).sum().backward()
    o("a view's gradient after its base was written inside", [view, leaf.grad])


@program
def backward_inside_inference_mode(m, o):
    leaf = m.tensor([1.0, 2.0], requires_grad=True)
    loss = (leaf * leaf).sum()
    with m.inference_mode():
        loss.backward()
    o("grad made inside is an inference tensor", [leaf.grad, leaf.grad.is_inference()])


@program
def optimizer_and_gradients(m, o):
    lin = _linear(m)
    opt = m.optim.SGD(lin.parameters(), lr=0.5)
    loss = lin(m.tensor([[1.0, 2.0]])).sum()
    loss.backward()
    with m.inference_mode():
        opt.step()  # normal parameters updated inside: allowed
        lin.weight.grad = m.ones(2, 2)  # an inference tensor as .grad
    o("stepped inside", [lin.weight, lin.bias, lin.weight._version])
    o("grads", [lin.weight.grad, lin.bias.grad])
    opt.step()  # reading an inference .grad is fine
    o("stepped outside", [lin.weight, lin.bias])
    o.raises("zero_grad(set_to_none=False) writes the inference .grad",
             lambda: opt.zero_grad(set_to_none=False), INFERENCE_INPLACE)
    opt.zero_grad()
    o("zero_grad()", [lin.weight.grad, lin.bias.grad])


@program
def index_mask_and_condition_tensors(m, o):
    # indices, masks and conditions that torch saves for backward (gradviz keeps them in the
    # op's attributes): an inference tensor among them raises where torch's op saves it
    with m.inference_mode():
        idx = m.tensor([0, 2])
        mask = m.tensor([True, False, True])
        low = m.tensor([0.5, 0.5, 0.5])
        tokens = m.tensor([[1, 0], [2, 2]])
    w = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    v = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
    plain = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    src = m.tensor([[1.0, 1.0], [2.0, 2.0]], requires_grad=True)
    gather_index = idx.view(2, 1).expand(2, 2)
    o.raises("embedding", lambda: m.nn.functional.embedding(tokens, w), INFERENCE_SAVED)
    o.raises("nn.Embedding", lambda: m.nn.Embedding(3, 2)(tokens), INFERENCE_SAVED)
    o.raises("index_select", lambda: w.index_select(0, idx), INFERENCE_SAVED)
    o.raises("gather", lambda: w.gather(0, gather_index), INFERENCE_SAVED)
    o.raises("x[idx]", lambda: w[idx], INFERENCE_SAVED)
    o.raises("x[mask]", lambda: v[mask], INFERENCE_SAVED)
    o.raises("masked_fill", lambda: v.masked_fill(mask, 0.0), INFERENCE_SAVED)
    o.raises("where", lambda: m.where(mask, v, 0.0), INFERENCE_SAVED)
    o.raises("clamp with a tensor bound", lambda: v.clamp(min=low), INFERENCE_SAVED)
    o.raises("scatter_add, src requires grad",
             lambda: plain.scatter_add(0, gather_index, src), INFERENCE_SAVED)
    o.raises("scatter, input requires grad",
             lambda: w.scatter(0, gather_index, src.detach()), INFERENCE_SAVED)
    o.raises("index_add, source requires grad",
             lambda: plain.index_add(0, idx, src), INFERENCE_SAVED)
    # where the gradient that needs the index is not computed, torch saves nothing: fine
    o("scatter_add, only input requires grad", w.scatter_add(0, gather_index, src.detach()))
    o("index_add, only input requires grad", w.index_add(0, idx, src.detach()))
    o("nothing requires grad", [plain[idx], plain.index_select(0, idx), m.where(mask, 1.0, 0.0)])
    with m.no_grad():
        o("no_grad", [w[idx], v.masked_fill(mask, 0.0)])
    o("a clone of the index", w[idx.clone()])


@program
def grad_made_in_inference_mode_refuses_accumulation(m, o):
    # a .grad assigned inside inference mode is an inference tensor: the next backward, which
    # adds into it in place, refuses outside inference mode
    w = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with m.inference_mode():
        w.grad = m.zeros(3)
    o.raises("accumulate", lambda: (w * 2).sum().backward(),
             "Inplace update to inference tensor outside InferenceMode is not allowed")
    w.grad = None
    (w * 2).sum().backward()
    o("after resetting .grad", w.grad)
