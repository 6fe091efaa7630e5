"""The custom Function contract beyond the basics (contract rules 1-8, 12, 16), each case run in
gradviz and in torch: forward styles, backward/vjp, mark_dirty, mark_non_differentiable,
materialization, once_differentiable, saved_tensors_hooks, containers, legacy classes."""

from __future__ import annotations

import importlib.util
import os
import warnings

import numpy as np
import pytest
import torch

import gradviz

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "torch_compare_for_contract", os.path.join(_HERE, "..", "engine", "torch_compare.py"))
_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compare)
assert_same_error = _compare.assert_same_error
assert_tensors_equal = _compare.assert_tensors_equal

MODULES = [gradviz, torch]


def f64(m, values, requires_grad=True):
    return m.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def compare(run):
    gv, th = run(gradviz), run(torch)
    assert len(gv) == len(th)
    for i, (a, b) in enumerate(zip(gv, th)):
        if isinstance(b, (torch.Tensor, type(None))):
            assert_tensors_equal(a, b, what=f"result {i}")
        else:
            assert a == b, f"result {i}: gradviz {a!r}, torch {b!r}"


# ---- forward styles, backward / vjp ------------------------------------------------------

def test_setup_context_style_with_kwargs_and_defaults():
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(x, scale=2.0):
                return x * scale

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.scale = inputs[1]
                ctx.save_for_backward(inputs[0])
                ctx.seen = len(inputs)

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * ctx.scale, None

        x = f64(m, [1.0, 2.0])
        y = Scale.apply(x, scale=3.0)
        y.sum().backward()
        z = Scale.apply(x)
        return x.grad, z, y.grad_fn.seen, type(y.grad_fn).__name__
    compare(run)


def test_ctx_style_with_keyword_argument():
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale=2.0):
                return x * scale

            @staticmethod
            def backward(ctx, g):
                return g * 3.0, None

        x = f64(m, [1.0, 2.0])
        y = Scale.apply(x, scale=3.0)
        y.sum().backward()
        return y, x.grad
    compare(run)


def test_vjp_alias():
    def run(m):
        class Double(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2

        x = f64(m, [1.0, 2.0])
        Double.apply(x).sum().backward()
        return (x.grad,)
    compare(run)


def test_both_backward_and_vjp_fail_at_backward_time():
    def run(m):
        class Both(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

            @staticmethod
            def vjp(ctx, g):
                return g

        y = Both.apply(f64(m, [1.0]))  # apply itself succeeds
        y.sum().backward()
    assert_same_error(run, "Implementing both 'backward' and 'vjp' for a custom Function is not allowed.")


# ---- backward's results -------------------------------------------------------------------

@pytest.mark.parametrize("value", [1, 1.5, "text", "ndarray", "list"])
def test_non_tensor_gradient_is_rejected(value):
    def run(m):
        bad = {"ndarray": np.ones(2), "list": [m.ones(2)]}.get(value, value)

        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return bad

        Bad.apply(f64(m, [1.0, 2.0])).sum().backward()
    assert_same_error(run, "expected Variable or None (got")


def test_integer_gradient_is_cast():
    def run(m):
        class IntGrad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return m.ones(2, dtype=m.int64)

        x = f64(m, [1.0, 2.0])
        IntGrad.apply(x).sum().backward()
        return (x.grad,)
    compare(run)


# ---- inputs and outputs --------------------------------------------------------------------

def test_containers_are_opaque_slots():
    def run(m):
        seen = []

        class TakesList(m.autograd.Function):
            @staticmethod
            def forward(ctx, items, x):
                seen.append(ctx.needs_input_grad)
                return x * items[0], [x * 1]

            @staticmethod
            def backward(ctx, g, g_list):
                seen.append(g_list)
                return None, g * 2

        a, x = f64(m, [1.0, 2.0]), f64(m, [3.0, 4.0])
        y, listed = TakesList.apply([a], x)
        y.sum().backward()
        return (x.grad, a.grad, seen[0], seen[1], type(listed).__name__,
                listed[0].requires_grad, len(y.grad_fn.next_functions))
    compare(run)


def test_non_tensor_outputs_and_unused_outputs():
    def run(m):
        got = []

        class Many(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, n):
                return x * 2, n + 1, x * 3, "tag"

            @staticmethod
            def backward(ctx, g1, g2, g3, g4):
                got.extend([g2, g4, g3])
                return g1 * 2 + g3 * 3, None

        x = f64(m, [1.0, 2.0])
        a, n, c, tag = Many.apply(x, 4)
        a.sum().backward()
        return x.grad, n, tag, got[0], got[1], got[2]
    compare(run)


# ---- mark_dirty (contract rules 7, 8) --------------------------------------------------------

def add_one_inplace(m):
    class AddOne(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5
    return AddOne


def test_mark_dirty_returns_the_input_object_and_bumps_its_version():
    def run(m):
        x = f64(m, [1.0, 2.0])
        y = x * 2
        before = y._version
        out = add_one_inplace(m).apply(y)
        y.sum().backward()
        return out is y, type(y.grad_fn).__name__, y._version - before, x.grad
    compare(run)


def test_mark_dirty_makes_a_non_requiring_input_a_non_leaf():
    def run(m):
        class MulInto(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, w):
                a.mul_(w)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx, g):
                return g, g

        b = f64(m, [1.0, 1.0], requires_grad=False)
        x = f64(m, [1.0, 2.0])
        out = MulInto.apply(b, x * 3)
        out.sum().backward()
        return out is b, out.requires_grad, out.is_leaf, out, x.grad
    compare(run)


def test_mark_dirty_without_recording_keeps_the_tensor_plain():
    def run(m):
        b = f64(m, [1.0, 1.0], requires_grad=False)
        out = add_one_inplace(m).apply(b)
        return out is b, b.requires_grad, b._version, b
    compare(run)


def test_mark_dirty_on_a_view_of_a_non_leaf():
    def run(m):
        c = f64(m, [1.0, 2.0])
        base = c * 1
        view = base[:1]
        out = add_one_inplace(m).apply(view)
        base.sum().backward()
        return out is view, base, c.grad, base.grad_fn.name().replace("torch::autograd::", "")
    compare(run)


def test_dirty_tensor_modified_after_being_saved_elsewhere():
    def run(m):
        x = f64(m, [1.0, 2.0])
        y = x * 1
        z = y * y
        add_one_inplace(m).apply(y)
        z.sum().backward()
    assert_same_error(run, "is at version 2; expected version 0 instead")


def test_mark_dirty_on_a_leaf_that_requires_grad():
    assert_same_error(lambda m: add_one_inplace(m).apply(f64(m, [1.0])),
                      "a leaf Variable that requires grad has been used in an in-place operation.")


def test_mark_dirty_on_a_view_of_a_leaf():
    assert_same_error(lambda m: add_one_inplace(m).apply(f64(m, [1.0, 2.0])[:1]),
                      "a view of a leaf Variable that requires grad is being used in an in-place operation.")


def test_dirty_tensor_not_returned():
    def run(m):
        class Forgets(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                x.add_(1)
                ctx.mark_dirty(x)
                return y * 2

            @staticmethod
            def backward(ctx, g):
                return g, g

        Forgets.apply(f64(m, [1.0], requires_grad=False), f64(m, [1.0]))
    assert_same_error(run, "Some elements marked as dirty during the forward method were not returned as output.")


def test_marking_a_returned_non_input_only_warns():
    def run(m):
        class Stranger(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                t = m.ones(2, dtype=m.float64)
                ctx.mark_dirty(t)
                return x * 2, t

            @staticmethod
            def backward(ctx, g, g2):
                return g

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, t = Stranger.apply(f64(m, [1.0, 2.0]))
        messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        return any("received a tensor that was not an input" in s for s in messages), t.requires_grad
    compare(run)


# ---- mark_non_differentiable, materialization ---------------------------------------------

def test_sort_indices_are_non_differentiable_and_get_int64_zeros():
    def run(m):
        got = []

        class Sort(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                values, idx = x.sort()
                ctx.mark_non_differentiable(idx)
                ctx.save_for_backward(x, idx)
                return values, idx

            @staticmethod
            @m.autograd.function.once_differentiable
            def backward(ctx, g1, g2):
                got.append(g2)
                x, idx = ctx.saved_tensors
                grad_input = m.zeros_like(x)
                grad_input.index_add_(0, idx, g1)
                return grad_input

        x = f64(m, [3.0, 1.0, 2.0])
        values, idx = Sort.apply(x)
        (values * f64(m, [1.0, 2.0, 3.0], requires_grad=False)).sum().backward()
        return x.grad, idx.requires_grad, got[0]
    compare(run)


def test_non_differentiable_float_output():
    def run(m):
        got = []

        class Two(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                a, b = x * 2, x * 3
                ctx.mark_non_differentiable(b)
                return a, b

            @staticmethod
            def backward(ctx, g1, g2):
                got.append(g2)
                return g1

        x = f64(m, [1.0, 2.0])
        a, b = Two.apply(x)
        a.sum().backward()
        return b.requires_grad, b.grad_fn, b.is_leaf, got[0], x.grad
    compare(run)


def test_set_materialize_grads_false_passes_none():
    def run(m):
        got = []

        class Lazy(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x.clone(), x.clone()

            @staticmethod
            def backward(ctx, g1, g2):
                got.append((g1 is None, g2 is None))
                return g1

        x = f64(m, [1.0, 2.0])
        a, _ = Lazy.apply(x)
        a.sum().backward()
        return x.grad, got[0]
    compare(run)


# ---- once_differentiable, double backward (contract rules 1, 2) -----------------------------

def once_square(m):
    class OnceSquare(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g
    return OnceSquare


def test_once_differentiable_with_a_plain_incoming_gradient():
    def run(m):
        x = f64(m, [1.0, 2.0])
        (g,) = m.autograd.grad(once_square(m).apply(x).sum(), x, create_graph=True)
        assert g.grad_fn is None and not g.requires_grad
        g.sum().backward()
    assert_same_error(run, "does not require grad")


def test_once_differentiable_with_an_incoming_gradient_that_requires_grad():
    def run(m):
        x = f64(m, [1.0, 2.0])
        v = f64(m, [1.0, 1.0])
        (g,) = m.autograd.grad(once_square(m).apply(x), x, v, create_graph=True)
        assert g.requires_grad
        g.sum().backward()
    assert_same_error(run, "trying to differentiate twice a function that was marked with @once_differentiable")


def test_differentiable_backward_gives_second_derivatives():
    def run(m):
        class Cube(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x * x

        x = f64(m, [2.0, -1.0])
        (g1,) = m.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), x)
        return g1, g2
    compare(run)


# ---- saved_tensors_hooks (contract rule 12) -------------------------------------------------

def logging_hooks(log, tag="outer"):
    def pack(t):
        log.append((tag, "pack", tuple(t.shape)))
        return t.clone()

    def unpack(t):
        log.append((tag, "unpack", tuple(t.shape)))
        return t
    return pack, unpack


def saves_none_and_x(m):
    class SavesNone(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            ctx.saved_tensors
            (_, x) = ctx.saved_tensors
            return 2 * g
    return SavesNone


def test_saved_tensors_hooks_pack_once_unpack_every_access():
    def run(m):
        log = []
        x = f64(m, [1.0, 2.0])
        with m.autograd.graph.saved_tensors_hooks(*logging_hooks(log)):
            y = saves_none_and_x(m).apply(x)
            z = x * x  # a built-in op's saved tensors are packed too
        packed = list(log)
        y.sum().backward()
        z.sum().backward()
        return packed, log[len(packed):], x.grad
    compare(run)


def test_innermost_saved_tensors_hooks_win_and_backward_only_hooks_do_nothing():
    def run(m):
        log = []
        x = f64(m, [1.0, 2.0])
        with m.autograd.graph.saved_tensors_hooks(*logging_hooks(log, "outer")):
            with m.autograd.graph.saved_tensors_hooks(*logging_hooks(log, "inner")):
                y = once_square(m).apply(x)
        w = once_square(m).apply(x)
        with m.autograd.graph.saved_tensors_hooks(*logging_hooks(log, "late")):
            y.sum().backward()
            w.sum().backward()
        return log, x.grad
    compare(run)


def test_saved_tensors_hooks_skip_the_version_check():
    def run(m):
        log = []
        a = f64(m, [1.0, 1.0])
        with m.autograd.graph.saved_tensors_hooks(*logging_hooks(log)):
            b = a * 1
            z = once_square(m).apply(b)
        with m.no_grad():
            b.add_(1)
        z.sum().backward()
        return (a.grad,)
    compare(run)


def test_unpack_hook_must_return_a_tensor():
    def run(m):
        x = f64(m, [1.0, 2.0])
        with m.autograd.graph.saved_tensors_hooks(lambda t: 1, lambda p: p):
            y = x * x
        y.sum().backward()
    assert_same_error(run, "Output of saved tensor unpack_hook expected to be a Tensor but got result of type int")


def test_saved_tensors_under_hooks_are_released():
    def run(m):
        x = f64(m, [1.0, 2.0])
        with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
            y = once_square(m).apply(x).sum()
        y.backward()
        y.backward()
    assert_same_error(run, "Trying to backward through the graph a second time")


# ---- save_for_forward (stored only) ---------------------------------------------------------

def test_save_for_forward_rejects_non_tensors():
    def run(m):
        class Saves(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_forward(x, 3)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        Saves.apply(f64(m, [1.0]))
    assert_same_error(run, "save_for_forward expects all arguments to be tensors")


def test_save_for_forward_stores_tensors():
    class Saves(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x, None)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    x = f64(gradviz, [1.0])
    y = Saves.apply(x)
    assert y.grad_fn.saved_for_forward[0] is x and y.grad_fn.saved_for_forward[1] is None


# ---- legacy classes (contract rule 16) ------------------------------------------------------

def test_inplace_function_warns_when_instantiated_and_keeps_the_flag():
    def run(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = m.autograd.function.InplaceFunction(inplace=True)
        categories = [w.category.__name__ for w in caught]
        return f.inplace, m.autograd.function.InplaceFunction().inplace, categories
    compare(run)


def test_inplace_function_subclass_applies():
    def run(m):
        class Twice(m.autograd.function.InplaceFunction):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = f64(m, [1.0, 2.0])
        Twice.apply(x).sum().backward()
        return (x.grad,)
    compare(run)


def test_calling_a_function_instance_is_the_legacy_error():
    def run(m):
        class Twice(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Twice()(f64(m, [1.0]))
    assert_same_error(run, "Legacy autograd function with non-static forward method is deprecated.")


class NestedAffine(gradviz.autograd.function.NestedIOFunction):
    """(a, [b, c]) -> (a * b + c, [a - c]), with nested saved tensors."""

    def forward_extended(self, a, rest):
        b, c = rest
        self.save_for_backward(a, [b])
        return a * b + c, [a - c]

    def backward_extended(self, g_out, g_list):
        a, (b,) = self.saved_tensors
        (g_diff,) = g_list
        return g_out * b + g_diff, [g_out * a, g_out - g_diff]


def test_nested_io_function_forward_and_backward_extended():
    a, b, c = (f64(gradviz, v) for v in ([1.0, 2.0], [3.0, 4.0], [5.0, 6.0]))
    out, (diff,) = NestedAffine.apply(a, [b, c])
    assert type(out.grad_fn).__name__ == "NestedAffineBackward"
    (out.sum() + 2 * diff.sum()).backward()
    # compare with the same function written with plain torch ops
    ta, tb, tc = (f64(torch, v) for v in ([1.0, 2.0], [3.0, 4.0], [5.0, 6.0]))
    ((ta * tb + tc).sum() + 2 * (ta - tc).sum()).backward()
    for mine, ref in ((out, None), (a.grad, ta.grad), (b.grad, tb.grad), (c.grad, tc.grad)):
        if ref is not None:
            assert_tensors_equal(mine, ref)


def test_nested_io_function_legacy_call_form_sees_instance_attributes():
    class Scaled(gradviz.autograd.function.NestedIOFunction):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward_extended(self, pair):
            return pair[0] * self.scale + pair[1]

        def backward_extended(self, g):
            return [g * self.scale, g]

    a, b = f64(gradviz, [1.0, 2.0]), f64(gradviz, [3.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        y = Scaled(3.0)([a, b])
    y.sum().backward()
    assert a.grad.tolist() == [3.0, 3.0] and b.grad.tolist() == [1.0, 1.0]


def test_nested_io_function_rejects_unknown_nesting():
    with pytest.raises(ValueError, match="Auto nesting doesn't know how to process"):
        NestedAffine.apply(f64(gradviz, [1.0]), [f64(gradviz, [1.0]), 3])
