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


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
