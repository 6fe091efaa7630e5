"""``gradcheck`` / ``gradgradcheck``: second derivatives of every op family, verdicts that agree
with torch's on right and wrong custom Functions, and the error message."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gradviz

rng = np.random.default_rng(7)


def normal(*shape):
    return rng.standard_normal(shape)


def positive(*shape):
    return rng.uniform(0.5, 2.0, size=shape)


def away(*shape):
    return rng.uniform(0.3, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def distinct(*shape):
    return rng.permutation(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape) * 0.3


F = "nn.functional"
# (id, program(m, *tensors), inputs): one or more per op family of tests/ops/test_ops_vs_torch.py
PROGRAMS = [
    ("add_broadcast", lambda m, a, b: (a + b) * a, (normal(2, 3), normal(3))),
    ("sub_alpha", lambda m, a, b: m.sub(a, b, alpha=2.0) ** 2, (normal(3), normal(3))),
    ("mul", lambda m, a, b: a * b * b, (normal(2, 1), normal(1, 3))),
    ("div", lambda m, a, b: a / b, (normal(3), away(3))),
    ("pow_tensor", lambda m, a, b: a ** b, (positive(3), normal(3))),
    ("pow_scalar_rpow", lambda m, a: a ** 3 + 2.0 ** a, (normal(4),)),
    ("exp_log", lambda m, a: a.exp() + a.log(), (positive(4),)),
    ("tanh_sigmoid", lambda m, a: m.tanh(a) * m.sigmoid(a), (normal(4),)),
    ("sin_cos", lambda m, a: a.sin() * m.cos(a), (normal(4),)),
    ("sqrt_rsqrt", lambda m, a: a.sqrt() + a.rsqrt(), (positive(3),)),
    ("abs_relu_clamp", lambda m, a: a.abs() * m.relu(a) + a.clamp(-0.5, 0.7) ** 2, (away(5),)),
    ("expm1_log1p_exp2", lambda m, a: a.expm1() * a.log1p() + m.exp2(a), (positive(3),)),
    ("log2_log10_erf", lambda m, a: a.log2() + a.log10() * m.erf(a), (positive(3),)),
    ("sum_mean_dims", lambda m, a: (a * a).sum(1, keepdim=True) * (a * a).mean(0), (normal(2, 3),)),
    ("matmul_mm", lambda m, a, b: (a @ b) * (a @ b).sum(), (normal(2, 3), normal(3, 2))),
    ("matmul_batched", lambda m, a, b: (a @ b).tanh(), (normal(2, 2, 3), normal(3, 2))),
    ("mv_dot", lambda m, a, b: m.mv(a, b) * m.dot(b, b), (normal(2, 3), normal(3))),
    ("reshape_view", lambda m, a: a.reshape(3, 2) * a.view(3, 2), (normal(2, 3),)),
    ("transpose_permute", lambda m, a: a.transpose(0, 2).exp() * a.permute(2, 1, 0), (normal(2, 2, 2),)),
    ("squeeze_unsqueeze_expand", lambda m, a: a.unsqueeze(0).expand(2, 1, 3).squeeze(1) ** 2, (normal(1, 3),)),
    ("indexing", lambda m, a: a[1:, ::2] ** 2 + a[0, 1] * a[m.tensor([0, 0, 1])].sum(), (normal(2, 3),)),
    ("index_bool", lambda m, a: a[a > 0] ** 3, (away(2, 3),)),
    ("clone_neg_double", lambda m, a: (-a).clone().double() * a, (normal(3),)),
    ("maximum_minimum", lambda m, a, b: m.maximum(a, b) * m.minimum(a, b), (distinct(4), distinct(4) + 0.1)),
    ("where", lambda m, a, b: m.where(a > 0, a * b, b ** 2), (away(3), normal(3))),
    ("prod", lambda m, a: a.prod(1), (positive(2, 3),)),
    ("max_min", lambda m, a: a.max(1).values * a.amin(0).sum(), (distinct(2, 3),)),
    ("var_std", lambda m, a: a.var(1) + a.std(0).sum(), (normal(3, 3),)),
    ("norm", lambda m, a: a.norm() + a.norm(dim=1).sum(), (normal(2, 3),)),
    ("logsumexp", lambda m, a: a.logsumexp(1), (normal(2, 3),)),
    ("cumsum", lambda m, a: a.cumsum(1) ** 2, (normal(2, 3),)),
    ("softmax_log_softmax", lambda m, a: a.softmax(1) * a.log_softmax(0), (normal(2, 3),)),
    ("activations", lambda m, a: (m.nn.functional.softplus(a) + m.nn.functional.gelu(a)
                                  + m.nn.functional.silu(a) + m.nn.functional.elu(a)
                                  + m.nn.functional.leaky_relu(a, 0.2) * a), (away(4),)),
    ("gelu_tanh", lambda m, a: m.nn.functional.gelu(a, approximate="tanh"), (normal(4),)),
    ("cat_stack", lambda m, a, b: m.cat([a, b], 0) ** 2 * m.stack([a, a], 0).sum(0).sum(), (normal(1, 2), normal(2, 2))),
    ("split_chunk_narrow", lambda m, a: a.split(2, 1)[1] ** 2 + a.chunk(2, 1)[0].narrow(1, 0, 1), (normal(2, 4),)),
    ("select_unbind_flip", lambda m, a: a.select(1, 0) * a.unbind(1)[1] * a.flip(0)[:, 2], (normal(2, 3),)),
    ("gather_scatter", lambda m, a, b: a.gather(1, m.tensor([[0, 2], [1, 1]])) ** 2
     + a.scatter_add(1, m.tensor([[0, 0], [2, 1]]), b)[:, :2] * b, (normal(2, 3), normal(2, 2))),
    ("index_select_add", lambda m, a, b: a.index_select(0, m.tensor([1, 0, 1])).sum(0) ** 2
     * a.index_add(1, m.tensor([0, 2, 0]), b).sum(), (normal(2, 3), normal(2, 3))),
    ("masked_fill_sort_topk", lambda m, a: a.masked_fill(a > 0.5, -1.0) ** 2
     + a.sort(1).values * a.topk(3).values, (distinct(2, 3),)),
    ("custom_function", lambda m, a: CUBE[m].apply(a) * a, (normal(3),)),
    ("chain_mix", lambda m, a: (m.tanh(a @ a.t()) + a.sum(1, keepdim=True)).sigmoid().mean(), (normal(3, 4),)),
]


def _cube(m):
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    return Cube


CUBE = {gradviz: _cube(gradviz), torch: _cube(torch)}


def _inputs(m, arrays):
    return tuple(m.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays)


@pytest.mark.parametrize("name, program, arrays", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_gradgradcheck_of_built_in_ops(name, program, arrays):
    inputs = _inputs(gradviz, arrays)
    assert gradviz.autograd.gradcheck(lambda *t: program(gradviz, *t), inputs)
    assert gradviz.autograd.gradgradcheck(lambda *t: program(gradviz, *t), inputs)


# ---- verdicts agree with torch -----------------------------------------------------------

def make_function(m, kind):
    class Fn(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            if kind == "correct":
                return g * 2 * x * w, g * x * x
            if kind == "factor":
                return g * x * w, g * x * x
            if kind == "swapped":
                return g * x * x, g * 2 * x * w
            if kind == "missing_reduction":  # broadcast w, but sums the wrong axis away
                return g * 2 * x * w, (g * x * x).sum(1, keepdim=True).expand(2, 3)[:1]
            if kind == "detached":  # right first derivative, wrong second
                return (g * 2 * x * w).detach(), (g * x * x).detach()
            raise AssertionError(kind)

    return Fn


@pytest.mark.parametrize("kind, first_ok, second_ok", [
    ("correct", True, True), ("factor", False, True), ("swapped", False, True),
    ("missing_reduction", False, True), ("detached", True, False),
])
def test_verdicts_agree_with_torch(kind, first_ok, second_ok):
    """gradgradcheck differentiates the backward as written, so a consistently wrong first
    derivative can pass it (in both frameworks)."""
    arrays = (normal(2, 3), normal(1, 3))
    for m in (torch, gradviz):
        fn = make_function(m, kind)
        inputs = _inputs(m, arrays)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = m.autograd.gradcheck(fn.apply, inputs, raise_exception=False)
            second = m.autograd.gradgradcheck(fn.apply, inputs, raise_exception=False)
        assert (first, second) == (first_ok, second_ok), m.__name__


def test_failure_message_names_output_input_and_worst_entries():
    fn = make_function(gradviz, "factor")
    inputs = _inputs(gradviz, (normal(2, 3), normal(1, 3)))
    with pytest.raises(gradviz.autograd.GradcheckError) as info:
        gradviz.autograd.gradcheck(fn.apply, inputs)
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert message.startswith("Jacobian mismatch for output 0 with respect to input 0,")
    assert "6 of 36 entries" in message and "input index" in message
    assert "0.5 times the numerical one" in message
    assert len(message.splitlines()) < 15  # the worst entries, not two full Jacobians


def test_input_positions_count_non_tensor_arguments():
    class Scale(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, factor, x):
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return None, g  # forgets the factor

    x = gradviz.tensor(normal(3), requires_grad=True)
    with pytest.raises(gradviz.autograd.GradcheckError, match="with respect to input 1,"):
        gradviz.autograd.gradcheck(Scale.apply, (2.0, x))


def test_argument_errors_and_warnings_match_torch():
    for m in (gradviz, torch):
        with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
            m.autograd.gradcheck(lambda t: t * 2, (m.tensor([1.0], dtype=m.float64),))
        with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double"):
            m.autograd.gradcheck(lambda t: t * 2, (m.tensor([1.0], requires_grad=True),),
                                 raise_exception=False)


def test_non_differentiable_output_that_changes_is_reported():
    class Leaky(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x * 2
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = gradviz.tensor(normal(3), requires_grad=True)
    with pytest.raises(gradviz.autograd.GradcheckError, match="expected to be zero"):
        gradviz.autograd.gradcheck(Leaky.apply, (x,))
