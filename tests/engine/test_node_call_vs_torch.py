"""Calling a graph node directly, ``y.grad_fn(*grads)``, against PyTorch.

PyTorch's built-in nodes are callable: the call applies the node's backward formula to the
given gradients under the current grad mode (so the result is differentiable with grad mode
on), runs no hooks, and returns one gradient per forward input, unwrapped when there is one.
``AccumulateGrad`` adds to the leaf's ``.grad`` and runs its post-accumulate-grad hooks.
A custom Function's node is not callable (``ctx.apply`` is). Nodes refuse copy and pickle.
Every expected fact below is read from torch running the same code.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import gradviz

LIBS = (torch, gradviz)


def _arr(value):
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return tuple(_arr(v) for v in value)
    return value.detach().numpy().copy()


def _same(a, b):
    if a is None or b is None:
        assert a is None and b is None
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        assert a.dtype == b.dtype and a.shape == b.shape


def _error(fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the type is what is compared
        return type(error).__name__, str(error)
    return None


def _x(lib):
    return lib.tensor([1.0, 2.0, 3.0], requires_grad=True)


CALLS = {
    "exp_chain": lambda lib: (_x(lib) * 2).exp().grad_fn(lib.ones(3)),
    "mul_by_number": lambda lib: (_x(lib) * 2).grad_fn(lib.ones(3)),
    "mul_broadcast_unreduced": lambda lib: (_x(lib) * lib.tensor([2.0], requires_grad=True)).grad_fn(lib.ones(3)),
    "sum_to_scalar": lambda lib: _x(lib).sum().grad_fn(lib.tensor(2.0)),
    "split_partial": lambda lib: _x(lib).split(1)[0].grad_fn(lib.ones(1), None, None),
    "split_all": lambda lib: _x(lib).split(1)[0].grad_fn(lib.ones(1), lib.ones(1) * 2, lib.ones(1) * 3),
    "all_none": lambda lib: _x(lib).exp().grad_fn(None),
    "matmul": lambda lib: (lib.ones(2, 3, requires_grad=True) @ lib.ones(3, 4, requires_grad=True)).grad_fn(lib.ones(2, 4)),
    "no_grad_inputs_give_none": lambda lib: (_x(lib) + lib.ones(3)).grad_fn(lib.ones(3)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_builtin_node_call_matches_torch(name):
    expected, got = (_arr(CALLS[name](lib)) for lib in LIBS)
    _same(expected, got)


def test_call_under_grad_mode_is_differentiable_and_under_no_grad_is_not():
    for lib in LIBS:
        x = _x(lib)
        y = x.exp()
        g = lib.ones(3, requires_grad=True)
        out = y.grad_fn(g * 2)
        assert out.requires_grad and out.grad_fn is not None
        (second,) = lib.autograd.grad(out.sum(), g)
        np.testing.assert_allclose(second.numpy(), 2 * np.exp([1.0, 2.0, 3.0]), rtol=1e-6)
        with lib.no_grad():
            assert not y.grad_fn(g).requires_grad


def test_call_runs_no_node_hooks():
    counts = []
    for lib in LIBS:
        calls = []
        y = _x(lib).exp()
        y.grad_fn.register_hook(lambda gi, go: calls.append("post"))
        y.grad_fn.register_prehook(lambda go: calls.append("pre"))
        y.grad_fn(lib.ones(3))
        counts.append(calls)
    assert counts[0] == counts[1] == []


def test_call_after_backward_freed_the_graph_raises_torchs_error():
    errors = []
    for lib in LIBS:
        y = _x(lib).exp()
        y.sum().backward()
        errors.append(_error(lambda: y.grad_fn(lib.ones(3))))
    assert errors[0][0] == errors[1][0] == "RuntimeError"
    assert "Trying to backward through the graph a second time" in errors[1][1]


@pytest.mark.parametrize("args", ["none", "two", "list", "number"])
def test_bad_arguments_raise_torchs_error(args):
    def call(lib):
        node = (_x(lib) * 2).grad_fn
        values = {"none": (), "two": (lib.ones(3), lib.ones(3)), "list": ([1, 2],),
                  "number": (1.0,)}[args]
        return _error(lambda: node(*values))
    expected, got = (call(lib) for lib in LIBS)
    assert expected == got


def test_accumulate_grad_call_matches_torch():
    records = []
    for lib in LIBS:
        seen = []
        x = _x(lib)
        x.register_hook(lambda g: seen.append("tensor hook"))
        x.register_post_accumulate_grad_hook(lambda t: seen.append(("post", _arr(t.grad))))
        acc = (x * 1).grad_fn.next_functions[0][0]
        steps = [acc(lib.ones(3))]
        with lib.no_grad():
            steps.append(acc(lib.ones(3)))
        g = lib.ones(3, requires_grad=True)
        steps.append(acc(g * 2))
        grad_requires = x.grad.requires_grad
        x.grad = None
        steps.append(acc(g * 2))
        steps.append(acc(None))
        records.append((steps, seen, grad_requires, x.grad.requires_grad, _arr(x.grad),
                        _error(lambda: acc(lib.ones(3), lib.ones(3)))))
    (t_steps, t_seen, t_req1, t_req2, t_grad, t_err), (steps, seen, req1, req2, grad, err) = records
    assert steps == t_steps == [()] * 5
    assert [s if isinstance(s, str) else s[0] for s in seen] == \
        [s if isinstance(s, str) else s[0] for s in t_seen]
    for a, b in zip(seen, t_seen):
        _same(b[1], a[1])
    assert (req1, req2) == (t_req1, t_req2) == (True, True)
    _same(t_grad, grad)
    assert err == t_err


def test_custom_function_node_is_not_callable_as_in_torch():
    errors = []
    for lib in LIBS:
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        y = Double.apply(_x(lib))
        errors.append(_error(lambda: y.grad_fn(lib.ones(3))))
        np.testing.assert_allclose(y.grad_fn.apply(lib.ones(3)).numpy(), [2.0, 2.0, 2.0])
    assert errors[0][0] == errors[1][0] == "TypeError"
    assert "not callable" in errors[1][1]


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_nodes_refuse_copy_and_pickle_as_in_torch(how):
    do = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how]
    for which in ("exp", "acc"):
        errors = []
        for lib in LIBS:
            y = _x(lib).exp()
            node = y.grad_fn if which == "exp" else y.grad_fn.next_functions[0][0]
            errors.append(_error(lambda: do(node)))
        assert errors[0] == errors[1], which
