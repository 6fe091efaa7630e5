"""Node-level behaviour compared with torch: what post-hooks receive (the gradients a custom
backward returned for inputs that need none, ``None`` for gradients never materialized),
module full backward hooks with an input that needs no gradient, anomaly mode's NaN check of
those gradients and ``grad_fn.metadata['traceback_']``, a custom node's ``apply``, hook
handles' ``id`` and AccumulateGrad's type name."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch_compare import assert_same_error, assert_tensors_equal

import gradviz


def leaf(m, values):
    return m.tensor(values, dtype=m.float64, requires_grad=True)


def plain(m, values):
    return m.tensor(values, dtype=m.float64)


def assert_all_equal(gv_values, th_values, what):
    assert len(gv_values) == len(th_values), f"{what}: {gv_values} vs torch {th_values}"
    for index, (gv_value, th_value) in enumerate(zip(gv_values, th_values)):
        assert_tensors_equal(gv_value, th_value, what=f"{what}[{index}]")


def both(run):
    return run(gradviz), run(torch)


# ---- 1. post-hooks of custom Function nodes, and module full backward hooks -----------------

def two_outputs(m):
    """Scales both arguments; the second argument's gradient is a constant 7."""
    class TwoOut(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * 2, b * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2, m.full_like(gb, 7.0)

    return TwoOut


def test_post_hook_sees_the_gradient_returned_for_an_input_that_needs_none():
    def run(m):
        a, b = leaf(m, [1.0, 2.0]), plain(m, [3.0, 4.0])
        out, _ = two_outputs(m).apply(a, b)
        seen = []
        out.grad_fn.register_hook(lambda gi, go: seen.append((gi, go)))
        (out * plain(m, [1.0, 5.0])).sum().backward()
        (grad_inputs, grad_outputs), = seen
        return grad_inputs, grad_outputs, a.grad, b.grad

    (gv_in, gv_out, gv_a, gv_b), (th_in, th_out, th_a, th_b) = both(run)
    assert_all_equal(gv_in, th_in, "grad_inputs")  # (returned, 7s): not None for b
    assert_all_equal(gv_out, th_out, "grad_outputs")  # the unused output's slot is None
    assert_tensors_equal(gv_a, th_a, what="a.grad")
    assert gv_b is None and th_b is None


def test_post_hook_gets_none_for_a_non_differentiable_output():
    def run(m):
        class Marked(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                second = a * 3
                ctx.mark_non_differentiable(second)
                return a * 2, second

            @staticmethod
            def backward(ctx, ga, gb):
                received.append(gb)  # materialized zeros, as in PyTorch
                return ga * 2

        received = []
        a = leaf(m, [1.0, 2.0])
        out, _ = Marked.apply(a)
        seen = []
        out.grad_fn.register_hook(lambda gi, go: seen.append((gi, go)))
        out.sum().backward()
        (grad_inputs, grad_outputs), = seen
        return grad_inputs, grad_outputs, received[0], a.grad

    gv, th = both(run)
    for what, gv_value, th_value in zip(("grad_inputs", "grad_outputs"), gv[:2], th[:2]):
        assert_all_equal(gv_value, th_value, what)
    assert th[1][1] is None
    assert_tensors_equal(gv[2], th[2], what="backward's gradient of the marked output")
    assert_tensors_equal(gv[3], th[3], what="a.grad")


def test_post_hook_of_a_built_in_node_gets_none_for_an_unused_output():
    def run(m):
        x = m.ones(2, 3, dtype=m.float64, requires_grad=True)
        first, _ = x.split(1)
        seen = []
        first.grad_fn.register_hook(lambda gi, go: seen.append((gi, go)))
        first.sum().backward()
        (grad_inputs, grad_outputs), = seen
        return grad_inputs, grad_outputs

    (gv_in, gv_out), (th_in, th_out) = both(run)
    assert_all_equal(gv_in, th_in, "grad_inputs")
    assert_all_equal(gv_out, th_out, "grad_outputs")


def test_module_full_backward_hook_with_an_input_that_needs_no_grad():
    def run(m):
        class Product(m.nn.Module):
            def forward(self, x, y):
                return x * y

        seen = []
        module = Product()
        module.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
        x, y = leaf(m, [1.0, -2.0, 3.0]), plain(m, [0.5, 4.0, -1.0])
        module(x, y).sum().backward()
        (grad_input, grad_output), = seen
        return grad_input, grad_output, x.grad, y.grad

    (gv_in, gv_out, gv_x, gv_y), (th_in, th_out, th_x, th_y) = both(run)
    assert_all_equal(gv_in, th_in, "grad_input")  # y's entry: zeros of y's shape
    assert_all_equal(gv_out, th_out, "grad_output")
    assert_tensors_equal(gv_x, th_x, what="x.grad")
    assert gv_y is None and th_y is None


def test_a_post_hook_replacing_the_gradient_of_an_input_that_needs_none_changes_nothing():
    def run(m):
        a, b = leaf(m, [1.0, 2.0]), plain(m, [3.0, 4.0])
        out, _ = two_outputs(m).apply(a, b)
        out.grad_fn.register_hook(lambda gi, go: (gi[0], gi[1] * 100))
        out.sum().backward()
        return a.grad, b.grad

    (gv_a, gv_b), (th_a, th_b) = both(run)
    assert_tensors_equal(gv_a, th_a, what="a.grad")
    assert gv_b is None and th_b is None


# ---- 2., 3. anomaly mode ---------------------------------------------------------------------

@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def nan_for_the_constant(m):
    class NoneBwd(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, m.full_like(g, float("nan"))

    return NoneBwd


def test_anomaly_mode_checks_the_gradient_of_an_input_that_needs_none(quiet):
    def run(m):
        with m.autograd.detect_anomaly():
            nan_for_the_constant(m).apply(leaf(m, [1.0, 2.0]), plain(m, [3.0, 4.0])).sum().backward()

    assert_same_error(run, "Function 'NoneBwdBackward' returned nan values in its 1th output.")


def test_without_anomaly_mode_that_nan_reaches_nobody():
    def run(m):
        a = leaf(m, [1.0, 2.0])
        nan_for_the_constant(m).apply(a, plain(m, [3.0, 4.0])).sum().backward()
        return a.grad

    gv, th = both(run)
    assert_tensors_equal(gv, th, what="a.grad")


def test_metadata_holds_the_forward_traceback_under_anomaly_mode(quiet):
    def run(m):
        a = leaf(m, [1.0, 2.0])
        with m.autograd.detect_anomaly():
            product = a * 2  # the line the traceback ends at
            custom = nan_for_the_constant(m).apply(a, plain(m, [3.0, 4.0]))
        outside = a * 2
        return product.grad_fn.metadata, custom.grad_fn.metadata, outside.grad_fn.metadata

    for gv_meta, th_meta in zip(*both(run)):
        assert sorted(gv_meta) == sorted(th_meta)
        if "traceback_" not in th_meta:
            continue
        gv_stack, th_stack = gv_meta["traceback_"], th_meta["traceback_"]
        assert type(gv_stack) is type(th_stack) is list
        assert all(type(entry) is str for entry in gv_stack)
        # the caller's frame, formatted as traceback.format_stack() formats it
        this_file = [entry for entry in th_stack if __file__ in entry]
        assert this_file and [entry for entry in gv_stack if __file__ in entry] == this_file
        assert this_file[-1].startswith(f'  File "{__file__}", line ')


def test_metadata_traceback_names_the_forward_line(quiet):
    def run(m):
        a = leaf(m, [1.0, 2.0])
        with m.autograd.detect_anomaly():
            product = a * 2
        return product.grad_fn.metadata["traceback_"]

    gv_stack, th_stack = both(run)
    line = [entry for entry in th_stack if "product = a * 2" in entry]
    assert len(line) == 1 and line[0].endswith("    product = a * 2\n")
    assert [entry for entry in gv_stack if "product = a * 2" in entry] == line


def test_metadata_names_the_parent_of_a_node_made_by_double_backward(quiet):
    def run(m):
        a = leaf(m, [1.0, 2.0])
        with m.autograd.detect_anomaly():
            y = (a * a).sin()
            grad, = m.autograd.grad(y.sum(), a, create_graph=True)
        meta = grad.grad_fn.metadata
        parent = meta.get("parent_")
        return sorted(meta), None if parent is None else parent.name()

    assert both(run)[0] == both(run)[1]


# ---- 4. a custom node's apply ----------------------------------------------------------------

def saving(m):
    class Saving(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * a, None

    return Saving


def test_custom_node_apply_calls_backward_and_returns_its_result():
    def run(m):
        y = saving(m).apply(leaf(m, [1.0, 2.0]), plain(m, [3.0, 4.0]))
        result = y.grad_fn.apply(plain(m, [5.0, 6.0]))
        y.sum().backward()  # apply left the graph as it was
        return result, y.grad_fn.next_functions[0][0].variable.grad

    gv, th = both(run)
    assert type(gv[0]) is tuple and type(th[0]) is tuple  # unchecked: backward's own tuple
    assert_all_equal(gv[0], th[0], "apply's result")
    assert_tensors_equal(gv[1], th[1], what="a.grad after backward")


def test_custom_node_apply_after_backward_reads_freed_saved_tensors():
    def run(m):
        y = saving(m).apply(leaf(m, [1.0, 2.0]), plain(m, [3.0, 4.0]))
        y.sum().backward()
        y.grad_fn.apply(plain(m, [1.0, 1.0]))

    assert_same_error(run, "Trying to backward through the graph a second time")


def test_custom_node_apply_with_the_wrong_number_of_gradients():
    def run(m):
        y = saving(m).apply(leaf(m, [1.0, 2.0]), plain(m, [3.0, 4.0]))
        y.grad_fn.apply(plain(m, [1.0, 1.0]), plain(m, [1.0, 1.0]))

    assert_same_error(run, "takes 2 positional arguments but 3 were given")


def test_built_in_nodes_have_no_apply():
    def run(m):
        (leaf(m, [1.0, 2.0]) * 2).grad_fn.apply

    assert_same_error(run, "object has no attribute 'apply'")


# ---- 5. hook handles -------------------------------------------------------------------------

def test_hook_handles_carry_increasing_ids_across_kinds():
    def run(m):
        x = leaf(m, [1.0, 2.0])
        y = x * 2
        module = m.nn.Linear(2, 2)
        handles = [x.register_hook(lambda g: g), y.grad_fn.register_hook(lambda gi, go: None),
                   y.grad_fn.register_prehook(lambda go: None),
                   x.register_post_accumulate_grad_hook(lambda t: None),
                   module.register_forward_hook(lambda *args: None),
                   y.register_hook(lambda g: g)]
        ids = [handle.id for handle in handles]
        for handle in handles:
            handle.remove()
        return [type(i) for i in ids], [b - a for a, b in zip(ids, ids[1:])]

    assert both(run)[0] == both(run)[1]


# ---- 6. AccumulateGrad's type ---------------------------------------------------------------

def test_accumulate_grad_type_names_no_module():
    def run(m):
        node = (leaf(m, [1.0]) * 2).grad_fn.next_functions[0][0]
        kind = type(node)
        return kind.__module__, kind.__name__, kind.__qualname__, repr(kind)

    gv, th = both(run)
    assert gv == th

