"""Check gradients on the default path: no ``capture()``, before and after the backward that
frees the saved tensors (Note [Kept forward inputs] in gradviz_ext/_function.py, Note
[Re-running from the kept inputs] in gradviz/debug/_arguments.py)."""

from __future__ import annotations

import weakref

import numpy as np
import torch as real_torch

import gradviz as torch


class SloppySquare(torch.autograd.Function):
    """The tour's sloppy Function: backward forgets grad_output."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x


class SloppyTwice(torch.autograd.Function):
    """Saves nothing: the doctor cannot rebuild its input from saved tensors."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 3  # wrong: the derivative is 2


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2


def tour_graph(function):
    x = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.5, 0.5, -0.25], requires_grad=True)
    b = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    return (function.apply(torch.tanh(x * w + b)) * 3.0).sum()


def wrong(report, name):
    (finding,) = report.findings
    assert finding.kind == "wrong_gradient" and finding.node.name() == name, str(report)
    return finding


def test_the_tour_without_capture_finds_the_sloppy_function_before_and_after_continue():
    session = torch.debug.backward(tour_graph(SloppySquare))
    wrong(session.doctor(), "SloppySquareBackward")
    session.continue_()
    report = session.doctor()
    wrong(report, "SloppySquareBackward")
    assert report.skipped == [] and len(report.checked) == 1


def test_a_function_that_saves_nothing_is_checked_after_backward():
    loss = tour_graph(SloppyTwice)
    loss.backward()  # frees everything the graph saved
    finding = wrong(torch.debug.doctor(loss), "SloppyTwiceBackward")
    # the finding is right: torch computes the true derivative 2 where the Function says 3
    assert "disagrees with finite differences" in finding.message
    assert torch.debug.doctor(tour_graph(Twice)).findings == []


def test_the_same_bug_is_a_real_bug_in_torch():
    class TorchSloppy(real_torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 2 * x

    x = real_torch.tensor([0.5, -1.0, 2.0], dtype=real_torch.float64, requires_grad=True)
    (TorchSloppy.apply(x) * 3.0).sum().backward()
    np.testing.assert_raises(AssertionError, np.testing.assert_allclose,
                             x.grad.numpy(), 6 * x.detach().numpy())


def test_an_input_modified_in_place_after_forward_is_named():
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    h = x * 1.0
    loss = SloppyTwice.apply(h).sum()
    loss.backward()
    with torch.no_grad():
        h.mul_(10.0)
    report = torch.debug.doctor(loss)
    (node, reason), = report.skipped
    assert node.name() == "SloppyTwiceBackward" and not report.checked
    assert "input 0 was modified in place after forward" in reason
    assert "from 0 to 1" in reason


def test_an_input_modified_after_forward_still_checks_from_the_saved_tensors_when_it_can():
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    h = x * 1.0
    y = h.clone()
    loss = SloppySquare.apply(y).sum()
    with torch.no_grad():
        y.add_(0.0)  # moves the version: the kept input no longer counts
    report = torch.debug.doctor(loss)
    (node, reason), = report.skipped  # the saved tensor moved too: nothing to check with
    assert "modified in place after forward" in reason


def test_the_switch_off_keeps_nothing_and_the_references_die_with_the_graph():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.debug.keep_forward_inputs(False):
        h = x * 2
        y = Twice.apply(h)
    assert y.grad_fn._forward_inputs is None
    alive = weakref.ref(h)
    del h
    assert alive() is None
    h = x * 2
    y = Twice.apply(h)
    assert y.grad_fn._forward_inputs[0] is h
    assert y.grad_fn._forward_versions == (0,)
    alive = weakref.ref(h)
    del h
    assert alive() is not None  # the cost: kept as long as the graph
    del y
    assert alive() is None  # no reference cycle: freed without the garbage collector


def test_the_switch_is_a_context_and_a_setting_and_rejects_non_bools():
    assert torch.debug.keep_forward_inputs.enabled()
    switch = torch.debug.keep_forward_inputs(False)
    try:
        assert not torch.debug.keep_forward_inputs.enabled()
    finally:
        switch.__exit__(None, None, None)
    assert torch.debug.keep_forward_inputs.enabled()
    with np.testing.assert_raises_regex(TypeError, "enabled must be a bool, got str"):
        torch.debug.keep_forward_inputs("no")


class ScaleInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2.0)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2


def test_a_dirty_input_is_not_kept():
    """It has the node as its grad_fn (a reference cycle), and forward overwrote its values."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    out = ScaleInPlace.apply(h)
    assert out is h and h.grad_fn._forward_inputs is None and h.grad_fn._forward_versions is None


def test_general_path_functions_keep_their_inputs_too():
    class Keyword(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale=2.0):
            return x * scale

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 3.0, None  # wrong for scale=2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = Keyword.apply(x * 1.0, scale=2.0).sum()
    loss.backward()
    wrong(torch.debug.doctor(loss), "KeywordBackward")


# ---- PyTorch graphs: torch's nodes keep no arguments; what can be done without capture() ---

class TorchSloppySquare(real_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x


def torch_tour_graph():
    x = real_torch.tensor([0.5, -1.0, 2.0], dtype=real_torch.float64)
    w = real_torch.tensor([1.5, 0.5, -0.25], dtype=real_torch.float64, requires_grad=True)
    b = real_torch.tensor([0.1, 0.2, 0.3], dtype=real_torch.float64, requires_grad=True)
    return (TorchSloppySquare.apply(real_torch.tanh(x * w + b)) * 3.0).sum()


def test_a_torch_graph_without_capture_is_checked_from_its_saved_tensors_before_backward():
    finding = wrong(torch.debug.doctor(torch_tour_graph()), "TorchSloppySquareBackward")
    assert finding.input_index == 0


def test_a_torch_graph_after_backward_says_to_capture():
    loss = torch_tour_graph()
    loss.backward()  # torch frees the saved tensors; its node never kept the arguments
    report = torch.debug.doctor(loss)
    (node, reason), = report.skipped
    assert node.name() == "TorchSloppySquareBackward" and not report.findings
    assert "gradviz.debug.capture()" in reason
