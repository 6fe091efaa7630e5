"""Views made with grad mode off of a tensor that requires grad, against PyTorch.

``with torch.no_grad(): v = x[:2]`` gives a view without a ``grad_fn`` that still requires grad
because its base does (Note [Views' requires_grad] in gradviz_ext/_ops.py): ops record it, no
gradient reaches it or its base, and in-place on it with grad mode back on is PyTorch's error
(Note [Views after their base changed] in gradviz_ext/_engine.py). Every fact is read from
torch and gradviz running the same code: values, flags, printed form, error type and message.
Also the classes of graph nodes (``type(y.grad_fn).__name__``, Note [Node classes]).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import gradviz
import gradviz_ext

LIBS = (torch, gradviz)

NO_GRAD_PHRASE = "A view was created in no_grad mode and is being modified inplace with grad mode enabled."
INDIRECT_PHRASE = ("A view was created in no_grad mode and its base or another view of its base "
                   "has been modified inplace with grad mode enabled.")


def _both(fn):
    """``fn(lib)`` for torch and for gradviz."""
    return [fn(lib) for lib in LIBS]


class _Values:
    """A tensor's (or array's) values, as compared across libraries."""

    def __init__(self, array):
        self.array = np.array(array, copy=True)

    def __repr__(self):
        return f"values({self.array.tolist()})"


def _plain(value):
    """A value comparable across libraries: tensors as their values, containers kept."""
    if isinstance(value, (torch.Tensor, gradviz.Tensor)):
        return _Values(value.detach().numpy())
    if isinstance(value, np.ndarray):
        return _Values(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, str):
        return value.replace("gradviz", "torch")
    return value


def _assert_same(expected, got):
    if isinstance(expected, _Values):
        assert isinstance(got, _Values), got
        assert got.array.shape == expected.array.shape and got.array.dtype == expected.array.dtype
        np.testing.assert_allclose(got.array, expected.array, rtol=1e-6)
        return
    if isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), (expected, got)
        for e, g in zip(expected, got):
            _assert_same(e, g)
        return
    assert got == expected


def _outcome(fn):
    """What ``fn()`` gives: ("ok", value) or ("raises", type name, message)."""
    try:
        return ("ok", _plain(fn()))
    except Exception as exc:  # noqa: BLE001 - the test compares whatever was raised
        return ("raises", type(exc).__name__, str(exc).replace("gradviz", "torch"))


def _same_outcome(fn):
    """Run ``fn(lib)`` in both libraries and check they agree; return torch's outcome."""
    expected, got = _both(lambda lib: _outcome(lambda: fn(lib)))
    _assert_same(expected, got)
    return expected


# ---- the views and bases --------------------------------------------------------------------

VIEWS = {
    "slice": lambda b: b[:2],
    "view": lambda b: b.view(12),
    "t": lambda b: b.t(),
    "index": lambda b: b[0],
    "unbind": lambda b: b.unbind()[1],
    "split": lambda b: b.split(1)[2],
    "T": lambda b: b.T,
    "narrow": lambda b: b.narrow(1, 1, 2),
}

BASES = {
    # a leaf that requires grad
    "leaf": lambda lib: lib.tensor(np.arange(12.0).reshape(3, 4).tolist(), requires_grad=True),
    # a non-leaf: the view's base has a grad_fn
    "nonleaf": lambda lib: lib.tensor(np.arange(12.0).reshape(3, 4).tolist(),
                                      requires_grad=True) * 2,
    # a leaf that is itself a view of a tensor that does not require grad: the view's root
    # base decides, so the view does not require grad
    "leaf_view": lambda lib: lib.arange(12.0).reshape(3, 4).requires_grad_(),
}

CASES = [(b, v) for b in BASES for v in VIEWS]


def _make(lib, base_kind, view_kind):
    base = BASES[base_kind](lib)
    with lib.no_grad():
        view = VIEWS[view_kind](base)
    return base, view


@pytest.fixture(params=CASES, ids=[f"{b}-{v}" for b, v in CASES])
def case(request):
    return request.param


def test_flags_and_printing(case):
    def facts(lib):
        base, v = _make(lib, *case)
        return (v.requires_grad, v.is_leaf, v.grad_fn is None, v._base is not None,
                v.detach().requires_grad, v.detach().is_leaf, v._version, repr(v), str(v))
    assert _same_outcome(facts)[0] == "ok"


def test_requires_grad_follows_the_root_base():
    # made under no_grad of a tensor that required no grad, which requires grad later
    def later(lib):
        a = lib.zeros(3)
        with lib.no_grad():
            v = a[:2]
        before = v.requires_grad
        a.requires_grad_()
        after = (v.requires_grad, v.is_leaf, v.grad_fn is None, repr(v))
        a.requires_grad_(False)
        return before, after, v.requires_grad
    assert _same_outcome(later) == ("ok", (False, (True, True, True, "tensor([0., 0.], requires_grad=True)"), False))

    # the same with a view made with grad mode on: PyTorch's rule is for every view
    def grad_mode_view(lib):
        a = lib.zeros(3)
        v = a[1:]
        a.requires_grad_()
        return v.requires_grad, v.is_leaf, v.grad_fn is None
    assert _same_outcome(grad_mode_view) == ("ok", (True, True, True))


@pytest.mark.parametrize("mode", ["no_grad", "set_grad_enabled", "inference_mode"])
def test_other_grad_off_contexts(mode):
    def facts(lib):
        x = lib.ones(3, requires_grad=True)
        context = {"no_grad": lambda: lib.no_grad(),
                   "set_grad_enabled": lambda: lib.set_grad_enabled(False),
                   "inference_mode": lambda: lib.inference_mode()}[mode]
        with context():
            v = x[:2]
        return v.requires_grad, v.is_leaf, v.grad_fn is None, v.is_inference(), repr(v)
    assert _same_outcome(facts)[0] == "ok"

    def in_place(lib):
        x = lib.ones(3, requires_grad=True)
        context = lib.inference_mode if mode == "inference_mode" else lib.no_grad
        with context():
            v = x[:2]
        return v.mul_(2)
    outcome = _same_outcome(in_place)
    assert outcome[:2] == ("raises", "RuntimeError")
    if mode == "inference_mode":
        assert "A view was created in inference mode and is being modified inplace in normal mode." in outcome[2]
    else:
        assert NO_GRAD_PHRASE in outcome[2]


def test_used_in_a_later_graph(case):
    def graph(lib):
        base, v = _make(lib, *case)
        z = (v * 3).sum()
        facts = [z.requires_grad, z.is_leaf]
        if z.grad_fn is not None:
            mul = z.grad_fn.next_functions[0][0]
            facts.append(mul.name())
            facts.append([None if n is None else n.name() for n, _ in mul.next_functions])
        return facts
    assert _same_outcome(graph)[0] == "ok"

    def backward(lib):
        base, v = _make(lib, *case)
        (v * 3).sum().backward()
        leaf = base if base.is_leaf else None
        return (None if leaf is None else leaf.grad), v.grad
    _same_outcome(backward)

    def clone_and_numpy(lib):
        base, v = _make(lib, *case)
        c = v.clone()
        return c.requires_grad, c.is_leaf, v.tolist(), _outcome(v.numpy)
    _same_outcome(clone_and_numpy)


def test_no_gradient_reaches_it_or_its_base():
    def grads(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        z = (v * x[:2]).sum()  # only the grad-mode use of x carries a gradient
        z.backward()
        return x.grad, v.grad
    assert _same_outcome(grads)[0] == "ok"

    def autograd_grad(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        return lib.autograd.grad((v * 2).sum(), x)
    outcome = _same_outcome(autograd_grad)
    assert outcome[:2] == ("raises", "RuntimeError")
    assert "appears to not have been used in the graph" in outcome[2]

    def allow_unused(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        return (lib.autograd.grad((v * 2).sum(), v, allow_unused=True),
                lib.autograd.grad((v * 2).sum(), x, allow_unused=True))
    assert _same_outcome(allow_unused) == ("ok", ((None,), (None,)))

    def backward_on_it(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        v.backward(lib.ones(2))
    outcome = _same_outcome(backward_on_it)
    assert outcome[:2] == ("raises", "RuntimeError")
    assert "element 0 of tensors does not require grad and does not have a grad_fn" in outcome[2]


def test_its_own_requires_grad_flag():
    def flags(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        v.requires_grad_(False)  # a leaf: allowed, and the base still decides
        off = v.requires_grad
        v.retain_grad()  # a leaf: nothing to retain
        v.requires_grad_(True)  # now a leaf of its own: gradients accumulate into it
        (v * lib.tensor([2.0, 5.0])).sum().backward()
        return off, v.retains_grad, v.is_leaf, v.grad, x.grad
    assert _same_outcome(flags)[0] == "ok"

    def hook(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        v.register_hook(lambda g: g)
        return True
    assert _same_outcome(hook) == ("ok", True)


def test_in_place_after_leaving_no_grad(case):
    def in_place(lib):
        base, v = _make(lib, *case)
        return _outcome(lambda: v.mul_(2)), _outcome(lambda: v.zero_()), v._version, v, base
    outcome = _same_outcome(in_place)
    assert outcome[0] == "ok"
    error = outcome[1][0]
    if case[0] == "leaf_view":
        assert error[0] == "ok"  # the root base requires no grad: nothing to refuse
    else:
        assert error[:2] == ("raises", "RuntimeError") and NO_GRAD_PHRASE in error[2]


def test_in_place_inside_no_grad(case):
    def inside(lib):
        base, v = _make(lib, *case)
        with lib.no_grad():
            v.mul_(10)
            # reading is_leaf reads grad_fn, which PyTorch refuses even here when the root
            # base requires grad
            inner = (v.requires_grad, _outcome(lambda: v.is_leaf), base._version)
        return inner, v, base.detach()
    outcome = _same_outcome(inside)
    assert outcome[0] == "ok"
    is_leaf = outcome[1][0][1]
    if case[0] == "leaf_view":
        assert is_leaf == ("ok", True)
    else:
        assert is_leaf[:2] == ("raises", "RuntimeError") and INDIRECT_PHRASE in is_leaf[2]

    def after(lib):
        base, v = _make(lib, *case)
        with lib.no_grad():
            v.mul_(10)
        return (v.requires_grad, _outcome(lambda: v.is_leaf), repr(v),
                _outcome(lambda: v * 2), _outcome(lambda: (v.detach().requires_grad, v.detach())),
                _outcome(lambda: v.requires_grad_(False).requires_grad))
    outcome = _same_outcome(after)
    assert outcome[0] == "ok"
    if case[0] != "leaf_view":
        requires_grad, is_leaf, printed, use, detached, _ = outcome[1]
        assert requires_grad is True and printed.endswith("grad_fn=<Invalid>)")
        for refused in (is_leaf, use):
            assert refused[:2] == ("raises", "RuntimeError") and INDIRECT_PHRASE in refused[2]
        assert detached[0] == "ok"

    def base_still_fine(lib):
        base, v = _make(lib, *case)
        with lib.no_grad():
            v.mul_(10)
        (base * 2).sum().backward()
        leaf = base if base.is_leaf else None
        return None if leaf is None else leaf.grad
    _same_outcome(base_still_fine)


def test_base_changed_with_grad_mode_on():
    def changed(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        with lib.no_grad():
            v = y[:2]
        y.mul_(2)
        return (v.requires_grad, repr(v), _outcome(lambda: v.is_leaf),
                _outcome(lambda: (v * 2).sum()))
    outcome = _same_outcome(changed)
    assert INDIRECT_PHRASE in outcome[1][3][2]


ACCESSORS = {
    "grad_fn": lambda v: v.grad_fn,
    "is_leaf": lambda v: v.is_leaf,
    "requires_grad": lambda v: v.requires_grad,
    "repr": repr,
    "retain_grad": lambda v: v.retain_grad(),
    "register_hook": lambda v: v.register_hook(lambda g: g) and None,
    "post_accumulate_hook": lambda v: v.register_post_accumulate_grad_hook(lambda t: None),
    "requires_grad_(False)": lambda v: v.requires_grad_(False),
    "output_nr": lambda v: v.output_nr,
    "retains_grad": lambda v: v.retains_grad,
    "detach": lambda v: v.detach(),
    "detach_": lambda v: v.detach_(),
    "deepcopy": lambda v: copy.deepcopy(v),
    "sum": lambda v: v.sum(),
}


@pytest.mark.parametrize("made", ["unbind_grad_mode", "slice_no_grad"])
@pytest.mark.parametrize("accessor", list(ACCESSORS))
def test_tensor_api_of_a_view_whose_base_changed(made, accessor):
    """The view refuses to be used: PyTorch raises on reading its grad_fn, and on everything
    that reads it (is_leaf, hooks, retain_grad, ops); repr prints grad_fn=<Invalid>."""
    def facts(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        if made == "unbind_grad_mode":
            v = y.unbind()[0]
            with lib.no_grad():
                v.mul_(2)
        else:
            with lib.no_grad():
                v = y[:2]
            y.mul_(2)
        return _outcome(lambda: ACCESSORS[accessor](v))
    _same_outcome(facts)


@pytest.mark.parametrize("view", ["slice_of_leaf", "slice_no_grad", "plain", "of_detached"])
def test_detach_in_place_refuses_views(view):
    def facts(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        if view == "slice_of_leaf":
            v = x[:2]
        elif view == "slice_no_grad":
            with lib.no_grad():
                v = x[:2]
        elif view == "plain":
            v = lib.ones(3)[1:]
        else:
            v = x.detach()[:2]
        y = x * 2
        return _outcome(v.detach_), _outcome(lambda: (y.detach_(), y.requires_grad,
                                                      y.grad_fn is None))
    in_place = _same_outcome(facts)[1][0]
    assert in_place[:2] == ("raises", "RuntimeError")
    assert "Can't detach views in-place. Use detach() instead." in in_place[2]


@pytest.mark.parametrize("view_kind", ["slice", "index", "view", "split"])
def test_views_of_it_made_with_grad_mode_on(view_kind):
    def facts(lib):
        x = lib.tensor(np.arange(12.0).reshape(3, 4).tolist(), requires_grad=True)
        with lib.no_grad():
            v = x[:2]
        w = {"slice": lambda: v[:, 1:], "index": lambda: v[0], "view": lambda: v.view(8),
             "split": lambda: v.split(1)[0]}[view_kind]()
        return (w.requires_grad, w.is_leaf, w.grad_fn.name(), _outcome(lambda: w.mul_(2)),
                _outcome(lambda: v.__setitem__(0, 5.0)), x.detach())
    outcome = _same_outcome(facts)
    in_place = outcome[1][3]
    assert in_place[:2] == ("raises", "RuntimeError")
    if view_kind == "split":  # a multi-output view: that error wins
        assert "Output 0 of Split is a view and is being modified inplace." in in_place[2]
    else:
        assert ("is a view of a view which was created in no_grad mode and is being modified "
                "inplace with grad mode enabled") in in_place[2]


def test_views_of_it_made_in_inference_mode():
    def facts(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.inference_mode():
            v = x[:2]
        w = v[:1]
        return w.requires_grad, w.grad_fn.name(), _outcome(lambda: w.mul_(2))
    outcome = _same_outcome(facts)
    assert "is a view of a view which was created in inference mode" in outcome[1][2][2]


@pytest.mark.parametrize("split", ["unbind", "split", "chunk"])
def test_multi_output_views_made_under_no_grad(split):
    def facts(lib):
        x = lib.tensor(np.arange(6.0).reshape(3, 2).tolist(), requires_grad=True)
        y = x * 1
        with lib.no_grad():
            parts = {"unbind": y.unbind, "split": lambda: y.split(1),
                     "chunk": lambda: y.chunk(3)}[split]()
        return ([(p.requires_grad, p.is_leaf) for p in parts], _outcome(lambda: parts[0].mul_(2)),
                _outcome(lambda: parts[1].add_(1)))
    outcome = _same_outcome(facts)
    assert NO_GRAD_PHRASE in outcome[1][1][2]

    # made with grad mode on, the same views have their own error
    def grad_mode(lib):
        x = lib.tensor(np.arange(6.0).reshape(3, 2).tolist(), requires_grad=True)
        parts = {"unbind": lambda: x.unbind(), "split": lambda: x.split(1),
                 "chunk": lambda: x.chunk(3)}[split]()
        return _outcome(lambda: parts[0].mul_(2))
    outcome = _same_outcome(grad_mode)
    assert "is the output of a function that returns multiple views" in outcome[1][2]


# ---- graph node classes (Note [Node classes]) -----------------------------------------------

def _node_facts(node):
    kind = type(node)
    text = repr(node)
    return (kind.__name__, kind.__qualname__, text[:text.index(" object at 0x") + len(" object at 0x")])


def test_built_in_node_classes():
    def facts(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = ((x * 2 + 1).exp()[1:].view(2, 1).t() / 3).sum()
        nodes, seen, stack = [], set(), [y.grad_fn]
        while stack:  # every node of the graph, leaves included
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)
            stack.extend(n for n, _ in node.next_functions)
        kinds = [(_node_facts(n), type(n).__module__, str(type(n)),
                  isinstance(n, lib.autograd.graph.Node)) for n in nodes]
        other = (x * 3).grad_fn
        return kinds, type(other) is type(x.mul(2).grad_fn), type(other) is type((x + 1).grad_fn)
    expected, got = _both(facts)
    # AccumulateGrad: torch's is a C++ class (module builtins); gradviz's is the engine's
    exp_kinds, got_kinds = expected[0], got[0]
    assert [k[0] for k in got_kinds] == [k[0] for k in exp_kinds]
    for e, g in zip(exp_kinds, got_kinds):
        if e[0][0] != "AccumulateGrad":
            assert g == e
        else:
            assert g[3] and e[3]
    assert got[1:] == expected[1:] == (True, False)


def test_op_nodes_stay_op_nodes():
    from gradviz.ops import OpNode

    x = gradviz.ones(2, requires_grad=True)
    node = (x * 2).grad_fn
    assert isinstance(node, OpNode) and type(node) is not OpNode
    if gradviz_ext.COMPILED:  # interpreted, every node has a __dict__ (OpNode's too)
        assert not hasattr(node, "__dict__")  # no per-node dictionary: as light as an OpNode
        assert type(node).__basicsize__ == OpNode.__basicsize__
    with pytest.raises(AttributeError, match="'MulBackward0' object has no attribute 'nope'"):
        node.nope  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        torch.ones(2, requires_grad=True).mul(2).grad_fn.nope  # noqa: B018


def test_custom_function_node_class():
    def facts(lib):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        y = Twice.apply(lib.ones(2, requires_grad=True))
        node = y.grad_fn
        return (_node_facts(node), type(node).__module__, str(type(node)), node.name(),
                isinstance(node, lib.autograd.graph.Node))
    expected, got = _both(facts)
    _assert_same(_plain(expected), _plain(got))
