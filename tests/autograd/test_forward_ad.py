"""Forward-mode AD (gradviz.autograd.forward_ad) against torch.autograd.forward_ad."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import gradviz
import gradviz.autograd.forward_ad as gfw

RNG = np.random.default_rng(0)

# (name, program over (module, x, y), shapes): every program is run by both libraries
PROGRAMS = [
    ("add_broadcast", lambda m, x, y: x + y[0], (3, 2)),
    ("sub_alpha", lambda m, x, y: m.sub(x, y, alpha=2), (3, 2)),
    ("mul_div", lambda m, x, y: x * y / (y * y + 1), (3, 2)),
    ("rsub_rdiv", lambda m, x, y: 2 - x + 3 / (x * x + 1), (3, 2)),
    ("neg_pow", lambda m, x, y: (-x) ** 3 + x ** y.abs(), (3, 2)),
    ("unary", lambda m, x, y: x.exp() + x.sin() * x.cos() + x.tanh() + x.sigmoid() + x.relu(), (3, 2)),
    ("log_sqrt", lambda m, x, y: (x.abs() + 1).log() + (x.abs() + 1).sqrt() + (x.abs() + 1).reciprocal(), (3, 2)),
    ("matmul", lambda m, x, y: x @ y.t(), (3, 2)),
    ("mv_dot", lambda m, x, y: m.mv(x, y[0]) + m.dot(x[0], y[1]), (3, 2)),
    ("sum_mean", lambda m, x, y: x.sum() + x.sum(0) .sum() + x.mean(1).sum() + x.mean(), (3, 2)),
    ("views", lambda m, x, y: x.t().reshape(6)[1:4] + x.unsqueeze(0).squeeze(0).flatten()[:3], (3, 2)),
    ("permute_expand", lambda m, x, y: x.permute(1, 0).unsqueeze(0).expand(2, 2, 3) * 2, (3, 2)),
    ("softmax", lambda m, x, y: m.softmax(x, 1) + m.log_softmax(x, 0), (3, 2)),
    ("reductions", lambda m, x, y: x.amax(0) + x.var(0) + x.std(1).sum() + x.logsumexp(0) + x.prod(0), (3, 2)),
    ("max_min", lambda m, x, y: x.max(1).values.sum() + x.min() + m.maximum(x, y).sum(), (3, 2)),
    ("cumsum_flip", lambda m, x, y: x.cumsum(0).flip(0) * y, (3, 2)),
    ("cat_stack", lambda m, x, y: m.cat([x, y], 0).sum(0) + m.stack([x, y], 2).sum((0, 2)), (3, 2)),
    ("where_clamp", lambda m, x, y: m.where(x > 0, x * y, y) + x.clamp(-0.5, 0.5), (3, 2)),
    ("gather_index", lambda m, x, y: x.gather(1, m.tensor([[0], [1], [0]])).sum() + x[m.tensor([2, 0])].sum(), (3, 2)),
    ("sort_topk", lambda m, x, y: x.sort(1).values * 2 + x.topk(1, 0).values.sum(), (3, 2)),
    ("to_double", lambda m, x, y: (x.double() * 2).float() + x, (3, 2)),
    ("norm_erf", lambda m, x, y: x.norm() + m.erf(x).sum() + m.expm1(x).sum() + m.log1p(x.abs()).sum(), (3, 2)),
    ("getitem_split", lambda m, x, y: x[1] * x[:, 0].sum() + m.split(x, 1, 0)[2].sum(), (3, 2)),
    ("masked_fill", lambda m, x, y: x.masked_fill(x > 0.2, 0.0) + x.index_select(0, m.tensor([0, 0, 1])), (3, 2)),
]


def _run(module, fw, program, x, tx, y, ty):
    with fw.dual_level():
        dx = fw.make_dual(module.tensor(x), module.tensor(tx))
        dy = fw.make_dual(module.tensor(y), module.tensor(ty))
        out = program(module, dx, dy)
        primal, tangent = fw.unpack_dual(out)
        return primal.detach().numpy().copy(), tangent.detach().numpy().copy()


@pytest.mark.parametrize("name,program,shape", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_ops_tangents_match_torch(name, program, shape):
    x, tx, y, ty = (RNG.standard_normal(shape).astype(np.float32) for _ in range(4))
    gp, gt = _run(gradviz, gfw, program, x, tx, y, ty)
    tp, tt = _run(torch, tfw, program, x, tx, y, ty)
    np.testing.assert_allclose(gp, tp, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gt, tt, rtol=1e-4, atol=1e-5)


def test_levels_and_errors_match_torch():
    x = gradviz.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no level exists"):
        gfw.make_dual(x, x)
    with gfw.dual_level() as level:
        assert level == 0
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            gfw.enter_dual_level()
        with pytest.raises(RuntimeError, match="different size than that of the original Tensor"):
            gfw.make_dual(x, gradviz.ones(3))
        with pytest.raises(ValueError, match="Expected primal to be floating point"):
            gfw.make_dual(gradviz.tensor([1, 2]), x)
        with pytest.raises(ValueError, match="Expected tangent to be floating point"):
            gfw.make_dual(x, gradviz.tensor([1, 2]))
        tangent = gradviz.ones(2)
        dual = gfw.make_dual(x, tangent)
        with pytest.raises(RuntimeError, match="already has a forward gradient at the same level 0"):
            gfw.make_dual(dual, tangent)
        unpacked = gfw.unpack_dual(dual)
        assert unpacked.tangent is tangent and unpacked[1] is tangent
        assert unpacked.primal is not dual and gfw.unpack_dual(unpacked.primal).tangent is None
        assert gfw.unpack_dual(x).tangent is None
        assert gfw.unpack_dual(dual.detach()).tangent is None
        assert gfw.unpack_dual(dual.argmax()).tangent is None
        y = dual * 3
    assert gfw.unpack_dual(dual).tangent is None and gfw.unpack_dual(y).tangent is None
    with pytest.raises(RuntimeError, match="Dual level must be a positive number"):
        gfw.exit_dual_level()
    level = gfw.enter_dual_level()
    with pytest.raises(RuntimeError, match="not the last one that was created"):
        gfw.exit_dual_level(level=level + 1)
    gfw.exit_dual_level(level=level)
    assert gfw.UnpackedDualTensor._fields == ("primal", "tangent")


def _inplace_program(m, fw):
    w = m.tensor([1.0, 2.0, 3.0])
    dw = fw.make_dual(w, m.tensor([1.0, 0.0, 0.0]))
    dw.mul_(3)
    v = m.zeros(3)
    v[0] = dw[0]
    view = dw[1:]
    view.add_(dw[:2].clone() * 2)
    z = m.zeros(3)
    z.copy_(dw)
    z.zero_()
    return [fw.unpack_dual(t) for t in (dw, v, view, z)]


def test_inplace_and_views_match_torch():
    with gfw.dual_level():
        ours = [(u.primal.tolist(), u.tangent.tolist()) for u in _inplace_program(gradviz, gfw)]
    with tfw.dual_level():
        theirs = [(u.primal.tolist(), u.tangent.tolist()) for u in _inplace_program(torch, tfw)]
    assert ours == theirs


def test_tangent_is_differentiable_and_backward_still_works():
    for module, fw in ((gradviz, gfw), (torch, tfw)):
        a = module.tensor([1.0, 2.0], requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(a, module.ones(2))
            z = (d * d).sum()
            tangent = fw.unpack_dual(z).tangent
            assert tangent.requires_grad
            z.backward()
        assert a.grad.tolist() == [2.0, 4.0]


def _spec_example(m, fw):
    class Func(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
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
    t = m.tensor(1., dtype=m.double)
    b = m.tensor(2., requires_grad=True, dtype=m.double)
    c = 4
    with fw.dual_level():
        a_dual = fw.make_dual(a, t)
        d = Func.apply(a_dual, b, c)
        primal, tangent = fw.unpack_dual(d)
        d.backward()
        return primal.item(), tangent.item(), a.grad.item(), b.grad.item()


def test_spec_example_000_matches_torch():
    assert _spec_example(gradviz, gfw) == _spec_example(torch, tfw) == (8.0, 8.0, 8.0, 4.0)


def _custom_programs(m, fw):
    seen = []

    class OnlyBackwardSaved(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def jvp(ctx, x_t):
            seen.append(("saved", len(ctx.saved_tensors)))
            return x_t * 2

        @staticmethod
        def backward(ctx, g):
            return g

    class Materialize(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k, materialize):
            ctx.set_materialize_grads(materialize)
            return x + y

        @staticmethod
        def jvp(ctx, x_t, y_t, k_t, flag_t):
            seen.append(("tangents", None if y_t is None else y_t.tolist(), k_t, flag_t))
            return x_t

        @staticmethod
        def backward(ctx, g):
            return g, g, None, None

    class NonDiff(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            index = m.tensor([1, 0])
            ctx.mark_non_differentiable(index)
            return x.clone(), index, 3

        @staticmethod
        def jvp(ctx, x_t):
            return x_t * 2, None, None

        @staticmethod
        def backward(ctx, g, gi, g3):
            return g

    class SetupStyle(m.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def jvp(ctx, x_t):
            (x,) = ctx.saved_tensors
            return x_t * x.cos()

        @staticmethod
        def backward(ctx, g):
            return g

    results = []
    with fw.dual_level():
        dual = fw.make_dual(m.tensor([0.5, 1.0]), m.tensor([1.0, 3.0]))
        results.append(fw.unpack_dual(OnlyBackwardSaved.apply(dual)).tangent.tolist())
        for materialize in (True, False):
            results.append(fw.unpack_dual(Materialize.apply(dual, m.ones(2), 5, materialize)).tangent.tolist())
        out, index, three = NonDiff.apply(dual)
        results.append((fw.unpack_dual(out).tangent.tolist(), fw.unpack_dual(index).tangent, three))
        results.append(np.round(fw.unpack_dual(SetupStyle.apply(dual)).tangent.numpy(), 5).tolist())
        plain = OnlyBackwardSaved.apply(m.ones(2))  # no dual input: jvp is not called
        results.append(fw.unpack_dual(plain).tangent)
    return results, seen


def test_custom_function_jvp_contract_matches_torch():
    assert _custom_programs(gradviz, gfw) == _custom_programs(torch, tfw)


def _custom_errors(m, fw):
    class NoJvp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    class TwoOut(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone(), x.clone()

        @staticmethod
        def jvp(ctx, x_t):
            return x_t

        @staticmethod
        def backward(ctx, g1, g2):
            return g1

    class IntOut(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone(), m.tensor([1, 0])

        @staticmethod
        def jvp(ctx, x_t):
            return x_t, m.ones(2)

        @staticmethod
        def backward(ctx, g, gi):
            return g

    class BadShape(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def jvp(ctx, x_t):
            return x_t

        @staticmethod
        def backward(ctx, g):
            return g

    messages = []
    with fw.dual_level():
        dual = fw.make_dual(m.ones(2), m.ones(2))
        NoJvp.apply(m.ones(2))  # fine without dual inputs
        for fn, kind in ((NoJvp, NotImplementedError), (TwoOut, RuntimeError),
                         (IntOut, RuntimeError), (BadShape, RuntimeError)):
            with pytest.raises(kind) as info:
                fn.apply(dual)
            messages.append(str(info.value).split(". ")[0])
    return messages


def test_custom_function_jvp_errors_match_torch():
    ours, theirs = _custom_errors(gradviz, gfw), _custom_errors(torch, tfw)
    assert ours[0] == theirs[0] == ("You must implement the jvp function for custom "
                                    "autograd.Function to use it with forward mode AD.")
    assert ours[1] == theirs[1] == ("Function's jvp returned an invalid number of forward "
                                    "gradients (expected 2 but got 1)")
    assert ours[2] == theirs[2]
    assert ours[3] == theirs[3]


def test_no_cost_flag_is_cleared_after_the_level():
    from gradviz_ext import ops as ext_ops

    with gfw.dual_level():
        assert ext_ops._forward_ad is not None
    assert ext_ops._forward_ad is None
