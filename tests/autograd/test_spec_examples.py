"""Every code example of the documents gradviz's Function contract was specified from, run with
``import gradviz as torch`` (``m`` below is gradviz or torch). Only the import and helpers the
documents leave undefined are adapted. Where torch can run an example, both must agree.

The tests are numbered by document: ``000`` is PyTorch 2.14's reference page for
``NestedIOFunction`` (the full ctx API, with ``input_grad_buffers`` and
``set_output_grad_dtype``), ``001`` the same reference for ``InplaceFunction`` (``mark_dirty``,
``mark_non_differentiable``, ``save_for_backward`` examples), and ``003`` a tutorial on custom
Functions (``apply``, arity, ``needs_input_grad``, double backward). What they define is
written out in docs/function_contract.md."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch

import gradviz

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "torch_compare_for_spec", os.path.join(_HERE, "..", "engine", "torch_compare.py"))
_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compare)
assert_same_error = _compare.assert_same_error
assert_tensors_equal = _compare.assert_tensors_equal


def both(program):
    gv, th = program(gradviz), program(torch)
    for i, (a, b) in enumerate(zip(gv, th)):
        if isinstance(b, torch.Tensor) or b is None:
            assert_tensors_equal(a, b, rtol=1e-6, atol=1e-6, what=f"result {i}")
        else:
            assert a == b, f"result {i}: {a!r} vs {b!r}"
    return gv, th


# ---- 003: the tutorial ------------------------------------------------------------------

def test_003_square():
    def program(m):
        class SquareFn(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output * 2 * x  # d(x^2)/dx = 2x

        x = m.tensor([2.0, 3.0], requires_grad=True)
        y = SquareFn.apply(x)
        y.sum().backward()
        return (x.grad,)  # tensor([4., 6.])
    gv, _ = both(program)
    assert gv[0].tolist() == [4.0, 6.0]


def test_003_clipped_relu():
    def program(m):
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
                return grad_output * mask, None  # None -> max_val is not a tensor

        x = m.tensor([-1.0, 0.5, 3.0], requires_grad=True)
        out = ClippedReLU.apply(x, 2.0)
        out.sum().backward()
        return (x.grad,)  # [0., 1., 0.]
    gv, _ = both(program)
    assert gv[0].tolist() == [0.0, 1.0, 0.0]


def test_003_matmul():
    def program(m):
        class MatmulFn(m.autograd.Function):
            """y = a @ b; backward recomputes nothing extra (uses saved a,b)."""
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a @ b

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return g @ b.t(), a.t() @ g  # dL/da, dL/db

        rng = np.random.default_rng(0)  # torch.randn: the same values in both
        a = m.tensor(rng.standard_normal((4, 8)).astype(np.float32), requires_grad=True)
        b = m.tensor(rng.standard_normal((8, 3)).astype(np.float32), requires_grad=True)
        MatmulFn.apply(a, b).sum().backward()
        return tuple(a.grad.shape), a.grad, b.grad
    both(program)


def test_003_cube_double_backward():
    def program(m):
        class CubeFn(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x * x

            # d/dx (g * 3x^2) needed if create_graph=True used:
            @staticmethod
            def double_backward(ctx, gg):
                (x,) = ctx.saved_tensors
                return gg * 6 * x

        x = m.tensor([2.0], requires_grad=True)
        y = CubeFn.apply(x)
        g1 = m.autograd.grad(y, x, create_graph=True)[0]
        g2 = m.autograd.grad(g1, x)[0]
        return g1.item(), g2.item()  # 12.0 12.0 (3*2^2, 6*2)
    gv, _ = both(program)
    assert gv == (12.0, 12.0)


def test_003_chained_needs_input_grad():
    def program(m):
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

        x = m.tensor([1.0, 2.0], requires_grad=True)
        Chained.apply(x).sum().backward()
        return (x.grad,)
    both(program)


def test_003_call_instead_of_apply_is_the_legacy_error():
    def program(m):
        class SquareFn(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * x

        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            SquareFn()(m.tensor([1.0]))
    assert_same_error(program, "Legacy autograd function with non-static forward method is deprecated")


# ---- 000 / 001: the reference pages -------------------------------------------------------

def test_000_input_grad_buffers_matmul_under_either_order():
    """The ``Matmul`` example; its helpers ``matmul_backward_*`` and ``other_op`` are not
    defined by the page, so they are defined here. torch has no ``input_grad_buffers``: the
    gradients are compared with torch's plain ``x @ weight``."""
    offered = []

    def matmul_backward_input_acc(grad_output, weight, acc_into):
        acc_into.add_(grad_output @ weight.t())

    def matmul_backward_input(grad_output, weight):
        return grad_output @ weight.t()

    def matmul_backward_weight(grad_output, x):
        return x.t() @ grad_output

    class Matmul(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            ctx.save_for_backward(x, weight)
            return x @ weight

        @staticmethod
        def backward(ctx, grad_output):
            x, weight = ctx.saved_tensors
            x_buffer, _ = ctx.input_grad_buffers
            offered.append(x_buffer is not None)
            if x_buffer is not None:
                # Computes grad_x and adds it to the existing buffer.
                matmul_backward_input_acc(grad_output, weight, acc_into=x_buffer)
                grad_x = None
            else:
                grad_x = matmul_backward_input(grad_output, weight)
            grad_weight = matmul_backward_weight(grad_output, x)
            return grad_x, grad_weight

    rng = np.random.default_rng(1)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    for other_first in (True, False):
        x = gradviz.tensor(xv, requires_grad=True)
        weight = gradviz.tensor(wv, requires_grad=True)
        tx = torch.tensor(xv, requires_grad=True)
        tw = torch.tensor(wv, requires_grad=True)
        if other_first:
            # other_op(x) runs before Matmul: its node has the higher sequence number
            mm = Matmul.apply(x, weight)
            loss = (mm * x[:, :2]).sum()
            (tx @ tw * tx[:, :2]).sum().backward()
        else:
            # Matmul runs first: x's buffer is still empty
            doubled = x * 2
            loss = Matmul.apply(doubled.exp(), weight).sum() + doubled.sum()
            ((tx * 2).exp() @ tw).sum().backward()
            (tx * 2).sum().backward()
        loss.backward()
        assert_tensors_equal(x.grad, tx.grad, rtol=1e-10, atol=1e-10)
        assert_tensors_equal(weight.grad, tw.grad, rtol=1e-10, atol=1e-10)
    assert offered == [True, False]


def test_000_001_save_for_forward_example_without_forward_ad():
    """The ``save_for_forward`` example; its ``fwAD`` part is forward-mode AD (not part of
    this contract yet), so the Function is exercised through ``vjp``."""
    def program(m):
        class Func(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y, z: int):
                ctx.save_for_backward(x, y)
                ctx.save_for_forward(x, y)
                ctx.z = z
                return x * y * z

            @staticmethod
            def jvp(ctx, x_t, y_t, _):
                x, y = ctx.saved_tensors
                z = ctx.z
                return z * (y * x_t + x * y_t)

            @staticmethod
            def vjp(ctx, grad_out):
                x, y = ctx.saved_tensors
                z = ctx.z
                return z * grad_out * y, z * grad_out * x, None

        a = m.tensor(1., requires_grad=True, dtype=m.double)
        b = m.tensor(2., requires_grad=True, dtype=m.double)
        c = 4
        d = Func.apply(a, b, c)
        d.backward()
        return d, a.grad, b.grad
    both(program)


def test_000_001_set_materialize_grads_examples():
    def program(m):
        once_differentiable = m.autograd.function.once_differentiable

        class SimpleFunc(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone(), x.clone()

            @staticmethod
            @once_differentiable
            def backward(ctx, g1, g2):
                return g1 + g2  # No check for None necessary

        # We modify SimpleFunc to handle non-materialized grad outputs
        class Func(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                ctx.save_for_backward(x)
                return x.clone(), x.clone()

            @staticmethod
            @once_differentiable
            def backward(ctx, g1, g2):
                x, = ctx.saved_tensors
                grad_input = m.zeros_like(x)
                if g1 is not None:  # We must check for None now
                    grad_input += g1
                if g2 is not None:
                    grad_input += g2
                return grad_input

        a = m.tensor(1., requires_grad=True)
        b, _ = Func.apply(a)  # induces g2 to be undefined
        b.backward()
        first = a.grad.clone()
        s, _ = SimpleFunc.apply(a)
        s.backward()
        return first, a.grad
    both(program)


def test_000_001_set_output_grad_dtype_example():
    """torch 2.13 has no ``set_output_grad_dtype``: gradviz only (see test_output_grad_dtype)."""
    m = gradviz
    seen = []

    class Trig(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            t1 = x.sin()
            t2 = x.cos()
            t3 = x.sin() / x.cos()  # x.tan()
            ctx.set_output_grad_dtype(m.float32, t2.dtype, None, None)
            return t1, t2, t3, "not a tensor"

        @staticmethod
        def backward(ctx, g1, g2, g3, g4):
            seen.append((g1.dtype, g2.dtype, g3.dtype, g4))
            return g1.to(m.float64) + g2 + g3

    x = m.tensor([0.5], dtype=m.float64, requires_grad=True)
    t1, t2, t3, tag = Trig.apply(x)
    (t1 + t2 + t3).sum().backward()
    assert tag == "not a tensor"
    assert seen == [(m.float32, m.float64, m.float64, None)]
    assert x.grad.dtype == m.float64


def test_001_mark_dirty_numpy_example():
    def program(m):
        once_differentiable = m.autograd.function.once_differentiable

        class Inplace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x_npy = x.numpy()  # x_npy shares storage with x
                x_npy += 1
                ctx.mark_dirty(x)
                return x

            @staticmethod
            @once_differentiable
            def backward(ctx, grad_output):
                return grad_output

        a = m.tensor(1., requires_grad=True, dtype=m.double).clone()
        b = a * a
        Inplace.apply(a)  # This would lead to wrong gradients!
                          # but the engine would not know unless we mark_dirty
        b.backward()  # RuntimeError: one of the variables needed for gradient
                      # computation has been modified by an inplace operation
    assert_same_error(program, "one of the variables needed for gradient computation has been "
                               "modified by an inplace operation")


def test_001_mark_non_differentiable_sort_example():
    def program(m):
        once_differentiable = m.autograd.function.once_differentiable

        class Func(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                sorted, idx = x.sort()
                ctx.mark_non_differentiable(idx)
                ctx.save_for_backward(x, idx)
                return sorted, idx

            @staticmethod
            @once_differentiable
            def backward(ctx, g1, g2):  # still need to accept g2
                x, idx = ctx.saved_tensors
                grad_input = m.zeros_like(x)
                grad_input.index_add_(0, idx, g1)
                return grad_input

        x = m.tensor([3.0, 1.0, 2.0], requires_grad=True)
        values, idx = Func.apply(x)
        (values * m.tensor([1.0, 2.0, 3.0])).sum().backward()
        return x.grad, idx, idx.requires_grad
    both(program)


def test_001_save_for_backward_example():
    def program(m):
        once_differentiable = m.autograd.function.once_differentiable

        class Func(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y, z: int):
                w = x * z
                out = x * y + y * z + w * y
                ctx.save_for_backward(x, y, w, out)
                ctx.z = z  # z is not a tensor
                return out

            @staticmethod
            @once_differentiable
            def backward(ctx, grad_out):
                x, y, w, out = ctx.saved_tensors
                z = ctx.z
                gx = grad_out * (y + y * z)
                gy = grad_out * (x + z + w)
                gz = None
                return gx, gy, gz

        a = m.tensor(1., requires_grad=True, dtype=m.double)
        b = m.tensor(2., requires_grad=True, dtype=m.double)
        c = 4
        d = Func.apply(a, b, c)
        d.backward()
        return d, a.grad, b.grad
    both(program)


@pytest.mark.parametrize("style", ["ctx", "setup_context"])
def test_001_both_forward_styles(style):
    def program(m):
        if style == "ctx":
            class Mul(m.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.save_for_backward(x, y)
                    return x * y

                @staticmethod
                def backward(ctx, g):
                    x, y = ctx.saved_tensors
                    return g * y, g * x
        else:
            class Mul(m.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x * y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(*inputs)

                @staticmethod
                def backward(ctx, g):
                    x, y = ctx.saved_tensors
                    return g * y, g * x

        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = m.tensor([3.0, 4.0], requires_grad=True)
        Mul.apply(x, y).sum().backward()
        return x.grad, y.grad
    both(program)
