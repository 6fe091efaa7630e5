"""Conformance sweep, the custom ``autograd.Function`` contract, harder corners (round 2): each
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
    f = lambda t: Cube.apply(t)
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


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
