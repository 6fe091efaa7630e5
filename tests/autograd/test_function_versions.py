"""Version checks on tensors saved by a custom Function (contract rule 10), against torch:
only tensors given to ``save_for_backward`` are checked (inputs and outputs alike); tensors
kept as ctx attributes are not; in-place writes under ``no_grad`` still count."""

from __future__ import annotations

import importlib.util
import os

import torch

import gradviz

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "torch_compare_for_versions", os.path.join(_HERE, "..", "engine", "torch_compare.py"))
_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compare)
assert_same_error = _compare.assert_same_error
assert_tensors_equal = _compare.assert_tensors_equal

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


def saves_input(m):
    class SavesInput(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a
    return SavesInput


def saves_output(m):
    class SavesOutput(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            out = a.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            return g * out
    return SavesOutput


def keeps_attribute(m):
    class KeepsAttribute(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.b = b
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g * ctx.b, None
    return KeepsAttribute


def test_saved_input_modified_under_no_grad_raises():
    def run(m):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([3.0, 4.0], dtype=m.float64)
        y = saves_input(m).apply(a, b)
        with m.no_grad():
            b.mul_(2.0)
        y.sum().backward()

    gv, _ = assert_same_error(run, MODIFIED)
    assert "is at version 1; expected version 0 instead" in str(gv)


def test_saved_output_modified_raises():
    def run(m):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = saves_output(m).apply(a)
        z = y * 1.0
        y.add_(1.0)
        z.sum().backward()

    gv, _ = assert_same_error(run, MODIFIED)
    assert "expected version 0 instead" in str(gv)


def test_ctx_attribute_is_not_version_checked():
    def run(m):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([3.0, 4.0], dtype=m.float64)
        y = keeps_attribute(m).apply(a, b)
        b.mul_(10.0)     # not saved with save_for_backward: backward sees the new values
        y.sum().backward()
        return a.grad, b._version

    (gv_grad, gv_version), (th_grad, th_version) = run(gradviz), run(torch)
    assert_tensors_equal(gv_grad, th_grad)
    assert gv_version == th_version == 1


def test_write_through_numpy_is_invisible_to_the_version_counter():
    def run(m):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([3.0, 4.0], dtype=m.float64)
        y = saves_input(m).apply(a, b)
        b.numpy()[:] = [5.0, 6.0]
        y.sum().backward()
        return a.grad, b._version

    (gv_grad, gv_version), (th_grad, th_version) = run(gradviz), run(torch)
    assert_tensors_equal(gv_grad, th_grad)
    assert gv_version == th_version == 0


def test_modification_after_backward_with_retain_graph_breaks_the_second_backward():
    def run(m):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([3.0, 4.0], dtype=m.float64)
        y = saves_input(m).apply(a, b).sum()
        y.backward(retain_graph=True)
        with m.no_grad():
            b.add_(1.0)
        y.backward()

    assert_same_error(run, MODIFIED)
