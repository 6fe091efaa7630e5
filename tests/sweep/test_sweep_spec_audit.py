"""Conformance sweep, the custom ``autograd.Function`` contract statement by statement
(docs/function_contract.md), in the unusual combinations a line-by-line
audit turns up: a Function returning the same tensor twice, an input that is also an output,
hooks that change dtypes, wrong gradients returned from backward, Functions under ``no_grad``
and ``inference_mode``, nested Functions, repeated backward with ``retain_graph``.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, node_name, registry

program = registry()


def _fn(torch, forward, backward, *, name="Fn", **extra):
    """A Function subclass named ``name`` with the given static methods."""
    body = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    body.update({k: staticmethod(v) if callable(v) else v for k, v in extra.items()})
    return type(name, (torch.autograd.Function,), body)


# ---- arity and identity of outputs -----------------------------------------------------------

@program
def spec_same_tensor_returned_twice(torch, o):
    def forward(ctx, x):
        y = x * 2
        return y, y

    def backward(ctx, g1, g2):
        ctx.seen = (g1, g2)
        return g1 * 2 + g2 * 3

    Fn = _fn(torch, forward, backward, name="Twice")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    o("same object", a is b)
    o("a", a)
    o("b", b)
    o("a out nr", a.output_nr)
    o("b out nr", b.output_nr)
    (a.sum() * 5 + b.sum()).backward()
    o("x.grad", x.grad)


@program
def spec_input_returned_unchanged_twice(torch, o):
    def forward(ctx, x):
        return x, x

    def backward(ctx, g1, g2):
        return g1 + 10 * g2

    Fn = _fn(torch, forward, backward, name="PassTwice")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    o("a is x", a is x)
    o("b is x", b is x)
    o("a is b", a is b)
    o("a grad_fn name", a.grad_fn.name())
    o("is_leaf", a.is_leaf)
    (a * 1.0 + b * 2.0).sum().backward()
    o("x.grad", x.grad)


@program
def spec_input_is_output_without_grad(torch, o):
    def forward(ctx, x, y):
        return x, y * 2

    def backward(ctx, gx, gy):
        return gx * 3, gy * 2

    Fn = _fn(torch, forward, backward, name="Mixed")
    x = torch.tensor([1.0, 2.0])
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    a, b = Fn.apply(x, y)
    o("a is x", a is x)
    o("a requires_grad", a.requires_grad)
    o("a", a)
    o("a grad_fn", None if a.grad_fn is None else a.grad_fn.name())
    (a.sum() + b.sum()).backward()
    o("y.grad", y.grad)


@program
def spec_view_of_input_returned(torch, o):
    def forward(ctx, x):
        return x.view(-1)

    def backward(ctx, g):
        return g.view(2, 2) * 2

    Fn = _fn(torch, forward, backward, name="ViewOut")
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = Fn.apply(x)
    o("y", y)
    o("y._is_view", y._is_view())
    o("grad_fn", y.grad_fn.name())
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_wrong_arity_too_many(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g, g

    Fn = _fn(torch, forward, backward, name="TooMany")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("too many", lambda: Fn.apply(x).sum().backward(),
             "returned an incorrect number of gradients (expected 1, got 2)")


@program
def spec_wrong_arity_too_few(torch, o):
    def forward(ctx, x, y):
        return x * y

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="TooFew")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    o.raises("too few", lambda: Fn.apply(x, y).sum().backward(),
             "returned an incorrect number of gradients (expected 2, got 1)")


@program
def spec_trailing_nones_accepted(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g * 2, None, None

    Fn = _fn(torch, forward, backward, name="Trailing")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


@program
def spec_non_tensor_input_gets_gradient(torch, o):
    def forward(ctx, x, k):
        return x * k

    def backward(ctx, g):
        return g * 2, g

    Fn = _fn(torch, forward, backward, name="NonTensorGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("non tensor", lambda: Fn.apply(x, 2.0).sum().backward(),
             "returned a gradient different than None at position 2, but the corresponding "
             "forward input was not a Variable")


@program
def spec_backward_returns_tuple_single(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return (g * 2,)

    Fn = _fn(torch, forward, backward, name="TupleOne")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


@program
def spec_backward_returns_list(torch, o):
    def forward(ctx, x, y):
        return x * y

    def backward(ctx, g):
        return [g * 2, g * 3]

    Fn = _fn(torch, forward, backward, name="ListBack")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("list", lambda: Fn.apply(x, y).sum().backward(), None)
    o("x.grad", x.grad)


# ---- gradient shape / dtype / None ------------------------------------------------------------

@program
def spec_grad_wrong_shape(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return torch.ones(7)

    Fn = _fn(torch, forward, backward, name="BadShape")
    x = torch.ones(2, 3, requires_grad=True)
    o.raises("shape", lambda: Fn.apply(x).sum().backward(),
             "returned an invalid gradient at index 0 - got [7] but expected shape compatible "
             "with [2, 3]")


@program
def spec_grad_leading_dims_summed(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return torch.ones(4, 2, 3) * 0.5

    Fn = _fn(torch, forward, backward, name="Leading")
    x = torch.ones(2, 3, requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


@program
def spec_grad_smaller_broadcastable_rejected(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return torch.ones(1, 3)

    Fn = _fn(torch, forward, backward, name="Smaller")
    x = torch.ones(2, 3, requires_grad=True)
    o.raises("smaller", lambda: Fn.apply(x).sum().backward(),
             "returned an invalid gradient at index 0")


@program
def spec_grad_scalar_for_vector_rejected(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return torch.tensor(1.0)

    Fn = _fn(torch, forward, backward, name="ScalarGrad")
    x = torch.ones(3, requires_grad=True)
    o.raises("scalar", lambda: Fn.apply(x).sum().backward(),
             "returned an invalid gradient at index 0")


@program
def spec_grad_for_scalar_input_shape_one(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return torch.ones(1) * 3

    Fn = _fn(torch, forward, backward, name="ScalarIn")
    x = torch.tensor(2.0, requires_grad=True)
    Fn.apply(x).backward()
    o("x.grad", x.grad)


@program
def spec_grad_wrong_dtype_cast(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return (g * 2).double()

    Fn = _fn(torch, forward, backward, name="Dbl")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    seen = []
    x.register_hook(lambda g: seen.append(g.dtype))
    y.sum().backward()
    o("x.grad", x.grad)
    o("hook dtype", seen)


@program
def spec_grad_int_dtype_for_float_input(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return torch.ones(2, dtype=torch.int64) * 3

    Fn = _fn(torch, forward, backward, name="IntGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


@program
def spec_grad_float16_input(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        o("g dtype", g.dtype)
        return g.float() * 2

    Fn = _fn(torch, forward, backward, name="HalfIn")
    x = torch.tensor([1.0, 2.0], dtype=torch.float16, requires_grad=True)
    y = Fn.apply(x)
    o("y dtype", y.dtype)
    y.float().sum().backward()
    o("x.grad", x.grad)


@program
def spec_grad_noncontiguous_returned(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return (torch.ones(3, 2) * torch.tensor([1.0, 2.0])).t()

    Fn = _fn(torch, forward, backward, name="NonContig")
    x = torch.ones(2, 3, requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)
    o("contig", x.grad.is_contiguous())


@program
def spec_grad_noncontiguous_incoming(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        o("g shape", g.shape)
        return g * 2

    Fn = _fn(torch, forward, backward, name="NonContigIn")
    x = torch.ones(2, 3, requires_grad=True)
    y = Fn.apply(x)
    y.t().sum(0).pow(2).sum().backward()
    o("x.grad", x.grad)


@program
def spec_none_grad_for_input_needing_grad(torch, o):
    def forward(ctx, x, y):
        return x * y

    def backward(ctx, g):
        return None, g * 2

    Fn = _fn(torch, forward, backward, name="NoneFirst")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x, y).sum().backward()
    o("x.grad", x.grad)
    o("y.grad", y.grad)
    x2 = torch.tensor([1.0, 2.0], requires_grad=True)
    y2 = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("grad unused", lambda: torch.autograd.grad(Fn.apply(x2, y2).sum(), [x2, y2]),
             "appears to not have been used in the graph")
    r = torch.autograd.grad(Fn.apply(x2, y2).sum(), [x2, y2], allow_unused=True)
    o("allow_unused", list(r))
    r = torch.autograd.grad(Fn.apply(x2, y2).sum(), [x2, y2], allow_unused=True,
                            materialize_grads=True)
    o("materialize_grads", list(r))


@program
def spec_none_grad_into_intermediate(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return None

    Fn = _fn(torch, forward, backward, name="NoneMid")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    seen = []
    h.register_hook(lambda g: seen.append(g))
    (Fn.apply(h).sum() + x.sum()).backward()
    o("x.grad", x.grad)
    o("hook calls", len(seen))


@program
def spec_grad_for_input_not_requiring_grad_dropped(torch, o):
    def forward(ctx, x, y):
        return x * y

    def backward(ctx, g):
        o("needs", ctx.needs_input_grad)
        return g * 2, torch.ones(13)

    Fn = _fn(torch, forward, backward, name="Dropped")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 2.0])
    Fn.apply(x, y).sum().backward()
    o("x.grad", x.grad)
    o("y.grad", y.grad)


# ---- zero materialization -----------------------------------------------------------------------

@program
def spec_materialize_unused_output(torch, o):
    def forward(ctx, x):
        return x * 2, (x * 3).long()

    def backward(ctx, g1, g2):
        o("g2", g2)
        o("g1", g1)
        return g1

    Fn = _fn(torch, forward, backward, name="Unused")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    o("b requires_grad", b.requires_grad)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_materialize_false_sees_none(torch, o):
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3, 7

    def backward(ctx, g1, g2, g3):
        o("g1 none", g1 is None)
        o("g2 none", g2 is None)
        o("g3 none", g3 is None)
        return g1 * 2

    Fn = _fn(torch, forward, backward, name="NoMat")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b, k = Fn.apply(x)
    o("k", k)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_materialize_non_tensor_output(torch, o):
    def forward(ctx, x):
        return x * 2, "label", 3

    def backward(ctx, g, gs, gk):
        o("gs", gs)
        o("gk", gk)
        return g * 2

    Fn = _fn(torch, forward, backward, name="WithStr")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, s, k = Fn.apply(x)
    o("s", s)
    o("k", k)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_non_differentiable_sort_indices(torch, o):
    def forward(ctx, x):
        s, idx = x.sort()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return s, idx

    def backward(ctx, g1, g2):
        o("g2", g2)
        x, idx = ctx.saved_tensors
        gi = torch.zeros_like(x)
        gi.index_add_(0, idx, g1)
        return gi

    Fn = _fn(torch, forward, backward, name="Sort")
    x = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
    s, idx = Fn.apply(x)
    o("idx requires_grad", idx.requires_grad)
    o("idx grad_fn", idx.grad_fn)
    o("idx is_leaf", idx.is_leaf)
    (s * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("x.grad", x.grad)


@program
def spec_non_differentiable_float_output_used(torch, o):
    def forward(ctx, x):
        a = x * 2
        b = x * 3
        ctx.mark_non_differentiable(b)
        return a, b

    def backward(ctx, ga, gb):
        o("gb", gb)
        return ga * 2

    Fn = _fn(torch, forward, backward, name="NDFloat")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    o("b rg", b.requires_grad)
    o.raises("b backward", lambda: b.sum().backward(), "does not require grad")
    (a + b).sum().backward()
    o("x.grad", x.grad)


@program
def spec_non_differentiable_input_returned(torch, o):
    def forward(ctx, x):
        ctx.mark_non_differentiable(x)
        return x

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="NDInput")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    o("y is x", y is x)
    o("y rg", y.requires_grad)
    o("y leaf", y.is_leaf)


# ---- mark_dirty --------------------------------------------------------------------------------

@program
def spec_mark_dirty_numpy_example(torch, o):
    def forward(ctx, x):
        x_npy = x.numpy()
        x_npy += 1
        ctx.mark_dirty(x)
        return x

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="Inplace")
    a = torch.tensor(1.0, requires_grad=True, dtype=torch.double).clone()
    b = a * a
    v0 = a._version
    r = Fn.apply(a)
    o("r is a", r is a)
    o("version bumped", a._version - v0)
    o("a grad_fn", a.grad_fn.name())
    o.raises("stale", lambda: b.backward(), "modified by an inplace operation")


@program
def spec_mark_dirty_input_without_grad(torch, o):
    def forward(ctx, x, y):
        x.add_(y)
        ctx.mark_dirty(x)
        return x

    def backward(ctx, g):
        return g, g * 2

    Fn = _fn(torch, forward, backward, name="AddInto")
    x = torch.tensor([1.0, 2.0])
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    r = Fn.apply(x, y)
    o("r is x", r is x)
    o("x rg", x.requires_grad)
    o("x leaf", x.is_leaf)
    o("x", x)
    x.sum().backward()
    o("y.grad", y.grad)


@program
def spec_mark_dirty_not_returned(torch, o):
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x * 1

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="DirtyLost")
    x = torch.tensor([1.0, 2.0], requires_grad=True).clone()
    o.raises("not returned", lambda: Fn.apply(x),
             "Some elements marked as dirty during the forward method were not returned as output.")


@program
def spec_mark_dirty_leaf_requires_grad(torch, o):
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="DirtyLeaf")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("leaf", lambda: Fn.apply(x), "a leaf Variable that requires grad")


@program
def spec_mark_dirty_view_of_leaf(torch, o):
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="DirtyLeafView")
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    o.raises("view of leaf", lambda: Fn.apply(x[:2]), "leaf Variable that requires grad")


@program
def spec_mark_dirty_non_input_warns(torch, o):
    def forward(ctx, x):
        y = x * 2
        ctx.mark_dirty(y)
        return y

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="DirtyNonInput")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = o.warns("warn", lambda: Fn.apply(x))
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_mark_dirty_view_input(torch, o):
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="DirtyView")
    leaf = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    base = leaf * 1
    v = base[1:3]
    r = Fn.apply(v)
    o("r is v", r is v)
    o("v grad_fn", v.grad_fn.name())
    o("base grad_fn", node_name(base.grad_fn))
    o("base", base)
    base.sum().backward()
    o("leaf.grad", leaf.grad)


@program
def spec_mark_dirty_two_outputs_one_dirty(torch, o):
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x, x * 2

    def backward(ctx, g1, g2):
        return g1 + 2 * g2

    Fn = _fn(torch, forward, backward, name="DirtyPlus")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf.clone()
    a, b = Fn.apply(x)
    o("a is x", a is x)
    o("a", a)
    o("b", b)
    (a.sum() + 3 * b.sum()).backward()
    o("leaf.grad", leaf.grad)


# ---- save_for_backward / release -------------------------------------------------------------

@program
def spec_saved_none_only_frees(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(None)
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="SaveNone")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x).sum()
    y.backward()
    o.raises("second", lambda: y.backward(), "Trying to backward through the graph a second time")


@program
def spec_save_nothing_repeatable(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="SaveNothing")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x).sum()
    y.backward()
    y.backward()
    o("x.grad", x.grad)


@program
def spec_retain_graph_then_release(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    Fn = _fn(torch, forward, backward, name="Retained")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    o("x.grad", x.grad)
    o.raises("third", lambda: y.backward(), "Trying to backward through the graph a second time")
    o.raises("saved_tensors after free", lambda: y.grad_fn.next_functions[0][0].saved_tensors,
             "after they have already been freed")


@program
def spec_create_graph_implies_retain(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x * x * g

    Fn = _fn(torch, forward, backward, name="Cube")
    x = torch.tensor([2.0], requires_grad=True)
    y = Fn.apply(x)
    g1, = torch.autograd.grad(y, x, create_graph=True)
    g2, = torch.autograd.grad(g1, x)
    o("g1", g1)
    o("g2", g2)
    g1b, = torch.autograd.grad(y, x)
    o("again", g1b)


@program
def spec_save_non_tensor_rejected(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x, 3)
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="SaveInt")
    x = torch.tensor([1.0], requires_grad=True)
    o.raises("int", lambda: Fn.apply(x),
             "save_for_backward can only save variables, but argument 1 is of type int")


@program
def spec_saved_output_version_check(torch, o):
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y

    Fn = _fn(torch, forward, backward, name="ExpOut")
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    y = Fn.apply(x)
    with torch.no_grad():
        y.mul_(2)
    o("version", y._version)
    o.raises("modified", lambda: y.sum().backward(), "is at version 1; expected version 0 instead")


@program
def spec_ctx_attribute_not_checked(torch, o):
    def forward(ctx, x):
        ctx.x = x
        return x * 2

    def backward(ctx, g):
        return g * ctx.x

    Fn = _fn(torch, forward, backward, name="AttrSave")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    y = Fn.apply(x)
    with torch.no_grad():
        x.add_(10)
    y.sum().backward()
    o("leaf.grad", leaf.grad)


@program
def spec_saved_tensors_hooks_pack_unpack_counts(torch, o):
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    def forward(ctx, x, y):
        ctx.save_for_backward(x, None, y)
        return x * y

    def backward(ctx, g):
        x, n, y = ctx.saved_tensors
        o("none slot", n)
        x, n, y = ctx.saved_tensors
        return g * y, g * x

    Fn = _fn(torch, forward, backward, name="Hooked")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        z = Fn.apply(x, y)
    log.append("forward done")
    z.sum().backward()
    o("log", log)
    o("y.grad", y.grad)


@program
def spec_saved_tensors_hooks_innermost(torch, o):
    log = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (log.append("outer"), t)[1],
                                                  lambda t: t):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: (log.append("inner"), t * 2)[1],
                                                      lambda t: t):
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 2 * x * g

            Fn = _fn(torch, forward, backward, name="Inner")
            x = torch.tensor([1.0, 2.0], requires_grad=True)
            y = Fn.apply(x)
    y.sum().backward()
    o("log", log)
    o("x.grad", x.grad)


# ---- once_differentiable -----------------------------------------------------------------------

@program
def spec_once_differentiable_twice(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        o("grad enabled in backward", torch.is_grad_enabled())
        return 2 * x * g

    od = torch.autograd.function.once_differentiable
    Fn = type("Once", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                   "backward": staticmethod(od(backward))})
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    g, = torch.autograd.grad((y * y).sum(), x, create_graph=True)  # y's gradient needs grad
    o("g", g)
    o("g rg", g.requires_grad)
    o("g grad_fn", node_name(g.grad_fn))
    o.raises("grad wrt x", lambda: torch.autograd.grad(g.sum(), x, retain_graph=True),
             "appears to not have been used in the graph")
    o.raises("second", lambda: g.sum().backward(),
             "trying to differentiate twice a function that was marked with @once_differentiable")
    y2 = Fn.apply(x).sum()
    g2, = torch.autograd.grad(y2, x, create_graph=False)
    o.raises("no graph", lambda: torch.autograd.grad(g2.sum(), x), "does not require grad")


# ---- grad modes ----------------------------------------------------------------------------------

@program
def spec_forward_grad_mode_and_enable_grad(torch, o):
    def forward(ctx, x):
        o("forward grad enabled", torch.is_grad_enabled())
        with torch.enable_grad():
            inner = x * 2
            o("inner rg", inner.requires_grad)
            o("inner grad_fn", None if inner.grad_fn is None else inner.grad_fn.name())
        return inner

    def backward(ctx, g):
        o("backward grad enabled", torch.is_grad_enabled())
        return g * 5

    Fn = _fn(torch, forward, backward, name="EnableInside")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    o("y grad_fn", y.grad_fn.name())
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_function_under_no_grad(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="NoGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        y = Fn.apply(x)
    o("y rg", y.requires_grad)
    o("y grad_fn", y.grad_fn)
    o("y leaf", y.is_leaf)


@program
def spec_function_under_no_grad_returns_input(torch, o):
    def forward(ctx, x):
        return x

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="NoGradPass")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        y = Fn.apply(x)
    o("y is x", y is x)
    o("y rg", y.requires_grad)


@program
def spec_function_under_inference_mode(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="Inference")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.inference_mode():
        y = Fn.apply(x)
    o("y rg", y.requires_grad)
    o("y inference", y.is_inference())
    o("y", y)


@program
def spec_backward_grad_mode_create_graph(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        o("grad enabled", torch.is_grad_enabled())
        x, = ctx.saved_tensors
        return 2 * x * g

    Fn = _fn(torch, forward, backward, name="Modes")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    torch.autograd.grad(Fn.apply(x).sum(), x)
    torch.autograd.grad(Fn.apply(x).sum(), x, create_graph=True)


# ---- nested Functions --------------------------------------------------------------------------

@program
def spec_nested_function_apply_in_forward(torch, o):
    def fwd_inner(ctx, x):
        return x * 3

    def bwd_inner(ctx, g):
        o("inner backward", True)
        return g * 3

    Inner = _fn(torch, fwd_inner, bwd_inner, name="Inner3")

    def fwd_outer(ctx, x):
        y = Inner.apply(x)
        o("inner output rg", y.requires_grad)
        return y * 2

    def bwd_outer(ctx, g):
        return g * 6

    Outer = _fn(torch, fwd_outer, bwd_outer, name="Outer")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Outer.apply(x)
    o("grad_fn", y.grad_fn.name())
    o("next", [type(n).__name__ if n is not None else None for n, _ in y.grad_fn.next_functions])
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_nested_function_in_backward(torch, o):
    def fwd_inner(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def bwd_inner(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    Inner = _fn(torch, fwd_inner, bwd_inner, name="SqInner")

    def fwd_outer(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3 / 3

    def bwd_outer(ctx, g):
        x, = ctx.saved_tensors
        return Inner.apply(x) * g

    Outer = _fn(torch, fwd_outer, bwd_outer, name="CubeThird")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    g, = torch.autograd.grad(Outer.apply(x).sum(), x, create_graph=True)
    o("g", g)
    o("g grad_fn", g.grad_fn.name())
    gg, = torch.autograd.grad(g.sum(), x)
    o("gg", gg)


# ---- hooks and order ---------------------------------------------------------------------------

@program
def spec_hook_order_full(torch, o):
    log = []

    def forward(ctx, x, y):
        return x * y, x + y

    def backward(ctx, g1, g2):
        log.append("backward")
        return g1 + g2, g1 + g2

    Fn = _fn(torch, forward, backward, name="Ordered")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y0 = torch.tensor([3.0, 4.0], requires_grad=True)
    y = y0 * 1
    a, b = Fn.apply(x, y)
    a.register_hook(lambda g: log.append("a hook"))
    b.register_hook(lambda g: log.append("b hook"))
    a.retain_grad()
    b.retain_grad()
    a.register_hook(lambda g: log.append("a hook after retain"))
    node = a.grad_fn
    node.register_prehook(lambda gos: log.append(("pre", len(gos))))
    node.register_hook(lambda gis, gos: log.append(("post", len(gis), len(gos))))
    x.register_hook(lambda g: log.append("x hook"))
    y.register_hook(lambda g: log.append("y hook"))
    y0.register_hook(lambda g: log.append("y0 hook"))
    (a.sum() + b.sum()).backward()
    o("log", log)
    o("a.grad", a.grad)
    o("b.grad", b.grad)


@program
def spec_hook_changes_dtype_on_output(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        o("g dtype", g.dtype)
        return g * 2

    Fn = _fn(torch, forward, backward, name="HookDtype")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.register_hook(lambda g: g.double())
    o.raises("dtype change", lambda: y.sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_hook_changes_dtype_on_leaf(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g.double())
    o.raises("leaf dtype", lambda: (x * 2).sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_hook_returns_wrong_shape(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: torch.ones(3))
    o.raises("hook shape", lambda: y.sum().backward(), None)


@program
def spec_prehook_returns_wrong_count(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="PreCount")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.grad_fn.register_prehook(lambda gos: (gos[0], gos[0]))
    o.raises("count", lambda: y.sum().backward(),
             "has returned an incorrect number of values (got 2, but expected 1)")


@program
def spec_posthook_replaces_grad_inputs(torch, o):
    def forward(ctx, x, k):
        return x * k

    def backward(ctx, g):
        return g * 2, None

    Fn = _fn(torch, forward, backward, name="PostReplace")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x, 3)
    seen = []

    def post(gis, gos):
        seen.append((len(gis), len(gos)))
        return (gis[0] * 100,)

    y.grad_fn.register_hook(post)
    y.sum().backward()
    o("seen", seen)
    o("x.grad", x.grad)


@program
def spec_prehook_replaces_grad_outputs(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        o("g", g)
        return g

    Fn = _fn(torch, forward, backward, name="PreReplace")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.grad_fn.register_prehook(lambda gos: (gos[0] * 7,))
    y.register_hook(lambda g: g + 1)
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_leaf_hook_once_summed(torch, o):
    def forward(ctx, x, y):
        return x * y

    def backward(ctx, g):
        return g, g

    Fn = _fn(torch, forward, backward, name="Both")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.clone()))
    Fn.apply(x, x).sum().backward()
    o("seen", seen)
    o("x.grad", x.grad)


@program
def spec_retain_grad_sees_hook_result(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="RetainOrder")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.register_hook(lambda g: g * 2)
    y.retain_grad()
    y.register_hook(lambda g: g * 3)
    y.sum().backward()
    o("y.grad", y.grad)
    o("x.grad", x.grad)


@program
def spec_node_properties(torch, o):
    def forward(ctx, x, k, y):
        return x * k + y

    def backward(ctx, g):
        return g, None, g

    Fn = _fn(torch, forward, backward, name="Props")
    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([2.0])
    z = Fn.apply(x, 2.0, y)
    o("name", z.grad_fn.name())
    o("nexts", [None if n is None else type(n).__name__ for n, _ in z.grad_fn.next_functions])
    o("needs", z.grad_fn.needs_input_grad)
    o("len nexts", len(z.grad_fn.next_functions))


@program
def spec_backward_twice_retain_accumulates(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    Fn = _fn(torch, forward, backward, name="Twice2")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    calls = []
    y.grad_fn.register_hook(lambda gi, go: calls.append(1))
    y.sum().backward(retain_graph=True)
    y.sum().backward(retain_graph=True)
    o("x.grad", x.grad)
    o("calls", len(calls))


# ---- containers and setup_context ------------------------------------------------------------

@program
def spec_list_argument_opaque(torch, o):
    def forward(ctx, xs):
        return xs[0] * 2

    def backward(ctx, g):
        return None

    Fn = _fn(torch, forward, backward, name="ListArg")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply([x])
    o("y rg", y.requires_grad)
    o("y grad_fn", y.grad_fn)


@program
def spec_setup_context_style(torch, o):
    def forward(x, k):
        return x * k

    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.k = k
        ctx.save_for_backward(x, output)
        o("output rg in setup", output.requires_grad)

    def backward(ctx, g):
        x, out = ctx.saved_tensors
        o("out is saved", out.shape)
        return g * ctx.k, None

    Fn = _fn(torch, forward, backward, name="Setup", setup_context=setup_context)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x, 3.0)
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_missing_backward(torch, o):
    def forward(ctx, x):
        return x * 2

    Fn = type("NoBack", (torch.autograd.Function,), {"forward": staticmethod(forward)})
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    o.raises("missing", lambda: y.sum().backward(),
             "You must implement either the backward or vjp method")


@program
def spec_both_backward_and_vjp(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="BothBV", vjp=backward)
    x = torch.tensor([1.0], requires_grad=True)
    o.raises("both", lambda: Fn.apply(x).sum().backward(),
             "Implementing both 'backward' and 'vjp' for a custom Function is not allowed.")


@program
def spec_vjp_only(torch, o):
    def forward(ctx, x):
        return x * 2

    def vjp(ctx, g):
        return g * 2

    Fn = type("VjpOnly", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                      "vjp": staticmethod(vjp)})
    x = torch.tensor([1.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


@program
def spec_missing_forward(torch, o):
    Fn = type("NoForward", (torch.autograd.Function,), {})
    x = torch.tensor([1.0], requires_grad=True)
    o.raises("missing forward", lambda: Fn.apply(x),
             "You must implement the forward function for custom autograd.Function.")


# ---- forward AD ------------------------------------------------------------------------------

@program
def spec_jvp_arguments(torch, o):
    fwAD = torch.autograd.forward_ad

    def forward(ctx, x, y, z):
        ctx.save_for_forward(x, y)
        ctx.z = z
        return x * y * z

    def jvp(ctx, x_t, y_t, z_t):
        o("z_t", z_t)
        o("y_t", y_t)
        o("saved", len(ctx.saved_tensors))
        x, y = ctx.saved_tensors
        return ctx.z * (y * x_t + x * y_t)

    def backward(ctx, g):
        return g, g, None

    Fn = _fn(torch, forward, backward, name="JvpFn", jvp=jvp)
    a = torch.tensor(1.0, dtype=torch.double)
    b = torch.tensor(2.0, dtype=torch.double)
    with fwAD.dual_level():
        d = Fn.apply(fwAD.make_dual(a, torch.tensor(1.0, dtype=torch.double)), b, 4)
        o("tangent", fwAD.unpack_dual(d).tangent)


@program
def spec_jvp_wrong_count(torch, o):
    fwAD = torch.autograd.forward_ad

    def forward(ctx, x):
        return x * 2, x * 3

    def jvp(ctx, t):
        return t * 2

    def backward(ctx, g1, g2):
        return g1

    Fn = _fn(torch, forward, backward, name="JvpCount", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0]), torch.tensor([1.0]))
        o.raises("count", lambda: Fn.apply(x),
                 "jvp returned an invalid number of forward gradients (expected 2 but got 1)")


@program
def spec_jvp_missing(torch, o):
    fwAD = torch.autograd.forward_ad

    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="NoJvp")
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0]), torch.tensor([1.0]))
        o.raises("missing", lambda: Fn.apply(x),
                 "You must implement the jvp function for custom autograd.Function")


# ---- vmap --------------------------------------------------------------------------------------

@program
def spec_vmap_no_rule(torch, o):
    def forward(x):
        return x * 2

    def setup_context(ctx, inputs, output):
        pass

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="Foo", setup_context=setup_context)
    o.raises("no rule", lambda: torch.vmap(Fn.apply)(torch.ones(3, 2)),
             "You tried to vmap over Foo, but it does not have vmap support.")


@program
def spec_vmap_ctx_style(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="CtxStyle", generate_vmap_rule=True)
    o.raises("ctx", lambda: torch.vmap(Fn.apply)(torch.ones(3, 2)),
             "it must override the setup_context staticmethod")


@program
def spec_vmap_staticmethod(torch, o):
    def forward(x, y):
        return x * y

    def setup_context(ctx, inputs, output):
        pass

    def backward(ctx, g):
        return g, g

    def vmap(info, in_dims, x, y):
        o("batch", info.batch_size)
        o("randomness", info.randomness)
        o("in_dims", in_dims)
        xd, yd = in_dims
        x = x.movedim(xd, 0) if xd is not None else x.unsqueeze(0)
        y = y.movedim(yd, 0) if yd is not None else y.unsqueeze(0)
        return x * y, 0

    Fn = _fn(torch, forward, backward, name="VmapRule", setup_context=setup_context, vmap=vmap)
    x = torch.arange(6.0).reshape(2, 3)
    y = torch.tensor([1.0, 2.0])
    r = torch.vmap(Fn.apply, in_dims=(1, None))(x, y)
    o("r", r)


@program
def spec_vmap_generate_rule(torch, o):
    def forward(x):
        return x.sin()

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos()

    Fn = _fn(torch, forward, backward, name="GenRule", setup_context=setup_context,
             generate_vmap_rule=True)
    x = torch.arange(6.0).reshape(2, 3)
    o("r", torch.vmap(Fn.apply)(x))
    o("grad", torch.vmap(torch.func.grad(lambda t: Fn.apply(t).sum()))(x))


# ---- batch 2: odd returns, ctx misuse, buffers ---------------------------------------------------

@program
def spec_backward_returns_python_float(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return 2.0

    Fn = _fn(torch, forward, backward, name="FloatGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("float", lambda: Fn.apply(x).sum().backward(), None)


@program
def spec_backward_returns_requires_grad_tensor(torch, o):
    w = torch.tensor([5.0, 6.0], requires_grad=True)

    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        with torch.enable_grad():
            return g * w

    Fn = _fn(torch, forward, backward, name="GradNeedsGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)
    o("w.grad", w.grad)


@program
def spec_no_input_requires_grad(torch, o):
    calls = []

    def forward(ctx, x):
        calls.append("forward")
        return x * 2

    def backward(ctx, g):
        calls.append("backward")
        return g

    Fn = _fn(torch, forward, backward, name="NoGradIn")
    x = torch.tensor([1.0, 2.0])
    y = Fn.apply(x)
    o("rg", y.requires_grad)
    o("leaf", y.is_leaf)
    o("grad_fn", y.grad_fn)
    o("calls", calls)


@program
def spec_forward_returns_none_and_int(torch, o):
    def forward(ctx, x):
        return None

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="RetNone")
    x = torch.tensor([1.0], requires_grad=True)
    o("none", Fn.apply(x))

    def forward2(ctx, x):
        return 3

    Fn2 = _fn(torch, forward2, backward, name="RetInt")
    o("int", Fn2.apply(x))


@program
def spec_forward_returns_list(torch, o):
    def forward(ctx, x):
        return [x * 2, x * 3]

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="RetList")
    x = torch.tensor([1.0], requires_grad=True)
    r = Fn.apply(x)
    o("type", type(r).__name__)
    o("rg", [t.requires_grad for t in r])


@program
def spec_forward_creates_leaf_output(torch, o):
    def forward(ctx, x):
        return torch.ones(2)

    def backward(ctx, g):
        return g.sum().expand(1) * 0 + g.sum()

    Fn = _fn(torch, forward, backward, name="NewLeaf")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    o("y rg", y.requires_grad)
    o("y leaf", y.is_leaf)
    (y * torch.tensor([2.0, 3.0])).sum().backward()
    o("x.grad", x.grad)


@program
def spec_integer_output_not_marked(torch, o):
    def forward(ctx, x):
        return x * 2, x.argmax()

    def backward(ctx, g, gi):
        o("gi", gi)
        return g

    Fn = _fn(torch, forward, backward, name="IntOut")
    x = torch.tensor([1.0, 3.0, 2.0], requires_grad=True)
    a, i = Fn.apply(x)
    o("i rg", i.requires_grad)
    o("i leaf", i.is_leaf)
    o("i grad_fn", i.grad_fn)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_ctx_saved_tensors_in_forward(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        o.raises("in forward", lambda: ctx.saved_tensors, None)
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="SavedInFwd")
    x = torch.tensor([1.0], requires_grad=True)
    Fn.apply(x)


@program
def spec_save_for_backward_twice(torch, o):
    def forward(ctx, x, y):
        ctx.save_for_backward(x)
        ctx.save_for_backward(y)
        return x * y

    def backward(ctx, g):
        saved = ctx.saved_tensors
        o("count", len(saved))
        o("saved", saved)
        return g, g

    Fn = _fn(torch, forward, backward, name="SaveTwice")
    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([2.0], requires_grad=True)
    Fn.apply(x, y).sum().backward()


@program
def spec_mark_non_differentiable_non_output(torch, o):
    def forward(ctx, x):
        other = x * 5
        ctx.mark_non_differentiable(other)
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="NDNonOut")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    o("rg", y.requires_grad)
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_materialize_false_non_differentiable(torch, o):
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        a, b = x * 2, x * 3
        ctx.mark_non_differentiable(b)
        return a, b

    def backward(ctx, ga, gb):
        o("gb", gb)
        return ga

    Fn = _fn(torch, forward, backward, name="NDNoMat")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_materialize_false_all_none_posthook(torch, o):
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    def backward(ctx, ga, gb):
        o("ga none", ga is None)
        return None if ga is None else ga

    Fn = _fn(torch, forward, backward, name="AllNone")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    seen = []
    a.grad_fn.register_hook(
        lambda gi, go: seen.append((gi[0] is None, go[0] is None, go[1] is None)))
    (b.sum() * 2).backward()
    o("seen", seen)
    o("x.grad", x.grad)


@program
def spec_output_used_twice_buffer_sum(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        o("g", g)
        return g * 2

    Fn = _fn(torch, forward, backward, name="UsedTwice")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    (y * 3 + y.exp()).sum().backward()
    o("x.grad", x.grad)


@program
def spec_output_consumed_in_two_dtypes(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        o("g dtype", g.dtype)
        o("g", g)
        return g

    Fn = _fn(torch, forward, backward, name="TwoDtypes")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    (y.double() * 3).sum().backward(retain_graph=True)
    o("x.grad", x.grad)
    (y.double().sum() + y.half().sum()).backward()
    o("x.grad 2", x.grad)


@program
def spec_grad_cast_for_intermediate(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g.double() * 2

    Fn = _fn(torch, forward, backward, name="CastMid")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    seen = []
    h.register_hook(lambda g: seen.append(g.dtype))
    h.grad_fn.register_prehook(lambda gos: seen.append(("pre", gos[0].dtype)))
    Fn.apply(h).sum().backward()
    o("seen", seen)
    o("x.grad", x.grad)


@program
def spec_backward_raises_user_error(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        raise ValueError("custom failure in backward")

    Fn = _fn(torch, forward, backward, name="Raises")
    x = torch.tensor([1.0], requires_grad=True)
    o.raises("user error", lambda: Fn.apply(x).sum().backward(), "custom failure in backward")
    o("x.grad", x.grad)


@program
def spec_posthook_wrong_count(torch, o):
    def forward(ctx, x, k):
        return x * k

    def backward(ctx, g):
        return g, None

    Fn = _fn(torch, forward, backward, name="PostCount")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x, 2)

    def post(gi, go):
        return (gi[0], gi[0])

    y.grad_fn.register_hook(post)
    o.raises("post count", lambda: y.sum().backward(),
             "hook 'post' has returned an incorrect number of values (got 2, but expected 1)")


@program
def spec_grad_outputs_shape_mismatch(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="GoMismatch")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    o.raises("mismatch", lambda: torch.autograd.grad(y, x, torch.ones(3)), "Mismatch in shape")
    o.raises("implicit", lambda: y.backward(),
             "grad can be implicitly created only for scalar outputs")


@program
def spec_backward_inputs_subset(torch, o):
    calls = []

    def forward(ctx, x, y):
        return x * y

    def backward(ctx, g):
        calls.append(ctx.needs_input_grad)
        return g * 2, g * 3

    Fn = _fn(torch, forward, backward, name="Subset")
    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([2.0], requires_grad=True)
    z = Fn.apply(x, y)
    z.backward(inputs=[y])
    o("x.grad", x.grad)
    o("y.grad", y.grad)
    o("calls", calls)


@program
def spec_grad_of_unreached_output_hook(torch, o):
    def forward(ctx, x):
        return x * 2, x * 3

    def backward(ctx, g1, g2):
        return g1 + g2

    Fn = _fn(torch, forward, backward, name="UnreachedHook")
    x = torch.tensor([1.0], requires_grad=True)
    a, b = Fn.apply(x)
    log = []
    b.register_hook(lambda g: log.append("b"))
    b.retain_grad()
    a.sum().backward()
    o("log", log)
    o("b.grad", b.grad)


@program
def spec_legacy_instance_call(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="Legacy")
    x = torch.tensor([1.0], requires_grad=True)
    o.raises("call", lambda: Fn()(x),
             "Legacy autograd function with non-static forward method is deprecated")


@program
def spec_apply_with_kwargs(torch, o):
    def forward(ctx, x, scale=2.0):
        return x * scale

    def backward(ctx, g):
        return g, None

    Fn = _fn(torch, forward, backward, name="Kw")
    x = torch.tensor([1.0], requires_grad=True)
    o.raises("kwargs", lambda: Fn.apply(x, scale=3.0), None)


@program
def spec_saved_input_modified_after_forward(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    Fn = _fn(torch, forward, backward, name="Stale")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    y = Fn.apply(x)
    x.add_(1)
    o.raises("stale", lambda: y.sum().backward(), "is at version 1; expected version 0 instead")


@program
def spec_saved_dirty_output(torch, o):
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        o("saved", x)
        return g * 2

    Fn = _fn(torch, forward, backward, name="SaveDirty")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    y = Fn.apply(x)
    o("version", x._version)
    y.sum().backward()
    o("leaf.grad", leaf.grad)


@program
def spec_mark_dirty_under_no_grad_leaf(torch, o):
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    def backward(ctx, g):
        return g

    Fn = _fn(torch, forward, backward, name="DirtyNoGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        o.raises("no_grad leaf", lambda: Fn.apply(x), None)
    o("x", x)
    o("x version", x._version)


@program
def spec_saved_variables_alias(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    def backward(ctx, g):
        o("to_save", type(ctx.to_save).__name__)
        return g * 2

    Fn = _fn(torch, forward, backward, name="ToSave")
    x = torch.tensor([1.0], requires_grad=True)
    Fn.apply(x).sum().backward()


@program
def spec_needs_input_grad_mixed(torch, o):
    def forward(ctx, a, k, b, c):
        o("needs in forward", ctx.needs_input_grad)
        return a * k + b + c

    def backward(ctx, g):
        o("needs", ctx.needs_input_grad)
        return g, None, g, g

    Fn = _fn(torch, forward, backward, name="Needs")
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([1.0])
    c = torch.tensor([1], dtype=torch.int64)
    Fn.apply(a, 2, b, c).sum().backward()
    o("a.grad", a.grad)


@program
def spec_hook_on_output_retain_graph_twice(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    Fn = _fn(torch, forward, backward, name="HookTwice")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    log = []
    y.register_hook(lambda g: log.append("y"))
    y.grad_fn.register_prehook(lambda go: log.append("pre"))
    x.register_hook(lambda g: log.append("x"))
    y.sum().backward(retain_graph=True)
    log.append("--")
    torch.autograd.grad(y.sum(), x)
    o("log", log)
    o("x.grad", x.grad)


@program
def spec_hook_handle_remove_during_backward(torch, o):
    def forward(ctx, x):
        return x * 2

    def backward(ctx, g):
        return g * 2

    Fn = _fn(torch, forward, backward, name="Removing")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    log = []
    handles = []

    def first(g):
        log.append("first")
        handles[0].remove()

    handles.append(y.register_hook(lambda g: log.append("second")))
    y.register_hook(first)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    o("log", log)


@program
def spec_double_backward_via_saved_output(torch, o):
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y

    Fn = _fn(torch, forward, backward, name="ExpFn")
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    y = Fn.apply(x)
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    gg, = torch.autograd.grad(g.sum(), x)
    o("gg", gg)


@program
def spec_tensor_hook_on_input_twice_used(torch, o):
    def forward(ctx, x, y):
        return x + y

    def backward(ctx, g):
        return g * 2, g * 3

    Fn = _fn(torch, forward, backward, name="TwiceIn")
    leaf = torch.tensor([1.0], requires_grad=True)
    h = leaf * 1
    seen = []
    h.register_hook(lambda g: seen.append(g.clone()))
    Fn.apply(h, h).sum().backward()
    o("seen", seen)
    o("leaf.grad", leaf.grad)


@program
def spec_function_with_inference_tensor_input(torch, o):
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        return x * w

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return None, g * x

    Fn = _fn(torch, forward, backward, name="InfIn")
    with torch.inference_mode():
        x = torch.tensor([1.0, 2.0])
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    o.raises("inference saved", lambda: Fn.apply(x, w).sum().backward(), None)
    o("w.grad", w.grad)


# ---- views of inputs, ctx as node, func transforms, jvp, vmap ----------------------------------

@program
def spec_view_output_inplace(torch, o):
    def forward(ctx, x):
        return x.view(-1)
    def backward(ctx, g):
        return g.view(2, 2)
    Fn = _fn(torch, forward, backward, name="ViewOut2")
    leaf = torch.ones(2, 2, requires_grad=True)
    x = leaf * 1
    y = Fn.apply(x)
    o.raises("inplace on view", lambda: y.mul_(2), "is a view and is being modified inplace")


@program
def spec_identity_output_inplace(torch, o):
    def forward(ctx, x):
        return x
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="Ident")
    leaf = torch.ones(2, requires_grad=True)
    x = leaf * 1
    y = Fn.apply(x)
    o("y is x", y is x)
    o("is view", y._is_view())
    o.raises("inplace", lambda: y.mul_(2), None)
    o("y grad_fn", node_name(y.grad_fn))
    o.raises("bw", lambda: y.sum().backward(), None)
    o("leaf.grad", leaf.grad)


@program
def spec_multi_view_outputs_inplace(torch, o):
    def forward(ctx, x):
        return x[:1], x[1:]
    def backward(ctx, g1, g2):
        return torch.cat([g1, g2])
    Fn = _fn(torch, forward, backward, name="Split2")
    leaf = torch.ones(3, requires_grad=True)
    x = leaf * 1
    a, b = Fn.apply(x)
    o.raises("inplace", lambda: a.mul_(2), None)
    (a.sum() + 2 * b.sum()).backward()
    o("leaf.grad", leaf.grad)


@program
def spec_hook_on_non_grad_tensor(torch, o):
    x = torch.ones(2)
    o.raises("hook", lambda: x.register_hook(lambda g: g),
             "cannot register a hook on a tensor that doesn't require gradient")


@program
def spec_grad_fn_is_ctx(torch, o):
    box = []
    def forward(ctx, x):
        box.append(ctx)
        ctx.k = 5
        ctx.save_for_backward(x)
        return x * 2
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="Ctx")
    x = torch.ones(2, requires_grad=True)
    y = Fn.apply(x)
    o("is ctx", y.grad_fn is box[0])
    o("k", y.grad_fn.k)
    o("saved before", y.grad_fn.saved_tensors)
    o("metadata", y.grad_fn.metadata)
    o("type name", type(y.grad_fn).__name__)
    o("needs", y.grad_fn.needs_input_grad)
    o("dirty", getattr(y.grad_fn, "dirty_tensors", "absent"))


@program
def spec_nested_class_name(torch, o):
    class Outer:
        class Inner(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                return g
    y = Outer.Inner.apply(torch.ones(1, requires_grad=True))
    o("name", y.grad_fn.name())
    o("type", type(y.grad_fn).__name__)


@program
def spec_parameter_mark_dirty(torch, o):
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="ParamDirty")
    p = torch.nn.Parameter(torch.ones(2))
    o.raises("param", lambda: Fn.apply(p), "a leaf Variable that requires grad")
    o("p", p)


@program
def spec_func_grad_ctx_style(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="FuncCtx")
    o.raises("func.grad", lambda: torch.func.grad(lambda t: Fn.apply(t).sum())(torch.ones(2)),
             "it must override the setup_context staticmethod")


@program
def spec_func_jvp_with_setup_context(torch, o):
    def forward(x):
        return x.sin()
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])
    def jvp(ctx, t):
        x, = ctx.saved_tensors
        return t * x.cos()
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="FJvp", setup_context=setup_context, jvp=jvp)
    p, t = torch.func.jvp(Fn.apply, (torch.tensor([0.5, 1.0]),), (torch.tensor([1.0, 2.0]),))
    o("p", p)
    o("t", t)


@program
def spec_jvp_non_dual_input_gets_zeros_or_none(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x, y):
        return x * y
    def jvp(ctx, xt, yt):
        o("yt", yt)
        return xt * 2
    def backward(ctx, g):
        return g, g
    Fn = _fn(torch, forward, backward, name="JZero", jvp=jvp)
    def forward2(ctx, x, y):
        ctx.set_materialize_grads(False)
        return x * y
    Fn2 = _fn(torch, forward2, backward, name="JNone", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
        r = Fn.apply(x, torch.tensor([3.0, 4.0]))
        o("t", fwAD.unpack_dual(r).tangent)
        r = Fn2.apply(x, torch.tensor([3.0, 4.0]))
        o("t2", fwAD.unpack_dual(r).tangent)


@program
def spec_jvp_non_diff_output_returns_tensor(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        a, b = x * 2, x * 3
        ctx.mark_non_differentiable(b)
        return a, b
    def jvp(ctx, t):
        return t * 2, t * 3
    def backward(ctx, g1, g2):
        return g1
    Fn = _fn(torch, forward, backward, name="JND", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
        o.raises("nd", lambda: Fn.apply(x), None)


@program
def spec_jvp_wrong_shape(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        return x * 2
    def jvp(ctx, t):
        return torch.ones(3)
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="JShape", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))
        o.raises("shape", lambda: Fn.apply(x), None)


@program
def spec_jvp_not_called_without_dual(torch, o):
    calls = []
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        return x * 2
    def jvp(ctx, t):
        calls.append(1)
        return t * 2
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="JNo", jvp=jvp)
    with fwAD.dual_level():
        Fn.apply(torch.ones(2, requires_grad=True))
    o("calls", calls)


@program
def spec_vmap_both_rule_and_generate(torch, o):
    def forward(x):
        return x * 2
    def setup_context(ctx, inputs, output):
        pass
    def backward(ctx, g):
        return g
    def vmap(info, in_dims, x):
        return x * 2, in_dims[0]
    Fn = _fn(torch, forward, backward, name="BothV", setup_context=setup_context, vmap=vmap,
             generate_vmap_rule=True)
    o.raises("both", lambda: torch.vmap(Fn.apply)(torch.ones(3, 2)), None)


@program
def spec_vmap_randomness(torch, o):
    def forward(x):
        return x * 2
    def setup_context(ctx, inputs, output):
        pass
    def backward(ctx, g):
        return g
    def vmap(info, in_dims, x):
        o("randomness", info.randomness)
        return x * 2, in_dims[0]
    Fn = _fn(torch, forward, backward, name="RandV", setup_context=setup_context, vmap=vmap)
    torch.vmap(Fn.apply, randomness="different")(torch.ones(3, 2))
    torch.vmap(Fn.apply, randomness="same")(torch.ones(3, 2))
    r = torch.vmap(Fn.apply, in_dims=1, out_dims=1)(torch.arange(6.0).reshape(2, 3))
    o("r", r)


@program
def spec_vmap_ctx_style_with_rule(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g
    def vmap(info, in_dims, x):
        return x * 2, in_dims[0]
    Fn = _fn(torch, forward, backward, name="CtxV", vmap=vmap)
    o.raises("ctx", lambda: torch.vmap(Fn.apply)(torch.ones(3, 2)), "setup_context")


@program
def spec_vmap_rule_bad_out_dims(torch, o):
    def forward(x):
        return x * 2, x * 3
    def setup_context(ctx, inputs, output):
        pass
    def backward(ctx, g, h):
        return g
    def vmap(info, in_dims, x):
        return (x * 2, x * 3), 0
    Fn = _fn(torch, forward, backward, name="BadOut", setup_context=setup_context, vmap=vmap)
    r = torch.vmap(Fn.apply)(torch.ones(3, 2))
    o("r", r)
    def vmap2(info, in_dims, x):
        return (x * 2, x * 3), (0,)
    Fn2 = _fn(torch, forward, backward, name="BadOut2", setup_context=setup_context, vmap=vmap2)
    o.raises("bad", lambda: torch.vmap(Fn2.apply)(torch.ones(3, 2)), None)


# ---- hooks around a custom node, saved-tensor hooks --------------------------------------------

@program
def spec_hooks_see_unmaterialized(torch, o):
    def forward(ctx, x):
        return x * 2, x * 3
    def backward(ctx, g1, g2):
        o("g2 in backward", g2)
        return g1 + g2
    Fn = _fn(torch, forward, backward, name="SeeNone")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    a.grad_fn.register_prehook(lambda gos: o("pre none", [g is None for g in gos]))
    a.grad_fn.register_hook(lambda gis, gos: o("post none", [g is None for g in gos]))
    a.sum().backward()


@program
def spec_retain_grad_before_node_prehook(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        o("g", g)
        return g
    Fn = _fn(torch, forward, backward, name="RetPre")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.retain_grad()
    y.grad_fn.register_prehook(lambda gos: (gos[0] * 10,))
    y.register_hook(lambda g: g + 1)
    y.sum().backward()
    o("y.grad", y.grad)
    o("x.grad", x.grad)


@program
def spec_prehook_registered_in_forward(torch, o):
    log = []
    def forward(ctx, x):
        ctx.register_prehook(lambda gos: log.append("pre"))
        ctx.register_hook(lambda gis, gos: log.append("post"))
        return x * 2
    def backward(ctx, g):
        log.append("backward")
        return g
    Fn = _fn(torch, forward, backward, name="HookInFwd")
    x = torch.tensor([1.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("log", log)


@program
def spec_node_prehook_changes_dtype(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        o("g dtype", g.dtype)
        return g
    Fn = _fn(torch, forward, backward, name="PreDtype")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    y.grad_fn.register_prehook(lambda gos: (gos[0].double(),))
    o.raises("pre dtype", lambda: y.sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_node_posthook_changes_dtype(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="PostDtype")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    y.grad_fn.register_hook(lambda gis, gos: (gis[0].double(),))
    o.raises("post dtype", lambda: y.sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_node_posthook_changes_shape(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="PostShape")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.grad_fn.register_hook(lambda gis, gos: (torch.ones(3),))
    o.raises("post shape", lambda: y.sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_post_accumulate_hook_order(torch, o):
    log = []
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        log.append("backward")
        return g * 2
    Fn = _fn(torch, forward, backward, name="PostAcc")
    x = torch.tensor([1.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: log.append(("post acc", t.grad.tolist())))
    x.register_hook(lambda g: log.append("tensor hook"))
    Fn.apply(x).sum().backward()
    o("log", log)


@program
def spec_hooks_on_input_returned_unchanged(torch, o):
    log = []
    def forward(ctx, x):
        return x
    def backward(ctx, g):
        log.append(("backward", g.tolist()))
        return g * 2
    Fn = _fn(torch, forward, backward, name="IdHooks")
    leaf = torch.tensor([1.0], requires_grad=True)
    x = leaf * 1
    x.register_hook(lambda g: log.append(("x", g.tolist())))
    y = Fn.apply(x)
    y.register_hook(lambda g: log.append(("y", g.tolist())))
    (y * 3).sum().backward()
    o("log", log)
    o("leaf.grad", leaf.grad)


@program
def spec_multi_grad_hook_on_outputs(torch, o):
    log = []
    def forward(ctx, x):
        return x * 2, x * 3
    def backward(ctx, g1, g2):
        return g1 + g2
    Fn = _fn(torch, forward, backward, name="Multi")
    x = torch.tensor([1.0], requires_grad=True)
    a, b = Fn.apply(x)
    torch.autograd.graph.register_multi_grad_hook(
        (a, b), lambda grads: log.append([g is None for g in grads]))
    a.sum().backward()
    o("log", log)


@program
def spec_function_output_grad_of_view_base(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        o("g", g)
        return g * 2
    Fn = _fn(torch, forward, backward, name="ViewBase")
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = Fn.apply(x)
    y[0].sum().backward()
    o("x.grad", x.grad)


@program
def spec_inplace_on_function_output_then_backward(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        o("g", g)
        return g * 2
    Fn = _fn(torch, forward, backward, name="InplaceAfter")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.mul_(3)
    o("y grad_fn", y.grad_fn.name())
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_inplace_on_function_output_saved(torch, o):
    def forward(ctx, x):
        y = x * 2
        ctx.save_for_backward(y)
        return y
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y
    Fn = _fn(torch, forward, backward, name="InplaceSaved")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.mul_(3)
    o.raises("saved", lambda: y.sum().backward(), "modified by an inplace operation")


@program
def spec_function_in_checkpoint_like_enable_grad_backward(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()
    def backward(ctx, g):
        x, = ctx.saved_tensors
        with torch.enable_grad():
            xd = x.detach().requires_grad_()
            y = xd.sin()
            gx, = torch.autograd.grad(y, xd, g)
        return gx
    Fn = _fn(torch, forward, backward, name="Recompute")
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


@program
def spec_grad_dtype_from_hook_on_intermediate(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: g.half())
    o.raises("half", lambda: (h * 3).sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_apply_returns_tuple_with_one_element(torch, o):
    def forward(ctx, x):
        return (x * 2,)
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="OneTuple")
    x = torch.tensor([1.0], requires_grad=True)
    r = Fn.apply(x)
    o("type", type(r).__name__)
    r[0].sum().backward()
    o("x.grad", x.grad)


@program
def spec_forward_returns_nested_tuple(torch, o):
    def forward(ctx, x):
        return x * 2, (x * 3, x * 4)
    def backward(ctx, g, gt):
        o("gt", gt)
        return g
    Fn = _fn(torch, forward, backward, name="NestTup")
    x = torch.tensor([1.0], requires_grad=True)
    a, t = Fn.apply(x)
    o("inner rg", t[0].requires_grad)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_saved_tensor_hooks_during_backward_only(torch, o):
    log = []
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="LateHooks")
    x = torch.tensor([1.0], requires_grad=True)
    y = Fn.apply(x)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (log.append("pack"), t)[1],
                                                  lambda t: (log.append("unpack"), t)[1]):
        y.sum().backward()
    o("log", log)


@program
def spec_saved_tensor_hook_unpack_changes_value(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="UnpackChange")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 10, lambda t: t + 1):
        y = Fn.apply(x)
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_saved_tensor_pack_to_non_tensor(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x, None)
        return x * x
    def backward(ctx, g):
        x, n = ctx.saved_tensors
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="PackTuple")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: ("packed", t.tolist()),
                                                  lambda p: torch.tensor(p[1])):
        y = Fn.apply(x)
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_unpack_wrong_shape(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    def backward(ctx, g):
        x, = ctx.saved_tensors
        o("x shape", x.shape)
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="UnpackShape")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t.sum()):
        y = Fn.apply(x)
    y.sum().backward()
    o("x.grad", x.grad)


# ---- dirty corner cases, gradient layout, grads of several outputs, double backward ------------

@program
def spec_mark_dirty_not_executable(torch, o):
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="DirtyPlain")
    x = torch.tensor([1.0, 2.0])
    v = x._version
    r = Fn.apply(x)
    o("r is x", r is x)
    o("bumps", x._version - v)
    o("rg", x.requires_grad)
    with torch.no_grad():
        y = torch.tensor([1.0], requires_grad=True).clone()
    with torch.no_grad():
        r = Fn.apply(y)
    o("no_grad same", r is y)
    o("no_grad grad_fn", r.grad_fn)


@program
def spec_mark_dirty_and_non_differentiable(torch, o):
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        ctx.mark_non_differentiable(x)
        return x
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="DirtyND")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    r = Fn.apply(x)
    o("r is x", r is x)
    o("r rg", r.requires_grad)
    o("x grad_fn", node_name(x.grad_fn))
    o("r grad_fn", node_name(r.grad_fn))


@program
def spec_mark_dirty_returned_twice(torch, o):
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x, x
    def backward(ctx, g1, g2):
        return g1 + g2
    Fn = _fn(torch, forward, backward, name="DirtyTwice")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    o.raises("twice", lambda: Fn.apply(x), None)


@program
def spec_inplace_without_mark_dirty(torch, o):
    def forward(ctx, x):
        x.add_(1)
        return x
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="Sneaky")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    a = leaf * 1
    b = a * a
    r = Fn.apply(a)
    o("r is a", r is a)
    o("version", a._version)
    o.raises("stale", lambda: b.sum().backward(), "modified by an inplace operation")


@program
def spec_same_grad_to_two_leaves(torch, o):
    def forward(ctx, x, y):
        return x + y
    def backward(ctx, g):
        return g, g
    Fn = _fn(torch, forward, backward, name="Share")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    (Fn.apply(x, y) * torch.tensor([2.0, 3.0])).sum().backward()
    o("same", x.grad is y.grad)
    x.grad.add_(1)
    o("y.grad", y.grad)


@program
def spec_expanded_grad_to_leaf(torch, o):
    def forward(ctx, x):
        return x.sum()
    def backward(ctx, g):
        return g.expand(2, 3)
    Fn = _fn(torch, forward, backward, name="Expanded")
    x = torch.ones(2, 3, requires_grad=True)
    Fn.apply(x).backward()
    o("x.grad", x.grad)
    o("stride", x.grad.stride())
    o("contig", x.grad.is_contiguous())


@program
def spec_transposed_grad_stride(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g.t().contiguous().t()
    Fn = _fn(torch, forward, backward, name="Transposed")
    x = torch.ones(2, 3, requires_grad=True)
    Fn.apply(x).sum().backward()
    o("stride", x.grad.stride())


@program
def spec_backward_on_two_outputs_at_once(torch, o):
    def forward(ctx, x):
        return x * 2, x * 3
    def backward(ctx, g1, g2):
        o("g1", g1)
        o("g2", g2)
        return g1 * 2 + g2 * 3
    Fn = _fn(torch, forward, backward, name="Both2")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    torch.autograd.backward([a, b], [torch.tensor([1.0, 10.0]), torch.tensor([100.0, 1000.0])])
    o("x.grad", x.grad)


@program
def spec_grad_wrt_sibling_output(torch, o):
    def forward(ctx, x):
        return x * 2, x * 3
    def backward(ctx, g1, g2):
        return g1 + g2
    Fn = _fn(torch, forward, backward, name="Sibling")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    o.raises("sibling", lambda: torch.autograd.grad(a.sum(), b),
             "appears to not have been used in the graph")


@program
def spec_grad_wrt_function_output_skips_backward(torch, o):
    calls = []
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        calls.append(1)
        return g
    Fn = _fn(torch, forward, backward, name="Skip")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    g, = torch.autograd.grad((y * y).sum(), y)
    o("g", g)
    o("calls", calls)


@program
def spec_zero_size_and_scalar(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        o("g shape", g.shape)
        return g * 2
    Fn = _fn(torch, forward, backward, name="Empty")
    x = torch.ones(0, 3, requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)
    s = torch.tensor(3.0, requires_grad=True)
    Fn.apply(s).backward()
    o("s.grad", s.grad)


@program
def spec_grad_shape_scalar_from_one_elem(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g.reshape(1, 1)
    Fn = _fn(torch, forward, backward, name="OneElem")
    x = torch.tensor(2.0, requires_grad=True)
    o.raises("1x1 for scalar", lambda: Fn.apply(x).backward(), None)
    o("x.grad", x.grad)


@program
def spec_once_differentiable_returns_none(torch, o):
    od = torch.autograd.function.once_differentiable
    def forward(ctx, x, y):
        return x * y
    def backward(ctx, g):
        o("enabled", torch.is_grad_enabled())
        return None, g * 2
    Fn = type("OnceNone", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                      "backward": staticmethod(od(backward))})
    x = torch.tensor([1.0], requires_grad=True)
    y = torch.tensor([1.0], requires_grad=True)
    z = Fn.apply(x, y)
    gx, gy = torch.autograd.grad((z * z).sum(), [x, y], create_graph=True, allow_unused=True)
    o("gx", gx)
    o("gy", gy)
    o("gy grad_fn", node_name(gy.grad_fn))


@program
def spec_once_differentiable_grads_no_requires(torch, o):
    od = torch.autograd.function.once_differentiable
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g * 2
    Fn = type("OnceNoReq", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                       "backward": staticmethod(od(backward))})
    x = torch.tensor([1.0], requires_grad=True)
    g, = torch.autograd.grad(Fn.apply(x).sum(), x, create_graph=True)
    o("g", g)
    o("g grad_fn", node_name(g.grad_fn))


@program
def spec_backward_grad_outputs_requires_grad_create_graph(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    def backward(ctx, g):
        o("g rg", g.requires_grad)
        o("enabled", torch.is_grad_enabled())
        x, = ctx.saved_tensors
        o("x rg", x.requires_grad)
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="CG")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    v = torch.tensor([1.0, 1.0], requires_grad=True)
    g, = torch.autograd.grad(y, x, v, create_graph=True)
    o("g", g)
    gv, = torch.autograd.grad(g.sum(), v)
    o("gv", gv)


@program
def spec_saved_output_in_double_backward(torch, o):
    def forward(ctx, x):
        y = x * x
        ctx.save_for_backward(x, y)
        return y
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        o("y grad_fn", node_name(y.grad_fn))
        o("y rg", y.requires_grad)
        return g * y / x * 2
    Fn = _fn(torch, forward, backward, name="SavedOut")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    gg, = torch.autograd.grad(g.sum(), x)
    o("gg", gg)


@program
def spec_saved_intermediate_rg(torch, o):
    def forward(ctx, x):
        w = x * 3
        ctx.save_for_backward(w)
        return w * 2
    def backward(ctx, g):
        w, = ctx.saved_tensors
        o("w rg", w.requires_grad)
        o("w grad_fn", w.grad_fn)
        return g * 6
    Fn = _fn(torch, forward, backward, name="SavedMid")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    o("x.grad", x.grad)


# ---- anomaly mode, setup_context marks, func transforms, gradcheck, module hooks ---------------

@program
def spec_anomaly_nan_from_backward(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g * float("nan")
    Fn = _fn(torch, forward, backward, name="NanBack")
    x = torch.tensor([1.0], requires_grad=True)
    def run():
        with torch.autograd.detect_anomaly():
            Fn.apply(x).sum().backward()
    o.warns("anomaly warns", lambda: o.raises("nan", run, "returned nan values in its 0th output"))


@program
def spec_anomaly_error_in_backward(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        raise ValueError("boom in backward")
    Fn = _fn(torch, forward, backward, name="BoomBack")
    x = torch.tensor([1.0], requires_grad=True)
    def run():
        with torch.autograd.detect_anomaly():
            y = Fn.apply(x)
            y.sum().backward()
    o.warns("warn", lambda: o.raises("boom", run, "boom in backward"))


@program
def spec_setup_context_marks(torch, o):
    def forward(x, y):
        x.add_(1)
        return x, y.argsort(), y * 2
    def setup_context(ctx, inputs, output):
        x, y = inputs
        a, idx, b = output
        o("output type", type(output).__name__)
        ctx.mark_dirty(x)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
    def backward(ctx, ga, gidx, gb):
        o("gidx", gidx)
        return ga, gb * 2
    Fn = _fn(torch, forward, backward, name="SetupMarks", setup_context=setup_context)
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf * 1
    y = torch.tensor([3.0, 1.0], requires_grad=True)
    a, idx, b = Fn.apply(x, y)
    o("a is x", a is x)
    o("idx rg", idx.requires_grad)
    (a.sum() + b.sum()).backward()
    o("leaf.grad", leaf.grad)
    o("y.grad", y.grad)


@program
def spec_save_for_forward_none_and_empty(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(None)
        return x * 2
    def jvp(ctx, t):
        o("saved in jvp", ctx.saved_tensors)
        return t * 2
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="SffNone", jvp=jvp)
    def forward2(ctx, x):
        ctx.save_for_backward(x)
        return x * 2
    Fn2 = _fn(torch, forward2, backward, name="SffEmpty", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0]), torch.tensor([1.0]))
        Fn.apply(x)
        Fn2.apply(x)


@program
def spec_jacrev_jacfwd_over_function(torch, o):
    def forward(x):
        return x.sin()
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos()
    def jvp(ctx, t):
        x, = ctx.saved_tensors
        return t * x.cos()
    Fn = _fn(torch, forward, backward, name="SinF", setup_context=setup_context, jvp=jvp,
             generate_vmap_rule=True)
    x = torch.tensor([0.1, 0.5, 1.0])
    o("jacrev", torch.func.jacrev(Fn.apply)(x))
    o("jacfwd", torch.func.jacfwd(Fn.apply)(x))
    o("vjp", torch.func.vjp(Fn.apply, x)[1](torch.ones(3)))
    o("hessian", torch.func.hessian(lambda t: Fn.apply(t).sum())(x))


@program
def spec_gradcheck_function(torch, o):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x * x * g
    Fn = _fn(torch, forward, backward, name="CubeGC")
    x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    o("gradcheck", torch.autograd.gradcheck(Fn.apply, (x,)))
    o("gradgradcheck", torch.autograd.gradgradcheck(Fn.apply, (x,)))
    def bad_backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g
    Bad = _fn(torch, forward, bad_backward, name="CubeBad")
    o.raises("bad", lambda: torch.autograd.gradcheck(Bad.apply, (x,)),
             "Jacobian mismatch for output 0 with respect to input 0")


@program
def spec_backward_called_with_grad_outputs_dtype(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        o("g dtype", g.dtype)
        return g
    Fn = _fn(torch, forward, backward, name="GoDtype")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    y.backward(torch.tensor([1.0, 1.0], dtype=torch.float64))
    o("x.grad", x.grad)
    y2 = Fn.apply(x)
    o.raises("int grad", lambda: y2.backward(torch.tensor([1, 1])), None)


@program
def spec_function_with_int_tensor_input_needing_grad_false(torch, o):
    def forward(ctx, x, idx):
        ctx.save_for_backward(idx)
        return x[idx]
    def backward(ctx, g):
        idx, = ctx.saved_tensors
        out = torch.zeros(4)
        out.index_add_(0, idx, g)
        return out, torch.ones(2)
    Fn = _fn(torch, forward, backward, name="Gather")
    x = torch.arange(4.0, requires_grad=True)
    idx = torch.tensor([1, 3])
    Fn.apply(x, idx).sum().backward()
    o("x.grad", x.grad)


@program
def spec_materialize_set_in_backward(torch, o):
    def forward(ctx, x):
        return x * 2, x * 3
    def backward(ctx, g1, g2):
        ctx.set_materialize_grads(False)
        o("g2", g2)
        return g1
    Fn = _fn(torch, forward, backward, name="MatLate")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    a.sum().backward(retain_graph=True)
    a.sum().backward()
    o("x.grad", x.grad)


@program
def spec_custom_function_in_module_full_backward_hook(torch, o):
    log = []
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        log.append("fn backward")
        return g * 2
    Fn = _fn(torch, forward, backward, name="InModule")
    class M(torch.nn.Module):
        def forward(self, x):
            return Fn.apply(x)
    m = M()
    m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", go[0].tolist())))
    m.register_full_backward_hook(
        lambda mod, gi, go: log.append(("full", gi[0].tolist(), go[0].tolist())))
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    m(x).sum().backward()
    o("log", log)
    o("x.grad", x.grad)


# ---- who may see or change a gradient tensor (aliasing in the input buffers) -------------------

@program
def spec_returned_grad_kept_not_mutated(torch, o):
    kept = []
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        r = g * 2
        kept.append(r)
        return r
    Fn = _fn(torch, forward, backward, name="Keeps")
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    h = leaf * 1
    seen = []
    h.register_hook(lambda g: seen.append(g))
    (Fn.apply(h).sum() + (h * 10).sum()).backward()
    o("kept", kept)
    o("seen", seen)
    o("leaf.grad", leaf.grad)
    o("leaf.grad is kept", leaf.grad is kept[0])


@program
def spec_user_gradient_not_mutated(torch, o):
    def forward(ctx, x):
        return x
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="PassG")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    g = torch.tensor([1.0, 1.0])
    y = Fn.apply(x)
    y.backward(g, retain_graph=True)
    o("x.grad is g", x.grad is g)
    y.backward(g)
    o("g", g)
    o("x.grad", x.grad)


@program
def spec_grad_outputs_same_tensor_twice(torch, o):
    def forward(ctx, x):
        return x * 2, x * 3
    def backward(ctx, g1, g2):
        o("same", g1 is g2)
        g1.add_(1)
        return g1 + g2
    Fn = _fn(torch, forward, backward, name="SameGo")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Fn.apply(x)
    g = torch.tensor([1.0, 1.0])
    torch.autograd.backward([a, b], [g, g])
    o("g", g)
    o("x.grad", x.grad)


@program
def spec_backward_mutates_grad_output_inplace(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        g.mul_(3)
        return g
    Fn = _fn(torch, forward, backward, name="MutG")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    seen = []
    y.register_hook(lambda g: seen.append(g))
    y.retain_grad()
    (y * 1).sum().backward()
    o("seen", seen)
    o("y.grad", y.grad)
    o("x.grad", x.grad)


@program
def spec_grad_accumulates_into_existing_grad(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="Acc")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Fn.apply(x).sum().backward()
    first = x.grad
    Fn.apply(x).sum().backward()
    o("same object", x.grad is first)
    o("x.grad", x.grad)
    Fn.apply(x).sum().backward(create_graph=True)
    o("after create_graph same", x.grad is first)
    o("x.grad rg", x.grad.requires_grad)


# ---- execution order across several Functions, re-entrant backward -----------------------------

def _logging_fn(torch, name, log, k=2.0):
    """A Function ``k * xs[0] + xs[1] + ...`` whose backward appends ``name`` to ``log``."""
    def forward(ctx, *xs):
        out = xs[0] * k
        for t in xs[1:]:
            out = out + t
        return out

    def backward(ctx, g):
        log.append(name)
        return (g * k,) + (g,) * (len(ctx.needs_input_grad) - 1)

    return _fn(torch, forward, backward, name=name)


@program
def spec_execution_order_diamond(torch, o):
    log = []
    A = _logging_fn(torch, "A", log)
    B = _logging_fn(torch, "B", log)
    C = _logging_fn(torch, "C", log)
    D = _logging_fn(torch, "D", log)
    E = _logging_fn(torch, "E", log)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a = A.apply(x)
    b = B.apply(a)
    c = C.apply(a)
    d = D.apply(b, c)
    e = E.apply(x)
    x.register_hook(lambda g: log.append(("x hook", g.tolist())))
    a.register_hook(lambda g: log.append("a hook"))
    (d.sum() + e.sum() + c.sum()).backward()
    o("order", log)
    o("x.grad", x.grad)


@program
def spec_execution_order_two_roots(torch, o):
    log = []
    A = _logging_fn(torch, "A2", log)
    B = _logging_fn(torch, "B2", log)
    x = torch.tensor([1.0], requires_grad=True)
    b = B.apply(x)
    a = A.apply(x)
    torch.autograd.backward([a.sum(), b.sum()])
    log.append("--")
    a = A.apply(x)
    b = B.apply(x)
    torch.autograd.backward([b.sum(), a.sum()])
    o("order", log)


@program
def spec_reentrant_backward_in_function(torch, o):
    log = []
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()
    def backward(ctx, g):
        x, = ctx.saved_tensors
        log.append("outer start")
        with torch.enable_grad():
            xd = x.detach().requires_grad_()
            inner = Inner.apply(xd)
            inner.sum().backward()
        log.append("outer end")
        return g * xd.grad
    def ifwd(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()
    def ibwd(ctx, g):
        log.append("inner")
        x, = ctx.saved_tensors
        return g * x.cos()
    Inner = _fn(torch, ifwd, ibwd, name="InnerRe")
    Outer = _fn(torch, forward, backward, name="OuterRe")
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    y = Outer.apply(x)
    z = x * 3
    z.register_hook(lambda g: log.append("z hook"))
    (y.sum() + z.sum()).backward()
    o("log", log)
    o("x.grad", x.grad)


# ---- a bool gradient; forward AD through dirty, identity and non-tensor outputs ----------------

@program
def spec_grad_bool_for_float(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g > 0
    Fn = _fn(torch, forward, backward, name="BoolGrad")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("bool", lambda: Fn.apply(x).sum().backward(), None)
    o("x.grad", x.grad)


@program
def spec_jvp_dirty_input(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x
    def jvp(ctx, t):
        t.mul_(2)
        return t
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="JDirty", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
        y = Fn.apply(x)
        o("y is x", y is x)
        o("primal", fwAD.unpack_dual(y).primal)
        o("tangent", fwAD.unpack_dual(y).tangent)


@program
def spec_jvp_dirty_input_new_tangent(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x
    def jvp(ctx, t):
        return t * 2
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="JDirty2", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
        o.raises("new tangent", lambda: Fn.apply(x), None)


@program
def spec_jvp_identity_output(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        return x
    def jvp(ctx, t):
        return t
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="JId", jvp=jvp)

    def jvp_view(ctx, t):
        return t.view_as(t)

    FnView = _fn(torch, forward, backward, name="JIdView", jvp=jvp_view)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
        o.raises("not a view", lambda: Fn.apply(x), "but the jvp is not returning a view")
        y = FnView.apply(x)
        o("y is x", y is x)
        o("tangent", fwAD.unpack_dual(y).tangent)


@program
def spec_jvp_non_tensor_output(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        return x * 2, "tag"
    def jvp(ctx, t):
        return t * 2, None
    def backward(ctx, g, gs):
        return g
    Fn = _fn(torch, forward, backward, name="JTag", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
        y, tag = Fn.apply(x)
        o("tag", tag)
        o("tangent", fwAD.unpack_dual(y).tangent)


@program
def spec_jvp_wrong_dtype(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        return x * 2
    def jvp(ctx, t):
        return (t * 2).double()
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="JDtype", jvp=jvp)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
        o.raises("dtype", lambda: fwAD.unpack_dual(Fn.apply(x)).tangent, None)


@program
def spec_jvp_and_backward_together(torch, o):
    fwAD = torch.autograd.forward_ad
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x * x
    def jvp(ctx, t):
        x, = ctx.saved_tensors
        return 2 * x * t
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="JBoth", jvp=jvp)
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        x = fwAD.make_dual(p, torch.tensor([1.0, 3.0]))
        y = Fn.apply(x)
        o("tangent", fwAD.unpack_dual(y).tangent)
        y.sum().backward()
    o("p.grad", p.grad)


# ---- materialized zeros for identity, dirty, odd-dtype outputs; printing; edges ----------------

@program
def spec_materialize_for_identity_and_dirty(torch, o):
    def forward(ctx, x, y):
        y.mul_(2)
        ctx.mark_dirty(y)
        return x, y, x * 3
    def backward(ctx, gx, gy, gz):
        o("gx", gx)
        o("gy", gy)
        o("gz", gz)
        return gx + 3 * gz, gy * 2
    Fn = _fn(torch, forward, backward, name="MatMix")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    leaf = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = leaf * 1
    a, b, c = Fn.apply(x, y)
    c.sum().backward(retain_graph=True)
    b.sum().backward(retain_graph=True)
    a.sum().backward()
    o("x.grad", x.grad)
    o("leaf.grad", leaf.grad)


@program
def spec_materialize_dtype_shape_of_outputs(torch, o):
    def forward(ctx, x):
        return x.double().reshape(1, 2), x.half(), (x > 1)
    def backward(ctx, g1, g2, g3):
        o("g1", g1)
        o("g2", g2)
        o("g3", g3)
        return g2.float()
    Fn = _fn(torch, forward, backward, name="MatDt")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b, c = Fn.apply(x)
    o("c rg", c.requires_grad)
    b.float().sum().backward()
    o("x.grad", x.grad)


@program
def spec_materialize_noncontig_output(torch, o):
    def forward(ctx, x):
        return x.t() * 1, x * 2
    def backward(ctx, g1, g2):
        o("g1 stride", g1.stride())
        o("g1", g1)
        return g1.t() + g2 * 2
    Fn = _fn(torch, forward, backward, name="MatNC")
    x = torch.ones(2, 3, requires_grad=True)
    a, b = Fn.apply(x)
    o("a stride", a.stride())
    b.sum().backward()
    o("x.grad", x.grad)



@program
def spec_printing_function_outputs(torch, o):
    def forward(ctx, x):
        return x * 2, x.argmax()
    def backward(ctx, g, gi):
        return g
    Fn = _fn(torch, forward, backward, name="Printed")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, i = Fn.apply(x)
    o("str a", str(a))
    o("str i", str(i))
    o("repr a", repr(a))
    o("node repr head", repr(a.grad_fn).split(" object")[0])
    o("node type module", type(a.grad_fn).__module__)


@program
def spec_next_functions_with_mixed_inputs(torch, o):
    def forward(ctx, a, k, b, c, d):
        return a * k + b + c + d
    def backward(ctx, g):
        return g, None, g, g, g
    Fn = _fn(torch, forward, backward, name="Edges")
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([1.0])
    c = torch.tensor([1.0], requires_grad=True) * 2
    with torch.no_grad():
        d = torch.tensor([1.0], requires_grad=True) * 2
    y = Fn.apply(a, 3, b, c, d)
    o("edges", [(node_name(n), nr) for n, nr in y.grad_fn.next_functions])


# ---- vmap rules: several outputs, constants, None in_dims, nesting; func.grad ------------------

@program
def spec_vmap_generate_multi_out_and_constants(torch, o):
    def forward(x, y, k):
        return x * y * k, x + y
    def setup_context(ctx, inputs, output):
        x, y, k = inputs
        ctx.k = k
        ctx.save_for_backward(x, y)
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        return g1 * y * ctx.k + g2, g1 * x * ctx.k + g2, None
    Fn = _fn(torch, forward, backward, name="GenMulti", setup_context=setup_context,
             generate_vmap_rule=True)
    x = torch.arange(6.0).reshape(3, 2)
    y = torch.tensor([1.0, 2.0])
    a, b = torch.vmap(Fn.apply, in_dims=(0, None, None))(x, y, 3.0)
    o("a", a)
    o("b", b)
    batched = torch.vmap(Fn.apply, in_dims=(1, None, None), out_dims=(1, 0))
    a, b = batched(x.t().contiguous(), y, 2.0)
    o("a2", a)
    o("b2", b)
    def loss(t):
        p, q = Fn.apply(t, y, 3.0)
        return (p * q).sum()
    o("per-sample grads", torch.vmap(torch.func.grad(loss))(x))


@program
def spec_vmap_rule_with_none_in_dims(torch, o):
    def forward(x, y):
        return x * y
    def setup_context(ctx, inputs, output):
        pass
    def backward(ctx, g):
        return g, g
    def vmap(info, in_dims, x, y):
        o("in_dims", in_dims)
        xd, yd = in_dims
        if xd is None:
            return x * y.movedim(yd, 0), 0
        return x.movedim(xd, 0) * y, 0
    Fn = _fn(torch, forward, backward, name="NoneDims", setup_context=setup_context, vmap=vmap)
    o("r", torch.vmap(Fn.apply, in_dims=(None, 0))(torch.tensor([1.0, 2.0]), torch.ones(3, 2)))


@program
def spec_vmap_nested(torch, o):
    def forward(x):
        return x * x
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g
    Fn = _fn(torch, forward, backward, name="NestedV", setup_context=setup_context,
             generate_vmap_rule=True)
    x = torch.arange(12.0).reshape(2, 3, 2)
    o("r", torch.vmap(torch.vmap(Fn.apply))(x))


@program
def spec_func_grad_non_tensor_output(torch, o):
    def forward(x):
        return x.sin(), 5
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
    def backward(ctx, g, gk):
        o("gk", gk)
        x, = ctx.saved_tensors
        return g * x.cos()
    Fn = _fn(torch, forward, backward, name="GradTag", setup_context=setup_context)
    x = torch.tensor([0.1, 0.2])
    g = torch.func.grad(lambda t: Fn.apply(t)[0].sum())(x)
    o("g", g)


# ---- what forward returns: parameters, detached tensors, leaves, tensors with history ----------

@program
def spec_parameter_returned_as_is(torch, o):
    def forward(ctx, p):
        return p
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="ParamOut")
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    y = Fn.apply(p)
    o("type", type(y).__name__)
    o("y is p", y is p)
    y.sum().backward()
    o("p.grad", p.grad)


@program
def spec_detached_output(torch, o):
    def forward(ctx, x):
        return x.detach()
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="DetOut")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    o("grad_fn", node_name(y.grad_fn))
    o("is view", y._is_view())
    y.sum().backward()
    o("x.grad", x.grad)


@program
def spec_leaf_requiring_grad_made_in_forward(torch, o):
    made = []
    def forward(ctx, x):
        w = torch.ones(2, requires_grad=True)
        made.append(w)
        return w
    def backward(ctx, g):
        return g * 2
    Fn = _fn(torch, forward, backward, name="NewRG")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    o.raises("apply", lambda: Fn.apply(x), None)


@program
def spec_output_with_history_from_enable_grad_not_diff(torch, o):
    def forward(ctx, x):
        with torch.enable_grad():
            y = x * 2
        ctx.mark_non_differentiable(y)
        return y
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="HistND")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Fn.apply(x)
    o("rg", y.requires_grad)
    o("grad_fn", y.grad_fn)
    o("leaf", y.is_leaf)


@program
def spec_function_under_no_grad_then_enable_in_forward(torch, o):
    def forward(ctx, x):
        with torch.enable_grad():
            y = x * 2
        o("inner rg", y.requires_grad)
        return y
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="NoGradEnable")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        y = Fn.apply(x)
    o("rg", y.requires_grad)
    o("grad_fn", node_name(y.grad_fn))
    o("leaf", y.is_leaf)


@program
def spec_function_inference_mode_input_outside(torch, o):
    def forward(ctx, x):
        return x * 2
    def backward(ctx, g):
        return g
    Fn = _fn(torch, forward, backward, name="InfOut")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.inference_mode():
        y = Fn.apply(x)
        o("inside rg", y.requires_grad)
        o("inside is_inference", y.is_inference())
    o.raises("inplace on inference", lambda: y.add_(1),
             "Inplace update to inference tensor outside InferenceMode")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
