"""Conformance sweep, the custom ``autograd.Function`` contract: programs of the kind found in
the "Extending PyTorch" notes, the custom Function tutorial and course notebooks, each run with
``import gradviz as torch`` and with real PyTorch; ``sweep_harness`` compares everything
observed (see its docstring).

Covered here: both forward styles (``forward(ctx, ...)`` and ``setup_context``), non-tensor
arguments, ``save_for_backward`` (inputs, outputs, intermediates, ``None``) and its release,
ctx attributes, ``needs_input_grad``, ``mark_dirty``, ``mark_non_differentiable``,
``set_materialize_grads``, what ``backward`` may return (arity, shapes, dtypes), several
outputs, views and identities, ``once_differentiable``, double backward, ``gradcheck``,
Functions inside modules, hooks, grad modes, ``saved_tensors_hooks``, forward-mode ``jvp``,
and the errors of misuse.
"""

from __future__ import annotations

import pytest
from sweep_harness import check, node_name, registry

program = registry()


# ---- the two forward styles -------------------------------------------------------------------

@program
def fn_ctx_style_square(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 2 * x * grad_output

    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = Square.apply(x)
    o("y", y)
    o("grad_fn name", y.grad_fn.name())
    o("grad_fn class", type(y.grad_fn).__name__)
    o("next", [node_name(f) for f, _ in y.grad_fn.next_functions])
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_setup_context_style_mul(torch, o):
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            a, b = inputs
            ctx.save_for_backward(a, b)
            ctx.out_shape = output.shape

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = torch.tensor([[0.5, -1.0], [2.0, 0.0]], requires_grad=True)
    y = Mul.apply(a, b)
    o("y", y)
    o("out shape", y.grad_fn.out_shape)
    (y * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("grads", [a.grad, b.grad])


@program
def fn_setup_context_sees_inputs_tuple_and_output(torch, o):
    seen = {}

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(x, factor, name):
            return x * factor

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen["inputs type"] = type(inputs).__name__
            seen["len"] = len(inputs)
            seen["factor"] = inputs[1]
            seen["name"] = inputs[2]
            seen["output requires grad"] = output.requires_grad
            seen["output grad_fn"] = output.grad_fn is None
            ctx.factor = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, 2.5, "scale")
    y.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_setup_context_multiple_outputs_tuple(torch, o):
    class SinCos(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sin(), x.cos()

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            s, c = output
            ctx.save_for_backward(s, c)

        @staticmethod
        def backward(ctx, gs, gc):
            s, c = ctx.saved_tensors
            return gs * c - gc * s

    x = torch.tensor([0.1, 0.7, -1.3], requires_grad=True)
    s, c = SinCos.apply(x)
    o("out", [s, c])
    o("same node", s.grad_fn is c.grad_fn)
    o("output_nr", [s.output_nr, c.output_nr])
    (s * 2 + c * 3).sum().backward()
    o("grad", x.grad)


@program
def fn_non_tensor_arguments(torch, o):
    class Clamp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, low, high, note):
            ctx.low, ctx.high = low, high
            ctx.save_for_backward(x)
            return x.clamp(low, high)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            mask = (x >= ctx.low) & (x <= ctx.high)
            return g * mask, None, None, None

    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], requires_grad=True)
    y = Clamp.apply(x, -1, 1.0, None)
    o("y", y)
    y.sum().backward()
    o("grad", x.grad)
    o("next", len(y.grad_fn.next_functions))


@program
def fn_tuple_and_list_arguments_are_opaque(torch, o):
    seen = []

    class Weighted(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weights, shape):
            seen.append(tuple(ctx.needs_input_grad))
            total = x * weights[0] + weights[1]
            return total.reshape(shape)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(-1) * 2.0, None, None

    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    w0 = torch.tensor(2.0, requires_grad=True)
    w1 = torch.tensor(1.0, requires_grad=True)
    y = Weighted.apply(x, [w0, w1], (2, 2))
    o("y", y)
    o("seen", seen)
    y.sum().backward()
    o("x grad", x.grad)
    o("w grads", [w0.grad, w1.grad])
    o("next", len(y.grad_fn.next_functions))


@program
def fn_gradient_for_list_argument_is_an_error(torch, o):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, extra):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Bad.apply(x, [torch.tensor(1.0)])
    o.raises("backward", lambda: y.sum().backward(),
             "returned a gradient different than None at position 2, but the corresponding "
             "forward input was not a Variable")


@program
def fn_no_tensor_requires_grad(torch, o):
    calls = []

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            calls.append(tuple(ctx.needs_input_grad))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0])
    y = Double.apply(x)
    o("y", y)
    o("grad_fn none", y.grad_fn is None)
    o("calls", calls)
    o.raises("backward", lambda: y.sum().backward(),
             "element 0 of tensors does not require grad and does not have a grad_fn")


@program
def fn_only_second_input_requires_grad(torch, o):
    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return x @ w.t() + b

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            gx = gw = gb = None
            if ctx.needs_input_grad[0]:
                gx = g @ w
            if ctx.needs_input_grad[1]:
                gw = g.t() @ x
            if ctx.needs_input_grad[2]:
                gb = g.sum(0)
            return gx, gw, gb

    x = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
    w = torch.tensor([[0.1, 0.2, 0.3], [-0.3, 0.2, -0.1]], requires_grad=True)
    b = torch.tensor([0.5, -0.5])
    y = Linear.apply(x, w, b)
    o("needs", y.grad_fn.needs_input_grad)
    y.pow(2).sum().backward()
    o("grads", [x.grad, w.grad, b.grad])
    o("next", [node_name(f) for f, _ in y.grad_fn.next_functions])


# ---- save_for_backward ------------------------------------------------------------------------

@program
def fn_save_output_exp(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, g):
            (result,) = ctx.saved_tensors
            return g * result

    x = torch.tensor([0.0, 1.0, -1.0], requires_grad=True)
    y = Exp.apply(x)
    (saved,) = y.grad_fn.saved_tensors
    o("saved equal", torch.equal(saved, y))
    o("saved is y", saved is y)
    o("saved grad_fn", saved.grad_fn is y.grad_fn)
    o("saved", saved)
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_save_intermediate_tensor(torch, o):
    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            t = x.tanh()
            one_minus = 1 - t * t
            ctx.save_for_backward(one_minus)
            return t

        @staticmethod
        def backward(ctx, g):
            (d,) = ctx.saved_tensors
            return g * d

    x = torch.tensor([0.2, -0.4, 1.5], requires_grad=True)
    y = Tanh.apply(x)
    (saved,) = y.grad_fn.saved_tensors
    o("saved", saved)
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_save_none_and_tensors(torch, o):
    class Affine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w, None)
            return x * w + (b if b is not None else 0)

        @staticmethod
        def backward(ctx, g):
            x, w, nothing = ctx.saved_tensors
            return g * w, g * x, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    y = Affine.apply(x, w, None)
    saved = y.grad_fn.saved_tensors
    o("len", len(saved))
    o("third", saved[2])
    y.sum().backward()
    o("grads", [x.grad, w.grad])


@program
def fn_saved_tensors_after_backward_error(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x)
    y.sum().backward()
    node = y.grad_fn
    o.raises("saved after", lambda: node.saved_tensors,
             "Trying to backward through the graph a second time")
    o.raises("second backward", lambda: y.sum().backward(),
             "Trying to backward through the graph a second time")


@program
def fn_saved_tensors_retained(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x)
    y.sum().backward(retain_graph=True)
    o("saved", y.grad_fn.saved_tensors)
    y.sum().backward()
    o("grad twice", x.grad)
    o.raises("third", lambda: y.sum().backward(), "Trying to backward through the graph a second time")


@program
def fn_save_only_none_still_releases(torch, o):
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class NoSave(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = NoSave.apply(x).sum()
    y.backward()
    y.backward()
    o("no save twice", x.grad)
    z = Twice.apply(x).sum()
    z.backward()
    o.raises("saved none twice", z.backward, "Trying to backward through the graph a second time")


@program
def fn_save_for_backward_non_tensor_type_error(torch, o):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x, k)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, None

    x = torch.tensor([1.0], requires_grad=True)
    o.raises("float", lambda: Bad.apply(x, 2.0),
             "save_for_backward can only save variables, but argument 1 is of type float")
    o.raises("list", lambda: Bad.apply(x, [1.0]),
             "save_for_backward can only save variables, but argument 1 is of type list")


@program
def fn_ctx_attributes_and_needs_input_grad(torch, o):
    log = []

    class Pow(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, exponent):
            ctx.exponent = exponent
            ctx.shape = x.shape
            ctx.mark = "forward ran"
            ctx.save_for_backward(x)
            log.append(("forward needs", ctx.needs_input_grad))
            return x ** exponent

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            log.append(("backward needs", ctx.needs_input_grad, ctx.mark, ctx.shape))
            return g * ctx.exponent * x ** (ctx.exponent - 1), None

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = Pow.apply(x, 3)
    o("exponent on node", y.grad_fn.exponent)
    y.sum().backward()
    o("log", log)
    o("grad", x.grad)


@program
def fn_saved_input_modified_in_place(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 1
    y = Square.apply(x)
    x.add_(1)
    o("version", x._version)
    o.raises("backward", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation")


@program
def fn_ctx_attribute_tensor_not_version_checked(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x * x

        @staticmethod
        def backward(ctx, g):
            return 2 * ctx.x * g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 1
    y = Square.apply(x)
    with torch.no_grad():
        x.mul_(10)
    y.sum().backward()
    o("grad uses the new value", a.grad)


@program
def fn_saved_output_modified_in_place(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    y = Exp.apply(x)
    y.mul_(2)
    o("y", y)
    o("grad_fn", y.grad_fn.name())
    o.raises("backward", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation")


# ---- mark_dirty -------------------------------------------------------------------------------

@program
def fn_mark_dirty_non_leaf(torch, o):
    class AddOne_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 2
    v0 = x._version
    y = AddOne_.apply(x)
    o("same object", y is x)
    o("version bumped", x._version - v0)
    o("y", y)
    o("grad_fn", y.grad_fn.name())
    o("x grad_fn", x.grad_fn.name())
    (y * y).sum().backward()
    o("grad", a.grad)


@program
def fn_mark_dirty_input_without_grad(torch, o):
    class Scale_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            x.mul_(w)
            ctx.mark_dirty(x)
            ctx.save_for_backward(w)
            return x

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * w, None

    x = torch.tensor([1.0, 2.0, 3.0])
    w = torch.tensor([2.0, 2.0, 2.0], requires_grad=True)
    y = Scale_.apply(x, w)
    o("y is x", y is x)
    o("x", x)
    o("x leaf", x.is_leaf)
    o("x requires grad", x.requires_grad)
    o("x grad_fn", node_name(x.grad_fn))
    y.sum().backward()
    o("w grad", w.grad)


@program
def fn_mark_dirty_leaf_requiring_grad_error(torch, o):
    class Inc_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("leaf", lambda: Inc_.apply(x),
             "a leaf Variable that requires grad has been used in an in-place operation")
    o("x after", x.detach())
    v = x[:1]
    o.raises("view of leaf", lambda: Inc_.apply(v),
             "a view of a leaf Variable that requires grad is being used in an in-place operation")
    with torch.no_grad():
        y = Inc_.apply(x)
    o("no_grad ok", y is x)
    o("no_grad x", x.detach())


@program
def fn_mark_dirty_not_returned_error(torch, o):
    class Sneaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a + 0
    o.raises("not returned", lambda: Sneaky.apply(x),
             "Some elements marked as dirty during the forward method were not returned as output")


@program
def fn_mark_dirty_view_of_non_leaf(torch, o):
    class Neg_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.neg_()
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return -g

    a = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    base = a * 1
    view = base[1:3]
    out = Neg_.apply(view)
    o("out is view", out is view)
    o("base", base)
    o("base grad_fn", node_name(base.grad_fn))
    o("view grad_fn", node_name(view.grad_fn))
    (base * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    o("grad", a.grad)


@program
def fn_mark_dirty_numpy_write_bumps_version(torch, o):
    class NumpyScale_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            arr = x.numpy()
            arr *= 3
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = torch.tensor([1.0, 2.0])
    v0 = x._version
    y = NumpyScale_.apply(x)
    o("version delta", x._version - v0)
    o("y", y)


@program
def fn_mark_dirty_returns_extra_output(torch, o):
    class AddAndReport_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            x.add_(y)
            ctx.mark_dirty(x)
            return x, y * 2

        @staticmethod
        def backward(ctx, gx, gy2):
            return gx, gx + 2 * gy2

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a.clone()
    y = torch.tensor([0.5, 0.5], requires_grad=True)
    out, doubled = AddAndReport_.apply(x, y)
    o("out is x", out is x)
    o("values", [out, doubled])
    (out.sum() + doubled.sum() * 3).backward()
    o("grads", [a.grad, y.grad])


@program
def fn_mark_dirty_non_input_warns(torch, o):
    class Fresh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.mark_dirty(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = o.warns("warns", lambda: Fresh.apply(x))
    y.sum().backward()
    o("grad", x.grad)


# ---- mark_non_differentiable ------------------------------------------------------------------

@program
def fn_argmax_non_differentiable(torch, o):
    class MaxWithIndex(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, idx = x.max(dim=1)
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            ctx.shape = x.shape
            return values, idx

        @staticmethod
        def backward(ctx, gv, gi):
            (idx,) = ctx.saved_tensors
            grad = torch.zeros(ctx.shape, dtype=gv.dtype)
            grad.scatter_(1, idx.unsqueeze(1), gv.unsqueeze(1))
            return grad

    x = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    values, idx = MaxWithIndex.apply(x)
    o("values", values)
    o("idx", idx)
    o("idx grad_fn", idx.grad_fn is None)
    (values * torch.tensor([2.0, 3.0])).sum().backward()
    o("grad", x.grad)


@program
def fn_integer_output_zero_grad_dtype(torch, o):
    seen = []

    class Quantize(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            q = (x * 4).round().to(torch.int64)
            return x * 1, q

        @staticmethod
        def backward(ctx, g, gq):
            seen.append((gq.dtype, tuple(gq.shape), gq.sum().item()))
            return g

    x = torch.tensor([0.1, 0.6, 1.3], requires_grad=True)
    y, q = Quantize.apply(x)
    o("q", q)
    o("q requires grad", q.requires_grad)
    o("y requires grad", y.requires_grad)
    y.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_float_output_marked_non_differentiable(torch, o):
    seen = []

    class WithMask(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(mask)
            return x * mask, mask

        @staticmethod
        def backward(ctx, g, gmask):
            (mask,) = ctx.saved_tensors
            seen.append(gmask)
            return g * mask

    x = torch.tensor([-1.0, 2.0, 0.5], requires_grad=True)
    y, mask = WithMask.apply(x)
    o("mask", mask)
    o("mask leaf", mask.is_leaf)
    o.raises("mask backward", lambda: mask.sum().backward(), "does not require grad")
    (y.sum() + mask.sum()).backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_non_differentiable_output_used_downstream(torch, o):
    class Sort(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort()
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, gv, gi):
            (indices,) = ctx.saved_tensors
            o("gi", gi)
            grad = torch.zeros_like(gv)
            grad.index_add_(0, indices, gv)
            return grad

    x = torch.tensor([3.0, 1.0, 2.0, 0.5], requires_grad=True)
    values, indices = Sort.apply(x)
    weights = torch.arange(4.0)[indices]
    (values * weights).sum().backward()
    o("grad", x.grad)


# ---- set_materialize_grads ------------------------------------------------------------------

@program
def fn_materialize_grads_default_zeros(torch, o):
    seen = []

    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append([g1, g2])
            return g1 * 2 + g2 * 3

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Split.apply(x)
    a.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_set_materialize_grads_false(torch, o):
    seen = []

    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x.clone(), x * x

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            seen.append((g1 is None, g2 is None))
            grad = torch.zeros_like(x)
            if g1 is not None:
                grad = grad + g1
            if g2 is not None:
                grad = grad + 2 * x * g2
            return grad

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Split.apply(x)
    b.sum().backward(retain_graph=True)
    a.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_set_materialize_grads_false_in_setup_context(torch, o):
    seen = []

    class Pair(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2, x.sum()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.set_materialize_grads(False)

        @staticmethod
        def backward(ctx, g, gs):
            seen.append((g is None, gs is None))
            total = 0
            if g is not None:
                total = total + g * 2
            if gs is not None:
                total = total + gs.expand(3)
            return total

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a, s = Pair.apply(x)
    (s * 5).backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_backward_returns_none_leaves_grad_none(torch, o):
    class Stop(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return None, g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    out = Stop.apply(x, y)
    out.sum().backward()
    o("x grad", x.grad)
    o("y grad", y.grad)


@program
def fn_backward_returns_extra_nones(torch, o):
    class Extra(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Extra.apply(x).sum().backward()
    o("grad", x.grad)


@program
def fn_backward_returns_too_many_non_none(torch, o):
    class Extra(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Extra.apply(x).sum()
    o.raises("too many", y.backward, "returned an incorrect number of gradients (expected 1, got 2)")


@program
def fn_backward_returns_too_few(torch, o):
    class Few(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
            return x + y + z

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([1.0], requires_grad=True)
    z = torch.tensor([1.0])
    out = Few.apply(x, y, z)
    o.raises("too few", lambda: out.backward(),
             "returned an incorrect number of gradients (expected 3, got 2)")


@program
def fn_backward_returns_list(torch, o):
    class ListGrads(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return [g, g]

    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([2.0], requires_grad=True)
    out = ListGrads.apply(x, y)
    o.raises("list", lambda: out.backward(), "incorrect number of gradients")


@program
def fn_backward_returns_number(torch, o):
    class Numeric(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 2.0

    x = torch.tensor([1.0], requires_grad=True)
    out = Numeric.apply(x)
    o.raises("number", lambda: out.backward(), "expected Variable or None (got float)")


@program
def fn_backward_wrong_shape_error(torch, o):
    class BadShape(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return g.expand(7)

    x = torch.ones(2, 3, requires_grad=True)
    out = BadShape.apply(x)
    o.raises("shape", out.backward,
             "returned an invalid gradient at index 0 - got [7] but expected shape compatible with [2, 3]")


@program
def fn_backward_smaller_broadcastable_shape_error(torch, o):
    class Small(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum(0, keepdim=True)

    x = torch.ones(2, 3, requires_grad=True)
    out = Small.apply(x)
    o.raises("shape", lambda: out.sum().backward(),
             "returned an invalid gradient at index 0 - got [1, 3] but expected shape compatible with [2, 3]")


@program
def fn_backward_scalar_grad_for_vector_error(torch, o):
    class Scalar(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.ones(3, requires_grad=True)
    out = Scalar.apply(x)
    o.raises("scalar", out.backward, "returned an invalid gradient at index 0 - got [] but expected shape compatible with [3]")


@program
def fn_backward_extra_leading_dims_summed(torch, o):
    class Batched(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            return w * 1

        @staticmethod
        def backward(ctx, g):
            return g.unsqueeze(0).expand(4, *g.shape)

    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    Batched.apply(w).sum().backward()
    o("grad", w.grad)


@program
def fn_backward_wrong_dtype_is_cast(torch, o):
    class Float64Grad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return (g * 2).double()

    class IntGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ones(g.shape, dtype=torch.int64)

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Float64Grad.apply(x).sum().backward()
    o("float64 cast", x.grad)
    x.grad = None
    IntGrad.apply(x).sum().backward()
    o("int cast", x.grad)
    x.grad = None
    y = Float64Grad.apply(x) * 3
    (g,) = torch.autograd.grad(y.sum(), x)
    o("autograd.grad dtype", g)


@program
def fn_backward_float32_input_double_function(torch, o):
    seen = []

    class ToDouble(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.double() * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(g.dtype)
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = ToDouble.apply(x)
    o("y dtype", y.dtype)
    y.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


# ---- several outputs, views and identities ----------------------------------------------------

@program
def fn_three_outputs_one_unused(torch, o):
    seen = []

    class Stats(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mean = x.mean()
            centered = x - mean
            var = (centered * centered).mean()
            ctx.save_for_backward(centered)
            return mean, var, centered

        @staticmethod
        def backward(ctx, g_mean, g_var, g_centered):
            (centered,) = ctx.saved_tensors
            n = centered.numel()
            seen.append([g_mean, g_var, g_centered])
            grad = g_mean / n + g_var * 2 * centered / n
            grad = grad + g_centered - g_centered.mean()
            return grad

    x = torch.tensor([1.0, 2.0, 4.0, 7.0], requires_grad=True)
    mean, var, centered = Stats.apply(x)
    o("outputs", [mean, var, centered])
    o("output_nr", [mean.output_nr, var.output_nr, centered.output_nr])
    (var * 3).backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_outputs_used_by_two_consumers(torch, o):
    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:2].clone(), x[2:].clone()

        @staticmethod
        def backward(ctx, ga, gb):
            return torch.cat([ga, gb])

    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    a, b = Split.apply(x)
    loss = (a * a).sum() + (b ** 3).sum() + a.sum() * b.sum()
    loss.backward()
    o("grad", x.grad)


@program
def fn_identity_returns_new_object(torch, o):
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Identity.apply(x)
    o("is x", y is x)
    o("y", y)
    o("x leaf", x.is_leaf)
    o("base is x", y._base is x)
    o("grad_fn", y.grad_fn.name())
    o("shares data", y.data_ptr() == x.data_ptr())
    o("same version", y._version == x._version)
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_identity_output_in_place_error(torch, o):
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 1
    y = Identity.apply(x)
    o.raises("in place", lambda: y.mul_(2), "This view was created inside a custom Function")


@program
def fn_view_output_in_place_error(torch, o):
    class Head(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.n = x.shape[0]
            return x[:2]

        @staticmethod
        def backward(ctx, g):
            grad = torch.zeros(ctx.n, dtype=g.dtype)
            grad[:2] = g
            return grad

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = Head.apply(x)
    o("base is x", h._base is x)
    o("h", h)
    o.raises("in place", lambda: h.add_(1), "Output 0 of Head is a view and is being modified inplace. This view was created inside a custom Function")
    h.sum().backward()
    o("grad", x.grad)
    o("h clone fine", Head.apply(x).clone().add_(1))


@program
def fn_view_output_of_view_input(torch, o):
    class Transpose(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.t()

        @staticmethod
        def backward(ctx, g):
            return g.t()

    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = a * 1
    v = b[:, 1:]
    t = Transpose.apply(v)
    o("t", t)
    o("t base is b", t._base is b)
    (t * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("grad", a.grad)


@program
def fn_identity_non_leaf_and_two_outputs(torch, o):
    class PassBoth(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x, x + y

        @staticmethod
        def backward(ctx, gx, gs):
            return gx + gs, gs

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 3
    y = torch.tensor([0.5, 0.5], requires_grad=True)
    p, s = PassBoth.apply(x, y)
    o("p is x", p is x)
    o("p grad_fn", p.grad_fn.name())
    o("x grad_fn", x.grad_fn.name())
    (p * 2 + s).sum().backward()
    o("grads", [a.grad, y.grad])


@program
def fn_non_tensor_outputs(torch, o):
    seen = []

    class WithInfo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, "doubled", 2, None

        @staticmethod
        def backward(ctx, g, g_name, g_k, g_none):
            seen.append((g_name, g_k, g_none))
            return g * 2

    x = torch.tensor([1.0, 3.0], requires_grad=True)
    y, name, k, nothing = WithInfo.apply(x)
    o("extras", [name, k, nothing])
    y.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_list_output_not_tracked(torch, o):
    class AsList(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return [x * 2, x * 3]

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = AsList.apply(x)
    o("type", type(out).__name__)
    o("requires grad", [t.requires_grad for t in out])
    o("grad_fn", [t.grad_fn is None for t in out])


@program
def fn_scalar_output_from_vector(torch, o):
    class Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            n = x.norm()
            ctx.save_for_backward(x, n)
            return n

        @staticmethod
        def backward(ctx, g):
            x, n = ctx.saved_tensors
            return g * x / n

    x = torch.tensor([3.0, 4.0], requires_grad=True)
    n = Norm.apply(x)
    o("n", n)
    n.backward()
    o("grad", x.grad)


# ---- once_differentiable and double backward --------------------------------------------------

@program
def fn_once_differentiable_first_order(torch, o):
    once_differentiable = torch.autograd.function.once_differentiable

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            o("grad mode in backward", torch.is_grad_enabled())
            return 3 * x * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Cube.apply(x).sum().backward()
    o("grad", x.grad)


@program
def fn_once_differentiable_create_graph_error(torch, o):
    once_differentiable = torch.autograd.function.once_differentiable

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x) * x
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    o("g grad_fn", node_name(g.grad_fn))
    o.raises("twice", lambda: g.sum().backward(),
             "trying to differentiate twice a function that was marked with @once_differentiable")


@program
def fn_once_differentiable_plain_grad_then_second(torch, o):
    once_differentiable = torch.autograd.function.once_differentiable

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    o.raises("second", lambda: g.sum().backward(), "does not require grad")


@program
def fn_double_backward_through_differentiable_backward(torch, o):
    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    x = torch.tensor([0.3, 1.1, -0.8], requires_grad=True)
    y = Sin.apply(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    o("g requires grad", g.requires_grad)
    (gg,) = torch.autograd.grad(g.sum(), x)
    o("gg", gg)


@program
def fn_double_backward_unused_double_backward_staticmethod(torch, o):
    calls = []

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def double_backward(ctx, gg):
            calls.append("called")
            return gg

    x = torch.tensor([1.5, -2.0], requires_grad=True)
    y = Square.apply(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    g.sum().backward()
    o("x grad", x.grad)
    o("calls", calls)


@program
def fn_hessian_vector_product(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    v = torch.tensor([1.0, 0.5, 2.0])
    y = Cube.apply(x).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (hv,) = torch.autograd.grad(g, x, grad_outputs=v)
    o("hv", hv)
    o("g", g)


@program
def fn_double_backward_saved_output(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    x = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64, requires_grad=True)
    y = Exp.apply(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    (ggg,) = torch.autograd.grad(gg.sum(), x)
    o("derivatives", [g, gg, ggg])


@program
def fn_gradcheck_two_inputs_float64(torch, o):
    class MulAdd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            ctx.save_for_backward(a, b)
            return a * b + c

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a, g

    a = torch.tensor([0.3, -0.2, 1.1], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.5, 0.7, -0.4], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, requires_grad=True)
    o("gradcheck", torch.autograd.gradcheck(MulAdd.apply, (a, b, c)))
    o("gradgradcheck", torch.autograd.gradgradcheck(MulAdd.apply, (a, b, c)))


@program
def fn_gradcheck_catches_wrong_backward(torch, o):
    class WrongSin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.sin()

    x = torch.tensor([0.3, 1.1], dtype=torch.float64, requires_grad=True)
    o("raise_exception False", torch.autograd.gradcheck(WrongSin.apply, (x,), raise_exception=False))
    o.raises("raises", lambda: torch.autograd.gradcheck(WrongSin.apply, (x,)),
             "Jacobian mismatch for output 0 with respect to input 0")


@program
def fn_gradcheck_non_tensor_arg(torch, o):
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = torch.tensor([0.3, 1.1], dtype=torch.float64, requires_grad=True)
    o("gradcheck", torch.autograd.gradcheck(Scale.apply, (x, 2.5)))
    o("gradgradcheck", torch.autograd.gradgradcheck(Scale.apply, (x, 2.5)))


@program
def fn_gradgradcheck_once_differentiable_fails(torch, o):
    once_differentiable = torch.autograd.function.once_differentiable

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([0.3, 1.1], dtype=torch.float64, requires_grad=True)
    o("gradcheck", torch.autograd.gradcheck(Square.apply, (x,)))
    o.raises("gradgradcheck", lambda: torch.autograd.gradgradcheck(Square.apply, (x,)),
             "Jacobian mismatch for output 0 with respect to input 0")


# ---- Functions in modules, hooks, retain_grad ------------------------------------------------

@program
def fn_inside_module_training_step(torch, o):
    class LinearFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    class MyLinear(torch.nn.Module):
        def __init__(self, w, b):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor(w))
            self.bias = torch.nn.Parameter(torch.tensor(b))

        def forward(self, x):
            return LinearFunction.apply(x, self.weight, self.bias)

    layer = MyLinear([[0.2, -0.1, 0.4], [0.3, 0.5, -0.2]], [0.1, -0.1])
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1]])
    target = torch.tensor([[1.0, 0.0], [0.5, -0.5], [0.2, 0.3]])
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((layer(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    o("losses", losses)
    o("weight", layer.weight)
    o("bias", layer.bias)
    o("out grad_fn", layer(x).grad_fn.name())


@program
def fn_module_with_function_under_no_grad_eval(torch, o):
    class ReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x > 0)

    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 2.0]]))
        lin.bias.copy_(torch.tensor([0.0, -1.0]))
    x = torch.tensor([[1.0, 2.0], [-1.0, 0.5]])
    with torch.no_grad():
        y = ReLU.apply(lin(x))
    o("y", y)
    o("y grad_fn", y.grad_fn is None)
    y2 = ReLU.apply(lin(x))
    o("y2", y2)
    y2.sum().backward()
    o("weight grad", lin.weight.grad)


@program
def fn_hook_on_output_and_input(torch, o):
    events = []

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            events.append(("backward", g.tolist()))
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: events.append(("x hook", g.tolist())))
    y = Double.apply(x)
    y.register_hook(lambda g: events.append(("y hook", g.tolist())) or g * 10)
    y.sum().backward()
    o("events", events)
    o("grad", x.grad)


@program
def fn_node_pre_and_post_hooks(torch, o):
    events = []

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            ctx.save_for_backward(a, b)
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            events.append("backward")
            return g * b, g * a, None

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    y = Mul.apply(a, b, 2)

    def pre(grad_outputs):
        events.append(("pre", len(grad_outputs), grad_outputs[0].tolist()))
        return (grad_outputs[0] * 2,)

    def post(grad_inputs, grad_outputs):
        events.append(("post", len(grad_inputs), [g.tolist() for g in grad_inputs]))
        return (grad_inputs[0], grad_inputs[1] * 0)

    h1 = y.grad_fn.register_prehook(pre)
    h2 = y.grad_fn.register_hook(post)
    y.sum().backward(retain_graph=True)
    o("events", events)
    o("grads", [a.grad, b.grad])
    h1.remove()
    h2.remove()
    events.clear()
    a.grad = b.grad = None
    y.sum().backward()
    o("events after remove", events)
    o("grads after remove", [a.grad, b.grad])


@program
def fn_retain_grad_on_function_output(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, -3.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    y = Square.apply(h)
    y.retain_grad()
    (y * torch.tensor([1.0, 2.0])).sum().backward()
    o("y grad", y.grad)
    o("h grad", h.grad)
    o("x grad", x.grad)
    o("y leaf", y.is_leaf)


@program
def fn_grad_fn_attributes(torch, o):
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, k):
            return x * w * k

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    x = torch.tensor([1.0], requires_grad=True)
    w = torch.tensor([2.0])
    y = Scale.apply(x * 1, w, 3)
    node = y.grad_fn
    o("name", node.name())
    o("next", [(node_name(f), nr) for f, nr in node.next_functions])
    o("needs", node.needs_input_grad)
    o("metadata", node.metadata)
    node.metadata["tag"] = "scaled"
    o("metadata after", y.grad_fn.metadata)
    o("is ctx", isinstance(node, torch.autograd.function.BackwardCFunction))
    o("is FunctionCtx", isinstance(node, torch.autograd.function.FunctionCtx))


@program
def fn_accumulates_over_two_backward_calls(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Cube.apply(x).sum().backward()
    Cube.apply(x).sum().backward()
    o("grad accumulated", x.grad)


@program
def fn_function_applied_twice_same_input(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(Square.apply(x)) + Square.apply(x)
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_same_tensor_passed_twice(torch, o):
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = Mul.apply(x, x)
    o("next", [(node_name(f), nr) for f, nr in y.grad_fn.next_functions])
    y.sum().backward()
    o("grad", x.grad)


# ---- grad modes and saved-tensor hooks -------------------------------------------------------

@program
def fn_apply_under_no_grad_and_enable_grad(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            o("forward grad mode", torch.is_grad_enabled())
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            o("backward grad mode", torch.is_grad_enabled())
            return 2 * x * g

    x = torch.tensor([2.0], requires_grad=True)
    with torch.no_grad():
        y = Square.apply(x)
        o("no_grad y", y)
        with torch.enable_grad():
            z = Square.apply(x)
    o("z", z)
    z.backward()
    o("grad", x.grad)


@program
def fn_apply_under_inference_mode(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([2.0, 3.0], requires_grad=True)
    with torch.inference_mode():
        y = Square.apply(x)
    o("y", y)
    o("inference", y.is_inference())
    o("grad_fn none", y.grad_fn is None)
    o.raises("use in autograd", lambda: (y * x).sum().backward(),
             "Inference tensors cannot be saved for backward")


@program
def fn_saved_tensors_hooks_pack_unpack(torch, o):
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t * 1

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, None, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, _, b = ctx.saved_tensors
            a2, _, b2 = ctx.saved_tensors
            return g * b, g * a

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([[3.0, 4.0]], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = Mul.apply(a, b)
    o("after forward", list(log))
    y.sum().backward()
    o("log", log)
    o("grads", [a.grad, b.grad])


@program
def fn_save_on_cpu_context(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.save_on_cpu():
        y = Square.apply(x)
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_disable_saved_tensors_hooks_error(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        y = Square.apply(x)

        def use_hooks():
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
        o.raises("hooks", use_hooks, "no hooks here")
    y.sum().backward()
    o("grad", x.grad)


# ---- forward-mode AD -------------------------------------------------------------------------

@program
def fn_jvp_forward_mode(torch, o):
    fwAD = torch.autograd.forward_ad

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_forward(a, b)
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

        @staticmethod
        def jvp(ctx, ta, tb):
            a, b = ctx.saved_tensors
            o("tangents None", [ta is None, tb is None])
            return ta * b + a * tb

    a = torch.tensor([1.0, 2.0])
    b = torch.tensor([3.0, -1.0])
    with fwAD.dual_level():
        da = fwAD.make_dual(a, torch.tensor([1.0, 0.0]))
        out = Mul.apply(da, b)
        primal, tangent = fwAD.unpack_dual(out)
    o("primal", primal)
    o("tangent", tangent)


@program
def fn_jvp_not_implemented_error(torch, o):
    fwAD = torch.autograd.forward_ad

    class NoJvp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0])

    def run():
        with fwAD.dual_level():
            dx = fwAD.make_dual(x, torch.ones(2))
            return NoJvp.apply(dx)
    o.raises("no jvp", run, "You must implement the jvp function for custom autograd.Function to use it with forward mode AD")
    o("no dual ok", NoJvp.apply(x))


@program
def fn_jvp_setup_context_style_and_non_tensor(torch, o):
    fwAD = torch.autograd.forward_ad

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

        @staticmethod
        def jvp(ctx, tx, tk):
            o("tk", tk)
            o("saved in jvp", ctx.saved_tensors)
            return tx * ctx.k

    x = torch.tensor([1.0, 2.0])
    with fwAD.dual_level():
        dx = fwAD.make_dual(x, torch.tensor([0.5, 0.5]))
        out = Scale.apply(dx, 3.0)
        o("tangent", fwAD.unpack_dual(out).tangent)


# ---- misuse errors -------------------------------------------------------------------------

@program
def fn_instance_call_legacy_error(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0], requires_grad=True)
    fn = o.warns("instantiate", lambda: Square(), "should not be instantiated")
    o.raises("call", lambda: fn(x), "Legacy autograd function with non-static forward method is deprecated")


@program
def fn_legacy_non_static_forward(torch, o):
    class Legacy(torch.autograd.Function):
        def forward(self, x):
            return x * 2

        def backward(self, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("call", lambda: Legacy()(x), "Legacy autograd function with non-static forward method is deprecated")
    o.raises("apply", lambda: Legacy.apply(x), "missing 1 required positional argument")


@program
def fn_forward_called_directly(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([2.0], requires_grad=True)
    o.raises("no ctx", lambda: Square.forward(x), "missing 1 required positional argument")
    o.raises("None ctx", lambda: Square.forward(None, x), "object has no attribute 'save_for_backward'")


@program
def fn_apply_with_kwargs(torch, o):
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor=2.0):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, factor=3.0)
    o("kwargs y", y)
    y.sum().backward()
    o("grad", x.grad)
    o("default", Scale.apply(x))
    o.raises("unknown kwarg", lambda: Scale.apply(x, scale=3.0), "got an unexpected keyword argument 'scale'")


@program
def fn_forward_not_implemented(torch, o):
    class NoForward(torch.autograd.Function):
        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0], requires_grad=True)
    o.raises("no forward", lambda: NoForward.apply(x), "You must implement the forward function for custom autograd.Function")


@program
def fn_backward_not_implemented(torch, o):
    class NoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    x = torch.tensor([1.0], requires_grad=True)
    y = NoBackward.apply(x)
    o("y", y)
    o.raises("no backward", lambda: y.backward(), "You must implement either the backward or vjp method")


@program
def fn_setup_context_with_ctx_forward_error(torch, o):
    class Both(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0], requires_grad=True)
    o.raises("both", lambda: Both.apply(x), "missing a required argument: 'x'")


@program
def fn_forward_raises_propagates(torch, o):
    class Checked(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if (x < 0).any():
                raise ValueError("Checked expects non-negative input")
            return x.sqrt()

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0, -1.0], requires_grad=True)
    o.raises("forward error", lambda: Checked.apply(x), "Checked expects non-negative input")
    o("grad mode restored", torch.is_grad_enabled())


@program
def fn_backward_raises_propagates(torch, o):
    class Failing(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("backward of Failing is not available")

    x = torch.tensor([1.0], requires_grad=True)
    y = Failing.apply(x)
    o.raises("backward error", lambda: y.backward(), "backward of Failing is not available")
    o("grad", x.grad)


# ---- more corners ---------------------------------------------------------------------------

@program
def fn_mark_dirty_view_input_with_two_outputs_error(torch, o):
    class ScaleAndCopy_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x.clone()

        @staticmethod
        def backward(ctx, g, g2):
            return 2 * (g + g2)

    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = a * 1
    o.raises("view with two outputs", lambda: ScaleAndCopy_.apply(base[:2]),
             "If your Function modifies inplace an input that is a view of another Tensor, your "
             "Function cannot return more than one Tensor")
    x = a * 1
    out, copy = ScaleAndCopy_.apply(x)
    o("not a view is fine", [out, copy])


@program
def fn_identity_then_input_modified(torch, o):
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 1
    y = Identity.apply(x)
    x.mul_(3)
    o("y sees the write", y.detach())
    o.raises("use y", lambda: (y * 2).sum().backward(),
             "This view was created inside a custom Function")


@program
def fn_view_output_under_no_grad(torch, o):
    class Head(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:2]

        @staticmethod
        def backward(ctx, g):
            return torch.cat([g, g.new_zeros(1)])

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with torch.no_grad():
        h = Head.apply(x)
    o("h", h.detach())
    o("h leaf", h.is_leaf)
    o("h grad_fn", h.grad_fn is None)
    o("h base", h._base is x)


@program
def fn_non_differentiable_input_returned(torch, o):
    class Passthrough(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_non_differentiable(y)
            return x * 2, y

        @staticmethod
        def backward(ctx, gx, gy):
            return gx * 2, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([5.0, 6.0], requires_grad=True)
    a, b = Passthrough.apply(x, y)
    o("b is y", b is y)
    o("b", b)
    o("b base", b._base is y)
    o("y still requires grad", y.requires_grad)
    c = torch.tensor([7.0])
    a2, b2 = Passthrough.apply(x, c)
    o("b2 is c", b2 is c)
    o("b2 base", b2._base is c)


@program
def fn_saved_input_is_the_same_object(torch, o):
    seen = []

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen.append((a is leaf, b is inner))
            return g * b, g * a

    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    inner = leaf * 3
    y = Mul.apply(leaf, inner)
    saved = y.grad_fn.saved_tensors
    o("outside", [saved[0] is leaf, saved[1] is inner])
    y.sum().backward()
    o("inside", seen)
    o("grad", leaf.grad)


@program
def fn_save_for_backward_called_twice(torch, o):
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x)
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            saved = ctx.saved_tensors
            o("count", len(saved))
            x, y = saved
            return g * y, g * x

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    Twice.apply(x, y).sum().backward()
    o("grads", [x.grad, y.grad])


@program
def fn_saved_tensors_read_in_forward(torch, o):
    class Peek(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            try:
                ctx.saved_tensors
                o("read in forward", "no error")
            except Exception as exc:  # noqa: BLE001 - compared with torch's
                o("read in forward", type(exc).__name__)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0], requires_grad=True)
    Peek.apply(x).backward()
    o("grad", x.grad)


@program
def fn_save_dirty_input(torch, o):
    class Square_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.clone())
            x.mul_(x)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (orig,) = ctx.saved_tensors
            return 2 * orig * g

    a = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    x = a + 1
    y = Square_.apply(x)
    o("y", y)
    y.sum().backward()
    o("grad", a.grad)


@program
def fn_save_output_of_dirty_function(torch, o):
    class Exp_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.exp_()
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (result,) = ctx.saved_tensors
            return g * result

    a = torch.tensor([0.0, 1.0], requires_grad=True)
    x = a * 1
    y = Exp_.apply(x)
    o("y", y)
    y.sum().backward()
    o("grad", a.grad)


@program
def fn_autograd_grad_allow_unused_with_none(torch, o):
    class FirstOnly(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * 2 + y * 0

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    out = FirstOnly.apply(x, y).sum()
    gx, gy = torch.autograd.grad(out, (x, y), allow_unused=True, retain_graph=True)
    o("gx", gx)
    o("gy", gy)
    o.raises("not allowed", lambda: torch.autograd.grad(out, (x, y)),
             "The differentiated Tensor at index 1 appears to not have been used in the graph")
    gx, gy = torch.autograd.grad(out, (x, y), allow_unused=True, materialize_grads=True)
    o("materialized", [gx, gy])


@program
def fn_single_element_tuple_output(torch, o):
    class Wrapped(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x * 2,)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = Wrapped.apply(x)
    o("type", type(out).__name__)
    o("len", len(out))
    out[0].sum().backward()
    o("grad", x.grad)


@program
def fn_apply_without_arguments(torch, o):
    class Constant(torch.autograd.Function):
        @staticmethod
        def forward(ctx):
            o("needs", ctx.needs_input_grad)
            return torch.ones(2)

        @staticmethod
        def backward(ctx, g):
            return ()

    out = Constant.apply()
    o("out", out)
    o("grad_fn", out.grad_fn is None)


@program
def fn_integer_input_float_output(torch, o):
    class Embed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, idx, table):
            ctx.save_for_backward(idx)
            ctx.rows = table.shape[0]
            return table[idx]

        @staticmethod
        def backward(ctx, g):
            (idx,) = ctx.saved_tensors
            grad = torch.zeros(ctx.rows, g.shape[1], dtype=g.dtype)
            grad.index_add_(0, idx, g)
            return None, grad

    table = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    idx = torch.tensor([2, 0, 2])
    out = Embed.apply(idx, table)
    o("needs", out.grad_fn.needs_input_grad)
    o("out", out)
    (out * torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])).sum().backward()
    o("grad", table.grad)


@program
def fn_anomaly_mode_nan_in_custom_backward(torch, o):
    class NanGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = torch.tensor([1.0, 2.0], requires_grad=True)

    def run():
        with torch.autograd.detect_anomaly():
            NanGrad.apply(x).sum().backward()
    o.raises("anomaly", run, "Function 'NanGradBackward' returned nan values in its 0th output.")


@program
def fn_jvp_two_outputs_and_wrong_count(torch, o):
    fwAD = torch.autograd.forward_ad

    class SinCos(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, gs, gc):
            raise RuntimeError("unused")

        @staticmethod
        def jvp(ctx, tx):
            (x,) = ctx.saved_tensors
            return tx * x.cos(), -tx * x.sin()

    class Short(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, gs, gc):
            raise RuntimeError("unused")

        @staticmethod
        def jvp(ctx, tx):
            return tx

    x = torch.tensor([0.0, 0.5, 1.0])
    with fwAD.dual_level():
        dx = fwAD.make_dual(x, torch.ones(3))
        s, c = SinCos.apply(dx)
        o("tangents", [fwAD.unpack_dual(s).tangent, fwAD.unpack_dual(c).tangent])
        o.raises("short", lambda: Short.apply(dx),
                 "returned an invalid number of forward gradients (expected 2 but got 1)")


@program
def fn_jvp_non_differentiable_output_none(torch, o):
    fwAD = torch.autograd.forward_ad

    class MaxIdx(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            v, i = x.max(0)
            ctx.mark_non_differentiable(i)
            ctx.save_for_forward(i)
            return v, i

        @staticmethod
        def backward(ctx, gv, gi):
            raise RuntimeError("unused")

        @staticmethod
        def jvp(ctx, tx):
            (i,) = ctx.saved_tensors
            return tx[i], None

    x = torch.tensor([1.0, 5.0, 2.0])
    with fwAD.dual_level():
        dx = fwAD.make_dual(x, torch.tensor([0.1, 0.2, 0.3]))
        v, i = MaxIdx.apply(dx)
        o("v tangent", fwAD.unpack_dual(v).tangent)
        o("i tangent", fwAD.unpack_dual(i).tangent)
        o("i", i)


@program
def fn_functional_jacobian_of_function(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.tensor([1.0, 2.0, -1.0])
    o("jacobian", torch.autograd.functional.jacobian(Cube.apply, x))
    o("hessian", torch.autograd.functional.hessian(lambda t: Cube.apply(t).sum(), x))
    o("vjp", torch.autograd.functional.vjp(Cube.apply, x, torch.ones(3)))


@program
def fn_grad_outputs_shape_mismatch(torch, o):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    o.raises("mismatch", lambda: y.backward(torch.ones(3)), "Mismatch in shape: grad_output[0] has a shape of")
    o.raises("implicit", lambda: y.backward(), "grad can be implicitly created only for scalar outputs")
    y.backward(torch.tensor([1.0, 0.5]))
    o("grad", x.grad)


@program
def fn_both_backward_and_vjp_error(torch, o):
    class Both(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 2

    x = torch.tensor([1.0], requires_grad=True)
    y = Both.apply(x)
    o("y", y)
    o.raises("both", lambda: y.backward(), "Implementing both 'backward' and 'vjp' for a custom Function is not allowed")


@program
def fn_vjp_only(torch, o):
    class ViaVjp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def vjp(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.exp()

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    ViaVjp.apply(x).sum().backward()
    o("grad", x.grad)


@program
def fn_backward_without_staticmethod(torch, o):
    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        def backward(ctx, g):
            return g * 3

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Plain.apply(x).sum().backward()
    o("grad", x.grad)


@program
def fn_input_hook_and_node_hooks_order(torch, o):
    order = []

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            order.append("backward")
            return g * 2

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    x = a * 1
    x.register_hook(lambda g: order.append("input tensor hook"))
    a.register_hook(lambda g: order.append("leaf hook"))
    y = Scale.apply(x)
    y.register_hook(lambda g: order.append("output tensor hook"))
    y.grad_fn.register_prehook(lambda gs: order.append("node prehook"))
    y.grad_fn.register_hook(lambda gi, go: order.append("node posthook"))
    y.sum().backward()
    o("order", order)


@program
def fn_post_accumulate_grad_hook_with_function(torch, o):
    seen = []

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    w = torch.tensor([1.0, 3.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    Square.apply(w).sum().backward()
    o("seen", seen)


@program
def fn_deep_chain_of_functions(torch, o):
    class AddHalf(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 0.5 + 1

        @staticmethod
        def backward(ctx, g):
            return g * 0.5

    x = torch.tensor([2.0], dtype=torch.float64, requires_grad=True)
    y = x
    for _ in range(200):
        y = AddHalf.apply(y)
    y.backward()
    o("y", y)
    o("grad", x.grad)


@program
def fn_ctx_marks_non_tensor_errors(torch, o):
    class Marks(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, mode):
            if mode == "dirty":
                ctx.mark_dirty(x, 3)
            elif mode == "dirty none":
                ctx.mark_dirty(None)
            elif mode == "non-diff":
                ctx.mark_non_differentiable(x * 2, 3.0)
            elif mode == "save for forward":
                ctx.save_for_forward(3)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    x = torch.ones(2, requires_grad=True)
    o.raises("dirty", lambda: Marks.apply(x, "dirty"), "mark_dirty can only accept variables, but argument")
    o.raises("dirty none", lambda: Marks.apply(x, "dirty none"), "mark_dirty can only accept variables, but argument")
    o.raises("non-diff", lambda: Marks.apply(x, "non-diff"),
             "mark_non_differentiable only accepts variable arguments, but got")
    o.raises("save for forward", lambda: Marks.apply(x, "save for forward"),
             "save_for_forward expects all arguments to be tensors")
    with torch.no_grad():
        o.raises("no_grad non-diff", lambda: Marks.apply(x, "non-diff"),
                 "mark_non_differentiable only accepts variable arguments, but got")


@program
def fn_same_output_returned_twice(torch, o):
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            return y, y

        @staticmethod
        def backward(ctx, ga, gb):
            return 2 * (ga + gb)

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Twice.apply(x)
    o("same object", a is b)
    o("output_nr", [a.output_nr, b.output_nr])
    (a + 2 * b).sum().backward()
    o("grad", x.grad)


@program
def fn_input_returned_twice(torch, o):
    class Dup(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x, x

        @staticmethod
        def backward(ctx, ga, gb):
            return ga + gb

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Dup.apply(x)
    o("objects", [a is b, a is x, b is x])
    o("bases", [a._base is x, b._base is x])
    o("output_nr", [a.output_nr, b.output_nr])
    (a + 2 * b).sum().backward()
    o("grad", x.grad)


@program
def fn_forward_returns_non_tensors_only(torch, o):
    class Describe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return float(x.sum()), tuple(x.shape)

        @staticmethod
        def backward(ctx, *grads):
            return None

    class AsDict(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return {"double": x * 2}

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o("describe", Describe.apply(x))
    out = AsDict.apply(x)
    o("dict", [type(out).__name__, out["double"].requires_grad, out["double"].grad_fn is None])


@program
def fn_dict_and_dtype_arguments(torch, o):
    class Convert(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, options, dtype, size):
            ctx.source = x.dtype
            return (x * options["scale"]).to(dtype).reshape(size)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(-1).to(ctx.source) * 3.0, None, None, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Convert.apply(x, {"scale": 3.0}, torch.float64, torch.Size([2, 1]))
    o("y", y)
    o("needs", y.grad_fn.needs_input_grad)
    y.sum().backward()
    o("grad", x.grad)


@program
def fn_backward_returns_grad_that_requires_grad(torch, o):
    class Leaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.full(g.shape, 2.0, requires_grad=True)

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Leaky.apply(x).sum().backward()
    o("grad", x.grad)
    o("grad requires grad", x.grad.requires_grad)


@program
def fn_backward_returns_bool_grad(torch, o):
    class Mask(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g > 0

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Mask.apply(x).sum().backward()
    o("grad", x.grad)


@program
def fn_apply_keyword_forms(torch, o):
    class Gate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w=None):
            ctx.save_for_backward(w)
            return x if w is None else x * w

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            o("needs", ctx.needs_input_grad)
            return (g if w is None else g * w), None

    class KeywordOnly(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, *, scale):
            return x * scale

        @staticmethod
        def backward(ctx, g):
            return g

    class VarKeywords(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, **options):
            return x * options.get("scale", 1.0)

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 3.0], requires_grad=True)
    y = Gate.apply(x, w=w)
    o("next", len(y.grad_fn.next_functions))
    y.sum().backward()
    o("grads", [x.grad, w.grad])
    o.raises("keyword-only", lambda: KeywordOnly.apply(x, scale=2.0),
             "got an unexpected keyword argument 'scale'")
    o.raises("var keywords", lambda: VarKeywords.apply(x, scale=2.0),
             "got an unexpected keyword argument 'scale'")


@program
def fn_setup_context_defaults_and_keywords(torch, o):
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(x, scale=2.0):
            return x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            o("inputs", inputs[1:])
            ctx.scale = inputs[1]

        @staticmethod
        def backward(ctx, g):
            o("needs", ctx.needs_input_grad)
            return g * ctx.scale, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Scale.apply(x).sum().backward()
    Scale.apply(x, scale=3.0).sum().backward()
    o("grad", x.grad)


@program
def fn_setup_context_marks(torch, o):
    class SquareNoGrad(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_non_differentiable(output)

        @staticmethod
        def backward(ctx, g):
            return g

    class Double_(torch.autograd.Function):
        @staticmethod
        def forward(x):
            x.mul_(2)
            return x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_dirty(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    s = SquareNoGrad.apply(x)
    o("non-differentiable", [s.requires_grad, s.grad_fn is None])
    h = x * 1
    v0 = h._version
    d = Double_.apply(h)
    o("dirty", [d is h, d.grad_fn.name(), h._version - v0])
    d.sum().backward()
    o("grad", x.grad)


@program
def fn_node_hooks_wrong_count_errors(torch, o):
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)

    def short_post(grad_inputs, grad_outputs):
        return (grad_inputs[0],)

    def long_pre(grad_outputs):
        return (grad_outputs[0], grad_outputs[0])

    y = Mul.apply(a, b)
    y.grad_fn.register_hook(short_post)
    o.raises("post", lambda: y.sum().backward(),
             "hook 'short_post' has returned an incorrect number of values (got 1, but expected 2)")
    z = Mul.apply(a, b)
    z.grad_fn.register_prehook(long_pre)
    o.raises("pre", lambda: z.sum().backward(),
             "hook 'long_pre' has returned an incorrect number of values (got 2, but expected 1)")


@program
def fn_post_hook_slots_for_tensor_inputs_only(torch, o):
    seen = []

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, w):
            return x * k * w

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, 2, torch.ones(2))
    y.grad_fn.register_hook(lambda gi, go: seen.append((len(gi), [g is None for g in gi], len(go))))
    y.sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fn_transforms_need_setup_context(torch, o):
    class CtxStyle(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class NoVmapRule(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    batch = torch.ones(3, 2)
    o.raises("vmap ctx style", lambda: torch.func.vmap(CtxStyle.apply)(batch),
             "it must override the setup_context staticmethod")
    o.raises("grad ctx style", lambda: torch.func.grad(lambda t: CtxStyle.apply(t).sum())(torch.ones(3)),
             "it must override the setup_context staticmethod")
    o.raises("vmap no rule", lambda: torch.func.vmap(NoVmapRule.apply)(batch),
             "You tried to vmap over NoVmapRule, but it does not have vmap support")
    o("grad setup style", torch.func.grad(lambda t: NoVmapRule.apply(t).sum())(torch.ones(3)))


@program
def fn_gradcheck_backward_not_multiplied_by_grad_output(torch, o):
    class SumForgetsGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.n = x.shape[0]
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return torch.ones(ctx.n, dtype=torch.float64)  # should be g * ones

    x = torch.tensor([0.3, -1.2, 0.9], dtype=torch.float64, requires_grad=True)
    o.raises("raises", lambda: torch.autograd.gradcheck(SumForgetsGrad.apply, (x,)),
             "backward not multiplied by grad_output")
    o("returns False", torch.autograd.gradcheck(SumForgetsGrad.apply, (x,), raise_exception=False))


@program
def fn_gradcheck_undefined_output_grads(torch, o):
    class NoMaterialize(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Handles(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * 2, x * x

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            grad = torch.zeros_like(x)
            if g1 is not None:
                grad = grad + 2 * g1
            if g2 is not None:
                grad = grad + 2 * x * g2
            return grad

    x = torch.tensor([0.3, -1.2, 0.9], dtype=torch.float64, requires_grad=True)
    o.raises("None reaches backward", lambda: torch.autograd.gradcheck(NoMaterialize.apply, (x,)),
             "unsupported operand type(s) for *: 'NoneType' and 'int'")
    o("check off", torch.autograd.gradcheck(NoMaterialize.apply, (x,), check_undefined_grad=False))
    o("handles None", torch.autograd.gradcheck(Handles.apply, (x,)))
    o("gradgradcheck", torch.autograd.gradgradcheck(Handles.apply, (x,)))


@program
def fn_needs_input_grad_under_no_grad(torch, o):
    seen = []

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen.append(tuple(ctx.needs_input_grad))
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0])
    with torch.no_grad():
        Mul.apply(a, b, 2)
        Mul.apply(b, b, 2)
    with torch.inference_mode():
        Mul.apply(a, b, 2)
    Mul.apply(a * 1, b, 2)
    o("seen", seen)


@program
def fn_printed_outputs(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x > 1

        @staticmethod
        def backward(ctx, g, g_mask):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x)
    o("printed", str(y))
    o("element", str(y[0]))
    doubled, mask = Split.apply(x)
    o("two outputs", [str(doubled), str(mask)])
    with torch.no_grad():
        o("no_grad", str(Square.apply(x)))


# ---- the custom Function tutorial's examples (test_spec_examples.py, "003") ----------------------

@program
def fn_tutorial_clipped_relu(torch, o):
    class ClippedReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, max_val):
            ctx.save_for_backward(x)
            ctx.max_val = max_val
            return torch.clamp(x, min=0, max=max_val)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            mask = ((x > 0) & (x < ctx.max_val)).float()
            return grad_output * mask, None

    x = torch.tensor([-1.0, 0.5, 3.0], requires_grad=True)
    out = ClippedReLU.apply(x, 2.0)
    out.sum().backward()
    o("out", out)
    o("grad", x.grad)


@program
def fn_tutorial_matmul_fn(torch, o):
    class MatmulFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g @ b.t(), a.t() @ g

    a = torch.linspace(-1.0, 1.0, 32).reshape(4, 8).requires_grad_()
    b = torch.linspace(0.5, -0.5, 24).reshape(8, 3).requires_grad_()
    MatmulFn.apply(a, b).sum().backward()
    o("a.grad shape:", a.grad.shape)
    o("grads", [a.grad, b.grad])
    a2 = a.detach().clone().requires_grad_()
    b2 = b.detach().clone().requires_grad_()
    (a2 @ b2).sum().backward()
    o("same as autograd", [torch.allclose(a.grad, a2.grad), torch.allclose(b.grad, b2.grad)])


@program
def fn_tutorial_cube_double_backward(torch, o):
    class CubeFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

        @staticmethod
        def double_backward(ctx, gg):
            (x,) = ctx.saved_tensors
            return gg * 6 * x

    x = torch.tensor([2.0], requires_grad=True)
    y = CubeFn.apply(x)
    g1 = torch.autograd.grad(y, x, create_graph=True)[0]
    g2 = torch.autograd.grad(g1, x)[0]
    o("printed", (g1.item(), g2.item()))
    o("g1 grad_fn", node_name(g1.grad_fn))


@program
def fn_tutorial_chained_needs_input_grad(torch, o):
    class Chained(torch.autograd.Function):
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

    x = torch.tensor([1.0, -1.0, 0.5], requires_grad=True)
    y = Chained.apply(x)
    o("saved", y.grad_fn.saved_tensors)
    y.sum().backward()
    o("grad", x.grad)
    frozen = torch.tensor([1.0, 2.0])
    o("frozen", Chained.apply(frozen))


@program
def fn_jvp_of_inplace_function(torch, o):
    fwAD = torch.autograd.forward_ad

    class Scale_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            x.mul_(k)
            ctx.mark_dirty(x)
            ctx.k = k
            return x

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

        @staticmethod
        def jvp(ctx, tx, tk):
            tx.mul_(ctx.k)
            return tx

    class NotInPlace_(Scale_):
        @staticmethod
        def jvp(ctx, tx, tk):
            return tx * ctx.k

    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.5]))
        y = Scale_.apply(x, 3.0)
        o("y is x", y is x)
        o("primal, tangent", list(fwAD.unpack_dual(y)))
        z = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.5]))
        o.raises("not in place", lambda: NotInPlace_.apply(z, 3.0),
                 "An inplace custom Function is not modifying the forward mode gradients inplace")


@program
def fn_jvp_of_view_returning_function(torch, o):
    fwAD = torch.autograd.forward_ad

    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, tx):
            return tx.view_as(tx)

    class IdentityPlainJvp(Identity):
        @staticmethod
        def jvp(ctx, tx):
            return tx

    class IdentityOtherView(Identity):
        @staticmethod
        def jvp(ctx, tx):
            return (tx * 2).view_as(tx)

    class Head(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:2]

        @staticmethod
        def backward(ctx, g):
            return torch.cat([g, g.new_zeros(1)])

        @staticmethod
        def jvp(ctx, tx):
            return tx[:2]

    class HeadCloneJvp(Head):
        @staticmethod
        def jvp(ctx, tx):
            return tx[:2].clone()

    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 5.0]))
        o("identity", fwAD.unpack_dual(Identity.apply(x)).tangent)
        o("head", fwAD.unpack_dual(Head.apply(x)).tangent)
        o.raises("plain", lambda: IdentityPlainJvp.apply(x),
                 "A custom Function's forward is returning a view (or an input as-is) but the jvp is not returning a view.")
        o.raises("other view", lambda: IdentityOtherView.apply(x),
                 "A custom Function is returning a view but the jvp is not returning a view of the given grad input.")
        o.raises("head clone", lambda: HeadCloneJvp.apply(x),
                 "the jvp is not returning a view.")


@program
def fn_jvp_through_func_transforms(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def jvp(ctx, tx):
            (x,) = ctx.saved_tensors
            return 2 * x * tx

    x = torch.tensor([1.0, 2.0, 3.0])
    o("jvp", torch.func.jvp(Square.apply, (x,), (torch.ones(3),)))
    o("jacrev", torch.func.jacrev(Square.apply)(x))
    o("fwd over rev", torch.func.jvp(torch.func.grad(lambda t: Square.apply(t).sum()), (x,), (torch.ones(3),)))
    o.raises("jacfwd needs vmap", lambda: torch.func.jacfwd(Square.apply)(x),
             "You tried to vmap over Square, but it does not have vmap support")


@program
def fn_module_full_backward_hook_then_inplace_relu(torch, o):
    # the BackwardHookFunction of a full backward hook returns its inputs as-is (views), so an
    # in-place ReLU right after the hooked module is refused
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 2.0]]))
        lin.bias.copy_(torch.tensor([0.0, -1.0]))
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append([g.shape for g in go]))
    x = torch.tensor([[1.0, -2.0]], requires_grad=True)
    out = lin(x)
    o("out grad_fn", out.grad_fn.name())
    o("out is a view", out._base is not None)
    o.raises("inplace relu", lambda: torch.nn.ReLU(inplace=True)(out),
             "Output 0 of BackwardHookFunction is a view and is being modified inplace. This view "
             "was created inside a custom Function")
    torch.nn.ReLU()(lin(x)).sum().backward()
    o("seen", seen)
    o("x grad", x.grad)


@program
def fn_autograd_backward_several_outputs(torch, o):
    class MinMax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            lo, lo_i = x.min(0)
            hi, hi_i = x.max(0)
            ctx.save_for_backward(lo_i, hi_i)
            ctx.n = x.shape[0]
            return lo, hi

        @staticmethod
        def backward(ctx, g_lo, g_hi):
            lo_i, hi_i = ctx.saved_tensors
            grad = torch.zeros(ctx.n, dtype=g_lo.dtype)
            grad[lo_i] += g_lo
            grad[hi_i] += g_hi
            return grad

    x = torch.tensor([3.0, -1.0, 7.0, 2.0], requires_grad=True)
    lo, hi = MinMax.apply(x)
    torch.autograd.backward([lo, hi], [torch.tensor(2.0), torch.tensor(5.0)])
    o("grad", x.grad)
    lo, hi = MinMax.apply(x)
    grads = torch.autograd.grad([lo, hi], [x], [torch.tensor(1.0), None], allow_unused=True)
    o("grad with None", grads)


@program
def fn_ctx_saved_variables_and_to_save(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            o("to_save in forward", ctx.to_save)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = o.warns("saved_variables", lambda: ctx.saved_variables, "'saved_variables' is deprecated")
            o("to_save in backward", ctx.to_save)
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Square.apply(x).sum().backward()
    o("grad", x.grad)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
