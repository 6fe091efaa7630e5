"""Every op against PyTorch: forward values, first and second derivatives, several shapes
(broadcasting, size-1 and zero-size dims included), float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import run_both

import gradviz

rng = np.random.default_rng(1234)


def positive(*shape):
    return rng.uniform(0.5, 2.0, size=shape)


def normal(*shape):
    return rng.standard_normal(shape)


def away_from_zero(*shape):
    x = rng.uniform(0.3, 1.5, size=shape)
    return x * rng.choice([-1.0, 1.0], size=shape)


# (id, program, input factories) -- program(m, *tensors) runs identically in torch and gradviz
BINARY_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((1,), (2, 3)), ((), (2, 2)),
                 ((0, 3), (3,)), ((2, 3, 4), (1, 4))]

CASES = []
for sa, sb in BINARY_SHAPES:
    tag = f"{sa}x{sb}"
    CASES += [
        (f"add{tag}", lambda m, a, b: a + b, (normal(*sa), normal(*sb))),
        (f"add_alpha{tag}", lambda m, a, b: m.add(a, b, alpha=2.5), (normal(*sa), normal(*sb))),
        (f"sub{tag}", lambda m, a, b: a - b, (normal(*sa), normal(*sb))),
        (f"mul{tag}", lambda m, a, b: a * b, (normal(*sa), normal(*sb))),
        (f"div{tag}", lambda m, a, b: a / b, (normal(*sa), away_from_zero(*sb))),
        (f"pow_tensor{tag}", lambda m, a, b: a ** b, (positive(*sa), normal(*sb))),
    ]

UNARY_SHAPES = [(4,), (2, 3), (), (1, 5), (0,)]
for s in UNARY_SHAPES:
    tag = f"{s}"
    CASES += [
        (f"neg{tag}", lambda m, a: -a, (normal(*s),)),
        (f"exp{tag}", lambda m, a: a.exp(), (normal(*s),)),
        (f"log{tag}", lambda m, a: a.log(), (positive(*s),)),
        (f"tanh{tag}", lambda m, a: m.tanh(a), (normal(*s),)),
        (f"sigmoid{tag}", lambda m, a: m.sigmoid(a), (normal(*s) * 3,)),
        (f"relu{tag}", lambda m, a: m.relu(a), (away_from_zero(*s),)),
        (f"sin{tag}", lambda m, a: a.sin(), (normal(*s),)),
        (f"cos{tag}", lambda m, a: m.cos(a), (normal(*s),)),
        (f"sqrt{tag}", lambda m, a: a.sqrt(), (positive(*s),)),
        (f"abs{tag}", lambda m, a: a.abs(), (away_from_zero(*s),)),
        (f"pow_scalar{tag}", lambda m, a: a ** 3, (normal(*s),)),
        (f"pow_half{tag}", lambda m, a: a ** 0.5, (positive(*s),)),
        (f"rpow{tag}", lambda m, a: 2.0 ** a, (normal(*s),)),
        (f"rsub{tag}", lambda m, a: 1.5 - a, (normal(*s),)),
        (f"rdiv{tag}", lambda m, a: 2.0 / a, (away_from_zero(*s),)),
        (f"scalar_mix{tag}", lambda m, a: (a * 2 + 1) / 3 - 0.5, (normal(*s),)),
        (f"clamp{tag}", lambda m, a: a.clamp(-0.5, 0.7), (normal(*s),)),
        (f"clone{tag}", lambda m, a: a.clone() * a, (normal(*s),)),
        (f"sum{tag}", lambda m, a: a.sum(), (normal(*s),)),
        (f"mean{tag}", lambda m, a: (a * a).mean(), (normal(*s) if s != (0,) else normal(1),)),
    ]

REDUCE_SHAPES = [((2, 3), 0), ((2, 3), 1), ((2, 3, 4), (0, 2)), ((2, 3), -1), ((1, 4), 0), ((3, 0), 1)]
for s, dim in REDUCE_SHAPES:
    for keepdim in (False, True):
        tag = f"{s}_dim{dim}_keep{keepdim}"
        CASES += [
            (f"sum{tag}", lambda m, a, d=dim, k=keepdim: (a * a).sum(d, keepdim=k), (normal(*s),)),
            (f"mean{tag}", lambda m, a, d=dim, k=keepdim: (a * a).mean(d, keepdim=k), (normal(*s),)),
        ]

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3, 4)),
                 ((5, 2, 3), (5, 3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((3,), (5, 3, 4)),
                 ((5, 2, 3), (3,)), ((1, 2, 3), (4, 3, 2)), ((0, 3), (3, 2))]
for sa, sb in MATMUL_SHAPES:
    CASES.append((f"matmul{sa}@{sb}", lambda m, a, b: (a @ b) * (a @ b).sum(), (normal(*sa), normal(*sb))))

SHAPE_CASES = [
    ("reshape", lambda m, a: (a.reshape(3, 2) * a.reshape(3, 2)), ((2, 3),)),
    ("reshape_infer", lambda m, a: a.reshape(-1) ** 2, ((2, 3),)),
    ("view", lambda m, a: a.view(6) * 3, ((2, 3),)),
    ("view_tuple", lambda m, a: a.view((3, 2)).sin(), ((2, 3),)),
    ("reshape_noncontiguous", lambda m, a: a.t().reshape(6) ** 2, ((2, 3),)),
    ("transpose", lambda m, a: a.transpose(0, 2).exp(), ((2, 3, 4),)),
    ("t", lambda m, a: a.t() @ a, ((2, 3),)),
    ("T", lambda m, a: a.T * a.T, ((2, 3),)),
    ("permute", lambda m, a: a.permute(2, 0, 1) ** 2, ((2, 3, 4),)),
    ("unsqueeze", lambda m, a: a.unsqueeze(1) * a.unsqueeze(0), ((3,),)),
    ("squeeze", lambda m, a: a.squeeze() ** 2, ((1, 3, 1),)),
    ("squeeze_dim", lambda m, a: a.squeeze(0) ** 2, ((1, 3),)),
    ("expand", lambda m, a: a.expand(4, 3) ** 2, ((1, 3),)),
    ("expand_new_dim", lambda m, a: a.expand(2, 3) * m.tensor([[1.0], [2.0]], dtype=a.dtype), ((3,),)),
    ("flatten", lambda m, a: a.flatten() ** 2, ((2, 3, 2),)),
    ("index_int", lambda m, a: a[1] ** 2, ((3, 4),)),
    ("index_negative", lambda m, a: a[-1, 2] * a[0, 0], ((3, 4),)),
    ("index_slice", lambda m, a: a[1:3] ** 2, ((4, 2),)),
    ("index_step", lambda m, a: a[::2, 1:] ** 2, ((5, 3),)),
    ("index_mixed", lambda m, a: a[0, 1:] * 2, ((3, 4),)),
    ("index_none_ellipsis", lambda m, a: a[None, ..., 1] ** 2, ((2, 3, 4),)),
    ("index_tensor", lambda m, a: a[m.tensor([0, 2, 0])] ** 2, ((3, 2),)),
    ("index_bool", lambda m, a: a[a > 0] ** 2, ((3, 4),)),
    ("index_repeated_accumulates", lambda m, a: a[[1, 1, 2]].sum() * a[1], ((3,),)),
    ("to_double", lambda m, a: a.double() * a.double(), ((3,),)),
    ("to_float", lambda m, a: a.float() ** 2, ((3,),)),
    ("chain_mix", lambda m, a: (m.tanh(a @ a.t()) + a.sum(1, keepdim=True)).sigmoid().mean(), ((3, 4),)),
]
for name, program, shapes in SHAPE_CASES:
    CASES.append((name, program, tuple(normal(*s) for s in shapes)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_torch(case, dtype):
    name, program, arrays = case
    run_both(program, arrays, dtype=dtype, create_graph_order=2 if dtype == "float64" else 1,
             loose=name.startswith("to_float"))


def distinct(*shape):
    """Values with no ties (max/sort gradients are then unambiguous)."""
    n = int(np.prod(shape)) if shape else 1
    return (rng.permutation(n).astype(np.float64) / n + 0.1).reshape(shape)


def with_zeros(*shape):
    x = normal(*shape)
    x.reshape(-1)[::3] = 0.0
    return x


MORE_CASES = [
    ("rsqrt", lambda m, a: a.rsqrt(), (positive(3, 2),)),
    ("exp2", lambda m, a: m.exp2(a), (normal(4),)),
    ("expm1", lambda m, a: a.expm1(), (normal(4),)),
    ("log1p", lambda m, a: a.log1p(), (positive(4),)),
    ("log2", lambda m, a: a.log2(), (positive(2, 2),)),
    ("log10", lambda m, a: a.log10(), (positive(3),)),
    ("erf", lambda m, a: m.erf(a), (normal(5),)),
    ("maximum", lambda m, a, b: m.maximum(a, b), (normal(3, 4), normal(4))),
    ("minimum", lambda m, a, b: m.minimum(a, b), (normal(3, 4), normal(3, 4))),
    ("maximum_ties", lambda m, a, b: m.maximum(a, b) * a, (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0]))),
    ("where", lambda m, a, b: m.where(a > 0, a, b * 2), (normal(3, 4), normal(4))),
    ("where_scalar", lambda m, a: m.where(a > 0, a, 0.0) ** 2, (normal(5),)),
    ("prod_all", lambda m, a: a.prod(), (positive(2, 3),)),
    ("prod_dim", lambda m, a: a.prod(1), (normal(3, 4),)),
    ("prod_one_zero", lambda m, a: a.prod(1, keepdim=True), (np.array([[1.0, 0.0, 3.0], [2.0, 0.5, 4.0]]),)),
    ("prod_two_zeros", lambda m, a: a.prod(0), (np.array([[0.0, 1.0], [0.0, 2.0], [3.0, 4.0]]),)),
    ("max_all", lambda m, a: a.max(), (distinct(3, 4),)),
    ("max_all_ties", lambda m, a: a.max() * 2, (np.array([1.0, 3.0, 3.0, 2.0]),)),
    ("min_all", lambda m, a: m.min(a), (distinct(5),)),
    ("max_dim", lambda m, a: a.max(1).values, (distinct(3, 4),)),
    ("max_dim_keepdim", lambda m, a: m.max(a, 0, keepdim=True)[0], (distinct(3, 4),)),
    ("min_dim", lambda m, a: a.min(-1).values ** 2, (distinct(2, 3, 4),)),
    ("amax", lambda m, a: a.amax(1), (distinct(3, 4),)),
    ("amax_ties", lambda m, a: a.amax(0), (np.array([[1.0, 2.0], [1.0, 0.0]]),)),
    ("amin_multi", lambda m, a: m.amin(a, (0, 2)), (distinct(2, 3, 4),)),
    ("var", lambda m, a: a.var(), (normal(3, 4),)),
    ("var_dim", lambda m, a: a.var(1, keepdim=True), (normal(3, 4),)),
    ("var_correction0", lambda m, a: m.var(a, 0, correction=0), (normal(3, 4),)),
    ("std", lambda m, a: a.std(0), (normal(3, 4),)),
    ("std_unbiased_false", lambda m, a: a.std(unbiased=False), (normal(5),)),
    # a constant column has std 0: its gradient is 0 (torch masks grad / std), not 0/0 = NaN
    ("std_constant_column", lambda m, a: a.std(0) * 2, (np.array([[1.0, 2.0, -0.5], [1.0, 3.0, -0.5]]),)),
    ("std_single_element_correction0", lambda m, a: a.std(1, correction=0), (normal(3, 1),)),
    ("norm", lambda m, a: a.norm(), (normal(3, 4),)),
    ("norm_dim", lambda m, a: a.norm(dim=1), (normal(3, 4),)),
    ("norm_p1", lambda m, a: a.norm(p=1), (away_from_zero(5),)),
    ("norm_p3", lambda m, a: m.norm(a, 3, 0), (away_from_zero(3, 2),)),
    ("logsumexp", lambda m, a: a.logsumexp(1), (normal(3, 4) * 5,)),
    ("logsumexp_keepdim", lambda m, a: m.logsumexp(a, (0, 1), keepdim=True), (normal(2, 3),)),
    ("cumsum", lambda m, a: a.cumsum(1) ** 2, (normal(3, 4),)),
    ("cumsum0", lambda m, a: m.cumsum(a, 0) * a, (normal(4),)),
    ("softmax", lambda m, a: a.softmax(1), (normal(3, 4),)),
    ("softmax_dim0", lambda m, a: m.softmax(a, 0) * a, (normal(3, 4),)),
    ("log_softmax", lambda m, a: a.log_softmax(-1), (normal(3, 4) * 3,)),
    ("softplus", lambda m, a: m.nn.functional.softplus(a), (normal(6) * 5,)),
    ("softplus_beta", lambda m, a: m.nn.functional.softplus(a, beta=2.0, threshold=3.0), (normal(6) * 3,)),
    ("gelu", lambda m, a: m.nn.functional.gelu(a), (normal(6),)),
    ("gelu_tanh", lambda m, a: m.nn.functional.gelu(a, approximate="tanh"), (normal(6),)),
    ("leaky_relu", lambda m, a: m.nn.functional.leaky_relu(a, 0.2) * a, (away_from_zero(6),)),
    ("elu", lambda m, a: m.nn.functional.elu(a), (away_from_zero(6),)),
    ("silu", lambda m, a: m.nn.functional.silu(a), (normal(6),)),
    ("cat", lambda m, a, b: m.cat([a, b, a], 0) ** 2, (normal(2, 3), normal(1, 3))),
    ("cat_dim1", lambda m, a, b: m.cat((a, b), dim=1).sin(), (normal(2, 3), normal(2, 1))),
    ("stack", lambda m, a, b: m.stack([a, b], 1) * 2, (normal(2, 3), normal(2, 3))),
    ("split", lambda m, a: a.split(2, 1)[1] ** 2, (normal(3, 5),)),
    ("split_sections", lambda m, a: a.split([1, 3], 0)[1].exp(), (normal(4, 2),)),
    ("chunk", lambda m, a: a.chunk(3, 0)[2] * 3, (normal(7, 2),)),
    ("narrow", lambda m, a: a.narrow(1, 1, 2) ** 2, (normal(3, 4),)),
    ("select", lambda m, a: a.select(1, -1) * a.select(0, 0).sum(), (normal(3, 4),)),
    ("unbind", lambda m, a: a.unbind(1)[2] * a.unbind(1)[0], (normal(3, 4),)),
    ("flip", lambda m, a: a.flip(0) * a, (normal(3, 2),)),
    ("gather", lambda m, a: a.gather(1, m.tensor([[0, 2], [1, 1], [3, 0]])) ** 2, (normal(3, 4),)),
    ("gather_dim0", lambda m, a: m.gather(a, 0, m.tensor([[2, 0, 1, 1]])), (normal(3, 4),)),
    ("scatter_add", lambda m, a, b: a.scatter_add(1, m.tensor([[0, 0], [2, 1]]), b) ** 2, (normal(2, 3), normal(2, 2))),
    ("scatter_src", lambda m, a, b: a.scatter(0, m.tensor([[1, 0, 1]]), b) * 3, (normal(2, 3), normal(1, 3))),
    ("scatter_value", lambda m, a: a.scatter(1, m.tensor([[1], [0]]), 2.5) ** 2, (normal(2, 3),)),
    ("index_select", lambda m, a: a.index_select(0, m.tensor([2, 0, 2])) ** 2, (normal(3, 4),)),
    ("index_add", lambda m, a, b: a.index_add(1, m.tensor([0, 2, 0]), b) ** 2, (normal(2, 3), normal(2, 3))),
    ("masked_fill", lambda m, a: a.masked_fill(a > 0.5, -1.0) ** 2, (normal(3, 4),)),
    ("sort", lambda m, a: a.sort(1).values * m.arange(4, dtype=a.dtype), (distinct(3, 4),)),
    ("sort_descending", lambda m, a: m.sort(a, 0, descending=True)[0] ** 2, (distinct(3, 2),)),
    ("topk", lambda m, a: a.topk(2).values * 3, (distinct(3, 5),)),
    ("topk_smallest_dim0", lambda m, a: m.topk(a, 2, dim=0, largest=False)[0] ** 2, (distinct(4, 2),)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", MORE_CASES, ids=[c[0] for c in MORE_CASES])
def test_more_ops_match_torch(case, dtype):
    name, program, arrays = case
    run_both(program, arrays, dtype=dtype, create_graph_order=2 if dtype == "float64" else 1)


NON_DIFFERENTIABLE = [
    ("argmax", lambda m, a: a.argmax()),
    ("argmax_dim", lambda m, a: a.argmax(1)),
    ("argmin_keepdim", lambda m, a: m.argmin(a, 0, keepdim=True)),
    ("argsort", lambda m, a: a.argsort(1, descending=True)),
    ("max_indices", lambda m, a: a.max(1).indices),
    ("sort_indices", lambda m, a: a.sort(0)[1]),
    ("topk_indices", lambda m, a: a.topk(2, 1)[1]),
    ("comparisons", lambda m, a: (a > 0.5) & (a < 0.9) | (a == a.max())),
]


@pytest.mark.parametrize("case", NON_DIFFERENTIABLE, ids=[c[0] for c in NON_DIFFERENTIABLE])
def test_index_results_match_torch(case):
    import torch

    import gradviz

    _, program = case
    data = distinct(3, 4)
    ours = program(gradviz, gradviz.tensor(data, requires_grad=True))
    theirs = program(torch, torch.tensor(data, requires_grad=True))
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    assert not ours.requires_grad and not theirs.requires_grad
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def _connected(lib, fn, value):
    x = lib.tensor(value, dtype=lib.float64, requires_grad=True)
    (g,) = lib.autograd.grad(fn(x).sum() * 2, x, create_graph=True)
    return [g.tolist(), g.requires_grad]


@pytest.mark.parametrize("fn, value", [
    (lambda x: x.prod(), 0.7), (lambda x: x.prod(0), 0.7), (lambda x: x.prod(), [0.7]),
    (lambda x: x.cumprod(0), 0.7), (lambda x: x.cumprod(0), [0.7]), (lambda x: x.cumprod(1), [[0.7, 2.0]]),
], ids=["prod 0-d", "prod dim 0-d", "prod one element", "cumprod 0-d", "cumprod one element",
        "cumprod size-1 dims"])
def test_prod_and_cumprod_of_a_single_value_pass_the_gradient_through(fn, value):
    """torch's prod_backward returns the gradient itself for a 0-d input, cumprod_backward for
    at most one element: under create_graph it is not connected to the input (a constant
    upstream gives a gradient that does not require grad); found by the op fuzzer, seeds 1892
    and 2480."""
    got, expected = _connected(gradviz, fn, value), _connected(torch, fn, value)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    assert got[1] == expected[1]


def _cumprod_second_derivative(lib, value, dim, hooked):
    x = lib.tensor(value, dtype=lib.float64, requires_grad=True)
    y = x.cumprod(dim)
    if hooked:
        y.register_hook(lambda g: g * 0.75)
    weights = lib.tensor(np.cos(np.arange(y.numel()) * 0.7 + 0.3).reshape(tuple(y.shape)))
    (g,) = lib.autograd.grad((y * 1 * weights).sum(), x, create_graph=True)
    if not g.requires_grad:
        return [g.tolist(), None]
    (gg,) = lib.autograd.grad((g * g.detach().sin()).sum(), x, allow_unused=True)
    return [g.tolist(), None if gg is None else gg.tolist()]


@pytest.mark.parametrize("value, dim", [
    ([[0.4, -0.5], [0.25, 1.1]], 0), ([[0.4, -0.5, 2.0], [0.25, 1.1, -0.7]], 1),
    ([[0.4, 0.0, 2.0], [0.0, 1.1, -0.7]], 1), ([[0.4, -0.5, 2.0]], 0), ([0.3, 0.0, 0.0, 1.5], 0)])
@pytest.mark.parametrize("hooked", [False, True])
def test_cumprod_second_derivative_with_a_hook_on_its_output(value, dim, hooked):
    """torch's cumprod_backward is ``reversed_cumsum(result * grad) / input`` when the input has
    no zeros: the second derivative flows back through the saved result, so a hook on the
    output scales that part too; with zeros it uses the input alone; over a size-1 dim it is
    the gradient itself (found by the op fuzzer, seed 1788: cumprod, then a hook)."""
    got = _cumprod_second_derivative(gradviz, value, dim, hooked)
    expected = _cumprod_second_derivative(torch, value, dim, hooked)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12, atol=1e-14)
    assert (got[1] is None) == (expected[1] is None)
    if expected[1] is not None:
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-10, atol=1e-12)


def _norm_derivatives(lib, p, dim, fn):
    x = lib.tensor([[0.0, 0.0, 0.0], [0.5, -1.5, 2.0], [0.0, 1.0, -1.0]], dtype=lib.float64,
                   requires_grad=True)
    y = {"norm": lambda: x.norm(p=p, dim=dim), "dist": lambda: lib.dist(x, x.detach(), p),
         "vector_norm": lambda: lib.linalg.vector_norm(x, p, dim)}[fn]()
    weights = lib.tensor(np.cos(np.arange(y.numel()) + 0.3).reshape(tuple(y.shape)))
    (g,) = lib.autograd.grad((y * weights).sum(), x, create_graph=True)
    if not g.requires_grad:
        return [y.tolist(), g.tolist()]
    (gg,) = lib.autograd.grad((g * g.detach().cos()).sum(), x)
    return [y.tolist(), g.tolist(), gg.numpy(force=True).tolist()]  # torch's may be a ZeroTensor


@pytest.mark.parametrize("p", [2, 1, 3, 1.5, 0.5, -1, float("inf"), float("-inf")])
@pytest.mark.parametrize("dim, fn", [(1, "norm"), (None, "dist"), (1, "vector_norm"), ((0, 1), "norm")])
def test_norm_derivatives_at_zero_norm_match_torch(p, dim, fn):
    """torch's norm_backward masks the gradient of a zero norm after dividing by it, so its
    second derivative there is NaN (0/0), which gradviz's safe division made a zero (found by
    the op fuzzer, seeds 1327, 1873, 2300, 4787: dist of equal tensors, differentiated twice);
    NaN positions must agree too."""
    got, expected = _norm_derivatives(gradviz, p, dim, fn), _norm_derivatives(torch, p, dim, fn)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-10, atol=1e-12, equal_nan=True)


def _nan_to_num_nan_gradient(lib):
    x = lib.tensor([0.5, -1.0, 0.0, 2.0], dtype=lib.float64, requires_grad=True)
    y = lib.nan_to_num(x.log(), nan=0.5, neginf=-3.0)
    (g,) = lib.autograd.grad(y, x, lib.tensor([float("nan"), float("nan"), 1.0, 2.0], dtype=lib.float64))
    return g.tolist()


def test_nan_to_num_backward_keeps_a_nan_gradient():
    """torch's nan_to_num backward is ``grad * isfinite(self)``: a NaN gradient at a replaced
    entry stays NaN (gradviz's ``where`` made it zero; found by the op fuzzer, seed 6657)."""
    np.testing.assert_array_equal(_nan_to_num_nan_gradient(gradviz), _nan_to_num_nan_gradient(torch))
