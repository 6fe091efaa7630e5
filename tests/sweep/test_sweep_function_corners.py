"""Conformance sweep, the custom ``autograd.Function`` contract, harder corners: each
program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness`` compares
everything observed (see its docstring).

Covered here: forward-mode AD through Functions (``jvp``, ``save_for_forward``, dual tensors),
``torch.func`` transforms over Functions (``setup_context``, ``generate_vmap_rule``, a ``vmap``
staticmethod), nested Functions and ``autograd.grad`` inside ``backward``, ``mark_dirty`` and
aliasing outputs, version checks of saved tensors, ``set_materialize_grads`` with several
outputs, hooks on custom nodes, ``saved_tensors_hooks`` counts, anomaly mode, ``gradcheck``, and
the odd ways of calling ``apply`` (keywords, containers, grad modes, dtypes, zero-size inputs).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, node_name, registry

program = registry()


# ---- forward-mode AD ----------------------------------------------------------------------------

@program
def fx_jvp_save_for_forward_used_in_jvp(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * x * x * t

    fwAD = torch.autograd.forward_ad
    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    t = torch.tensor([0.1, 1.0, 2.0], dtype=torch.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        y = Cube.apply(d)
        p, tan = fwAD.unpack_dual(y)
        o("primal", p)
        o("tangent", tan)
        # through a built-in after the Function
        z = (y.sin() * 2).sum()
        o("z tangent", fwAD.unpack_dual(z).tangent)


@program
def fx_jvp_setup_context_save_for_forward(torch, o):
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            a, b = inputs
            ctx.save_for_forward(a, b)

        @staticmethod
        def backward(ctx, g):
            return None, None

        @staticmethod
        def jvp(ctx, ta, tb):
            a, b = ctx.saved_tensors
            out = 0
            if ta is not None:
                out = out + ta * b
            if tb is not None:
                out = out + a * tb
            return out

    fwAD = torch.autograd.forward_ad
    a = torch.tensor([1.0, 2.0])
    b = torch.tensor([3.0, -1.0])
    with fwAD.dual_level():
        da = fwAD.make_dual(a, torch.tensor([1.0, 0.0]))
        y = Mul.apply(da, b)
        o("tangent only a", fwAD.unpack_dual(y).tangent)
        db = fwAD.make_dual(b, torch.tensor([0.5, 0.5]))
        y2 = Mul.apply(da, db)
        o("tangent both", fwAD.unpack_dual(y2).tangent)
        y3 = Mul.apply(a, b)
        o("no tangent", fwAD.unpack_dual(y3).tangent)


@program
def fx_jvp_returns_wrong_shape(torch, o):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t.sum()

    fwAD = torch.autograd.forward_ad

    def run():
        with fwAD.dual_level():
            d = fwAD.make_dual(torch.ones(3), torch.ones(3))
            return Bad.apply(d)

    o.raises("wrong shape", run, "different size than that of the original Tensor")


@program
def fx_jvp_returns_tuple_for_single_output(torch, o):
    class TupleTangent(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return (t * 2,)

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
        y = TupleTangent.apply(d)
        o("tangent", fwAD.unpack_dual(y).tangent)


@program
def fx_jvp_of_mark_dirty_inplace(torch, o):
    class Double_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            t.mul_(2)
            return t

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        base = torch.tensor([1.0, 2.0])
        d = fwAD.make_dual(base.clone(), torch.tensor([1.0, -1.0]))
        y = Double_.apply(d)
        o("same object", y is d)
        o("primal", fwAD.unpack_dual(y).primal)
        o("tangent", fwAD.unpack_dual(y).tangent)
        o("input tangent", fwAD.unpack_dual(d).tangent)


@program
def fx_jvp_dual_plus_backward_in_one_call(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2 * x * t

    fwAD = torch.autograd.forward_ad
    x = torch.tensor([1.0, 3.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.tensor([1.0, 1.0]))
        y = Sq.apply(d)
        o("tangent", fwAD.unpack_dual(y).tangent)
        o("y requires_grad", y.requires_grad)
        y.sum().backward()
    o("x grad", x.grad)


@program
def fx_func_jvp_over_function(torch, o):
    class Sin(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * x.cos()

    x = torch.tensor([0.1, 0.5, 1.0], dtype=torch.float64)
    out, tan = torch.func.jvp(Sin.apply, (x,), (torch.ones(3, dtype=torch.float64),))
    o("out", out)
    o("tan", tan)
    o("jacfwd", torch.func.jacfwd(Sin.apply)(x))
    o("jacrev", torch.func.jacrev(Sin.apply)(x))


@program
def fx_func_jvp_without_jvp_staticmethod(torch, o):
    class NoJvp(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = torch.tensor([1.0, 2.0])
    o.raises("func.jvp", lambda: torch.func.jvp(NoJvp.apply, (x,), (torch.ones(2),)),
             "jvp")
    o("jacrev fine", torch.func.jacrev(NoJvp.apply)(x))


@program
def fx_func_jvp_ctx_style_error(torch, o):
    class CtxStyle(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 3

    x = torch.tensor([1.0, 2.0])
    o.raises("func.jvp ctx style", lambda: torch.func.jvp(CtxStyle.apply, (x,), (torch.ones(2),)),
             "it must override the setup_context staticmethod")
    o.raises("jacfwd ctx style", lambda: torch.func.jacfwd(CtxStyle.apply)(x),
             "it must override the setup_context staticmethod")
    # plain forward_ad works with ctx style
    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        y = CtxStyle.apply(fwAD.make_dual(x, torch.ones(2)))
        o("fwAD ctx style", fwAD.unpack_dual(y).tangent)


@program
def fx_jvp_non_tensor_input_gets_none(torch, o):
    seen = []

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            return x * k + y

        @staticmethod
        def backward(ctx, g):
            return g, None, g

        @staticmethod
        def jvp(ctx, tx, tk, ty):
            seen.append((tx is None, tk is None, ty is None))
            return tx * 2 + (ty if ty is not None else 0)

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
        y = Scale.apply(d, 2.0, torch.tensor([5.0, 5.0]))
        o("tangent", fwAD.unpack_dual(y).tangent)
    o("seen", seen)


# ---- torch.func transforms over Functions ------------------------------------------------------

@program
def fx_vmap_generate_vmap_rule_two_inputs(torch, o):
    class Mul(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = torch.arange(6.0).reshape(3, 2)
    b = torch.tensor([2.0, -1.0])
    o("vmap a only", torch.func.vmap(Mul.apply, in_dims=(0, None))(a, b))
    o("vmap both", torch.func.vmap(Mul.apply)(a, a + 1))
    g = torch.func.grad(lambda x, y: Mul.apply(x, y).sum(), argnums=(0, 1))(b, b * 3)
    o("grad both", g)
    o("vmap of grad", torch.func.vmap(torch.func.grad(lambda x: Mul.apply(x, x).sum()))(a))


@program
def fx_vmap_staticmethod_rule(torch, o):
    calls = []

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def vmap(info, in_dims, x):
            calls.append((info.batch_size, in_dims))
            return x * 2, in_dims[0]

    x = torch.arange(6.0).reshape(2, 3)
    o("vmap dim 0", torch.func.vmap(Double.apply)(x))
    o("vmap dim 1", torch.func.vmap(Double.apply, in_dims=1)(x))
    o("calls", calls)


@program
def fx_vmap_rule_returns_wrong_out_dims(torch, o):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def vmap(info, in_dims, x):
            return x * 2

    o.raises("vmap returns one thing", lambda: torch.func.vmap(Bad.apply)(torch.ones(2, 3)),
             "vmap")


@program
def fx_grad_over_function_with_non_tensor_output(torch, o):
    class WithInfo(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x, 7

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g, g_none):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    def f(x):
        y, k = WithInfo.apply(x)
        return y.sum() * k

    x = torch.tensor([1.0, 2.0, -1.0])
    o("grad", torch.func.grad(f)(x))
    gv, val = torch.func.grad_and_value(f)(x)
    o("grad_and_value", (gv, val))


@program
def fx_jacrev_over_function_two_outputs(torch, o):
    class SinCos(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sin(), x.cos()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, gs, gc):
            (x,) = ctx.saved_tensors
            return gs * x.cos() - gc * x.sin()

    x = torch.tensor([0.2, 0.7], dtype=torch.float64)
    o("jacrev", torch.func.jacrev(SinCos.apply)(x))


@program
def fx_hessian_via_grad_of_grad_over_function(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.tensor(2.0, dtype=torch.float64)
    def f(t):
        return Cube.apply(t)

    o("grad", torch.func.grad(f)(x))
    o("grad grad", torch.func.grad(torch.func.grad(f))(x))


# ---- nested Functions, autograd.grad inside backward, recursion ---------------------------------

@program
def fx_nested_apply_in_forward(torch, o):
    class Inner(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Outer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = Inner.apply(x)
            o("inner output inside forward requires_grad", y.requires_grad)
            o("inner grad_fn inside forward", y.grad_fn is None)
            ctx.save_for_backward(x)
            return y + 1

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return Inner.apply(x) * g  # deliberately "wrong": x^2 * g

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = Outer.apply(x)
    o("y", y)
    o("node", node_name(y.grad_fn))
    y.sum().backward()
    o("grad", x.grad)


@program
def fx_backward_uses_autograd_grad(torch, o):
    class Softplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.nn.functional.softplus(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                xd = x.detach().requires_grad_()
                y = torch.nn.functional.softplus(xd)
                (gx,) = torch.autograd.grad(y, xd, g)
            return gx

    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    Softplus.apply(x).sum().backward()
    o("grad", x.grad)
    x.grad = None
    out = Softplus.apply(x * 2)
    (g,) = torch.autograd.grad(out.sum(), x)
    o("grad through mul", g)


@program
def fx_backward_autograd_grad_without_enable_grad(torch, o):
    class Broken(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            xd = x.detach().requires_grad_()
            y = xd * 2
            o("grad mode in backward", torch.is_grad_enabled())
            o("y requires_grad", y.requires_grad)
            return torch.autograd.grad(y, xd, g)[0]

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("backward", lambda: Broken.apply(x).sum().backward(),
             "element 0 of tensors does not require grad and does not have a grad_fn")


@program
def fx_backward_grad_mode_under_create_graph(torch, o):
    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            o("grad mode in forward", torch.is_grad_enabled())
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            o("grad mode in backward", torch.is_grad_enabled())
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Probe.apply(x).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    o("g", g)
    g.sum().backward()
    o("x grad", x.grad)
    y2 = Probe.apply(x).sum()
    y2.backward()


@program
def fx_recursive_function(torch, o):
    class Pow(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, n):
            ctx.n = n
            ctx.save_for_backward(x)
            if n == 1:
                return x.clone()
            return x * Pow.apply(x, n - 1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            n = ctx.n
            if n == 1:
                return g, None
            return g * n * Pow.apply(x, n - 1), None

    x = torch.tensor([1.5, -0.5], dtype=torch.float64, requires_grad=True)
    y = Pow.apply(x, 4)
    o("y", y)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    o("g has grad_fn", g.grad_fn is not None)
    (gg,) = torch.autograd.grad(g.sum(), x)
    o("gg", gg)


@program
def fx_nested_apply_in_backward_double_backward(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class LogSumExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp().sum().log()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            e = Exp.apply(x)
            return g * e / e.sum()

    x = torch.tensor([0.1, 0.4, -0.3], dtype=torch.float64, requires_grad=True)
    y = LogSumExp.apply(x)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    o("g", g)
    o("g node", node_name(g.grad_fn))
    (h,) = torch.autograd.grad(g[0], x)
    o("hessian row", h)


# ---- mark_dirty, aliasing outputs --------------------------------------------------------------

@program
def fx_mark_dirty_on_view_of_leaf(torch, o):
    class AddOne_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    base = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = base[:2]
    o.raises("dirty view of leaf", lambda: AddOne_.apply(v),
             "a view of a leaf Variable that requires grad is being used in an in-place operation")


@program
def fx_mark_dirty_on_view_of_non_leaf_then_base_grad(torch, o):
    class Mul3_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(3)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    leaf = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    base = leaf * 1
    v = base[1:3]
    out = Mul3_.apply(v)
    o("out is v", out is v)
    o("out node", node_name(out.grad_fn))
    o("base node", node_name(base.grad_fn))
    o("base", base)
    o("versions", (base._version, v._version))
    base.sum().backward()
    o("leaf grad", leaf.grad)


@program
def fx_mark_dirty_returns_new_tensor_error(torch, o):
    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("dirty but not returned", lambda: Wrong.apply(a * 1),
             "Some elements marked as dirty during the forward method were not returned as output")


@program
def fx_mark_non_differentiable_output_is_input(torch, o):
    class PassThrough(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_non_differentiable(x)
            return x, y * 2

        @staticmethod
        def backward(ctx, gx, gy):
            o("gx", gx)
            return None, gy * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    a, b = PassThrough.apply(x, y)
    o("a is x", a is x)
    o("a requires_grad", a.requires_grad)
    o("a is_leaf", a.is_leaf)
    o("a grad_fn", a.grad_fn is None)
    (a.sum() + b.sum()).backward()
    o("x grad", x.grad)
    o("y grad", y.grad)


@program
def fx_return_input_as_is_then_inplace(torch, o):
    class Ident(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 10

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Ident.apply(h)
    o("y is h", y is h)
    o("y node", node_name(y.grad_fn))
    o("h node", node_name(h.grad_fn))
    o("y._base is h", y._base is h)
    o("y._is_view", y._is_view())
    o.raises("inplace on returned input", lambda: y.mul_(2),
             "This view was created inside a custom Function (or because an input was returned as-is)")
    o("h after failed inplace", h)
    y.sum().backward()
    o("x grad", x.grad)


@program
def fx_return_view_of_input_then_inplace_error(torch, o):
    class View(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view(2, 2)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(4)

    x = torch.arange(4.0, requires_grad=True)
    h = x * 1
    y = View.apply(h)
    o("y._is_view", y._is_view())
    o("y node", node_name(y.grad_fn))
    o.raises("inplace on view output", lambda: y.add_(1),
             "is a view and is being modified inplace")
    o.raises("inplace on base", lambda: (h.add_(1), y.sum().backward()),
             "its base or another view of its base has been modified inplace")


@program
def fx_return_view_no_grad_inputs_then_inplace(torch, o):
    class View(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:2]

        @staticmethod
        def backward(ctx, g):
            return torch.cat([g, g.new_zeros(1)])

    x = torch.tensor([1.0, 2.0, 3.0])
    y = View.apply(x)
    y.add_(5)
    o("x", x)
    o("y", y)
    o("y rg", y.requires_grad)


# ---- version checks of saved tensors -----------------------------------------------------------

@program
def fx_saved_intermediate_modified_in_forward_after_save(torch, o):
    class Sneaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Sneaky.apply(h)
    h.add_(1)
    o.raises("modified saved input", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an inplace operation")


@program
def fx_saved_input_version_numbers_in_message(torch, o):
    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.ones_like(x)

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Keep.apply(h)
    h.mul_(2)
    h.mul_(2)
    o("version", h._version)
    o.raises("message", lambda: y.backward(), "is at version 2; expected version 0 instead")


@program
def fx_saved_output_view_modified(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    z = y * 1
    y[0:1].mul_(1)  # a view of the saved output written in place
    o("y version", y._version)
    o.raises("saved output modified via view", lambda: z.sum().backward(),
             "which is output 0 of Exp, is at version 1; expected version 0 instead")


@program
def fx_saved_tensor_modified_after_backward_with_retain(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x + 0
    y = Sq.apply(h).sum()
    y.backward(retain_graph=True)
    o("grad 1", x.grad)
    with torch.no_grad():
        h.add_(1)
    o.raises("second backward", lambda: y.backward(),
             "one of the variables needed for gradient computation has been modified by an inplace operation")


@program
def fx_saved_tensor_accessed_after_inplace_in_backward_only(torch, o):
    class Lazy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3  # never reads saved_tensors

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Lazy.apply(h)
    h.add_(1)
    y.sum().backward()
    o("grad (no check without reading)", x.grad)


# ---- set_materialize_grads with several outputs -------------------------------------------------

@program
def fx_materialize_false_partially_used_outputs(torch, o):
    class Three(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2, g3):
            o("which are None", (g1 is None, g2 is None, g3 is None))
            gx = None
            for k, g in ((1, g1), (2, g2), (3, g3)):
                if g is not None:
                    gx = g * k if gx is None else gx + g * k
            return gx

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b, c = Three.apply(x)
    b.sum().backward()
    o("grad b only", x.grad)
    x.grad = None
    a, b, c = Three.apply(x)
    (a.sum() + c.sum()).backward()
    o("grad a and c", x.grad)


@program
def fx_materialize_default_zero_grads_dtype_and_shape(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.double() * 2, x.sum()

        @staticmethod
        def backward(ctx, g1, g2):
            o("g1", g1)
            o("g2", g2)
            return g1.float() * 2 + g2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Two.apply(x)
    b.backward()
    o("grad", x.grad)


@program
def fx_materialize_false_all_none_returns_none(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            o("both none", (g1 is None, g2 is None))
            return None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Two.apply(x)
    c = a.detach() * 0
    out = torch.autograd.grad((a * 0).sum(), x, allow_unused=True)
    o("out", out)


@program
def fx_grad_for_non_tensor_output_is_none(torch, o):
    class Mixed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, "label", 3, x * 4

        @staticmethod
        def backward(ctx, g1, g_label, g_int, g4):
            o("grads", (g_label, g_int))
            o("g1", g1)
            o("g4", g4)
            return g1 * 2 + g4 * 4

    x = torch.tensor([1.0, -1.0], requires_grad=True)
    a, s, k, b = Mixed.apply(x)
    o("non tensors", (s, k))
    a.sum().backward()
    o("grad", x.grad)


@program
def fx_backward_extra_nones_and_extra_tensor(torch, o):
    class ExtraNones(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None, None

    class ExtraTensor(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    ExtraNones.apply(x).sum().backward()
    o("grad", x.grad)
    o.raises("extra tensor", lambda: ExtraTensor.apply(x, 2.0).sum().backward(),
             "function ExtraTensorBackward returned an incorrect number of gradients (expected 2, got 3)")


@program
def fx_backward_grad_for_non_tensor_input_error(torch, o):
    class K(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, torch.ones(1)

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("grad for float arg", lambda: K.apply(x, 2.0).sum().backward(),
             "but the corresponding forward input was not a Variable")


@program
def fx_backward_grad_for_input_not_requiring_grad(torch, o):
    class M(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            o("needs", ctx.needs_input_grad)
            return g * 2, g * 3  # second is ignored: y doesn't require grad

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0])
    M.apply(x, y).sum().backward()
    o("x grad", x.grad)
    o("y grad", y.grad)


# ---- hooks on custom nodes ----------------------------------------------------------------------

@program
def fx_node_hooks_arguments_two_inputs_one_non_tensor(torch, o):
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            return x * k, y * 2

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 3, None, gb * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    a, b = F.apply(x, 3.0, y)
    events = []

    def pre(grad_outputs):
        events.append(("pre", len(grad_outputs), [g is None for g in grad_outputs]))
        o("pre grads", grad_outputs)

    def post(grad_inputs, grad_outputs):
        events.append(("post", len(grad_inputs), len(grad_outputs)))
        o("post grad_inputs", grad_inputs)

    a.grad_fn.register_prehook(pre)
    a.grad_fn.register_hook(post)
    o("same node", a.grad_fn is b.grad_fn)
    a.sum().backward()
    o("events", events)
    o("x grad", x.grad)
    o("y grad", y.grad)


@program
def fx_node_prehook_replaces_grad(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            o("g seen by backward", g)
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Sq.apply(x)
    y.grad_fn.register_prehook(lambda gouts: (gouts[0] * 10,))
    y.register_hook(lambda g: g + 1)
    y.sum().backward()
    o("x grad", x.grad)


@program
def fx_node_post_hook_replaces_grad_inputs(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Sq.apply(x)
    y.grad_fn.register_hook(lambda gin, gout: (gin[0] * -1,))
    y.sum().backward()
    o("x grad", x.grad)


@program
def fx_hook_order_tensor_vs_node_prehooks(torch, o):
    class Id(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("backward")
            return g

    order = []
    x = torch.tensor([1.0], requires_grad=True)
    y = Id.apply(x)
    y.grad_fn.register_prehook(lambda g: order.append("node pre 1"))
    y.register_hook(lambda g: order.append("tensor hook"))
    y.grad_fn.register_prehook(lambda g: order.append("node pre 2"))
    y.grad_fn.register_hook(lambda gi, go: order.append("node post"))
    x.register_hook(lambda g: order.append("input hook"))
    y.retain_grad()
    y.backward()
    o("order", order)
    o("y grad", y.grad)


@program
def fx_hook_handle_remove_on_custom_node(torch, o):
    class Id(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    calls = []
    x = torch.tensor([1.0], requires_grad=True)
    y = Id.apply(x)
    h1 = y.grad_fn.register_hook(lambda gi, go: calls.append("post"))
    h2 = y.grad_fn.register_prehook(lambda go: calls.append("pre"))
    h1.remove()
    y.backward(retain_graph=True)
    h2.remove()
    y.backward()
    o("calls", calls)
    o("grad", x.grad)


@program
def fx_retain_grad_on_function_input_and_multiple_outputs(torch, o):
    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:2].clone(), x[2:].clone()

        @staticmethod
        def backward(ctx, g1, g2):
            return torch.cat([g1, g2])

    leaf = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    x = leaf * 2
    x.retain_grad()
    a, b = Split.apply(x)
    a.retain_grad()
    b.retain_grad()
    (a * 3).sum().backward()
    o("a grad", a.grad)
    o("b grad", b.grad)
    o("x grad", x.grad)
    o("leaf grad", leaf.grad)


# ---- saved_tensors_hooks -------------------------------------------------------------------------

@program
def fx_saved_tensors_hooks_counts_inputs_outputs_intermediates(torch, o):
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    class Mix(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mid = x.sum(0)
            out = x * 2
            ctx.save_for_backward(x, out, mid, None)
            return out

        @staticmethod
        def backward(ctx, g):
            x, out, mid, none = ctx.saved_tensors
            o("none saved", none)
            return g * 2

    x = torch.ones(2, 3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = Mix.apply(x)
    o("after forward", list(log))
    y.sum().backward()
    o("after backward", list(log))


@program
def fx_saved_tensors_hooks_unpack_returns_other_tensor(torch, o):
    def pack(t):
        return t.detach().clone()

    def unpack(t):
        return t * 100

    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = Sq.apply(x)
    y.sum().backward()
    o("grad uses unpacked value", x.grad)


@program
def fx_saved_tensors_hooks_unpack_twice_in_backward(torch, o):
    n = {"pack": 0, "unpack": 0}

    def pack(t):
        n["pack"] += 1
        return t

    def unpack(t):
        n["unpack"] += 1
        return t

    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            (x2,) = ctx.saved_tensors
            return x * g + x2 * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = Sq.apply(x)
        y.sum().backward()
    o("counts", dict(n))
    o("grad", x.grad)


@program
def fx_saved_tensors_hooks_pack_sees_non_leaf_output(torch, o):
    seen = []

    def pack(t):
        seen.append((t.requires_grad, t.grad_fn is None, t.is_leaf))
        return t

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            o("x in backward rg", x.requires_grad)
            o("y in backward rg", y.requires_grad)
            return g * y

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = Exp.apply(x)
    o("seen at pack", seen)
    y.sum().backward()
    o("grad", x.grad)


# ---- anomaly mode, errors propagating ------------------------------------------------------------

@program
def fx_anomaly_nan_names_custom_node(torch, o):
    class BadSqrt(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sqrt()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g / (2 * x.sqrt()) * float("nan")

    x = torch.tensor([1.0, 4.0], requires_grad=True)

    def run():
        with torch.autograd.detect_anomaly():
            BadSqrt.apply(x).sum().backward()

    o.raises("anomaly", run, "Function 'BadSqrtBackward' returned nan values in its 0th output.")


@program
def fx_anomaly_nan_in_second_output(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, g * float("nan")

    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([2.0], requires_grad=True)

    def run():
        with torch.autograd.detect_anomaly(check_nan=True):
            Two.apply(x, y).sum().backward()

    o.raises("anomaly 1st output", run, "Function 'TwoBackward' returned nan values in its 1th output.")

    def run_no_check():
        with torch.autograd.detect_anomaly(check_nan=False):
            Two.apply(x, y).sum().backward()

    run_no_check()
    o("y grad nan", y.grad)


@program
def fx_error_in_backward_propagates_type_and_message(torch, o):
    class Err(Exception):
        pass

    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("my backward failed on purpose")

    class BoomF(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            raise KeyError("forward key")

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0], requires_grad=True)
    o.raises("backward", lambda: Boom.apply(x).sum().backward(), "my backward failed on purpose")
    o.raises("forward", lambda: BoomF.apply(x), "forward key")
    o.raises("autograd.grad", lambda: torch.autograd.grad(Boom.apply(x).sum(), x),
             "my backward failed on purpose")


# ---- gradcheck / gradgradcheck -------------------------------------------------------------------

@program
def fx_gradcheck_two_outputs_one_wrong(torch, o):
    class SinCos(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, gs, gc):
            (x,) = ctx.saved_tensors
            return gs * x.cos() + gc * x.sin()  # sign error on the cos part

    x = torch.tensor([0.3, 1.1], dtype=torch.float64, requires_grad=True)
    o.raises("gradcheck", lambda: torch.autograd.gradcheck(SinCos.apply, (x,)),
             "Jacobian mismatch for output 1 with respect to input 0")
    o("False", torch.autograd.gradcheck(SinCos.apply, (x,), raise_exception=False))


@program
def fx_gradcheck_float32_warns_or_fails(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([0.3, 1.1], requires_grad=True)
    r = o.warns("float32 warning", lambda: torch.autograd.gradcheck(Sq.apply, (x,), eps=1e-3, atol=1e-2),
                "Input #0 requires gradient and is not a double precision floating point")
    o("result", r)


@program
def fx_gradgradcheck_correct_and_wrong_double(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    class CubeDetached(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x.detach() ** 2 * g  # second order w.r.t. x lost

    x = torch.tensor([0.5, -1.2], dtype=torch.float64, requires_grad=True)
    o("good", torch.autograd.gradgradcheck(Cube.apply, (x,)))
    o("bad is False", torch.autograd.gradgradcheck(CubeDetached.apply, (x,), raise_exception=False))
    o.raises("bad raises", lambda: torch.autograd.gradgradcheck(CubeDetached.apply, (x,)),
             "Jacobian mismatch for output 0 with respect to input 0")


@program
def fx_gradcheck_forward_ad_with_jvp(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * x * t  # wrong

    x = torch.tensor([0.5, -1.2], dtype=torch.float64, requires_grad=True)
    o("backward only", torch.autograd.gradcheck(Sq.apply, (x,)))
    o.raises("forward ad", lambda: torch.autograd.gradcheck(Sq.apply, (x,), check_forward_ad=True),
             "Jacobian computed with forward mode mismatch for output 0 with respect to input 0")


@program
def fx_gradcheck_no_jvp_forward_ad_error(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([0.5, -1.2], dtype=torch.float64, requires_grad=True)
    o.raises("forward ad without jvp",
             lambda: torch.autograd.gradcheck(Sq.apply, (x,), check_forward_ad=True),
             "You must implement the jvp function for custom autograd.Function to use it with forward mode AD")


@program
def fx_gradcheck_fast_mode_wrong(torch, o):
    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = torch.tensor([0.5, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    o.raises("fast mode", lambda: torch.autograd.gradcheck(Wrong.apply, (x,), fast_mode=True),
             "Jacobian mismatch for output 0 with respect to input 0")
    o("fast False", torch.autograd.gradcheck(Wrong.apply, (x,), fast_mode=True, raise_exception=False))


# ---- the odd ways of calling apply ----------------------------------------------------------------

@program
def fx_apply_kwargs_only_tensors(torch, o):
    class Lin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w=None, scale=1.0):
            ctx.save_for_backward(x, w)
            ctx.scale = scale
            return x * w * scale

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w * ctx.scale, g * x * ctx.scale, None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    y = Lin.apply(x, w, scale=2.0)
    o("y", y)
    y.sum().backward()
    o("grads", (x.grad, w.grad))
    o.raises("tensor kwarg", lambda: Lin.apply(x, w=w), "")


@program
def fx_apply_tensors_in_list_and_dict_not_tracked(torch, o):
    class SumAll(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, extras, named):
            o("needs", ctx.needs_input_grad)
            return x + extras[0] + named["b"]

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    x = torch.tensor([1.0], requires_grad=True)
    e = torch.tensor([2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    y = SumAll.apply(x, [e], {"b": b})
    o("y", y)
    y.backward()
    o("grads", (x.grad, e.grad, b.grad))


@program
def fx_apply_only_non_grad_inputs_then_backward_error(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g

    y = Sq.apply(torch.tensor([1.0, 2.0]))
    o("y", y)
    o("grad_fn", y.grad_fn)
    o.raises("backward", lambda: y.sum().backward(),
             "element 0 of tensors does not require grad and does not have a grad_fn")


@program
def fx_apply_inference_mode_output_is_inference(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            o("grad enabled inside", torch.is_grad_enabled())
            o("inference inside", torch.is_inference_mode_enabled())
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.inference_mode():
        y = Sq.apply(x)
    o("y", y)
    o("is_inference", y.is_inference())
    o.raises("use in autograd", lambda: (y * x).sum().backward(), "Inference tensors cannot be saved for backward")


@program
def fx_apply_integer_tensor_requires_grad_output(torch, o):
    class ToFloat(torch.autograd.Function):
        @staticmethod
        def forward(ctx, idx, w):
            ctx.save_for_backward(idx)
            ctx.n = w.shape[0]
            return w[idx]

        @staticmethod
        def backward(ctx, g):
            (idx,) = ctx.saved_tensors
            out = torch.zeros(ctx.n, dtype=g.dtype)
            out.index_add_(0, idx, g)
            return None, out

    idx = torch.tensor([0, 2, 2])
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ToFloat.apply(idx, w)
    o("y", y)
    y.sum().backward()
    o("w grad", w.grad)

    class ReturnsInt(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x * 10).long()

        @staticmethod
        def backward(ctx, g):
            return g

    z = ReturnsInt.apply(w)
    o("int out", z)
    o("int out node", z.grad_fn)


@program
def fx_apply_zero_dim_and_zero_size(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    s = torch.tensor(3.0, requires_grad=True)
    y = Sq.apply(s)
    y.backward()
    o("scalar grad", s.grad)
    e = torch.zeros(0, 3, requires_grad=True)
    ye = Sq.apply(e)
    o("empty out", ye)
    ye.sum().backward()
    o("empty grad", e.grad)


@program
def fx_float32_input_backward_returns_float64(torch, o):
    class Up(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            o("g dtype", g.dtype)
            return g.double() * 2, (g * 3).half()

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = Up.apply(x, y.float())
    out.sum().backward()
    o("x grad", x.grad)
    o("y grad", y.grad)


@program
def fx_parameter_inputs_and_to_inside_forward(torch, o):
    class Cast(torch.autograd.Function):
        @staticmethod
        def forward(ctx, p):
            ctx.dtype = p.dtype
            return p.to(torch.float64) * 2

        @staticmethod
        def backward(ctx, g):
            o("g dtype", g.dtype)
            return (g * 2).to(ctx.dtype)

    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    y = Cast.apply(p)
    o("y", y)
    o("type of y", type(y).__name__)
    y.sum().backward()
    o("p grad", p.grad)


@program
def fx_to_inside_forward_returns_input_same_dtype(torch, o):
    class NoopTo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.to(torch.float32)  # same dtype: returns x itself

        @staticmethod
        def backward(ctx, g):
            return g * 5

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = NoopTo.apply(h)
    o("y is h", y is h)
    o("y node", node_name(y.grad_fn))
    y.sum().backward()
    o("x grad", x.grad)
    leaf_y = NoopTo.apply(x)
    o("leaf y is x", leaf_y is x)
    o("leaf y node", node_name(leaf_y.grad_fn))
    x.grad = None
    leaf_y.sum().backward()
    o("x grad via leaf", x.grad)


# ---- more transforms and forward AD -------------------------------------------------------------

@program
def fx_vmap_generate_rule_in_dims_1_and_tuple_output(torch, o):
    class Stats(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sum(), x.max()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, g, gmax):
            return g

    x = torch.arange(6.0).reshape(2, 3)
    s, m = torch.func.vmap(Stats.apply, in_dims=1)(x)
    o("s", s)
    o("m", m)
    s0, m0 = torch.func.vmap(Stats.apply, out_dims=(0, None) if False else 0)(x)
    o("s0", s0)


@program
def fx_vmap_rule_out_dims_none_and_info(torch, o):
    infos = []

    class Const(torch.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g, None

        @staticmethod
        def vmap(info, in_dims, x, k):
            infos.append((info.batch_size, info.randomness, in_dims))
            return x * k, in_dims[0]

    x = torch.arange(6.0).reshape(3, 2)
    o("out", torch.func.vmap(Const.apply, in_dims=(0, None))(x, 2.0))
    o("infos", infos)


@program
def fx_vmap_generate_rule_mark_dirty_error(torch, o):
    class Inplace(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            x.mul_(2)
            return x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_dirty(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.ones(2, 3)
    o.raises("vmap mark_dirty", lambda: torch.func.vmap(Inplace.apply)(x),
             "Some elements marked as dirty during the forward method were not returned as output")


@program
def fx_func_vjp_over_function(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, -3.0])
    out, fn = torch.func.vjp(Sq.apply, x)
    o("out", out)
    o("vjp", fn(torch.tensor([1.0, 0.5])))


@program
def fx_func_grad_backward_returns_none(torch, o):
    class Stop(torch.autograd.Function):
        @staticmethod
        def forward(x, y):
            return x * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return None, g * x

    x = torch.tensor([1.0, 2.0])
    y = torch.tensor([3.0, 4.0])
    o("grad x (None)", torch.func.grad(lambda a, b: Stop.apply(a, b).sum())(x, y))
    o("grad y", torch.func.grad(lambda a, b: Stop.apply(a, b).sum(), argnums=1)(x, y))


@program
def fx_func_grad_once_differentiable(torch, o):
    once_differentiable = torch.autograd.function.once_differentiable

    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0])
    o("grad", torch.func.grad(lambda t: Sq.apply(t).sum())(x))


@program
def fx_hessian_of_function_with_jvp(torch, o):
    class Sin(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * x.cos()

    x = torch.tensor([0.3, 1.2], dtype=torch.float64)
    o("hessian", torch.func.hessian(lambda t: Sin.apply(t).sum())(x))
    o("jacrev(jacrev)", torch.func.jacrev(torch.func.jacrev(lambda t: Sin.apply(t).sum()))(x))


@program
def fx_forward_ad_tangent_visible_inside_forward(torch, o):
    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            o("tangent inside forward", torch.autograd.forward_ad.unpack_dual(x).tangent is None)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0]), torch.tensor([4.0]))
        y = Probe.apply(d)
        o("tangent", fwAD.unpack_dual(y).tangent)


@program
def fx_forward_ad_two_outputs_jvp_zero_tangent(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 2, t.new_zeros(t.shape)

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0]), torch.tensor([4.0]))
        a, b = Two.apply(d)
        o("a tangent", fwAD.unpack_dual(a).tangent)
        o("b tangent", fwAD.unpack_dual(b).tangent)


@program
def fx_forward_ad_returns_input_without_mark_dirty(torch, o):
    class Ident(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            return t * 7

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
        o.raises("jvp not a view", lambda: Ident.apply(d),
                 "A custom Function's forward is returning a view (or an input as-is) but the jvp is not returning a view.")


@program
def fx_forward_ad_view_output_jvp(torch, o):
    class Head(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:2]

        @staticmethod
        def backward(ctx, g):
            return torch.cat([g, g.new_zeros(1)])

        @staticmethod
        def jvp(ctx, t):
            return t[:2]

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]))
        y = Head.apply(d)
        o("y tangent", fwAD.unpack_dual(y).tangent)
        o("y is view", y._base is not None)


@program
def fx_forward_ad_jvp_tangent_dtype_mismatch(torch, o):
    class Cast(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return (t * 2).double()

    fwAD = torch.autograd.forward_ad

    def run():
        with fwAD.dual_level():
            d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
            y = Cast.apply(d)
            return fwAD.unpack_dual(y).tangent

    o.raises("dtype mismatch", run, "")


@program
def fx_forward_ad_jvp_wrong_count(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    fwAD = torch.autograd.forward_ad

    def run():
        with fwAD.dual_level():
            d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
            Two.apply(d)

    o.raises("wrong count", run, "")


@program
def fx_forward_ad_saved_for_forward_after_inplace(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2 * x * t

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
        y = Sq.apply(d)
        o("tangent", fwAD.unpack_dual(y).tangent)
        o.raises("saved_tensors after", lambda: y.grad_fn, "")


@program
def fx_vmap_generate_rule_mark_dirty_unbatched_input(torch, o):
    class Inplace(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            x.mul_(2)
            return x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_dirty(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = torch.ones(3)
    out = torch.func.vmap(lambda u, b: Inplace.apply(u * 1) + b, in_dims=(None, 0))(a, torch.ones(2, 3))
    o("unbatched dirty", out)
    o("grad of dirty", torch.func.grad(lambda u: Inplace.apply(u * 1).sum())(a))
    batch = torch.ones(2, 3)
    o.raises("batched dirty inside", lambda: torch.func.vmap(lambda u: Inplace.apply(u) * 3)(batch),
             "Some elements marked as dirty during the forward method were not returned as output")


# ---- views created inside forward, detach, grads batched ------------------------------------------

@program
def fx_output_view_of_intermediate_then_inplace(torch, o):
    class FirstRow(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            tmp = x * 2
            return tmp[0]

        @staticmethod
        def backward(ctx, g):
            out = torch.zeros(2, 3)
            out[0] = g * 2
            return out

    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    y = FirstRow.apply(x)
    o("y._is_view", y._is_view())
    o("y node", node_name(y.grad_fn))
    o.raises("inplace", lambda: y.add_(1),
             "This view was created inside a custom Function")
    y2 = FirstRow.apply(x)
    z = y2 * 1
    z.sum().backward()
    o("x grad", x.grad)


@program
def fx_output_detach_of_input_then_inplace(torch, o):
    class Det(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.detach()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Det.apply(h)
    o("y is h", y is h)
    o("y._is_view", y._is_view())
    o("y node", node_name(y.grad_fn))
    y.mul_(3)
    o("h version", h._version)
    o("h", h)
    o.raises("saved modified", lambda: y.sum().backward(), "modified by an inplace operation")


@program
def fx_output_written_into_slice_copyslices(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    buf = torch.zeros(4)
    buf[1:3] = Sq.apply(x)
    o("buf", buf)
    o("buf node", node_name(buf.grad_fn))
    (buf * torch.arange(4.0)).sum().backward()
    o("x grad", x.grad)


@program
def fx_autograd_grad_is_grads_batched_through_function(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = Cube.apply(x)
    eye = torch.eye(3)
    (jac,) = torch.autograd.grad(y, x, eye, is_grads_batched=True)
    o("jacobian", jac)


@program
def fx_functional_jacobian_hessian_over_function(torch, o):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    o("jacobian", torch.autograd.functional.jacobian(Cube.apply, x))
    o("jacobian vectorized", torch.autograd.functional.jacobian(Cube.apply, x, vectorize=True))
    o("hessian", torch.autograd.functional.hessian(lambda t: Cube.apply(t).sum(), x))
    o("jvp (double backward trick)", torch.autograd.functional.jvp(Cube.apply, x, torch.ones(2, dtype=torch.float64)))
    o("hvp", torch.autograd.functional.hvp(lambda t: Cube.apply(t).sum(), x, torch.ones(2, dtype=torch.float64)))


@program
def fx_functional_hessian_once_differentiable_error(torch, o):
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

    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    o.raises("hessian", lambda: torch.autograd.functional.hessian(lambda t: Cube.apply(t).sum(), x),
             "trying to differentiate twice a function that was marked with @once_differentiable")


@program
def fx_no_grad_inside_backward_with_create_graph(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.no_grad():
                return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (g,) = torch.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    o("g", g)
    o("g requires_grad", g.requires_grad)
    o.raises("second order", lambda: torch.autograd.grad(g.sum(), x),
             "element 0 of tensors does not require grad and does not have a grad_fn")


@program
def fx_anomaly_forward_traceback_warning(torch, o):
    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("boom in backward")

    x = torch.tensor([1.0], requires_grad=True)

    def run():
        with torch.autograd.detect_anomaly():
            y = Boom.apply(x)
            try:
                y.sum().backward()
            except RuntimeError as e:
                return str(e)

    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        msg = run()
    o("message", msg)
    o("categories", [w.category.__name__ for w in caught])
    o("names the node", ["Error detected in BoomBackward" in str(w.message) for w in caught])


@program
def fx_multi_grad_hook_on_function_outputs(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Two.apply(x)
    seen = []
    torch.autograd.graph.register_multi_grad_hook((a, b), lambda grads: seen.append([g is None for g in grads]))
    (a * 5).sum().backward()
    o("seen", seen)
    o("grad", x.grad)


@program
def fx_prehook_sees_none_with_materialize_false(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            o("backward sees", (g1 is None, g2 is None))
            return g1 * 2 if g1 is not None else None

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Two.apply(x)
    a.grad_fn.register_prehook(lambda gouts: o("prehook sees", tuple(g is None for g in gouts)))
    a.grad_fn.register_hook(lambda gin, gout: o("posthook sees", (tuple(g is None for g in gin), tuple(g is None for g in gout))))
    a.sum().backward()
    o("grad", x.grad)


@program
def fx_grad_fn_metadata_and_name_of_nested_class(torch, o):
    class Outer:
        class Inner(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

    x = torch.tensor([1.0], requires_grad=True)
    y = Outer.Inner.apply(x)
    o("name", y.grad_fn.name())
    o("type", type(y.grad_fn).__name__)
    y.grad_fn.metadata["tag"] = 5
    o("metadata", y.grad_fn.metadata)
    o("next", [(node_name(f), i) for f, i in y.grad_fn.next_functions])
    o("needs_input_grad", y.grad_fn.needs_input_grad)


@program
def fx_autograd_grad_batched_errors_and_dict_inputs(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
    o("dict inputs", torch.autograd.grad(Sq.apply(x).sum(), {"x": x}))
    o("batched, unused input", torch.autograd.grad(Sq.apply(x), (x, w), torch.eye(3)[:2],
                                                   is_grads_batched=True, allow_unused=True))
    o("batched, materialized", torch.autograd.grad(Sq.apply(x), (x, w), torch.eye(3)[1:],
                                                   is_grads_batched=True, materialize_grads=True))
    o.raises("batched wrong shape", lambda: torch.autograd.grad(Sq.apply(x), x, torch.ones(2, 2),
                                                               is_grads_batched=True),
             "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch dimension")
    o.raises("batched scalar implicit", lambda: torch.autograd.grad(Sq.apply(x).sum(), x,
                                                                   is_grads_batched=True),
             "Got in_dim=0 for some input, but that input is a Tensor of dimensionality 0")
    y = Sq.apply(x)
    o("batched retain", torch.autograd.grad(y, x, torch.eye(3), is_grads_batched=True, retain_graph=True))
    o("again", torch.autograd.grad(y, x, torch.ones(1, 3), is_grads_batched=True))
    o.raises("freed", lambda: torch.autograd.grad(y, x, torch.ones(1, 3), is_grads_batched=True),
             "Trying to backward through the graph a second time")


# ---- version-check messages, exactly -------------------------------------------------------------

@program
def fx_version_message_leaked_intermediate(torch, o):
    leak = []

    class Leaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            tmp = x * 2
            leak.append(tmp)
            ctx.save_for_backward(tmp)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (tmp,) = ctx.saved_tensors
            return g * 3

    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = Leaky.apply(x)
    leak[0].add_(1)
    o.raises("intermediate", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [torch.DoubleTensor [2]] is at version 1; expected version 0 instead.")


@program
def fx_version_message_leaf_input(torch, o):
    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3

    x = torch.tensor(2.0, requires_grad=True)
    y = Keep.apply(x)
    with torch.no_grad():
        x.add_(1)
    o.raises("leaf", lambda: y.backward(),
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [torch.FloatTensor []] is at version 1; expected version 0 instead.")


@program
def fx_version_message_saved_output_second(torch, o):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2, x * 3
            ctx.save_for_backward(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            (b,) = ctx.saved_tensors
            return ga * 2 + gb * 3

    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    a, b = Two.apply(x)
    s = a.sum() + (b * 1).sum()
    with torch.no_grad():
        b.mul_(2)
        b.mul_(2)
    o.raises("second output", lambda: s.backward(),
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [torch.FloatTensor [1, 2]], which is output 1 of Two, "
             "is at version 2; expected version 0 instead.")


@program
def fx_version_message_non_leaf_input(torch, o):
    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    y = Keep.apply(h)
    h.add_(1)
    o.raises("non-leaf input", lambda: y.sum().backward(),
             "[torch.FloatTensor [2]], which is output 0 of Add, is at version 1; "
             "expected version 0 instead.")


@program
def fx_version_after_mark_dirty_saved_input(torch, o):
    class Add_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    v0 = h._version
    y = Add_.apply(h)
    o("version bump", h._version - v0)
    o("y node", node_name(y.grad_fn))
    y.sum().backward()
    o("grad", x.grad)
    h2 = x * 1
    y2 = Add_.apply(h2)
    y2.add_(1)
    o.raises("after second inplace", lambda: y2.sum().backward(),
             "which is output 0 of Add_, is at version 3; expected version 2 instead.")


@program
def fx_saved_tensor_hooks_with_version_change(torch, o):
    def pack(t):
        return t.clone()

    def unpack(t):
        return t

    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = Keep.apply(h)
    h.add_(10)
    y.sum().backward()
    o("grad uses packed copy (no version check)", x.grad)


@program
def fx_forward_ad_off_in_inference_mode(torch, o):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, -1.0]))
        with torch.inference_mode():
            y = Double.apply(d)
            z = d * 3
            o("Function tangent inside", fwAD.unpack_dual(y).tangent)
            o("op tangent inside", fwAD.unpack_dual(z).tangent)
            o("input tangent inside", fwAD.unpack_dual(d).tangent)
            with torch.inference_mode(False):
                o("inference_mode(False) inside", fwAD.unpack_dual(d * 3).tangent)
        o("Function tangent after", fwAD.unpack_dual(y).tangent)
        o("op tangent after", fwAD.unpack_dual(z).tangent)
        o("Function after", fwAD.unpack_dual(Double.apply(d)).tangent)
        with torch.no_grad():
            o("no_grad keeps forward AD", fwAD.unpack_dual(Double.apply(d)).tangent)


@program
def fx_jvp_sees_no_tangents_and_saved_tensors(torch, o):
    fwAD = torch.autograd.forward_ad

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x)
            made = fwAD.make_dual(torch.ones(2), torch.ones(2))
            o("make_dual in forward", fwAD.unpack_dual(made).tangent)
            return x * y

        @staticmethod
        def backward(ctx, g):
            o("saved in backward", ctx.saved_tensors)
            return g, g

        @staticmethod
        def jvp(ctx, tx, ty):
            o("saved in jvp (backward's are not)", ctx.saved_tensors)
            o("tangent of a tangent", fwAD.unpack_dual(tx).tangent)
            o("zero tangent for non-dual input", ty)
            return tx * 3

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.tensor([1.0, 1.0]))
        y = Probe.apply(d, torch.tensor([3.0, 3.0]))
        o("tangent", fwAD.unpack_dual(y).tangent)
    y.sum().backward()
    o("x grad", x.grad)


@program
def fx_vmap_of_grad_uses_custom_backward_not_rule(torch, o):
    class RoundSTE(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.round()

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 100  # straight-through, scaled: not the derivative of round

        @staticmethod
        def vmap(info, in_dims, x):
            return x.round(), in_dims[0]

    x = torch.tensor([[0.4, 1.6], [2.2, -0.7]])
    o("vmap(grad)", torch.func.vmap(torch.func.grad(lambda t: RoundSTE.apply(t).sum()))(x))
    o("vmap(jacrev)", torch.func.vmap(torch.func.jacrev(RoundSTE.apply))(x))
    o("grad(vmap): the rule's ops", torch.func.grad(lambda t: torch.func.vmap(RoundSTE.apply)(t).sum())(x))
    o("vmap out", torch.func.vmap(RoundSTE.apply)(x))


@program
def fx_jacfwd_over_vmap_rule_without_jvp(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def vmap(info, in_dims, x):
            return x * x, in_dims[0]

    x = torch.tensor([1.0, 2.0, 3.0])
    o("jacrev", torch.func.jacrev(Sq.apply)(x))
    o.raises("jacfwd", lambda: torch.func.jacfwd(Sq.apply)(x),
             "You must implement the jvp function for custom autograd.Function to use it with forward mode AD")
    o.raises("func.jvp", lambda: torch.func.jvp(Sq.apply, (x,), (torch.ones(3),)),
             "You must implement the jvp function for custom autograd.Function to use it with forward mode AD")


@program
def fx_errors_under_grad_name_generated_node(torch, o):
    class BadShape(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g.sum()

    class TooMany(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = torch.tensor([1.0, 2.0, 3.0])
    o.raises("grad, wrong shape", lambda: torch.func.grad(lambda t: BadShape.apply(t).sum())(x),
             "Function BadShapeGeneratedBackward returned an invalid gradient at index 0 - got [] "
             "but expected shape compatible with [3]")
    o.raises("vmap(grad), wrong shape",
             lambda: torch.func.vmap(torch.func.grad(lambda t: BadShape.apply(t).sum()))(x.reshape(3, 1)),
             "Function BadShapeGeneratedBackward returned an invalid gradient at index 0 - got [] "
             "but expected shape compatible with [1]")
    o.raises("jacrev, too many", lambda: torch.func.jacrev(TooMany.apply)(x),
             "function TooManyGeneratedBackward returned an incorrect number of gradients (expected 1, got 2)")
    o.raises("plain, too many", lambda: TooMany.apply(x.requires_grad_()).sum().backward(),
             "function TooManyBackward returned an incorrect number of gradients (expected 1, got 2)")


@program
def fx_vmap_rule_bad_returns(torch, o):
    class NotTuple(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def vmap(info, in_dims, x):
            return [x * 2, 0]

    class ThreeReturns(NotTuple):
        @staticmethod
        def vmap(info, in_dims, x):
            return x * 2, 0, 0

    class BadStructure(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2, x * 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g, h):
            return g

        @staticmethod
        def vmap(info, in_dims, x):
            return (x * 2, x * 3), (0,)

    x = torch.ones(2, 3)
    o.raises("list", lambda: torch.func.vmap(NotTuple.apply)(x),
             "Expected the vmap staticmethod to have two returns, an output and out_dims with "
             "pytree structure compatible with the output. Got a <class 'list'> instead")
    o.raises("three", lambda: torch.func.vmap(ThreeReturns.apply)(x),
             "Got 3 returns instead")
    o.raises("structure", lambda: torch.func.vmap(BadStructure.apply)(x),
             "The autograd.Function's vmap staticmethod returned an incompatible (output, out_dims) "
             "tuple. Expected out_dims=(0,) to be compatible with the structure of `output`.")
    o.raises("structure inside", lambda: torch.func.vmap(lambda t: BadStructure.apply(t)[0])(x),
             "The autograd.Function's vmap staticmethod returned an incompatible (output, out_dims) tuple.")


@program
def fx_saved_tensors_hooks_pack_modifies_input_error(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    def pack_in_place(t):
        t.mul_(1)
        return t

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1

    def run():
        with torch.autograd.graph.saved_tensors_hooks(pack_in_place, lambda t: t):
            Sq.apply(h)

    o.raises("pack writes in place", run, "A saved tensor pack hook is modifying its input in place.")

    def run_builtin():
        with torch.autograd.graph.saved_tensors_hooks(pack_in_place, lambda t: t):
            h * h

    o.raises("built-in op", run_builtin, "A saved tensor pack hook is modifying its input in place.")
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone().mul_(2), lambda t: t):
        y = Sq.apply(x)
    y.sum().backward()
    o("a pack hook may modify its own copy", x.grad)


@program
def fx_saved_tensors_hooks_unpack_errors_and_nesting(torch, o):
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: 5):
        y = Sq.apply(x)
    o.raises("unpack returns int", lambda: y.sum().backward(),
             "Output of saved tensor unpack_hook expected to be a Tensor but got result of type int")
    log = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: log.append("outer pack") or t,
                                                  lambda t: log.append("outer unpack") or t):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: log.append("inner pack") or t,
                                                      lambda t: log.append("inner unpack") or t):
            z = Sq.apply(x)
        w = Sq.apply(z)
    w.sum().backward()
    o("log", log)
    o("grad", x.grad)


@program
def fx_gradcheck_reentrancy_and_flags(torch, o):
    class Drifting(torch.autograd.Function):
        calls = 0

        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            Drifting.calls += 1
            return g * (2 + 1e-3 * Drifting.calls)  # a different answer every time

    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    o.raises("not reentrant", lambda: torch.autograd.gradcheck(Drifting.apply, (x,)),
             "Backward is not reentrant, i.e., running backward with same input and grad_output "
             "multiple times gives different values, although analytical gradient matches "
             "numerical gradient.The tolerance for nondeterminism was 0.0.")
    o("not reentrant, no raise", torch.autograd.gradcheck(Drifting.apply, (x,), raise_exception=False))
    o("within nondet_tol", torch.autograd.gradcheck(Drifting.apply, (x,), nondet_tol=1.0, atol=0.1))
    o("batched grad", torch.autograd.gradcheck(Sq.apply, (x,), check_batched_grad=True))
    o("gradgradcheck batched", torch.autograd.gradgradcheck(Sq.apply, (x,), check_batched_grad=True))
    o.raises("no mode", lambda: torch.autograd.gradcheck(Sq.apply, (x,), check_backward_ad=False),
             "Expected at least one of check_forward_ad or check_backward_ad to be True")
    o.raises("batched without backward", lambda: torch.autograd.gradcheck(
        Sq.apply, (x,), check_backward_ad=False, check_forward_ad=True, check_batched_grad=True),
        "Setting check_batched_grad=True requires check_backward_ad to be True")
    o.raises("non-tensor output", lambda: torch.autograd.gradcheck(lambda t: (Sq.apply(t), 3), (x,)),
             "'int' object has no attribute 'requires_grad'")


@program
def fx_forward_history_under_enable_grad_detached_when_not_recorded(torch, o):
    class OwnGraph(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with torch.enable_grad():
                y = x * 2
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 5

    class OwnGraphTwo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with torch.enable_grad():
                a = x * 2
                b = x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 5

    x = torch.tensor([0.5, 1.0], requires_grad=True)
    y = OwnGraph.apply(x)
    o("recorded: the custom node replaces the history", node_name(y.grad_fn))
    y.sum().backward()
    o("grad", x.grad)
    with torch.no_grad():
        z = OwnGraph.apply(x)
    o("under no_grad", (node_name(z.grad_fn), z.requires_grad, z.is_leaf))
    a, b = OwnGraphTwo.apply(x)
    o("marked non-differentiable", (node_name(b.grad_fn), b.requires_grad))
    o("the other", node_name(a.grad_fn))
    with torch.no_grad():
        a2, b2 = OwnGraphTwo.apply(x)
    o("two under no_grad", (node_name(a2.grad_fn), node_name(b2.grad_fn)))


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
