"""Specification conformance (``000_*.txt``, issue 18 item 6): ``NestedIOFunction``'s documented
ctx members are its own and work on its instances; ``input_grad_buffers`` refuses a buffer
whose contribution came from a node with post-hooks."""

from __future__ import annotations

import warnings

import pytest
import torch

import gradviz
from gradviz.autograd.function import NestedIOFunction

MEMBERS = ["mark_dirty", "mark_non_differentiable", "save_for_backward", "save_for_forward",
           "saved_tensors", "set_materialize_grads", "set_output_grad_dtype", "input_grad_buffers"]


@pytest.mark.parametrize("name", MEMBERS)
def test_documented_members_are_defined_on_the_class(name):
    assert name in vars(NestedIOFunction), name
    # torch's class has the ones torch 2.13 knows (the last two are 2.14 and the spec)
    if name not in ("set_output_grad_dtype", "input_grad_buffers"):
        assert hasattr(torch.autograd.function.NestedIOFunction, name)


class ScaledPair(NestedIOFunction):
    """(a, b), w -> (a * w, b * w), saving nested tensors; records what backward saw."""

    seen: list = []

    def forward_extended(self, pair, w):
        a, b = pair
        self.save_for_backward((a, b), w)
        return a * w, b * w

    def backward_extended(self, grad_a, grad_b):
        (a, b), w = self.saved_tensors
        ScaledPair.seen.append((grad_a, grad_b))
        grad_b_or_zero = gradviz.zeros_like(b) if grad_b is None else grad_b
        return (grad_a * w, grad_b_or_zero * w), grad_a * a + grad_b_or_zero * b


def make_instance(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch's "should not be instantiated"
        return cls()


def inputs():
    return (gradviz.tensor([1.0, 2.0], requires_grad=True),
            gradviz.tensor([3.0, 4.0], requires_grad=True),
            gradviz.tensor([2.0, -1.0], requires_grad=True))


def test_set_materialize_grads_on_an_instance_reaches_the_ctx():
    for materialize in (True, False):
        ScaledPair.seen = []
        a, b, w = inputs()
        fn = make_instance(ScaledPair)
        fn.set_materialize_grads(materialize)
        first, _ = fn((a, b), w)
        first.sum().backward()
        grad_b = ScaledPair.seen[0][1]
        assert (grad_b is None) is (not materialize)
        assert a.grad.tolist() == w.tolist() and b.grad.tolist() == [0.0, 0.0]


def test_save_for_backward_on_an_instance_keeps_the_nesting():
    a, b, w = inputs()
    fn = make_instance(ScaledPair)
    fn.save_for_backward(a, (b, None), [w])
    saved = fn.saved_tensors
    assert saved[0] is a and saved[1][0] is b and saved[1][1] is None and saved[2][0] is w
    with pytest.raises(ValueError) as expected:
        make_instance(torch.autograd.function.NestedIOFunction).save_for_backward(3)
    with pytest.raises(ValueError) as got:
        fn.save_for_backward(3)
    assert str(got.value).startswith("Auto nesting doesn't know how to process an input object of type int")
    assert str(expected.value).startswith("Auto nesting doesn't know how to process an input object of type int")


def test_mark_dirty_and_mark_non_differentiable_on_an_instance_reach_the_ctx():
    class Scale(NestedIOFunction):
        def forward_extended(self, x):
            return x * 2

        def backward_extended(self, grad):
            return grad * 2

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    other = x.detach().clone()
    fn = make_instance(Scale)
    fn.mark_dirty(other)  # replayed on the ctx, which then finds it was not returned
    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward "
                                           "method were not returned as output"), \
            pytest.warns(UserWarning, match="received a tensor that was not an input"):
        fn(x)
    for method in ("mark_dirty", "mark_non_differentiable"):
        with pytest.raises(ValueError) as expected:
            getattr(make_instance(torch.autograd.function.NestedIOFunction), method)(3)
        with pytest.raises(ValueError) as got:
            getattr(make_instance(Scale), method)(3)
        assert str(got.value).split(".")[0] == str(expected.value).split(".")[0]


def test_set_output_grad_dtype_and_save_for_forward_on_an_instance():
    class Identity(NestedIOFunction):
        received = []

        def forward_extended(self, x):
            return x * 1

        def backward_extended(self, grad):
            Identity.received.append(grad.dtype)
            return grad

    x = gradviz.tensor([1.0, 2.0], dtype=gradviz.float32, requires_grad=True)
    fn = make_instance(Identity)
    fn.set_output_grad_dtype(gradviz.float64)
    with pytest.raises(RuntimeError, match="set_output_grad_dtype can only be called once"):
        fn.set_output_grad_dtype(None)
    fn(x).sum().backward()
    assert Identity.received == [gradviz.float64] and x.grad.dtype == gradviz.float32

    other = make_instance(Identity)
    with pytest.raises(AssertionError, match="save_for_forward expects all arguments to be tensors"):
        other.save_for_forward(3)
    other.save_for_forward(x, None)  # recorded, replayed on the ctx at the call
    assert other(x).tolist() == [1.0, 2.0]


def test_input_grad_buffers_on_an_instance_is_the_ctx_error():
    fn = make_instance(ScaledPair)
    with pytest.raises(RuntimeError, match="only available while its backward is running"):
        fn.input_grad_buffers


def test_input_grad_buffers_inside_backward_extended():
    class Fused(NestedIOFunction):
        log = []

        def forward_extended(self, x, w):
            self.save_for_backward(x, w)
            return x * w

        def backward_extended(self, grad):
            x, w = self.saved_tensors
            x_buffer, w_buffer = self.input_grad_buffers
            Fused.log.append((x_buffer is not None, w_buffer is not None))
            grad_x = grad * w
            if x_buffer is not None:
                x_buffer.add_(grad_x)
                grad_x = None
            return grad_x, grad * x

    x, _, w = inputs()
    (Fused.apply(x, w) * x).sum().backward()
    assert Fused.log == [(True, False)]
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    tw = torch.tensor([2.0, -1.0], requires_grad=True)
    ((tx * tw) * tx).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist() and w.grad.tolist() == tw.grad.tolist()


# ---- input_grad_buffers and a post-hook on the producing node ------------------------------

def fusing_mul(log):
    class M(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            x_buffer, _ = ctx.input_grad_buffers
            log.append(x_buffer is not None)
            grad_x = g * w
            if x_buffer is not None:
                x_buffer.add_(grad_x)
                grad_x = None
            return grad_x, g * x
    return M


@pytest.mark.parametrize("hooked", [False, True])
def test_a_buffer_fed_by_a_node_with_post_hooks_is_not_exposed(hooked):
    log, seen = [], []
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    w = gradviz.tensor([3.0, 4.0], requires_grad=True)
    prod = fusing_mul(log).apply(x, w) * x
    if hooked:
        prod.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(
            [None if g is None else g.clone() for g in grad_inputs]))
    prod.sum().backward()
    assert log == [not hooked]  # MulBackward0 runs first either way
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    tw = torch.tensor([3.0, 4.0], requires_grad=True)
    ((tx * tw) * tx).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist() and w.grad.tolist() == tw.grad.tolist()
    if hooked:
        # the hook's view of Mul's contribution to x stays what Mul produced
        assert seen[0][1].tolist() == (tx * tw).tolist()
