"""Passes that follow only part of the graph, against PyTorch: ``autograd.grad(outputs,
inputs)`` and ``backward(inputs=...)``.

Facts pinned here, each read from torch running the same code:

- what a built-in node's post-hook sees: PyTorch's formulas compute only the gradients whose
  next node the pass executes, so the others are None (``task_should_compute_output``); a
  custom Function's backward returns everything and its post-hook sees all of it;
- what ``autograd.grad`` returns for a non-leaf with a tensor hook: the gradient as it arrived
  when the non-leaf's node runs anyway, the hooked one when the pass stops there;
- ``backward(inputs=[t])`` calls ``t.retain_grad()`` (so ``t.grad`` keeps accumulating in later
  passes, and a tensor that does not require grad fails with retain_grad's error), and runs a
  non-leaf input's own node;
- ``name()`` of PyTorch's C++ nodes is namespaced (``torch::autograd::AccumulateGrad``), their
  class name and a tensor's repr are not.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

LIBS = (torch, gradviz)


def _values(value):
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return tuple(_values(v) for v in value)
    return np.round(value.detach().numpy().astype(np.float64), 6).tolist()


def _both(program):
    return [program(lib) for lib in LIBS]


def _assert_same(program):
    expected, got = _both(program)
    assert got == expected


def test_post_hook_of_a_builtin_node_sees_none_for_edges_the_grad_pass_skips():
    def program(lib):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        t = x * w
        t.grad_fn.register_hook(lambda gi, go: seen.append(_values(gi)))
        u = t.exp()
        lib.autograd.grad(u.sum(), [x], retain_graph=True)
        lib.autograd.grad(u.sum(), [w], retain_graph=True)
        lib.autograd.grad(u.sum(), [x, w], retain_graph=True)
        u.sum().backward(inputs=[t])
        return seen
    _assert_same(program)


def test_post_hook_of_a_custom_function_sees_every_gradient_it_returned():
    def program(lib):
        seen = []

        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return x * w

            @staticmethod
            def backward(ctx, g):
                x, w = ctx.saved_tensors
                return g * w, g * x

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        t = Mul.apply(x, w)
        t.grad_fn.register_hook(lambda gi, go: seen.append(_values(gi)))
        lib.autograd.grad(t.sum(), [x], retain_graph=True)
        t.sum().backward(inputs=[t])
        return seen
    _assert_same(program)


def test_grad_of_a_hooked_non_leaf_depends_on_whether_its_node_runs():
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        t = x * 3
        t.register_hook(lambda g: g * 0.5)
        stops_there = lib.autograd.grad((t * 2).sum(), [t], retain_graph=True)
        runs_on = lib.autograd.grad((t * 2).sum(), [t, x], retain_graph=True)
        as_root = lib.autograd.grad(t, [t], lib.ones(2))
        return _values(stops_there), _values(runs_on), _values(as_root)
    expected, got = _both(program)
    assert got == expected
    assert expected[0][0] != expected[1][0]  # the case this test is about


def test_backward_inputs_retains_the_non_leaf_grad_for_later_passes():
    def program(lib):
        calls = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        (y * 3).sum().backward(inputs=[y], retain_graph=True)
        first = (y.retains_grad, _values(y.grad), x.grad)
        y.register_hook(lambda g: calls.append(_values(g)) or g * 10)
        (y * 3).sum().backward()
        return first, y.retains_grad, _values(y.grad), _values(x.grad), calls
    _assert_same(program)


@pytest.mark.parametrize("which", ["constant", "leaf_without_grad_after_graph"])
def test_backward_inputs_that_do_not_require_grad_fail_like_torch(which):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([1.0, 2.0])
        loss = (x * 2).sum() if which == "constant" else (x * c).sum()
        try:
            loss.backward(inputs=[c])
        except Exception as error:  # noqa: BLE001 - type and message are compared
            return type(error).__name__, str(error)
        return None
    _assert_same(program)


def test_cpp_node_names_are_namespaced_but_class_names_and_repr_are_not():
    def program(lib):
        x = lib.ones(3, requires_grad=True)
        y = x * 1
        y[0] = 2
        acc = (x * 1).grad_fn.next_functions[0][0]
        return (y.grad_fn.name(), type(y.grad_fn).__name__, acc.name(), type(acc).__name__,
                repr(y).split("grad_fn=")[1])
    _assert_same(program)
