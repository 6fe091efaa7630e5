"""The custom ``autograd.Function`` contract, each case run with ``import gradviz as torch``
semantics and with real torch: values, gradients, node names, and error type + key phrase.

The examples of a custom-Function tutorial (``test_spec_examples.py``, "003") come first.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch

import gradviz

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "torch_compare_for_autograd", os.path.join(_HERE, "..", "engine", "torch_compare.py"))
_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compare)
assert_same_error = _compare.assert_same_error
assert_tensors_equal = _compare.assert_tensors_equal
node_name = _compare.node_name

SECOND_TIME = "Trying to backward through the graph a second time"


def both(run):
    return run(gradviz), run(torch)


def f64(m, values, requires_grad=True):
    return m.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


# ---- the tutorial's Functions, written once for either module ------------------------------

def square_fn(m):
    class SquareFn(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 2 * x
    return SquareFn


def clipped_relu(m):
    class ClippedReLU(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, max_val):
            ctx.save_for_backward(x)
            ctx.max_val = max_val
            return m.clamp(x, min=0, max=max_val)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            mask = ((x > 0) & (x < ctx.max_val)).float()
            return grad_output * mask, None
    return ClippedReLU


def matmul_fn(m):
    class MatmulFn(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g @ b.t(), a.t() @ g
    return MatmulFn


def cube_fn(m, calls=None):
    class CubeFn(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

        @staticmethod
        def double_backward(ctx, gg):  # never called by torch (docs/function_contract.md, rule 1)
            if calls is not None:
                calls.append("double_backward")
            (x,) = ctx.saved_tensors
            return gg * 6 * x
    return CubeFn


def chained(m):
    class Chained(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x * 2
            ctx.save_for_backward(r)
            return r * 3

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            gi = g * 3 * 2 if ctx.needs_input_grad[0] else None
            return gi
    return Chained


def test_tutorial_square():
    def run(m):
        x = m.tensor([2.0, 3.0], requires_grad=True)
        y = square_fn(m).apply(x)
        y.sum().backward()
        return y, x.grad

    (gv_y, gv_g), (th_y, th_g) = both(run)
    assert_tensors_equal(gv_y, th_y)
    assert_tensors_equal(gv_g, th_g)
    assert gv_g.tolist() == [4.0, 6.0]


def test_tutorial_clipped_relu():
    def run(m):
        x = m.tensor([-1.0, 0.5, 3.0], requires_grad=True)
        out = clipped_relu(m).apply(x, 2.0)
        out.sum().backward()
        return out, x.grad

    (gv_y, gv_g), (th_y, th_g) = both(run)
    assert_tensors_equal(gv_y, th_y)
    assert_tensors_equal(gv_g, th_g)


def test_tutorial_matmul():
    rng = np.random.default_rng(3)
    a_np, b_np = rng.standard_normal((4, 8)), rng.standard_normal((8, 3))

    def run(m):
        a, b = f64(m, a_np), f64(m, b_np)
        y = matmul_fn(m).apply(a, b)
        y.sum().backward()
        return y, a.grad, b.grad

    for gv, th in zip(*both(run)):
        assert_tensors_equal(gv, th)


def test_tutorial_cube_double_backward_never_calls_double_backward():
    def run(m):
        calls = []
        x = m.tensor([2.0], requires_grad=True)
        y = cube_fn(m, calls).apply(x)
        g1 = m.autograd.grad(y, x, create_graph=True)[0]
        g2 = m.autograd.grad(g1, x)[0]
        return g1.item(), g2.item(), calls

    gv, th = both(run)
    assert gv == th == (12.0, 12.0, [])


def test_tutorial_chained_with_needs_input_grad():
    def run(m):
        x = f64(m, [1.0, -2.0])
        y = chained(m).apply(x)
        y.sum().backward()
        return y, x.grad, y.grad_fn.needs_input_grad

    (gv_y, gv_g, gv_n), (th_y, th_g, th_n) = both(run)
    assert_tensors_equal(gv_y, th_y)
    assert_tensors_equal(gv_g, th_g)
    assert gv_n == th_n == (True,)


def test_chained_input_without_grad_gives_no_graph():
    def run(m):
        x = f64(m, [1.0, -2.0], requires_grad=False)
        y = chained(m).apply(x)
        return y.requires_grad, y.grad_fn is None

    assert run(gradviz) == run(torch)


# ---- the node: name, needs_input_grad, next_functions -------------------------------------

def mixed_args_fn(m):
    class Mixed(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, scale, b, flag):
            return a * scale + b

        @staticmethod
        def backward(ctx, g):
            return g * 2.0, None, g, None
    return Mixed


def test_node_name_needs_input_grad_and_next_functions():
    def run(m):
        a = f64(m, [1.0, 2.0])
        b = f64(m, [3.0, 4.0], requires_grad=False)
        y = mixed_args_fn(m).apply(a, 2.0, b, True)
        fn = y.grad_fn
        return (node_name(fn), tuple(fn.needs_input_grad),
                [(node_name(n), nr) for n, nr in fn.next_functions])

    gv, th = both(run)
    assert gv == th
    assert gv[0] == "MixedBackward"


def test_next_functions_through_non_leaf_inputs():
    def run(m):
        a = f64(m, [1.0, 2.0])
        b = f64(m, [3.0, 4.0])
        y = mixed_args_fn(m).apply(a.exp(), 1.5, b * 2.0, False)
        return [(node_name(n), nr) for n, nr in y.grad_fn.next_functions]

    assert run(gradviz) == run(torch)


def test_grads_of_mixed_args():
    def run(m):
        a = f64(m, [1.0, 2.0])
        b = f64(m, [3.0, 4.0])
        y = mixed_args_fn(m).apply(a, 3.0, b, None)
        (y * y).sum().backward()
        return a.grad, b.grad

    for gv, th in zip(*both(run)):
        assert_tensors_equal(gv, th)


def test_grad_fn_is_the_ctx():
    def run(m):
        seen = {}

        class Keep(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                seen["ctx"] = ctx
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g

        x = f64(m, [1.0])
        y = Keep.apply(x)
        return y.grad_fn is seen["ctx"]

    assert run(gradviz) is True and run(torch) is True


def test_forward_runs_without_grad_recording():
    def run(m):
        inside = {}

        class Probe(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                z = x * 2.0
                inside["enabled"] = m.is_grad_enabled()
                inside["z_requires_grad"] = z.requires_grad
                return z

            @staticmethod
            def backward(ctx, g):
                return g * 2.0

        Probe.apply(f64(m, [1.0]))
        return inside

    assert run(gradviz) == run(torch)


def test_input_returned_unchanged_is_a_new_tensor_with_the_custom_grad_fn():
    def run(m):
        class Identity(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 3.0

        x = f64(m, [1.0, 2.0])
        y = Identity.apply(x)
        y.sum().backward()
        return y is x, node_name(y.grad_fn), x.grad.tolist()

    assert run(gradviz) == run(torch)


# ---- what backward may return -------------------------------------------------------------

def returns(m, forward_args_count, result_factory, saves=False):
    class Fn(m.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            if saves:
                ctx.save_for_backward(args[0])
            return args[0] * 2.0

        @staticmethod
        def backward(ctx, g):
            return result_factory(m, g)
    return Fn


def test_too_few_gradients():
    def run(m):
        class Two(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a * b

            @staticmethod
            def backward(ctx, g):
                return g

        Two.apply(f64(m, [1.0]), f64(m, [2.0])).sum().backward()

    gv, _ = assert_same_error(run, "returned an incorrect number of gradients (expected 2, got 1)")
    assert "TwoBackward" in str(gv)


def test_too_many_non_none_gradients():
    def run(m):
        class One(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return g, g

        One.apply(f64(m, [1.0])).sum().backward()

    assert_same_error(run, "returned an incorrect number of gradients (expected 1, got 2)")


def test_extra_trailing_none_is_accepted():
    def run(m):
        class One(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return g * 2.0, None, None

        x = f64(m, [1.0, 3.0])
        One.apply(x).sum().backward()
        return x.grad

    assert_tensors_equal(*both(run))


def test_gradient_for_non_tensor_input_is_an_error():
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, factor):
                return a * factor

            @staticmethod
            def backward(ctx, g):
                return g * 2.0, g

        Scale.apply(f64(m, [1.0, 2.0]), 2.0).sum().backward()

    assert_same_error(run, "returned a gradient different than None at position 2, but the "
                           "corresponding forward input was not a Variable")


def test_gradient_of_wrong_shape_is_an_error():
    def run(m):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return m.ones(7, dtype=m.float64)

        Bad.apply(f64(m, np.ones((2, 3)))).sum().backward()

    assert_same_error(run, "returned an invalid gradient at index 0 - got [7] but expected shape "
                           "compatible with [2, 3]")


@pytest.mark.parametrize("shape", [(1, 3), (3,), ()])
def test_smaller_broadcastable_gradient_is_rejected(shape):
    def run(m):
        class Small(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return m.ones(shape, dtype=m.float64)

        Small.apply(f64(m, np.ones((2, 3)))).sum().backward()

    assert_same_error(run, "returned an invalid gradient at index 0")


def test_extra_leading_dims_are_summed():
    def run(m):
        class Wide(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return m.tensor(np.arange(24.0).reshape(4, 2, 3))

        x = f64(m, np.ones((2, 3)))
        Wide.apply(x).sum().backward()
        return x.grad

    assert_tensors_equal(*both(run))


def test_gradient_dtype_is_cast_to_the_input_dtype():
    def run(m):
        class Cast(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return (g * 2.0).to(m.float64)

        x = m.tensor([1.0, 2.0], dtype=m.float32, requires_grad=True)
        Cast.apply(x).sum().backward()
        return x.grad

    assert_tensors_equal(*both(run))


def test_none_gradient_leaves_grad_none():
    def run(m):
        class Nothing(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a * b

            @staticmethod
            def backward(ctx, g):
                return None, g

        a, b = f64(m, [1.0]), f64(m, [2.0])
        Nothing.apply(a, b).sum().backward()
        return a.grad, b.grad

    (gv_a, gv_b), (th_a, th_b) = both(run)
    assert gv_a is None and th_a is None
    assert_tensors_equal(gv_b, th_b)


def test_gradient_for_input_that_needs_none_is_dropped():
    def run(m):
        class Both(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a * b

            @staticmethod
            def backward(ctx, g):
                return g * 2.0, g * 3.0

        a, b = f64(m, [1.0]), f64(m, [2.0], requires_grad=False)
        Both.apply(a, b).sum().backward()
        return a.grad, b.grad

    (gv_a, gv_b), (th_a, th_b) = both(run)
    assert_tensors_equal(gv_a, th_a)
    assert gv_b is None and th_b is None


# ---- save_for_backward and the saved-tensor release -------------------------------------

def test_save_for_backward_rejects_non_tensors():
    def run(m):
        class SavesInt(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a, 3)
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return g

        SavesInt.apply(f64(m, [1.0]))

    assert_same_error(run, "save_for_backward can only save variables, but argument 1 is of type int")


def test_saving_tensors_makes_a_second_backward_fail():
    def run(m):
        x = f64(m, [1.0, 2.0])
        y = square_fn(m).apply(x).sum()
        y.backward()
        y.backward()

    assert_same_error(run, SECOND_TIME)


def test_saving_only_none_still_releases():
    def run(m):
        class SavesNone(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(None)
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                ctx.saved_tensors  # the release shows when saved tensors are read
                return g * 2.0

        x = f64(m, [1.0])
        y = SavesNone.apply(x).sum()
        y.backward()
        y.backward()

    assert_same_error(run, SECOND_TIME)


def test_saving_nothing_allows_repeated_backward():
    def run(m):
        class NoSave(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                return g * 2.0

        x = f64(m, [1.0, 5.0])
        y = NoSave.apply(x).sum()
        y.backward()
        y.backward()
        y.backward()
        return x.grad

    assert_tensors_equal(*both(run))


def test_reading_saved_tensors_after_release_raises_even_if_nothing_was_saved():
    def run(m):
        class NoSave(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                assert ctx.saved_tensors == ()
                return g * 2.0

        x = f64(m, [1.0, 5.0])
        y = NoSave.apply(x).sum()
        y.backward()   # reads () and works
        y.backward()   # reads after release: raises

    assert_same_error(run, SECOND_TIME)


def test_retain_graph_keeps_saved_tensors():
    def run(m):
        x = f64(m, [1.0, 2.0])
        y = square_fn(m).apply(x).sum()
        y.backward(retain_graph=True)
        y.backward()
        return x.grad

    assert_tensors_equal(*both(run))


def test_saved_tensors_after_release_raise():
    def run(m):
        x = f64(m, [1.0, 2.0])
        y = square_fn(m).apply(x)
        y.sum().backward()
        return y.grad_fn.saved_tensors

    assert_same_error(run, SECOND_TIME)


def test_saved_output_is_usable_in_backward():
    def run(m):
        class Exp(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                out = a.exp()
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                (out,) = ctx.saved_tensors
                return g * out

        x = f64(m, [0.5, -1.0])
        y = Exp.apply(x)
        (g1,) = m.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), x)
        return g1.detach(), g2

    for gv, th in zip(*both(run)):
        assert_tensors_equal(gv, th)


# ---- calling conventions and missing methods --------------------------------------------

def test_calling_a_function_instance_raises():
    def run(m):
        Fn = square_fn(m)
        Fn()(f64(m, [1.0]))

    gv, th = assert_same_error(run, "Legacy autograd function with non-static forward method is deprecated")


def test_missing_forward():
    def run(m):
        class NoForward(m.autograd.Function):
            @staticmethod
            def backward(ctx, g):
                return g

        NoForward.apply(f64(m, [1.0]))

    assert_same_error(run, "You must implement the forward function for custom autograd.Function.")


def test_missing_backward_raises_when_backward_runs():
    def run(m):
        class NoBackward(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

        y = NoBackward.apply(f64(m, [1.0]))  # fine: the error comes at backward time
        y.sum().backward()

    assert_same_error(run, "You must implement either the backward or vjp method for your custom "
                           "autograd.Function to use it with backward mode AD.")


def test_exception_in_backward_propagates():
    def run(m):
        class Boom(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0

            @staticmethod
            def backward(ctx, g):
                raise ValueError("custom backward failed on purpose")

        Boom.apply(f64(m, [1.0])).sum().backward()

    assert_same_error(run, "custom backward failed on purpose")


# ---- a Function in the middle of a graph ------------------------------------------------

def test_function_inside_a_larger_graph_double_backward():
    def run(m):
        x = f64(m, [0.3, -0.6, 1.2])
        w = f64(m, [1.5, 0.5, -1.0])
        h = square_fn(m).apply((x * w).tanh())
        y = (cube_fn(m).apply(h) + h * x).sum()
        gx, gw = m.autograd.grad(y, [x, w], create_graph=True)
        (gx * gw).sum().backward()
        return gx.detach(), gw.detach(), x.grad, w.grad

    for gv, th in zip(*both(run)):
        assert_tensors_equal(gv, th, rtol=1e-10, atol=1e-12)


def test_multiple_outputs_with_one_unused():
    def run(m):
        class Split(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0, a * 3.0

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2.0 + g2 * 3.0

        x = f64(m, [1.0, 2.0])
        first, second = Split.apply(x)
        first.sum().backward()
        return x.grad, first.output_nr, second.output_nr

    (gv_g, *gv_nr), (th_g, *th_nr) = both(run)
    assert_tensors_equal(gv_g, th_g)
    assert gv_nr == th_nr


def test_function_sees_materialized_zeros_for_unused_output():
    def run(m):
        seen = []

        class Split(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2.0, a * 3.0

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append(None if g2 is None else g2.tolist())
                return g1 * 2.0 + g2 * 3.0

        x = f64(m, [1.0, 2.0])
        first, _ = Split.apply(x)
        first.sum().backward()
        return seen

    assert run(gradviz) == run(torch)


def _run_square(fn):
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    fn.apply(x).sum().backward()
    return x.grad.numpy().tolist()


def test_a_backward_replaced_after_first_use_is_the_one_that_runs():
    # the node class caches which method is its backward (CPython type version tags): any
    # assignment to the Function class, or to a base, must be seen on the next backward
    class Base(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    class Square(Base):
        pass

    assert _run_square(Square) == [2.0, 4.0]
    assert _run_square(Square) == [2.0, 4.0]
    Square.backward = staticmethod(lambda ctx, g: g * 10)
    assert _run_square(Square) == [10.0, 10.0]
    del Square.backward  # back to the base's
    assert _run_square(Square) == [2.0, 4.0]
    Base.backward = staticmethod(lambda ctx, g: g * -1)
    assert _run_square(Square) == [-1.0, -1.0]
    Base.vjp = staticmethod(lambda ctx, g: g * 3)  # both defined now: PyTorch's error
    with pytest.raises(RuntimeError, match="Implementing both 'backward' and 'vjp'"):
        _run_square(Square)


@pytest.mark.parametrize("m", [gradviz, torch], ids=["gradviz", "torch"])
def test_a_backward_that_leaves_grad_mode_on_does_not_leak_into_the_next_node(m):
    # the engine puts the task's grad mode back for every node, and the caller's at the end
    seen = []

    class LeavesGradOn(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(("leaves", m.is_grad_enabled()))
            m.set_grad_enabled(True)  # and never puts it back
            return g * 2

    class Looks(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            seen.append(("looks", m.is_grad_enabled()))
            return g * 3

    x = m.ones(2, requires_grad=True)
    Looks.apply(LeavesGradOn.apply(x)).sum().backward()
    assert seen == [("looks", False), ("leaves", False)]
    Looks.apply(LeavesGradOn.apply(x) * 1).sum().backward()
    assert m.is_grad_enabled()
    m.set_grad_enabled(False)
    try:
        y = LeavesGradOn.apply(x)  # not recorded: grad mode is off
        assert y.grad_fn is None
        with m.enable_grad():
            loss = Looks.apply(LeavesGradOn.apply(x)).sum()
        seen.clear()
        loss.backward()
        assert seen == [("looks", False), ("leaves", False)]
        assert not m.is_grad_enabled()  # the caller's mode, although a node turned it on
    finally:
        m.set_grad_enabled(True)
